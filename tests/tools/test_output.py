from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zcoder.tools.output import OutputCollector, cap_text, omission_marker, short_diff


def test_short_text_is_untouched() -> None:
    assert cap_text("hello", 5) == "hello"
    assert cap_text("", 10) == ""


def test_long_text_keeps_head_and_tail_with_marker() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    capped = cap_text(text, 100)
    assert len(capped) <= 100
    head, rest = capped.split("\n[... ", 1)
    count, tail = rest.split(" characters omitted ...]\n", 1)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + int(count) + len(tail) == 1000
    assert abs(len(head) - len(tail)) <= 1
    assert len(capped) == 100


def test_marker_format() -> None:
    assert omission_marker(12345) == "\n[... 12345 characters omitted ...]\n"


def test_cap_smaller_than_marker_gives_only_marker() -> None:
    assert cap_text("x" * 50, 5) == omission_marker(50)


@given(
    chunks=st.lists(st.text(max_size=300), max_size=30),
    cap=st.integers(min_value=40, max_value=400),
)
def test_collector_matches_cap_text(chunks: list[str], cap: int) -> None:
    collector = OutputCollector(cap)
    for chunk in chunks:
        collector.feed(chunk)
    assert collector.text() == cap_text("".join(chunks), cap)
    assert collector.total == len("".join(chunks))


def test_collector_decodes_utf8_split_across_chunks() -> None:
    data = "héllo wörld ✓".encode()
    collector = OutputCollector(1000)
    for i in range(len(data)):
        collector.feed_bytes(data[i : i + 1])
    assert collector.text() == "héllo wörld ✓"


def test_collector_memory_is_bounded() -> None:
    collector = OutputCollector(100)
    for _ in range(10_000):
        collector.feed("0123456789" * 10)
    assert sum(len(part) for part in collector._head) <= 100
    assert sum(len(part) for part in collector._tail) <= 100
    assert collector.text().count("characters omitted") == 1


def test_short_diff_new_modified_and_cut() -> None:
    assert short_diff("a.txt", None, "x\n").splitlines()[:2] == ["--- /dev/null", "+++ b/a.txt"]
    diff = short_diff("a.txt", "x\ny\n", "x\nz\n")
    assert "-y" in diff.splitlines() and "+z" in diff.splitlines()
    long = short_diff("a", "", "\n".join(map(str, range(500))), max_lines=10)
    assert len(long.splitlines()) == 11
    assert long.endswith("more diff lines ...]")
