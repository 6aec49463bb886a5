"""``/context`` and the status bar's fill, measured as the server counted."""

from __future__ import annotations

import re
from pathlib import Path

from tests.agent.test_loop import make_rig, user
from zcoder.agent.model import ChatChunk
from zcoder.conversation import Message


def _counted(tokens: int, answer: str = "ok") -> list[ChatChunk]:
    return [ChatChunk(content=answer), ChatChunk(done=True, prompt_eval_count=tokens)]


def _number(lines: list[str], label: str) -> int:
    line = next(line for line in lines if label in line)
    found = re.search(r"(\d[\d,]*)", line.split(label, 1)[1])
    assert found, line
    return int(found.group(1).replace(",", ""))


async def test_the_report_adds_up_and_says_who_set_the_window(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [_counted(700)], context_window=4096)
    assert rig.agent.context_fill() is None  # nothing measured yet
    await rig.agent.run_turn(user("a question " * 40))
    lines = await rig.agent.context_lines()
    assert "4,096 tokens (--context-window" in lines[0]
    assert "at 80% = 3,276 tokens" in lines[1]
    total = _number(lines, "about")
    fixed = _number(lines, "system prompt and tools")
    history = _number(lines, "history")
    assert total == fixed + history and history > 0 and fixed > 0
    assert "in 2 messages" in next(line for line in lines if "history" in line)
    assert "counted 700 prompt tokens" in lines[-1]
    fill = rig.agent.context_fill()
    assert fill is not None and fill.window == 4096 and fill.tokens == total


async def test_each_mcp_server_gets_a_line_with_its_schemas_share(tmp_path: Path) -> None:
    from tests.agent.doubles import FakeToolbox

    box = FakeToolbox()
    box.names += ["mcp__demo__add", "mcp__demo__echo", "mcp__files__read"]
    rig = make_rig(tmp_path, [_counted(900)], toolbox=box, context_window=4096)
    await rig.agent.run_turn(user("hello"))
    lines = await rig.agent.context_lines()
    demo = next(line for line in lines if line.startswith("  mcp demo "))
    files = next(line for line in lines if line.startswith("  mcp files "))
    assert demo.endswith("in 2 tools") and files.endswith("in 1 tool")
    assert 0 < _number(lines, "mcp files") < _number(lines, "mcp demo")
    assert _number(lines, "mcp demo") < _number(lines, "system prompt and tools")


async def test_no_mcp_lines_without_mcp_tools(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [_counted(700)], context_window=4096)
    await rig.agent.run_turn(user("hello"))
    assert not any("mcp" in line for line in await rig.agent.context_lines())


async def test_one_message_is_not_counted_as_messages(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [_counted(700)], context_window=4096)
    rig.session.history[:] = [Message(role="user", content="hello")]
    history = next(line for line in await rig.agent.context_lines() if "history" in line)
    assert history.endswith(" in 1 message")
