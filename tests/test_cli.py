from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import zcoder
from zcoder import __version__
from zcoder.cli import main


def test_version_is_fast_and_light() -> None:
    code = "import sys; from zcoder.cli import main; main(['--version'])"
    out = subprocess.run(
        [sys.executable, "-c", code + "\n"], capture_output=True, text=True, check=False
    )
    assert out.stdout.strip() == f"zcoder {__version__}"
    probe = (
        "import sys, zcoder.cli; "
        "heavy = ('trio', 'httpx', 'prompt_toolkit', 'attrs', 'cattrs'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--profile", "x"], "--profile"),
        (["--context-window", "abc"], "--context-window: 'abc' is not a whole number from 256"),
        (["--context-window", "8_192"], "--context-window: '8_192' is not a whole number"),
        (["--context-window", "²"], "--context-window: '²' is not a whole number"),
        (["--bogus"], "unrecognized arguments"),
        (["--host", "ftp://x"], "--host"),
        # Headless server and remote client are out of scope (spec/core.md): not options.
        (["--server"], "unrecognized arguments: --server"),
        (["--connect", "http://x"], "unrecognized arguments: --connect http://x"),
        (["--agent-name", "two words"], "--agent-name: 'two words' is not an agent name"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_interactive_without_tty_suggests_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "--prompt" in capsys.readouterr().err


def test_help_lists_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for opt in (
        "--model",
        "--host",
        "--workspace",
        "--profile",
        "--yes",
        "--deny-commands",
        "--prompt",
        "--resume",
        "--no-think",
        "--no-warmup",
        "--context-window",
        "--debug-log",
        "--version",
        "ZCODER_RELAY",
        "agents",
    ):
        assert opt in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--temperature", "3"], "--temperature: '3' is not a number from 0 to 2"),
        (["--max-output-tokens", "lots"], "--max-output-tokens: 'lots' is not a whole number"),
    ],
)
def test_bad_model_bounds_exit_2_with_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_model_bound_flags_reach_the_config() -> None:
    from zcoder.cli import parse_options

    raw = parse_options(
        ["--temperature", "0.2", "--max-output-tokens", "512", "--no-text-tool-calls"]
    )
    assert (raw.temperature, raw.max_output_tokens, raw.no_text_tool_calls) == ("0.2", "512", True)


def test_a_bad_agent_name_variable_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ZCODER_AGENT_NAME", "no/slash")
    assert main(["-p", "hello"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "zcoder: ZCODER_AGENT_NAME: 'no/slash' is not an agent name: use 1 to 64 letters, "
        "digits, '.', '_' or '-', starting with a letter or digit\n"
    )


def test_help_names_every_variable_zcoder_reads(capsys: pytest.CaptureFixture[str]) -> None:
    # A variable missing from --help is one the user cannot find without reading the code.
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = set(re.findall(r"ZCODER_[A-Z_]*[A-Z]", capsys.readouterr().out))
    source = Path(zcoder.__file__).parent
    read = {
        name
        for path in source.rglob("*.py")
        for name in re.findall(r'"(ZCODER_[A-Z_]*[A-Z])"', path.read_text(encoding="utf-8"))
    }
    assert read - shown == set()
