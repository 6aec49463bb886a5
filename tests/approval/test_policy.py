"""Approval decisions (full table) and the sysadmin guard (blocked and allowed cases)."""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zcoder.approval.policy import (
    DENIED_BY_POLICY,
    CommandVerdict,
    apply_answer,
    decide_command,
    denial_text,
    guard_command,
)
from zcoder.approval.questions import Answer
from zcoder.config import CommandPolicy, Profile
from zcoder.conversation import Origin
from zcoder.shell.guard import MAX_NESTING
from zcoder.shell.words import SimpleCommand, split_commands

WS = Path("/work/proj")
HOME = Path("/home/alice")


def guard(command: str, cwd: Path | None = None) -> str | None:
    return guard_command(command, workspace=WS, home=HOME, cwd=cwd)


BLOCKED = [
    ("mkfs.ext4 /dev/sdb1", "blocked: mkfs.ext4 formats a filesystem"),
    ("sudo mkfs -t xfs /dev/sdb", "blocked: mkfs formats a filesystem"),
    ("/sbin/mkfs.vfat /dev/sdc1", "blocked: mkfs.vfat formats a filesystem"),
    ("blkdiscard /dev/nvme0n1", "blocked: blkdiscard discards every block of a device"),
    ("wipefs -a /dev/sdb", "blocked: wipefs -a erases filesystem signatures"),
    ("wipefs --all /dev/sdb", "blocked: wipefs -a erases filesystem signatures"),
    ("wipefs -fa /dev/sdb", "blocked: wipefs -a erases filesystem signatures"),
    ("dd if=/dev/zero of=/dev/sda bs=1M", "blocked: dd onto device /dev/sda"),
    ("timeout 10 dd if=x of=/dev/../dev/sdb", "blocked: dd onto device /dev/sdb"),
    ("rm -rf /", "blocked: rm on /: the root directory"),
    ("rm -rf /usr/", "blocked: rm on /usr: a system directory"),
    ("rm -rf /etc/.", "blocked: rm on /etc: a system directory"),
    ("rm -rf //etc", "blocked: rm on /etc: a system directory"),
    ("rm -r /usr/lib/../..", "blocked: rm on /: the root directory"),
    ("rm -rf /var", "blocked: rm on /var: a system directory"),
    ("rm /home", "blocked: rm on /home: a system directory"),
    ("rm -rf ~", "blocked: rm on /home/alice: your home directory"),
    ("rm -rf ~/", "blocked: rm on /home/alice: your home directory"),
    ('rm -rf "$HOME"', "blocked: rm on /home/alice: your home directory"),
    ("rm -rf ${HOME}/.", "blocked: rm on /home/alice: your home directory"),
    ("rm -rf /work/proj", "blocked: rm on /work/proj: the workspace root"),
    ("rm -rf .", "blocked: rm on /work/proj: the workspace root"),
    ("rm -rf $PWD", "blocked: rm on /work/proj: the workspace root"),
    ("rm -rf ..", "blocked: rm on /work: a directory containing the workspace root"),
    ('rm -rf "/"', "blocked: rm on /: the root directory"),
    ("rm -rf '/e'tc", "blocked: rm on /etc: a system directory"),
    ("rm -rf \\/usr", "blocked: rm on /usr: a system directory"),
    ("sudo rm -rf /home", "blocked: rm on /home: a system directory"),
    ("env X=1 rm -rf /", "blocked: rm on /: the root directory"),
    ("command rm -rf /", "blocked: rm on /: the root directory"),
    ("nice -n 10 rm -rf /", "blocked: rm on /: the root directory"),
    ("sudo -u root env -i PATH=/bin nice rm -rf /usr", "blocked: rm on /usr: a system directory"),
    ("/bin/rm -rf --no-preserve-root /", "blocked: rm on /: the root directory"),
    ("rm -rf -- /", "blocked: rm on /: the root directory"),
    ("X=1 Y=2 rm -rf /var", "blocked: rm on /var: a system directory"),
    ("echo hi; rm -rf /", "blocked: rm on /: the root directory"),
    ("make && rm -rf /var", "blocked: rm on /var: a system directory"),
    ("false || rm -rf /etc", "blocked: rm on /etc: a system directory"),
    ("ls | rm -rf /usr", "blocked: rm on /usr: a system directory"),
    ("sleep 1 & rm -rf /usr", "blocked: rm on /usr: a system directory"),
    ("echo ok\nrm -rf /etc", "blocked: rm on /etc: a system directory"),
    ("{ rm -rf /etc; }", "blocked: rm on /etc: a system directory"),
    ("(cd /tmp; rm -rf /etc)", "blocked: rm on /etc: a system directory"),
    ("if true; then rm -rf /usr; fi", "blocked: rm on /usr: a system directory"),
    ("rm -rf /*", "blocked: rm on /*: everything in /"),
    ("rm -rf /etc/*", "blocked: rm on /etc/*: everything in /etc"),
    ("rm -rf /e*", "blocked: rm on /e*: a pattern matching /etc"),
    (
        'rm -rf "$BUILD/"*',
        "blocked: rm on /*: everything in / (a variable in it may be empty)",
    ),
    ("chmod -R 777 /", "blocked: chmod on /: the root directory"),
    ("chmod 755 /etc", "blocked: chmod on /etc: a system directory"),
    ("chmod -w /etc", "blocked: chmod on /etc: a system directory"),
    ("chown -R nobody /usr", "blocked: chown on /usr: a system directory"),
    ("chgrp -R staff ~", "blocked: chgrp on /home/alice: your home directory"),
    ("find / -name core -delete", "blocked: find -delete on /: the root directory"),
    ("find -L /etc -exec rm {} \\;", "blocked: find -delete on /etc: a system directory"),
    ("find -delete", "blocked: find -delete on /work/proj: the workspace root"),
    ("echo x > /dev/sda", "blocked: redirection onto device /dev/sda"),
    ("echo x >/dev/nvme0n1", "blocked: redirection onto device /dev/nvme0n1"),
    ("cat disk.img >> /dev/sdb", "blocked: redirection onto device /dev/sdb"),
    ("cmd &> /dev/sda1", "blocked: redirection onto device /dev/sda1"),
    ("cat x 2>/dev/mapper/root", "blocked: redirection onto device /dev/mapper/root"),
    ("cat img | sudo tee /dev/sdc", "blocked: tee onto device /dev/sdc"),
    ("cp image.iso /dev/sdb", "blocked: cp onto device /dev/sdb"),
    ("echo b > /proc/sysrq-trigger", "blocked: redirection onto device /proc/sysrq-trigger"),
    ("cd /dev && cat img > sda", "blocked: redirection onto device /dev/sda"),
    ("cd / && rm -rf *", "blocked: rm on /*: everything in /"),
    ("cd /etc; rm -rf .", "blocked: rm on /etc: a system directory"),
    ("sh -c 'rm -rf /'", "blocked: rm on /: the root directory"),
    ('bash -lc "sudo rm -rf /etc"', "blocked: rm on /etc: a system directory"),
    ("sh -c 'sh -c \"rm -rf /\"'", "blocked: rm on /: the root directory"),
    ("sudo bash -c 'mkfs.ext4 /dev/sdb'", "blocked: mkfs.ext4 formats a filesystem"),
    ("su -c 'rm -rf /'", "blocked: rm on /: the root directory"),
    ("eval rm -rf /", "blocked: rm on /: the root directory"),
    ("env -S 'rm -rf /'", "blocked: rm on /: the root directory"),
    ("echo $(rm -rf /)", "blocked: rm on /: the root directory"),
    ('echo "$(rm -rf /)"', "blocked: rm on /: the root directory"),
    ("x=`rm -rf /`", "blocked: rm on /: the root directory"),
    ("diff <(rm -rf /) b", "blocked: rm on /: the root directory"),
    ("bash <<END\nrm -rf /\nEND", "blocked: rm on /: the root directory"),
    ("cat <<END\n$(rm -rf /)\nEND", "blocked: rm on /: the root directory"),
    ("sh <<< 'rm -rf /'", "blocked: rm on /: the root directory"),
    ("echo 'rm -rf /' | sh", "blocked: rm on /: the root directory"),
    ("echo a#b; rm -rf /", "blocked: rm on /: the root directory"),
    ("rm -rf /{tmp/x,etc}", "blocked: rm on /etc: a system directory"),
    ("mv /etc /tmp/etc.old", "blocked: mv on /etc: a system directory"),
    ("rsync -a --delete empty/ /", "blocked: rsync --delete on /: the root directory"),
    ("mke2fs -t ext4 /dev/sdb1", "blocked: mke2fs formats a filesystem"),
    ("truncate -s 0 /dev/sda", "blocked: truncate onto device /dev/sda"),
    # ANSI-C strings are a quoting form: decoded before judging
    ("rm -rf $'/'", "blocked: rm on /: the root directory"),
    ("rm -rf $'\\x2f'", "blocked: rm on /: the root directory"),
    ("rm -rf $'\\057'etc", "blocked: rm on /etc: a system directory"),
    ("rm -rf $'\\u002f'usr", "blocked: rm on /usr: a system directory"),
    ('rm -rf $"/"', "blocked: rm on /: the root directory"),
    ("sh -c $'rm -rf \\x2f'", "blocked: rm on /: the root directory"),
    ("echo $'it\\'s'; rm -rf /", "blocked: rm on /: the root directory"),
    ("echo $'\\c'; rm -rf /", "blocked: rm on /: the root directory"),
    ("dd if=x of=$'\\x2fdev/sda'", "blocked: dd onto device /dev/sda"),
    # parameter defaults: the word a parameter may stand for is judged too
    ("rm -rf ${X:-/}", "blocked: rm on /: the root directory (a variable in it may be empty)"),
    ("rm -rf ${X-/}", "blocked: rm on /: the root directory (a variable in it may be empty)"),
    ("rm -rf ${X:=/}", "blocked: rm on /: the root directory (a variable in it may be empty)"),
    ("rm -rf ${X=/}", "blocked: rm on /: the root directory (a variable in it may be empty)"),
    ('rm -rf "${X:-/}"', "blocked: rm on /: the root directory (a variable in it may be empty)"),
    (
        "rm -rf ${X:+/etc}",
        "blocked: rm on /etc: a system directory (a variable in it may be empty)",
    ),
    (
        "rm -rf ${X:-${Y:-/usr}}",
        "blocked: rm on /usr: a system directory (a variable in it may be empty)",
    ),
    (
        "rm -rf ${X:-'/'}",
        "blocked: rm on /: the root directory (a variable in it may be empty)",
    ),
    (
        "rm -rf ${X:-$'\\x2f'}",
        "blocked: rm on /: the root directory (a variable in it may be empty)",
    ),
    (
        'rm -rf "${DIR:-/tmp}/"../..',
        "blocked: rm on /: the root directory (a variable in it may be empty)",
    ),
    ("rm -rf ${HOME:-/tmp/x}", "blocked: rm on /home/alice: your home directory"),
    (
        "rm -rf ${X:-/tmp /etc}",
        "blocked: rm on /etc: a system directory (a variable in it may be empty)",
    ),
    ("echo x > ${D:-/dev/sda}", "blocked: redirection onto device /dev/sda"),
]

FORK_BOMBS = [
    ":(){ :|:& };:",
    ":(){ :|: & };:",
    ":(){\n  :|:&\n};:",
    "bomb() { bomb | bomb & }; bomb",
    "function f { f|f& }; f",
    "sh -c ':(){ :|:& };:'",
    "perl -e 'fork while fork'",
    "python3 -c 'import os\nwhile True: os.fork()'",
]

ALLOWED = [
    "ls -la /",
    "wipefs /dev/sdb",
    "dd if=/dev/zero of=/dev/null bs=1M count=1",
    "dd if=disk.img of=./copy.img",
    "rm -rf /var/tmp/build",
    "rm -rf ~/projects/old",
    "rm -rf build dist",
    "rm -rf /home/alice/tmp",
    "rm -rf $BUILD/out",
    "rm -rf /var/log/*.gz",
    "rm -rf /opt/app/cache",
    "chmod +x /usr/local/bin/tool",
    "chown -R alice /home/alice/projects",
    "find /tmp -name '*.o' -delete",
    "find / -name x -print",
    "echo hi > /dev/null",
    "echo hi >/dev/stderr 2>/dev/null",
    "echo hi > /dev/tty",
    "printf 'x\\n' > /dev/stdout",
    "ls 2>&1 >out.txt",
    "ls >&2",
    "echo x > /dev/shm/scratch",
    'echo "rm -rf /"',
    "echo 'a; rm -rf /'",
    "grep -r 'rm -rf /' .",
    "f() { echo hi; }; f",
    'eval "echo hi"',
    "echo 'ls -la' | sh",
    "cat <<'END' > notes.txt\nrm -rf /\nEND",
    "cd /tmp && rm -rf *",
    "systemctl restart nginx",
    "apt-get install -y htop",
    "git clean -fdx",
    "xargs rm -rf < list.txt",
    "command -v rm",
    "echo done # rm -rf /",
    "rm -rf /tmp/{a,b}",
    "mv old.txt new.txt",
    "rsync -a --delete src/ /srv/www/site/",
    "rm -rf ${BUILD:-build}/out",
    "rm -rf ${TMPDIR:-/tmp}/zcoder-test",
    "rm -rf $'/tmp/a b'",
    "echo $'rm -rf /'",
    "printf '%s' ${X#/}",
]


def test_too_many_readings_of_one_word_are_refused_not_guessed() -> None:
    word = "".join(f"${{V{n}:-a{n}}}" for n in range(10))  # 2**10 readings
    assert guard(f"rm -rf {word}") == (
        "blocked: too many parameter expansions in one word to check"
    )
    assert guard("rm -rf " + "${X:-" * 40 + "/" + "}" * 40) == (
        "blocked: rm on /: the root directory (a variable in it may be empty)"
    )


@pytest.mark.parametrize(("command", "reason"), BLOCKED)
def test_guard_blocks(command: str, reason: str) -> None:
    assert guard(command) == reason


@pytest.mark.parametrize("command", FORK_BOMBS)
def test_guard_blocks_fork_bombs(command: str) -> None:
    assert guard(command) == "blocked: fork bomb (a function or loop that spawns itself)"


@pytest.mark.parametrize("command", ALLOWED)
def test_guard_allows(command: str) -> None:
    assert guard(command) is None


def _nest(inner: str, levels: int, how: str) -> str:
    for _ in range(levels):
        inner = f"sh -c {shlex.quote(inner)}" if how == "sh" else f"eval {shlex.quote(inner)}"
    return inner


@pytest.mark.parametrize("how", ["sh", "eval"])
def test_nesting_up_to_the_limit_is_allowed_and_deeper_is_blocked(how: str) -> None:
    assert guard(_nest("echo hi", MAX_NESTING, how)) is None
    assert guard(_nest("echo hi", MAX_NESTING + 1, how)) == (
        "blocked: sh -c/eval nested deeper than 4 levels"
    )


def test_inner_commands_are_guarded_at_every_depth() -> None:
    for depth in range(1, MAX_NESTING + 1):
        assert guard(_nest("rm -rf /usr", depth, "sh")) == (
            "blocked: rm on /usr: a system directory"
        )


def test_relative_paths_follow_the_given_cwd() -> None:
    assert guard("rm -rf ..", cwd=WS / "sub") == "blocked: rm on /work/proj: the workspace root"
    assert guard("rm -rf ../other", cwd=WS / "sub") is None
    assert guard("rm -rf *", cwd=WS) == "blocked: rm on /work/proj/*: everything in /work/proj"
    assert guard("rm -rf *", cwd=WS / "sub") is None


def test_a_cd_to_an_unknown_place_stops_judging_relative_paths() -> None:
    assert guard('cd "$X" && rm -rf *') is None
    assert guard('cd "$X" && rm -rf /etc') == "blocked: rm on /etc: a system directory"


def test_cd_without_argument_goes_home() -> None:
    assert guard("cd && rm -rf .") == "blocked: rm on /home/alice: your home directory"


def test_deeply_nested_substitutions_are_refused_not_recursed_forever() -> None:
    text = "echo " + "$(echo " * 40 + "hi" + ")" * 40
    assert guard(text) == "blocked: command substitutions nested too deeply"


def test_unterminated_quote_still_sees_the_words() -> None:
    assert guard("rm -rf / 'oops") == "blocked: rm on /: the root directory"
    assert guard("echo 'oops; rm -rf /") is None  # all one quoted word, as the shell reads it


def test_pathological_nesting_is_blocked_not_a_crash() -> None:
    assert guard("echo " + '"$(' * 3000) == "blocked: the command is nested too deeply to check"


def test_brace_expansion_is_bounded() -> None:
    assert guard("rm x" + " {a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}" * 10) is None


_PIECES = st.sampled_from([*"ab /$(){}`'\"\\;|&<>*~.-=\n#:", "rm -rf ", "sh -c ", "eval ", "<<E"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_guard_never_raises(command: str) -> None:
    result = guard(command)
    assert result is None or result.startswith("blocked: ")


def test_lexer_splits_operators_and_keeps_quotes() -> None:
    commands, subs = split_commands("a 'b;c' \"d e\" 2>/dev/null | f && g > out; h <<< s")
    assert commands == [
        SimpleCommand(("a", "b;c", "d e"), ((">", "/dev/null"),)),
        SimpleCommand(("f",), after_pipe=True),
        SimpleCommand(("g",), ((">", "out"),)),
        SimpleCommand(("h",), (), ("s",)),
    ]
    assert subs == []


def test_lexer_here_document_body_is_data_and_the_next_line_a_command() -> None:
    commands, _ = split_commands("cat <<'EOF' > f\nit's $(not run)\nEOF\nrm x")
    assert commands == [
        SimpleCommand(("cat",), ((">", "f"),), ("it's $(not run)",)),
        SimpleCommand(("rm", "x")),
    ]


# --- decisions ---------------------------------------------------------------------------

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
