"""The sysadmin guard: blocked and allowed cases, nesting, paths by cwd; it never raises."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zcoder.shell.guard import MAX_NESTING, guard_command

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
