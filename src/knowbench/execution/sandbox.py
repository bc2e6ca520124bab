"""Isolation for one sample process: bubblewrap, `unshare`, or (loudly) nothing.

`Sandbox.command()` wraps a command line so that it runs with no network, in its own PID
namespace (so killing the sandbox kills every process the sample started), with the
root file system read-only, a private /tmp, the work directory as the only writable
place, and the invoking user's home, the benchmark and the run directory hidden.
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from knowbench.errors import UserError

RUNNER_DIR = Path(__file__).parent / "sandboxed"
"""Stdlib-only modules that run inside the sandbox (the runner and its wire format)."""
SandboxKind = Literal["bwrap", "unshare", "none"]
SANDBOX_CHOICES = ("auto", "bwrap", "unshare", "none")


@dataclass(frozen=True)
class Sandbox:
    """How to isolate a sample. `hidden` paths are masked by empty directories."""

    kind: SandboxKind
    hidden: tuple[str, ...] = field(default=())

    @property
    def drops_privileges(self) -> bool:
        """Whether the runner can switch to an unprivileged uid inside this sandbox."""
        # resolve_sandbox only hands out `unshare` to root when an unprivileged uid can run
        # the interpreter (bwrap can put it back when it lives in root's 0700 home).
        return os.geteuid() == 0 and self.kind in ("bwrap", "unshare")

    def inner_workdir(self, workdir: Path) -> str:
        """Where the work directory appears inside the sandbox."""
        return "/tmp/sample" if self.kind == "bwrap" else str(workdir)

    def command(self, argv: Sequence[str], workdir: Path, python: str | None = None) -> list[str]:
        """`argv` wrapped to run inside this sandbox with `workdir` as its writable cwd."""
        if self.kind == "none":
            return list(argv)
        if self.kind == "unshare":
            flags = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]
            if os.geteuid() != 0:
                flags.insert(0, "--map-root-user")
            return ["unshare", *flags, *argv]
        return [*self._bwrap_prefix(workdir, python or sys.executable), *argv]

    def _bwrap_prefix(self, workdir: Path, python: str) -> list[str]:
        args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # Masked by empty directories: a private /tmp; /run and /var/tmp because a read-only
        # mount does not stop connect() on a Unix socket; the hidden paths. Parents first, so
        # that a hidden path inside a re-exposed one is masked again.
        masks = ["/tmp", *(d for d in ("/run", "/var/tmp") if os.path.isdir(d) and not os.path.islink(d)),
                 *(d for d in set(self.hidden) if os.path.isdir(d))]
        visible = (*_python_paths(python), str(RUNNER_DIR))
        for mask in sorted(set(masks), key=lambda path: (path.count(os.sep), path)):
            args += ["--perms", "01777", "--tmpfs", mask] if mask == "/tmp" else ["--tmpfs", mask]
            # The interpreter may live under a masked directory (pyenv in a home directory, a
            # checkout in /tmp). Re-expose the whole top-level entry holding it: bwrap would
            # create the directories between with mode 0700, which a sample uid cannot traverse.
            exposed = {os.path.join(mask, os.path.relpath(path, mask).split(os.sep)[0])
                       for path in visible if _is_within(path, mask) and path != mask}
            for path in sorted(exposed):
                args += ["--ro-bind", path, path]
        inner = self.inner_workdir(workdir)
        args += ["--bind", str(workdir), inner, "--chdir", inner]
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                 "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        if os.geteuid() != 0:
            args.append("--unshare-user")  # root keeps real uids so the runner can drop to one
        return args


def _is_within(path: str, parent: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(parent)]) == os.path.abspath(parent)


@functools.cache
def _python_paths(python: str) -> tuple[str, ...]:
    """Directories an interpreter needs to start and import: prefixes and sys.path."""
    # Compare unresolved paths: a venv's python is a symlink to its base interpreter, yet
    # its sys.path differs.
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        entries = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path, *site.getsitepackages()]
    else:
        out = subprocess.run(
            [python, "-c", "import sys, site; print('\\n'.join([sys.prefix, sys.base_prefix, "
             "sys.exec_prefix, *sys.path, *site.getsitepackages()]))"],
            capture_output=True, text=True, check=True, timeout=60, env={"PATH": os.defpath},
        ).stdout
        entries = out.splitlines()
    entries.append(os.path.dirname(os.path.realpath(python)))
    return tuple(sorted({os.path.realpath(entry) for entry in entries if entry and os.path.isdir(entry)}))


@functools.cache
def _works(kind: SandboxKind) -> bool:
    probe = Sandbox(kind).command(["true"], Path("/tmp"))
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def _unprivileged_can_run(python: str) -> bool:
    """Whether an unprivileged uid can start `python` and import from its standard library."""
    from knowbench.execution.engine import SANDBOX_UID_BASE

    def drop() -> None:
        os.setgroups([])
        os.setgid(SANDBOX_UID_BASE)
        os.setuid(SANDBOX_UID_BASE)

    try:
        done = subprocess.run([python, "-I", "-c", "import decimal, socket, unittest"], cwd="/",
                              capture_output=True, timeout=60, preexec_fn=drop)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def resolve_sandbox(choice: str = "auto", hidden: Sequence[str | Path] = (),
                    python: str | None = None) -> Sandbox:
    """The sandbox to use: `auto` picks bwrap, then unshare, then refuses.

    `hidden` paths (the benchmark, the run directory) are masked inside the sandbox, and so
    is the user's home directory. `none` must be asked for explicitly; it gives no isolation
    and results say so.
    Raises `UserError` when the requested kind does not work on this machine.
    """
    # The user's home always hides: it holds credentials, and (as root) its mode 0700 would
    # otherwise keep the unprivileged sample from an interpreter installed there.
    hidden_paths = tuple(str(Path(path).resolve()) for path in (*hidden, Path.home()))
    if choice not in SANDBOX_CHOICES:
        raise UserError(f"unknown sandbox '{choice}'; choose one of {', '.join(SANDBOX_CHOICES)}")
    if choice == "none":
        return Sandbox("none", hidden_paths)
    candidates: list[SandboxKind] = ["bwrap", "unshare"] if choice == "auto" else [choice]  # type: ignore[list-item]
    refusal = ""
    for kind in candidates:
        tool = "bwrap" if kind == "bwrap" else "unshare"
        if not (shutil.which(tool) and _works(kind)):
            continue
        if kind == "unshare" and os.geteuid() == 0 and not _unprivileged_can_run(python or sys.executable):
            # Under unshare the file system is the host's: as root, a sample that cannot be
            # moved to an unprivileged uid could write anywhere.
            refusal = (f"; unshare was refused: knowbench runs as root and an unprivileged uid "
                       f"cannot run {python or sys.executable}")
            continue
        return Sandbox(kind, hidden_paths)
    raise UserError(
        f"no working sandbox ({' or '.join(candidates)}) on this machine{refusal}; install bubblewrap "
        "(Debian/Ubuntu: apt-get install bubblewrap), or pass --sandbox none to run samples "
        "without isolation (results will record sandbox=none)"
    )
