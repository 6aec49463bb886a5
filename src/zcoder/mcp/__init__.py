"""MCP (Model Context Protocol) servers as tool providers.

``config`` reads and writes the ``[mcp.servers.NAME]`` tables of ``$ZCODER_HOME/config.toml``
(pure, no SDK); ``client`` runs one server per Trio task with the official ``mcp`` SDK and
makes its tools ``zcoder.tools.base.Tool`` objects named ``mcp__SERVER__TOOL``. ``client`` is
imported only when a server is configured, so a run without MCP never loads the SDK. This
``__init__`` imports nothing.
"""
