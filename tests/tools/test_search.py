from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from zcoder.tools.base import ToolContext, ToolResult
from zcoder.tools.registry import Toolbox, core_tools
from zcoder.tools.search import MAX_SEARCH_BYTES, _file_hits, _search_python, make_search_tool

from .conftest import is_live

MODES = [
    pytest.param(False, id="python"),
    pytest.param(
        True, id="rg", marks=pytest.mark.skipif(not shutil.which("rg"), reason="rg not on PATH")
    ),
]


def make_tree(ws: Path) -> None:
    (ws / "src" / "sub").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("import os\nneedle = 1\n\nprint(needle)\n")
    (ws / "src" / "sub" / "b.py").write_text("# needle here\r\nno\n")
    (ws / "src" / "z.txt").write_text("needle\n")
    (ws / ".hidden.cfg").write_text("needle=hidden\n")
    (ws / "bin.dat").write_bytes(b"needle\x00\x01\x02")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("needle in git\n")
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "x.js").write_text("needle\n")
    (ws / "big.txt").write_bytes(b"needle\n" + b"x" * MAX_SEARCH_BYTES)
    (ws / "link.py").symlink_to("src/a.py")
    (ws / "out").symlink_to(ws.parent / "outside")
    (ws.parent / "outside" / "o.txt").write_text("needle outside\n")


async def search(ws: Path, use_rg: bool, **arguments: object) -> ToolResult:
    tools = [t for t in core_tools() if t.spec.name != "search"]
    toolbox = Toolbox([*tools, make_search_tool(use_rg=use_rg)])
    return await toolbox.call("search", arguments, ToolContext(workspace=ws))


@pytest.mark.parametrize("use_rg", MODES)
async def test_search_finds_text_lines_in_path_order(ws: Path, use_rg: bool) -> None:
    make_tree(ws)
    result = await search(ws, use_rg, query="needle")
    assert result.ok
    assert result.text.splitlines() == [
        ".hidden.cfg:1: needle=hidden",
        "src/a.py:2: needle = 1",
        "src/a.py:4: print(needle)",
        "src/sub/b.py:1: # needle here",
        "src/z.txt:1: needle",
    ]
    assert result.summary == "5 matches"


@pytest.mark.parametrize("use_rg", MODES)
async def test_search_is_literal_and_scoped(ws: Path, use_rg: bool) -> None:
    make_tree(ws)
    (ws / "re.txt").write_text("a.b\naxb\n-e flag\n")
    assert (await search(ws, use_rg, query="a.b")).text == "re.txt:1: a.b"
    assert (await search(ws, use_rg, query="-e")).text == "re.txt:3: -e flag"
    sub = await search(ws, use_rg, query="needle", path="src/sub")
    assert sub.text == "src/sub/b.py:1: # needle here"
    one = await search(ws, use_rg, query="print", path="src/a.py")
    assert one.text == "src/a.py:4: print(needle)"


@pytest.mark.parametrize("use_rg", MODES)
async def test_search_limits_and_no_match(ws: Path, use_rg: bool) -> None:
    make_tree(ws)
    cut = await search(ws, use_rg, query="needle", max_results=2)
    assert cut.text.splitlines() == [
        ".hidden.cfg:1: needle=hidden",
        "src/a.py:2: needle = 1",
        "[... stopped at 2 matches; narrow the query or the path ...]",
    ]
    assert cut.summary == "2 matches (cut)"
    none = await search(ws, use_rg, query="absent")
    assert (none.ok, none.text) == (
        True,
        "No matches for 'absent' in the workspace "
        "(binary files and files over 4 MiB are not searched).",
    )
    in_src = await search(ws, use_rg, query="absent", path="src")
    assert in_src.text.startswith("No matches for 'absent' in src (")


@pytest.mark.parametrize("use_rg", MODES)
async def test_long_lines_are_shortened(ws: Path, use_rg: bool) -> None:
    (ws / "long.txt").write_text("needle" + "y" * 1000 + "\n")
    result = await search(ws, use_rg, query="needle")
    assert result.text == "long.txt:1: needle" + "y" * 231 + "..."


async def test_search_refusals(ws: Path) -> None:
    make_tree(ws)
    assert (await search(ws, False, query="x", path="..")).text == (
        "Error: path escapes the workspace: .."
    )
    assert (await search(ws, False, query="x", path="out")).text == (
        "Error: path escapes the workspace: out"
    )
    assert (await search(ws, False, query="x", path="nope")).text == (
        "Error: no such file or directory: nope"
    )
    assert (await search(ws, False, query="a\nb")).text == (
        "Error: query must be a single line: search matches within one line"
    )
    assert (await search(ws, False, query="")).text == (
        "Error: invalid arguments for search: argument 'query' must not be empty"
    )


def test_python_search_stops_when_abandoned(ws: Path) -> None:
    make_tree(ws)
    stop = threading.Event()
    assert _search_python(ws, ws, "needle", 50, stop)[0] != []
    stop.set()
    assert _search_python(ws, ws, "needle", 50, stop) == ([], False)


FAKE_RG = """\
#!{python}
# Stands in for ripgrep: prints its output format for one fixed file, or misbehaves.
import os, sys, time
args = sys.argv[1:]
query, start = args[args.index("-e") + 1], args[-1]
with open(os.path.join(os.environ["FAKE_RG_DIR"], "argv"), "w") as f:
    f.write("\\n".join(args))
if query == "fail":
    sys.exit(2)
path = os.path.join(start, "f.txt").encode()
if query == "forever":
    with open(os.path.join(os.environ["FAKE_RG_DIR"], "pid"), "w") as f:
        f.write(str(os.getpid()))
    n = 0
    while True:
        n += 1
        sys.stdout.buffer.write(path + b"\\0" + str(n).encode() + b":forever\\n")
        sys.stdout.flush()
sys.stdout.buffer.write(path + b"\\0" + b"7:a: b " + query.encode() + b"\\n")
sys.stdout.buffer.write(b"garbage line\\n")
"""


@pytest.fixture
def fake_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    script = bindir / "rg"
    script.write_text(FAKE_RG.replace("{python}", sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_RG_DIR", str(bindir))
    return bindir


async def test_rg_output_is_parsed(ws: Path, fake_rg: Path) -> None:
    result = await search(ws, True, query="q:x")
    assert result.text == "f.txt:7: a: b q:x"
    argv = (fake_rg / "argv").read_text().splitlines()
    assert argv[-4:] == ["-e", "q:x", "--", str(ws)]
    assert {"--fixed-strings", "--null", "--sort=path", "--no-config"} <= set(argv)
    assert argv[argv.index("--glob") + 1] == "!.git"


async def test_rg_failure_falls_back_to_python(ws: Path, fake_rg: Path) -> None:
    (ws / "g.txt").write_text("fail here\n")
    assert (await search(ws, True, query="fail")).text == "g.txt:1: fail here"


async def test_rg_is_stopped_after_max_results(ws: Path, fake_rg: Path) -> None:
    result = await search(ws, True, query="forever", max_results=3)
    assert result.text.splitlines() == [
        "f.txt:1: forever",
        "f.txt:2: forever",
        "f.txt:3: forever",
        "[... stopped at 3 matches; narrow the query or the path ...]",
    ]
    assert not is_live(int((fake_rg / "pid").read_text()))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_python_search_skips_pseudo_files_that_report_size_0() -> None:
    # /proc files say 0 bytes and some never end (kmsg): a search under / must not read them.
    assert list(_file_hits(Path("/proc/self/status"), b"Name:")) == []
