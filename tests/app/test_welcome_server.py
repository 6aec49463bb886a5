"""The start-up line names the model server in use, and says when none was found."""

from __future__ import annotations

from pathlib import Path

import attrs

from tests.app.test_welcome import Screen
from zcoder.agent.connect import ServerChoice
from zcoder.app.main import _welcome
from zcoder.config import RawOptions, load_config


class Backend:
    model = "smollm2:135m"
    session_id = "1796_01"

    def session_events(self) -> list[object]:
        return []


def lines(tmp_path: Path, choice: ServerChoice) -> list[str]:
    screen = Screen(200)
    _welcome(choice.config, Backend(), screen, choice)  # type: ignore[arg-type]
    return screen.text.splitlines()


def test_an_auto_detected_server_is_named_on_the_first_line(tmp_path: Path) -> None:
    config = load_config(RawOptions(workspace=str(tmp_path)), {})
    config = attrs.evolve(
        config, host="http://127.0.0.1:8080/v1", api="openai", server_kind="llama.cpp"
    )
    got = lines(tmp_path, ServerChoice(config, "model server: ..."))
    assert got[0] == (
        "zcoder 0.1.0 · model smollm2:135m · llama.cpp at http://127.0.0.1:8080/v1 (auto-detected)"
    )


def test_none_found_adds_the_line_that_says_what_was_tried(tmp_path: Path) -> None:
    config = load_config(RawOptions(workspace=str(tmp_path)), {})
    got = lines(tmp_path, ServerChoice(config, "no model server found (tried ...)", found=False))
    assert got[0] == "zcoder 0.1.0 · model smollm2:135m · host http://127.0.0.1:11434"
    assert got[2] == "no model server found (tried ...)"
