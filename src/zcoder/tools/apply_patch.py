"""The apply_patch tool: a unified diff over one or more files, all or nothing.

Every file is confined, read and patched in memory first; only when every hunk of every file
applies are the new contents staged as temp files and moved into place (deletions last). A
bad hunk anywhere leaves every file untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from zcoder.errors import ToolError
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from zcoder.tools.edit import make_parents
from zcoder.tools.files import commit_staged, decode_text, discard_staged, read_regular, stage_write
from zcoder.tools.output import short_diff
from zcoder.tools.patch import FilePatch, TextFile, apply_file_patch, parse_patch
from zcoder.tools.workspace import display, is_inside, writable_file

__all__ = ["APPLY_PATCH"]


@attrs.define
class _Change:
    shown: str
    before: TextFile | None
    after: TextFile | None
    added: int = 0
    removed: int = 0
    unlink: Path | None = None  # what a deletion removes: a symlink itself, not its target


def _load(path: Path, shown: str) -> TextFile | None:
    if not path.exists():
        return None
    return TextFile.from_text(decode_text(read_regular(path, shown), shown, strict=True))


def _named(workspace: Path, path: Path, shown: str) -> Path:
    """The entry ``shown`` names: the symlink itself when it is one (in a workspace
    directory), else the canonical ``path``. Deleting a link must not delete its target."""
    root = os.path.realpath(workspace)
    lexical = os.path.join(root, shown)
    parent = os.path.realpath(os.path.dirname(lexical))
    named = os.path.join(parent, os.path.basename(lexical))
    return Path(named) if os.path.islink(named) and is_inside(parent, root) else path


def _plan(workspace: Path, patches: list[FilePatch]) -> dict[Path, _Change]:
    changes: dict[Path, _Change] = {}
    for patch in patches:
        if patch.old_path and patch.new_path and patch.old_path != patch.new_path:
            raise ToolError(
                f"renaming is not supported ({patch.old_path} -> {patch.new_path}); patch the "
                "file in place, then move it with run_command"
            )
        shown = patch.new_path or patch.old_path or ""
        path = writable_file(workspace, shown)
        if path not in changes:
            before = _load(path, shown)
            changes[path] = _Change(display(workspace, path), before, before)
        change = changes[path]
        change.after = apply_file_patch(change.after, patch, shown)
        if change.after is None:
            change.unlink = _named(workspace, path, shown)
            change.shown = display(workspace, change.unlink)
        change.added += sum(hunk.added for hunk in patch.hunks)
        change.removed += sum(hunk.removed for hunk in patch.hunks)
    return changes


def _commit(changes: dict[Path, _Change]) -> None:
    staged: list[tuple[Path, Path]] = []
    try:
        for path, change in changes.items():
            if change.after is not None and change.after != change.before:
                make_parents(path, change.shown)
                staged.append((stage_write(path, change.after.to_text().encode()), path))
    except OSError as exc:
        discard_staged(staged)
        raise ToolError(
            f"cannot write the patched files (nothing changed): {exc.strerror}"
        ) from None
    except BaseException:
        discard_staged(staged)
        raise
    commit_staged(staged)
    for path, change in changes.items():
        if change.after is None and change.before is not None:
            os.unlink(change.unlink or path)


def _describe(change: _Change) -> str:
    if change.after is None:
        return f"deleted {change.shown}"
    verb = "created" if change.before is None else "modified"
    return f"{verb} {change.shown} (+{change.added} -{change.removed})"


def _apply_sync(ctx: ToolContext, text: str) -> ToolResult:
    changes = _plan(ctx.workspace, parse_patch(text))
    _commit(changes)
    report = [_describe(change) for change in changes.values()]
    diffs = [
        short_diff(
            c.shown,
            c.before.to_text() if c.before else None,
            c.after.to_text() if c.after else None,
        )
        for c in changes.values()
    ]
    return ToolResult(
        text="Applied the patch:\n" + "\n".join(f"  {line}" for line in report),
        summary=f"{len(changes)} file" + ("s" if len(changes) != 1 else ""),
        diff="\n".join(d for d in diffs if d),
    )


async def _apply_patch(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    return await trio.to_thread.run_sync(_apply_sync, ctx, args["patch"])


APPLY_PATCH = Tool(
    ToolSpec(
        name="apply_patch",
        description=(
            "Apply a unified diff to one or more files. For each file write '--- a/PATH' and "
            "'+++ b/PATH' lines (PATH relative to the workspace; '--- /dev/null' to create a "
            "file, '+++ /dev/null' to delete one), then '@@ -START,COUNT +START,COUNT @@' "
            "hunks whose lines start with ' ' (unchanged), '-' (removed) or '+' (added). "
            "Copy the unchanged and removed lines exactly from the current file, with about "
            "three unchanged lines around each change. If any hunk does not match, nothing "
            "is changed."
        ),
        parameters={
            "type": "object",
            "properties": {
                "patch": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The unified diff text.",
                }
            },
            "required": ["patch"],
        },
    ),
    _apply_patch,
)
