"""A model server of zcoder's own for ``--gguf FILE``: llama.cpp's server (the ``local``
extra, xllamacpp) in a child process for one run, stopped on every way out.

``gguf`` reads the file's trained context (pure), ``child`` is the process that runs the
server, ``process`` starts and stops it (``local_server``, the context manager ``cli.main``
wraps both modes in; ``signals`` while it starts), ``watch`` is the run's model client
around it: a server that died is said as such and started again once.
"""

from zcoder.localserver.process import EXTRA_MISSING, extra_missing, local_server, window_for

__all__ = ["EXTRA_MISSING", "extra_missing", "local_server", "window_for"]
