"""``/context`` and the status bar's fill, measured as the server counted."""

from __future__ import annotations

import re
from pathlib import Path

from tests.agent.test_loop import make_rig, user
from zcoder.agent.model import ChatChunk


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
