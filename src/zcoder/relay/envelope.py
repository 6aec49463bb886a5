"""The relay's flat JSON envelopes and their validation (cattrs lives only here, imported
when a request is first decoded or the listener is made: ``prepare_decoders``; an ack is
read without it, so that ``zcoder agents`` does not load it).

Payloads are compact JSON objects in strict UTF-8 (no BOM; no duplicate keys; no NaN or
Infinity; nothing but JSON ``true``/``false`` counts as a boolean and a boolean never counts
as a number). Requests are ``enqueue`` and ``ping``, and zcoder's extension of version 1
adds ``receipt`` and ``cancel`` (``Receipt``, ``Cancel``: a version-1 peer answers them
``unsupported``); the only answer is ``ack``.

Field rules (every field is required unless said otherwise; types are exact: ``"1"`` is not
the integer 1, ``true`` is not an integer, ``1.0`` is not an integer):

* ``protocol``: the integer 1.
* ``type``: ``"enqueue"``, ``"ping"`` or ``"ack"``.
* ``message_id``: ``[A-Za-z0-9_.-]{1,100}``. In an ack it may also be ``""``: the receiver
  could not read the request's id.
* ``target_instance_id``, ``sender_instance_id``: ``<pid>-<nonce>``,
  ``[1-9][0-9]{0,9}-[A-Za-z0-9]{4,32}``.
* ``sender_pid``: integer 1 to 2**31-1; ``sender_instance_id`` must start with
  ``"<sender_pid>-"``.
* ``sender_project``: at most 256 characters, no NUL. ``sender_workspace``: an absolute
  path, 1 to 4096 characters, no NUL.
* ``body``: not empty or only whitespace, at most ``max_message_chars`` characters (Unicode
  code points, whatever the locale; the byte size is bounded by the frame limit), no NUL,
  any text otherwise: tabs, newlines, quotes, backslashes, glob characters, escape
  sequences and emoji are literal data.
* ``created_at``: integer seconds since the epoch, 0 to 2**53.
* ``hops`` (zcoder's extension, optional): an integer 0 to ``MAX_HOPS``, how many relayed
  turns led to this message; a version-1 peer ignores it (unknown keys are ignored there).
* ``ping``: ``message_id`` and ``sender_instance_id`` are any printable text of 1 to
  ``MAX_PEER_ID_CHARS`` characters (``peer_id``), and unknown keys are ignored: a ping acts
  on nothing, and the other implementation pings as ``observer-<pid>`` before its own
  listener is up. The target must still be ours.
* ack ``status``: one of ``STATUSES``; ``queue_position``: an integer >= 1, only with
  ``accepted``; ``state``: optional, ``ready``/``busy``/``paused``. An ack omits the optional
  fields it does not carry; its ``message_id`` echoes the request's (a ping's ``peer_id``)
  or is ``""``.
* No string may hold a lone surrogate (it could not be stored as UTF-8).

Strict in what we send, liberal in what we accept. An ``enqueue`` with a key not listed for
it (``hops`` is listed) is ``invalid``: a receiver must not act on a request it does not
fully understand, and a future version that adds fields bumps ``protocol`` (answered
``unsupported``). Its
``message_id`` must begin with ``"<sender_instance_id>-"`` (the spec's form, and the only
one the other implementation sends), so that no sender can take another's next id and have
the real message answered ``duplicate``. An ack is judged by its status (``decode_ack``):
``queue_position`` is read only with ``accepted`` and ignored on any other status whatever
its value (the other implementation sends ``0``); an ``accepted`` whose position is not an
integer >= 1 keeps its status without a position; ``state`` is read on every ack and
ignored when it is not a known state; unknown keys are ignored. By the time an ack is read
the request has been handled, and the status is what matters.
A receipt's ``state`` is read as any lowercase word of at most ``STATE_WORD_CHARS``
(``waiting`` came after ``started``; a later one may come): the outbox applies only the
states it knows and answers any other ``accepted`` without a change.

``decode_request`` decides in the spec's order: parse (``invalid``), protocol version
(``invalid`` when missing or not an integer, ``unsupported`` when another integer),
target (``wrong_target`` when a string other than ours, ``invalid`` when missing or not a
string), type (``unsupported`` when an unknown string, ``invalid`` when missing or not a
string), fields (``invalid``). The sender check, duplicate, paused, full and accept steps
follow in the listener and the spool.

Longer than 400 lines on purpose: every frame of the protocol, field for field, with the
one decoder that checks them in the spec's order; the wire tests read it against
``spec/wire-peers.md`` in one place.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from zcoder import strict_json
from zcoder.errors import Rejected, RelayTransportError
from zcoder.relay.limits import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_MESSAGE_CHARS,
    MAX_HOPS,
    MAX_PEER_ID_CHARS,
    MAX_PID,
    MAX_PROJECT_CHARS,
    MAX_TIME,
    MAX_WORKSPACE_CHARS,
    PROTOCOL_VERSION,
)
from zcoder.relay.protocol import INSTANCE_ID_RE, MESSAGE_ID_RE, STATUSES
from zcoder.relay.receipt_states import (
    CANCEL_STATUSES,
    MAX_CHANGED_CHARS,
    MAX_DETAIL_CHARS,
    STATE_WORD_CHARS,
)

if TYPE_CHECKING:
    import cattrs

__all__ = [
    "MAX_PEER_ID_CHARS",
    "MAX_PROJECT_CHARS",
    "MAX_WORKSPACE_CHARS",
    "MODEL_STATES",
    "STATES",
    "Ack",
    "Cancel",
    "Enqueue",
    "Limits",
    "Ping",
    "Receipt",
    "Rejected",
    "Request",
    "decode_ack",
    "decode_request",
    "encode_envelope",
    "enqueue_from_json",
    "enqueue_to_json",
    "peer_id",
    "prepare_decoders",
]

STATES: tuple[str, ...] = ("ready", "busy", "paused")
#: zcoder's extension: whether a receiver's model server answers (``model_state`` of a pong).
MODEL_STATES: tuple[str, ...] = ("available", "unavailable")
_T = TypeVar("_T")
_Check = Callable[[Any, "attrs.Attribute[Any]", Any], None]
_Test = Callable[[Any], object]


class _FieldError(ValueError):
    """A field's own message, kept verbatim in the rejection reason."""


def _check(kind: type, test: _Test, what: str) -> _Check:
    def validate(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if type(value) is not kind or not test(value):
            raise _FieldError(f"{attribute.name} must be {what}")

    return validate


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _text(value: str, low: int, high: int) -> bool:
    return low <= len(value) <= high and "\0" not in value and _utf8(value)


def _body(value: str) -> bool:
    return bool(value.strip()) and "\0" not in value and _utf8(value)


def peer_id(value: object) -> bool:
    """Whether ``value`` may stand as a ping's ids or an ack's echo: 1 to
    ``MAX_PEER_ID_CHARS`` printable characters (no control, format or separator character,
    no lone surrogate), whatever their form."""
    return type(value) is str and 1 <= len(value) <= MAX_PEER_ID_CHARS and value.isprintable()


def _optional(check: _Check) -> _Check:
    def validate(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            check(inst, attribute, value)

    return validate


def _literal(word: str) -> _Check:
    return _check(str, word.__eq__, repr(word))


_protocol = _check(int, lambda v: v == PROTOCOL_VERSION, str(PROTOCOL_VERSION))
_message_id = _check(str, MESSAGE_ID_RE.fullmatch, "1-100 of A-Z a-z 0-9 _ . -")
_peer_id = _check(str, peer_id, f"1-{MAX_PEER_ID_CHARS} printable characters")
_ack_message_id = _check(str, lambda v: v == "" or peer_id(v), "an id or empty")
_instance_id = _check(str, INSTANCE_ID_RE.fullmatch, "<pid>-<nonce>")
_pid = _check(int, lambda v: 1 <= v <= MAX_PID, f"an integer from 1 to {MAX_PID}")
_project = _check(
    str, lambda v: _text(v, 0, MAX_PROJECT_CHARS), f"at most {MAX_PROJECT_CHARS} characters, no NUL"
)
_workspace = _check(
    str,
    lambda v: v.startswith("/") and _text(v, 1, MAX_WORKSPACE_CHARS),
    "an absolute path of at most 4096 characters, no NUL",
)
_body_check = _check(str, _body, "non-blank UTF-8 text without NUL")
_timestamp = _check(int, lambda v: 0 <= v <= MAX_TIME, f"an integer from 0 to {MAX_TIME}")
_status = _check(str, lambda v: v in STATUSES or v in CANCEL_STATUSES, "an ack status")
_position = _optional(_check(int, lambda v: v >= 1, "an integer >= 1"))
_state = _optional(_check(str, STATES.__contains__, "ready, busy or paused"))
_positive = _check(int, lambda v: v >= 1, "a positive integer")
# A state this version does not know is still read (a newer receiver's step; the outbox
# ignores it): a reader judges a receipt by the states it knows, as it judges an ack.
_STATE_WORD = re.compile(rf"[a-z][a-z_]{{0,{STATE_WORD_CHARS - 1}}}")
_receipt_state = _check(str, _STATE_WORD.fullmatch, "a receipt state (a lowercase word)")
_detail = _check(
    str, lambda v: _text(v, 0, MAX_DETAIL_CHARS), f"at most {MAX_DETAIL_CHARS} characters, no NUL"
)
_changed = _check(
    str, lambda v: _text(v, 0, MAX_CHANGED_CHARS), f"at most {MAX_CHANGED_CHARS} characters, no NUL"
)
_flag = _optional(_check(bool, lambda v: v is True, "true"))
_model_state = _optional(_check(str, MODEL_STATES.__contains__, "available or unavailable"))
_hops = _optional(_check(int, lambda v: 0 <= v <= MAX_HOPS, f"an integer from 0 to {MAX_HOPS}"))


@attrs.frozen
class Enqueue:
    """A task delivery: the spec's envelope, field for field."""

    protocol: int = attrs.field(validator=_protocol)
    type: str = attrs.field(validator=_literal("enqueue"))
    message_id: str = attrs.field(validator=_message_id)
    target_instance_id: str = attrs.field(validator=_instance_id)
    sender_instance_id: str = attrs.field(validator=_instance_id)
    sender_pid: int = attrs.field(validator=_pid)
    sender_project: str = attrs.field(validator=_project)
    sender_workspace: str = attrs.field(validator=_workspace)
    body: str = attrs.field(validator=_body_check)
    created_at: int = attrs.field(validator=_timestamp)
    # zcoder's extension of version 1: how many relayed turns led to this message (0: a
    # person's prompt or /send). Optional: a version-1 peer neither sends nor reads it.
    hops: int | None = attrs.field(default=None, validator=_hops)

    def __attrs_post_init__(self) -> None:
        if not self.sender_instance_id.startswith(f"{self.sender_pid}-"):
            raise _FieldError("sender_instance_id does not start with sender_pid")


@attrs.frozen
class Ping:
    """A liveness probe; answered by an ack with status ``pong`` and the receiver's state.
    Its ids are only echoed and shown, never acted on: any ``peer_id`` will do."""

    protocol: int = attrs.field(validator=_protocol)
    type: str = attrs.field(validator=_literal("ping"))
    message_id: str = attrs.field(validator=_peer_id)
    target_instance_id: str = attrs.field(validator=_instance_id)
    sender_instance_id: str = attrs.field(validator=_peer_id)


@attrs.frozen
class Ack:
    """The one answer to a request."""

    protocol: int = attrs.field(validator=_protocol)
    type: str = attrs.field(validator=_literal("ack"))
    message_id: str = attrs.field(validator=_ack_message_id)
    status: str = attrs.field(validator=_status)
    queue_position: int | None = attrs.field(default=None, validator=_position)
    state: str | None = attrs.field(default=None, validator=_state)
    # zcoder's extension: the receiver will report what becomes of the message (receipts).
    # An optional key, so a version-1 peer ignores it; absent: no receipts will come.
    receipts: bool | None = attrs.field(default=None, validator=_flag)
    # zcoder's extension: a pong says whether the receiver's model server answers (a task
    # sent now would wait for it). Optional: a version-1 peer neither sends nor reads it.
    model_state: str | None = attrs.field(default=None, validator=_model_state)

    def __attrs_post_init__(self) -> None:
        if self.queue_position is not None and self.status != "accepted":
            raise _FieldError("queue_position comes only with accepted")

    @property
    def stored(self) -> bool:
        """Whether the receiver holds the message: ``accepted``, or ``duplicate`` (an
        earlier attempt with this id got through, perhaps our own first one before the
        retry). Every other status means it was not stored."""
        return self.status in ("accepted", "duplicate")


def _from_sender(inst: Receipt | Cancel) -> None:
    if not inst.sender_instance_id.startswith(f"{inst.sender_pid}-"):
        raise _FieldError("sender_instance_id does not start with sender_pid")


@attrs.frozen
class Receipt:
    """zcoder's extension of version 1: what became of an enqueue, sent by its receiver
    (``sender_*`` here) to the original sender's listener (``target_instance_id``).
    ``message_id`` is the original message's, so it begins with ``target_instance_id``."""

    protocol: int = attrs.field(validator=_protocol)
    type: str = attrs.field(validator=_literal("receipt"))
    message_id: str = attrs.field(validator=_message_id)
    target_instance_id: str = attrs.field(validator=_instance_id)
    sender_instance_id: str = attrs.field(validator=_instance_id)
    sender_pid: int = attrs.field(validator=_pid)
    state: str = attrs.field(validator=_receipt_state)
    detail: str = attrs.field(validator=_detail)
    changed: str = attrs.field(validator=_changed)
    created_at: int = attrs.field(validator=_timestamp)

    def __attrs_post_init__(self) -> None:
        _from_sender(self)
        if not self.message_id.startswith(f"{self.target_instance_id}-"):
            raise _FieldError("message_id does not start with target_instance_id")


@attrs.frozen
class Cancel:
    """zcoder's extension of version 1: the original sender (``sender_*``) withdraws a
    message it sent to ``target_instance_id``; answered ``withdrawn``, ``too_late`` or
    ``unknown`` (``CANCEL_STATUSES``)."""

    protocol: int = attrs.field(validator=_protocol)
    type: str = attrs.field(validator=_literal("cancel"))
    message_id: str = attrs.field(validator=_message_id)
    target_instance_id: str = attrs.field(validator=_instance_id)
    sender_instance_id: str = attrs.field(validator=_instance_id)
    sender_pid: int = attrs.field(validator=_pid)
    created_at: int = attrs.field(validator=_timestamp)

    def __attrs_post_init__(self) -> None:
        _from_sender(self)
        if not self.message_id.startswith(f"{self.sender_instance_id}-"):
            raise _FieldError("message_id does not start with sender_instance_id")


Request = Enqueue | Ping | Receipt | Cancel


@attrs.frozen
class Limits:
    """Size limits: frame payload in bytes, relayed task text in characters."""

    max_bytes: int = attrs.field(default=DEFAULT_MAX_BYTES, validator=_positive)
    max_message_chars: int = attrs.field(default=DEFAULT_MAX_MESSAGE_CHARS, validator=_positive)


def _exact(kind: type[_T], name: str) -> Any:
    def hook(value: object, _: object) -> object:
        if type(value) is not kind:
            raise _FieldError(f"expected {name}, got {type(value).__name__}")
        return value

    return hook


def _converter(*, forbid_extra_keys: bool) -> cattrs.Converter:
    import cattrs

    conv = cattrs.Converter(forbid_extra_keys=forbid_extra_keys)
    conv.register_structure_hook(int, _exact(int, "an integer"))
    conv.register_structure_hook(str, _exact(str, "a string"))
    conv.register_structure_hook(bool, _exact(bool, "a boolean"))
    return conv


@functools.cache
def _converters() -> tuple[cattrs.Converter, cattrs.Converter]:
    """The strict converter (no unknown keys) and the lenient one (a ping's), made once."""
    return _converter(forbid_extra_keys=True), _converter(forbid_extra_keys=False)


def prepare_decoders() -> None:
    """Make the request decoders now (importing cattrs), so that the first request a
    listener reads does not wait for them."""
    _converters()


_RequestClass = type[Enqueue] | type[Ping] | type[Receipt] | type[Cancel]
_REQUESTS: dict[str, _RequestClass] = {
    "enqueue": Enqueue,
    "ping": Ping,
    "receipt": Receipt,
    "cancel": Cancel,
}


def _format(exc: BaseException, typ: type | None) -> str:
    from cattrs.v import format_exception

    return str(exc) if isinstance(exc, _FieldError) else format_exception(exc, typ)


def _structure(obj: dict[str, Any], cls: type[_T], *, lenient: bool = False) -> _T:
    import cattrs

    strict, loose = _converters()
    try:
        return (loose if lenient else strict).structure(obj, cls)
    except cattrs.BaseValidationError as exc:
        raise _FieldError(
            "; ".join(cattrs.transform_error(exc, format_exception=_format))
        ) from None
    except (ValueError, TypeError) as exc:  # attrs validators and __attrs_post_init__
        raise _FieldError(str(exc)) from None


def _parse(payload: bytes, max_bytes: int) -> dict[str, Any]:
    if len(payload) > max_bytes:
        raise Rejected("invalid", "", f"payload exceeds {max_bytes} bytes")
    try:
        obj = strict_json.loads(payload)
    except ValueError as exc:
        raise Rejected("invalid", "", f"not a JSON object: {exc}") from None
    if type(obj) is not dict:
        raise Rejected("invalid", "", "the payload is not a JSON object")
    return obj


def _message_id_of(obj: dict[str, Any]) -> str:
    """The id to echo in the ack: a valid message id, or a ping's ``peer_id``; else ``""``."""
    value = obj.get("message_id")
    if type(value) is not str:
        return ""
    if MESSAGE_ID_RE.fullmatch(value) or (obj.get("type") == "ping" and peer_id(value)):
        return value
    return ""


def _request_class(obj: dict[str, Any], mid: str, me: str) -> _RequestClass:
    version = obj.get("protocol")
    if type(version) is not int:
        raise Rejected("invalid", mid, "protocol must be an integer")
    if version != PROTOCOL_VERSION:
        raise Rejected("unsupported", mid, f"protocol version {version} is not supported")
    target = obj.get("target_instance_id")
    if type(target) is not str:
        raise Rejected("invalid", mid, "target_instance_id must be a string")
    if target != me:
        raise Rejected("wrong_target", mid, "target_instance_id is not this instance")
    kind = obj.get("type")
    if type(kind) is not str:
        raise Rejected("invalid", mid, "type must be a string")
    if kind not in _REQUESTS:
        raise Rejected("unsupported", mid, f"message type {kind[:40]!r} is not supported")
    return _REQUESTS[kind]


def _decode(obj: dict[str, Any], cls: type[_T], mid: str, limits: Limits) -> _T:
    try:
        request = _structure(obj, cls, lenient=cls is Ping)
    except _FieldError as exc:
        raise Rejected("invalid", mid, str(exc)) from None
    if isinstance(request, Enqueue) and len(request.body) > limits.max_message_chars:
        raise Rejected("invalid", mid, f"body exceeds {limits.max_message_chars} characters")
    return request


def decode_request(payload: bytes, *, my_instance_id: str, limits: Limits) -> Request:
    """Parse and validate one request payload; ``Rejected`` says which status to answer."""
    obj = _parse(payload, limits.max_bytes)
    mid = _message_id_of(obj)
    request = _decode(obj, _request_class(obj, mid, my_instance_id), mid, limits)
    # On the wire only: the spool reads back what was checked here when it arrived.
    if isinstance(request, Enqueue) and not request.message_id.startswith(
        f"{request.sender_instance_id}-"
    ):
        raise Rejected("invalid", mid, "message_id does not start with sender_instance_id")
    return request


def encode_envelope(obj: Request | Ack) -> bytes:
    """Compact UTF-8 JSON in field order, without the ack's absent optional fields."""
    fields = attrs.asdict(obj, recurse=False)
    if isinstance(obj, Ack | Enqueue):  # the optional fields it does not carry are left out
        fields = {k: v for k, v in fields.items() if v is not None}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


_ACK_CORE = ("protocol", "type", "message_id", "status")


def _judged(obj: dict[str, Any]) -> dict[str, Any]:
    """The ack's fields as its status says to read them; the rest is ignored."""
    fields = {k: obj[k] for k in _ACK_CORE if k in obj}
    position = obj.get("queue_position")
    if obj.get("status") == "accepted" and type(position) is int and position >= 1:
        fields["queue_position"] = position
    state = obj.get("state")
    if type(state) is str and state in STATES:
        fields["state"] = state
    if obj.get("receipts") is True:
        fields["receipts"] = True
    model_state = obj.get("model_state")
    if obj.get("status") == "pong" and type(model_state) is str and model_state in MODEL_STATES:
        fields["model_state"] = model_state
    return fields


def decode_ack(payload: bytes) -> Ack:
    """Parse an answer, judged by its status (module docstring); ``RelayTransportError`` if
    it is not an ack: not a JSON object, another protocol or type, an unknown status, a
    message id that is neither ``""`` nor a ``peer_id``."""
    try:
        fields = _judged(_parse(payload, len(payload)))
        missing = [name for name in _ACK_CORE if name not in fields]
        if missing:
            raise _FieldError(f"{', '.join(missing)} missing")
        # Every field left is one an Ack validator checks by its exact type: no converter.
        return Ack(**fields)
    except (Rejected, ValueError) as exc:  # _FieldError: the validators, __attrs_post_init__
        raise RelayTransportError(f"the peer answered with an invalid ack: {exc}") from None


def enqueue_to_json(envelope: Enqueue) -> bytes:
    """The spool's file format: the wire envelope's JSON, byte for byte."""
    return encode_envelope(envelope)


def enqueue_from_json(data: bytes, *, limits: Limits | None = None) -> Enqueue:
    """Read back a spooled envelope with every wire check but the target's identity;
    ``Rejected`` (status ``invalid``) if the data is not a valid ``enqueue``."""
    limits = Limits() if limits is None else limits
    obj = _parse(data, limits.max_bytes)
    return _decode(obj, Enqueue, _message_id_of(obj), limits)
