"""The subcommands of the ``zcoder`` command line: ``zcoder agents`` (the live instances),
``zcoder config`` (each effective setting and where it came from) and ``zcoder mcp``
(managing MCP servers). Each reads its own arguments and prints its own output; ``cli``
dispatches on the first word. Not the slash commands typed in the app (``commands``).
"""
