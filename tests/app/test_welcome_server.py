"""The start-up line names the model server in use, and says when none was found."""

from __future__ import annotations

from pathlib import Path

import attrs

from tests.app.test_welcome import Screen
from zcoder.agent.connect import ServerChoice
from zcoder.app.welcome import welcome as print_welcome
from zcoder.config import RawOptions, load_config


class Backend:
    model = "smollm2:135m"
    session_id = "1796_01"

    def session_events(self) -> list[object]:
        return []


def lines(tmp_path: Path, choice: ServerChoice) -> list[str]:
    screen = Screen(200)
    print_welcome(choice.config, Backend(), screen, choice)  # type: ignore[arg-type]
    return screen.text.splitlines()


def test_an_auto_detected_server_is_named_on_the_first_line(tmp_path: Path) -> None:
    config = load_config(RawOptions(workspace=str(tmp_path)), {})
    config = attrs.evolve(
        config,
        host="http://127.0.0.1:8080/v1",
        api="openai",
        server_kind="llama.cpp",
        server_note="auto-detected",
    )
    got = lines(tmp_path, ServerChoice(config, "model server: ..."))
    assert got[0] == (
        "zcoder 0.1.0 · model smollm2:135m · llama.cpp at http://127.0.0.1:8080/v1 (auto-detected)"
    )


def test_none_found_names_no_host_and_leaves_the_line_to_the_check(tmp_path: Path) -> None:
    # The start-up check says what was tried (once): the header names no host.
    config = load_config(RawOptions(workspace=str(tmp_path)), {})
    got = lines(tmp_path, ServerChoice(config, "no model server found (tried ...)", found=False))
    assert got[0] == "zcoder 0.1.0 · model smollm2:135m · no model server found"
    assert not any("tried" in line or "11434" in line for line in got)


def test_a_host_found_to_speak_openai_says_where_it_was_given(tmp_path: Path) -> None:
    config = load_config(RawOptions(workspace=str(tmp_path), host="127.0.0.1:18431"), {})
    config = attrs.evolve(
        config,
        host="http://127.0.0.1:18431/v1",
        api="openai",
        server_kind="llama.cpp",
        server_note="found at " + config.host_source,
    )
    got = lines(tmp_path, ServerChoice(config, "model server: ..."))
    assert got[0].endswith(
        "llama.cpp at http://127.0.0.1:18431/v1 (found at --host 127.0.0.1:18431)"
    )


def test_a_session_opened_in_its_own_workspace_says_so(tmp_path: Path) -> None:
    config = load_config(RawOptions(workspace=str(tmp_path)), {})
    note = f"session 1796_01 belongs to workspace {tmp_path} (coding profile): opened there"
    config = attrs.evolve(config, resume="1796_01", resume_note=note)
    got = lines(tmp_path, ServerChoice(config, "model server: ..."))
    assert note in got


def test_the_header_breaks_between_its_parts_never_inside_one() -> None:
    from zcoder.app.welcome import header_rows

    line = (
        "workspace /home/me/projects/weekly-digest-service · profile coding · session 17_41 (new)"
    )
    assert header_rows(line, 80) == [
        "workspace /home/me/projects/weekly-digest-service · profile coding",
        "session 17_41 (new)",
    ]
    assert header_rows(line, 200) == [line]
    assert header_rows("a · " + "x" * 90, 80) == ["a", "x" * 90]  # word-wrapped when drawn
