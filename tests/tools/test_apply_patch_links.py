"""apply_patch deleting a path that is a symlink removes the link, never its target."""

from __future__ import annotations

from pathlib import Path

from .conftest import Call


async def test_deleting_a_symlink_removes_the_link_not_its_target(ws: Path, call: Call) -> None:
    (ws / "docs").mkdir()
    (ws / "README.md").write_text("keep me\n")
    (ws / "docs" / "README.md").symlink_to("../README.md")
    patch = "--- a/docs/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-keep me\n"
    result = await call("apply_patch", patch=patch)
    assert result.text == "Applied the patch:\n  deleted docs/README.md"
    assert not (ws / "docs" / "README.md").is_symlink()
    assert (ws / "README.md").read_text() == "keep me\n"


async def test_deleting_a_file_through_a_linked_directory_deletes_that_file(
    ws: Path, call: Call
) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "x.txt").write_text("x\n")
    (ws / "alias").symlink_to("real")
    patch = "--- a/alias/x.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    result = await call("apply_patch", patch=patch)
    assert result.text == "Applied the patch:\n  deleted real/x.txt"
    assert not (ws / "real" / "x.txt").exists() and (ws / "alias").is_symlink()


async def test_a_link_outside_the_workspace_is_never_removed(ws: Path, call: Call) -> None:
    outside = ws.parent / "elsewhere"
    outside.mkdir()
    (ws / "inside.txt").write_text("in\n")
    (outside / "back").symlink_to(ws / "inside.txt")
    (ws / "out").symlink_to(outside)
    patch = "--- a/out/back\n+++ /dev/null\n@@ -1 +0,0 @@\n-in\n"
    result = await call("apply_patch", patch=patch)
    assert result.text == "Applied the patch:\n  deleted inside.txt"
    assert (outside / "back").is_symlink()  # the outside entry is untouched
    assert not (ws / "inside.txt").exists()
