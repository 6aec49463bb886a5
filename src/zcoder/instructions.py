"""Project instructions: the AGENTS.md chain that goes into the system prompt.

Order, broadest first: the global ``$ZCODER_HOME/AGENTS.md``, then ``AGENTS.md`` in each
directory from the git root (the nearest ancestor of the workspace holding ``.git``) down to
the workspace itself; without a git root only the workspace's own file. The merged text is
capped at 32 KiB (UTF-8) and cut with a visible marker. Files that cannot be read as text are
skipped: instructions are advice, never a reason to fail a turn.
"""

from __future__ import annotations

from pathlib import Path

import attrs

__all__ = [
    "CUT_MARKER",
    "INSTRUCTIONS_CAP",
    "INSTRUCTIONS_FILE",
    "InstructionFile",
    "find_git_root",
    "instruction_paths",
    "load_instructions",
    "merge_instructions",
]

INSTRUCTIONS_FILE = "AGENTS.md"
INSTRUCTIONS_CAP = 32 * 1024
CUT_MARKER = "\n[... project instructions cut: over the 32 KiB limit ...]"


@attrs.frozen
class InstructionFile:
    path: Path
    text: str


def find_git_root(workspace: Path) -> Path | None:
    """The nearest directory at or above ``workspace`` that holds ``.git`` (dir or file)."""
    for directory in (workspace, *workspace.parents):
        if (directory / ".git").exists():
            return directory
    return None


def instruction_paths(home: Path, workspace: Path) -> list[Path]:
    """Candidate files, broadest first (they need not exist)."""
    root = find_git_root(workspace) or workspace
    chain = [workspace, *workspace.parents]
    dirs = list(reversed(chain[: chain.index(root) + 1]))
    return [home / INSTRUCTIONS_FILE, *(d / INSTRUCTIONS_FILE for d in dirs)]


def _read(path: Path) -> str | None:
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            # Read only a little past the cap: a huge file must not cost a huge read.
            data = fh.read(INSTRUCTIONS_CAP + 1)
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace").strip()
    return text or None


def merge_instructions(files: list[InstructionFile], cap: int = INSTRUCTIONS_CAP) -> str:
    """Join the files with a source header each, cut to ``cap`` UTF-8 bytes with a marker."""
    merged = "\n\n".join(f"# From {f.path}\n{f.text}" for f in files)
    data = merged.encode("utf-8")
    if len(data) <= cap:
        return merged
    room = cap - len(CUT_MARKER.encode("utf-8"))
    return data[:room].decode("utf-8", errors="ignore") + CUT_MARKER


def load_instructions(home: Path, workspace: Path) -> str:
    """The merged instructions, or ``""`` when there are none."""
    files: list[InstructionFile] = []
    seen: set[Path] = set()
    for path in instruction_paths(home, workspace):
        key = path.resolve() if path.exists() else path
        text = _read(path)
        if text is not None and key not in seen:
            seen.add(key)
            files.append(InstructionFile(path, text))
    return merge_instructions(files)
