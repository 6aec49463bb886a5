"""argv -> config -> mode; nothing else.

Heavy modules (trio, httpx, prompt_toolkit) are imported only once the mode is known, so
``--version`` and ``--help`` stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from zcoder import __version__
from zcoder.defaults import DEFAULT_HOST, DEFAULT_MODEL
from zcoder.text.decimal import plain_int

if TYPE_CHECKING:
    from zcoder.config import Config, RawOptions
    from zcoder.localserver.process import ChildServer

__all__ = ["build_parser", "main", "parse_options"]

_EPILOG = """\
commands:
  zcoder agents [--json]   list the other live zcoder instances of this user on this machine
  zcoder config [OPTIONS]  print the effective settings and where each came from
  zcoder mcp ACTION        MCP servers: add, list, get, test, enable, disable, remove,
                           trust, untrust (zcoder mcp --help)

model server:
  With no --host (nor ZCODER_HOST, OLLAMA_HOST) zcoder looks on 127.0.0.1 for Ollama
  (11434), llama.cpp (8080), LM Studio (1234) and vLLM (8000), and uses the first found.
  A host ending in /v1 means the OpenAI-compatible API (or say --api openai); a host
  without it where an OpenAI-compatible server answers is used at its /v1.
  --resume ID reconnects to the session's server, in its workspace and profile, unless
  --host, --api, -w or --profile (or their variables) say otherwise.
  --gguf FILE starts llama.cpp's server for FILE instead, as a child process for this run
  only (needs the local extra: pip install 'zcoder[local]').

environment:
  ZCODER_MODEL, ZCODER_HOST, OLLAMA_HOST, ZCODER_API (ollama|openai), ZCODER_API_KEY
  (sent as a bearer token to an OpenAI-compatible server), ZCODER_WORKSPACE, ZCODER_PROFILE,
  ZCODER_COMMAND_POLICY (ask|allow|deny|sandbox), ZCODER_SANDBOX_NETWORK (on|off),
  ZCODER_HOME, ZCODER_WARMUP (on|off), ZCODER_RELAY (on|off|paused),
  ZCODER_RELAY_COMMANDS (ask|sandbox|deny), ZCODER_RELAY_DIR, ZCODER_RELAY_MAX_BYTES,
  ZCODER_RELAY_MAX_MESSAGE_CHARS, ZCODER_RELAY_MAX_QUEUE, ZCODER_RELAY_IO_TIMEOUT,
  ZCODER_RELAY_INBOUND (accept|hold), ZCODER_RELAY_MAX_HOPS (default 4),
  ZCODER_RELAY_QUESTION_TIMEOUT (s, default 300; 0 waits forever), ZCODER_CHECKPOINTS (on|off),
  ZCODER_CHECKPOINT_KEEP_TURNS, ZCODER_CHECKPOINT_KEEP_DAYS, ZCODER_CHECKPOINT_MAX_BYTES,
  ZCODER_TEMPERATURE, ZCODER_MAX_OUTPUT_TOKENS, ZCODER_FIRST_TOKEN_TIMEOUT (s, default 300),
  ZCODER_STALL_TIMEOUT (s, default 60), ZCODER_TEXT_TOOL_CALLS (on|off),
  ZCODER_APPROVAL_GUARD_MS (default 300), ZCODER_AGENT_NAME.
  Flags override the environment, which overrides $ZCODER_HOME/config.toml (the same
  settings in lower case without ZCODER_: model = "...", compact_at = 80, [relay] max_queue).
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One clear line and exit 2, not argparse's usage dump.
        sys.stderr.write(f"zcoder: {message} (see zcoder --help)\n")
        raise SystemExit(2)


def _positive_int(text: str) -> int:
    # The range itself is checked by load_config; say it here too, for one clear line.
    number = plain_int(text)
    if number is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 256 to 2097152")
    return number


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="zcoder",
        description=(
            "A terminal coding agent for local models (Ollama, llama.cpp, LM Studio, vLLM)."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    a = p.add_argument
    a("-m", "--model", help=f"model name (ZCODER_MODEL, default {DEFAULT_MODEL})")
    a(
        "--host",
        help="model server URL or host:port (ZCODER_HOST, OLLAMA_HOST; default: look for "
        f"one, else {DEFAULT_HOST})",
    )
    a(
        "--api",
        choices=("ollama", "openai"),
        help="the server's API (ZCODER_API; default: openai for a host ending in /v1)",
    )
    a(
        "--gguf",
        metavar="FILE",
        help="start llama.cpp's server for this model file for the run (not with --host, "
        "--api; needs pip install 'zcoder[local]')",
    )
    a("-w", "--workspace", help="workspace directory (ZCODER_WORKSPACE, default: cwd)")
    a("--profile", help="coding or sysadmin (ZCODER_PROFILE, default coding)")
    a("--yes", action="store_true", help="run commands without asking (refused with sysadmin)")
    a("--deny-commands", action="store_true", help="refuse every command the model asks for")
    a(
        "--sandbox",
        action="store_true",
        help="run every command unasked in a sandbox (bubblewrap): workspace writable, the "
        "rest read-only, no network (ZCODER_COMMAND_POLICY=sandbox)",
    )
    a(
        "--sandbox-network",
        action="store_true",
        help="let sandboxed commands use the network (ZCODER_SANDBOX_NETWORK)",
    )
    a(
        "-p",
        "--prompt",
        help="run one turn non-interactively and print the answer (-p - reads the prompt "
        "from standard input)",
    )
    a(
        "--output-format",
        choices=("text", "json", "stream-json"),
        help="with --prompt: the answer as text (default), one JSON result object, or one "
        "JSON object per event (stream-json)",
    )
    a(
        "--resume",
        metavar="SESSION_ID",
        help="continue a saved session (in its workspace, on its server and model)",
    )
    a("--no-think", action="store_true", help="do not ask the model to think")
    a("--no-warmup", action="store_true", help="do not preload the model at start")
    a("--context-window", type=_positive_int, metavar="N", help="context size (num_ctx)")
    a(
        "--compact-at",
        metavar="PCT",
        help="compact the history when a request would pass PCT%% of the context window "
        "(ZCODER_COMPACT_AT, 25-90, default 80)",
    )
    a("--debug-log", metavar="FILE", help="write a debug log to FILE")
    a("--temperature", metavar="T", help="sampling temperature 0-2 (default: the server's)")
    a("--max-output-tokens", metavar="N", help="output cap per model step (default 4096)")
    a(
        "--no-text-tool-calls",
        action="store_true",
        help="do not run tool calls the model printed as text",
    )
    a(
        "--agent-name",
        metavar="NAME",
        help="the label other instances see and /send @NAME uses (ZCODER_AGENT_NAME; "
        "default: the workspace's name)",
    )
    a("--version", action="version", version=f"zcoder {__version__}")
    return p


def _agents_main(argv: Sequence[str]) -> int:
    p = _Parser(prog="zcoder agents", description="List the other live zcoder instances.")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    ns = p.parse_args(list(argv))
    from zcoder.config import RawOptions
    from zcoder.config_file import layer_settings
    from zcoder.errors import ConfigError
    from zcoder.subcommands.agents import run_agents

    try:  # the relay settings may come from the config file
        layers = layer_settings(RawOptions(), os.environ)
    except ConfigError as exc:
        sys.stderr.write(f"zcoder agents: {exc}\n")
        return 2
    return run_agents(as_json=bool(ns.json), env=layers.env, blame=layers.blame)


def _config_main(argv: Sequence[str]) -> int:
    p = build_parser()
    p.prog = "zcoder config"
    p.description = "Print the effective settings (with these options) and where each came from."
    p.epilog = None
    opts = _raw_options(p.parse_args(list(argv)))
    from zcoder.subcommands.config import run_config

    return run_config(opts, os.environ)


def _raw_options(ns: argparse.Namespace) -> RawOptions:
    from zcoder.config import RawOptions

    return RawOptions(
        model=ns.model,
        host=ns.host,
        workspace=ns.workspace,
        profile=ns.profile,
        yes=ns.yes,
        deny_commands=ns.deny_commands,
        resume=ns.resume,
        no_think=ns.no_think,
        no_warmup=ns.no_warmup,
        context_window=ns.context_window,
        compact_at=ns.compact_at,
        debug_log=ns.debug_log,
        prompt=ns.prompt,
        temperature=ns.temperature,
        max_output_tokens=ns.max_output_tokens,
        no_text_tool_calls=ns.no_text_tool_calls,
        api=ns.api,
        agent_name=ns.agent_name,
        output_format=ns.output_format,
        gguf=ns.gguf,
        sandbox=ns.sandbox,
        sandbox_network=ns.sandbox_network,
    )


def parse_options(args: Sequence[str]) -> RawOptions:
    """The flags of ``zcoder [OPTIONS]`` as given (``SystemExit(2)`` with one line for a bad
    one; ``--help`` and ``--version`` exit 0). Validating them is ``load_config``'s job."""
    return _raw_options(build_parser().parse_args(list(args)))


def _read_stdin_prompt() -> str | None:
    """``-p -``: all of standard input is the prompt; None (after one line) when it is
    empty or not UTF-8 text."""
    data = sys.stdin.buffer.read() if sys.stdin is not None else b""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        sys.stderr.write("zcoder: --prompt -: standard input is not UTF-8 text\n")
        return None
    if not text.strip():
        sys.stderr.write("zcoder: --prompt -: standard input is empty\n")
        return None
    return text.rstrip("\r\n")  # the newline that ends what echo or a file gave


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["agents"]:
        return _agents_main(args[1:])
    if args[:1] == ["config"]:
        return _config_main(args[1:])
    if args[:1] == ["mcp"]:
        from zcoder.subcommands.mcp import run_mcp

        return run_mcp(args[1:])
    opts = parse_options(args)
    # attrs costs tens of milliseconds to import: only once --version/--help are ruled out.
    if opts.prompt == "-":
        try:
            prompt = _read_stdin_prompt()
        except KeyboardInterrupt:
            return 130
        if prompt is None:
            return 2
        import attrs

        opts = attrs.evolve(opts, prompt=prompt)
    from zcoder.config_file import load_layers
    from zcoder.errors import ConfigError
    from zcoder.sandbox.settle import settle_sandbox

    try:
        config = settle_sandbox(*load_layers(opts, os.environ))
    except ConfigError as exc:
        sys.stderr.write(f"zcoder: {exc}\n")
        return 2
    if config.prompt is None:  # one-shot settles --resume itself, to say a failure its way
        settled = _interactive_config(config)
        if isinstance(settled, int):
            return settled
        config = settled
    elif config.resume and config.gguf is None:
        config = _session_gguf(config)
    if config.gguf is not None:
        return _with_local_server(config)
    return _run_mode(config)


def _interactive_config(config: Config) -> Config | int:
    """The interactive run's config with ``--resume`` settled, or the exit status."""
    from zcoder.errors import SessionError
    from zcoder.prepare import settle_resume
    from zcoder.text.visible import escape_controls

    try:  # --resume ID brings back the session's workspace, profile, server and model
        config = settle_resume(config)
    except SessionError as exc:
        sys.stderr.write(f"zcoder: {escape_controls(str(exc))}\n")
        return 1
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        sys.stderr.write(
            'zcoder: interactive mode needs a terminal; use --prompt "TEXT" for a one-shot run\n'
        )
        return 2
    return config


def _session_gguf(config: Config) -> Config:
    """A one-shot ``--resume`` of a session whose server zcoder started for a model file:
    that file, as ``--gguf`` gives it, so the server starts before the run (which settles
    the rest of ``--resume`` itself, and says a session it cannot open its own way)."""
    from zcoder.errors import SessionError
    from zcoder.prepare import settle_resume, with_gguf

    try:
        gguf = settle_resume(config).gguf
    except SessionError:
        return config
    return config if gguf is None else with_gguf(config, gguf)


def _with_local_server(config: Config) -> int:
    """``--gguf FILE``: the run inside the life of its own server, stopped after it."""
    from zcoder.errors import LocalServerError
    from zcoder.localserver import local_server
    from zcoder.text.visible import escape_controls

    with contextlib.ExitStack() as stack:
        try:
            config, own = stack.enter_context(local_server(config))
        except LocalServerError as exc:
            return _say_failed(config, escape_controls(str(exc)), 1)
        except KeyboardInterrupt:  # Ctrl-C while it started
            return _say_failed(config, "", 130)
        return _run_mode(config, own)
    raise AssertionError("unreachable")  # pragma: no cover (mypy: ExitStack may swallow)


def _say_failed(config: Config, line: str, status: int) -> int:
    """A run whose model server could not start: one line, and for a one-shot run its
    output format's closing record."""
    if config.prompt is not None:
        from zcoder.oneshot.output import open_output

        output = open_output(config, sys.stdout, sys.stderr)
        return output.failed(line, status, "cancelled" if status == 130 else "error")
    if line:
        sys.stderr.write(f"zcoder: {line}\n")
    return status


def _run_mode(config: Config, own: ChildServer | None = None) -> int:
    """The run of ``config``; ``own`` is the model server zcoder started for it (``--gguf``)."""
    if config.prompt is not None:
        from zcoder.oneshot.run import run_oneshot

        return run_oneshot(config, own)
    from zcoder.app import run_app

    return run_app(config, own)
