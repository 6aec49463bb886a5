"""Envelope validation: exact types, grammars, limits, and the spec's decision order."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from zcoder.errors import RelayError, RelayTransportError
from zcoder.relay.envelope import (
    Ack,
    Enqueue,
    Limits,
    Ping,
    Rejected,
    Request,
    decode_ack,
    decode_request,
    encode_envelope,
    enqueue_from_json,
    enqueue_to_json,
)

ME = "42302-18473291"
LIMITS = Limits(max_bytes=65536, max_message_chars=50)
MISSING = object()


def enqueue_dict(**changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "protocol": 1,
        "type": "enqueue",
        "message_id": "42110-18471001-3",
        "target_instance_id": ME,
        "sender_instance_id": "42110-18471001",
        "sender_pid": 42110,
        "sender_project": "user-profiles",
        "sender_workspace": "/work/app/services/user-profiles",
        "body": "users.name was renamed to users.display_name.",
        "created_at": 1788012245,
    }
    obj.update(changes)
    return {k: v for k, v in obj.items() if v is not MISSING}


def ping_dict(**changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "protocol": 1,
        "type": "ping",
        "message_id": "m1",
        "target_instance_id": ME,
        "sender_instance_id": "42110-18471001",
    }
    obj.update(changes)
    return {k: v for k, v in obj.items() if v is not MISSING}


def decode(obj: Any, limits: Limits = LIMITS) -> Request:
    return decode_request(json.dumps(obj).encode(), my_instance_id=ME, limits=limits)


def rejected(obj: Any) -> tuple[str, str]:
    with pytest.raises(Rejected) as info:
        decode(obj)
    return info.value.status, info.value.message_id


def test_valid_enqueue_round_trips() -> None:
    env = decode(enqueue_dict())
    assert isinstance(env, Enqueue)
    assert env.sender_pid == 42110 and env.body.startswith("users.name")
    assert json.loads(encode_envelope(env)) == enqueue_dict()
    assert list(json.loads(encode_envelope(env))) == list(enqueue_dict())


def test_valid_ping() -> None:
    assert decode(ping_dict()) == Ping(1, "ping", "m1", ME, "42110-18471001")


@pytest.mark.parametrize(
    "body",
    [
        "two  spaces\tand a tab",
        "line one\nline two\r\n",
        "quotes \" ' and backslashes \\ \\n \\u0000",
        "glob *?[] {a,b} $(rm -rf /) `id` ~",
        "emoji 😀👍🏽 and é, 漢字, Ω",
        "\x1b[31m escapes and \x07 bells are data",
        "x",
    ],
)
def test_bodies_are_literal_data(body: str) -> None:
    env = decode(enqueue_dict(body=body))
    assert isinstance(env, Enqueue) and env.body == body
    assert enqueue_from_json(enqueue_to_json(env), limits=LIMITS) == env


def test_body_limit_counts_characters() -> None:
    emoji = "😀" * 50  # 50 characters, 200 bytes
    env = decode(enqueue_dict(body=emoji))
    assert isinstance(env, Enqueue) and len(env.body) == 50
    assert rejected(enqueue_dict(body=emoji + "a")) == ("invalid", "42110-18471001-3")
    assert rejected(enqueue_dict(body="é" * 51))[0] == "invalid"


def test_payload_limit_counts_bytes() -> None:
    payload = json.dumps(enqueue_dict(body="é" * 40), ensure_ascii=False).encode()
    tight = Limits(max_bytes=len(payload), max_message_chars=100)
    assert decode_request(payload, my_instance_id=ME, limits=tight)
    small = Limits(max_bytes=len(payload) - 1, max_message_chars=100)
    with pytest.raises(Rejected, match="exceeds"):
        decode_request(payload, my_instance_id=ME, limits=small)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"body": ""}, "body"),
        ({"body": " \n\t "}, "body"),
        ({"body": "\ud800 lone surrogate"}, "body"),
        ({"body": "a\x00b"}, "body must be non-blank UTF-8 text without NUL"),
        ({"body": 5}, "expected a string"),
        ({"body": ["a"]}, "expected a string"),
        ({"body": None}, "expected a string"),
        ({"sender_pid": "42110"}, "expected an integer"),
        ({"sender_pid": True}, "expected an integer, got bool"),
        ({"sender_pid": 42110.0}, "expected an integer, got float"),
        ({"sender_pid": 0}, "sender_pid"),
        ({"sender_pid": 2**31}, "sender_pid"),
        ({"sender_pid": 42111}, "does not start with sender_pid"),
        ({"created_at": -1}, "created_at"),
        ({"created_at": 2**53 + 1}, "created_at"),
        ({"created_at": "1788012245"}, "expected an integer"),
        ({"created_at": False}, "expected an integer, got bool"),
        ({"message_id": "has space"}, "message_id"),
        ({"message_id": ""}, "message_id"),
        ({"message_id": "x" * 101}, "message_id"),
        ({"message_id": 3}, "expected a string"),
        ({"sender_instance_id": "42110"}, "sender_instance_id"),
        ({"sender_instance_id": "042110-abcd"}, "sender_instance_id"),
        ({"sender_project": "p" * 257}, "sender_project"),
        ({"sender_project": "a\x00b"}, "sender_project"),
        ({"sender_workspace": "relative/path"}, "sender_workspace"),
        ({"sender_workspace": ""}, "sender_workspace"),
        ({"sender_workspace": "/" + "w" * 4096}, "sender_workspace"),
        ({"sender_workspace": "/a\x00b"}, "sender_workspace"),
        ({"extra": 1}, "extra fields found \\(extra\\)"),
        ({"body": MISSING}, "required field missing @ \\$.body"),
        ({"created_at": MISSING}, "required field missing"),
    ],
)
def test_bad_enqueue_fields(changes: dict[str, Any], reason: str) -> None:
    with pytest.raises(Rejected, match=reason) as info:
        decode(enqueue_dict(**changes))
    assert info.value.status == "invalid"
    expected_id = "42110-18471001-3" if "message_id" not in changes else ""
    assert info.value.message_id == expected_id


def test_accepted_boundaries() -> None:
    env = decode(
        enqueue_dict(
            sender_project="p" * 256,
            sender_workspace="/" + "w" * 4095,
            created_at=0,
            message_id="42110-18471001-" + "x" * 85,
        )
    )
    assert isinstance(env, Enqueue) and len(env.sender_project) == 256
    assert isinstance(decode(enqueue_dict(sender_project="")), Enqueue)


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({"protocol": "1"}, "invalid"),
        ({"protocol": True}, "invalid"),
        ({"protocol": 1.0}, "invalid"),
        ({"protocol": MISSING}, "invalid"),
        ({"protocol": 2}, "unsupported"),
        ({"protocol": 0}, "unsupported"),
        ({"target_instance_id": "42302-other"}, "wrong_target"),
        ({"target_instance_id": "not an id"}, "wrong_target"),
        ({"target_instance_id": 42302}, "invalid"),
        ({"target_instance_id": MISSING}, "invalid"),
        ({"type": "broadcast"}, "unsupported"),
        ({"type": "ack"}, "unsupported"),
        ({"type": 1}, "invalid"),
        ({"type": MISSING}, "invalid"),
    ],
)
def test_version_target_and_type(changes: dict[str, Any], status: str) -> None:
    assert rejected(enqueue_dict(**changes)) == (status, "42110-18471001-3")


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        # each pair breaks two steps; the earlier step in the spec's order decides
        ({"protocol": 2, "target_instance_id": "1-other"}, "unsupported"),
        ({"protocol": "1", "target_instance_id": "1-other"}, "invalid"),
        ({"target_instance_id": "1-other", "type": "nope"}, "wrong_target"),
        ({"target_instance_id": "1-other", "body": ""}, "wrong_target"),
        ({"target_instance_id": "1-other", "sender_pid": "x", "extra": 1}, "wrong_target"),
        ({"type": "nope", "body": ""}, "unsupported"),
        ({"type": "nope", "protocol": 3}, "unsupported"),
    ],
)
def test_decision_order(changes: dict[str, Any], status: str) -> None:
    assert rejected(enqueue_dict(**changes))[0] == status


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"a string"',
        b"null",
        b'{"protocol": 1,',
        b"\xef\xbb\xbf{}",  # a UTF-8 BOM
        b'{"protocol": NaN}',
        b'{"protocol": Infinity}',
        b'{"protocol": 1, "protocol": 1}',
        '{"protocol": 1}'.encode("utf-16"),
        b'{"body": "\xff"}',
        b"[" * 100000,
        b'{"protocol": ' + b"9" * 5000 + b"}",
    ],
)
def test_unparseable_payloads(payload: bytes) -> None:
    with pytest.raises(Rejected) as info:
        decode_request(payload, my_instance_id=ME, limits=Limits(max_bytes=200000))
    assert (info.value.status, info.value.message_id) == ("invalid", "")


@pytest.mark.parametrize(
    "sender", ["42110-18471001", "observer-27880", "any printable text, é 漢字", "x" * 256]
)
def test_a_ping_is_answered_whatever_its_ids_look_like(sender: str) -> None:
    zsh = ping_dict(message_id="ping-27880-13764", sender_instance_id=sender)
    assert decode(zsh) == Ping(1, "ping", "ping-27880-13764", ME, sender)
    odd = ping_dict(message_id="ping 1: é", sender_instance_id=sender, newer_key=1)
    assert decode(odd) == Ping(1, "ping", "ping 1: é", ME, sender)  # unknown keys ignored


@pytest.mark.parametrize(
    ("changes", "echo"),
    [
        ({"sender_instance_id": MISSING}, "m1"),
        ({"sender_instance_id": ""}, "m1"),
        ({"sender_instance_id": "x" * 257}, "m1"),
        ({"sender_instance_id": "a\x1bb"}, "m1"),
        ({"sender_instance_id": "a\u202eb"}, "m1"),
        ({"sender_instance_id": 42110}, "m1"),
        ({"message_id": MISSING}, ""),
        ({"message_id": ""}, ""),
        ({"message_id": "line\nbreak"}, ""),
        ({"message_id": "x" * 257}, ""),
        ({"message_id": ["m1"]}, ""),
    ],
)
def test_a_pings_ids_stay_bounded_and_printable(changes: dict[str, Any], echo: str) -> None:
    assert rejected(ping_dict(**changes)) == ("invalid", echo)


def test_a_ping_still_needs_our_id_and_version() -> None:
    assert rejected(ping_dict(target_instance_id="1-abcd", message_id="p 1")) == (
        "wrong_target",
        "p 1",
    )
    assert rejected(ping_dict(protocol=2))[0] == "unsupported"
    assert rejected(ping_dict(protocol="1"))[0] == "invalid"


@pytest.mark.parametrize(
    ("changes", "echo"),
    [
        ({"message_id": "42302-18473291-1"}, "42302-18473291-1"),  # another instance's id
        ({"message_id": "42110-18471001"}, "42110-18471001"),
        ({"message_id": "42110-184710011-1"}, "42110-184710011-1"),
        ({"message_id": "m1"}, "m1"),
        ({"sender_instance_id": "observer-42110"}, "42110-18471001-3"),  # enqueue is strict
    ],
)
def test_a_message_id_begins_with_its_sender(changes: dict[str, Any], echo: str) -> None:
    assert rejected(enqueue_dict(**changes)) == ("invalid", echo)


def test_the_zsh_enqueue_is_accepted() -> None:
    zsh = (
        '{"protocol":1,"type":"enqueue","message_id":"13565-17960041672724223065-1",'
        '"target_instance_id":"42302-18473291","sender_instance_id":"13565-17960041672724223065",'
        '"sender_pid":13565,"sender_project":"weekly-digest","sender_workspace":"/work/a/b",'
        '"body":"raw UTF-8 ✓ 🎉 a/b/c \\\\ \\"q\\" \\u001b[0m","created_at":1788012245}'
    ).encode()
    env = decode_request(zsh, my_instance_id=ME, limits=Limits())
    assert isinstance(env, Enqueue)
    assert env.body == 'raw UTF-8 ✓ 🎉 a/b/c \\ "q" \x1b[0m'
    assert env.sender_instance_id == "13565-17960041672724223065"


def test_rejected_is_a_relay_error() -> None:
    exc = Rejected("invalid", "m", "why")
    assert isinstance(exc, RelayError)
    assert (exc.status, exc.message_id, exc.reason, str(exc)) == (
        "invalid",
        "m",
        "why",
        "invalid: why",
    )


def test_ack_encoding_omits_absent_fields() -> None:
    assert encode_envelope(Ack(1, "ack", "42110-18471001-3", "accepted", 1)) == (
        b'{"protocol":1,"type":"ack","message_id":"42110-18471001-3",'
        b'"status":"accepted","queue_position":1}'
    )
    pong = Ack(1, "ack", "m1", "pong", state="busy")
    assert encode_envelope(pong) == (
        b'{"protocol":1,"type":"ack","message_id":"m1","status":"pong","state":"busy"}'
    )
    assert decode_ack(encode_envelope(pong)) == pong


def test_decode_ack_ignores_unknown_keys() -> None:
    ack = decode_ack(b'{"protocol":1,"type":"ack","message_id":"","status":"invalid","why":"x"}')
    assert ack == Ack(1, "ack", "", "invalid")


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"{}",
        b'{"protocol":1,"type":"ack","message_id":"m","status":"maybe"}',
        b'{"protocol":"1","type":"ack","message_id":"m","status":"accepted"}',
        b'{"protocol":2,"type":"ack","message_id":"m","status":"accepted"}',
        b'{"protocol":1,"type":"enqueue","message_id":"m","status":"accepted"}',
        b'{"protocol":1,"type":"ack","message_id":"bad\\nid","status":"accepted"}',
        b'{"protocol":1,"type":"ack","message_id":"' + b"m" * 257 + b'","status":"accepted"}',
        b'{"protocol":1,"type":"ack","message_id":7,"status":"accepted"}',
        b'{"protocol":1,"type":"ack","status":"accepted"}',
        b'{"protocol":1,"type":"ack","message_id":"m"}',
        b'{"protocol":1,"type":"ack","message_id":"m","status":"pong","protocol":1}',
    ],
)
def test_bad_acks(payload: bytes) -> None:
    with pytest.raises(RelayTransportError, match="invalid ack"):
        decode_ack(payload)


@pytest.mark.parametrize("status", ["duplicate", "paused", "full", "invalid", "pong"])
@pytest.mark.parametrize("position", ["0", "1", "7", "-1", "null", "true", '"3"', "1.5"])
def test_queue_position_is_ignored_on_other_statuses(status: str, position: str) -> None:
    payload = '{"protocol":1,"type":"ack","message_id":"m","status":"%s","queue_position":%s}'
    assert decode_ack((payload % (status, position)).encode()) == Ack(1, "ack", "m", status)


@pytest.mark.parametrize(
    ("position", "read"),
    [
        ("1", 1),
        ("16", 16),
        ("0", None),
        ("-1", None),
        ("true", None),
        ('"2"', None),
        ("null", None),
    ],
)
def test_queue_position_is_read_with_accepted(position: str, read: int | None) -> None:
    payload = '{"protocol":1,"type":"ack","message_id":"m","status":"accepted","queue_position":%s}'
    assert decode_ack((payload % position).encode()).queue_position == read


@pytest.mark.parametrize("status", ["accepted", "duplicate", "paused", "invalid", "pong"])
@pytest.mark.parametrize(
    ("state", "read"),
    [('"ready"', "ready"), ('"busy"', "busy"), ('"paused"', "paused"), ('"asleep"', None),
     ("1", None), ("null", None)],
)  # fmt: skip
def test_state_is_read_on_every_ack(status: str, state: str, read: str | None) -> None:
    payload = '{"protocol":1,"type":"ack","message_id":"m","status":"%s","state":%s,"x":[1]}'
    assert decode_ack((payload % (status, state)).encode()).state == read


def test_an_ack_echoes_a_pings_printable_id() -> None:
    pong = Ack(1, "ack", "observer ping 1", "pong", state="ready")
    assert decode_ack(encode_envelope(pong)) == pong


def test_constructors_validate() -> None:
    with pytest.raises(ValueError, match="message_id"):
        Ping(1, "ping", "bad\nid", ME, ME)
    with pytest.raises(ValueError, match="queue_position comes only with accepted"):
        Ack(1, "ack", "m", "duplicate", 1)
    with pytest.raises(ValueError, match="protocol"):
        Ack(2, "ack", "m", "accepted")
    with pytest.raises(ValueError, match="does not start with sender_pid"):
        attrs.evolve(decode(enqueue_dict()), sender_pid=7)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Limits(max_bytes=0)


def test_enqueue_from_json_rejects_other_data() -> None:
    with pytest.raises(Rejected, match="invalid"):
        enqueue_from_json(json.dumps(ping_dict()).encode())
    with pytest.raises(Rejected, match="body exceeds 50"):
        enqueue_from_json(json.dumps(enqueue_dict(body="b" * 51)).encode(), limits=LIMITS)
    other_target = enqueue_dict(target_instance_id="7-zzzz")
    assert enqueue_from_json(json.dumps(other_target).encode()).target_instance_id == "7-zzzz"


def test_a_pong_may_say_whether_the_model_server_answers() -> None:
    # zcoder's extension: an optional key, read only on a pong, ignored when unknown.
    pong = Ack(1, "ack", "m1", "pong", state="ready", model_state="unavailable")
    wire = encode_envelope(pong)
    assert wire.endswith(b'"state":"ready","model_state":"unavailable"}')
    assert decode_ack(wire) == pong
    odd = b'{"protocol":1,"type":"ack","message_id":"m","status":"pong","model_state":"maybe"}'
    assert decode_ack(odd).model_state is None
    other = (
        b'{"protocol":1,"type":"ack","message_id":"m","status":"accepted",'
        b'"model_state":"available"}'
    )
    assert decode_ack(other).model_state is None
