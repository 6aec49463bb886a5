"""Whether the sandbox works on this machine: found by running it once, then remembered.

Reading the kernel's settings cannot say it (a container may forbid namespaces that the
kernel allows, an old bubblewrap may lack an option), so ``check_sandbox`` starts ``bwrap``
with the namespaces and mounts a sandboxed command uses and runs ``true`` in it. The answer
names the reason and the fix in words a user can act on.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys

import attrs

__all__ = ["PACKAGE", "SandboxCheck", "check_sandbox", "probe_argv"]

PACKAGE = "bubblewrap"
_PROBE_SECONDS = 10.0
# The parts of every sandboxed command that can fail for want of kernel support.
_NAMESPACES: tuple[str, ...] = ("--unshare-pid", "--unshare-ipc", "--unshare-net")
_NAMESPACES += ("--die-with-parent", "--cap-drop", "ALL")
_MOUNTS = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")


@attrs.frozen
class SandboxCheck:
    """``works``, or why not (``reason``) and what to do (``fix``); ``bwrap`` is the
    program found on PATH ("" when none)."""

    works: bool
    bwrap: str = ""
    reason: str = ""
    fix: str = ""

    def line(self) -> str:
        """``bwrap is not installed (install the bubblewrap package)``, or "works"."""
        if self.works:
            return f"works ({self.bwrap})"
        return f"{self.reason} ({self.fix})" if self.fix else self.reason


def probe_argv(bwrap: str) -> list[str]:
    return [bwrap, *_NAMESPACES, *_MOUNTS, "--", "true"]


def _explain(stderr: str) -> tuple[str, str]:
    """The reason and the fix for bwrap's own complaint (its first line)."""
    said = next((line.strip() for line in stderr.splitlines() if line.strip()), "no message")
    said = said.removeprefix("bwrap: ")  # bwrap starts its own: the reason names it once
    low = said.lower()
    if "namespace" in low or "operation not permitted" in low or "permission denied" in low:
        return (
            f"user namespaces are not available here (bwrap: {said})",
            "allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 "
            "or user.max_user_namespaces, or run outside this container",
        )
    if "unrecognized option" in low or "unknown option" in low:
        return (f"this bubblewrap is too old (bwrap: {said})", f"upgrade the {PACKAGE} package")
    return (f"bwrap cannot start a sandbox here (bwrap: {said})", "an old kernel?")


@functools.cache
def check_sandbox() -> SandboxCheck:
    """Run ``bwrap ... true`` once per process and keep the answer."""
    if not sys.platform.startswith("linux"):
        return SandboxCheck(False, reason="the sandbox needs Linux (bubblewrap)")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxCheck(
            False, reason="bwrap is not installed", fix=f"install the {PACKAGE} package"
        )
    try:
        done = subprocess.run(
            probe_argv(bwrap),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return SandboxCheck(False, bwrap, f"bwrap did not finish in {_PROBE_SECONDS:g} s")
    except OSError as exc:
        return SandboxCheck(False, bwrap, f"bwrap cannot be started: {exc.strerror}")
    if done.returncode != 0:
        reason, fix = _explain(done.stderr.decode("utf-8", "replace"))
        return SandboxCheck(False, bwrap, reason, fix)
    return SandboxCheck(True, bwrap)
