from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from zcoder.config import RelaySettings
from zcoder.errors import RelayUnavailable, UnsafeRelayDir
from zcoder.relay.paths import (
    INSTANCE_ID_RE,
    SUN_PATH_MAX,
    ensure_relay_dir,
    reserve_instance,
    select_relay_dir,
)

OTHER_UID = 4242


def test_selection_prefers_the_configured_dir() -> None:
    settings = RelaySettings(dir=Path("/x/relay"))
    env = {"XDG_RUNTIME_DIR": "/run/user/7", "TMPDIR": "/t"}
    assert select_relay_dir(settings, env) == Path("/x/relay")


def test_selection_uses_xdg_runtime_dir_next() -> None:
    env = {"XDG_RUNTIME_DIR": "/run/user/7", "TMPDIR": "/t"}
    assert select_relay_dir(RelaySettings(), env) == Path("/run/user/7/zcoder-agents")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TMPDIR": "/t"}, "/t/zcoder-{uid}-agents"),
        ({"XDG_RUNTIME_DIR": "", "TMPDIR": "/t"}, "/t/zcoder-{uid}-agents"),
        ({"XDG_RUNTIME_DIR": "relative"}, "/tmp/zcoder-{uid}-agents"),
        ({"TMPDIR": ""}, "/tmp/zcoder-{uid}-agents"),
        ({}, "/tmp/zcoder-{uid}-agents"),
    ],
)
def test_selection_falls_back_to_tmpdir(env: dict[str, str], expected: str) -> None:
    want = Path(expected.format(uid=os.geteuid()))
    assert select_relay_dir(RelaySettings(), env) == want


def test_creates_a_private_dir_even_under_an_open_umask(short_tmp: Path) -> None:
    old = os.umask(0o022)
    try:
        got = ensure_relay_dir(short_tmp / "agents")
    finally:
        os.umask(old)
    assert got == short_tmp / "agents"
    st = os.lstat(got)
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o700


def test_existing_private_dir_is_accepted_and_parent_canonicalised(short_tmp: Path) -> None:
    real = short_tmp / "real"
    (real / "sub").mkdir(parents=True)
    (short_tmp / "link").symlink_to(real)
    got = ensure_relay_dir(short_tmp / "link" / "sub" / ".." / "agents")
    assert got == real / "agents"
    assert ensure_relay_dir(got) == got


def test_create_false_leaves_a_missing_dir_missing(short_tmp: Path) -> None:
    got = ensure_relay_dir(short_tmp / "agents", create=False)
    assert got == short_tmp / "agents"
    assert not os.path.lexists(got)


def test_missing_parent_is_refused(short_tmp: Path) -> None:
    with pytest.raises(UnsafeRelayDir, match="parent of relay directory"):
        ensure_relay_dir(short_tmp / "nope" / "agents")


@pytest.mark.parametrize("bad", ["relative/agents", "/"])
def test_non_absolute_or_root_path_is_refused(bad: str) -> None:
    with pytest.raises(UnsafeRelayDir, match="not an absolute directory path"):
        ensure_relay_dir(Path(bad))


@pytest.mark.parametrize("mode", [0o750, 0o701, 0o707, 0o710, 0o777])
def test_group_or_other_bits_are_refused(short_tmp: Path, mode: int) -> None:
    d = short_tmp / "agents"
    d.mkdir()
    os.chmod(d, mode)
    with pytest.raises(UnsafeRelayDir, match=f"has mode {mode:04o}; group and other") as info:
        ensure_relay_dir(d)
    assert str(info.value).endswith(f"(fix: chmod 700 {d})")
    assert stat.S_IMODE(os.lstat(d).st_mode) == mode  # refused, not repaired


def test_owner_without_full_access_is_refused(short_tmp: Path) -> None:
    d = short_tmp / "agents"
    d.mkdir()
    os.chmod(d, 0o500)
    with pytest.raises(UnsafeRelayDir, match="owner needs read, write and search"):
        ensure_relay_dir(d)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_other_owner_is_refused(short_tmp: Path) -> None:
    d = short_tmp / "agents"
    d.mkdir(mode=0o700)
    os.chown(d, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeRelayDir, match=f"owned by uid {OTHER_UID}, not by this user"):
        ensure_relay_dir(d)
    with pytest.raises(UnsafeRelayDir, match="owned by uid"):
        ensure_relay_dir(d, create=False)


def test_symlinked_relay_dir_is_refused_even_to_a_safe_target(short_tmp: Path) -> None:
    target = short_tmp / "target"
    target.mkdir(mode=0o700)
    (short_tmp / "agents").symlink_to(target)
    with pytest.raises(UnsafeRelayDir, match="is a symbolic link"):
        ensure_relay_dir(short_tmp / "agents")
    with pytest.raises(UnsafeRelayDir, match="is a symbolic link"):
        ensure_relay_dir(short_tmp / "agents", create=False)


def test_dangling_symlink_is_refused_and_not_followed(short_tmp: Path) -> None:
    (short_tmp / "agents").symlink_to(short_tmp / "elsewhere")
    with pytest.raises(UnsafeRelayDir, match="is a symbolic link"):
        ensure_relay_dir(short_tmp / "agents")
    assert not os.path.lexists(short_tmp / "elsewhere")


def test_a_file_instead_of_a_dir_is_refused(short_tmp: Path) -> None:
    (short_tmp / "agents").write_text("")
    with pytest.raises(UnsafeRelayDir, match="is not a directory"):
        ensure_relay_dir(short_tmp / "agents")


def test_reserve_instance_names_and_placeholder(short_tmp: Path) -> None:
    r = reserve_instance(short_tmp)
    assert INSTANCE_ID_RE.fullmatch(r.instance_id)
    assert r.instance_id.startswith(f"{os.getpid()}-")
    assert r.socket_path == short_tmp / f"a-{r.instance_id}.sock"
    assert r.manifest_path == short_tmp / f"a-{r.instance_id}.json"
    assert not os.path.lexists(r.socket_path)  # bind() reserves the socket name itself
    st = os.lstat(r.manifest_path)
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert reserve_instance(short_tmp).instance_id != r.instance_id


def test_reserve_skips_taken_names(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nonces = iter([1, 1, 2, 3])
    monkeypatch.setattr("zcoder.relay.paths.secrets.randbelow", lambda _n: next(nonces))
    pid = os.getpid()
    first = reserve_instance(short_tmp)
    assert first.instance_id == f"{pid}-00000001"
    (short_tmp / f"a-{pid}-00000002.sock").write_text("")  # a leftover socket file
    assert reserve_instance(short_tmp).instance_id == f"{pid}-00000003"


def test_over_long_socket_path_fails_closed(short_tmp: Path) -> None:
    base = f"a-{os.getpid()}-00000000.sock"
    room = SUN_PATH_MAX - len(os.fsencode(short_tmp)) - 2 - len(base)
    exact = short_tmp / ("d" * room)
    exact.mkdir()
    assert len(os.fsencode(reserve_instance(exact).socket_path)) == SUN_PATH_MAX
    longer = short_tmp / ("d" * (room + 1))
    longer.mkdir()
    with pytest.raises(RelayUnavailable, match=f"is {SUN_PATH_MAX + 1} bytes"):
        reserve_instance(longer)
    assert os.listdir(longer) == []


def test_socket_length_counts_encoded_bytes(short_tmp: Path) -> None:
    base = f"a-{os.getpid()}-00000000.sock"
    room = SUN_PATH_MAX - len(os.fsencode(short_tmp)) - 2 - len(base)
    # "é" is one character but two bytes: the character count fits, the byte count does not.
    d = short_tmp / ("é" * (room // 2 + 1))
    d.mkdir()
    assert len(str(d / base)) <= SUN_PATH_MAX
    with pytest.raises(RelayUnavailable, match="bytes; this OS allows"):
        reserve_instance(d)
