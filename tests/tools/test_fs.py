from __future__ import annotations

import os
from pathlib import Path

import pytest

import zcoder.tools.files
from zcoder.tools.base import ToolContext
from zcoder.tools.files import MAX_FILE_BYTES
from zcoder.tools.registry import Toolbox, core_tools

from .conftest import Call


def make_tree(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "src" / "main.py").write_text("print('hi')\n")
    (ws / "README").write_text("readme\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref\n")
    (ws / "link").symlink_to("src")


async def test_list_files_breadth_first(ws: Path, call: Call) -> None:
    make_tree(ws)
    result = await call("list_files")
    assert result.ok
    assert result.text.splitlines() == [
        ".git/ (not listed)",
        "README",
        "link -> src",
        "src/",
        "src/main.py",
        "src/pkg/",
        "src/pkg/mod.py",
    ]
    assert result.summary == "7 entries"


async def test_list_files_subdir_and_cut(ws: Path, call: Call) -> None:
    make_tree(ws)
    result = await call("list_files", path="src", max_entries=2)
    assert result.text.splitlines() == [
        "src/main.py",
        "src/pkg/",
        "[... listing stopped at 2 entries; list a subdirectory or pass a larger max_entries ...]",
    ]
    assert result.summary == "2 entries (cut)"


async def test_list_files_refusals(ws: Path, call: Call) -> None:
    make_tree(ws)
    (ws / "empty").mkdir()
    assert (await call("list_files", path="empty")).text == "empty: empty directory"
    assert (await call("list_files", path="..")).text == "Error: path escapes the workspace: .."
    assert (await call("list_files", path="README")).text == "Error: not a directory: README"
    assert (await call("list_files", path="nope")).text == "Error: no such directory: nope"
    bad = await call("list_files", max_entries=0)
    assert bad.text == (
        "Error: invalid arguments for list_files: argument 'max_entries' must be at least 1, got 0"
    )


async def test_read_file(ws: Path, call: Call) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    (ws / "empty.txt").write_text("")
    result = await call("read_file", path="a.txt")
    assert (result.ok, result.text, result.summary) == (True, "one\ntwo\n", "2 lines")
    assert (await call("read_file", path=str(ws / "a.txt"))).text == "one\ntwo\n"
    assert (await call("read_file", path="empty.txt")).text == "(empty file)"


async def test_read_file_refusals(ws: Path, call: Call) -> None:
    (ws / "bin").write_bytes(b"\x7fELF\x00\x01")
    (ws / "d").mkdir()
    os.mkfifo(ws / "fifo")
    (ws / "out").symlink_to(ws.parent / "outside" / "secret.txt")
    cases = {
        "bin": "Error: binary file: bin",
        "d": "Error: not a regular file: d",
        "fifo": "Error: not a regular file: fifo",
        "missing.txt": "Error: no such file: missing.txt",
        "out": "Error: path escapes the workspace: out",
        "../outside/secret.txt": "Error: path escapes the workspace: ../outside/secret.txt",
        "/etc/passwd": "Error: path escapes the workspace: /etc/passwd",
        "a\0b": "Error: path contains a NUL byte: 'a\\x00b'",
    }
    for raw, expected in cases.items():
        result = await call("read_file", path=raw)
        assert (result.ok, result.text) == (False, expected)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
async def test_read_device_refused(ws: Path, call: Call) -> None:
    os.mknod(ws / "null", 0o600 | 0o020000, os.makedev(1, 3))  # S_IFCHR, like /dev/null
    assert (await call("read_file", path="null")).text == "Error: not a regular file: null"
    assert (await call("write_file", path="null", content="x")).text == (
        "Error: not a regular file: null"
    )


async def test_read_file_long_is_cut_with_hint(ws: Path) -> None:
    lines = "".join(f"line {n}\n" for n in range(5000))
    (ws / "big.txt").write_text(lines)
    ctx = ToolContext(workspace=ws, output_cap=1000)
    result = await Toolbox(core_tools()).call("read_file", {"path": "big.txt"}, ctx)
    assert len(result.text) <= 1000
    assert result.text.startswith("line 0\nline 1\n")
    assert "characters omitted ...]" in result.text
    assert result.text.endswith(
        "[file cut in the middle: use read_file_range to read the omitted lines]"
    )
    assert "line 4999\n" in result.text


async def test_read_file_range(ws: Path, call: Call) -> None:
    (ws / "a.txt").write_text("".join(f"l{n}\r\n" for n in range(1, 11)))
    result = await call("read_file_range", path="a.txt", start_line=2, end_line=4)
    assert result.text == "a.txt lines 2-4 of 10:\n     2\tl2\n     3\tl3\n     4\tl4"
    tail = await call("read_file_range", path="a.txt", start_line=9, end_line=99)
    assert tail.text == "a.txt lines 9-10 of 10:\n     9\tl9\n    10\tl10"
    past = await call("read_file_range", path="a.txt", start_line=11, end_line=12)
    assert past.text == "Error: start_line 11 is past the end of a.txt (10 lines)"
    backwards = await call("read_file_range", path="a.txt", start_line=5, end_line=4)
    assert backwards.text == "Error: end_line (4) is before start_line (5)"
    missing = await call("read_file_range", path="a.txt", start_line=1)
    assert (
        missing.text
        == "Error: invalid arguments for read_file_range: missing required argument 'end_line'"
    )


async def test_read_file_range_reads_a_file_too_large_to_read_whole(ws: Path, call: Call) -> None:
    lines = MAX_FILE_BYTES // 8 + 10
    (ws / "big.log").write_bytes(b"".join(b"%07d\n" % n for n in range(1, lines + 1)))
    whole = await call("read_file", path="big.log")
    assert whole.text.startswith("Error: file too large")
    assert whole.text.endswith(": big.log; read it in parts with read_file_range")
    result = await call("read_file_range", path="big.log", start_line=lines - 1, end_line=lines + 5)
    assert result.text == f"big.log lines {lines - 1}-{lines} of {lines}:\n" + (
        f"{lines - 1:6}\t{lines - 1:07d}\n{lines:6}\t{lines:07d}"
    )


async def test_read_file_range_stops_at_the_output_limit(ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 1001)))
    ctx = ToolContext(workspace=ws, output_cap=400)
    args = {"path": "a.txt", "start_line": 3, "end_line": 900}
    result = await Toolbox(core_tools()).call("read_file_range", args, ctx)
    end = int(result.summary.removeprefix("lines 3-"))
    assert 10 < end < 30 and len(result.text) <= 400
    assert result.text.startswith(f"a.txt lines 3-{end} of 1000:\n     3\tline 3\n")
    assert result.text.endswith(
        f"\n{end:6}\tline {end}\n[... stopped at the output limit; read on from line {end + 1} ...]"
    )


async def test_read_file_range_refuses_binary(ws: Path, call: Call) -> None:
    (ws / "b.bin").write_bytes(b"ab\0cd\n")
    result = await call("read_file_range", path="b.bin", start_line=1, end_line=1)
    assert result.text == "Error: binary file: b.bin"


async def test_read_file_range_cuts_an_endless_line(
    ws: Path, call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zcoder.tools.files, "_LINE_CAP", 8)
    (ws / "one.txt").write_bytes(b"x" * 30 + b"\nshort\n" + b"y" * 16 + b"\nend")
    result = await call("read_file_range", path="one.txt", start_line=1, end_line=9)
    assert result.text == (
        "one.txt lines 1-4 of 4:\n     1\txxxxxxxx\n     2\tshort\n     3\tyyyyyyyy\n     4\tend"
    )
