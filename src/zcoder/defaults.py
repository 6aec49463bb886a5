"""Default model and host: import-free, so ``--version`` and ``--help`` stay fast."""

__all__ = ["DEFAULT_HOST", "DEFAULT_MODEL"]

DEFAULT_MODEL = "qwen3-coder:latest"
DEFAULT_HOST = "http://127.0.0.1:11434"
