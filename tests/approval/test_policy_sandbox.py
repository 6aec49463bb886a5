"""The sandbox in the approval decision: ``--sandbox``, ``[relay] commands`` and a command
the model asks to run outside the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from zcoder.approval.policy import (
    DENIED_BY_POLICY,
    RELAY_DENIED,
    CommandVerdict,
    commands_sandboxed,
    decide_command,
)
from zcoder.approval.questions import ApprovalRequest, question_head
from zcoder.config import CommandPolicy, Profile
from zcoder.conversation import Origin
from zcoder.relay.settings import RelayCommands

SANDBOXED = CommandVerdict("run", sandboxed=True)
OUTSIDE = CommandVerdict("ask", choices=("y", "n"), outside=True)
ASK3 = CommandVerdict("ask", choices=("y", "a", "n"))


def decide(
    policy: CommandPolicy,
    origin: Origin = "user",
    relay: RelayCommands = "ask",
    *,
    outside: bool = False,
    profile: Profile = "coding",
    granted: bool = False,
) -> CommandVerdict:
    return decide_command(
        "make test",
        policy=policy,
        profile=profile,
        origin=origin,
        granted=granted,
        workspace=Path("/w"),
        home=Path("/home/a"),
        relay_commands=relay,
        outside=outside,
    )


@pytest.mark.parametrize("origin", ["user", "relay"])
def test_sandbox_policy_runs_every_command_confined_and_unasked(origin: Origin) -> None:
    assert decide("sandbox", origin) == SANDBOXED
    assert decide("sandbox", origin, granted=True) == SANDBOXED


@pytest.mark.parametrize("origin", ["user", "relay"])
def test_outside_the_sandbox_always_asks_yes_or_no(origin: Origin) -> None:
    assert decide("sandbox", origin, outside=True) == OUTSIDE
    assert decide("sandbox", origin, outside=True, granted=True) == OUTSIDE


@pytest.mark.parametrize("policy", ["ask", "allow", "sandbox"])
def test_relay_commands_sandbox_confines_relayed_turns_only(policy: CommandPolicy) -> None:
    assert decide(policy, "relay", "sandbox") == SANDBOXED
    assert decide(policy, "relay", "sandbox", outside=True) == OUTSIDE
    local = decide(policy, "user", "sandbox")
    assert local == {"ask": ASK3, "allow": CommandVerdict("run"), "sandbox": SANDBOXED}[policy]


@pytest.mark.parametrize("policy", ["ask", "allow", "sandbox"])
def test_relay_commands_deny_denies_relayed_turns_only(policy: CommandPolicy) -> None:
    assert decide(policy, "relay", "deny") == CommandVerdict("deny", RELAY_DENIED)
    assert decide(policy, "user", "deny").action != "deny"


def test_deny_commands_and_sysadmin_come_first() -> None:
    assert decide("deny", "relay", "sandbox") == CommandVerdict("deny", DENIED_BY_POLICY)
    # sysadmin: every command asks (--sandbox itself is refused at start-up)
    assert decide("ask", "relay", "sandbox", profile="sysadmin").choices == ("y", "n")
    assert not commands_sandboxed("sandbox", "sysadmin", "user", "ask")


def test_the_argument_means_nothing_without_a_sandbox() -> None:
    assert decide("ask", outside=True) == ASK3
    assert decide("allow", outside=True) == CommandVerdict("run")


def test_a_question_about_a_command_outside_the_sandbox_says_so() -> None:
    request = ApprovalRequest(
        kind="command",
        text="curl https://example.org",
        choices=("y", "n"),
        cwd="/w",
        outside_sandbox="its reason: needs\x1b[2J the network",
    )
    assert question_head(request) == (
        "The model wants to run this command OUTSIDE the sandbox in /w "
        "(its reason: needs^[[2J the network):"
    )
