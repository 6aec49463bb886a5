"""The pure unified diff parser and applier."""

from __future__ import annotations

import pytest

from zcoder.errors import ToolError
from zcoder.tools.patch import FilePatch, Hunk, TextFile, apply_file_patch, parse_patch

BASE = "".join(f"line {n}\n" for n in range(1, 21))


def apply(text: str, patch: str) -> str | None:
    (file_patch,) = parse_patch(patch)
    before = TextFile.from_text(text) if text is not None else None
    after = apply_file_patch(before, file_patch, "f.txt")
    return None if after is None else after.to_text()


def error_of(text: str | None, patch: str) -> str:
    with pytest.raises(ToolError) as info:
        files = parse_patch(patch)
        current = TextFile.from_text(text) if text is not None else None
        for file_patch in files:
            current = apply_file_patch(current, file_patch, "f.txt")
    return str(info.value)


def test_parse_headers_and_hunks() -> None:
    patch = (
        "diff --git a/src/x.py b/src/x.py\n"
        "index 123..456 100644\n"
        "--- a/src/x.py\t2024-01-01\n"
        "+++ b/src/x.py\n"
        "@@ -1,3 +1,3 @@ def f():\n"
        " a\n"
        "-b\n"
        "+B\n"
        " c\n"
        "--- /dev/null\n"
        "+++ b/new.txt\n"
        "@@ -0,0 +1,2 @@\n"
        "+one\n"
        "+two\n"
    )
    first, second = parse_patch(patch)
    assert first == FilePatch(
        "src/x.py", "src/x.py", (Hunk(1, ("a", "b", "c"), ("a", "B", "c"), added=1, removed=1),)
    )
    assert second == FilePatch(None, "new.txt", (Hunk(1, (), ("one", "two"), added=2),))


def test_prefixes_only_stripped_as_a_pair() -> None:
    (plain,) = parse_patch("--- a/x\n+++ a/x\n@@ -1 +1 @@\n-1\n+2\n")
    assert (plain.old_path, plain.new_path) == ("a/x", "a/x")
    (bare,) = parse_patch("--- x.txt\n+++ x.txt\n@@ -1 +1 @@\n-1\n+2\n")
    assert (bare.old_path, bare.new_path) == ("x.txt", "x.txt")


def test_modify_middle_with_offset() -> None:
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -3,3 +3,3 @@\n line 8\n-line 9\n+LINE 9\n line 10\n"
    result = apply(BASE, patch)
    assert result == BASE.replace("line 9\n", "LINE 9\n")


def test_two_hunks_track_growth() -> None:
    patch = (
        "--- a/f.txt\n+++ b/f.txt\n"
        "@@ -2,2 +2,4 @@\n line 2\n+new a\n+new b\n line 3\n"
        "@@ -15,3 +17,2 @@\n line 15\n-line 16\n line 17\n"
    )
    result = apply(BASE, patch)
    expected = BASE.replace("line 2\n", "line 2\nnew a\nnew b\n").replace("line 16\n", "")
    assert result == expected


def test_nearest_match_wins_for_repeated_context() -> None:
    text = "x\ny\nx\ny\nx\ny\n"
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -5,2 +5,2 @@\n x\n-y\n+Y\n"
    assert apply(text, patch) == "x\ny\nx\ny\nx\nY\n"


def test_header_without_numbers_and_blank_context_lines() -> None:
    text = "def f():\n\n    return 1\n"
    patch = "--- a/f.txt\n+++ b/f.txt\n@@\n def f():\n\n-    return 1\n+    return 2\n\n\n"
    assert apply(text, patch) == "def f():\n\n    return 2\n"


def test_code_fences_around_patch() -> None:
    patch = "```diff\n--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-line 1\n+first\n```\n"
    assert apply(BASE, patch) == BASE.replace("line 1\n", "first\n", 1)


def test_insert_with_zero_length_old_range() -> None:
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -2,0 +3 @@\n+inserted\n"
    assert apply("a\nb\nc\n", patch) == "a\nb\ninserted\nc\n"


def test_no_newline_markers() -> None:
    removed = "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n"
    assert apply("a", removed) == "a\n"
    added = "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n"
    assert apply("a\n", added) == "b"


def test_crlf_file_keeps_its_endings() -> None:
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert apply("a\r\nb\r\n", patch) == "a\r\nc\r\n"


def test_create_and_delete() -> None:
    create = "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n"
    assert apply(None, create) == "x\ny\n"  # type: ignore[arg-type]
    delete = "--- a/f.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n"
    assert apply("x\ny\n", delete) is None


@pytest.mark.parametrize(
    ("text", "patch", "message"),
    [
        (BASE, "just words\n", "invalid patch: no file headers found"),
        (BASE, "@@ -1 +1 @@\n-a\n+b\n", "invalid patch: line 1: hunk before any file header"),
        (BASE, "--- /dev/null\n+++ /dev/null\n", "invalid patch: line 1: both sides are /dev/null"),
        (BASE, "--- a/f.txt\n+++ b/f.txt\nhello\n", "invalid patch: line 3: expected an '@@'"),
        (BASE, "--- a/f.txt\n+++ b/f.txt\n", "invalid patch: no hunks for f.txt"),
        (
            BASE,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n line 1\nline 2\n+x\n",
            "invalid patch: hunk 1 of f.txt: line 'line 2' does not start with ' ', '-' or '+'",
        ),
        (
            BASE,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n line 1\n",
            "invalid patch: hunk 1 of f.txt changes nothing",
        ),
        (
            BASE,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n line 1\n-line 3\n+x\n",
            "hunk 1 of f.txt does not apply: its context and '-' lines were not found in the file "
            "(expected near line 1). They were:\nline 1\nline 3\n"
            "Read the file again",
        ),
        (
            "    indented\n",
            "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-indented\n+x\n",
            "hunk 1 of f.txt does not apply: its context and '-' lines were not found in the file "
            "(expected near line 1). They were:\nindented\n"
            "They match at line 1 if whitespace is ignored: check indentation.\n",
        ),
        (BASE, "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1 @@\n+x\n", "f.txt already exists"),
        (None, "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n+b\n", "no such file: f.txt"),
        (
            "a\nb\n",
            "--- a/f.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
            "the patch deletes f.txt but its hunks do not remove every line",
        ),
        (
            "a\nb\n",
            "--- a/f.txt\n+++ b/f.txt\n@@\n+x\n",
            "hunk 1 of f.txt does not apply: it has no context lines and no line numbers",
        ),
    ],
)
def test_errors(text: str | None, patch: str, message: str) -> None:
    assert error_of(text, patch).startswith(message)


def test_later_hunks_never_match_before_earlier_ones() -> None:
    text = "a\nb\na\nb\n"
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -3,2 +3,2 @@\n a\n-b\n+B\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
    assert error_of(text, patch).startswith("hunk 2 of f.txt does not apply")
