"""zcoder: a terminal coding agent for local models, with a same-host inter-agent relay."""

__version__ = "0.1.0"
__all__ = ["__version__"]
