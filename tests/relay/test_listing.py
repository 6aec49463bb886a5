"""The ``/list-agents`` table: the spec's fields, 80 columns, untrusted text made visible."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import attrs
import pytest

from tests.relay.helpers import make_manifest
from zcoder.relay.listing import NO_PEERS, TABLE_WIDTH, peer_table, shorten_middle
from zcoder.relay.registry import Peer
from zcoder.text.visible import is_control

R = Path("/r")


def peer(instance_id: str, state: str = "ready", **fields: str) -> Peer:
    manifest = make_manifest(R, instance_id, project=fields.pop("project", "proj"))
    return Peer(attrs.evolve(manifest, **cast(dict[str, Any], fields)), state)


def test_the_table_shows_every_field_the_spec_lists() -> None:
    p = peer(
        "42302-18473291",
        project="weekly-digest",
        workspace="/work/app/services/weekly-digest",
        profile="coding",
        model="qwen3-coder",
    )
    assert peer_table([p]).splitlines() == [
        "PROJECT        PID    STATE  PROFILE  MODEL        INSTANCE ID",
        "  WORKSPACE",
        "weekly-digest  42302  ready  coding   qwen3-coder  42302-18473291",
        "  /work/app/services/weekly-digest",
    ]
    assert peer_table([]) == NO_PEERS == "No other local zcoder instances are available."


def test_long_values_fit_80_columns_and_peers_stay_distinguishable() -> None:
    long_ws = "/home/me/" + "very/deep/" * 12 + "weekly-digest"
    peers = [
        peer("42302-18473291", project="weekly-digest-with-a-long-name", workspace=long_ws),
        peer(
            "42400-1111aaaa",
            "busy",
            project="weekly-digest-with-a-long-name",
            workspace="/srv/clone/weekly-digest",
            model="qwen3-coder:30b-a3b-instruct-q4_K_M",
        ),
        # The other implementation's ids are longer: ``<pid>-<about 20 digits>``.
        peer("13565-17960041672724223065", "paused", profile="sysadmin"),
    ]
    lines = peer_table(peers).splitlines()
    assert len(lines) == 2 + 2 * len(peers)
    assert max(len(line) for line in lines) <= TABLE_WIDTH
    # The exact ids and pids are whole; the labels are cut in the middle, never silently.
    for row, p in zip(lines[2::2], peers, strict=True):
        assert row.split()[-1] == p.manifest.instance_id
        assert row.split()[1] == str(p.manifest.pid)
        assert row.split()[2] == p.state
    assert lines[2].startswith("weekl…name  42302")
    assert "…" in lines[4] and lines[4].split()[4] == "qwen3…4_K_M"
    assert "sysadmin" in lines[6]
    # The workspace row keeps the path's end, where the project directory is.
    assert lines[3].startswith("  /home/me/") and lines[3].endswith("/weekly-digest")
    assert "…" in lines[3]
    assert lines[5] == "  /srv/clone/weekly-digest"


def test_controls_are_shown_the_way_the_transcript_shows_them() -> None:
    evil = peer(
        "1-abcd",
        project="ev\x1b[2J\u202eil",
        workspace="/w/\x07x",
        model="m\r\nfake",
    )
    text = peer_table([evil])
    assert not any(is_control(ch) for ch in text.replace("\n", ""))
    lines = text.splitlines()
    assert lines[2].startswith("ev^[[2J<U+202E>il  1  ")
    assert "m^M^Jfake" in lines[2]
    assert lines[3] == "  /w/^Gx"
    assert lines[0].index("PID") == lines[2].index("1 ")


@pytest.mark.parametrize(
    ("text", "cells", "path", "shown"),
    [
        ("short", 10, False, "short"),
        ("abcdefghij", 10, False, "abcdefghij"),
        ("abcdefghijk", 10, False, "abcde…hijk"),
        ("/home/me/projects/api", 12, True, "/hom…cts/api"),
        ("中文中文中文", 7, True, "中…中文"),
        ("x", 1, False, "x"),
        ("xy", 1, False, "…"),
    ],
)
def test_shorten_middle(text: str, cells: int, path: bool, shown: str) -> None:
    assert shorten_middle(text, cells, path=path) == shown


def test_a_model_file_is_named_by_its_file_name() -> None:
    manifest = attrs.evolve(
        make_manifest(Path("/r"), "4242-abcdef01", project="beta"),
        model="/root/models/SmolLM2-135M-Instruct.Q4_1.gguf",
    )
    table = peer_table([Peer(manifest, "ready")])
    assert "SmolLM2-135M-In…ruct.Q4_1.gguf" in table and "/root" not in table
