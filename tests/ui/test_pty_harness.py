"""The pty harness itself: screen, scrollback, keys, terminal-mode check, cleanup."""

from __future__ import annotations

import re
import sys
import textwrap
import time

import pytest

from tests.ui.conftest import Launch
from tests.ui.pty_harness import pids_with_token, process_state

ECHO_PROGRAM = textwrap.dedent(
    """
    import sys
    for i in range(80):
        print(f"line {i:03d}")
    while True:
        try:
            text = input("ask> ")
        except EOFError:
            print("got EOF")
            break
        print(f"you said [{text}]")
    """
)

RAW_PROGRAM = textwrap.dedent(
    """
    import sys, termios, tty
    fd = sys.stdin.fileno()
    mode = termios.tcgetattr(fd)
    tty.setraw(fd)
    sys.stdout.write("\\x1b[?25l\\x1b[6nraw ready\\r\\n")
    sys.stdout.flush()
    keys = b""
    while not keys.endswith(b"q"):
        keys += sys.stdin.buffer.raw.read(1)
    sys.stdout.write(repr(keys) + "\\r\\n")
    sys.stdout.flush()
    if "restore" in sys.argv:
        termios.tcsetattr(fd, termios.TCSADRAIN, mode)
        sys.stdout.write("\\x1b[?25h")
    """
)


def test_screen_scrollback_and_input(launch: Launch) -> None:
    app = launch.argv([sys.executable, "-c", ECHO_PROGRAM])
    app.wait_for("ask>", where="screen")
    # 80 lines do not fit on 40 rows: the first ones live only in the scrollback.
    assert "line 000" not in app.screen_text()
    assert "line 000" in app.all_text()
    assert "line 079" in app.screen_text()
    app.send("hello")
    app.press("enter")
    assert app.wait_for(re.compile(r"you said \[\w+\]")) == "you said [hello]"
    app.press("ctrl-d")
    app.wait_for("got EOF")
    assert app.wait_exit() == 0
    app.assert_terminal_restored()


@pytest.mark.parametrize("restore", [True, False])
def test_raw_keys_cpr_and_restore_check(launch: Launch, restore: bool) -> None:
    args = ["restore"] if restore else []
    app = launch.argv([sys.executable, "-c", RAW_PROGRAM, *args])
    app.wait_for("raw ready")
    for key in ("escape", "ctrl-c", "alt-enter", "tab"):
        app.press(key)
    app.send("q")
    app.wait_for("q'")
    # The cursor-position request was answered by the emulator like a terminal would.
    assert "\\x1b[1;1R\\x1b\\x03\\x1b\\r\\tq" in app.raw_text()
    assert app.wait_exit() == 0
    if restore:
        app.assert_terminal_restored()
    else:
        with pytest.raises(AssertionError):
            app.assert_terminal_restored()
        assert "-echo" in app.stty().split()


def test_wait_for_reports_the_screen(launch: Launch) -> None:
    app = launch.argv([sys.executable, "-c", "print('visible text'); input()"])
    app.wait_for("visible text")
    with pytest.raises(AssertionError, match="visible text"):
        app.wait_for("never shown", timeout=0.2)


def test_terminate_kills_escaped_descendants(launch: Launch) -> None:
    # A grandchild in its own session survives a process-group kill; the token finds it.
    code = (
        "import subprocess, time; "
        "p = subprocess.Popen(['sleep', '30'], start_new_session=True); "
        "print('child', p.pid, flush=True); time.sleep(30)"
    )
    app = launch.argv([sys.executable, "-c", code])
    pid = int(app.wait_for(re.compile(r"child \d+")).split()[1])
    assert pid in pids_with_token(app.token)
    app.terminate()
    deadline = time.monotonic() + 5
    while process_state(pid) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_state(pid) in (None, "Z")
    assert pids_with_token(app.token) == []
