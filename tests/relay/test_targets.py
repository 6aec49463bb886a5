"""``/send``'s target: an exact id or a label exactly one live peer has; what Tab offers;
the agent-name grammar."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.relay.helpers import make_manifest
from zcoder.errors import CommandError
from zcoder.relay.listing import NO_PEERS
from zcoder.relay.names import agent_name_problem, is_agent_name
from zcoder.relay.registry import Peer
from zcoder.relay.targets import (
    MAX_CANDIDATES,
    resolve_target,
    target_completions,
    target_descriptions,
)


def peer(instance_id: str, project: str, workspace: str = "/w/x") -> Peer:
    return Peer(
        make_manifest(Path("/r"), instance_id, project=project, workspace=workspace), "ready"
    )


DIGEST = peer("100-1111", "weekly-digest", "/w/digest")
PROFILES = peer("200-2222", "user-profiles", "/w/profiles")
TWIN_A = peer("300-3333", "api", "/w/one/api")
TWIN_B = peer("400-4444", "API", "/w/two/api")
PEERS = [DIGEST, PROFILES, TWIN_A, TWIN_B]


@pytest.mark.parametrize(
    "target", ["@weekly-digest", "weekly-digest", "@Weekly-Digest", "100-1111"]
)
def test_an_exact_id_or_a_label_one_peer_has_is_that_peer(target: str) -> None:
    assert resolve_target(target, PEERS) is DIGEST


def test_an_exact_id_wins_over_a_label_that_looks_like_it() -> None:
    impostor = peer("500-5555", "100-1111")
    assert resolve_target("100-1111", [impostor, DIGEST]) is DIGEST
    assert resolve_target("@100-1111", [impostor, DIGEST]) is impostor  # @ means a label


@pytest.mark.parametrize("target", ["@api", "api", "@API"])
def test_an_ambiguous_label_is_refused_with_its_candidates(target: str) -> None:
    with pytest.raises(CommandError) as err:
        resolve_target(target, PEERS)
    text = str(err.value)
    assert "2 live instances are named" in text
    assert "@api (pid 300, /w/one/api) · 300-3333" in text
    assert "@API (pid 400, /w/two/api) · 400-4444" in text
    assert "100-1111" not in text  # only the candidates
    assert text.endswith("Send to one by its instance id.")


@pytest.mark.parametrize("target", ["@nobody", "100-111", "@", "weekly"])
def test_an_unknown_target_is_refused_with_the_live_instances(target: str) -> None:
    with pytest.raises(CommandError) as err:
        resolve_target(target, PEERS)
    text = str(err.value)
    assert f"no live instance has the id or name {target!r}" in text
    for p in PEERS:
        assert p.manifest.instance_id in text


def test_no_peers_at_all_says_so() -> None:
    with pytest.raises(CommandError, match=NO_PEERS):
        resolve_target("@x", [])


def test_a_long_candidate_list_is_bounded() -> None:
    many = [peer(f"{n}-9", "same") for n in range(1, 21)]
    with pytest.raises(CommandError) as err:
        resolve_target("@same", many)
    assert f"and {20 - MAX_CANDIDATES} more" in str(err.value)


def test_peer_labels_are_shown_escaped() -> None:
    bad = peer("600-6666", "evil\x1b[2J")
    with pytest.raises(CommandError) as err:
        resolve_target("@nobody", [bad])
    assert "\x1b" not in str(err.value)


def test_tab_offers_unique_labels_and_the_ids_of_the_rest() -> None:
    spaced = peer("700-7777", "my project")
    assert target_completions([*PEERS, spaced]) == [
        "@user-profiles",
        "@weekly-digest",
        "300-3333",
        "400-4444",
        "700-7777",  # a label with a space could not be typed as one TARGET
    ]
    assert target_completions([]) == []


def test_tab_can_describe_a_bare_id_by_its_label_pid_and_workspace() -> None:
    described = target_descriptions(PEERS)
    assert list(described) == target_completions(PEERS)
    pid = TWIN_A.manifest.pid
    assert described["300-3333"] == f"@api (pid {pid}, /w/one/api)"
    assert described["400-4444"] == f"@API (pid {TWIN_B.manifest.pid}, /w/two/api)"
    assert described["@weekly-digest"] == f"(pid {DIGEST.manifest.pid}, /w/digest)"


@pytest.mark.parametrize("name", ["a", "beta", "Web.API_2", "x-" + "y" * 62, "9lives"])
def test_agent_names_in_the_grammar(name: str) -> None:
    assert is_agent_name(name) and agent_name_problem(name) == ""


@pytest.mark.parametrize(
    "name", ["", "-x", ".hidden", "has space", "a/b", "x" * 65, "é", "tab\t", "a\x1b", "@beta"]
)
def test_agent_names_outside_the_grammar(name: str) -> None:
    assert not is_agent_name(name)
    problem = agent_name_problem(name)
    assert problem.startswith(f"{name!r} is not an agent name: use 1 to 64 letters")


@pytest.mark.parametrize("target", ["@alpha", "ALPHA", "900-9999"])
def test_a_target_that_is_this_instance_says_so(target: str) -> None:
    me = peer("900-9999", "alpha", "/w/alpha").manifest
    with pytest.raises(CommandError) as err:
        resolve_target(target, [DIGEST], own=me)
    text = str(err.value)
    assert text.startswith(f"/send: {target} is this instance (alpha, pid 900): a message goes")
    assert text.endswith("Other instances: @weekly-digest (pid 100, /w/digest) · 100-1111.")
    with pytest.raises(CommandError, match=f"is this instance .*{NO_PEERS}"):
        resolve_target(target, [], own=me)
    # Another live instance with the same name is the one meant.
    twin = peer("901-9999", "alpha", "/w/alpha2")
    assert resolve_target("@alpha", [twin], own=me) is twin
