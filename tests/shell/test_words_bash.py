"""The guard's lexer splits words as real bash does: a differential test over a corpus.

Every line of the corpus is handed to one ``bash`` process as ``set -- LINE`` followed by
``printf '%s\\0' "$#" "$@"``, and the words bash produced are compared with the words of
``split_commands(LINE)``. The corpus holds only lines whose words bash would not expand
differently from how they read: no unquoted ``$`` other than ``$'...'`` and ``$"..."``, no
``~``, and globbing (``set -f``) and brace expansion (``set +B``) are off. Skipped when
there is no bash.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess

import pytest

from zcoder.shell.words import split_commands

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")

HANDWRITTEN = [
    "rm -rf $'/'",
    "rm -rf $'\\x2f'",
    "rm -rf $'\\057etc'",
    "a $'it\\'s' b",
    "a $'tab\\there' $'nl\\nx' $'bell\\a' $'esc\\e[0m'",
    "a $'\\cA\\cz\\c?' $'\\q\\x' $'\\18' $'\\1234'",
    "a $'a\\0b'c",
    "printf x $'a\\c'; ",
    "a $'\\u0041\\U00000042' $'\\x41\\x4a'",
    'a $"b c"d $"e\\"f"',
    "a 'b c' \"d e\" f\\ g",
    "a '' \"\" x''y",
    'a "\\$x \\` \\" \\\\ \\q"',
    "a b\\\nc",
    'a "b\\\nc"',
    "a 'x\"y' \"x'y\"",
    "a *.py '*' \"?\" [ab]",
    "a {a,b} x{,}y",
    "a b # a comment",
    "a b#c",
    "a=1 b==2 =c",
    'a $\'"\' "\'" $"\'"',
    "a ''$'x'\"y\"z",
]

_PLAIN = "abcxyzABC019/._-=:,@%+^é✓"
_SINGLE_BODY = _PLAIN + ' $*?;|&<>()\\"`#{}!'
_DOUBLE_BODY = _PLAIN + " *?;|&<>()'#{}"
_DOUBLE_ESCAPES = ["\\\\", '\\"', "\\$", "\\`", "\\a", "\\\n"]
_ANSI_BODY = _PLAIN + ' $*?;|&<>()"`#{}'
_ANSI_ESCAPES = [
    "\\n", "\\t", "\\\\", "\\'", '\\"', "\\?", "\\a", "\\e", "\\x41", "\\x7e", "\\xe9",
    "\\101", "\\351", "\\7", "\\cA", "\\cm", "\\q", "\\u0041", "\\x", "\\0",
]  # fmt: skip
_BARE_ESCAPES = ["\\ ", "\\;", "\\$", "\\*", "\\'", '\\"', "\\\\", "\\a", "\\|", "\\#"]


def _some(rng: random.Random, alphabet: str, extras: list[str], most: int) -> str:
    return "".join(
        rng.choice(extras) if extras and rng.random() < 0.25 else rng.choice(alphabet)
        for _ in range(rng.randint(0, most))
    )


def _fragment(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return "".join(rng.choice(_PLAIN) for _ in range(rng.randint(1, 4)))
    if kind == 1:
        return "'" + _some(rng, _SINGLE_BODY, [], 6) + "'"
    if kind == 2:
        return '"' + _some(rng, _DOUBLE_BODY, _DOUBLE_ESCAPES, 6) + '"'
    if kind == 3:
        return "$'" + _some(rng, _ANSI_BODY, _ANSI_ESCAPES, 6) + "'"
    if kind == 4:
        return '$"' + _some(rng, _DOUBLE_BODY, _DOUBLE_ESCAPES, 4) + '"'
    if kind == 5:
        return rng.choice(_BARE_ESCAPES)
    return rng.choice(["*", "?", "[a]", "{a,b}", "!", "%", "x=y"])


def _generated(count: int) -> list[str]:
    rng = random.Random(20260514)  # fixed: the corpus is the same on every run
    lines = []
    for _ in range(count):
        words = [
            "".join(_fragment(rng) for _ in range(rng.randint(1, 4)))
            for _ in range(rng.randint(1, 5))
        ]
        lines.append("w " + " ".join(words))
    return lines


def _bash_words(lines: list[str]) -> list[list[str]]:
    """What bash makes of each line's words, in one process."""
    assert BASH is not None
    script = "set -f +B\n" + "".join(
        f'set -- {line}\nprintf \'%s\\0\' "$#" "$@"\n' for line in lines
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", script],
        capture_output=True,
        env=env,
        timeout=60,
        check=True,
    )
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    out: list[list[str]] = []
    k = 0
    for _ in lines:
        n = int(fields[k])
        out.append(fields[k + 1 : k + 1 + n])
        k += 1 + n
    return out


def _our_words(line: str) -> list[str]:
    commands, _ = split_commands(line)
    return [w for c in commands for w in c.words]


def _check(lines: list[str]) -> None:
    expected = _bash_words(lines)
    wrong = [
        (line, want, _our_words(line))
        for line, want in zip(lines, expected, strict=True)
        if _our_words(line) != want
    ]
    assert wrong == [], "\n".join(f"{line!r}: bash {a!r}, lexer {b!r}" for line, a, b in wrong)


def test_handwritten_lines_split_as_bash_splits_them() -> None:
    lines = [line.rstrip("; ") for line in HANDWRITTEN]
    _check([f"w {line}" for line in lines])


def test_generated_lines_split_as_bash_splits_them() -> None:
    _check(_generated(400))
