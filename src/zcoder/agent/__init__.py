"""The agent: model clients, the turn loop and its guards."""

import sys

# httpx's ``__init__`` tries to import its command-line client (``httpx._main``), which
# imports click and Pygments' lexer table before it fails without ``rich``: about 25 modules
# and 2 MB that zcoder never uses. A ``None`` entry makes that import fail at once, and httpx
# then defines its fallback ``main`` (docs/architecture.rst, "Imported late"). Only when
# httpx is not loaded yet: then nothing else can have relied on ``httpx._main``.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
