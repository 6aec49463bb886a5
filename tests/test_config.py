from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from zcoder.config import Config, RawOptions, load_config, normalize_host
from zcoder.errors import ConfigError


def test_defaults(tmp_path: Path) -> None:
    c = load_config(RawOptions(workspace=str(tmp_path)), {"HOME": str(tmp_path)})
    assert c.model == "qwen3-coder:latest"
    assert c.host == "http://127.0.0.1:11434"
    assert c.workspace == tmp_path.resolve()
    assert (c.profile, c.command_policy, c.think, c.warmup) == ("coding", "ask", True, True)
    assert c.home == tmp_path / ".config" / "zcoder"
    assert c.relay.max_queue == 16 and c.relay_problem == ""


def test_flags_override_environment(tmp_path: Path) -> None:
    env = {"ZCODER_MODEL": "a", "OLLAMA_HOST": "h:1", "ZCODER_PROFILE": "sysadmin"}
    c = load_config(RawOptions(model="b", host="k:2", profile="coding", workspace="."), env)
    assert (c.model, c.host, c.profile) == ("b", "http://k:2", "coding")
    c = load_config(RawOptions(workspace="."), env)
    assert (c.model, c.host, c.profile) == ("a", "http://h:1", "sysadmin")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("localhost:8080", "http://localhost:8080"),
        ("ollama", "http://ollama:11434"),
        ("https://example.org", "https://example.org"),
        ("http://127.0.0.1:11434/", "http://127.0.0.1:11434"),
        (":11435", "http://127.0.0.1:11435"),  # as Ollama's own client reads OLLAMA_HOST
        ("example.com/ollama/", "http://example.com:11434/ollama"),
        ("https://example.com:8443/a/b", "https://example.com:8443/a/b"),
        ("[::1]:9", "http://[::1]:9"),
    ],
)
def test_normalize_host(value: str, expected: str) -> None:
    assert normalize_host(value) == expected


@pytest.mark.parametrize(
    "value", ["", "ftp://x", "a b", "h:99999", "http://", "http://:80", "h:0", "x/p?q=1", ":"]
)
def test_bad_host(value: str) -> None:
    with pytest.raises(ConfigError, match="--host"):
        normalize_host(value)


@pytest.mark.parametrize(
    ("opts", "env", "option"),
    [
        (RawOptions(profile="ops"), {}, "--profile"),
        (RawOptions(), {"ZCODER_COMMAND_POLICY": "maybe"}, "ZCODER_COMMAND_POLICY"),
        (RawOptions(yes=True, profile="sysadmin"), {}, "--yes"),
        (
            RawOptions(),
            {"ZCODER_PROFILE": "sysadmin", "ZCODER_COMMAND_POLICY": "allow"},
            "ZCODER_COMMAND_POLICY=allow",
        ),
        (
            RawOptions(profile="sysadmin"),
            {"ZCODER_RELAY_COMMANDS": "sandbox"},
            "ZCODER_RELAY_COMMANDS=sandbox",
        ),
        (RawOptions(yes=True, deny_commands=True), {}, "--yes"),
        (RawOptions(workspace="/nonexistent/zz"), {}, "--workspace"),
        (RawOptions(workspace="/etc/hostname"), {}, "--workspace"),
        (RawOptions(context_window=3), {}, "--context-window"),
        (RawOptions(model="a b"), {}, "--model"),
        (RawOptions(prompt="  "), {}, "--prompt"),
        (RawOptions(), {"ZCODER_WARMUP": "yes"}, "ZCODER_WARMUP"),
    ],
)
def test_bad_values_name_the_option(opts: RawOptions, env: dict[str, str], option: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(opts, env)
    assert info.value.option == option


def test_policy_flags() -> None:
    assert load_config(RawOptions(yes=True), {}).command_policy == "allow"
    assert load_config(RawOptions(deny_commands=True), {}).command_policy == "deny"


@pytest.mark.parametrize(
    "env",
    [
        {"ZCODER_RELAY": "maybe"},
        {"ZCODER_RELAY_MAX_BYTES": "12k"},
        {"ZCODER_RELAY_MAX_QUEUE": "0"},
        {"ZCODER_RELAY_IO_TIMEOUT": "never"},
        {"ZCODER_RELAY_DIR": "relative/dir"},
        {"ZCODER_RELAY_MAX_MESSAGE_CHARS": "-1"},
        # Python's int() and float() read these; a setting must mean what it reads.
        {"ZCODER_RELAY_IO_TIMEOUT": "1_0"},
        {"ZCODER_RELAY_IO_TIMEOUT": "1e1"},
        {"ZCODER_RELAY_IO_TIMEOUT": "+5"},
        {"ZCODER_RELAY_IO_TIMEOUT": " 5"},
        {"ZCODER_RELAY_IO_TIMEOUT": "nan"},
        {"ZCODER_RELAY_MAX_QUEUE": "1_6"},
        {"ZCODER_RELAY_MAX_QUEUE": " 16"},
        {"ZCODER_RELAY_MAX_QUEUE": "١٦"},
        {"ZCODER_RELAY_INBOUND": "maybe"},
        {"ZCODER_RELAY_INBOUND": "HOLD"},
        {"ZCODER_RELAY_MAX_HOPS": "0"},
        {"ZCODER_RELAY_MAX_HOPS": "many"},
        {"ZCODER_RELAY_QUESTION_TIMEOUT": "-1"},
        {"ZCODER_RELAY_QUESTION_TIMEOUT": "5m"},
        {"ZCODER_RELAY_QUESTION_TIMEOUT": "86401"},
    ],
)
def test_bad_relay_setting_disables_only_the_relay(env: dict[str, str]) -> None:
    c = load_config(RawOptions(model="m"), env)
    assert c.relay.mode == "off"
    assert c.relay_problem.startswith("relay disabled: ZCODER_RELAY")
    assert c.model == "m" and c.command_policy == "ask"


def test_relay_settings_read() -> None:
    env = {"ZCODER_RELAY": "paused", "ZCODER_RELAY_DIR": "/tmp/x", "ZCODER_RELAY_IO_TIMEOUT": "0.5"}
    r = load_config(RawOptions(), env).relay
    assert (r.mode, r.dir, r.io_timeout) == ("paused", Path("/tmp/x"), 0.5)


def test_a_relayed_question_waits_300_s_unless_set_and_0_means_no_limit() -> None:
    assert load_config(RawOptions(), {}).relay.question_timeout == 300.0
    for raw, seconds in (("2", 2.0), ("0.5", 0.5), ("0", 0.0)):
        env = {"ZCODER_RELAY_QUESTION_TIMEOUT": raw}
        assert load_config(RawOptions(), env).relay.question_timeout == seconds
    bad = load_config(RawOptions(), {"ZCODER_RELAY_QUESTION_TIMEOUT": "soon"})
    assert bad.relay_problem == (
        "relay disabled: ZCODER_RELAY_QUESTION_TIMEOUT: 'soon' is not a number of seconds "
        "from 0 to 86400 (0: no limit)"
    )


def test_the_hop_bound_is_four_unless_set() -> None:
    assert load_config(RawOptions(), {}).relay.max_hops == 4
    assert load_config(RawOptions(), {"ZCODER_RELAY_MAX_HOPS": "2"}).relay.max_hops == 2


def test_inbound_policy_is_accept_unless_told_to_hold() -> None:
    assert load_config(RawOptions(), {}).relay.inbound == "accept"
    held = load_config(RawOptions(), {"ZCODER_RELAY_INBOUND": "hold"})
    assert held.relay.inbound == "hold" and held.relay.mode == "on"


@pytest.mark.parametrize(
    ("env", "option"),
    [
        ({"ZCODER_PROFILE": "ops"}, "ZCODER_PROFILE"),
        ({"ZCODER_MODEL": "a b"}, "ZCODER_MODEL"),
        ({"OLLAMA_HOST": "ftp://x"}, "OLLAMA_HOST"),
        ({"ZCODER_WORKSPACE": "/nonexistent/zz"}, "ZCODER_WORKSPACE"),
    ],
)
def test_a_bad_environment_value_names_the_variable(env: dict[str, str], option: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(RawOptions(), env)
    assert info.value.option == option
    assert str(info.value).startswith(f"{option}: '")


def test_a_policy_flag_overrides_a_bad_policy_variable() -> None:
    env = {"ZCODER_COMMAND_POLICY": "maybe"}
    assert load_config(RawOptions(yes=True), env).command_policy == "allow"
    assert load_config(RawOptions(deny_commands=True), env).command_policy == "deny"


# Model bounds: temperature, output cap, stall limits, printed tool calls.


def test_model_bound_defaults() -> None:
    c = load_config(RawOptions(workspace="."), {})
    assert c.temperature is None  # the server's default
    assert (c.max_output_tokens, c.first_token_timeout, c.stall_timeout) == (4096, 300.0, 60.0)
    assert c.text_tool_calls is True


def test_model_bounds_from_flags_and_environment() -> None:
    env = {
        "ZCODER_TEMPERATURE": "0.7",
        "ZCODER_MAX_OUTPUT_TOKENS": "1024",
        "ZCODER_FIRST_TOKEN_TIMEOUT": "600",
        "ZCODER_STALL_TIMEOUT": "30.5",
        "ZCODER_TEXT_TOOL_CALLS": "off",
    }
    c = load_config(RawOptions(workspace="."), env)
    assert (c.temperature, c.max_output_tokens) == (0.7, 1024)
    assert (c.first_token_timeout, c.stall_timeout, c.text_tool_calls) == (600.0, 30.5, False)
    flags = RawOptions(workspace=".", temperature="0", max_output_tokens="64")
    c = load_config(flags, env)
    assert (c.temperature, c.max_output_tokens) == (0.0, 64)
    c = load_config(RawOptions(workspace=".", no_text_tool_calls=True), {})
    assert c.text_tool_calls is False


@pytest.mark.parametrize(
    ("opts", "env", "option"),
    [
        (RawOptions(temperature="2.5"), {}, "--temperature"),
        (RawOptions(temperature="-1"), {}, "--temperature"),
        (RawOptions(temperature="1e0"), {}, "--temperature"),
        (RawOptions(), {"ZCODER_TEMPERATURE": "nan"}, "ZCODER_TEMPERATURE"),
        (RawOptions(max_output_tokens="0"), {}, "--max-output-tokens"),
        (RawOptions(max_output_tokens="1_000"), {}, "--max-output-tokens"),
        (RawOptions(), {"ZCODER_MAX_OUTPUT_TOKENS": "+5"}, "ZCODER_MAX_OUTPUT_TOKENS"),
        (RawOptions(), {"ZCODER_FIRST_TOKEN_TIMEOUT": "0"}, "ZCODER_FIRST_TOKEN_TIMEOUT"),
        (RawOptions(), {"ZCODER_STALL_TIMEOUT": " 60"}, "ZCODER_STALL_TIMEOUT"),
        (RawOptions(), {"ZCODER_STALL_TIMEOUT": "inf"}, "ZCODER_STALL_TIMEOUT"),
        (RawOptions(), {"ZCODER_TEXT_TOOL_CALLS": "yes"}, "ZCODER_TEXT_TOOL_CALLS"),
    ],
)
def test_a_bad_model_bound_names_its_source(
    opts: RawOptions, env: dict[str, str], option: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(attrs.evolve(opts, workspace="."), env)
    assert str(info.value).startswith(f"{option}: ")


# -- the model server: API, host, key (issue 10) ----------------------------------------


def _load(tmp_path: Path, env: dict[str, str] | None = None, **opts: str) -> Config:
    return load_config(RawOptions(workspace=str(tmp_path), **opts), env or {})  # type: ignore[arg-type]


def test_no_host_configured_means_auto_detection(tmp_path: Path) -> None:
    c = _load(tmp_path)
    assert (c.autodetect, c.api, c.api_given, c.model_default) == (True, "ollama", False, True)
    for env in ({"OLLAMA_HOST": "h:1"}, {"ZCODER_HOST": "h:1"}):
        assert not _load(tmp_path, env).autodetect
    assert not _load(tmp_path, host="h:1").autodetect
    assert not _load(tmp_path, {"ZCODER_MODEL": "m"}).model_default


def test_zcoder_host_wins_over_ollama_host_and_the_flag_over_both(tmp_path: Path) -> None:
    env = {"OLLAMA_HOST": "o:1", "ZCODER_HOST": "z:2"}
    assert _load(tmp_path, env).host == "http://z:2"
    assert _load(tmp_path, env, host="f:3").host == "http://f:3"
    with pytest.raises(ConfigError, match=r"^ZCODER_HOST: "):
        _load(tmp_path, {"ZCODER_HOST": "ftp://x"})


@pytest.mark.parametrize(
    ("host", "api", "expected"),
    [
        ("http://127.0.0.1:8080/v1", None, ("openai", "http://127.0.0.1:8080/v1")),
        ("127.0.0.1:8080", "openai", ("openai", "http://127.0.0.1:8080/v1")),
        ("http://127.0.0.1:11434/v1/", None, ("openai", "http://127.0.0.1:11434/v1")),
        ("127.0.0.1:11434", None, ("ollama", "http://127.0.0.1:11434")),
        ("http://proxy/v1", "ollama", ("ollama", "http://proxy/v1")),
    ],
)
def test_the_api_is_given_or_inferred_from_a_host_ending_in_v1(
    tmp_path: Path, host: str, api: str | None, expected: tuple[str, str]
) -> None:
    c = _load(tmp_path, host=host, api=api) if api else _load(tmp_path, host=host)
    assert (c.api, c.host) == expected
    assert c.api_given == (api is not None)


def test_zcoder_api_from_the_environment_and_a_bad_value(tmp_path: Path) -> None:
    assert _load(tmp_path, {"ZCODER_API": "openai"}, host="h:1").host == "http://h:1/v1"
    with pytest.raises(ConfigError, match=r"^ZCODER_API: 'grpc' is not one of ollama, openai"):
        _load(tmp_path, {"ZCODER_API": "grpc"})
    with pytest.raises(ConfigError, match=r"^--api: "):
        _load(tmp_path, api="OpenAI")


def test_the_api_key_is_read_but_never_shown(tmp_path: Path) -> None:
    c = _load(tmp_path, {"ZCODER_API_KEY": " sk-123 "})
    assert c.api_key == "sk-123"
    assert "sk-123" not in repr(c)
    assert _load(tmp_path, {"ZCODER_API_KEY": ""}).api_key is None
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, {"ZCODER_API_KEY": "sk-1\nInjected: yes"})
    assert str(info.value) == "ZCODER_API_KEY: contains spaces or control characters"


def test_the_approval_guard_is_milliseconds_from_the_environment(tmp_path: Path) -> None:
    def guard(env: dict[str, str]) -> float:
        return load_config(RawOptions(workspace=str(tmp_path)), env).approval_guard

    assert guard({}) == 0.3 and guard({"ZCODER_APPROVAL_GUARD_MS": ""}) == 0.3
    assert guard({"ZCODER_APPROVAL_GUARD_MS": "0"}) == 0.0
    assert guard({"ZCODER_APPROVAL_GUARD_MS": "1500"}) == 1.5
    for bad in ("-1", "0.5", "1e3", "10001", "٣", "fast"):
        with pytest.raises(ConfigError) as info:
            guard({"ZCODER_APPROVAL_GUARD_MS": bad})
        assert str(info.value) == (
            f"ZCODER_APPROVAL_GUARD_MS: {bad!r} is not a whole number from 0 to 10000"
        )


# -- the agent name (issue 9 item 7) ----------------------------------------------------


def test_the_agent_name_comes_from_the_flag_over_the_environment(tmp_path: Path) -> None:
    assert _load(tmp_path).agent_name == ""  # the workspace's name is used
    assert _load(tmp_path, {"ZCODER_AGENT_NAME": "env-name"}).agent_name == "env-name"
    named = _load(tmp_path, {"ZCODER_AGENT_NAME": "env-name"}, agent_name="flag.name")
    assert named.agent_name == "flag.name"


@pytest.mark.parametrize(
    ("env", "opts", "option"),
    [
        ({}, {"agent_name": "has space"}, "--agent-name"),
        ({}, {"agent_name": "-dash"}, "--agent-name"),
        ({"ZCODER_AGENT_NAME": "x" * 65}, {}, "ZCODER_AGENT_NAME"),
        ({"ZCODER_AGENT_NAME": "bad\x1bname"}, {}, "ZCODER_AGENT_NAME"),
    ],
)
def test_a_name_outside_the_grammar_is_refused_naming_its_source(
    tmp_path: Path, env: dict[str, str], opts: dict[str, str], option: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, env, **opts)
    text = str(info.value)
    assert text.startswith(f"{option}: ") and "is not an agent name: use 1 to 64" in text
    assert "\x1b" not in text and "\n" not in text


def test_output_format(tmp_path: Path) -> None:
    base = RawOptions(workspace=str(tmp_path), prompt="hi")
    assert load_config(base, {}).output_format == "text"
    for fmt in ("text", "json", "stream-json"):
        c = load_config(attrs.evolve(base, output_format=fmt), {"ZCODER_OUTPUT_FORMAT": "x"})
        assert c.output_format == fmt
    with pytest.raises(ConfigError, match="--output-format: 'xml' is not one of"):
        load_config(attrs.evolve(base, output_format="xml"), {})
    with pytest.raises(ConfigError, match="only applies with --prompt"):
        load_config(RawOptions(workspace=str(tmp_path), output_format="json"), {})
