"""Approval decisions (full table), the sysadmin guard among them, and what answers grant."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from zcoder.approval.policy import (
    DENIED_BY_POLICY,
    CommandVerdict,
    apply_answer,
    decide_command,
    denial_text,
)
from zcoder.approval.questions import Answer
from zcoder.config import CommandPolicy, Profile
from zcoder.conversation import Origin

WS = Path("/work/proj")
HOME = Path("/home/alice")


POLICIES: list[CommandPolicy] = ["ask", "allow", "deny"]
PROFILES: list[Profile] = ["coding", "sysadmin"]
ORIGINS: list[Origin] = ["user", "relay"]

ASK3 = CommandVerdict("ask", choices=("y", "a", "n"))
ASK2 = CommandVerdict("ask", choices=("y", "n"))
RUN = CommandVerdict("run")
DENY = CommandVerdict("deny", DENIED_BY_POLICY)

# (policy, profile, origin, granted) -> verdict for a harmless command
DECISIONS: dict[tuple[str, str, str, bool], CommandVerdict] = {
    ("ask", "coding", "user", False): ASK3,
    ("ask", "coding", "user", True): RUN,
    # a relayed turn offers ``a``, which approves that one command (apply_answer below)
    ("ask", "coding", "relay", False): ASK3,
    ("ask", "coding", "relay", True): ASK3,
    ("ask", "sysadmin", "user", False): ASK2,
    ("ask", "sysadmin", "user", True): ASK2,
    ("ask", "sysadmin", "relay", False): ASK2,
    ("ask", "sysadmin", "relay", True): ASK2,
    ("allow", "coding", "user", False): RUN,
    ("allow", "coding", "user", True): RUN,
    ("allow", "coding", "relay", False): RUN,
    ("allow", "coding", "relay", True): RUN,
    ("allow", "sysadmin", "user", False): ASK2,
    ("allow", "sysadmin", "user", True): ASK2,
    ("allow", "sysadmin", "relay", False): ASK2,
    ("allow", "sysadmin", "relay", True): ASK2,
    **{("deny", p, o, g): DENY for p in PROFILES for o in ORIGINS for g in (False, True)},
}


def test_decision_table_is_complete() -> None:
    expected = set(itertools.product(POLICIES, PROFILES, ORIGINS, (False, True)))
    assert set(DECISIONS) == expected


@pytest.mark.parametrize(("key", "verdict"), sorted(DECISIONS.items()))
def test_decide_command_table(key: tuple[str, str, str, bool], verdict: CommandVerdict) -> None:
    policy, profile, origin, granted = key
    got = decide_command(
        "ls -la",
        policy=policy,  # type: ignore[arg-type]
        profile=profile,  # type: ignore[arg-type]
        origin=origin,  # type: ignore[arg-type]
        granted=granted,
        workspace=WS,
        home=HOME,
    )
    assert got == verdict


@pytest.mark.parametrize("policy", ["ask", "allow"])
@pytest.mark.parametrize("origin", ORIGINS)
@pytest.mark.parametrize("granted", [False, True])
def test_sysadmin_guard_runs_before_approval(
    policy: CommandPolicy, origin: Origin, granted: bool
) -> None:
    got = decide_command(
        "sudo rm -rf /etc",
        policy=policy,
        profile="sysadmin",
        origin=origin,
        granted=granted,
        workspace=WS,
        home=HOME,
    )
    assert got == CommandVerdict("blocked", "blocked: rm on /etc: a system directory")


def test_deny_policy_wins_over_the_guard() -> None:
    got = decide_command(
        "rm -rf /", policy="deny", profile="sysadmin", origin="user", granted=False,
        workspace=WS, home=HOME,
    )  # fmt: skip
    assert got == DENY


def test_guard_does_not_apply_in_the_coding_profile() -> None:
    got = decide_command(
        "rm -rf /", policy="ask", profile="coding", origin="user", granted=False,
        workspace=WS, home=HOME,
    )  # fmt: skip
    assert got == ASK3


def test_sysadmin_guard_uses_the_command_cwd() -> None:
    got = decide_command(
        "rm -rf ..", policy="ask", profile="sysadmin", origin="user", granted=False,
        workspace=WS, home=HOME, cwd=WS / "sub",
    )  # fmt: skip
    assert got.action == "blocked"


ANSWERS: dict[tuple[Answer, Origin, Profile], tuple[bool, bool]] = {
    ("y", "user", "coding"): (True, False),
    ("a", "user", "coding"): (True, True),
    ("n", "user", "coding"): (False, False),
    ("y", "relay", "coding"): (True, False),
    ("a", "relay", "coding"): (True, False),
    ("n", "relay", "coding"): (False, False),
    ("y", "user", "sysadmin"): (True, False),
    ("a", "user", "sysadmin"): (True, False),
    ("n", "user", "sysadmin"): (False, False),
    ("y", "relay", "sysadmin"): (True, False),
    ("a", "relay", "sysadmin"): (True, False),
    ("n", "relay", "sysadmin"): (False, False),
}


@pytest.mark.parametrize(("key", "result"), sorted(ANSWERS.items()))
def test_apply_answer_table(key: tuple[Answer, Origin, Profile], result: tuple[bool, bool]) -> None:
    answer, origin, profile = key
    assert apply_answer(answer, origin=origin, profile=profile) == result


def test_a_grant_then_covers_later_local_commands_but_not_relayed_ones() -> None:
    run, grant = apply_answer("a", origin="user", profile="coding")
    assert (run, grant) == (True, True)
    common = {"policy": "ask", "profile": "coding", "workspace": WS, "home": HOME}
    assert decide_command("make", origin="user", granted=grant, **common) == RUN  # type: ignore[arg-type]
    assert decide_command("make", origin="relay", granted=grant, **common) == ASK3  # type: ignore[arg-type]
    # ... and an ``a`` in the relayed turn approves that command and grants nothing
    assert apply_answer("a", origin="relay", profile="coding") == (True, False)


def test_denial_text() -> None:
    assert denial_text("rm -rf build") == "user denied command: rm -rf build"
