from __future__ import annotations

from pathlib import Path

from zcoder.instructions import (
    CUT_MARKER,
    INSTRUCTIONS_CAP,
    InstructionFile,
    find_git_root,
    instruction_paths,
    load_instructions,
    merge_instructions,
)


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    home = tmp_path / "zhome"
    repo = tmp_path / "repo"
    ws = repo / "pkg" / "sub"
    ws.mkdir(parents=True)
    home.mkdir()
    (repo / ".git").mkdir()
    return home, repo, ws


def test_git_root_is_the_nearest_ancestor_with_dot_git(tmp_path: Path) -> None:
    _home, repo, ws = _tree(tmp_path)
    assert find_git_root(ws) == repo
    (repo / "pkg" / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git file
    assert find_git_root(ws) == repo / "pkg"


def test_chain_is_broadest_first(tmp_path: Path) -> None:
    home, repo, ws = _tree(tmp_path)
    assert instruction_paths(home, ws) == [
        home / "AGENTS.md",
        repo / "AGENTS.md",
        repo / "pkg" / "AGENTS.md",
        ws / "AGENTS.md",
    ]


def test_without_git_only_the_workspace(tmp_path: Path) -> None:
    home = tmp_path / "h"
    ws = tmp_path / "plain" / "ws"
    ws.mkdir(parents=True)
    (tmp_path / "plain" / "AGENTS.md").write_text("not mine")
    assert instruction_paths(home, ws) == [home / "AGENTS.md", ws / "AGENTS.md"]
    assert load_instructions(home, ws) == ""


def test_merge_order_headers_and_skips(tmp_path: Path) -> None:
    home, repo, ws = _tree(tmp_path)
    (home / "AGENTS.md").write_text("global rule\n")
    (repo / "AGENTS.md").write_text("repo rule")
    (repo / "pkg" / "AGENTS.md").write_text("   \n")  # blank: skipped
    (ws / "AGENTS.md").mkdir()  # not a file: skipped
    text = load_instructions(home, ws)
    assert text == (
        f"# From {home / 'AGENTS.md'}\nglobal rule\n\n# From {repo / 'AGENTS.md'}\nrepo rule"
    )


def test_same_file_twice_is_read_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    (ws / "AGENTS.md").write_text("only once")
    assert load_instructions(ws, ws).count("only once") == 1


def test_cap_cuts_with_marker_on_a_character_boundary(tmp_path: Path) -> None:
    files = [InstructionFile(tmp_path / "a", "é" * 20000), InstructionFile(tmp_path / "b", "tail")]
    merged = merge_instructions(files)
    assert len(merged.encode("utf-8")) <= INSTRUCTIONS_CAP
    assert merged.endswith(CUT_MARKER)
    assert "tail" not in merged
    assert "\ufffd" not in merged


def test_large_file_is_capped(tmp_path: Path) -> None:
    home, _repo, ws = _tree(tmp_path)
    (ws / "AGENTS.md").write_text("x" * (INSTRUCTIONS_CAP * 4))
    text = load_instructions(home, ws)
    assert text.endswith(CUT_MARKER)
    assert len(text.encode()) <= INSTRUCTIONS_CAP


def test_unreadable_file_is_skipped(tmp_path: Path) -> None:
    home, _repo, ws = _tree(tmp_path)
    (ws / "AGENTS.md").symlink_to(tmp_path / "missing")
    assert load_instructions(home, ws) == ""
