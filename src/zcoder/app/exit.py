"""How an interactive run ended (``Exit``, filled in as it goes) and what is printed after
the terminal is restored: any traceback, how to resume, and the relayed messages the exit
stopped or dropped, wrapped at words (the terminal would cut them at its edge)."""

from __future__ import annotations

import shutil
import signal
import sys
import textwrap
import traceback
from typing import Any

import attrs

from zcoder.ui.backend import Unrun
from zcoder.ui.text import one_line, shorten, visible_text

__all__ = ["SIGNALS", "Exit", "report"]

SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP", signal.SIGINT: "SIGINT"}


@attrs.define
class Exit:
    """How the run ended; filled in as it goes, read by ``run_app`` at the very end."""

    reason: str = "user"
    session_id: str = ""
    resume: str = ""  # the command that reopens it (``Config.resume_command``)
    saved: bool = False
    crash: BaseException | None = None
    request: Any = None  # set once Trio is up: callable(reason) that asks for the exit
    pending: str = ""  # an exit asked for before Trio was ready
    dropped: list[Unrun] = attrs.Factory(list)  # accepted relayed messages that never ran
    told: bool = False  # their zcoder senders were sent a ``dropped`` receipt


def report(state: Exit) -> int:
    try:
        if state.crash is not None:
            sys.stderr.write("zcoder crashed; the terminal was restored. Traceback:\n")
            traceback.print_exception(state.crash, file=sys.stderr)
        if state.saved:
            sid = state.session_id
            sys.stdout.write(f"Session {sid} saved. Resume with: {state.resume}\n")
        sys.stdout.write(_dropped_lines(state.dropped, told=state.told))
        sys.stdout.flush()
    except OSError:
        pass  # the terminal hung up: the session is saved all the same
    if state.crash is not None:
        return 1
    signum = next((s for s, name in SIGNALS.items() if name == state.reason), None)
    return 128 + int(signum) if signum is not None else 0


def _dropped_lines(dropped: list[Unrun], *, told: bool, width: int = 0) -> str:
    """The exit's last lines: the relayed message it stopped and those it dropped, and
    whether the senders were told (they are not when the exit cancelled the receipts with
    everything else)."""
    if not dropped:
        return ""
    receipt = "a cancelled or dropped" if any(u.running for u in dropped) else "a dropped"
    why = f"zcoder senders get {receipt} receipt" if told else "their senders were not told"
    width = width or shutil.get_terminal_size((80, 24)).columns
    # Wrapped here: after the app, the terminal would cut words at its edge.
    head = f"{_stopped_and_dropped(dropped).capitalize()} ({why}):"
    lines = textwrap.wrap(head, width, subsequent_indent="  ", break_long_words=False)
    for u in dropped:
        task = shorten(one_line(u.task), 60)
        how = "running, " if u.running else ""
        item = f"- {how}from {visible_text(one_line(u.sender))}: {visible_text(task)}"
        lines += textwrap.wrap(item, width, subsequent_indent="  ", break_long_words=False)
    return "\n".join(lines) + "\n"


def _stopped_and_dropped(dropped: list[Unrun]) -> str:
    """``stopped 1 running relayed message and dropped 2 that had not run`` and the like."""
    running = sum(u.running for u in dropped)
    waiting = len(dropped) - running
    parts = ["stopped 1 running relayed message"] if running else []
    if waiting:
        many = waiting > 1
        noun = (
            "that had not run"
            if running
            else (f"accepted relayed message{'s' if many else ''} that had not run")
        )
        parts.append(f"dropped {waiting} {noun}")
    return " and ".join(parts)
