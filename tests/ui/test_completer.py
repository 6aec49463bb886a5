"""The Tab menu: a command's help beside it, and beside an argument what the app says of
it (a send target's label, pid and workspace)."""

from __future__ import annotations

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from zcoder.ui.terminal import SlashCompleter


def _menu(completer: SlashCompleter, text: str) -> list[tuple[str, str]]:
    found = completer.get_completions(Document(text), CompleteEvent())
    return [(c.text, c.display_meta_text) for c in found]


def test_a_command_shows_its_help_and_a_target_its_description() -> None:
    options = {
        "/se": ["/send", "/sessions"],
        "/send ": ["/send 300-aaaa1111", "/send 301-bbbb2222"],
    }
    described = {
        "/send 300-aaaa1111": "@api (pid 300, /w/one/api)",
        "/send 301-bbbb2222": "@api (pid 301, /w/two/api)",
    }
    completer = SlashCompleter(lambda text: options.get(text, []), lambda o: described.get(o, ""))
    menu = _menu(completer, "/se")
    assert [text for text, _ in menu] == ["/send", "/sessions"]
    assert all(meta for _, meta in menu)  # each command's help
    assert _menu(completer, "/send ") == [
        ("/send 300-aaaa1111", "@api (pid 300, /w/one/api)"),
        ("/send 301-bbbb2222", "@api (pid 301, /w/two/api)"),
    ]
