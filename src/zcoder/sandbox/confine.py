"""What a sandboxed command of this run sees (``Confinement``), from the settings and the
environment: the edge where ``plan.py``'s pure mount list meets the real paths.

Hidden (there, but empty): zcoder's home (sessions, settings, trusted MCP servers), the
relay directory, and the credentials of the home directory (``SECRET_DIRS``,
``SECRET_FILES``), of ``$HOME`` and of the password database's home (ssh reads the
latter). Private (an empty tmpfs): ``/tmp``, ``$TMPDIR``, ``$XDG_RUNTIME_DIR`` and ``/run``,
which hold every instance's runtime directory and the relay directory by default.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Iterable, Mapping
from pathlib import Path

from zcoder.config import Config
from zcoder.relay.paths import select_relay_dir
from zcoder.sandbox.plan import Confinement

__all__ = ["SECRET_DIRS", "SECRET_FILES", "confinement_for"]

SECRET_DIRS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".docker",
    ".config/gh",
    ".password-store",
    ".local/share/keyrings",
)
SECRET_FILES = (".netrc", ".git-credentials", ".npmrc", ".pypirc")
_RESOLVER = Path("/etc/resolv.conf")


def _homes(env: Mapping[str, str]) -> list[Path]:
    homes = [env["HOME"]] if env.get("HOME") else []
    with contextlib.suppress(KeyError):  # no passwd entry: $HOME alone
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    return [Path(h) for h in dict.fromkeys(homes) if os.path.isabs(h)]


def _real(paths: Iterable[Path | str]) -> list[Path]:
    """Canonical and existing, in order, once each."""
    out: dict[Path, None] = {}
    for path in paths:
        real = Path(os.path.realpath(path))
        if os.path.lexists(real):
            out[real] = None
    return list(out)


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path.is_relative_to(r) for r in roots)


def confinement_for(config: Config, bwrap: str, env: Mapping[str, str]) -> Confinement:
    workspace = config.workspace
    places = ["/tmp", env.get("TMPDIR") or "/tmp", env.get("XDG_RUNTIME_DIR") or "/run", "/run"]
    private = [p for p in _real(places) if p.is_dir() and p != Path("/")]
    homes = _homes(env)
    wanted = [config.home, select_relay_dir(config.relay, env)]
    wanted += [h / name for h in homes for name in SECRET_DIRS]
    files = _real(h / name for h in homes for name in SECRET_FILES)
    hidden = [
        p
        for p in _real(wanted)
        if p.is_dir()
        # Already gone with a private directory, unless the workspace brought it back.
        and (not _under(p, private) or _under(p, [workspace]))
        # Hiding a directory that holds the workspace would hide the workspace.
        and not _under(workspace, [p])
    ]
    keep: list[Path] = []
    if config.sandbox_network:  # the resolver's file often lives under /run
        resolver = Path(os.path.realpath(_RESOLVER))
        if resolver.is_file() and _under(resolver, private):
            keep.append(resolver)
    return Confinement(
        bwrap=bwrap,
        workspace=workspace,
        network=config.sandbox_network,
        private=tuple(private),
        hidden_dirs=tuple(hidden),
        hidden_files=tuple(f for f in files if f.is_file() and not _under(f, private)),
        keep=tuple(keep),
        records=config.home / "sandbox",
    )
