"""Input history kept across runs in ``$ZCODER_HOME/history`` (private, bounded).

One JSON string per line, so multi-line prompts survive intact. The file is created 0600
(prompts can hold secrets), trimmed to the newest ``MAX_ENTRIES`` when loaded, and a
broken line is skipped rather than losing the rest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit.history import History

__all__ = ["MAX_ENTRIES", "PromptHistory"]

MAX_ENTRIES = 1000


class PromptHistory(History):
    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__()

    def _read(self) -> list[str]:
        try:
            raw = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        entries: list[str] = []
        for line in raw.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, str) and value:
                entries.append(value)
        return entries

    def load_history_strings(self) -> Iterable[str]:
        entries = self._read()
        if len(entries) > MAX_ENTRIES:
            entries = entries[-MAX_ENTRIES:]
            self._write("w", entries)
        return list(reversed(entries))  # newest first, as prompt_toolkit expects

    def store_string(self, string: str) -> None:
        self._write("a", [string])

    def _write(self, mode: str, entries: list[str]) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
        flags |= os.O_APPEND if mode == "a" else os.O_TRUNC
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, flags, 0o600)
            with os.fdopen(fd, mode, encoding="utf-8") as f:
                f.writelines(json.dumps(e) + "\n" for e in entries)
        except OSError:
            pass  # history is a convenience: never fail a prompt over it
