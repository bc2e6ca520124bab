"""Isolation for one sample process: bubblewrap, `unshare`, or (loudly) nothing.

`Sandbox.command()` wraps a command line so that it runs with no network and in its own PID
namespace (so killing the sandbox kills every process the sample started).

Under bubblewrap the sample's file system is built from an empty root by an allow-list
(`Sandbox.exposed()`): the system directories (/usr and the top-level /bin, /sbin, /lib*
links or directories), the interpreter's own directories, knowbench's in-sandbox runner, a
minimal /etc, fresh /dev and /proc, a private size-capped tmpfs on /tmp, and the sample's work
directory (the only writable host path) at /tmp/sample. Everything is read-only except /tmp
and the work directory. Nothing else of the host exists inside: not the home directories,
not other checkouts, not the environment cache, not the benchmark or the run directory.
`hidden` paths are additionally masked where they lie inside an exposed path.

`unshare` gives the network, PID, IPC and UTS namespaces but **no mount isolation**: the sample
sees the host's file system with the permissions of its uid, and `hidden` hides nothing.
`none` isolates nothing. Both are recorded in every result.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from knowbench.errors import UserError
from knowbench.paths import knowbench_home
from knowbench.registry import Registry

RUNNER_DIR = Path(__file__).parent / "sandboxed"
"""Stdlib-only modules that run inside the sandbox (the runner and its wire format)."""
SandboxKind = Literal["bwrap", "unshare", "none"]
TMP_BYTES_DEFAULT = 256 * 1024 * 1024
"""Default size cap of the sandbox's private /tmp (and /dev/shm) under bubblewrap."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Shown read-only; where the host has a symlink (merged /usr) the same symlink is made."""
ETC_ALLOWED = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d",  # the dynamic loader
    "localtime", "timezone",  # time zones
    "nsswitch.conf", "hosts", "host.conf", "gai.conf",  # name lookups (no network, but libc asks)
    "ssl", "ca-certificates", "pki",  # certificates and OpenSSL's configuration
    "mime.types",  # mimetypes
    "locale.alias", "locale.conf", "default/locale",  # locale
)
"""The host's /etc entries shown (those that exist); /etc/passwd and /etc/group are synthetic."""


@dataclass(frozen=True)
class Sandbox:
    """How to isolate a sample.

    `hidden` host paths are masked by empty read-only directories wherever they lie inside a
    path the sandbox shows (bwrap only; under `unshare` and `none` nothing is masked).
    `tmp_bytes` caps the private /tmp and /dev/shm tmpfs (bwrap only; see `tmp_cap`).
    """

    kind: SandboxKind
    hidden: tuple[str, ...] = field(default=())
    tmp_bytes: int = TMP_BYTES_DEFAULT

    @property
    def drops_privileges(self) -> bool:
        """Whether the runner can switch to an unprivileged uid inside this sandbox."""
        # resolve_sandbox only hands out `unshare` to root when an unprivileged uid can run
        # the interpreter (bwrap can put it back when it lives in root's 0700 home).
        return os.geteuid() == 0 and self.kind in ("bwrap", "unshare")

    @property
    def namespaces(self) -> bool:
        """Whether a sample runs in PID, IPC and network namespaces of its own: every live
        process in them but its init and the runner (or server), every System V object and
        POSIX message queue and every socket is its samples'."""
        return self.kind in ("bwrap", "unshare")

    @property
    def wrappers(self) -> int:
        """How many processes of the sandbox tool stand above the command it runs: bwrap's own
        and the init of its PID namespace; unshare's (`--fork`: the command is the namespace's
        init); none. Found by position, never by name: a sample may name its processes."""
        return {"bwrap": 2, "unshare": 1}.get(self.kind, 0)

    @property
    def tmp_cap(self) -> int | None:
        """The enforced size of /tmp in bytes; None when nothing caps it (no bwrap, or a
        bwrap too old for `--size`: then /tmp is an uncapped tmpfs, and results say so)."""
        return self.tmp_bytes if self.kind == "bwrap" and _bwrap_has_size() else None

    def describe(self) -> dict[str, object]:
        """What an engine records about its sandbox (goes into run.json)."""
        return {"sandbox": self.kind, "drops_privileges": self.drops_privileges,
                "tmp_bytes": self.tmp_cap, "mount_isolation": self.kind == "bwrap"}

    def hiding(self, paths: Iterable[str | Path], python: str | None = None) -> Sandbox:
        """This sandbox with `paths` (resolved) masked as well.

        With `python`, only the paths the view for that interpreter would show are added, so
        the result equals `self` when there is nothing to mask (engines then keep their warm
        workers). Under `unshare` and `none` masks change nothing: this returns `self`.
        """
        if self.kind in ("unshare", "none") and python is not None:
            return self
        resolved = {os.path.realpath(path) for path in paths
                    if python is None or self.shows(path, python)}
        if resolved <= set(self.hidden):
            return self
        return replace(self, hidden=tuple(sorted(set(self.hidden) | resolved)))

    def exposed(self, python: str | None = None) -> tuple[str, ...]:
        """The host paths whose contents a sample can read, before masks: under bwrap the
        allow-list for `python` (resolved, except /etc entries, which may be symlinks);
        under `unshare` and `none`, the whole host."""
        if self.kind != "bwrap":
            return ("/",)
        return tuple(sorted({source for source, _ in _views(python or sys.executable)}))

    def shows(self, path: str | Path, python: str | None = None) -> bool:
        """Whether a sample could read anything at or below host `path` that is not masked."""
        real = os.path.realpath(path)
        if self.kind != "bwrap":
            return True
        if any(_is_within(real, os.path.realpath(mask)) for mask in self.hidden):
            return False
        return any(_is_within(real, source) for source in self.exposed(python))

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
        args = ["bwrap"]
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
        args += ["--dev", "/dev", "--proc", "/proc"]
        # bwrap's init, pid 1 of the sandbox, runs as knowbench's uid when it is not root, and
        # nothing guards its memory: hidden (and a sample cannot trace it: `knowbench_seccomp`),
        # no sample can plant code there to reach a later sample of the same server.
        args += ["--perms", "0555", "--tmpfs", "/proc/1", "--remount-ro", "/proc/1"]
        size = ["--size", str(self.tmp_bytes)] if _bwrap_has_size() else []
        # /dev/shm is a directory on bwrap's /dev tmpfs: cap it too, or it is an uncapped /tmp.
        args += ["--perms", "01777", *size, "--tmpfs", "/dev/shm"]
        # The IPC namespace's POSIX message queues, which outlive their processes: shown so that
        # the fork server can remove what a sample left there.
        args += ["--mqueue", "/dev/mqueue"]
        args += ["--perms", "01777", *size, "--tmpfs", "/tmp"]
        args += ["--perms", "0755", "--dir", "/etc"]
        etc = _synthetic_etc()
        # The keys other processes of the uid made readable: a way between samples (the
        # keyrings are the uid's, outside every sandbox; candidates cannot call keyctl).
        args += ["--ro-bind", str(etc / "empty"), "/proc/keys"]
        args += ["--ro-bind", str(etc / "passwd"), "/etc/passwd",
                 "--ro-bind", str(etc / "group"), "/etc/group"]

        views = _views(python)
        masks = _masks(self.hidden, views)
        # Mounts go deepest-last, so a mask inside a shown path hides it, and a shown path
        # inside a mask (an interpreter in a masked directory) is shown again.
        existing = {"/", "/dev", "/proc", "/tmp", "/dev/shm", "/dev/mqueue", "/etc", "/etc/passwd", "/etc/group",
                    *(path for path in SYSTEM_DIRS if os.path.islink(path))}
        mounts: list[tuple[str, str | None]] = [(dest, source) for source, dest in views]
        mounts += [(mask, None) for mask in masks]
        for dest, source in sorted(mounts, key=lambda mount: (mount[0].count(os.sep), mount[0])):
            # (a view and a mask at the same place: the mask comes last and wins)
            if source is not None and _already_shown(dest, source, views, masks):
                continue
            # bwrap would create missing parents with mode 0700, which a sample uid cannot
            # traverse (an interpreter under /root/.pyenv); make them 0755 first.
            for parent in _ancestors(dest):
                if parent not in existing and not _inside_view(parent, views, masks):
                    args += ["--perms", "0755", "--dir", parent]
                    existing.add(parent)
            if source is None and os.path.isdir(masks[dest]):
                args += ["--perms", "0755", "--tmpfs", dest]
            elif source is None:  # a hidden file: an empty one (a device would be nodev here)
                args += ["--ro-bind", str(etc / "empty"), dest]
            elif os.path.islink(source) and dest.startswith("/etc/"):
                args += ["--symlink", os.readlink(source), dest]  # localtime names its zone
            else:
                args += ["--ro-bind", source, dest]
            existing.add(dest)
        inner = self.inner_workdir(workdir)
        args += ["--bind", str(workdir), inner, "--chdir", inner]
        # The new root, /etc and the masks are tmpfs that bwrap made writable; nothing may add
        # files there (and a mask must stay empty).
        for mask in masks:
            if os.path.isdir(masks[mask]):
                args += ["--remount-ro", mask]
        args += ["--remount-ro", "/"]
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                 "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        if os.geteuid() != 0:
            args.append("--unshare-user")  # root keeps real uids so the runner can drop to one
        return args


def _is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def _ancestors(path: str) -> list[str]:
    """The proper ancestors of absolute `path`, outermost first, without '/'."""
    parts = path.strip(os.sep).split(os.sep)[:-1]
    return [os.sep + os.sep.join(parts[: index + 1]) for index in range(len(parts))]


@functools.cache
def _views(python: str) -> tuple[tuple[str, str], ...]:
    """Read-only (host source, sandbox destination) binds for `python`: system directories,
    the allowed /etc entries, the interpreter's directories and the runner's."""
    system = [(path, path) for path in SYSTEM_DIRS
              if os.path.isdir(path) and not os.path.islink(path)]
    etc = [(path, path) for name in ETC_ALLOWED if os.path.lexists(path := os.path.join("/etc", name))]
    shown = [*system, *etc]
    for path in (*_python_paths(python), os.path.realpath(RUNNER_DIR)):
        real = os.path.realpath(path)
        if not any(_is_within(real, source) for source, _ in system):
            shown.append((real, real))
        # Python finds its prefix through the unresolved path it was started with: where
        # that path goes through a symlink the sandbox does not recreate, show it there too.
        if path != real and not _resolves_like_host(path):
            shown.append((real, path))
    return tuple(dict.fromkeys(shown))


def _resolves_like_host(path: str) -> bool:
    """Whether `path` resolves inside the sandbox as on the host: its symlinks are the
    top-level system links the sandbox recreates, and it ends up in a system directory."""
    real = os.path.realpath(path)
    linked = [link for link in SYSTEM_DIRS if os.path.islink(link)]
    return (any(_is_within(real, system) for system in SYSTEM_DIRS)
            and (real == path or any(_is_within(path, link) for link in linked)))


def _masks(hidden: Sequence[str], views: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Where, inside the sandbox, each existing hidden host path shows up and must be masked:
    {sandbox path: host path}."""
    masks = {}
    for path in hidden:
        real = os.path.realpath(path)
        if not os.path.exists(real):
            continue
        for source, dest in views:
            if _is_within(real, source):
                masks[os.path.normpath(os.path.join(dest, os.path.relpath(real, source)))] = real
    return dict(sorted(masks.items()))


def _cover(path: str, views: Sequence[tuple[str, str]], masks: Iterable[str],
           proper: bool) -> tuple[str, str | None] | None:
    """The deepest mount at or above `path` (strictly above when `proper`): (dest, source),
    source None for a mask; None when nothing covers it."""
    candidates = [(dest, source) for source, dest in views] + [(mask, None) for mask in masks]
    covering = [(dest, source) for dest, source in candidates
                if _is_within(path, dest) and not (proper and dest == path)]
    # Deepest first; at equal depth a mask wins, as it is mounted after the view.
    return max(covering, key=lambda mount: (mount[0].count(os.sep), mount[1] is None), default=None)


def _already_shown(dest: str, source: str, views: Sequence[tuple[str, str]],
                   masks: Iterable[str]) -> bool:
    """Whether a mount above `dest` already shows `source` there (a bind would be redundant)."""
    cover = _cover(dest, views, masks, proper=True)
    if cover is None or cover[1] is None:
        return False
    above_dest, above_source = cover
    return os.path.normpath(os.path.join(above_source, os.path.relpath(dest, above_dest))) == source


def _inside_view(path: str, views: Sequence[tuple[str, str]], masks: Iterable[str]) -> bool:
    """Whether `path` already exists in the sandbox because a bind at or above it shows it."""
    cover = _cover(path, views, masks, proper=False)
    if cover is None or cover[1] is None:
        return False
    dest, source = cover
    return os.path.isdir(os.path.join(source, os.path.relpath(path, dest)))


@functools.cache
def _python_paths(python: str) -> tuple[str, ...]:
    """Directories `python -I` needs to start and import: prefixes, sys.path and its bin dir.

    Asked of the interpreter itself, with -I as the runner is started: no PYTHONPATH, user
    site or working directory. Editable installs (.pth files) add their source directories.
    """
    out = subprocess.run(
        [python, "-I", "-c", "import sys, site; print('\\n'.join([sys.prefix, sys.base_prefix, "
         "sys.exec_prefix, *sys.path, *site.getsitepackages()]))"],
        capture_output=True, text=True, check=True, timeout=60, env={"PATH": os.defpath},
    ).stdout
    entries = [*out.splitlines(), os.path.dirname(os.path.abspath(python)),
               os.path.dirname(os.path.realpath(python))]
    return tuple(sorted({os.path.normpath(entry) for entry in entries
                         if entry and os.path.isabs(entry) and os.path.isdir(entry)}))


@functools.cache
def _synthetic_etc() -> Path:
    """A directory holding the sandbox's /etc/passwd and /etc/group (root, nobody, the
    sandbox uids of judges and candidates and the invoking uid, instead of the host's list of users), and the empty
    file that masks hidden files.

    Kept under knowbench's home, named by its content, and published by an atomic rename:
    processes share it, and one killed without cleaning up (a Ray actor) leaves no litter.
    Not under /tmp, where another user could plant it first.
    """
    from knowbench.execution.engine import CANDIDATE_UID_BASE, SANDBOX_UID_BASE, UID_SLOTS

    users = {0: "root", 65534: "nobody"}
    # Every uid a worker may lease, for judges and for split candidates.
    users |= {SANDBOX_UID_BASE + slot: f"sandbox{slot}" for slot in range(UID_SLOTS)}
    users |= {CANDIDATE_UID_BASE + slot: f"candidate{slot}" for slot in range(UID_SLOTS)}
    users.setdefault(os.getuid(), "knowbench")
    files = {"passwd": "".join(f"{name}:x:{uid}:{uid}::/tmp/sample:/usr/sbin/nologin\n"
                               for uid, name in users.items()),
             "group": "".join(f"{name}:x:{gid}:\n" for gid, name in users.items()),
             "empty": ""}
    key = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    directory = knowbench_home() / "sandbox-etc" / key
    if directory.is_dir():
        return directory
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=directory.parent))
    except OSError:  # a read-only home: a private directory for this process
        staging = Path(tempfile.mkdtemp(prefix="knowbench-etc-"))
        atexit.register(shutil.rmtree, staging, True)
        directory = staging
    for name, text in files.items():
        (staging / name).write_text(text)
        (staging / name).chmod(0o644)
    staging.chmod(0o755)
    if staging != directory:
        try:
            staging.rename(directory)
        except OSError:  # published by another process meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return directory


@functools.cache
def _bwrap_has_size() -> bool:
    """Whether this bwrap can cap a tmpfs (`--size`, bubblewrap >= 0.8.0)."""
    try:
        done = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout + done.stderr


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

    # subprocess drops the groups, gid and uid in C between fork and exec: safe while other
    # threads run (the engine's start-up threads may), unlike a preexec_fn.
    try:
        done = subprocess.run([python, "-I", "-c", "import decimal, socket, unittest"], cwd="/",
                              capture_output=True, timeout=60, extra_groups=[],
                              group=SANDBOX_UID_BASE, user=SANDBOX_UID_BASE)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


SandboxFactory = Callable[[Sandbox, str], Sandbox]
"""(a `none` sandbox carrying the hidden paths and /tmp size, the interpreter) -> the sandbox."""
SANDBOXES: Registry[SandboxFactory] = Registry("sandbox")


def resolve_sandbox(choice: str = "auto", hidden: Sequence[str | Path] = (),
                    python: str | None = None, tmp_bytes: int = TMP_BYTES_DEFAULT) -> Sandbox:
    """The sandbox called `choice` (see `SANDBOXES`): `auto` picks bwrap, then unshare, then
    refuses.

    `hidden` paths are masked where a bwrap sandbox would otherwise show them; callers need
    not pass the benchmark or run directory (`run_benchmark` and certification hide those
    through `Engine.hide`). `none` must be asked for explicitly; it gives no isolation and
    results say so. Raises `UserError` for an unknown name, or when the requested kind does
    not work on this machine.
    """
    factory = SANDBOXES.get(choice)
    if tmp_bytes <= 0:
        raise UserError(f"the sandbox's /tmp needs a positive size, not {tmp_bytes} bytes")
    return factory(Sandbox("none", tmp_bytes=tmp_bytes).hiding(hidden), python or sys.executable)


@SANDBOXES.register("auto")
def _auto(base: Sandbox, python: str) -> Sandbox:
    return _first_working(base, ["bwrap", "unshare"], python)


@SANDBOXES.register("bwrap")
def _bwrap(base: Sandbox, python: str) -> Sandbox:
    return _first_working(base, ["bwrap"], python)


@SANDBOXES.register("unshare")
def _unshare(base: Sandbox, python: str) -> Sandbox:
    return _first_working(base, ["unshare"], python)


@SANDBOXES.register("none")
def _none(base: Sandbox, python: str) -> Sandbox:
    return base


def _first_working(base: Sandbox, candidates: list[SandboxKind], python: str) -> Sandbox:
    refusal = ""
    for kind in candidates:
        tool = "bwrap" if kind == "bwrap" else "unshare"
        if not (shutil.which(tool) and _works(kind)):
            continue
        if kind == "unshare" and os.geteuid() == 0 and not _unprivileged_can_run(python):
            # Under unshare the file system is the host's: as root, a sample that cannot be
            # moved to an unprivileged uid could write anywhere.
            refusal = (f"; unshare was refused: knowbench runs as root and an unprivileged uid "
                       f"cannot run {python}")
            continue
        return replace(base, kind=kind)
    raise UserError(
        f"no working sandbox ({' or '.join(candidates)}) on this machine{refusal}; install bubblewrap "
        "(Debian/Ubuntu: apt-get install bubblewrap), or pass --sandbox none to run samples "
        "without isolation (results will record sandbox=none)"
    )
