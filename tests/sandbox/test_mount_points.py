"""The stand-ins bwrap makes on the host for masks leave no trace: not when two sandboxed
commands overlap in one workspace, not after a zcoder killed mid-command.

Skipped, with the reason, where bubblewrap cannot work (``conftest.bwrap``)."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
import trio

from zcoder.sandbox.masks import record_of
from zcoder.sandbox.plan import Confinement

from .conftest import Run


@pytest.fixture
def recorded(tmp_path: Path, plan: Confinement) -> Confinement:
    return attrs.evolve(plan, records=tmp_path / "home" / "sandbox")


async def wait_for(path: Path) -> None:
    while not await trio.Path(path).exists():  # noqa: ASYNC110 - a sandboxed command writes it
        await trio.sleep(0.01)


async def test_overlapping_commands_leave_no_stand_in(
    ws: Path, recorded: Confinement, run: Run
) -> None:
    """The second command's scan sees the first one's empty ``.git`` and ``AGENTS.md``
    as the workspace's own; the first one out cannot remove them (the second still needs
    its mounts); the last one out removes them all, from the record."""
    async with trio.open_nursery() as nursery:

        async def first() -> None:
            await run("touch a; until [ -e b ]; do sleep 0.01; done", sandbox=recorded)
            (ws / "go").touch()

        nursery.start_soon(first)
        await wait_for(ws / "a")
        await run("touch b; until [ -e go ]; do sleep 0.01; done", sandbox=recorded)
    assert sorted(os.listdir(ws)) == ["a", "b", "go"]
    assert recorded.records is not None
    assert not record_of(recorded.records, ws).exists()


async def test_a_crashed_commands_stand_ins_are_removed_by_the_next(
    ws: Path, recorded: Confinement, run: Run
) -> None:
    assert recorded.records is not None
    (ws / ".git").mkdir()  # as a zcoder killed mid-command leaves them
    (ws / "AGENTS.md").mkdir()
    (ws / "kept").mkdir()  # empty too, but not recorded: the user's
    record = record_of(recorded.records, ws)
    record.parent.mkdir(parents=True)
    record.write_text(f"{ws / '.git'}\n{ws / 'AGENTS.md'}\n{ws.parent / 'outside'}\n")
    (ws.parent / "outside").mkdir()
    result = await run("ls -A; git init -q . || echo refused", sandbox=recorded)
    assert "Read-only file system" in result.text and result.text.endswith("refused\n")
    assert sorted(os.listdir(ws)) == ["kept"]
    assert (ws.parent / "outside").is_dir()  # a record names only the workspace's
    assert not record.exists()
