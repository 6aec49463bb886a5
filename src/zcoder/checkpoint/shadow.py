"""The shadow git repository: the only code that runs git for checkpoints.

``GIT_DIR`` is the shadow repository under ``$ZCODER_HOME/checkpoints/<scope>/git`` and
``GIT_WORK_TREE`` the workspace, so git never looks for, reads or writes the workspace's own
``.git`` (and makes none: git skips every ``.git`` when it adds files). Every other ``GIT_*``
variable of the user's environment is dropped, the system and global config files are not
read (a global ``core.hooksPath``, ``core.fsmonitor`` or signing setting would run the user's
programs), and pathspecs are literal. Each session has its own index (two instances in one
workspace never wait for each other's lock); a new one starts from the last index written,
so only the files changed since are hashed again.

What is recorded follows the workspace's ignore rules: its ``.gitignore`` files, its
repository's ``info/exclude`` and the user's global excludes file (copied into the shadow's
own ``info/exclude`` and ``core.excludesFile``); files larger than the size cap and nested
repositories are left out and reported. The workspace's ``.gitattributes`` is overruled
(the shadow's ``info/attributes``): files are recorded byte for byte, line endings and all.

Every file is "big" to git here (``core.bigFileThreshold = 1``): its content goes into one
pack per snapshot instead of a loose object file each (on a busy disk, hashing 10,000 small
files took 3 s so and 23 s as loose objects). Big files are never delta-compressed and a
text diff would call them binary: the shadow repository needs neither.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from zcoder.checkpoint.plan import Entry
from zcoder.errors import CheckpointError

__all__ = [
    "NESTED_REPOSITORY",
    "WORKSPACE_REPOSITORY",
    "Change",
    "ShadowGit",
    "Snapshot",
    "Unrecorded",
]

NESTED_REPOSITORY = "a git repository of its own"
WORKSPACE_REPOSITORY = "the workspace's own git repository"

_CONFIG = """\
[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = true
\tsymlinks = true
\tautocrlf = false
\tlogallrefupdates = false
\tuntrackedCache = true
\tquotePath = false
\tbigFileThreshold = 1
{excludes}[gc]
\tauto = 0
[index]
\tthreads = true
"""
# Above the workspace's .gitattributes: the bytes are recorded and written back as they
# are (no end-of-line conversion, no filter, no $Id$ expansion), so a CRLF file comes back
# with its CRLFs and a change of line endings alone is a change.
_ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding\n"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "zcoder",
    "GIT_AUTHOR_EMAIL": "zcoder@localhost",
    "GIT_COMMITTER_NAME": "zcoder",
    "GIT_COMMITTER_EMAIL": "zcoder@localhost",
}
_GITDIR_LINE = re.compile(r"^gitdir: (.+)$", re.MULTILINE)


@attrs.frozen
class Unrecorded:
    """A path a snapshot left out, and why (``larger than 2097152 bytes``...)."""

    path: str
    why: str


@attrs.frozen
class Snapshot:
    """A tree of the workspace as it was, and the changed paths it could not hold (with
    every nested repository and the workspace's own ``.git``);
    ``large`` is each left-out large file's size and mtime, to tell whether a turn
    changed it; ``ignored`` the paths the ignore rules leave out (a wholly ignored
    directory as one, ``build/``), to tell what a turn added there."""

    tree: str
    unrecorded: tuple[Unrecorded, ...] = ()
    large: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)
    ignored: frozenset[str] = frozenset()


@attrs.frozen
class Change:
    """One path two trees differ in: ``A`` created, ``D`` deleted, ``M`` changed (its
    content, its mode or its kind)."""

    status: str
    path: str


def _user_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def user_repository(workspace: Path) -> Path | None:
    """The workspace's own git directory (read only: for its ``info/exclude``)."""
    dot = workspace / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(errors="replace")
    except OSError:
        return None
    match = _GITDIR_LINE.search(text)
    if match is None:
        return None
    gitdir = (workspace / match.group(1).strip()).resolve()
    try:  # a linked worktree keeps its exclude file in the common directory
        common = (gitdir / "commondir").read_text().strip()
    except OSError:
        return gitdir
    return (gitdir / common).resolve()


class ShadowGit:
    """Git over the shadow repository ``git_dir`` with ``workspace`` as its work tree."""

    def __init__(self, root: Path, workspace: Path, index_name: str, home: Path) -> None:
        self.root = root
        self.git_dir = root / "git"
        self.workspace = workspace
        self._index = root / index_name
        self._home = home
        self._env = {
            **_user_env(),
            **_IDENTITY,
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(workspace),
            "GIT_INDEX_FILE": str(self._index),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
        self._ready = False

    async def git(
        self, *args: str, stdin: bytes = b"", ok: tuple[int, ...] = (0,), literal: bool = True
    ) -> bytes:
        """Run one git command over the shadow repository; its standard output
        (``CheckpointError`` for an exit status not in ``ok``). ``literal``: its paths are
        pathspecs, taken literally (``check-ignore`` refuses that magic)."""
        env = self._env if literal else {**self._env, "GIT_LITERAL_PATHSPECS": "0"}
        try:
            done = await trio.run_process(
                ["git", *args],
                stdin=stdin,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=env,
                cwd=self.workspace,
            )
        except FileNotFoundError:
            raise CheckpointError("git is not installed (checkpoints need it)") from None
        except OSError as exc:
            raise CheckpointError(f"git could not run: {exc.strerror or exc}") from None
        if done.returncode not in ok:
            why = done.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
            raise CheckpointError(f"git {args[0]} failed: {why[-1]}")
        return done.stdout

    async def ensure(self) -> None:
        """Make the shadow repository once (a private directory), then keep its ignore
        rules up to date with the workspace's."""
        if not self._ready:
            if not (self.git_dir / "HEAD").is_file():
                self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
                await self.git("init", "--quiet", "--template=", str(self.git_dir))
                (self.root / "workspace").write_text(f"{self.workspace}\n")
            excludes = await self._global_excludes()
            line = f"\texcludesFile = {_quoted(excludes)}\n" if excludes else ""
            _write_if_changed(self.git_dir / "config", _CONFIG.format(excludes=line))
            if _write_if_changed(self.git_dir / "info" / "attributes", _ATTRIBUTES):
                self._drop_indexes()  # their entries may hold converted content
            self._seed_index()
            self._ready = True
        _write_if_changed(self.git_dir / "info" / "exclude", self._exclude_text())

    async def _global_excludes(self) -> str:
        """The user's global excludes file, as git would find it without our settings."""
        env = _user_env()
        try:
            done = await trio.run_process(
                ["git", "config", "--global", "--path", "--get", "core.excludesFile"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=env,
                cwd=self._home if self._home.is_dir() else "/",
            )
        except OSError:
            return ""
        named = done.stdout.decode(errors="replace").strip()
        if named:
            return named
        base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "/")) / ".config")
        default = Path(base) / "git" / "ignore"
        return str(default) if default.is_file() else ""

    def _exclude_text(self) -> str:
        lines = ["# written by zcoder: the workspace repository's info/exclude, and more"]
        repo = user_repository(self.workspace)
        if repo is not None:
            with contextlib.suppress(OSError):
                lines.append((repo / "info" / "exclude").read_text(errors="replace"))
        try:  # zcoder's home inside the workspace: never snapshot the snapshots
            inside = self._home.resolve().relative_to(self.workspace)
        except (ValueError, OSError):
            inside = None
        if inside is not None and inside.parts:
            lines.append("/" + _escaped(inside.as_posix()) + "/")
        return "\n".join(lines) + "\n"

    def _drop_indexes(self) -> None:
        """Forget every index (each file is hashed again at the next snapshot): git would
        trust a file's cached id while its size and time stay the same."""
        for index in self.root.glob("index*"):
            with contextlib.suppress(OSError):
                index.unlink()

    def _seed_index(self) -> None:
        """A session's first index is a copy of the last one written (a hard link: git
        replaces an index file by renaming, never by writing into it)."""
        shared = self.root / "index"
        if self._index.exists() or not shared.exists():
            return
        with contextlib.suppress(OSError):
            os.link(shared, self._index)

    def share_index(self) -> None:
        """Make this session's index the one new sessions start from."""
        temp = self.root / f".index.{os.getpid()}.tmp"
        try:
            temp.unlink(missing_ok=True)
            os.link(self._index, temp)
            os.replace(temp, self.root / "index")
        except OSError:
            temp.unlink(missing_ok=True)

    async def snapshot(self, max_bytes: int) -> Snapshot:
        """Record the workspace as it is now: only what changed since this session's last
        snapshot is hashed again. An index that names a snapshot git has since collected
        (another session's turns were pruned) is dropped, and every file hashed again."""
        await self.ensure()
        try:
            return await self._snapshot(max_bytes)
        except CheckpointError:
            if not self._index.exists():
                raise
            self._index.unlink()
            return await self._snapshot(max_bytes)

    async def _snapshot(self, max_bytes: int) -> Snapshot:
        # The work tree against the shadow index only (git status would also list every
        # file as new against a HEAD the shadow repository does not have).
        raw = await self.git("ls-files", "-m", "-d", "-o", "--exclude-standard", "-z")
        add: list[str] = []
        drop: list[str] = []
        left: list[Unrecorded] = []
        large: dict[str, tuple[int, int]] = {}
        for item in dict.fromkeys(raw.split(b"\0")):
            if not item:
                continue
            path = os.fsdecode(item)
            if path.endswith("/"):  # an untracked directory: a repository of its own
                left.append(Unrecorded(path.rstrip("/"), NESTED_REPOSITORY))
                continue
            try:
                st = os.lstat(self.workspace / path)
            except OSError:
                add.append(path)  # gone: --remove records the deletion
                continue
            if st.st_size > max_bytes and not stat.S_ISLNK(st.st_mode):
                drop.append(path)
                large[path] = (st.st_size, st.st_mtime_ns)
                left.append(Unrecorded(path, f"larger than {max_bytes} bytes"))
            else:
                add.append(path)
        # update-index takes paths, not pathspecs: linear in their number, exact.
        if add:
            await self.git("update-index", "--add", "--remove", "-z", "--stdin", stdin=_nul(add))
        if drop:
            await self.git("update-index", "--force-remove", "-z", "--stdin", stdin=_nul(drop))
        if _present(self.workspace / ".git"):  # git never lists it: said here
            left.append(Unrecorded(".git", WORKSPACE_REPOSITORY))
        tree = (await self.git("write-tree")).decode().strip()
        raw = await self.git("ls-files", "-o", "-i", "--exclude-standard", "--directory", "-z")
        ignored = frozenset(os.fsdecode(p) for p in raw.split(b"\0") if p)
        return Snapshot(tree, tuple(left), large, ignored)

    async def diff(self, before: str, after: str) -> list[Change]:
        """What differs between two trees, path by path."""
        raw = await self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", before, after)
        fields = raw.split(b"\0")
        out: list[Change] = []
        for head, path in zip(fields[0::2], fields[1::2], strict=False):
            if not head.startswith(b":"):
                continue
            _, _, old_oid, new_oid, _ = head[1:].decode().split(" ")
            # An all-zero id: the path is absent from that tree.
            kind = "A" if set(old_oid) == {"0"} else "D" if set(new_oid) == {"0"} else "M"
            out.append(Change(kind, os.fsdecode(path)))
        return out

    async def entries(self, tree: str, paths: Iterable[str]) -> dict[str, Entry]:
        """The entries of ``paths`` in ``tree`` (a path it does not hold is left out)."""
        wanted = sorted(set(paths))
        found: dict[str, Entry] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            raw = await self.git("ls-tree", "-r", "-z", "--full-tree", tree, "--", *chunk)
            for item in raw.split(b"\0"):
                if b"\t" not in item:
                    continue
                head, path = item.split(b"\t", 1)
                mode, _, oid = head.decode().split(" ")
                found[os.fsdecode(path)] = Entry(mode, oid)
        return found

    async def checkout(self, tree: str, paths: Sequence[str]) -> None:
        """Write ``paths`` as ``tree`` holds them into the workspace."""
        if paths:
            await self.git("checkout", tree, "--pathspec-from-file=-", "--pathspec-file-nul",
                           stdin=_nul(paths))  # fmt: skip

    async def holds_directory(self, tree: str, path: str) -> bool:
        """Whether ``tree`` has a directory (not a file) at ``path``."""
        return bool(await self.git("ls-tree", "-d", "--name-only", tree, "--", path))

    async def set_refs(self, updates: Sequence[tuple[str, str | None]]) -> None:
        """Point each ref at its object, or delete it (``None``), in one transaction."""
        lines = [f"update {ref} {oid}\n" if oid else f"delete {ref}\n" for ref, oid in updates]
        if lines:
            await self.git("update-ref", "--stdin", stdin="".join(lines).encode())

    async def collect_garbage(self) -> None:
        """Drop the objects no kept checkpoint reaches (a day's grace: a turn of another
        instance may be writing objects no ref holds yet)."""
        await self.git("gc", "--quiet", "--prune=1.day.ago")


def _present(path: Path) -> bool:
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _nul(paths: Iterable[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _escaped(path: str) -> str:
    """A path as a literal gitignore pattern."""
    return re.sub(r"([\\*?\[\]!# ])", r"\\\1", path)


def _write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless ``path`` holds it already; whether it was written."""
    try:
        if path.read_text() == text:
            return False
    except OSError:
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True
