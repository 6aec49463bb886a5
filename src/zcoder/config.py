"""Settings: flags over environment over defaults, validated into frozen objects.

Pure: ``load_config`` takes the parsed flags and an environment mapping and either returns a
``Config`` or raises ``ConfigError`` naming the option and the accepted values. Relay
settings fail closed on their own: a bad relay value disables the relay (``relay_problem``)
and changes nothing else.

Longer than 400 lines on purpose: every setting's flag, variable, default and check sit
together, so that the precedence (flags over environment over defaults) is read once.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs

from zcoder.checkpoint.settings import (
    CHECKPOINT_MODES,
    DEFAULT_FILE_CAP,
    DEFAULT_KEEP_DAYS,
    DEFAULT_KEEP_TURNS,
    CheckpointMode,
    CheckpointSettings,
)
from zcoder.defaults import DEFAULT_HOST, DEFAULT_MODEL
from zcoder.errors import ConfigError
from zcoder.relay.limits import (
    DEFAULT_IO_TIMEOUT,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_HOPS,
    DEFAULT_MAX_MESSAGE_CHARS,
    DEFAULT_MAX_QUEUE,
    DEFAULT_QUESTION_TIMEOUT,
    IO_TIMEOUT_RANGE,
    MAX_BYTES_RANGE,
    MAX_HOPS_RANGE,
    MAX_MESSAGE_CHARS_RANGE,
    MAX_QUEUE_RANGE,
    QUESTION_TIMEOUT_RANGE,
)
from zcoder.relay.names import agent_name_problem
from zcoder.relay.settings import (
    INBOUND_MODES,
    RELAY_COMMANDS,
    RELAY_MODES,
    InboundMode,
    RelayCommands,
    RelayMode,
    RelaySettings,
)
from zcoder.text.decimal import plain_float, plain_int

__all__ = [
    "APIS",
    "DEFAULT_HOST",
    "DEFAULT_MODEL",
    "INBOUND_MODES",
    "OUTPUT_FORMATS",
    "PROFILES",
    "Api",
    "CommandPolicy",
    "Config",
    "InboundMode",
    "OutputFormat",
    "Profile",
    "RawOptions",
    "RelayMode",
    "RelaySettings",
    "default_home",
    "load_config",
    "normalize_host",
    "relay_settings_from_env",
]

Profile = Literal["coding", "sysadmin"]
CommandPolicy = Literal["ask", "allow", "deny", "sandbox"]

PROFILES: tuple[Profile, ...] = ("coding", "sysadmin")
POLICIES: tuple[CommandPolicy, ...] = ("ask", "allow", "deny", "sandbox")
DEFAULT_MAX_OUTPUT_TOKENS = 4096
DEFAULT_FIRST_TOKEN_TIMEOUT = 300.0
DEFAULT_STALL_TIMEOUT = 60.0
DEFAULT_APPROVAL_GUARD_MS = 300
DEFAULT_COMPACT_AT = 80
Api = Literal["ollama", "openai"]
APIS: tuple[Api, ...] = ("ollama", "openai")
OutputFormat = Literal["text", "json", "stream-json"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("text", "json", "stream-json")
_HOST_RE = re.compile(
    r"^(?:(https?)://)?([A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?(/[^\s?#]*)?$"
)


@attrs.frozen
class RawOptions:
    """Command-line flags as given; ``None`` means not given."""

    model: str | None = None
    host: str | None = None
    workspace: str | None = None
    profile: str | None = None
    yes: bool = False
    deny_commands: bool = False
    resume: str | None = None
    no_think: bool = False
    no_warmup: bool = False
    context_window: int | None = None
    compact_at: str | None = None
    debug_log: str | None = None
    prompt: str | None = None
    # Model bounds, as typed (validated by load_config, so the error names the flag).
    temperature: str | None = None
    max_output_tokens: str | None = None
    no_text_tool_calls: bool = False
    api: str | None = None
    agent_name: str | None = None
    output_format: str | None = None
    gguf: str | None = None
    sandbox: bool = False
    sandbox_network: bool = False


@attrs.frozen
class Config:
    """The validated settings of one zcoder run."""

    model: str
    host: str
    workspace: Path
    profile: Profile
    command_policy: CommandPolicy
    home: Path
    resume: str | None = None
    think: bool = True
    warmup: bool = True
    context_window: int | None = None
    # Compact the history when a request would pass this percentage of the window.
    compact_at: int = DEFAULT_COMPACT_AT
    debug_log: Path | None = None
    prompt: str | None = None
    relay: RelaySettings = attrs.field(factory=RelaySettings)
    relay_problem: str = ""
    # ``-m`` given on this command line: it then wins over a resumed session's own model
    # (the environment and the default do not).
    model_flag: bool = False
    # Model bounds: None is the server's default temperature; the output cap is per model
    # step; the two stall limits are seconds (before the first token / between tokens).
    temperature: float | None = None
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    first_token_timeout: float = DEFAULT_FIRST_TOKEN_TIMEOUT
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    text_tool_calls: bool = True
    # The API the server speaks: given (``--api``, ``ZCODER_API``), or inferred from a
    # host ending in ``/v1``; an ``openai`` host always ends in ``/v1``.
    api: Api = "ollama"
    api_given: bool = False
    # Sent as a bearer token to an OpenAI-compatible server; never shown (not in repr).
    api_key: str | None = attrs.field(default=None, repr=False)
    # No host configured (no --host, ZCODER_HOST or OLLAMA_HOST): ``host`` is a placeholder
    # until auto-detection (agent/detect.py) picks the server and ``host`` is set.
    autodetect: bool = False
    # The name of the server kind (agent/servers.py: "Ollama", "llama.cpp", ...), once
    # known; "" before.
    server_kind: str = ""
    # The model is zcoder's default (neither -m nor ZCODER_MODEL): an OpenAI-compatible
    # server's own model may replace it.
    model_default: bool = False
    # Seconds an approval question must be on screen, and the user must have paused,
    # before a key approves it (ZCODER_APPROVAL_GUARD_MS); denying is never held back.
    approval_guard: float = DEFAULT_APPROVAL_GUARD_MS / 1000
    # The relay label other instances see (the manifest's ``project``): --agent-name or
    # ZCODER_AGENT_NAME; "" means the workspace's basename.
    agent_name: str = ""
    # Given by a flag or the environment (so a resumed session's own does not replace it).
    workspace_given: bool = False
    profile_given: bool = False
    # Where a configured host came from, as the user wrote it ("--host 127.0.0.1:8080",
    # "ZCODER_HOST=..."); "" when none was configured.
    host_source: str = ""
    # How the server was settled, for the start-up line: "auto-detected", "found at --host
    # ...", "the session's server"; "" when it is simply the configured one.
    server_note: str = ""
    # Auto-detection found no server: the line that says what was tried ("" otherwise).
    server_missing: str = ""
    # Said once at start-up: why this run is not where the user stands (a resumed
    # session opened in its own workspace).
    resume_note: str = ""
    # What the one-shot mode prints on stdout (--output-format): the answer as text, one
    # JSON result object, or one JSON object per event (docs/output-format.rst).
    output_format: OutputFormat = "text"
    # --gguf FILE: zcoder starts llama.cpp's server for this file (localserver/), which
    # then sets ``host``; until then ``host`` is "".
    gguf: Path | None = None
    # A checkpoint before each turn's first change (docs/checkpoints.rst).
    checkpoints: CheckpointSettings = attrs.field(factory=CheckpointSettings)
    # Sandboxed commands may use the network (--sandbox-network, ZCODER_SANDBOX_NETWORK).
    sandbox_network: bool = False
    # Said once at start-up: the config file asked for the sandbox, which cannot work
    # here, so commands ask instead (``zcoder.sandbox.settle``); "" otherwise.
    sandbox_note: str = ""
    # Whose commands ("user": local turns, "relay": relayed ones) the config file meant to
    # sandbox and now ask instead: their questions say they run outside the sandbox.
    unsandboxed: frozenset[str] = frozenset()

    def resume_command(self, session_id: str) -> str:
        """How to reopen ``session_id``: with ``--gguf FILE`` when zcoder started the model
        server for this run (the session's saved host was that server's, gone with it)."""
        command = f"zcoder --resume {session_id}"
        if self.gguf is None:
            return command
        return f"{command} --gguf {shlex.quote(str(self.gguf))}"


def normalize_host(value: str) -> str:
    """Accept what Ollama's own client accepts in ``OLLAMA_HOST``: ``http(s)://host[:port]``,
    bare ``host[:port]``, ``:port`` (this machine) and a path prefix (a reverse proxy);
    return a base URL without a trailing slash."""
    m = _HOST_RE.match(value.strip())
    if not m or (m.group(3) is not None and not 0 < int(m.group(3)) < 65536):
        raise ConfigError("--host", f"{value!r} is not a URL like http://127.0.0.1:11434")
    scheme, host, port, path = m.groups()
    if not host and (scheme or port is None):
        raise ConfigError("--host", f"{value!r} is not a URL like http://127.0.0.1:11434")
    port = port or ("11434" if scheme is None else None)
    base = f"{scheme or 'http'}://{host or '127.0.0.1'}" + (f":{port}" if port else "")
    return base + (path or "").rstrip("/")


def default_home(env: Mapping[str, str]) -> Path:
    if env.get("ZCODER_HOME"):
        return Path(env["ZCODER_HOME"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "zcoder"


def _choice(option: str, value: str, accepted: tuple[str, ...]) -> str:
    if value not in accepted:
        raise ConfigError(option, f"{value!r} is not one of {', '.join(accepted)}")
    return value


def _int(option: str, value: str, low: int, high: int) -> int:
    number = plain_int(value)
    if number is None or not low <= number <= high:
        raise ConfigError(option, f"{value!r} is not a whole number from {low} to {high}")
    return number


def _limit(env: Mapping[str, str], var: str, default: int, bounds: tuple[int, int]) -> int:
    return _int(var, env.get(var, str(default)), *bounds)


def _workspace(name: str, value: str) -> Path:
    path = Path(value).expanduser()
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ConfigError(name, f"{value!r} does not exist") from None
    if not resolved.is_dir():
        raise ConfigError(name, f"{value!r} is not a directory")
    return resolved


def relay_settings_from_env(env: Mapping[str, str]) -> RelaySettings:
    """Read the ``ZCODER_RELAY*`` settings; raise ``ConfigError`` for the first bad one."""
    mode = cast(RelayMode, _choice("ZCODER_RELAY", env.get("ZCODER_RELAY", "on"), RELAY_MODES))
    commands = cast(
        RelayCommands,
        _choice("ZCODER_RELAY_COMMANDS", env.get("ZCODER_RELAY_COMMANDS", "ask"), RELAY_COMMANDS),
    )
    raw_dir = env.get("ZCODER_RELAY_DIR")
    if raw_dir is not None and not os.path.isabs(raw_dir):
        raise ConfigError("ZCODER_RELAY_DIR", f"{raw_dir!r} is not an absolute path")
    timeout_raw = env.get("ZCODER_RELAY_IO_TIMEOUT", f"{DEFAULT_IO_TIMEOUT:g}")
    timeout = plain_float(timeout_raw)
    low, high = IO_TIMEOUT_RANGE
    if timeout is None or not low <= timeout <= high:
        raise ConfigError(
            "ZCODER_RELAY_IO_TIMEOUT",
            f"{timeout_raw!r} is not a number of seconds from {low:g} to {high:g}",
        )
    inbound = cast(
        InboundMode,
        _choice("ZCODER_RELAY_INBOUND", env.get("ZCODER_RELAY_INBOUND", "accept"), INBOUND_MODES),
    )
    return RelaySettings(
        mode=mode,
        inbound=inbound,
        dir=Path(raw_dir) if raw_dir else None,
        max_bytes=_limit(env, "ZCODER_RELAY_MAX_BYTES", DEFAULT_MAX_BYTES, MAX_BYTES_RANGE),
        max_message_chars=_limit(
            env,
            "ZCODER_RELAY_MAX_MESSAGE_CHARS",
            DEFAULT_MAX_MESSAGE_CHARS,
            MAX_MESSAGE_CHARS_RANGE,
        ),
        max_queue=_limit(env, "ZCODER_RELAY_MAX_QUEUE", DEFAULT_MAX_QUEUE, MAX_QUEUE_RANGE),
        io_timeout=timeout,
        max_hops=_limit(env, "ZCODER_RELAY_MAX_HOPS", DEFAULT_MAX_HOPS, MAX_HOPS_RANGE),
        question_timeout=_question_timeout(env),
        commands=commands,
    )


def _question_timeout(env: Mapping[str, str]) -> float:
    """``ZCODER_RELAY_QUESTION_TIMEOUT``: seconds a relayed turn's question waits (0: no
    limit)."""
    var = "ZCODER_RELAY_QUESTION_TIMEOUT"
    raw = env.get(var, f"{DEFAULT_QUESTION_TIMEOUT:g}")
    seconds = plain_float(raw)
    low, high = QUESTION_TIMEOUT_RANGE
    if seconds is None or not low <= seconds <= high:
        raise ConfigError(
            var, f"{raw!r} is not a number of seconds from {low:g} to {high:g} (0: no limit)"
        )
    return seconds


_Given = tuple[str | None, str]


def _setting(flag_value: str | None, flag: str, env: Mapping[str, str], var: str) -> _Given:
    """The value of one setting and the name to blame for it: the flag when given, else
    the environment variable (an empty variable counts as unset)."""
    if flag_value:
        return flag_value, flag
    if env.get(var):
        return env[var], var
    return None, flag


_POLICY_FLAGS: tuple[tuple[str, str, CommandPolicy], ...] = (
    ("yes", "--yes", "allow"),
    ("deny_commands", "--deny-commands", "deny"),
    ("sandbox", "--sandbox", "sandbox"),
)


def _command_policy(opts: RawOptions, env: Mapping[str, str], profile: Profile) -> CommandPolicy:
    given = [(flag, policy) for field, flag, policy in _POLICY_FLAGS if getattr(opts, field)]
    if len(given) > 1:
        raise ConfigError(given[0][0], f"cannot be combined with {given[1][0]}")
    if given:
        policy: CommandPolicy = given[0][1]
    else:  # a flag overrides the variable, so the variable only matters without one
        raw = env.get("ZCODER_COMMAND_POLICY", "ask")
        policy = cast(CommandPolicy, _choice("ZCODER_COMMAND_POLICY", raw, POLICIES))
    if profile == "sysadmin" and policy in ("allow", "sandbox"):
        which = given[0][0] if given else f"ZCODER_COMMAND_POLICY={policy}"
        raise ConfigError(which, "is refused with the sysadmin profile: every command asks")
    return policy


def _check_relay_commands(relay: RelaySettings, profile: Profile) -> None:
    """The sysadmin profile runs every command outside the sandbox, asking first: a
    relayed command that the settings say is sandboxed would run unconfined after a 'y'."""
    if profile == "sysadmin" and relay.commands == "sandbox":
        raise ConfigError(
            "ZCODER_RELAY_COMMANDS=sandbox",
            "is refused with the sysadmin profile: every command asks and runs outside the sandbox",
        )


def _sandbox_network(opts: RawOptions, env: Mapping[str, str]) -> bool:
    raw = env.get("ZCODER_SANDBOX_NETWORK") or "off"
    return opts.sandbox_network or _choice("ZCODER_SANDBOX_NETWORK", raw, ("on", "off")) == "on"


def _model(given: _Given) -> str:
    raw, name = given
    model = (raw or DEFAULT_MODEL).strip()
    if not model or any(c.isspace() or not c.isprintable() for c in model):
        raise ConfigError(name, f"{model!r} is not a model name like qwen3-coder:latest")
    return model


def _host(given: _Given) -> str:
    raw, name = given
    try:
        return normalize_host(raw or DEFAULT_HOST)
    except ConfigError as exc:
        raise ConfigError(name, str(exc).removeprefix("--host: ")) from None


def _host_setting(opts: RawOptions, env: Mapping[str, str]) -> _Given:
    if opts.host:
        return opts.host, "--host"
    for var in ("ZCODER_HOST", "OLLAMA_HOST"):
        if env.get(var):
            return env[var], var
    return None, "--host"


def _host_source(given: _Given) -> str:
    """``--host 127.0.0.1:8080`` or ``ZCODER_HOST=127.0.0.1:8080``: as the user wrote it."""
    raw, name = given
    if raw is None:
        return ""
    return f"{name} {raw}" if name.startswith("-") else f"{name}={raw}"


def _api(opts: RawOptions, env: Mapping[str, str], host: str) -> tuple[Api, bool, str]:
    """The API, whether it was given, and the host as that API uses it.

    A host whose path ends in ``/v1`` means the OpenAI-compatible API unless ``--api``
    says otherwise; an OpenAI host gets ``/v1`` added when it has no such path.
    """
    raw, name = _setting(opts.api, "--api", env, "ZCODER_API")
    if raw is None:
        api: Api = "openai" if host.endswith("/v1") else "ollama"
    else:
        api = cast(Api, _choice(name, raw, APIS))
    if api == "openai" and not host.endswith("/v1"):
        host += "/v1"
    return api, raw is not None, host


def _api_key(env: Mapping[str, str]) -> str | None:
    key = env.get("ZCODER_API_KEY", "").strip()
    if not key:
        return None
    if any(c.isspace() or not c.isprintable() for c in key):
        # The value itself is never repeated: it is a secret.
        raise ConfigError("ZCODER_API_KEY", "contains spaces or control characters")
    return key


def _relay(env: Mapping[str, str]) -> tuple[RelaySettings, str]:
    try:
        return relay_settings_from_env(env), ""
    except ConfigError as exc:
        return RelaySettings(mode="off"), f"relay disabled: {exc}"


def _check_flags(opts: RawOptions) -> None:
    if opts.context_window is not None and not 256 <= opts.context_window <= 2_097_152:
        raise ConfigError("--context-window", f"{opts.context_window} is not from 256 to 2097152")
    if opts.prompt is not None and not opts.prompt.strip():
        raise ConfigError("--prompt", "is empty")


def _number(given: _Given, low: float, high: float) -> float | None:
    raw, name = given
    if raw is None:
        return None
    number = plain_float(raw)
    if number is None or not low <= number <= high:
        raise ConfigError(name, f"{raw!r} is not a number from {low:g} to {high:g}")
    return number


def _model_bounds(opts: RawOptions, env: Mapping[str, str]) -> dict[str, Any]:
    """Temperature, output cap, stall limits and printed tool calls (``Config`` fields)."""
    cap_raw, cap_name = _setting(
        opts.max_output_tokens, "--max-output-tokens", env, "ZCODER_MAX_OUTPUT_TOKENS"
    )
    first = _number((env.get("ZCODER_FIRST_TOKEN_TIMEOUT"), "ZCODER_FIRST_TOKEN_TIMEOUT"), 1, 86400)
    stall = _number((env.get("ZCODER_STALL_TIMEOUT"), "ZCODER_STALL_TIMEOUT"), 1, 86400)
    text_calls = _choice(
        "ZCODER_TEXT_TOOL_CALLS", env.get("ZCODER_TEXT_TOOL_CALLS", "on"), ("on", "off")
    )
    return {
        "temperature": _number(
            _setting(opts.temperature, "--temperature", env, "ZCODER_TEMPERATURE"), 0, 2
        ),
        "max_output_tokens": (
            _int(cap_name, cap_raw, 1, 1_048_576) if cap_raw else DEFAULT_MAX_OUTPUT_TOKENS
        ),
        "first_token_timeout": DEFAULT_FIRST_TOKEN_TIMEOUT if first is None else first,
        "stall_timeout": DEFAULT_STALL_TIMEOUT if stall is None else stall,
        "text_tool_calls": not opts.no_text_tool_calls and text_calls == "on",
    }


def _compact_at(opts: RawOptions, env: Mapping[str, str]) -> int:
    raw, name = _setting(opts.compact_at, "--compact-at", env, "ZCODER_COMPACT_AT")
    return DEFAULT_COMPACT_AT if raw is None else _int(name, raw, 25, 90)


def _approval_guard(env: Mapping[str, str]) -> float:
    raw = env.get("ZCODER_APPROVAL_GUARD_MS")
    if not raw:
        return DEFAULT_APPROVAL_GUARD_MS / 1000
    return _int("ZCODER_APPROVAL_GUARD_MS", raw, 0, 10_000) / 1000


def _agent_name(opts: RawOptions, env: Mapping[str, str]) -> str:
    # Refused at start, not failed closed like the relay settings: the user asked to be
    # known by this name, and running under another would mislead the senders.
    raw, name = _setting(opts.agent_name, "--agent-name", env, "ZCODER_AGENT_NAME")
    if raw is None:
        return ""
    problem = agent_name_problem(raw)
    if problem:
        raise ConfigError(name, problem)
    return raw


def _output_format(opts: RawOptions) -> OutputFormat:
    # No environment twin: the format is the calling script's contract with zcoder, and an
    # inherited variable must not change what that script reads (as with -p and --resume).
    if opts.output_format is None:
        return "text"
    if opts.prompt is None:
        raise ConfigError("--output-format", "only applies with --prompt")
    return cast(OutputFormat, _choice("--output-format", opts.output_format, OUTPUT_FORMATS))


_GGUF_MAGIC = b"GGUF"


def _gguf(opts: RawOptions) -> Path | None:
    """The ``--gguf`` file: readable, regular, GGUF; never with ``--host`` or ``--api``."""
    if opts.gguf is None:
        return None
    for given, flag in ((opts.host, "--host"), (opts.api, "--api")):
        if given:
            raise ConfigError("--gguf", f"cannot be combined with {flag}: it starts its own server")
    path = Path(opts.gguf).expanduser().absolute()
    try:
        if not path.is_file():  # before opening it: a FIFO would block
            what = "does not exist" if not path.exists() else "is not a regular file"
            raise ConfigError("--gguf", f"{opts.gguf!r} {what}")
        with path.open("rb") as stream:
            magic = stream.read(4)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError("--gguf", f"cannot read {opts.gguf!r}: {reason}") from None
    if magic != _GGUF_MAGIC:
        raise ConfigError("--gguf", f"{opts.gguf!r} is not a GGUF model file")
    return path


def _server(
    opts: RawOptions, env: Mapping[str, str], gguf: Path | None
) -> tuple[_Given, Api, bool, str]:
    """Where the host came from, the API, whether it was given, and the host. With
    ``--gguf`` the server is zcoder's own: the environment's host and API do not apply."""
    if gguf is not None:
        return (None, "--host"), "openai", True, ""
    raw_host, host_name = _host_setting(opts, env)
    api, api_given, host = _api(opts, env, _host((raw_host, host_name)))
    return (raw_host, host_name), api, api_given, host


def _model_of(opts: RawOptions, env: Mapping[str, str], gguf: Path | None) -> str:
    """``-m``, else (with ``--gguf``) the file's name without ``.gguf``, else the
    environment's or the default."""
    if gguf is not None and not opts.model:
        return _model((gguf.name.removesuffix(".gguf") or gguf.name, "--gguf"))
    return _model(_setting(opts.model, "--model", env, "ZCODER_MODEL"))


def checkpoint_settings(env: Mapping[str, str]) -> CheckpointSettings:
    """The checkpoint settings of the environment; ``ConfigError`` names the first bad one."""
    mode = _choice("ZCODER_CHECKPOINTS", env.get("ZCODER_CHECKPOINTS") or "on", CHECKPOINT_MODES)
    return CheckpointSettings(
        mode=cast(CheckpointMode, mode),
        max_bytes=_limit(env, "ZCODER_CHECKPOINT_MAX_BYTES", DEFAULT_FILE_CAP, (1, 1 << 40)),
        keep_turns=_limit(env, "ZCODER_CHECKPOINT_KEEP_TURNS", DEFAULT_KEEP_TURNS, (1, 100_000)),
        keep_days=_limit(env, "ZCODER_CHECKPOINT_KEEP_DAYS", DEFAULT_KEEP_DAYS, (1, 36_500)),
    )


def load_config(opts: RawOptions, env: Mapping[str, str]) -> Config:
    """Merge flags over environment over defaults, validating every value; an error names
    the flag or the environment variable the bad value came from."""
    raw_profile, profile_name = _setting(opts.profile, "--profile", env, "ZCODER_PROFILE")
    profile = cast(Profile, _choice(profile_name, raw_profile or "coding", PROFILES))
    policy = _command_policy(opts, env, profile)
    gguf = _gguf(opts)
    model = _model_of(opts, env, gguf)
    _check_flags(opts)
    warmup_env = _choice("ZCODER_WARMUP", env.get("ZCODER_WARMUP", "on"), ("on", "off"))
    (raw_host, host_name), api, api_given, host = _server(opts, env, gguf)
    raw_ws, ws_name = _setting(opts.workspace, "--workspace", env, "ZCODER_WORKSPACE")
    relay, relay_problem = _relay(env)
    _check_relay_commands(relay, profile)
    return Config(
        model=model,
        host=host,
        workspace=_workspace(ws_name, raw_ws or os.getcwd()),
        profile=profile,
        command_policy=policy,
        home=default_home(env),
        resume=opts.resume,
        think=not opts.no_think,
        warmup=not opts.no_warmup and warmup_env == "on",
        context_window=opts.context_window,
        compact_at=_compact_at(opts, env),
        debug_log=Path(opts.debug_log).expanduser() if opts.debug_log else None,
        prompt=opts.prompt,
        relay=relay,
        relay_problem=relay_problem,
        model_flag=bool(opts.model),
        **_model_bounds(opts, env),
        api=api,
        api_given=api_given,
        api_key=_api_key(env),
        autodetect=raw_host is None and gguf is None,
        model_default=not (opts.model or env.get("ZCODER_MODEL")) and gguf is None,
        approval_guard=_approval_guard(env),
        agent_name=_agent_name(opts, env),
        workspace_given=raw_ws is not None,
        profile_given=raw_profile is not None,
        host_source=_host_source((raw_host, host_name)),
        output_format=_output_format(opts),
        gguf=gguf,
        checkpoints=checkpoint_settings(env),
        sandbox_network=_sandbox_network(opts, env),
    )
