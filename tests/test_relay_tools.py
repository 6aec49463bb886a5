"""The relay tools over a fake relay handle: listing, target checks, message checks, acks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.relay.helpers import make_manifest
from zcoder.errors import RelayTransportError, RelayUnavailable, ToolError
from zcoder.relay.envelope import Ack
from zcoder.relay.listing import NO_PEERS
from zcoder.relay.registry import Peer
from zcoder.tools.base import ToolContext, ToolResult
from zcoder.tools.registry import Toolbox
from zcoder.tools.relay_tools import MAX_LISTED, check_send, relay_tools

CTX = ToolContext(workspace=Path("/work/proj"))
DIGEST = Peer(make_manifest(Path("/r"), "42302-18473291", project="weekly-digest"), "ready")
DIGEST2 = Peer(
    make_manifest(Path("/r"), "42400-11112222", project="weekly-digest", workspace="/w2/wd"),
    "busy",
)
DIGEST_ID = "42302-18473291"
PROFILES = Peer(make_manifest(Path("/r"), "42110-18471001", project="user-profiles"), "paused")


class FakeHandle:
    def __init__(self, peers: list[Peer], ack: Ack | Exception | None = None) -> None:
        self.peers = peers
        self.ack = ack
        self.sent: list[tuple[str, str]] = []
        self.hops: list[int] = []
        self.discover_error: Exception | None = None
        self.numbers: dict[str, int] = {}  # what ``/agents sent`` numbers a stored message

    @property
    def max_message_chars(self) -> int:
        return 20

    async def discover(self) -> list[Peer]:
        if self.discover_error is not None:
            raise self.discover_error
        return list(self.peers)

    async def deliver(self, peer: Peer, message: str, hops: int = 0) -> Ack:
        self.sent.append((peer.manifest.instance_id, message))
        self.hops.append(hops)
        if isinstance(self.ack, Exception):
            raise self.ack
        assert self.ack is not None
        return self.ack

    def sent_number(self, message_id: str) -> int | None:
        return self.numbers.get(message_id)


def ack(status: str, position: int | None = None) -> Ack:
    return Ack(protocol=1, type="ack", message_id="1-2-3", status=status, queue_position=position)


async def call(handle: FakeHandle, name: str, **args: Any) -> ToolResult:
    return await Toolbox(relay_tools(handle)).call(name, args, CTX)


def test_the_tools_and_their_schemas() -> None:
    box = Toolbox(relay_tools(FakeHandle([])))
    assert box.names() == ["list_agents", "send_agent_message"]
    listing, send = box.specs()
    assert listing.parameters == {"type": "object", "properties": {}}
    assert send.parameters["required"] == ["target_instance_id", "message"]
    for phrase in (
        "ONLY when the current user explicitly asked",
        "smallest self-contained task",
        "never include secrets or unrelated conversation history",
        "never claim that the other instance completed anything",
    ):
        assert phrase in send.description


async def test_list_agents_returns_the_discovered_records_in_order() -> None:
    result = await call(FakeHandle([PROFILES, DIGEST]), "list_agents")
    records = [json.loads(line) for line in result.text.splitlines()]
    assert records == [
        {
            "instance_id": "42110-18471001",
            "project": "user-profiles",
            "workspace": "/work/proj",
            "pid": 42110,
            "profile": "coding",
            "model": "qwen3-coder",
            "state": "paused",
        },
        {
            "instance_id": "42302-18473291",
            "project": "weekly-digest",
            "workspace": "/work/proj",
            "pid": 42302,
            "profile": "coding",
            "model": "qwen3-coder",
            "state": "ready",
        },
    ]
    assert (result.ok, result.summary) == (True, "2 other instances")


async def test_list_agents_without_peers_and_bounded() -> None:
    empty = await call(FakeHandle([]), "list_agents")
    assert (empty.ok, empty.text) == (True, NO_PEERS)
    many = [
        Peer(make_manifest(Path("/r"), f"{1000 + n}-abcdef01", project=f"p{n:02d}"), "ready")
        for n in range(MAX_LISTED + 3)
    ]
    result = await call(FakeHandle(many), "list_agents")
    lines = result.text.splitlines()
    assert len(lines) == MAX_LISTED + 1
    assert lines[-1] == "(3 more instances not listed)"


async def test_list_agents_reports_an_unusable_relay() -> None:
    handle = FakeHandle([])
    handle.discover_error = RelayUnavailable("the relay is off (ZCODER_RELAY=off)")
    result = await call(handle, "list_agents")
    assert not result.ok
    assert result.text == "Error: the relay is not usable: the relay is off (ZCODER_RELAY=off)"


async def test_send_delivers_the_literal_message_and_reports_the_exact_ack() -> None:
    handle = FakeHandle([DIGEST, PROFILES], ack("accepted", 1))
    message = "$(rm x) `y` \\n\n\t"
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message=message)
    assert handle.sent == [(DIGEST_ID, message)]
    first, second, third = result.text.splitlines()
    assert first == "accepted (queue position 1)"
    assert "do not claim it was completed" in second
    assert third == "This peer sends no receipts: nothing more will be known of this message."
    assert result.ok
    assert result.summary == (
        "accepted (queue position 1) by weekly-digest (pid 42302) · this peer sends no receipts"
    )


async def test_a_stored_send_names_the_number_its_receipts_will_use() -> None:
    handle = FakeHandle([DIGEST, PROFILES], ack("accepted", 2))
    handle.numbers["1-2-3"] = 3
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="go")
    assert result.summary.startswith("#3 accepted (queue position 2) by weekly-digest")
    handle.ack = ack("paused")  # not stored: no number, whatever the list holds
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="go")
    assert not result.summary.startswith("#")


async def test_a_send_carries_the_turns_hop_count() -> None:
    # 0 in the local user's turn (CTX); one more than the relayed message's in a relayed turn.
    handle = FakeHandle([DIGEST, PROFILES], ack("accepted", 1))
    await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="go")
    relayed = attrs.evolve(CTX, hops=3)
    args = {"target_instance_id": DIGEST_ID, "message": "go on"}
    await Toolbox(relay_tools(handle)).call("send_agent_message", args, relayed)
    assert handle.hops == [0, 3]


async def test_an_accepted_ack_without_a_readable_position_says_accepted_only() -> None:
    # A liberal reader drops a queue_position it cannot read; the result must not say "None".
    handle = FakeHandle([DIGEST, PROFILES], ack("accepted", None))
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="go")
    assert result.ok and result.text.splitlines()[0] == "accepted"
    assert result.summary.startswith("accepted by weekly-digest (pid 42302)")


async def test_a_send_to_a_peer_with_receipts_points_the_model_at_the_status_tool() -> None:
    stored = attrs.evolve(ack("accepted", 1), receipts=True)
    handle = FakeHandle([DIGEST, PROFILES], stored)
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="go")
    assert result.summary == "accepted (queue position 1) by weekly-digest (pid 42302)"
    third = result.text.splitlines()[2]
    assert third.startswith(f"Message id {stored.message_id}: its receiver reports")
    assert "agent_message_status reads the latest report" in third


NOT_STORED = "Nothing is known to be stored there. Tell the user; do not retry unless asked."


@pytest.mark.parametrize(
    ("status", "why"),
    [
        ("paused", "weekly-digest is paused: it refuses new messages until it is resumed"),
        ("full", "weekly-digest's queue is full"),
        ("invalid", "weekly-digest rejected the message as invalid"),
        ("wrong_target", f"the instance at weekly-digest's socket says it is not {DIGEST_ID}"),
        ("unsupported", "weekly-digest does not support this protocol version or request"),
    ],
)
async def test_a_refused_send_is_not_delivered_and_never_a_success(status: str, why: str) -> None:
    handle = FakeHandle([DIGEST], ack(status))
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="hi")
    assert not result.ok  # so its card is never "✓ ... completed"
    assert result.text == f"Error: not delivered: {why}.\n{NOT_STORED}"
    assert result.summary == why  # the card says what the model is told


async def test_a_duplicate_says_it_was_already_accepted() -> None:
    handle = FakeHandle([DIGEST], ack("duplicate"))
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="hi")
    assert result.ok
    said = "duplicate: weekly-digest had already accepted this message earlier"
    assert result.summary == said
    first, second = result.text.splitlines()
    assert first == f"{said} (same message id)."
    assert "do not claim it was completed" in second


async def test_send_reports_a_transport_failure() -> None:
    handle = FakeHandle([DIGEST], RelayTransportError("no ack after one retry: timeout"))
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message="hi")
    assert not result.ok
    why = "weekly-digest did not answer: no ack after one retry: timeout"
    assert result.text == f"Error: not delivered: {why}.\n{NOT_STORED}"
    assert result.summary == why


@pytest.mark.parametrize("target", ["weekly-digest", "42302", "Weekly-Digest"])
async def test_a_project_name_or_pid_is_ambiguous_and_lists_candidates(target: str) -> None:
    handle = FakeHandle([DIGEST, DIGEST2, PROFILES], ack("accepted", 1))
    result = await call(handle, "send_agent_message", target_instance_id=target, message="hi")
    assert not result.ok and handle.sent == []
    assert "is not an exact instance id" in result.text
    assert "42302-18473291 (weekly-digest, pid 42302, /work/proj)" in result.text
    assert ("42400-11112222" in result.text) == (target != "42302")
    assert "42110-18471001" not in result.text


async def test_an_unknown_target_lists_the_live_instances() -> None:
    handle = FakeHandle([DIGEST], ack("accepted", 1))
    result = await call(handle, "send_agent_message", target_instance_id="9-deadbeef", message="x")
    assert handle.sent == []
    assert result.text == (
        "Error: no live zcoder instance has id '9-deadbeef'. Live instances: 42302-18473291 "
        "(weekly-digest, pid 42302, /work/proj). Call list_agents and use an exact instance_id."
    )
    alone = await call(FakeHandle([]), "send_agent_message", target_instance_id="9-a", message="x")
    assert alone.text == f"Error: no live zcoder instance has id '9-a': {NO_PEERS}"


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("", "Error: message is empty: send a self-contained task"),
        ("  \n\t", "Error: message is empty: send a self-contained task"),
        (
            "x" * 21,
            "Error: message is 21 characters; the limit is 20 (ZCODER_RELAY_MAX_MESSAGE_CHARS)"
            ": send a shorter, self-contained task",
        ),
    ],
)
async def test_bad_messages_are_refused_before_anything_is_sent(message: str, error: str) -> None:
    handle = FakeHandle([DIGEST], ack("accepted", 1))
    result = await call(handle, "send_agent_message", target_instance_id=DIGEST_ID, message=message)
    assert (result.ok, result.text, handle.sent) == (False, error, [])


async def test_a_message_at_the_limit_is_sent() -> None:
    handle = FakeHandle([DIGEST], ack("accepted", 2))
    result = await call(
        handle, "send_agent_message", target_instance_id=DIGEST_ID, message="é" * 20
    )
    assert result.text.startswith("accepted (queue position 2)\n")


async def test_peer_metadata_is_shown_escaped() -> None:
    evil = Peer(make_manifest(Path("/r"), "7-abcdef01", project="x\x1b[2Jy"), "ready")
    result = await call(FakeHandle([evil], ack("full")), "send_agent_message",
                        target_instance_id="7-abcdef01", message="hi")  # fmt: skip
    assert "\x1b" not in result.text + result.summary
    assert result.summary == "x^[[2Jy's queue is full"


async def test_check_send_finds_the_exact_live_peer_by_a_fresh_discovery() -> None:
    handle = FakeHandle([DIGEST, PROFILES])
    assert await check_send(handle, DIGEST_ID, "hi") == DIGEST
    handle.peers = [PROFILES]  # it has exited since: the next check pings again
    with pytest.raises(ToolError, match="no live zcoder instance has id '42302-18473291'"):
        await check_send(handle, DIGEST_ID, "hi")
    assert handle.sent == []


@pytest.mark.parametrize("target", ["42302_18473291", DIGEST_ID[:-3], f"{DIGEST_ID} ", "digest"])
async def test_check_send_refuses_an_inexact_id_and_lists_the_live_ones(target: str) -> None:
    with pytest.raises(ToolError) as refused:
        await check_send(FakeHandle([DIGEST, PROFILES]), target, "hi")
    assert "42302-18473291 (weekly-digest, pid 42302, /work/proj)" in str(refused.value)


async def test_check_send_refuses_a_blank_or_long_message_before_discovery() -> None:
    handle = FakeHandle([DIGEST])
    handle.discover_error = AssertionError("discovery must not run")
    for message in ("", " \n\t", "x" * 21):
        with pytest.raises(ToolError, match="message is"):
            await check_send(handle, DIGEST_ID, message)
