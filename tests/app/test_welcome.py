"""The start-up lines of the interactive app: what they say and how they wrap."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from prompt_toolkit.formatted_text import StyleAndTextTuples, to_plain_text

from zcoder.app.welcome import welcome as print_welcome
from zcoder.conversation import TranscriptEvent


class Screen:
    def __init__(self, width: int) -> None:
        self.columns = width
        self.printed: list[str] = []

    def width(self) -> int:
        return self.columns

    def print_above(self, fragments: StyleAndTextTuples) -> None:
        self.printed.append(to_plain_text(fragments))

    @property
    def text(self) -> str:
        return "".join(self.printed)


def welcome(width: int, events: list[TranscriptEvent], **config: Any) -> str:
    settings = {
        "host": "http://127.0.0.1:11434",
        "workspace": "/home/me/projects/a-rather-long-workspace-name",
        "profile": "coding",
        "resume": "",
        "relay_problem": "",
        "agent_name": "",
        "resume_note": "",
        "sandbox_note": "",
    }
    settings.update(config)
    backend = SimpleNamespace(
        model="qwen3-coder:latest", session_id="1796_01", session_events=lambda: events
    )
    screen = Screen(width)
    print_welcome(cast(Any, SimpleNamespace(**settings)), cast(Any, backend), cast(Any, screen))
    return screen.text


def test_start_up_names_model_host_workspace_profile_and_session() -> None:
    text = welcome(120, [])
    assert text.splitlines() == [
        "zcoder 0.1.0 · model qwen3-coder:latest · host http://127.0.0.1:11434",
        "workspace /home/me/projects/a-rather-long-workspace-name · profile coding · session "
        "1796_01 (new)",
        "Type a message · /help for commands · Esc stops a turn · Ctrl-D quits",
    ]


def test_an_agent_name_is_in_the_welcome_line() -> None:
    second = welcome(200, [], agent_name="reviewer").splitlines()[1]
    assert second.endswith("session 1796_01 (new) · agent name reviewer")


def test_start_up_lines_wrap_at_words_in_a_narrow_terminal() -> None:
    rows = welcome(50, []).splitlines()
    assert rows == [  # a row breaks between two · parts ("host" stays with its URL)
        "zcoder 0.1.0 · model qwen3-coder:latest",
        "host http://127.0.0.1:11434",
        "workspace",  # a part wider than a row is word-wrapped on rows of its own
        "/home/me/projects/a-rather-long-workspace-name",
        "profile coding · session 1796_01 (new)",
        "Type a message · /help for commands · Esc stops a",
        "turn · Ctrl-D quits",
    ]


def test_a_resumed_session_replays_its_last_entries_and_says_what_is_left_out() -> None:
    events = [TranscriptEvent("user", f"question {n}") for n in range(25)]
    text = welcome(120, events, resume="1796_01")
    assert "session 1796_01 (resumed)" in text
    assert "… 5 earlier entries not shown\n" in text
    assert "question 4\n" not in text and "› question 5\n" in text and "› question 24\n" in text
    assert text.index("not shown") < text.index("question 5")
    assert "not shown" not in welcome(100, events[:20], resume="1796_01")


def test_a_config_file_asking_for_an_unusable_sandbox_is_said_at_start_up() -> None:
    note = (
        'config file ~/.config/zcoder/config.toml: command_policy = "sandbox": the sandbox '
        "cannot work here: bwrap is not installed (install the bubblewrap package); "
        "commands ask instead"
    )
    text = welcome(400, [], sandbox_note=note)
    assert note in text.splitlines()
