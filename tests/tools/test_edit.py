from __future__ import annotations

import os
import stat
from pathlib import Path

from .conftest import Call


def temp_files(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".zcoder-tmp")]


async def test_write_file_creates_with_parents(ws: Path, call: Call) -> None:
    result = await call("write_file", path="new/deep/a.txt", content="héllo\n")
    assert (result.ok, result.text) == (True, "Created new/deep/a.txt (7 bytes).")
    assert result.summary == "created, 7 bytes"
    assert (ws / "new" / "deep" / "a.txt").read_text() == "héllo\n"
    assert result.diff.splitlines() == [
        "--- /dev/null",
        "+++ b/new/deep/a.txt",
        "@@ -0,0 +1 @@",
        "+héllo",
    ]
    assert temp_files(ws / "new" / "deep") == []


async def test_write_file_overwrites_keeping_mode(ws: Path, call: Call) -> None:
    target = ws / "run.sh"
    target.write_text("echo old\n")
    target.chmod(0o750)
    result = await call("write_file", path="run.sh", content="echo new\n")
    assert result.text == "Overwrote run.sh (9 bytes)."
    assert target.read_text() == "echo new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert "-echo old" in result.diff.splitlines() and "+echo new" in result.diff.splitlines()
    assert temp_files(ws) == []


async def test_write_through_inside_symlink_keeps_link(ws: Path, call: Call) -> None:
    (ws / "real.txt").write_text("old")
    (ws / "alias.txt").symlink_to("real.txt")
    assert (await call("write_file", path="alias.txt", content="new")).ok
    assert (ws / "alias.txt").is_symlink()
    assert (ws / "real.txt").read_text() == "new"


async def test_write_file_refusals_change_nothing(ws: Path, call: Call) -> None:
    outside = ws.parent / "outside"
    (ws / "dangling").symlink_to("missing.txt")
    (ws / "out").symlink_to(outside / "secret.txt")
    (ws / "outdir").symlink_to(outside)
    (ws / "d").mkdir()
    (ws / "file").write_text("x")
    os.mkfifo(ws / "fifo")
    cases = {
        "dangling": "Error: refusing to write through a dangling symlink: dangling",
        "out": "Error: path escapes the workspace: out",
        "outdir/new.txt": "Error: path escapes the workspace: outdir/new.txt",
        "../outside/new.txt": "Error: path escapes the workspace: ../outside/new.txt",
        str(outside / "abs.txt"): f"Error: path escapes the workspace: {outside / 'abs.txt'}",
        "d": "Error: not a regular file: d",
        "fifo": "Error: not a regular file: fifo",
        "file/child.txt": "Error: a parent is not a directory: file/child.txt",
        "file/sub/child.txt": "Error: a parent is not a directory: file/sub/child.txt",
        "a\0b": "Error: path contains a NUL byte: 'a\\x00b'",
    }
    for raw, expected in cases.items():
        result = await call("write_file", path=raw, content="pwned")
        assert (result.ok, result.text) == (False, expected)
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not (ws / "missing.txt").exists()
    assert (ws / "file").read_text() == "x"


async def test_write_file_argument_errors(call: Call) -> None:
    result = await call("write_file", path="a.txt")
    assert (
        result.text
        == "Error: invalid arguments for write_file: missing required argument 'content'"
    )
    result = await call("write_file", path="a.txt", content=3)
    assert result.text == (
        "Error: invalid arguments for write_file: "
        "argument 'content' must be a string, got integer 3"
    )


async def test_replace_text_exactly_once(ws: Path, call: Call) -> None:
    target = ws / "a.py"
    target.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    target.chmod(0o640)
    result = await call(
        "replace_text", path="a.py", old_text="    return 2\n", new_text="    return 3\n"
    )
    assert (result.ok, result.text, result.summary) == (
        True,
        "Replaced the text at line 5 of a.py.",
        "line 5",
    )
    assert target.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert "-    return 2" in result.diff.splitlines()
    assert temp_files(ws) == []


async def test_replace_text_errors_change_nothing(ws: Path, call: Call) -> None:
    original = "a = 1\na = 1\nb = 2\n"
    (ws / "a.py").write_text(original)
    (ws / "bin").write_bytes(b"ab\x00cd")
    (ws / "latin1.txt").write_bytes(b"caf\xe9 au lait\n")
    cases = [
        ({"path": "a.py", "old_text": "c = 3", "new_text": "x"},
         "Error: old_text not found in a.py; read the file again and copy the exact lines, "
         "including indentation and blank lines"),
        ({"path": "a.py", "old_text": "a = 1", "new_text": "x"},
         "Error: old_text matches 2 times in a.py; include more surrounding lines so that it "
         "matches exactly once"),
        ({"path": "a.py", "old_text": "b = 2", "new_text": "b = 2"},
         "Error: old_text and new_text are the same: nothing to replace"),
        ({"path": "a.py", "old_text": "", "new_text": "x"},
         "Error: invalid arguments for replace_text: argument 'old_text' must not be empty"),
        ({"path": "nope.py", "old_text": "a", "new_text": "b"}, "Error: no such file: nope.py"),
        ({"path": "bin", "old_text": "ab", "new_text": "x"}, "Error: binary file: bin"),
        ({"path": "latin1.txt", "old_text": "caf", "new_text": "x"},
         "Error: file is not valid UTF-8 (byte 3), refusing to edit it: latin1.txt"),
        ({"path": "../outside/secret.txt", "old_text": "top", "new_text": "x"},
         "Error: path escapes the workspace: ../outside/secret.txt"),
    ]  # fmt: skip
    for arguments, expected in cases:
        result = await call("replace_text", arguments)
        assert (result.ok, result.text) == (False, expected)
    assert (ws / "a.py").read_text() == original
    assert (ws.parent / "outside" / "secret.txt").read_text() == "top secret\n"


async def test_replace_text_overlapping_matches_count(ws: Path, call: Call) -> None:
    (ws / "a.txt").write_text("aaa")
    result = await call("replace_text", path="a.txt", old_text="aa", new_text="b")
    assert result.text.startswith("Error: old_text matches 2 times in a.txt")


async def test_replace_text_keeps_crlf(ws: Path, call: Call) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await call("replace_text", path="w.txt", old_text="one\ntwo\n", new_text="1\n2\n")
    assert result.ok
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"
