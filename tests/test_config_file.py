"""``$ZCODER_HOME/config.toml``: flag > environment > file > default, and every bad file
is one line naming the file (and the key) with exit status 2."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from zcoder.cli import main
from zcoder.config import RawOptions
from zcoder.config_file import FILE_KEYS, load_layers, load_settings
from zcoder.errors import ConfigError

GOOD = """\
model = "file-model"
host = "file-host:8080"
profile = "sysadmin"
compact_at = 70
temperature = 0.5
warmup = false
think = false
context_window = 32768
agent_name = "from-file"

[relay]
max_queue = 8
inbound = "hold"
io_timeout = 3
question_timeout = 60
"""


def home_with(tmp_path: Path, text: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text)
    return {"ZCODER_HOME": str(home), "HOME": str(tmp_path)}


def refused(opts: RawOptions, env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(opts, env)
    return str(info.value)


def test_the_file_sets_what_no_flag_or_variable_does(tmp_path: Path) -> None:
    c = load_settings(RawOptions(workspace=str(tmp_path)), home_with(tmp_path, GOOD))
    assert (c.model, c.host, c.profile, c.compact_at) == (
        "file-model",
        "http://file-host:8080",
        "sysadmin",
        70,
    )
    assert (c.temperature, c.warmup, c.think, c.context_window) == (0.5, False, False, 32768)
    assert (c.relay.max_queue, c.relay.inbound, c.relay.io_timeout) == (8, "hold", 3.0)
    assert c.relay.question_timeout == 60.0
    assert c.agent_name == "from-file" and c.relay_problem == ""
    # The file counts as configured: no auto-detection, no default model to replace.
    assert not c.autodetect and not c.model_default
    assert c.host_source == f"file-host:8080 (host in {tmp_path / 'home' / 'config.toml'})"


def test_flags_beat_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    env = home_with(tmp_path, GOOD) | {
        "ZCODER_MODEL": "env-model",
        "ZCODER_COMPACT_AT": "60",
        "ZCODER_RELAY_MAX_QUEUE": "4",
    }
    opts = RawOptions(workspace=str(tmp_path), model="flag-model", context_window=4096)
    c = load_settings(opts, env)
    assert (c.model, c.compact_at, c.relay.max_queue) == ("flag-model", 60, 4)
    assert c.context_window == 4096  # a flag-only setting: the flag beats the file
    assert c.profile == "sysadmin" and c.relay.inbound == "hold"  # from the file
    c = load_settings(RawOptions(workspace=str(tmp_path)), env)
    assert (c.model, c.compact_at, c.context_window) == ("env-model", 60, 32768)


def test_zcoder_host_beats_the_file_which_beats_ollama_host(tmp_path: Path) -> None:
    env = home_with(tmp_path, 'host = "file:1"\n') | {"OLLAMA_HOST": "ollama:2"}
    assert load_settings(RawOptions(workspace="."), env).host == "http://file:1"
    env["ZCODER_HOST"] = "zcoder:3"
    assert load_settings(RawOptions(workspace="."), env).host == "http://zcoder:3"


def test_an_empty_variable_leaves_the_file_in_force(tmp_path: Path) -> None:
    env = home_with(tmp_path, 'model = "file-model"\n') | {"ZCODER_MODEL": ""}
    assert load_settings(RawOptions(workspace="."), env).model == "file-model"


def test_no_file_is_the_defaults(tmp_path: Path) -> None:
    env = {"ZCODER_HOME": str(tmp_path / "none"), "HOME": str(tmp_path)}
    layers, c = load_layers(RawOptions(workspace="."), env)
    assert not layers.found and layers.from_file == {}
    assert (c.model, c.compact_at, c.relay.max_queue) == ("qwen3-coder:latest", 80, 16)


def test_a_flag_makes_a_bad_file_value_irrelevant(tmp_path: Path) -> None:
    env = home_with(tmp_path, 'command_policy = "maybe"\ncompact_at = 120\n')
    c = load_settings(RawOptions(workspace=".", yes=True, compact_at="50"), env)
    assert (c.command_policy, c.compact_at) == ("allow", 50)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('model = "unterminated\n', ": line 1, column 22: illegal character"),
        ("compact_at = \n", ": line 1, column 14: invalid value"),
        ("[relay]\n[relay]\n", ": line 2, column 7: cannot declare ('relay',) twice"),
        ("compat_at = 70\n", ": compat_at: unknown setting; did you mean compact_at?"),
        (
            "max_queue = 3\n",
            ": max_queue: unknown setting; did you mean relay.max_queue? (write max_queue "
            "under a [relay] line)",
        ),
        (
            "[relay]\nmax_queue = 3\ncompact_at = 70\n",
            ": relay.compact_at: unknown setting; compact_at is a top-level setting: move it "
            "above the first [table] line (every key after [relay] belongs to that table)",
        ),
        (
            "[relay]\nmax_que = 3\n",
            ": relay.max_que: unknown setting; did you mean relay.max_queue?",
        ),
        ("zzz = 1\n", ": zzz: unknown setting\n"),
        ("home = '/x'\n", ": home: cannot be set in the file it holds (use ZCODER_HOME)"),
        ("relay = 'on'\n", ": relay: expected a table ([relay])"),
        ('compact_at = "70"\n', ": compact_at: expected an integer, not str '70'"),
        ("model = 5\n", ": model: expected a string, not int 5"),
        ("temperature = true\n", ": temperature: expected a number, not bool True"),
        ("max_output_tokens = 1.5\n", ": max_output_tokens: expected an integer, not float 1.5"),
        ("warmup = 1\n", ': warmup: expected true, false, or a string ("on", "off"), not int 1'),
        ("[model]\n", ": model: expected a string, not dict {}"),
        ("model = ''\n", ": model: is empty (leave the key out for the default)"),
        # Values: checked by the same code as the environment's, naming the file's key.
        ("compact_at = 120\n", ": compact_at: '120' is not a whole number from 25 to 90"),
        ("temperature = 2.5\n", ": temperature: '2.5' is not a number from 0 to 2"),
        ("profile = 'ops'\n", ": profile: 'ops' is not one of coding, sysadmin"),
        ("warmup = 'yes'\n", ": warmup: 'yes' is not one of on, off"),
        ("think = 'maybe'\n", ": think: 'maybe' is not one of on, off"),
        ("context_window = 5\n", ": context_window: 5 is not from 256 to 2097152"),
        ("host = 'ftp://x'\n", ": host: 'ftp://x' is not a URL like http://127.0.0.1:11434"),
        ("workspace = '/nonexistent/zz'\n", ": workspace: '/nonexistent/zz' does not exist"),
        ("agent_name = 'a b'\n", ": agent_name: 'a b' is not an agent name"),
        (
            'profile = "sysadmin"\ncommand_policy = "allow"\n',
            ": command_policy = 'allow': is refused with the sysadmin profile",
        ),
        (
            'profile = "sysadmin"\n[relay]\ncommands = "sandbox"\n',
            ": relay.commands = 'sandbox': is refused with the sysadmin profile: every command"
            " asks and runs outside the sandbox",
        ),
    ],
)
def test_every_bad_file_names_the_file_and_key(tmp_path: Path, text: str, problem: str) -> None:
    env = home_with(tmp_path, text)
    message = refused(RawOptions(), env) + "\n"
    assert message.startswith(f"config file {env['ZCODER_HOME']}/config.toml{problem}")
    assert message.count("\n") == 1


def test_a_bad_variable_is_still_blamed_on_the_variable(tmp_path: Path) -> None:
    env = home_with(tmp_path, "compact_at = 70\n") | {"ZCODER_COMPACT_AT": "120"}
    assert refused(RawOptions(), env).startswith("ZCODER_COMPACT_AT: '120'")


def test_a_bad_relay_value_turns_only_the_relay_off(tmp_path: Path) -> None:
    env = home_with(tmp_path, 'model = "m"\n[relay]\nmax_queue = 0\ninbound = "hold"\n')
    c = load_settings(RawOptions(workspace="."), env)
    assert c.model == "m" and c.relay.mode == "off"
    assert c.relay_problem == (
        f"relay disabled: config file {env['ZCODER_HOME']}/config.toml: relay.max_queue: "
        "'0' is not a whole number from 1 to 1024"
    )
    env["ZCODER_RELAY_MAX_QUEUE"] = "2"  # the environment overrides it: the relay runs
    c = load_settings(RawOptions(workspace="."), env)
    assert (c.relay.mode, c.relay.max_queue, c.relay_problem) == ("on", 2, "")


def test_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    env = {"ZCODER_HOME": str(tmp_path)}
    assert (
        refused(RawOptions(), env) == f"config file {tmp_path}/config.toml: is not a regular file"
    )
    (tmp_path / "config.toml").rmdir()
    os.mkfifo(tmp_path / "config.toml")  # never blocks waiting for a writer
    assert refused(RawOptions(), env).endswith(": is not a regular file")


def test_a_dangling_link_and_a_home_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").symlink_to(tmp_path / "gone")
    assert refused(RawOptions(), {"ZCODER_HOME": str(tmp_path)}).endswith(
        "config.toml: is a symbolic link to nothing"
    )
    (tmp_path / "file").write_text("")
    message = refused(RawOptions(), {"ZCODER_HOME": str(tmp_path / "file")})
    assert message == f"config file {tmp_path}/file/config.toml: cannot be read: Not a directory"


def test_not_utf8_and_too_large(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_bytes(b"model = '\xff'\n")
    env = {"ZCODER_HOME": str(tmp_path)}
    assert refused(RawOptions(), env).endswith("config.toml: is not UTF-8 text (byte 9)")
    (tmp_path / "config.toml").write_bytes(b"#" * (1 << 20) + b"\n")
    assert refused(RawOptions(), env).endswith("config.toml: is larger than 1048576 bytes")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "m"\n')
    path.chmod(0)
    message = refused(RawOptions(), {"ZCODER_HOME": str(tmp_path)})
    assert message == f"config file {path}: cannot be read: Permission denied"


def test_every_variable_has_a_key() -> None:
    """The file holds every setting a variable sets, except ZCODER_HOME (where it lives)."""
    import zcoder.config as config

    variables = set(re.findall(r"\b(ZCODER_[A-Z_]*[A-Z])\b", Path(config.__file__).read_text()))
    covered = {name for name, _ in FILE_KEYS.values()}
    assert variables - covered == {"ZCODER_HOME"}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in list(os.environ):
        if var.startswith("ZCODER_") or var == "OLLAMA_HOST":
            monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(tmp_path))
    home = tmp_path / ".zcoder"
    home.mkdir()
    monkeypatch.setenv("ZCODER_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


def test_a_bad_file_stops_a_run_with_one_line(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (clean_env / "config.toml").write_text("compact_at = 120\n")
    assert main(["-p", "hi"]) == 2
    assert capsys.readouterr().err == (
        f"zcoder: config file {clean_env}/config.toml: compact_at: "
        "'120' is not a whole number from 25 to 90\n"
    )


def test_zcoder_config_prints_each_setting_and_its_source(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (clean_env / "config.toml").write_text(GOOD.replace('profile = "sysadmin"\n', ""))
    monkeypatch.setenv("ZCODER_COMPACT_AT", "60")
    monkeypatch.setenv("ZCODER_API_KEY", "secret-key")
    assert main(["config", "--model", "flag-model"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "config file: ~/.zcoder/config.toml"
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:]}
    # and whether the command sandbox works on this machine (tests/sandbox/test_settle.py)
    assert set(rows) == {"home", "sandbox", *FILE_KEYS}
    file = "file ~/.zcoder/config.toml"
    assert rows["model"].split() == ["flag-model", "flag", "--model"]
    assert rows["compact_at"].split() == ["60", "env", "ZCODER_COMPACT_AT"]
    assert rows["host"].split() == ["http://file-host:8080", *file.split()]
    assert rows["think"].split() == ["off", *file.split()]
    assert rows["relay.max_queue"].split() == ["8", *file.split()]
    assert rows["profile"].split() == ["coding", "default"]
    assert rows["api_key"].split() == ["set", "env", "ZCODER_API_KEY"]
    assert "secret-key" not in "\n".join(lines)


def test_zcoder_config_without_a_file_and_with_a_bad_one(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("config file: ~/.zcoder/config.toml (none)\n")
    assert "relay.max_queue          16" in out
    (clean_env / "config.toml").write_text("[relay]\nmode = 'sometimes'\n")
    assert main(["config"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.split()[:2] == ["relay.mode", "off"]
    assert "relay disabled: config file" in last and "relay.mode: 'sometimes'" in last
    (clean_env / "config.toml").write_text("relay.nope = 1\n")
    assert main(["config"]) == 2
    assert "config.toml: relay.nope: unknown setting" in capsys.readouterr().err


def test_zcoder_agents_reads_the_relay_settings_from_the_file(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (clean_env / "config.toml").write_text("[relay]\nmax_bytes = 1\n")
    assert main(["agents"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"zcoder agents: config file {clean_env}/config.toml: relay.max_bytes:")
    (clean_env / "config.toml").write_text("[relay\n")
    assert main(["agents"]) == 2
