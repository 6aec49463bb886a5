"""The controller with the real app, headless: Trio runs as a guest of asyncio (as in
``app.py``), keys go in through a pipe, the backend is a scripted fake.

pytest-trio cannot host a guest run, so these are plain sync tests around ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import math
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from prompt_toolkit.formatted_text import StyleAndTextTuples, to_plain_text
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from zcoder.app.idle import IdleCommands
from zcoder.app.worker import RelayTurn, TurnWorker
from zcoder.approval.questions import ApprovalRequest
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError, ZcoderError
from zcoder.live import Entry, LiveEvent, StateChange, TextDelta, TurnSink
from zcoder.session.data import SessionSummary
from zcoder.ui.agents_text import RUNS_AGAIN, stopped_notice
from zcoder.ui.approval import ApprovalLine
from zcoder.ui.backend import SessionRow, Unrun
from zcoder.ui.controller import Controller
from zcoder.ui.events import Intent, Show, TurnEnded, UiEvent, WorkerEvent
from zcoder.ui.status import Status, render_status
from zcoder.ui.terminal import Terminal


class FakeInbox:
    """The UI's ``RelayView`` of the fake: its queries read the fake backend."""

    def __init__(self, backend: FakeBackend) -> None:
        self._backend = backend

    def status(self) -> tuple[str, int]:
        return self._backend.relay_status()

    def waits_for_model(self) -> bool:
        return self._backend.relay_waits_for_model()

    def unrun(self) -> list[Unrun]:
        return self._backend.relay_unrun()

    def query(self, action: str) -> list[str]:
        return self._backend.relay_control(action)


class FakeBackend:
    def __init__(self) -> None:
        self.inbox = FakeInbox(self)
        self.busy_states: list[bool] = []  # what the worker said, turn by turn
        self.model = "m:1"
        self.session_id = "s1"
        self.session_title = "New session"
        self.models = ["m:1", "other:2"]
        self.turns: list[str] = []
        self.gate = trio.Event()
        self.cancels = 0
        self.question: ApprovalRequest | None = None
        self.answers: list[str] = []
        self.check_problem = ""
        self.warmups: list[str] = []
        self.new_sessions = 0
        self.switched: list[str] = []
        self.relayed: list[str] = []
        self.sent: list[str] = []
        self.paused = False
        self.relay_gate: trio.Event | None = None
        self.model_down = False  # relayed turns fail before reaching the model
        self.waits_model = False  # one did: relayed work waits for the model
        self.stopped = False  # Escape stopped a relayed turn
        self.checks = 0
        self.sink: TurnSink | None = None
        self._relay_change = trio.Event()
        self.approver: ApprovalLine | None = None
        self._scope: trio.CancelScope | None = None

    def set_busy(self, busy: bool) -> None:
        self.busy_states.append(busy)

    def lines(self) -> list[str]:  # ``/mcp`` (the fake is its own ``mcp`` view)
        return ["demo: ready"]

    @property
    def mcp(self) -> FakeBackend:
        return self

    async def run_turn(self, text: str) -> str:
        assert self.sink is not None and self.approver is not None
        self.turns.append(text)
        self.session_title = self.session_title if len(self.turns) > 1 else text
        self.sink.emit(Entry(TranscriptEvent("user", text)))
        self.sink.emit(StateChange("thinking"))
        with trio.CancelScope() as self._scope:
            if self.question is not None:
                self.sink.emit(StateChange("waiting_approval"))
                self.answers.append(await self.approver.ask(self.question))
            self.sink.emit(TextDelta(f"answer to {text}"))
            await self.gate.wait()
            self.sink.emit(Entry(TranscriptEvent("assistant", f"answer to {text}")))
            self.sink.emit(StateChange("ready"))
            return "answered"
        self.sink.emit(Entry(TranscriptEvent("system", "Response generation stopped by user.")))
        self.sink.emit(StateChange("stopped"))
        return "cancelled"

    def cancel_turn(self) -> bool:
        if self._scope is None or self._scope.cancel_called:
            return False
        self.cancels += 1
        self._scope.cancel()
        return True

    async def check_model(self) -> str:
        self.checks += 1
        if self.model_down:
            return "Ollama is not reachable"
        self.waits_model = False
        return self.check_problem

    async def warmup(self) -> str:
        self.warmups.append("started")
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.warmups.append("cancelled")
            raise

    async def list_models(self) -> list[str]:
        return self.models

    def set_model(self, name: str) -> None:
        self.model = name

    def new_session(self) -> None:
        self.new_sessions += 1
        self.session_id, self.session_title = "s9", "New session"

    async def list_sessions(self) -> list[SessionRow]:
        return [
            SessionRow(
                SessionSummary(self.session_id, self.session_title, self.model, 0.0, 0), True
            ),
            SessionRow(SessionSummary("s2", "older work", "m:1", 0.0, 4)),
        ]

    def switch_session(self, session_id: str) -> list[TranscriptEvent]:
        if session_id != "s2":
            raise ZcoderError(f"no saved session {session_id}")
        self.switched.append(session_id)
        self.session_id, self.session_title = "s2", "older work"
        return [TranscriptEvent("user", "old question"), TranscriptEvent("assistant", "old answer")]

    def relay_runnable(self) -> bool:
        return bool(self.relayed) and not (self.paused or self.waits_model or self.stopped)

    def stop_relay(self) -> str:
        self.stopped = bool(self.relayed)
        return stopped_notice(len(self.relayed)) if self.relayed else ""

    def relay_stopped(self) -> bool:
        return self.stopped

    def changed(self) -> None:
        """As the relay does on an accepted message: the worker looks again."""
        self._relay_change.set()

    async def wait_relay_change(self) -> None:
        await self._relay_change.wait()
        self._relay_change = trio.Event()

    def sync_relay(self) -> None:
        pass

    def claim_relay(self) -> RelayTurn | None:
        if not self.relayed:
            return None
        return RelayTurn("peer", self.run_relay_turn)

    def relay_waits_for_model(self) -> bool:
        return self.waits_model and bool(self.relayed)

    def context_percent(self) -> int | None:
        return None

    def served_name(self, name: str, models: list[str]) -> str:
        if name in models:
            return name
        if f"{name}:latest" in models:
            return f"{name}:latest"
        raise CommandError(f"model {name!r} is not served by Ollama: run `ollama pull {name}`")

    async def context_lines(self) -> list[str]:
        return ["window        2,048 tokens"]

    async def compact(self, focus: str) -> bool:
        return False

    async def undo(self, first: int | None) -> list[str]:
        raise ZcoderError("no turn of this session changed files")

    def rewind_lines(self) -> list[str]:
        return []

    def relay_unrun(self) -> list[Unrun]:
        return [Unrun(f"1-ab-{n}", "peer (pid 7)", text) for n, text in enumerate(self.relayed)]

    async def run_relay_turn(self) -> bool:
        if not self.relayed:
            return False
        if self.model_down:  # like the real one: back first in the queue, waiting
            self.turns.append(f"unreached: {self.relayed[0]}")
            self.waits_model = True
            return True
        text = self.relayed.pop(0)
        self.turns.append(f"relay: {text}")
        assert self.sink is not None
        self.sink.emit(Entry(TranscriptEvent("relay", text, meta={"project": "peer"})))
        if self.relay_gate is not None:
            with trio.CancelScope() as self._scope:
                await self.relay_gate.wait()
            if self._scope.cancelled_caught:  # like the agent: the turn's state is stopped
                self.sink.emit(Entry(TranscriptEvent("system", "Relayed turn stopped.")))
                self.sink.emit(StateChange("stopped"))
        return True

    def relay_status(self) -> tuple[str, int]:
        return ("paused" if self.paused else "on"), len(self.relayed)

    async def list_agents(self) -> list[str]:
        raise ZcoderError("the relay is not running in this instance")

    async def send_message(self, args: str) -> None:
        assert self.sink is not None
        self.sent.append(args)
        meta = {"name": "/send", "target": "beta (pid 7) · a-1", "state": "delivered"}
        self.sink.emit(Entry(TranscriptEvent("tool", "accepted (queue position 1)", meta=meta)))

    def relay_control(self, action: str) -> list[str]:
        if action == "pause":
            self.paused = True
            return ["Relay paused."]
        if action == "resume":
            was, self.stopped = self.stopped, False
            if was and not self.paused:
                return [RUNS_AGAIN]
            self.paused = False
            return ["Relay resumed."]
        raise ZcoderError("the relay is not running in this instance")

    def relay_sent(self) -> list[str]:
        return ["No messages sent in this session yet."]

    async def relay_cancel(self, ref: str) -> str:
        raise ZcoderError(f"no message {ref!r} was sent from this instance")


class ChannelSink:
    def __init__(self, events: trio.MemorySendChannel[WorkerEvent]) -> None:
        self.events = events

    def emit(self, event: LiveEvent) -> None:
        self.events.send_nowait(Show(event))


@attrs.define
class Harness:
    terminal: Terminal
    controller: Controller
    worker: TurnWorker
    backend: FakeBackend
    inp: PipeInput
    printed: list[str]
    clock: list[float]
    exited: trio.Event = attrs.Factory(trio.Event)
    reason: str = ""
    turns_ended: int = 0  # TurnEnded events the controller has shown

    def keys(self, text: str) -> None:
        self.inp.send_text(text)

    @property
    def queue(self) -> list[str]:
        return self.terminal.view.queued

    @property
    def output(self) -> str:
        return "".join(self.printed)

    async def until(self, check: Callable[[], Any]) -> None:
        # Polling: the keys are handled on the asyncio side, which has no Trio event to wait on.
        with trio.fail_after(20):
            while not check():  # noqa: ASYNC110
                await trio.sleep(0.01)


def run(body: Callable[[Harness], Awaitable[None]], backend: FakeBackend, **kw: Any) -> Harness:
    """The wiring of ``app/main.py``: keys -> controller -> intents -> worker -> events."""
    box: list[Harness] = []

    async def trio_main() -> None:
        token = trio.lowlevel.current_trio_token()
        clock = [1000.0]
        keys_send, keys = trio.open_memory_channel[UiEvent](math.inf)
        intents_send, intents = trio.open_memory_channel[Intent](math.inf)
        events_send, events = trio.open_memory_channel[WorkerEvent](math.inf)
        with create_pipe_input() as inp:
            terminal = Terminal(
                status=Status(model=backend.model, profile="coding"),
                post=lambda ev: token.run_sync_soon(keys_send.send_nowait, ev),
                schedule=token.run_sync_soon,
                input=inp,
                output=DummyOutput(),
                clock=lambda: clock[0],
            )
            printed: list[str] = []

            def capture(fragments: StyleAndTextTuples) -> None:
                printed.append(to_plain_text(fragments))

            terminal._write = capture  # type: ignore[method-assign]
            backend.sink, backend.approver = ChannelSink(events_send), terminal.approval
            commands = IdleCommands(backend)
            worker = TurnWorker(backend, intents, events_send, commands=commands, **kw)
            controller = Controller(terminal, backend, keys, intents_send, events)
            h = Harness(terminal, controller, worker, backend, inp, printed, clock)
            box.append(h)
            apply = controller.presenter.apply

            def counting_apply(event: WorkerEvent) -> None:
                # A turn the backend has seen may not have reached the controller yet
                # (turn_active still False): the count says when its end was shown.
                apply(event)
                if isinstance(event, TurnEnded):
                    h.turns_ended += 1

            controller.presenter.apply = counting_apply  # type: ignore[method-assign]

            async def run_controller() -> None:
                h.reason = await controller.run()
                h.exited.set()

            async with trio.open_nursery() as nursery:
                await nursery.start(terminal.run)
                await nursery.start(worker.run)
                nursery.start_soon(run_controller)
                await body(h)
                nursery.cancel_scope.cancel()

    async def host() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        trio.lowlevel.start_guest_run(
            trio_main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=done.set_result,
            host_uses_signal_set_wakeup_fd=True,
        )
        (await done).unwrap()

    asyncio.run(host())
    return box[0]


def test_a_prompt_runs_a_turn_and_lands_in_the_scrollback() -> None:
    async def body(h: Harness) -> None:
        h.keys("hello\r")
        await h.until(lambda: h.backend.turns == ["hello"])
        await h.until(lambda: h.terminal.turn_running)
        assert h.terminal.status.state == "thinking"
        h.backend.gate.set()
        await h.until(lambda: not h.controller.turn_active)
        assert h.terminal.status.state == "ready"
        assert h.terminal.status.title == "hello"

    h = run(body, FakeBackend(), warmup=False)
    assert "\n› hello\n" in h.output
    assert "● answer to hello\n" in h.output


def test_enter_during_a_turn_queues_the_next_prompt() -> None:
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.backend.turns == ["one"])
        h.keys("two\r")
        await h.until(lambda: h.terminal.status.queued_prompts == 1)
        assert h.terminal.view.queued == ["two"]
        assert "⧗ two" in to_plain_text(h.terminal.view.render_live(20))
        h.backend.gate.set()
        await h.until(lambda: h.turns_ended == 2)
        assert h.backend.turns == ["one", "two"] and not h.controller.turn_active
        assert h.terminal.status.queued_prompts == 0

    run(body, FakeBackend(), warmup=False)


def test_escape_cancels_the_turn_keeps_the_draft_and_returns_queued_prompts() -> None:
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.terminal.turn_running)
        h.keys("two\r")
        await h.until(lambda: h.queue == ["two"])
        h.keys("draft")
        await h.until(lambda: h.terminal.buffer.text == "draft")
        h.keys("\x1b")
        await h.until(lambda: not h.controller.turn_active)
        assert h.backend.cancels == 1
        assert h.terminal.buffer.text == "two\ndraft"
        assert h.queue == []
        assert h.terminal.status.state == "stopped"
        assert h.backend.turns == ["one"]

    h = run(body, FakeBackend(), warmup=False)
    assert "● answer to one\n" in h.output  # the partial answer is kept visible
    assert h.output.index("stopped by user") < h.output.index("queued prompts are back")


def test_idle_only_commands_wait_for_the_turn_but_help_works_during_it() -> None:
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.terminal.turn_running)
        h.keys("/new\r")
        await h.until(lambda: h.queue == ["/new"])  # queued like a prompt, shown as such
        h.keys("/help\r")
        await h.until(lambda: "Commands:" in h.output)
        assert h.backend.new_sessions == 0
        h.backend.gate.set()
        await h.until(lambda: h.backend.new_sessions == 1)
        await h.until(lambda: "New session s9." in h.output)

    h = run(body, FakeBackend(), warmup=False)
    assert "/model [NAME]" in h.output and "Esc" in h.output
    assert h.output.index("answer to one") < h.output.index("New session s9.")


def test_an_argument_to_a_command_that_takes_none_is_refused_and_changes_nothing() -> None:
    async def body(h: Harness) -> None:
        h.keys("/new extra\r")
        await h.until(lambda: "✗ /new takes no argument (see /help)" in h.output)
        h.keys("/quit now\r")
        await h.until(lambda: "✗ /quit takes no argument (see /help)" in h.output)
        h.keys("/new\r")
        await h.until(lambda: h.backend.new_sessions == 1)
        assert h.reason == "" and not h.exited.is_set()
        assert h.backend.turns == []

    h = run(body, FakeBackend(), warmup=False)
    assert h.output.count("New session s9.") == 1


def test_unknown_slash_text_goes_to_the_model() -> None:
    async def body(h: Harness) -> None:
        h.keys("/etc/hosts looks odd\r")
        await h.until(lambda: h.backend.turns == ["/etc/hosts looks odd"])

    run(body, FakeBackend(), warmup=False)


def test_a_mistyped_command_is_answered_and_never_sent() -> None:
    async def body(h: Harness) -> None:
        h.keys("/hepl\r")
        await h.until(lambda: "✗ unknown command /hepl: did you mean /help?" in h.output)
        h.keys("/sesions\r")
        await h.until(lambda: "did you mean /sessions?" in h.output)
        h.keys("/agents paws\r")
        await h.until(
            lambda: "✗ unknown /agents action paws: did you mean /agents pause?" in h.output
        )
        h.keys("//hepl is a typo\r")  # a doubled slash sends it on purpose
        await h.until(lambda: h.backend.turns == ["/hepl is a typo"])
        assert h.terminal.status.title == "/hepl is a typo"

    h = run(body, FakeBackend(), warmup=False)
    assert "hold, accept, inbox, show N, approve N, deny N, sent, " in h.output
    assert "(//hepl sends it to the model)" in h.output


def test_a_doubled_slash_prompt_comes_back_as_typed_after_escape() -> None:
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.terminal.turn_running)
        h.keys("//hepl me\r")
        await h.until(lambda: h.queue == ["/hepl me"])
        h.keys("\x1b")
        await h.until(lambda: not h.controller.turn_active and h.terminal.buffer.text)
        assert h.terminal.buffer.text == "//hepl me"

    run(body, FakeBackend(), warmup=False)


def test_a_doubled_slash_command_name_comes_back_doubled_and_never_runs() -> None:
    # "//new" sent "/new" to the model; handed back, it must not read as the command.
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.terminal.turn_running)
        h.keys("//new\r")
        # A real command, queued: it is named as not run, never put beside the prompt
        # (sent with it, it would reach the model as text).
        h.keys("/model other:2\r")
        await h.until(lambda: h.queue == ["/new", "/model other:2"])
        h.keys("\x1b")
        await h.until(lambda: not h.controller.turn_active and h.terminal.buffer.text)
        assert h.terminal.buffer.text == "//new"
        await h.until(lambda: "Not run: /model other:2; type it again to run it." in h.output)
        assert h.backend.new_sessions == 0

    run(body, FakeBackend(), warmup=False)


def test_sessions_list_and_switch_by_number() -> None:
    async def body(h: Harness) -> None:
        h.keys("/sessions\r")
        await h.until(lambda: "older work" in h.output)
        h.keys("/sessions 2\r")
        await h.until(lambda: h.backend.switched == ["s2"])
        await h.until(lambda: "Switched to session s2." in h.output)
        assert h.terminal.status.title == "older work"
        h.keys("/sessions nope\r")
        await h.until(lambda: "✗ no saved session nope" in h.output)
        h.keys("/sessions 3\r")
        await h.until(lambda: "✗ no session number 3: /sessions lists 1 to 2" in h.output)
        assert h.backend.switched == ["s2"]

    h = run(body, FakeBackend(), warmup=False)
    assert "› old question\n● old answer\n" in h.output


def test_model_list_and_switch() -> None:
    async def body(h: Harness) -> None:
        h.keys("/model\r")
        await h.until(lambda: "* m:1" in h.output)
        h.keys("/model nope\r")
        await h.until(lambda: "'nope' is not served by Ollama: run `ollama pull nope`" in h.output)
        h.keys("/model other:2\r")
        await h.until(lambda: h.terminal.status.model == "other:2")
        assert h.backend.model == "other:2"

    run(body, FakeBackend(), warmup=False)


def test_keys_before_a_question_never_answer_it() -> None:
    backend = FakeBackend()
    backend.question = ApprovalRequest("command", "rm -r build", ("y", "a", "n"), cwd="/w")

    async def body(h: Harness) -> None:
        h.keys("go\r")
        await h.until(lambda: h.terminal.approval.is_open)
        await h.until(lambda: h.terminal.approval.shown)
        h.keys("y")  # the clock has not moved: the question was not seen yet
        await h.until(lambda: h.terminal.approval.ignored == 1)
        assert h.terminal.status.state == "waiting_approval"
        h.clock[0] += 1.0
        h.keys("y")
        await h.until(lambda: h.backend.answers == ["y"])
        assert h.terminal.buffer.text == ""  # the keys did not leak into the input
        h.backend.gate.set()
        await h.until(lambda: not h.controller.turn_active)

    run(body, backend, warmup=False)


def test_escape_denies_an_open_question() -> None:
    backend = FakeBackend()
    backend.question = ApprovalRequest("command", "ls", ("y", "n"), origin="relay")

    async def body(h: Harness) -> None:
        h.keys("go\r")
        await h.until(lambda: h.terminal.approval.is_open)
        h.keys("\x1b")
        await h.until(lambda: h.backend.answers == ["n"])
        assert h.terminal.turn_running  # Escape answered the question, not the turn
        h.backend.gate.set()

    run(body, backend, warmup=False)


def test_warmup_runs_at_start_and_the_first_prompt_cancels_it() -> None:
    async def body(h: Harness) -> None:
        await h.until(lambda: h.terminal.status.warmup == "warming up")
        h.keys("hi\r")
        await h.until(lambda: h.backend.warmups == ["started", "cancelled"])
        # The worker tells the controller after the backend saw the cancel: wait for it.
        await h.until(lambda: h.terminal.status.warmup == "")
        await h.until(lambda: h.backend.turns == ["hi"])
        h.backend.gate.set()

    run(body, FakeBackend(), warmup=True)


def test_a_server_problem_is_one_line_and_the_app_stays_usable() -> None:
    backend = FakeBackend()
    problem = (
        "Ollama is not reachable at http://x:1: is `ollama serve` running? "
        "(or point --host at the server that runs)"
    )
    backend.check_problem = problem

    async def body(h: Harness) -> None:
        # Word-wrapped at the 80 columns of DummyOutput, never inside a word.
        wrapped = textwrap.fill(
            problem, 80, initial_indent="✗ ", subsequent_indent="  ", break_on_hyphens=False
        )
        assert "\n" in wrapped  # the case: a line longer than the terminal
        await h.until(lambda: f"{wrapped}\n" in h.output)
        assert h.terminal.status.state == "offline"
        assert h.backend.warmups == []
        h.keys("/help\r")
        await h.until(lambda: "Commands:" in h.output)
        h.keys("retry\r")
        await h.until(lambda: h.terminal.status.state == "thinking")
        h.backend.gate.set()

    run(body, backend, warmup=True)


def test_a_waiting_relayed_message_runs_before_the_next_local_prompt() -> None:
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.backend.turns == ["one"])
        h.keys("two\r")
        await h.until(lambda: h.queue == ["two"])
        h.backend.relayed.append("from a peer")
        h.backend.changed()
        await h.until(lambda: h.terminal.status.relay_queued == 1)
        h.backend.gate.set()
        await h.until(lambda: h.turns_ended == 3)
        assert h.backend.turns == ["one", "relay: from a peer", "two"]
        assert not h.controller.turn_active
        assert (h.terminal.status.relay, h.terminal.status.relay_queued) == ("on", 0)

    h = run(body, FakeBackend(), warmup=False)
    assert "⇄ relayed from peer" in h.output


def test_escape_on_a_relayed_turn_holds_the_waiting_relayed_messages() -> None:
    backend = FakeBackend()
    backend.relay_gate = trio.Event()
    backend.relayed.extend(["first", "second"])

    async def body(h: Harness) -> None:
        h.backend.changed()
        await h.until(lambda: h.backend.turns == ["relay: first"])
        await h.until(lambda: h.terminal.status.relayed_from == "peer")
        status = to_plain_text(render_status(h.terminal.status, 120))
        assert "relayed from peer" in status and "New session" not in status
        h.keys("\x1b")
        await h.until(lambda: h.backend.stopped and not h.controller.turn_active)
        # Stopped, not paused: the relay still accepts (and acknowledges) new messages.
        assert not h.backend.paused
        assert h.backend.turns == ["relay: first"] and h.backend.relayed == ["second"]
        await h.until(lambda: h.terminal.status.relay_stopped)
        bar = to_plain_text(render_status(h.terminal.status, 120))
        assert bar.startswith(" stopped ") and "relay on (1 waiting, stopped)" in bar, bar
        h.backend.relayed.append("third")  # accepted meanwhile: waits too
        h.backend.changed()
        h.keys("local\r")  # local prompts still run while relayed work is stopped
        await h.until(lambda: h.backend.turns == ["relay: first", "local"])
        h.backend.gate.set()
        await h.until(lambda: h.turns_ended == 2)
        assert h.backend.turns == ["relay: first", "local"] and not h.controller.turn_active
        # Ready for local input, but not for relayed work: the bar must not read as if all ran.
        bar = to_plain_text(render_status(h.terminal.status, 120))
        assert bar.startswith(" ready · relayed work stopped "), bar
        h.backend.relay_gate = None
        h.keys("/agents resume\r")
        await h.until(lambda: h.backend.turns[-2:] == ["relay: second", "relay: third"])
        assert not h.backend.stopped
        await h.until(lambda: not h.controller.turn_active)
        await h.until(lambda: not h.terminal.status.relay_stopped)
        assert "stopped" not in to_plain_text(render_status(h.terminal.status, 120))

    h = run(body, backend, warmup=False)
    notice = "Relayed work stopped: 1 more relayed message waits; /agents resume runs it (new"
    assert notice in flat(h.output)
    # Said after the stopped turn's own lines, not in the middle of them.
    assert h.output.index("Relayed turn stopped.") < flat(h.output).index(notice)
    assert "Relayed work runs again, in order." in h.output


def test_a_prompt_queued_behind_relayed_messages_waits_for_at_most_one() -> None:
    # Issue 8: three queued relays all ran before a prompt typed before the third arrived.
    backend = FakeBackend()
    backend.relay_gate = trio.Event()
    backend.relayed.append("r1")

    async def body(h: Harness) -> None:
        h.backend.changed()
        await h.until(lambda: h.backend.turns == ["relay: r1"])
        h.backend.relayed.extend(["r2", "r3"])
        h.backend.changed()
        h.keys("mine\r")
        await h.until(lambda: h.queue == ["mine"])
        h.backend.gate.set()  # the local turn answers at once
        first, h.backend.relay_gate = h.backend.relay_gate, None
        assert first is not None
        first.set()
        await h.until(lambda: len(h.backend.turns) == 4)
        assert h.backend.turns == ["relay: r1", "mine", "relay: r2", "relay: r3"]

    run(body, backend, warmup=False)


def test_quit_and_ctrl_d_end_the_controller() -> None:
    for keys in ("/quit\r", "\x04", "\x03"):

        async def body(h: Harness, keys: str = keys) -> None:
            h.keys(keys)
            await h.exited.wait()

        assert run(body, FakeBackend(), warmup=False).reason == "user"


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_relayed_message_that_did_not_reach_the_model_waits_and_runs_later() -> None:
    backend = FakeBackend()
    backend.model_down = True
    backend.relayed.append("from a peer")

    async def body(h: Harness) -> None:
        h.backend.changed()
        await h.until(lambda: h.backend.turns == ["unreached: from a peer"])
        await h.until(lambda: h.terminal.status.relay_waits_model)
        assert h.terminal.status.relay_queued == 1
        status = to_plain_text(render_status(h.terminal.status, 120))
        assert "relay on (1 waiting for the model)" in status
        h.keys("local\r")  # a local prompt still runs meanwhile
        await h.until(lambda: h.backend.turns[-1] == "local")
        h.backend.gate.set()
        await h.until(lambda: h.backend.checks >= 2)  # backing off, checking the server
        assert h.backend.turns == ["unreached: from a peer", "local"]  # no retry while down
        h.backend.model_down = False
        await h.until(lambda: h.backend.turns[-1] == "relay: from a peer")
        await h.until(lambda: not h.controller.turn_active)
        await h.until(lambda: h.terminal.status.relay_queued == 0)
        assert not h.terminal.status.relay_waits_model

    run(body, backend, warmup=False, model_retry=(0.01, 0.02))


def test_the_first_quit_says_which_relayed_messages_it_would_drop() -> None:
    backend = FakeBackend()
    backend.paused = True  # accepted, not run
    backend.relayed.extend(["first", "second"])

    async def body(h: Harness) -> None:
        h.keys("/quit\r")
        await h.until(lambda: "leaving drops them" in flat(h.output))
        assert not h.exited.is_set()
        backend.relayed.append("third")  # new since the warning: warned again
        h.keys("\x04")
        await h.until(lambda: flat(h.output).count("leaving drops them") == 2)
        assert not h.exited.is_set()
        h.keys("\x04")
        await h.exited.wait()

    h = run(body, backend, warmup=False)
    assert h.reason == "user"
    assert (
        "2 accepted relayed messages have not run yet, from peer (pid 7): leaving drops "
        "them. /quit or Ctrl-D again to leave anyway."
    ) in flat(h.output)


def test_a_signal_leaves_at_once_whatever_waits() -> None:
    backend = FakeBackend()
    backend.paused = True
    backend.relayed.append("first")

    async def body(h: Harness) -> None:
        h.controller.request_exit("SIGTERM")
        await h.exited.wait()

    h = run(body, backend, warmup=False)
    assert h.reason == "SIGTERM" and "leaving drops" not in h.output


def test_send_goes_out_at_once_even_during_a_turn() -> None:
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.terminal.turn_running)
        h.keys("/send @beta run the tests\r")
        await h.until(lambda: h.backend.sent == ["@beta run the tests"])
        assert h.controller.turn_active and h.queue == []  # not queued behind the turn
        await h.until(lambda: "accepted (queue position 1)" in h.output)
        h.backend.gate.set()
        await h.until(lambda: not h.controller.turn_active)
        assert h.backend.turns == ["one"]  # no turn of its own

    h = run(body, FakeBackend(), warmup=False)
    assert "✓ /send beta (pid 7) · a-1" in h.output
