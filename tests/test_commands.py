"""The slash-command registry: parsing, idle rules, completion, help."""

from __future__ import annotations

import pytest

from zcoder.commands import (
    COMMANDS,
    ParsedCommand,
    Refused,
    complete,
    find,
    help_lines,
    interpret,
    parse,
    suggest,
)


def test_parse_known_command_with_args() -> None:
    parsed = parse("  /model qwen3:8b  ")
    assert parsed is not None
    assert parsed.command.name == "model"
    assert parsed.args == "qwen3:8b"


def test_parse_bare_command() -> None:
    parsed = parse("/quit")
    assert parsed is not None
    assert (parsed.command.name, parsed.args) == ("quit", "")


def test_unknown_slash_text_is_not_a_command() -> None:
    assert parse("/etc/passwd is odd") is None
    assert parse("/modelx") is None
    assert parse("hello /help") is None


def test_multiline_slash_text_goes_to_the_model() -> None:
    assert parse("/help\nplease") is None


def test_idle_rules() -> None:
    model, new, sessions, help_ = find("model"), find("new"), find("sessions"), find("help")
    assert model and new and sessions and help_
    assert not model.needs_idle("") and model.needs_idle("llama3")
    assert new.needs_idle("")
    assert not sessions.needs_idle("  ") and sessions.needs_idle("2")
    assert not help_.needs_idle("")


def test_complete_command_names() -> None:
    assert complete("/") == [f"/{c.name}" for c in COMMANDS]
    assert complete("/mo") == ["/model"]
    assert complete("/s") == ["/sessions", "/send"]
    assert complete("hello") == []


def test_complete_arguments() -> None:
    models = ["qwen3:8b", "qwen3-coder:latest", "llama3:8b"]
    assert complete("/model qw", models=models) == ["/model qwen3:8b", "/model qwen3-coder:latest"]
    assert complete("/sessions 1", sessions=["1", "2", "10"]) == ["/sessions 1", "/sessions 10"]
    assert complete("/agents p") == ["/agents pause"]
    assert complete("/quit x") == []
    assert complete("/model a b", models=["a"]) == []


def test_help_lines_follow_the_registry() -> None:
    lines = help_lines()
    assert [u for u, _ in lines] == [c.usage for c in COMMANDS]
    assert dict(lines)["/new"] == (
        "start a new session (the current one is saved; waits for a running turn to end)"
    )


def test_commands_without_arguments_refuse_one() -> None:
    new, help_, quit_, agents, model = (find(n) for n in ("new", "help", "quit", "agents", "model"))
    assert new and help_ and quit_ and agents and model
    assert new.arg_problem("extra") == "/new takes no argument (see /help)"
    assert help_.arg_problem("x") == "/help takes no argument (see /help)"
    assert quit_.arg_problem(" now ") == "/quit takes no argument (see /help)"
    assert new.arg_problem("") == new.arg_problem("  ") == ""
    assert agents.arg_problem("pause") == model.arg_problem("qwen3:8b") == ""


def test_send_takes_its_text_over_several_lines_and_runs_during_a_turn() -> None:
    parsed = parse("/send @beta fix the test\nthen run it\n")
    assert parsed is not None and parsed.command.name == "send"
    assert parsed.args == "@beta fix the test\nthen run it"
    assert not parsed.command.needs_idle(parsed.args)  # it starts no turn
    assert parse("/model a\nb") is None  # only /send spans lines


def test_send_completes_the_live_peers_labels() -> None:
    agents = ["@beta", "@beta-2", "@gamma", "300-3333"]
    assert complete("/send @b", agents=agents) == ["/send @beta", "/send @beta-2"]
    assert complete("/send ", agents=agents) == [f"/send {a}" for a in agents]
    assert complete("/send @beta some text", agents=agents) == []  # only the target


def test_agents_completes_the_inbound_actions() -> None:
    assert complete("/agents h") == ["/agents hold"]
    assert complete("/agents a") == ["/agents accept", "/agents approve"]
    assert complete("/agents in") == ["/agents inbox"]
    assert complete("/agents d") == ["/agents deny"]


@pytest.mark.parametrize(
    ("typed", "problem"),
    [
        ("/hepl", "unknown command /hepl: did you mean /help? (//hepl sends it to the model)"),
        ("/sesions", "unknown command /sesions: did you mean /sessions?"),
        ("  /exit now", "unknown command /exit: did you mean /quit?"),
        ("/mod", "unknown command /mod: did you mean /model?"),
        ("/s", "unknown command /s: did you mean /sessions or /send?"),
        ("/xyzzy plugh", "unknown command /xyzzy: see /help (//xyzzy sends it to the model)"),
        ("/hepl\nmore lines", "unknown command /hepl: did you mean /help?"),
        ("/help\nplease", "/help takes one line (//help sends this text to the model)"),
        ("/new extra", "/new takes no argument (see /help)"),
    ],
)
def test_a_command_attempt_that_cannot_run_is_refused(typed: str, problem: str) -> None:
    refused = interpret(typed)
    assert isinstance(refused, Refused)
    assert refused.problem.startswith(problem)


@pytest.mark.parametrize(
    "text",
    [
        "/etc/hosts is odd",
        "/usr/bin/foo is broken",
        "/tmp/x",
        "/Users is where",  # not a lower-case word: text
        "/hepl/me",
        "/model: which one is best?",
        "hello /hepl",
        "/ alone",
        "// a C comment",
        "",
    ],
)
def test_other_text_goes_to_the_model_as_typed(text: str) -> None:
    assert interpret(text) == text


def test_a_doubled_slash_sends_a_command_word_to_the_model() -> None:
    assert interpret("//hepl me") == "/hepl me"
    assert interpret("  //help\n") == "/help"
    assert interpret("//sessions are what?") == "/sessions are what?"


def test_a_known_command_runs() -> None:
    parsed = interpret(" /model qwen3:8b ")
    assert isinstance(parsed, ParsedCommand)
    assert (parsed.command.name, parsed.args) == ("model", "qwen3:8b")


def test_suggestions_come_from_the_registry_or_the_names_given() -> None:
    assert suggest("agent") == "/agents"
    assert suggest("sesion") == "/sessions"
    assert suggest("tmp") == suggest("etc") == ""
    assert suggest("paws", ("pause", "resume", "hold")) == "pause"
    assert suggest("acept", ("accept", "approve")) == "accept"
    assert suggest("x", ("pause",)) == ""
