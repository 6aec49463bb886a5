"""A send's question checked and named before it is asked (``SendLabels``)."""

from __future__ import annotations

from typing import Protocol

import attrs

from zcoder.approval import Answer, ApprovalRequest, Approver

__all__ = ["SendLabels", "SendNaming"]


class SendNaming(Protocol):
    """What ``SendLabels`` needs of the app's relay (``RelayLink``)."""

    async def check_send(self, target: str, message: str) -> None: ...
    def label(self, instance_id: str) -> str: ...


@attrs.frozen
class SendLabels:
    """An ``Approver`` that checks a send before asking and names its target by project,
    pid, workspace and live state.

    A send that ``check_send`` refuses (an empty or over-long message, a target that is not
    the exact id of an instance a fresh ping found live) is never asked about: ``ask``
    raises that ``ToolError`` instead, and the turn answers the call with it.
    """

    inner: Approver
    relay: SendNaming

    async def ask(self, request: ApprovalRequest) -> Answer:
        if request.kind == "send":
            await self.relay.check_send(request.target, request.text)
            request = attrs.evolve(request, target=self.relay.label(request.target))
        return await self.inner.ask(request)
