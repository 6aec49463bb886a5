"""Small in-test doubles for the agent's collaborators (model, tools, session, approver)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from zcoder.agent.approvals import SEND
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo
from zcoder.agent.servers import OLLAMA
from zcoder.approval.questions import Answer, ApprovalRequest
from zcoder.config import Config
from zcoder.conversation import Message, ToolCall, TranscriptEvent
from zcoder.errors import ToolError
from zcoder.live import Entry, LiveEvent
from zcoder.session.data import SessionServer
from zcoder.tools.base import ToolContext, ToolResult, ToolSpec
from zcoder.tools.finish import FINISH
from zcoder.tools.registry import CheckedCall
from zcoder.tools.schema import check_arguments
from zcoder.tools.shell import RUN_COMMAND

__all__ = [
    "HANG",
    "FakeApprover",
    "FakeSession",
    "FakeStore",
    "FakeToolbox",
    "RecordingSink",
    "Reply",
    "ScriptedClient",
    "call",
    "make_config",
    "text",
    "tools",
]

HANG = object()  # in a reply script: block until cancelled
Item = ChatChunk | BaseException | object
Reply = Sequence[Item] | BaseException


def text(*pieces: str, done_reason: str = "stop", prompt_tokens: int = 0) -> list[Item]:
    """A streamed answer; ``prompt_tokens``: the prompt size the server counted."""
    done = ChatChunk(done=True, done_reason=done_reason, prompt_eval_count=prompt_tokens)
    return [*(ChatChunk(content=p) for p in pieces), done]


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


def tools(*calls: ToolCall, content: str = "") -> list[Item]:
    return [ChatChunk(content=content, tool_calls=tuple(calls)), ChatChunk(done=True)]


class ScriptedClient:
    """Replays one reply per ``stream_chat``; the last one repeats. ``context`` is what
    ``context_length`` reports (a ``ModelError`` instance: raised); ``asked`` counts asks.
    ``summaries``, when set, answers every request without tools (a compaction's summary
    requests, however many) outside the script."""

    kind = OLLAMA

    def __init__(
        self,
        replies: Sequence[Reply],
        context: int | Exception | None = None,
        summaries: Reply | None = None,
    ) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []
        self.open_streams = 0
        self.context = context
        self.asked: list[str] = []
        self.summaries = summaries

    async def context_length(self, model: str) -> int | None:
        self.asked.append(model)
        await trio.lowlevel.checkpoint()
        if isinstance(self.context, Exception):
            raise self.context
        return self.context

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        self.requests.append(request)
        if self.summaries is not None and not request.tools:
            reply = self.summaries
        else:
            # the script's place: the requests so far that it answered (a test may clear them)
            scripted = sum(1 for r in self.requests if self.summaries is None or r.tools)
            reply = self.replies[min(scripted, len(self.replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        self.open_streams += 1
        try:
            async with aclosing(self._chunks(reply)) as chunks:  # closed even when left early
                yield chunks
        finally:
            self.open_streams -= 1

    async def _chunks(self, reply: Sequence[Item]) -> AsyncGenerator[ChatChunk, None]:
        for item in reply:
            await trio.lowlevel.checkpoint()
            if item is HANG:
                await trio.sleep_forever()
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, ChatChunk)
            yield item

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo("m")]

    async def aclose(self) -> None:
        pass


Handler = Callable[[Mapping[str, Any]], Awaitable[ToolResult]]


async def _ok(args: Mapping[str, Any]) -> ToolResult:
    return ToolResult(f"ok {dict(args)}", summary="ok")


_SEND_SCHEMA = {
    "type": "object",
    "properties": {"target_instance_id": {"type": "string"}, "message": {"type": "string"}},
    "required": ["target_instance_id", "message"],
}
# Tools with a real schema: the loop checks their arguments before it asks about or runs
# them. The others take any arguments.
_SCHEMAS: dict[str, Mapping[str, Any]] = {
    "run_command": RUN_COMMAND.spec.parameters,
    "finish": FINISH.spec.parameters,
    SEND: _SEND_SCHEMA,
}
_LOOSE = {"type": "object", "properties": {}}


class FakeToolbox:
    """Records the calls it runs (with their checked arguments); ``handlers`` override the
    default ``ok`` result per tool name."""

    NAMES = ("read_file", "write_file", "run_command", "finish")

    def __init__(self, handlers: Mapping[str, Handler] | None = None, send: bool = False) -> None:
        self.handlers = dict(handlers or {})
        self.names = [*self.NAMES, *(("list_agents", "send_agent_message") if send else ())]
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def asks(self, name: str) -> str:
        return "never"

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(n, f"{n} tool", dict(_SCHEMAS.get(n, _LOOSE))) for n in self.names]

    def target_of(self, name: str, args: Mapping[str, Any]) -> str:
        for key in ("path", "command", "target_instance_id"):
            if isinstance(args.get(key), str):
                return str(args[key])
        return ""

    def check(self, name: str, args: Mapping[str, Any]) -> CheckedCall | ToolResult:
        if name not in self.names:
            return ToolResult(f"Error: unknown tool {name}", ok=False, summary="unknown tool")
        schema = _SCHEMAS.get(name)
        try:
            return CheckedCall(name, check_arguments(schema, args) if schema else dict(args))
        except ToolError as exc:
            text = f"invalid arguments for {name}: {exc}"
            return ToolResult(f"Error: {text}", ok=False, summary=text)

    async def run(self, checked: CheckedCall, ctx: ToolContext) -> ToolResult:
        self.calls.append((checked.name, dict(checked.arguments)))
        return await self.handlers.get(checked.name, _ok)(checked.arguments)


@attrs.define
class FakeSession:
    workspace: Path
    model: str = "m"
    id: str = "s1"
    profile: str = "coding"
    title: str = "New session"
    history: list[Message] = attrs.Factory(list)
    events: list[TranscriptEvent] = attrs.Factory(list)
    user_requests: list[str] = attrs.Factory(list)
    server: SessionServer | None = None
    agent_name: str = ""
    oneshot: bool = False

    def record_user_prompt(self, text: str) -> None:
        self.user_requests.append(text)
        if self.title == "New session":
            self.title = " ".join(text.split())[:42]


class FakeStore:
    """Keeps a copy of the history at every save."""

    def __init__(self) -> None:
        self.saved: list[list[Message]] = []

    def save(self, session: FakeSession) -> None:
        self.saved.append(list(session.history))

    async def save_async(self, session: FakeSession) -> bool:
        self.save(session)
        return True


class FakeApprover:
    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> Answer:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else "n"


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[LiveEvent] = []
        self._watches: list[tuple[Callable[[LiveEvent], bool], trio.Event]] = []

    def emit(self, event: LiveEvent) -> None:
        self.events.append(event)
        for seen, flag in self._watches:
            if seen(event):
                flag.set()

    def watch(self, seen: Callable[[LiveEvent], bool]) -> trio.Event:
        """An event set when an emitted live event matches ``seen``."""
        flag = trio.Event()
        if any(seen(e) for e in self.events):
            flag.set()
        self._watches.append((seen, flag))
        return flag

    def entries(self) -> list[TranscriptEvent]:
        return [e.event for e in self.events if isinstance(e, Entry)]

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def make_config(workspace: Path, **changes: Any) -> Config:
    base = Config(
        model="m",
        host="http://127.0.0.1:9",
        workspace=workspace,
        profile="coding",
        command_policy="ask",
        home=workspace / ".zhome",
    )
    return attrs.evolve(base, **changes)
