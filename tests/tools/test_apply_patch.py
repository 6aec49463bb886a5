"""The apply_patch tool: confinement and all-or-nothing writes."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from zcoder.tools import apply_patch, files

from .conftest import Call


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def setup_files(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("def a():\n    return 1\n")
    (ws / "b.txt").write_text("one\ntwo\nthree\n")
    (ws / "old.txt").write_text("bye\n")
    (ws / "b.txt").chmod(0o600)


def temp_files(root: Path) -> list[Path]:
    return list(root.rglob("*.zcoder-tmp"))


MULTI = """\
diff --git a/src/a.py b/src/a.py
--- a/src/a.py
+++ b/src/a.py
@@ -1,2 +1,2 @@
 def a():
-    return 1
+    return 42
--- a/b.txt
+++ b/b.txt
@@ -1,3 +1,4 @@
 one
+one and a half
 two
 three
--- /dev/null
+++ b/docs/new/c.md
@@ -0,0 +1,2 @@
+# C
+text
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""


async def test_multi_file_patch(ws: Path, call: Call) -> None:
    setup_files(ws)
    result = await call("apply_patch", patch=MULTI)
    assert (result.ok, result.summary) == (True, "4 files")
    assert result.text == (
        "Applied the patch:\n"
        "  modified src/a.py (+1 -1)\n"
        "  modified b.txt (+1 -0)\n"
        "  created docs/new/c.md (+2 -0)\n"
        "  deleted old.txt"
    )
    assert (ws / "src" / "a.py").read_text() == "def a():\n    return 42\n"
    assert (ws / "b.txt").read_text() == "one\none and a half\ntwo\nthree\n"
    assert stat.S_IMODE((ws / "b.txt").stat().st_mode) == 0o600
    assert (ws / "docs" / "new" / "c.md").read_text() == "# C\ntext\n"
    assert not (ws / "old.txt").exists()
    assert "+++ b/docs/new/c.md" in result.diff and "+    return 42" in result.diff
    assert temp_files(ws) == []


async def test_bad_hunk_anywhere_leaves_every_file_untouched(ws: Path, call: Call) -> None:
    setup_files(ws)
    before = snapshot(ws)
    broken = MULTI.replace(" three\n", " THREE\n")
    result = await call("apply_patch", patch=broken)
    assert not result.ok
    assert result.text.startswith(
        "Error: hunk 1 of b.txt does not apply: its context and '-' lines were not found"
    )
    assert snapshot(ws) == before
    assert not (ws / "docs").exists()


async def test_same_file_twice_applies_in_sequence(ws: Path, call: Call) -> None:
    setup_files(ws)
    patch = (
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-one\n+ONE\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n ONE\n-two\n+TWO\n"
    )
    result = await call("apply_patch", patch=patch)
    assert result.text == "Applied the patch:\n  modified b.txt (+2 -2)"
    assert (ws / "b.txt").read_text() == "ONE\nTWO\nthree\n"


async def test_refusals_change_nothing(ws: Path, call: Call) -> None:
    setup_files(ws)
    (ws / "dangling").symlink_to("nowhere")
    (ws / "out").symlink_to(ws.parent / "outside")
    before = snapshot(ws)
    outside_before = snapshot(ws.parent / "outside")
    good = "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-one\n+uno\n"
    cases = {
        "--- a/../outside/secret.txt\n+++ b/../outside/secret.txt\n@@ -1 +1 @@\n-top secret\n+x\n":
            "Error: path escapes the workspace: ../outside/secret.txt",
        "--- a/out/secret.txt\n+++ b/out/secret.txt\n@@ -1 +1 @@\n-top secret\n+x\n":
            "Error: path escapes the workspace: out/secret.txt",
        "--- /dev/null\n+++ b/dangling\n@@ -0,0 +1 @@\n+x\n":
            "Error: refusing to write through a dangling symlink: dangling",
        "--- /dev/null\n+++ b/src\n@@ -0,0 +1 @@\n+x\n": "Error: not a regular file: src",
        "--- a/b.txt\n+++ b/c.txt\n@@ -1 +1 @@\n-one\n+uno\n":
            "Error: renaming is not supported (b.txt -> c.txt); patch the file in place, "
            "then move it with run_command",
        "--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+x\n":
            "Error: b.txt already exists; patch it with '--- a/b.txt', not /dev/null",
        "--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-a\n+b\n":
            "Error: no such file: missing.txt",
    }  # fmt: skip
    for patch, expected in cases.items():
        result = await call("apply_patch", patch=good + patch)
        assert (result.ok, result.text) == (False, expected)
    assert snapshot(ws) == before
    assert snapshot(ws.parent / "outside") == outside_before


async def test_binary_and_non_utf8_targets_refused(ws: Path, call: Call) -> None:
    (ws / "bin").write_bytes(b"a\x00b\n")
    (ws / "l1.txt").write_bytes(b"caf\xe9\n")
    patch = "--- a/bin\n+++ b/bin\n@@ -1 +1 @@\n-a\n+b\n"
    assert (await call("apply_patch", patch=patch)).text == "Error: binary file: bin"
    patch = "--- a/l1.txt\n+++ b/l1.txt\n@@ -1 +1 @@\n-a\n+b\n"
    assert (await call("apply_patch", patch=patch)).text == (
        "Error: file is not valid UTF-8 (byte 3), refusing to edit it: l1.txt"
    )
    assert (ws / "bin").read_bytes() == b"a\x00b\n"


async def test_write_failure_rolls_back_staged_files(
    ws: Path, call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup_files(ws)
    staged: list[Path] = []

    def failing_stage(path: Path, data: bytes) -> Path:
        if staged:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        staged.append(files.stage_write(path, data))
        return staged[-1]

    monkeypatch.setattr(apply_patch, "stage_write", failing_stage)
    before = snapshot(ws)
    result = await call("apply_patch", patch=MULTI)
    assert result.text == (
        "Error: cannot write the patched files (nothing changed): No space left on device"
    )
    assert len(staged) == 1 and not staged[0].exists()
    assert snapshot(ws) == before
    assert temp_files(ws) == []
