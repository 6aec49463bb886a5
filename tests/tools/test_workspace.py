from __future__ import annotations

import os
from pathlib import Path

import pytest

from zcoder.errors import WorkspaceError
from zcoder.tools.workspace import (
    display,
    existing_dir,
    existing_file,
    is_inside,
    resolve,
    writable_file,
)


def refused(fn: object, ws: Path, raw: str) -> str:
    assert callable(fn)
    with pytest.raises(WorkspaceError) as info:
        fn(ws, raw)
    return str(info.value)


def test_relative_and_absolute_inside(ws: Path) -> None:
    (ws / "src").mkdir()
    assert resolve(ws, "src") == ws / "src"
    assert resolve(ws, ".") == ws
    assert resolve(ws, "src/../src/./new.txt") == ws / "src" / "new.txt"
    assert resolve(ws, str(ws / "src")) == ws / "src"
    assert display(ws, ws / "src" / "a.py") == "src/a.py"
    assert display(ws, ws) == "."


@pytest.mark.parametrize("raw", ["..", "../outside/secret.txt", "src/../../x", "/etc/passwd", "/"])
def test_escapes_are_refused(ws: Path, raw: str) -> None:
    (ws / "src").mkdir()
    assert refused(resolve, ws, raw) == f"path escapes the workspace: {raw}"


def test_sibling_with_common_prefix_is_outside(ws: Path) -> None:
    sibling = ws.parent / (ws.name + "2")
    sibling.mkdir()
    assert not is_inside(str(sibling), str(ws))
    assert refused(resolve, ws, str(sibling)) == f"path escapes the workspace: {sibling}"


def test_symlinks_out_are_refused(ws: Path) -> None:
    outside = ws.parent / "outside"
    (ws / "link").symlink_to(outside / "secret.txt")
    (ws / "dirlink").symlink_to(outside)
    assert refused(existing_file, ws, "link") == "path escapes the workspace: link"
    assert refused(resolve, ws, "dirlink/secret.txt") == (
        "path escapes the workspace: dirlink/secret.txt"
    )
    assert refused(writable_file, ws, "dirlink/new.txt") == (
        "path escapes the workspace: dirlink/new.txt"
    )


def test_symlink_inside_is_followed(ws: Path) -> None:
    (ws / "real.txt").write_text("x")
    (ws / "alias").symlink_to("real.txt")
    assert existing_file(ws, "alias") == ws / "real.txt"
    assert writable_file(ws, "alias") == ws / "real.txt"


def test_dangling_symlinks_refused_for_writes(ws: Path) -> None:
    (ws / "dangling").symlink_to("nowhere.txt")
    (ws / "danglingdir").symlink_to("nodir")
    assert refused(writable_file, ws, "dangling") == (
        "refusing to write through a dangling symlink: dangling"
    )
    assert refused(writable_file, ws, "danglingdir/x.txt") == (
        "refusing to write through a dangling symlink: danglingdir/x.txt"
    )
    assert refused(existing_file, ws, "dangling") == "no such file: dangling"


def test_dangling_symlink_pointing_out_is_an_escape(ws: Path) -> None:
    (ws / "out").symlink_to("/nonexistent/zcoder-test")
    assert refused(writable_file, ws, "out") == "path escapes the workspace: out"


def test_nul_and_empty(ws: Path) -> None:
    assert refused(resolve, ws, "a\0b") == "path contains a NUL byte: 'a\\x00b'"
    assert refused(resolve, ws, "") == 'path is empty (use "." for the workspace root)'


def test_kinds(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "f").write_text("x")
    os.mkfifo(ws / "fifo")
    assert refused(existing_file, ws, "d") == "not a regular file: d"
    assert refused(existing_file, ws, "fifo") == "not a regular file: fifo"
    assert refused(existing_file, ws, "missing") == "no such file: missing"
    assert refused(existing_file, ws, "f/x") == "no such file (a parent is not a directory): f/x"
    assert refused(existing_dir, ws, "f") == "not a directory: f"
    assert refused(existing_dir, ws, "nodir") == "no such directory: nodir"
    assert refused(writable_file, ws, "d") == "not a regular file: d"
    assert refused(writable_file, ws, "fifo") == "not a regular file: fifo"
    assert writable_file(ws, "new/deep/file.txt") == ws / "new" / "deep" / "file.txt"


def test_symlink_loop(ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    assert refused(existing_file, ws, "a").startswith("cannot use a: Too many levels")
    assert refused(writable_file, ws, "a") == "refusing to write through a dangling symlink: a"


@pytest.mark.parametrize("raw", ["f/", "f/.", "d/f/..", "new/", "."])
def test_a_file_path_may_not_end_like_a_directory(ws: Path, raw: str) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f").write_text("x")
    (ws / "f").write_text("x")
    assert refused(writable_file, ws, raw) == f"not a regular file: {raw}"
    assert refused(existing_file, ws, raw) == f"not a regular file: {raw}"
