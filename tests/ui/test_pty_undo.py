"""Issue 26's proof in a real terminal: after a local turn and a relayed turn that edit,
create and delete files by commands, ``/undo`` takes back the relayed turn alone and keeps
the user's own edit meanwhile, a second ``/undo`` takes back the local turn, and ``git
status`` shows only the user's edit; the workspace's ``.git`` is byte-identical. And the
turns of a session survive quit and ``--resume``."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from tests.ui.conftest import (
    APPROVAL_QUESTION,
    RESUME_HINT,
    Launch,
    PtyDirs,
    StartFake,
    command_response,
    script,
    submit,
    text_response,
    wait_ready,
)
from tests.ui.pty_harness import PtyApp
from tests.ui.test_pty_relay import instance_id, send_from, start_agent


def _git(ws: Path, *args: str) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_AUTHOR_NAME": "u",
        "GIT_AUTHOR_EMAIL": "u@x",
        "GIT_COMMITTER_NAME": "u",
        "GIT_COMMITTER_EMAIL": "u@x",
    }
    done = subprocess.run(["git", *args], cwd=ws, env=env, capture_output=True, check=True)
    return done.stdout.decode()


def _digest(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class _Rewind:
    """Asks ``/rewind`` (it runs at once, also during a turn) again after each answer,
    until it lists ``turn``."""

    _ANSWER = re.compile(r"Turns of this session that changed files:|No turn of this session")

    def __init__(self, turn: re.Pattern[str]) -> None:
        self.turn = turn
        self.asked = 0

    def __call__(self, app: PtyApp) -> bool:
        text = app.all_text()
        if self.turn.search(text):
            return True
        if len(self._ANSWER.findall(text)) >= self.asked:
            submit(app, "/rewind")
            self.asked += 1
        return False


def test_undo_takes_back_the_relayed_turn_then_the_local_one_keeping_the_users_edit(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(
        launch,
        start_fake,
        pty_dirs,
        "beta",
        command_response("echo local >> a.txt; echo new > local.txt; rm b.txt"),
        text_response("Local turn done."),
        command_response("echo relayed >> c.txt; echo r > relayed.txt; rm d.txt"),
        text_response("Relayed turn done."),
    )
    ws = b.workspace
    for name in "abcd":
        (ws / f"{name}.txt").write_text(f"{name}\n")
    _git(ws, "init", "-q")
    _git(ws, "add", ".")
    _git(ws, "commit", "-qm", "start")
    dot_git = _digest(ws / ".git")

    submit(b.app, "change a few files")
    b.app.wait_for(APPROVAL_QUESTION, where="screen")
    b.app.send("y")
    b.app.wait_for("Local turn done.")
    send_from(a, instance_id(a, "beta"), "tidy up c and d", "tell beta")
    b.app.wait_for(APPROVAL_QUESTION, where="screen", timeout=15)
    b.app.send("y")
    b.app.wait_for("Relayed turn done.")
    # Listed once the turn has ended (its end snapshot taken): an edit before that would
    # be the turn's own.
    turn_two = re.compile(r"2\. \d\d:\d\d  relayed by alpha \(pid \d+\): 'tidy up c and d'")
    b.app.wait_until(_Rewind(turn_two), "/rewind listing turn 2", 10)
    b.app.wait_for(re.compile(r"1\. \d\d:\d\d  you: 'change a few files'  3 files"))
    (ws / "c.txt").write_text("the user's own c\n")  # the user's edit, outside zcoder

    submit(b.app, "/undo")
    b.app.wait_for(
        re.compile(r"Took back turn 2 \(relayed by alpha \(pid \d+\)\): restored d\.txt")
    )
    b.app.wait_for("Kept c.txt as it is: it changed since turn 2 outside zcoder")
    assert (ws / "d.txt").read_text() == "d\n"
    assert not (ws / "relayed.txt").exists()
    assert (ws / "local.txt").exists()  # the local turn stands
    assert (ws / "c.txt").read_text() == "the user's own c\n"

    submit(b.app, "/undo")
    b.app.wait_for("Took back turn 1 (you): restored a.txt, b.txt; removed local.txt")
    assert _digest(ws / ".git") == dot_git  # before git status, which refreshes the index
    assert _git(ws, "status", "--porcelain") == " M c.txt\n"


def test_after_quit_and_resume_undo_takes_the_turn_back(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    fake = start_fake(script(command_response("echo made > made.txt"), text_response("Made it.")))
    ws = pty_dirs.workspace
    first = launch.zcoder(fake.url)
    wait_ready(first)
    submit(first, "make a file")
    first.wait_for(APPROVAL_QUESTION, where="screen")
    first.send("y")
    first.wait_for("Made it.")
    first.press("ctrl-d")
    assert first.wait_exit() == 0
    sid = first.wait_for(RESUME_HINT, timeout=2).split()[-1]
    assert (ws / "made.txt").exists()

    again = launch.zcoder(fake.url, "--resume", sid)
    wait_ready(again)
    submit(again, "/undo")
    again.wait_for("Took back turn 1 (you): removed made.txt (created by the turn).")
    assert not (ws / "made.txt").exists()
