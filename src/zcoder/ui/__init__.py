"""The interactive terminal (prompt_toolkit lives only here)."""
