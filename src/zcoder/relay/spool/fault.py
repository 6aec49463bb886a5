"""What a spool operation raises when the file system refuses it, and whether the spool is
still the one ``Spool.create`` laid out.

A refusal is one of two kinds, told apart by looking at the layout after the failure:

* *damaged*: the spool root, ``inbox/``, ``processing/``, ``done/`` or ``quarantine/`` is no
  longer our own real directory, or ``state``/``sequence`` is no longer a regular file
  (something replaced or removed them). The spool cannot be trusted: the relay must stop;
* otherwise *storage*: the layout is intact but the disk is full, read-only or out of
  inodes. The operation failed; the relay may go on (the next write may succeed).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from zcoder.errors import SpoolFault

__all__ = ["SPOOL_DIRS", "SpoolFault", "classify", "layout_problem"]

SPOOL_DIRS = ("inbox", "processing", "done", "quarantine")
_FILES = ("sequence", "state")


def layout_problem(root: Path) -> str:
    """Why the spool at ``root`` is not the layout ``create`` made, or ``""``. A few
    ``lstat`` calls; a symlink counts as damage."""
    uid = os.geteuid()
    for name in ("", *SPOOL_DIRS):
        path = root / name if name else root
        label = f"{name}/" if name else "its root"
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return f"the relay spool's {label} is missing"
        except OSError as exc:
            return f"the relay spool's {label} cannot be examined: {exc.strerror}"
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            return f"the relay spool's {label} is not our own directory any more"
    for name in _FILES:
        try:
            st = os.lstat(root / name)
        except FileNotFoundError:
            continue  # written again on the next change
        except OSError as exc:
            return f"the relay spool's {name} file cannot be examined: {exc.strerror}"
        if not stat.S_ISREG(st.st_mode):
            return f"the relay spool's {name} file is not a regular file any more"
    return ""


def classify(exc: OSError, root: Path, doing: str) -> SpoolFault:
    """The fault for ``exc`` raised while ``doing`` (``"cannot store ..."``)."""
    cause = exc.strerror or str(exc)
    problem = layout_problem(root)
    if problem:
        return SpoolFault(f"{problem} ({doing}: {cause})", damaged=True)
    return SpoolFault(f"{doing}: {cause}", damaged=False)
