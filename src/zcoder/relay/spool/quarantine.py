"""Setting aside what does not belong in a spool: ``quarantine/`` and the reports to show.

An entry that fails a claim's checks, a file with a name outside the grammar and anything
but a regular file in ``processing/`` is moved to ``quarantine/<name>`` (kept for a look,
never read again) and reported once, as one line for the user, never for the model. When
the quarantine itself is unusable the entry is removed instead: it must not stay queued.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from zcoder.relay.envelope import Limits
from zcoder.relay.spool.entry import ENTRY_NAME_RE, InvalidEntry, read_entry

__all__ = ["BAD_NAME", "Quarantine", "is_regular", "planted"]

BAD_NAME = "its name is not <sequence>-<message-id>.json"
NOT_A_FILE = "it is not a regular file"


def is_regular(path: Path) -> bool:
    """A regular file, or nothing there any more; ``False`` for anything else."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def planted(name: str) -> str:
    return f"something other than a message was planted in the relay spool: processing/{name}"


class Quarantine:
    """``quarantine/`` of one spool and the reports since the last ``take_problems``."""

    def __init__(self, directory: Path, on_change: Callable[[], None]) -> None:
        self.directory = directory
        self._on_change = on_change
        self._problems: list[str] = []
        # Inbox names that this spool did not write but read_entry passed, or that could
        # not be removed: looked at once, not on every sweep.
        self.vetted: set[str] = set()

    def put(self, path: Path, reason: str) -> None:
        """Move ``path`` here (or remove it) and report it; nothing if it is gone."""
        try:
            os.rename(path, self.directory / path.name)
        except FileNotFoundError:
            return  # another claimer dealt with it
        except OSError:
            reason = f"{reason} (removed: the quarantine is unusable)"
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
            except OSError as exc:
                self.vetted.add(path.name)
                reason = f"{reason.removesuffix(')')}, and it cannot be removed: {exc.strerror})"
        self._problems.append(f"relay spool entry {path.name!r} was quarantined: {reason}")
        self._on_change()

    def take_problems(self) -> list[str]:
        problems, self._problems = self._problems, []
        return problems

    def sweep_inbox(
        self, inbox: Path, names: Iterable[str], ours: set[str], limits: Limits
    ) -> None:
        """Quarantine each of ``names`` that is not ``ours`` and has a bad name or fails
        ``read_entry``; each name is read once."""
        for name in names:
            if name in ours or name in self.vetted:
                continue
            found = ENTRY_NAME_RE.fullmatch(name)
            path = inbox / name
            if found is None:
                self.put(path, BAD_NAME)
                continue
            try:
                read_entry(path, found.group(2), limits)
            except InvalidEntry as exc:
                self.put(path, str(exc))
                continue
            self.vetted.add(name)

    def sweep_processing(self, processing: Path, names: Iterable[str], ours: set[str]) -> str:
        """Quarantine whatever is not ``ours`` and not a regular file; the first such
        name (damage), or ``""``."""
        found = ""
        for name in names:
            if name not in ours and not is_regular(processing / name):
                self.put(processing / name, NOT_A_FILE)
                found = found or name
        return found
