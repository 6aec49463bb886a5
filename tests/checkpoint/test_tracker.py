"""Checkpoints over real files, real commands and a real shadow git repository, in a git
workspace and in a plain directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from zcoder.checkpoint.records import TurnRecord
from zcoder.checkpoint.settings import CheckpointSettings
from zcoder.checkpoint.text import model_note, report_lines, turn_lines
from zcoder.checkpoint.tracker import Checkpoints
from zcoder.errors import CheckpointError

SID = "s_1"


def git(ws: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x",
           "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=ws, env=env, capture_output=True, check=True)
    return done.stdout.decode()


def tree_digest(root: Path) -> dict[str, str]:
    """Every file, link and directory under ``root`` with its mode and content."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = f"link {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = f"dir {st.st_mode:o}"
            else:
                out[rel] = f"{st.st_mode:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out


@pytest.fixture(params=["git", "plain"])
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("keep\n")
    (ws / "edit.txt").write_text("one\n")
    (ws / "old.txt").write_text("old\n")
    (ws / "run.sh").write_text("echo hi\n")
    (ws / ".gitignore").write_text("*.log\n")
    if request.param == "git":
        git(ws, "init", "-q")
        git(ws, "add", ".")
        git(ws, "commit", "-qm", "start")
        git(ws, "stash", "list")
        (ws / "edit.txt").write_text("one\nuncommitted\n")
        git(ws, "stash", "-q")
        (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    return ws


def checkpoints(tmp_path: Path, ws: Path, **settings: int) -> Checkpoints:
    return Checkpoints(tmp_path / "zhome", ws, CheckpointSettings(**settings))  # type: ignore[arg-type]


async def sh(ws: Path, script: str) -> None:
    await trio.run_process(["sh", "-c", script], cwd=ws)


async def turn(
    cps: Checkpoints, ws: Path, script: str, *, origin: str = "user", sender: str = ""
) -> TurnRecord | None:
    t = cps.turn(SID, origin, sender, f"do: {script}")
    assert await t.before_change(()) == ""
    await sh(ws, script)
    return await t.finish()


async def test_a_turn_of_commands_is_undone_exactly(workspace: Path, tmp_path: Path) -> None:
    before = tree_digest(workspace)
    cps = checkpoints(tmp_path, workspace)
    record = await turn(
        cps,
        workspace,
        "echo two >> edit.txt; echo new > new.txt; rm old.txt; mv keep.txt kept.txt; "
        "chmod +x run.sh; mkdir -p deep/er && echo x > deep/er/f.txt; echo noise > x.log; "
        "ln -s edit.txt link",
    )
    assert record is not None
    changes = {(c.status, c.path) for c in record.changes}
    assert changes == {
        ("M", "edit.txt"), ("A", "new.txt"), ("D", "old.txt"), ("D", "keep.txt"),
        ("A", "kept.txt"), ("M", "run.sh"), ("A", "deep/er/f.txt"), ("A", "link"),
        ("A", "x.log"),
    }  # fmt: skip
    assert [c.path for c in record.changes if not c.recorded] == ["x.log"]
    report = await cps.undo(SID, None)
    after = tree_digest(workspace)
    after.pop("x.log")  # ignored: never recorded, never touched, named
    assert after == before
    assert report_lines(report)[1] == (
        "Not taken back: x.log (ignored by .gitignore); "
        f"remove it yourself: rm -- {workspace}/x.log"
    )
    assert report.removed == ("deep/er/f.txt", "kept.txt", "link", "new.txt")
    assert report.restored == ("edit.txt", "keep.txt", "old.txt", "run.sh")
    assert not (workspace / "deep").exists()


async def test_the_users_git_directory_is_byte_identical(workspace: Path, tmp_path: Path) -> None:
    if not (workspace / ".git").exists():
        pytest.skip("a plain directory has no .git")
    status = git(workspace, "status", "--porcelain")  # it may refresh the index: first
    dot_git = tree_digest(workspace / ".git")
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "echo more >> edit.txt; echo n > n.txt; rm old.txt")
    assert tree_digest(workspace / ".git") == dot_git  # HEAD, refs, index, hooks, stash
    await cps.undo(SID, None)
    assert tree_digest(workspace / ".git") == dot_git
    assert git(workspace, "status", "--porcelain") == status
    assert git(workspace, "stash", "list").count("\n") == 1


async def test_a_plain_directory_gets_no_git_directory(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    cps = checkpoints(tmp_path, ws)
    await turn(cps, ws, "echo a > a.txt")
    await cps.undo(SID, None)
    assert sorted(os.listdir(ws)) == []


async def test_the_users_edit_between_the_turn_and_the_undo_survives(
    workspace: Path, tmp_path: Path
) -> None:
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "echo by-model >> edit.txt; echo model > new.txt")
    (workspace / "edit.txt").write_text("the user's own words\n")
    report = await cps.undo(SID, None)
    assert (workspace / "edit.txt").read_text() == "the user's own words\n"
    assert not (workspace / "new.txt").exists()
    (line,) = [x for x in report_lines(report) if x.startswith("Kept")]
    assert line.startswith("Kept edit.txt as it is: it changed since turn 1 outside zcoder; ")
    command = line.split("to restore it anyway: ", 1)[1]
    await trio.run_process(command, shell=True, cwd="/")
    assert (workspace / "edit.txt").read_text() == "one\n"
    assert "left as they are now: edit.txt" in model_note(report)


async def test_a_relayed_turn_is_undone_by_number_and_the_local_one_after(
    workspace: Path, tmp_path: Path
) -> None:
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "echo local > local.txt")
    await turn(cps, workspace, "echo relayed >> edit.txt; rm old.txt", origin="relay",
               sender="alpha (pid 7)")  # fmt: skip
    lines = turn_lines(cps.records(SID), 0)
    assert "relayed by alpha (pid 7)" in lines[1] and "~edit.txt, -old.txt" in lines[1]
    report = await cps.undo(SID, 2)
    assert [t.number for t in report.turns] == [2]
    assert (workspace / "old.txt").exists() and (workspace / "local.txt").exists()
    with pytest.raises(CheckpointError, match="no turn 2 to take back"):
        await cps.undo(SID, 2)
    await cps.undo(SID, None)
    assert not (workspace / "local.txt").exists()
    assert [r.standing for r in cps.records(SID)] == [False, False]


async def test_checkpoints_survive_the_process(workspace: Path, tmp_path: Path) -> None:
    await turn(checkpoints(tmp_path, workspace), workspace, "echo x > made.txt")
    again = checkpoints(tmp_path, workspace)  # as after quit and --resume
    await again.undo(SID, None)
    assert not (workspace / "made.txt").exists()


async def test_a_turn_that_changes_nothing_leaves_no_record(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "x.log").write_text("log\n")
    cps = checkpoints(tmp_path, workspace)
    assert await turn(cps, workspace, "cat edit.txt > /dev/null; echo n >> x.log") is None
    assert cps.records(SID) == []
    with pytest.raises(
        CheckpointError, match="nothing to undo: no turn of this session has changed files"
    ):
        await cps.undo(SID, None)


async def test_a_file_over_the_size_cap_is_not_recorded_and_the_undo_says_so(
    workspace: Path, tmp_path: Path
) -> None:
    cps = checkpoints(tmp_path, workspace, max_bytes=100)
    record = await turn(cps, workspace, "head -c 500 /dev/zero > big.bin; echo s > small.txt")
    assert record is not None
    big = next(c for c in record.changes if c.path == "big.bin")
    assert not big.recorded
    report = await cps.undo(SID, None)
    assert (workspace / "big.bin").exists() and not (workspace / "small.txt").exists()
    assert (
        "Not taken back: big.bin (larger than 100 bytes); "
        f"remove it yourself: rm -- {workspace}/big.bin" in report_lines(report)
    )


async def test_a_file_the_user_made_large_after_the_turn_is_kept(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "data.csv").write_text("a,b\n")
    cps = checkpoints(tmp_path, workspace, max_bytes=1000)
    record = await turn(cps, workspace, "rm data.csv")
    assert record is not None and [(c.status, c.path) for c in record.changes] == [
        ("D", "data.csv")
    ]
    (workspace / "data.csv").write_bytes(b"1,2\n" * 1250)  # regenerated: 5,000 bytes
    report = await cps.undo(SID, None)
    assert (workspace / "data.csv").read_bytes() == b"1,2\n" * 1250
    assert report.restored == () and report.removed == ()
    lines = report_lines(report)
    assert lines[1].startswith(
        "Kept data.csv as it is: it is larger than 1000 bytes now, so no snapshot holds it; "
        "to restore it anyway: git --git-dir="
    )


async def test_line_endings_come_back_byte_for_byte_under_text_auto(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\tautocrlf = true\n\teol = crlf\n")
    monkeypatch.setenv("HOME", str(home))
    (workspace / ".gitattributes").write_text("* text=auto\n")
    (workspace / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (workspace / "lf.txt").write_bytes(b"one\n")
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "rm crlf.txt; echo two >> lf.txt")
    (workspace / "lf.txt").write_bytes(b"one\r\ntwo\r\n")  # the user's: line endings only
    report = await cps.undo(SID, None)
    assert (workspace / "crlf.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert (workspace / "lf.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert [k.path for k, _ in report.kept] == ["lf.txt"]
    shadow = cps.shadow(SID)
    assert await shadow.git("config", "core.autocrlf") == b"false\n"
    assert (shadow.git_dir / "info" / "attributes").read_text() == (
        "* -text -eol -ident -filter -working-tree-encoding\n"
    )


async def test_a_shadow_made_before_its_attributes_hashes_every_file_again(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / ".gitattributes").write_text("* text=auto\n")
    (workspace / "crlf.txt").write_bytes(b"one\r\n")
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "echo n > n.txt")
    (cps.shadow(SID).git_dir / "info" / "attributes").unlink()  # as an older zcoder left it
    assert sorted(p.name for p in cps.root.glob("index*")) == ["index", f"index-{SID}"]
    await checkpoints(tmp_path, workspace).shadow(SID).ensure()
    assert list(cps.root.glob("index*")) == []


async def test_an_ignored_file_a_file_tool_wrote_is_named(workspace: Path, tmp_path: Path) -> None:
    cps = checkpoints(tmp_path, workspace)
    t = cps.turn(SID, "user", "", "write a log")
    await t.before_change(["notes.log"])
    (workspace / "notes.log").write_text("x")
    (workspace / "edit.txt").write_text("changed\n")
    record = await t.finish()
    assert record is not None
    ignored = [c for c in record.changes if not c.recorded]
    assert [(c.path, c.why) for c in ignored] == [("notes.log", "ignored by .gitignore")]


async def test_old_turns_are_pruned_by_count(workspace: Path, tmp_path: Path) -> None:
    cps = checkpoints(tmp_path, workspace, keep_turns=2)
    for n in range(4):
        await turn(cps, workspace, f"echo {n} >> edit.txt")
    assert [r.number for r in cps.records(SID)] == [3, 4]
    listed = await trio.run_process(
        ["git", f"--git-dir={cps.root / 'git'}", "for-each-ref", "--format=%(refname)"],
        capture_stdout=True,
    )
    refs = listed.stdout.decode().split()
    assert sorted(refs) == [
        f"refs/zcoder/{SID}/{n}/{w}" for n in (3, 4) for w in ("after", "before")
    ]


async def test_a_snapshot_that_cannot_be_taken_is_said_once(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    t = checkpoints(tmp_path, workspace).turn(SID, "user", "", "x")
    first: Callable[[], Awaitable[str]] = lambda: t.before_change(())  # noqa: E731
    assert "git is not installed" in await first()
    assert await first() == ""
    assert await t.finish() is None


async def test_a_day_later_unused_sessions_are_dropped_with_their_snapshots(
    workspace: Path, tmp_path: Path
) -> None:
    cps = checkpoints(tmp_path, workspace, keep_days=2)
    other = cps.turn("s_old", "user", "", "long ago")
    await other.before_change(())
    (workspace / "edit.txt").write_text("old session\n")
    assert await other.finish() is not None
    await turn(cps, workspace, "echo now >> edit.txt")
    week_ago = time.time() - 7 * 86400
    for path in (cps.root / "turns" / "s_old.json", cps.root / "index-s_old"):
        os.utime(path, (week_ago, week_ago))
    os.utime(cps.root / "last-upkeep", (week_ago, week_ago))
    await turn(cps, workspace, "echo later >> edit.txt")
    assert sorted(p.name for p in (cps.root / "turns").iterdir()) == [f"{SID}.json"]
    assert not (cps.root / "index-s_old").exists()
    listed = await trio.run_process(
        ["git", f"--git-dir={cps.root / 'git'}", "for-each-ref", "--format=%(refname)"],
        capture_stdout=True,
    )
    assert "s_old" not in listed.stdout.decode()
    assert len(cps.records(SID)) == 2


async def test_an_index_naming_collected_snapshots_is_rebuilt(
    workspace: Path, tmp_path: Path
) -> None:
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "echo one >> edit.txt")
    objects = cps.root / "git" / "objects"
    for loose in objects.glob("??"):
        shutil.rmtree(loose)  # as if git had collected what only this index named
    record = await turn(cps, workspace, "echo two >> edit.txt")
    assert record is not None and [c.path for c in record.changes] == ["edit.txt"]


async def test_a_zcoder_home_inside_the_workspace_is_never_recorded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    cps = Checkpoints(ws / ".zc home", ws, CheckpointSettings())
    record = await turn(cps, ws, "echo a > a.txt")
    assert record is not None and [c.path for c in record.changes] == ["a.txt"]
    record = await turn(cps, ws, "echo b > b.txt")
    assert record is not None and [c.path for c in record.changes] == ["b.txt"]


async def test_the_repositorys_exclude_file_and_the_global_excludes_are_honoured(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "repo"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / ".git" / "info" / "exclude").write_text("secret.txt\n")
    global_ignore = Path(os.environ["XDG_CONFIG_HOME"]) / "git" / "ignore"
    global_ignore.parent.mkdir(parents=True)
    global_ignore.write_text("*.bak\n")
    cps = checkpoints(tmp_path, ws)
    record = await turn(cps, ws, "echo s > secret.txt; echo b > old.bak; echo k > kept.txt")
    assert record is not None
    assert [(c.path, c.recorded) for c in record.changes] == [
        ("kept.txt", True), ("old.bak", False), ("secret.txt", False)
    ]  # fmt: skip


async def test_a_file_a_turn_replaced_by_a_directory_comes_back(
    workspace: Path, tmp_path: Path
) -> None:
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "rm old.txt && mkdir old.txt && echo in > old.txt/inner.txt")
    await cps.undo(SID, None)
    assert (workspace / "old.txt").read_text() == "old\n"


async def test_a_created_file_that_became_a_directory_is_named_not_removed(
    workspace: Path, tmp_path: Path
) -> None:
    cps = checkpoints(tmp_path, workspace)
    await turn(cps, workspace, "echo x > made")
    (workspace / "made").unlink()
    (workspace / "made").mkdir()  # the user's: the undo must not touch it
    report = await cps.undo(SID, None)
    assert (workspace / "made").is_dir()
    assert report.removed == () and report.kept[0][0].path == "made"


async def test_a_write_inside_a_nested_repository_is_named_not_recorded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    git(ws / "sub", "init", "-q")
    cps = checkpoints(tmp_path, ws)
    t = cps.turn(SID, "user", "", "edit the nested one")
    await t.before_change(["sub/f.txt"])
    (ws / "sub" / "f.txt").write_text("x")
    (ws / "top.txt").write_text("t")
    record = await t.finish()
    assert record is not None
    assert [(c.path, c.recorded, c.why) for c in record.changes] == [
        ("top.txt", True, ""),
        ("sub/f.txt", False, "in a git repository of its own"),
    ]


async def test_a_git_repository_a_turn_created_is_named_and_left(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    cps = checkpoints(tmp_path, ws)
    record = await turn(
        cps, ws, "git init -q . && echo b > b.txt && git init -q lib && echo x > lib/x.py"
    )
    assert record is not None
    made = "a git repository the turn created"
    assert [(c.status, c.path, c.recorded, c.why) for c in record.changes] == [
        ("A", "b.txt", True, ""),
        ("A", ".git/", False, made),
        ("A", "lib/", False, made),
    ]
    assert "3 files: +b.txt, +.git/, +lib/" in turn_lines([record], time.time())[0]
    report = await cps.undo(SID, None)
    assert not (ws / "b.txt").exists()
    assert (ws / ".git" / "HEAD").is_file() and (ws / "lib" / "x.py").is_file()
    assert report_lines(report) == [
        "Took back turn 1 (you): removed b.txt (created by the turn).",
        f"Not taken back: .git/ ({made}); remove it yourself: rm -rf -- {ws / '.git'}",
        f"Not taken back: lib/ ({made}); remove it yourself: rm -rf -- {ws / 'lib'}",
    ]
    assert "left as they are now: .git/, lib/." in model_note(report)


async def test_a_repository_that_was_there_is_not_named(workspace: Path, tmp_path: Path) -> None:
    cps = checkpoints(tmp_path, workspace)
    first = await turn(cps, workspace, "git init -q lib")
    assert first is not None and [c.path for c in first.changes] == ["lib/"]
    record = await turn(cps, workspace, "echo n > n.txt; echo y > lib/y.py")
    assert record is not None
    assert [(c.path, c.recorded) for c in record.changes] == [("n.txt", True)]
