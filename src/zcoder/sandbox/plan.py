"""The bubblewrap command line of one sandboxed command. Pure: paths in, argv out.

Mounts are applied in order, later over earlier:

1. the whole filesystem read-only (``--ro-bind / /``), a fresh ``/dev`` and ``/proc``;
2. a fresh empty tmpfs over every *private* directory: ``/tmp``, ``$TMPDIR``,
   ``$XDG_RUNTIME_DIR`` and ``/run``, where this user's sockets live (other instances'
   relay sockets, the session bus, a docker socket): a socket on a read-only mount still
   accepts connections, so they must not be there at all;
3. the workspace writable (``--bind``), over what step 2 hid when it lies there, and each
   directory that leads to a protected path bound onto itself, so that it cannot be
   renamed (``Protected.pinned``);
4. the workspace's instruction and control files read-only (``Protected.readonly``), and
   the ones that do not exist yet masked by an empty read-only file or directory, so that
   they cannot be created either (``Protected.masks``);
5. the *hidden* places emptied: zcoder's home, the relay directory, the credentials in the
   home directory (a directory gets an empty read-only tmpfs, a file ``/dev/null``).

bwrap is started with the environment ``sandbox_environment`` leaves (``ENVIRONMENT``).

No network namespace is shared unless ``network``: then not even the host's loopback is
reachable. ``--unshare-pid`` gives a new pid namespace (with ``--die-with-parent``,
killing bwrap kills every process of the command) and ``--cap-drop ALL`` takes from a
command run by root the capabilities that could undo the mounts. bwrap is started in a
session of its own, without a terminal (``open_group_process``); no ``--new-session``, so
that the command's processes stay in bwrap's process group, which the tool kills and waits
for as it does outside the sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs

__all__ = ["ENVIRONMENT", "Confinement", "Mask", "Protected", "bwrap_argv", "sandbox_environment"]

# The environment a sandboxed command gets: these variables and ``LC_*``, nothing else.
# Tokens and keys live in variables of any name (GITHUB_TOKEN, OPENAI_API_KEY, AWS_*):
# the command's output goes to a model, and in a relayed turn from there to another
# instance, so only what shells and build tools need to work passes (docs/safety.rst).
ENVIRONMENT = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "HOSTNAME", "TZ", "LANG", "LANGUAGE"}
    | {"TERM", "COLORTERM", "NO_COLOR", "COLUMNS", "LINES", "EDITOR", "VISUAL"}
    | {"PAGER", "GIT_PAGER", "GIT_TERMINAL_PROMPT"}
    | {"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"}
    | {"VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "JAVA_HOME"}
    | {"GOPATH", "GOROOT", "CARGO_HOME", "RUSTUP_HOME", "NODE_PATH", "NVM_DIR"}
    | {"GEM_HOME", "GEM_PATH", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "CC", "CXX"}
)
_PREFIXES = ("LC_",)


def sandbox_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` cut to ``ENVIRONMENT`` and ``LC_*``: what a sandboxed command sees."""
    return {k: v for k, v in env.items() if k in ENVIRONMENT or k.startswith(_PREFIXES)}


@attrs.frozen
class Mask:
    """A protected path that does not exist: ``kind`` is what stands in for it."""

    path: Path
    kind: Literal["file", "dir"]


@attrs.frozen
class Protected:
    """The workspace's instruction and control files for one command (``scan``)."""

    readonly: tuple[Path, ...] = ()
    masks: tuple[Mask, ...] = ()
    # Directories bound onto themselves so that they cannot be renamed (outermost first).
    pinned: tuple[Path, ...] = ()
    # Every AGENTS.md by its literal path, with its (device, inode) (``remove_created``).
    instructions: tuple[tuple[Path, tuple[int, int]], ...] = ()


@attrs.frozen
class Confinement:
    """What a sandboxed command sees, decided once per run (``confinement_for``).

    ``private``: directories replaced by an empty writable tmpfs before the workspace is
    bound; ``hidden_dirs``/``hidden_files``: existing places emptied after it; ``keep``:
    files of a private directory bound back read-only (with the network, the resolver
    configuration that ``/etc/resolv.conf`` links to under ``/run``).
    """

    bwrap: str
    workspace: Path
    network: bool = False
    private: tuple[Path, ...] = ()
    hidden_dirs: tuple[Path, ...] = ()
    hidden_files: tuple[Path, ...] = ()
    keep: tuple[Path, ...] = ()
    # Where each workspace's mount points are recorded (``masks.py``; in zcoder's home).
    records: Path | None = None


def _each(option: str, paths: Sequence[Path], twice: bool = True) -> list[str]:
    out: list[str] = []
    for path in paths:
        out += [option, str(path), str(path)] if twice else [option, str(path)]
    return out


def _empty_dir(path: Path) -> list[str]:
    return ["--tmpfs", str(path), "--remount-ro", str(path)]


def bwrap_argv(
    plan: Confinement, protected: Protected, cwd: Path, argv: Sequence[str]
) -> list[str]:
    """The full command line: bwrap, its options, ``--``, then ``argv`` run in ``cwd``."""
    # Only the namespaces that confine: each costs milliseconds (a user namespace, where
    # bwrap needs one to mount without root, it makes by itself).
    out = [plan.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc"]
    if not plan.network:
        out.append("--unshare-net")
    out += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    out += _each("--tmpfs", plan.private, twice=False)
    out += _each("--ro-bind", plan.keep)
    out += ["--bind", str(plan.workspace), str(plan.workspace)]
    out += _each("--bind", protected.pinned)
    out += _each("--ro-bind", protected.readonly)
    for mask in protected.masks:
        out += ["--ro-bind", "/dev/null", str(mask.path)] if mask.kind == "file" else []
        out += _empty_dir(mask.path) if mask.kind == "dir" else []
    for path in plan.hidden_dirs:
        out += _empty_dir(path)
    for path in plan.hidden_files:
        out += ["--ro-bind", "/dev/null", str(path)]
    # The workspace is a mount of its own in there: without this, git would stop looking
    # for the repository at its edge (a workspace inside a repository would be none).
    out += ["--setenv", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "1", "--setenv", "TMPDIR", "/tmp"]
    out += ["--chdir", str(cwd), "--", *argv]
    return out
