"""The app's first lines: the header (version, model, server, workspace, session), the
last entries of a resumed session drawn again, and the hint; and how many entries a
replay draws, for the start and for ``/sessions N`` alike (``app/idle.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zcoder import __version__
from zcoder.agent.connect import ServerChoice, describe
from zcoder.config import Config
from zcoder.ui.render import render_event
from zcoder.ui.text import model_label, visible
from zcoder.ui.wrap import wrap_fragments

if TYPE_CHECKING:
    from zcoder.app.backend import AgentBackend
    from zcoder.ui.terminal import Terminal

__all__ = ["REPLAY", "header_rows", "not_shown", "welcome"]

REPLAY = 20  # a session's last entries, drawn again when it is resumed or switched to


def not_shown(entries: int) -> str:
    """What a replay of ``entries`` leaves out (``12 earlier entries not shown``), or ""."""
    hidden = entries - REPLAY
    if hidden <= 0:
        return ""
    return f"{hidden} earlier {'entry' if hidden == 1 else 'entries'} not shown"


def header_rows(line: str, width: int) -> list[str]:
    """The header's ``a · b · c`` parts packed into rows of ``width``: a row breaks only
    between two parts (``session 1796_42`` never splits from its id), and a part too long
    for a row of its own is word-wrapped there."""
    rows: list[str] = []
    for part in line.split(" · "):
        if rows and len(rows[-1]) + 3 + len(part) <= width:
            rows[-1] += " · " + part
        else:
            rows.append(part)
    return rows


def welcome(
    config: Config, backend: AgentBackend, terminal: Terminal, choice: ServerChoice | None = None
) -> None:
    resumed = backend.session_events()
    # No host is named that was not found: the start-up check then says, once, what was
    # tried (the client of a run that found none says it: ``connect.NoServer``).
    if choice is None:  # not chosen (yet): only the configured host is known
        server = f"host {config.host}"
    else:
        server = describe(config) if choice.found else "no model server found"
    lines = [
        f"zcoder {__version__} · model {model_label(backend.model)} · {server}",
        f"workspace {config.workspace} · profile {config.profile} · session "
        f"{backend.session_id}" + (" (resumed)" if config.resume else " (new)"),
    ]
    if config.agent_name:  # what other instances list, and what their /send @NAME reaches
        lines[1] += f" · agent name {config.agent_name}"
    if config.resume_note:  # a resumed session opened in its own workspace, not here
        lines.append(config.resume_note)
    if config.relay_problem:
        lines.append(config.relay_problem)
    if config.sandbox_note:  # the config file asked for the sandbox: commands ask instead
        lines.append(config.sandbox_note)
    width = terminal.width()
    for line in lines:  # a long workspace path must split neither a word nor a phrase
        for row in header_rows(line, width):
            terminal.print_above(wrap_fragments(visible(row, "class:system"), width))
    if skipped := not_shown(len(resumed)):  # say where the replay starts, as /sessions N does
        terminal.print_above([("class:dim", f"… {skipped}\n")])
    for event in resumed[-REPLAY:]:
        terminal.print_above(render_event(event, width=width))
    hint = "Type a message · /help for commands · Esc stops a turn · Ctrl-D quits"
    terminal.print_above(wrap_fragments([("class:dim", hint)], width))
