"""Asking for the sandbox: flags, variables and file keys, and what start-up does where the
sandbox cannot work (refuse a flag or a variable, let a config file's commands ask)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from zcoder.cli import main
from zcoder.config import Config, RawOptions, load_config
from zcoder.config_file import load_layers
from zcoder.errors import ConfigError
from zcoder.sandbox.probe import SandboxCheck, check_sandbox
from zcoder.sandbox.settle import settle_sandbox, status_label

MISSING = SandboxCheck(False, reason="bwrap is not installed", fix="install the bubblewrap package")


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A PATH without bwrap, and the probe's remembered answer forgotten around it."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    check_sandbox.cache_clear()
    yield
    check_sandbox.cache_clear()


def settle(tmp_path: Path, opts: RawOptions, env: dict[str, str], file: str = "") -> Config:
    home = tmp_path / "zh"
    home.mkdir(exist_ok=True)
    if file:
        (home / "config.toml").write_text(file)
    env = {"ZCODER_HOME": str(home), "HOME": str(tmp_path), **env}
    layers, config = load_layers(attrs.evolve(opts, workspace=str(tmp_path)), env)
    return settle_sandbox(layers, config, lambda: MISSING)


def test_the_flag_and_the_variable_are_refused_with_the_reason_and_the_package(
    tmp_path: Path,
) -> None:
    cases = [
        (RawOptions(sandbox=True), {}, "--sandbox"),
        (RawOptions(), {"ZCODER_COMMAND_POLICY": "sandbox"}, "ZCODER_COMMAND_POLICY=sandbox"),
        (RawOptions(), {"ZCODER_RELAY_COMMANDS": "sandbox"}, "ZCODER_RELAY_COMMANDS=sandbox"),
    ]
    for opts, env, name in cases:
        with pytest.raises(ConfigError) as info:
            settle(tmp_path, opts, env)
        assert str(info.value) == (
            f"{name}: the sandbox cannot work here: bwrap is not installed "
            "(install the bubblewrap package)"
        )


def test_a_config_file_asking_for_it_makes_commands_ask_and_says_so(tmp_path: Path) -> None:
    file = 'command_policy = "sandbox"\n[relay]\ncommands = "sandbox"\n'
    config = settle(tmp_path, RawOptions(), {}, file)
    assert config.command_policy == "ask" and config.relay.commands == "ask"
    assert config.sandbox_note == (
        f'config file {tmp_path}/zh/config.toml: command_policy = "sandbox" and [relay] '
        'commands = "sandbox": the sandbox cannot work here: bwrap is not installed (install '
        "the bubblewrap package); commands ask instead"
    )


def test_the_questions_that_say_unsandboxed_are_those_of_the_turns_meant_for_it(
    tmp_path: Path,
) -> None:
    relayed = settle(tmp_path, RawOptions(), {}, '[relay]\ncommands = "sandbox"\n')
    assert relayed.unsandboxed == {"relay"}  # local turns' commands always asked
    every = settle(tmp_path, RawOptions(), {}, 'command_policy = "sandbox"\n')
    assert every.unsandboxed == {"user", "relay"}  # relayed ones follow the policy
    file = 'command_policy = "sandbox"\n[relay]\ncommands = "deny"\n'
    assert settle(tmp_path, RawOptions(), {}, file).unsandboxed == {"user"}


def test_nothing_is_probed_when_nothing_asks_for_it(tmp_path: Path) -> None:
    home = tmp_path / "zh"
    layers, config = load_layers(RawOptions(workspace=str(tmp_path)), {"ZCODER_HOME": str(home)})

    def never() -> SandboxCheck:
        raise AssertionError("probed")

    assert settle_sandbox(layers, config, never) is config


def test_flags_and_settings(tmp_path: Path) -> None:
    ws = str(tmp_path)
    with pytest.raises(ConfigError, match="--yes: cannot be combined with --sandbox"):
        load_config(RawOptions(workspace=ws, yes=True, sandbox=True), {})
    with pytest.raises(ConfigError, match="--sandbox: is refused with the sysadmin profile"):
        load_config(RawOptions(workspace=ws, sandbox=True, profile="sysadmin"), {})
    env = {"ZCODER_COMMAND_POLICY": "sandbox", "ZCODER_PROFILE": "sysadmin"}
    with pytest.raises(ConfigError, match="ZCODER_COMMAND_POLICY=sandbox: is refused"):
        load_config(RawOptions(workspace=ws), env)
    config = load_config(RawOptions(workspace=ws, sandbox=True, sandbox_network=True), {})
    assert (config.command_policy, config.sandbox_network) == ("sandbox", True)
    assert status_label(config) == "commands sandboxed + network"
    relayed = load_config(RawOptions(workspace=ws), {"ZCODER_RELAY_COMMANDS": "sandbox"})
    assert relayed.relay.commands == "sandbox"
    assert status_label(relayed) == "relayed commands sandboxed"
    bad = load_config(RawOptions(workspace=ws), {"ZCODER_RELAY_COMMANDS": "yes"})
    assert bad.relay.mode == "off"  # a bad relay setting fails closed: no relayed work
    assert "ZCODER_RELAY_COMMANDS: 'yes' is not one of ask, sandbox, deny" in bad.relay_problem
    assert status_label(bad) == ""


def test_the_file_keys(tmp_path: Path) -> None:
    file = 'sandbox_network = true\n[relay]\ncommands = "deny"\n'
    config = settle(tmp_path, RawOptions(), {}, file)
    assert config.sandbox_network and config.relay.commands == "deny"


def test_zcoder_sandbox_exits_2_with_one_line_where_bwrap_is_missing(
    no_bwrap: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--sandbox", "-w", str(tmp_path), "-p", "hello"]) == 2
    assert capsys.readouterr().err == (
        "zcoder: --sandbox: the sandbox cannot work here: bwrap is not installed "
        "(install the bubblewrap package)\n"
    )


def test_zcoder_config_says_whether_the_sandbox_works(
    no_bwrap: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    said = "cannot work here: bwrap is not installed (install the bubblewrap package)"
    assert ["sandbox", *said.split(), "checked", "now"] in rows


def test_a_bwrap_that_cannot_make_namespaces_is_named_once_with_its_own_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # What bubblewrap says in a container that forbids user namespaces.
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    check_sandbox.cache_clear()
    try:
        found = check_sandbox()
    finally:
        check_sandbox.cache_clear()
    assert not found.works and found.bwrap == str(fake)
    assert found.reason == (
        "user namespaces are not available here (bwrap: setting up uid map: Permission denied)"
    )


def test_sandbox_network_alone_is_refused_as_it_would_sandbox_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        settle(tmp_path, RawOptions(sandbox_network=True), {})
    assert str(info.value) == (
        "--sandbox-network: no command runs in the sandbox: add --sandbox (or [relay] "
        'commands = "sandbox")'
    )
    # Beside a sandbox of relayed commands it has a meaning; the variable (a shell's
    # profile) or the file's key may be set for every run, sandboxed or not.
    file = '[relay]\ncommands = "sandbox"\n'
    assert settle(tmp_path, RawOptions(sandbox_network=True), {}, file).sandbox_network
    (tmp_path / "zh" / "config.toml").unlink()
    assert settle(tmp_path, RawOptions(), {"ZCODER_SANDBOX_NETWORK": "on"}).sandbox_network
