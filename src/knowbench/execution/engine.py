"""Executing programs against their tests: the engine interface and the subprocess engine.

One request = one program and its tests. The engine starts the in-sandbox runner
(`sandboxed/knowbench_runner.py`) as a fresh process in its own process group and temporary work directory,
sends it the program over stdin, and reads per-test records from a dedicated pipe. Only
records carrying this execution's random nonce count; a test without one did not pass.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import importlib.util
import json
import marshal
import os
import queue
import secrets
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from knowbench.benchmark.schema import (
    Invocation,
    TestItem,
    TestSpec,
    imported_modules,
    select_items,
)
from knowbench.errors import UserError
from knowbench.execution.environments import bytecode_magic
from knowbench.execution.projects import ProjectRun, prepare_project
from knowbench.execution.sandbox import RUNNER_DIR, Sandbox
from knowbench.jsonl import load_json
from knowbench.records import Execution, Limits, Reason, Status, TestOutcome

# The collector is paused while the runner imports itself and the preload (numpy, pandas:
# next to no garbage, yet passes over a growing heap); the runner turns it on again before
# any sample code runs (`knowbench_runner.entry`).
_BOOT = ("import gc, sys; gc.disable(); sys.path.insert(0, sys.argv[1]); import knowbench_runner; "
         "del sys.path[0]; knowbench_runner.entry(sys.argv[2:])")
SANDBOX_UID_BASE = 61000
CANDIDATE_UID_BASE = SANDBOX_UID_BASE + 1000
UID_SLOTS = 256
"""Sandbox uids per role: SANDBOX_UID_BASE + n for judges, CANDIDATE_UID_BASE + n for
candidates, n < UID_SLOTS; each worker leases its own (see `SandboxUids`)."""
_CANDIDATE_GRACE_S = 1.0
STDERR_TAIL_BYTES = 2048
"""How much of the end of a sample's stderr is kept whatever the output cap: the last words
of a process that ends early (a traceback, a fatal error of the interpreter)."""
_LAST_LINES = 12
_BUDGET_POLL_S = 0.05
_PROCESS_LIMIT_EXIT = 76  # as knowbench_runner.PROCESS_LIMIT_EXIT


def _sandboxed_module(name: str) -> Any:
    """One of the stdlib-only modules that run in the sandbox, loaded here too."""
    spec = importlib.util.spec_from_file_location(name, RUNNER_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MEMORY = _sandboxed_module("knowbench_memory")
"""Split mode: the candidate's process runs under its own uid, apart from the judge's."""
_SEVERITY: dict[Status, int] = {"pass": 0, "fail": 1, "error": 2, "memory": 3, "timeout": 4,
                                "infrastructure": 5}
_SAMPLE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    # One thread per numerical library: results must not depend on the host's core count.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MPLBACKEND": "Agg",
    # glibc reserves a 64 MiB malloc arena per thread (up to 8 per core), all of it counted
    # by RLIMIT_AS: a dozen threads would use up the memory limit without touching memory.
    "MALLOC_ARENA_MAX": "2",
    # mimalloc (pyarrow's default pool, polars) reserves 1 GiB of addresses at once where
    # they fit (KiB here: 64 MiB): under a limit a little over that, the sample would be left
    # a few MB for everything else.
    "MIMALLOC_ARENA_RESERVE": "65536",
}


Isolation = Literal["split", "in-process"]
"""How a sample runs. split: the candidate's program runs in its own untrusted process and
the tests in a trusted one; every call into the candidate crosses between them by value.
in-process: program and tests share one process (the verdict is then only as safe as the
runner's integrity checks; see the README's threat model)."""


class ExecutionRequest(BaseModel):
    """A program and the tests to run against it."""

    model_config = ConfigDict(extra="forbid")

    program: str
    tests: list[TestSpec]
    entry_point: str | None = Field(default=None, description="Target whose calls are recorded.")
    limits: Limits = Field(default_factory=Limits)
    preload: list[str] = Field(default_factory=list, description="Modules imported before limits.")
    isolation: Isolation = "in-process"
    graft: str | None = Field(
        default=None, description="The installed module the target was cut from: once the program "
        "has loaded, its target takes the original's place there, so the library's own calls of it "
        "run the program's (see FunctionTask.installed_module).")
    trusted_program: str | None = Field(
        default=None, description="split only: the benchmark's own program (target stubbed) that "
        "the tests import; calls to the entry point are answered by the candidate's process.")
    invocation: Invocation = Field(
        default="framework", description="How each item is called (see FunctionTask.invocation).")
    spy: str | None = Field(default=None, description="Dotted name of a library API whose calls the "
                            "runner counts in each test (in-process only; see docs/novel.md).")
    spy_required: bool = Field(default=False, description="A test that passed without calling `spy` fails.")
    report_imports: bool = Field(
        default=False, description="A reference's run: the execution lists the library modules the "
        "sample imported as it ran (Execution.imported), for the engine to load once (Engine.warm).")
    project: ProjectRun | None = Field(
        default=None, description="A project sample: the tree to copy into the work directory, "
        "the files to write over it, and the project tests to run there (in-process only); "
        "`tests` then holds the test files, `program` is unused.")
    _items: list[TestItem] | None = PrivateAttr(default=None)

    def items(self) -> list[TestItem]:
        """The test items, found once (parsing test code is not free on the hot path)."""
        if self._items is None:
            self._items = [item for spec in self.tests for item in spec.items()]
            if self.project is not None and self.project.tests:
                self._items = select_items(self._items, self.project.tests)
        return self._items


class Engine(ABC):
    """Runs execution requests. Engines are thread-safe; `workers` requests run at once."""

    name: str = "abstract"
    workers: int = 1

    @abstractmethod
    def execute(self, request: ExecutionRequest) -> Execution:
        """Run one request. Never raises for anything the sample does."""

    def describe(self) -> dict[str, object]:
        return {"engine": self.name, "workers": self.workers}

    @abstractmethod
    def hide(self, paths: Iterable[str | Path]) -> None:
        """Keep `paths` out of every sample this engine starts from now on, wherever its
        sandbox would show them (see `Sandbox.hiding`; `unshare` and `none` show the host's
        file system as it is and hide nothing). Not to be called while executions run."""

    # Whether the engine keeps warm processes that `warm` has load modules (else it ignores it),
    # and why it stopped loading them (a server died or hung loading them), or None.
    learns = False
    unlearned: str | None = None

    def warm(self, modules: Sequence[str], candidate_modules: Sequence[str] = ()) -> None:  # noqa: B027 (optional hook: most engines keep no process)
        """Have every warm process hold `modules` beyond its preload from now on, loaded in
        order (library modules a run's references imported as they ran:
        `ExecutionRequest.report_imports`), so that later samples find them loaded instead of
        importing them again; a split candidate's process only `candidate_modules` (what the
        references' programs imported there: `Execution.candidate_imported`). Each is loaded
        only where the environment's libraries hold it. A process that loaded a module no
        longer listed is replaced before its next sample: `warm([])` leaves the preload alone,
        as on a fresh engine, and a new list forgets why an earlier one was dropped
        (`unlearned`). Engines that start a process per sample ignore it. Not to be
        called while executions run."""

    def start(self, split: bool = False) -> None:  # noqa: B027 (optional hook: most engines start nothing)
        """Begin, without waiting, what can start before the first sample (a fork server's
        warm processes; with `split`, what split samples need as well), so that it overlaps
        with other work such as the model's first replies. `execute` waits for it where it
        needs it; a start that failed is retried there, and its error reported as it would
        have been without `start`. Not to be called while executions run."""

    def close(self) -> None:  # noqa: B027 (optional hook: most engines hold nothing)
        """Release workers and temporary files."""


class SandboxUids:
    """The uids an engine's workers run samples under, when the sandbox drops privileges: per
    worker slot one for the judge (and in-process samples) and one for split candidates.

    Each uid is leased for the engine's lifetime, machine-wide: it is one that no process
    runs as, and no other engine (in this process, another knowbench, a Ray actor beside this
    one) holds. RLIMIT_NPROC counts a uid's processes and threads across the whole machine,
    so a uid shared with another run would let that run's processes use up this one's
    samples' limit (a sample then cannot start the thread its tests run on). The lease is an
    abstract unix socket bound to the uid's name: it goes when the socket is closed or its
    process ends, however it ends.
    """

    _lock = threading.Lock()

    def __init__(self, sandbox: Sandbox, workers: int) -> None:
        self._leases: list[socket.socket] = []
        self.judge: list[int | None] = [None] * workers
        self.candidate: list[int | None] = [None] * workers
        if not sandbox.drops_privileges:
            return
        with self._lock:
            busy = _uids_in_use()
            for slot in range(workers):
                self.judge[slot] = self._lease(SANDBOX_UID_BASE, busy)
                self.candidate[slot] = self._lease(CANDIDATE_UID_BASE, busy)

    def _lease(self, base: int, busy: set[int]) -> int:
        for uid in range(base, base + UID_SLOTS):
            if uid in busy:
                continue
            lease = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                lease.bind(f"\0knowbench-sandbox-uid-{uid}")
            except OSError:  # another engine holds it
                lease.close()
                continue
            self._leases.append(lease)
            return uid
        self.close()
        raise UserError(f"all {UID_SLOTS} sandbox uids from {base} are in use on this machine (by "
                        "other knowbench runs, or by processes left running under them); use "
                        "fewer --workers, or wait for other runs to finish")

    def close(self) -> None:
        for lease in self._leases:
            lease.close()
        self._leases.clear()


def _uids_in_use() -> set[int]:
    """The real uids of every process on this machine."""
    uids = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                uids.add(entry.stat().st_uid)
    return uids


def default_workers() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


class SubprocessEngine(Engine):
    """A fresh sandboxed interpreter per sample: the simple, dependable baseline engine."""

    name = "subprocess"

    def __init__(self, sandbox: Sandbox, workers: int | None = None, python: str | None = None,
                 scratch: Path | None = None) -> None:
        self.sandbox = sandbox
        self.workers = workers or default_workers()
        self.python = python or sys.executable
        compile_runner(self.python)
        self._scratch, self._remove_scratch = scratch_directory(self, "knowbench-exec-", scratch)
        self.uids = SandboxUids(sandbox, self.workers)
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(self.workers):
            self._slots.put(slot)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **self.sandbox.describe(), "python": self.python,
                "memory_budget": "per sample: RLIMIT_AS over the runner's own baseline, plus the "
                                 "private memory of every process it starts and its sockets' "
                                 "buffers (polled every 50 ms)"}

    def hide(self, paths: Iterable[str | Path]) -> None:
        self.sandbox = self.sandbox.hiding(paths, self.python)  # each sample starts a new sandbox

    @property
    def _processes_at_end(self) -> str:
        """Where the runner counts the sample's processes as it ends (`_end_code`)."""
        return "namespace" if self.sandbox.namespaces else "tree"

    def close(self) -> None:
        self._remove_scratch()
        self.uids.close()

    def execute(self, request: ExecutionRequest) -> Execution:
        slot = self._slots.get()
        workdir = Path(tempfile.mkdtemp(prefix=f"s{slot}-", dir=self._scratch))
        try:
            if request.isolation == "split":
                return self._execute_split(request, slot, workdir)
            return self._execute(request, slot, workdir)
        except (OSError, ValueError) as error:  # ValueError: a project file outside its project
            return infrastructure_execution(request, self, f"could not start the sample: {error}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            self._slots.put(slot)

    def _execute(self, request: ExecutionRequest, slot: int, workdir: Path) -> Execution:
        config = runner_config(request, self.uids.judge[slot], self.python)
        config["processes_at_end"] = self._processes_at_end
        if config["uid"] is not None:
            os.chown(workdir, config["uid"], config["gid"])
        if request.project is not None:
            prepare_project(request.project, workdir, config["uid"], config["gid"])
        read_fd, write_fd = os.pipe()
        config["result_fd"] = write_fd
        diagnostics, theirs = socket.socketpair()
        config["diagnostics_fd"] = theirs.fileno()
        argv = self.sandbox.command(runner_command(self.python, "once"), workdir, self.python)
        env = sample_env(self.sandbox.inner_workdir(workdir))
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(write_fd, theirs.fileno()), cwd=workdir, env=env, start_new_session=True,
            )
        except OSError:
            diagnostics.close()
            raise
        finally:
            os.close(write_fd)
            theirs.close()
        with contextlib.closing(os.fdopen(read_fd, "rb", buffering=0)) as results:
            collected = _collect_runner(process, results, config, request.limits, self.sandbox.wrappers, workdir,
                                        diagnostics)
        collected.exit_code = process.returncode
        return build_execution(request, config["nonce"], collected, time.monotonic() - started,
                               self.sandbox.kind, self.name)


    def _execute_split(self, request: ExecutionRequest, slot: int, workdir: Path) -> Execution:
        judge, candidate = split_configs(request, self.uids.judge[slot], self.uids.candidate[slot], self.python)
        judge["processes_at_end"] = candidate["processes_at_end"] = self._processes_at_end
        share_workdir(workdir, judge)
        judge_end, candidate_end = socket.socketpair()
        read_fd, write_fd = os.pipe()
        judge["result_fd"], judge["channel_fd"] = write_fd, judge_end.fileno()
        candidate["channel_fd"] = candidate_end.fileno()
        # Each sandbox's socket diagnostics (its own network namespace), for its budget.
        judge_diagnostics, judge_theirs = socket.socketpair()
        candidate_diagnostics, candidate_theirs = socket.socketpair()
        judge["diagnostics_fd"], candidate["diagnostics_fd"] = judge_theirs.fileno(), candidate_theirs.fileno()
        env = sample_env(self.sandbox.inner_workdir(workdir))
        started = time.monotonic()
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for fds in ((candidate_end.fileno(), candidate_theirs.fileno()),
                        (write_fd, judge_end.fileno(), judge_theirs.fileno())):
                argv = self.sandbox.command(runner_command(self.python, "once"), workdir, self.python)
                processes.append(subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    pass_fds=fds, cwd=workdir, env=env, start_new_session=True))
        except OSError:
            for process in processes:
                _kill_group(process)
                process.wait()
            judge_diagnostics.close()
            candidate_diagnostics.close()
            raise
        finally:
            os.close(write_fd)
            for end in (judge_end, candidate_end, judge_theirs, candidate_theirs):
                end.close()
        candidate_process, judge_process = processes
        candidate_out: list[Collected] = []
        watcher = threading.Thread(target=lambda: candidate_out.append(
            _collect_runner(candidate_process, None, candidate, request.limits, self.sandbox.wrappers, workdir,
                            candidate_diagnostics)))
        watcher.start()
        with contextlib.closing(os.fdopen(read_fd, "rb", buffering=0)) as results:
            collected = _collect_runner(judge_process, results, judge, request.limits, self.sandbox.wrappers,
                                         workdir, judge_diagnostics)
        # The verdict is in: nothing the candidate does counts now. It ends by itself when
        # the channel closes; the grace lets a limit that already killed it be reported.
        try:
            candidate_process.wait(timeout=_CANDIDATE_GRACE_S)
        except subprocess.TimeoutExpired:
            _kill_group(candidate_process)
        watcher.join()
        collected.exit_code = judge_process.returncode
        return build_split_execution(request, judge["nonce"], collected, candidate_out[0],
                                     time.monotonic() - started, self.sandbox.kind, self.name)


def split_configs(request: ExecutionRequest, judge_uid: int | None, candidate_uid: int | None,
                  python: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The judge's and the candidate's configurations for one split sample.

    The judge gets the benchmark's own program, the tests and the nonce (with `python`, the
    code of both compiled: `runner_config`); the candidate gets its program and nothing else,
    and runs under a uid of its own.
    """
    if request.trusted_program is None:
        raise ValueError("a split request needs trusted_program (the benchmark's own program)")
    judge = {**runner_config(request, judge_uid), **_compiled(request, python, request.trusted_program)}
    judge["program"] = request.trusted_program
    judge["program_packages"] = _program_packages(request.trusted_program, request.graft)
    judge["rebinds"] = list(dict.fromkeys(found for spec in request.tests for found in spec.rebinds()))
    judge["candidate_uid"] = candidate_uid
    candidate = {
        "role": "candidate", "program": request.program, "entry_point": request.entry_point,
        "graft": request.graft,
        "limits": request.limits.model_dump(), "preload": request.preload, "uid": candidate_uid,
        "gid": candidate_uid, "nproc_base": judge["nproc_base"],
        **({"report_imports": True} if request.report_imports else {}),
    }
    return judge, candidate


@functools.lru_cache(maxsize=256)
def _program_packages(program: str, graft: str | None = None) -> list[str]:
    """The top-level packages the benchmark's own program imports, and the one its target is
    grafted into (the program's classes are that package's then), whose classes the judge may
    rebuild from the candidate's replies; parsed once per program, not in every judge."""
    grafted = {graft.partition(".")[0]} if graft else set()
    try:
        return sorted(imported_modules(program) | grafted)
    except ValueError:  # a NUL byte: no import can be read (as the judge would find)
        return sorted(grafted)


def share_workdir(workdir: Path, judge: dict[str, Any]) -> None:
    """Both processes of a split sample work in `workdir`: the judge owns it, the candidate
    may add files (sticky: neither can remove or rename the other's)."""
    if judge["uid"] is not None:
        os.chown(workdir, judge["uid"], judge["gid"])
    os.chmod(workdir, 0o1777)


# In a scratch directory: written once its owner holds the lock on the directory; it names
# the kernel boot the owner runs under (`_boot_id`).
_SCRATCH_OWNED = ".knowbench-owner"


@functools.lru_cache(maxsize=1)
def _boot_id() -> str | None:
    """This kernel boot's id (the same in every container on it, another on every machine)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def scratch_directory(owner: object, prefix: str, parent: Path | None = None) -> tuple[Path, weakref.finalize]:
    """A directory of `owner`'s own under `parent` (else the system's temporary directory),
    readable by the sandbox uids, and the finalizer that removes it: called by the owner's
    `close()`, else when the owner is collected or the interpreter exits (a script that
    forgot `close()`, or ended with an exception, leaves nothing behind).

    A process killed outright (SIGKILL, the OOM killer, `ray.kill`) runs no finalizer. So the
    process that makes a directory holds an exclusive `flock` on it for as long as it lives
    (the kernel drops it however the process ends), and each new one first removes the
    `knowbench-*` directories beside it whose lock it can take (`sweep_scratch`)."""
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    sweep_scratch(base)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    os.chmod(path, 0o755)  # sandbox uids must reach their own work directories
    lock = _lock_scratch(path)
    return path, weakref.finalize(owner, _remove_scratch, path, os.getpid(), lock)


def _lock_scratch(path: Path) -> int | None:
    """Hold the lock on a new scratch directory, then mark it as locked (a directory is
    swept only with the mark: one whose lock has not been taken yet is not a dead one's).
    None where the file system has no `flock`: then the directory is never swept."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    (path / _SCRATCH_OWNED).write_text(f"{os.getpid()} {_boot_id() or '-'}\n")
    return fd


def sweep_scratch(base: Path) -> list[Path]:
    """Remove the scratch directories in `base` whose owner is gone: named `knowbench-*`,
    marked by `scratch_directory` under this kernel boot, and with a lock this process can
    take. Returns them. A live owner's lock is held (by it, or by a process forked from it
    that still runs); a directory without the mark (another tool's, or one being made) is
    left alone, and so is one marked on another machine or boot: on a file system shared
    between machines (NFS) `flock` may lock only on the machine that took it."""
    removed: list[Path] = []
    boot = _boot_id()
    if boot is None:
        return removed
    try:
        names = [name for name in os.listdir(base) if name.startswith("knowbench-")]
    except OSError:
        return removed
    for name in names:
        path = base / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            # (Non-blocking, and a plain file only: a FIFO planted there must not stall us.)
            mark = os.open(_SCRATCH_OWNED, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                           dir_fd=fd)
            try:
                owner = os.read(mark, 256).split() if stat.S_ISREG(os.fstat(mark).st_mode) else []
            finally:
                os.close(mark)
            if owner[1:2] != [boot.encode()]:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Still the directory at that name (not one made there since it was opened).
            if os.path.samestat(os.fstat(fd), os.lstat(path)):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        except OSError:
            pass  # no mark, a live owner, or gone meanwhile
        finally:
            os.close(fd)
    return removed


def _remove_scratch(path: Path, owner_pid: int, lock: int | None = None) -> None:
    # Only in the process that made it: a child forked from it (a user's script that forks
    # and exits normally) runs the same exit handlers, while the engine still uses it.
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)
        if lock is not None:
            with contextlib.suppress(OSError):
                os.close(lock)


def compile_runner(python: str) -> None:
    """Byte-compile the in-sandbox runner's modules for `python`, where their directory is
    writable (a source tree or an editable install; pip compiles a regular install).

    Every sandbox mounts that directory read-only and samples run with PYTHONDONTWRITEBYTECODE,
    so otherwise each start of the runner compiles it from source again: 30 ms of every
    subprocess-engine sample and of every fork server's start, in a fresh clone's `make demo`.
    Best effort: a directory it cannot write, or an interpreter that cannot compile, changes
    nothing but that time.
    """
    if not os.access(RUNNER_DIR, os.W_OK):
        return
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        import compileall

        with contextlib.suppress(OSError):
            compileall.compile_dir(RUNNER_DIR, maxlevels=0, quiet=2)
    else:
        _compile_runner_with(os.path.realpath(python))


@functools.cache
def _compile_runner_with(python: str) -> None:
    """`compile_runner` for another interpreter (a benchmark environment's): once per process."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run([python, "-m", "compileall", "-q", "-l", str(RUNNER_DIR)],
                       capture_output=True, timeout=60)


def runner_command(python: str, mode: str) -> list[str]:
    """The command line that starts the in-sandbox runner in `mode` (once, serve, ...)."""
    return [python, "-I", "-c", _BOOT, str(RUNNER_DIR), mode]


_BYTECODE_MAGIC = importlib.util.MAGIC_NUMBER.hex()
_COMPILING = threading.Lock()
# Whether this process keeps code's column positions, as the runner does (started with `-I`, it
# reads no PYTHONNODEBUGRANGES); `-X no_debug_ranges` drops them, and the runner's
# `_xfailed_by_the_tests` compares them.
_DEBUG_RANGES = any(column is not None for _, _, column, _ in compile("0", "", "eval").co_positions())


def _compiles_as_the_runner() -> bool:
    """Whether a compile here makes the code the runner's own would: column positions kept,
    and the default limit on an int literal's digits (`-X int_max_str_digits`,
    PYTHONINTMAXSTRDIGITS or `sys.set_int_max_str_digits` change it here, never there)."""
    return _DEBUG_RANGES and sys.get_int_max_str_digits() == sys.int_info.default_max_str_digits


@functools.lru_cache(maxsize=128)  # (a 500 KB test file's code is 1.3 MB in base64)
def compiled_code(source: str, filename: str) -> str | None:
    """`source` compiled here as the runner compiles it (as `filename`, inheriting no flags,
    asserts kept), marshalled and in base64, for a runner whose interpreter makes the same
    bytecode to load instead of compiling it in every sample's process: a mined test file of
    57 KB takes 18 ms to compile and 1 ms to load. Once per source (a task's tests and, split,
    its own program are the same for each of its samples), from its second request on
    (`_recurring`).

    None where the runner's own compile could turn out otherwise: the source does not compile,
    or compiling it warns (the runner compiles under the tests' warning filters, which may
    make that warning an error, as pytest's would), or this process was started with settings
    that change what a compile makes (`_compiles_as_the_runner`)."""
    # (`catch_warnings` swaps process-wide state: one compile at a time, and what another
    # thread warned meanwhile is warned again, not taken for this compile's.)
    with _COMPILING, warnings.catch_warnings(record=True) as caught:
        if not _compiles_as_the_runner():
            return None
        warnings.simplefilter("always")
        try:
            code = compile(source, filename, "exec", dont_inherit=True, optimize=0)
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
            code = None
    own = [warning for warning in caught if warning.filename == filename]
    for warning in caught:
        if warning.filename != filename:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno,
                                   source=warning.source)
    if code is None or own:
        return None
    return base64.b64encode(marshal.dumps(code)).decode("ascii")


@functools.lru_cache(maxsize=4096)
def _sightings(source: str, filename: str) -> list[None]:
    """One list per source: how often a request carried it (its length), for `_recurring`."""
    return []


def _recurring(source: str, filename: str) -> str | None:
    """`compiled_code(source, filename)` from a source's second request on: compiled for one
    sample only, the code would cost more to send than to compile where it runs."""
    seen = _sightings(source, filename)
    if not seen:
        seen.append(None)
        return None
    return compiled_code(source, filename)


def _compiled(request: ExecutionRequest, python: str | None, program: str | None = None) -> dict[str, Any]:
    """What the runner under `python` may load instead of compiling: the tests' specs by name,
    and `program` (split, the judge's: the benchmark's own), each from its second request on.
    Empty for another interpreter's bytecode, or where `python` is None."""
    if python is None or bytecode_magic(python) != _BYTECODE_MAGIC:
        return {}
    # (Direct invocation runs each spec appended to the program, compiled as one script.)
    tests = {} if request.invocation == "direct" else \
        {spec.name: _recurring(spec.code, f"test:{spec.name}") for spec in request.tests}
    compiled: dict[str, Any] = {"magic": _BYTECODE_MAGIC, "tests": {name: code for name, code in tests.items() if code}}
    if program is not None and (code := _recurring(program, "solution.py")):
        compiled["program"] = code
    return {"compiled": compiled} if compiled["tests"] or "program" in compiled else {}


def runner_config(request: ExecutionRequest, uid: int | None, python: str | None = None) -> dict[str, Any]:
    """What the in-sandbox runner needs for one sample (without the result fd), to run under
    `uid` (None: the uid knowbench runs as) with the interpreter `python` (when given, the
    tests' code compiled for it, where it makes the engine's bytecode: `compiled_code`)."""
    return {
        "nonce": secrets.token_hex(16),
        "program": request.program,
        "entry_point": request.entry_point,
        "graft": request.graft,
        "tests": {spec.name: spec.code for spec in request.tests},
        "test_imports": list(dict.fromkeys(found for spec in request.tests for found in spec.imports())),
        "items": [item.model_dump() for item in request.items()],
        "invocation": request.invocation,
        "spy": {"api": request.spy, "required": request.spy_required} if request.spy else None,
        "limits": request.limits.model_dump(),
        "preload": request.preload,
        "uid": uid,
        "gid": uid,
        "nproc_base": nproc_base(uid),
        **({"project": request.project.runner_view()} if request.project is not None else {}),
        **({"report_imports": True} if request.report_imports else {}),
        **_compiled(request, python),
    }


def sample_env(home: str) -> dict[str, str]:
    """The sample's whole environment: fixed values, no secrets from the host."""
    return {**_SAMPLE_ENV, "HOME": home, "TMPDIR": home}


@dataclass
class Collected:
    """Raw output of one sample, before interpretation."""

    stdout: bytes = b""
    stderr: bytes = b""
    results: bytes = b""
    timed_out: bool = False
    over_budget: bool = False  # the sample's processes and tmpfs files passed its memory budget
    over_processes: bool = False  # the sample started more processes than limits.processes
    # the files it left (tmpfs, work directory) passed its memory budget, counted as it ended
    left_over_budget: bool = False
    # the kernel killed a process of the sample's memory cgroup for memory (fork server)
    killed_for_memory: bool = False
    exit_code: int | None = None
    stderr_tail: bytes = b""  # the last STDERR_TAIL_BYTES written to stderr, past the cap too


def build_execution(request: ExecutionRequest, nonce: str, collected: Collected, duration: float,
                    sandbox_kind: str, engine_name: str, note: str = "") -> Execution:
    """Turn the raw result records into per-test outcomes; only nonce-bearing records count."""
    outcomes, problem, imported = _outcomes(request.items(), collected, nonce, collected.exit_code)
    if collected.killed_for_memory:
        _void_passes(outcomes, "memory", "memory", _KILLED_FOR_MEMORY)
    elif collected.over_processes:
        _void_passes(outcomes)
    elif collected.left_over_budget:
        _void_passes(outcomes, "memory", "memory", "passed, but the files the sample left passed its "
                     "memory budget (counted every 50 ms and as it ended: they may have been written "
                     "in this test)")
    return Execution(
        status=_summary_status(outcomes), tests=outcomes,
        stdout=collected.stdout.decode(errors="replace"),
        stderr=collected.stderr.decode(errors="replace"),
        duration_s=round(duration, 4), exit_code=collected.exit_code,
        sandbox=sandbox_kind, engine=engine_name, limits=request.limits,
        isolation=request.isolation, note="; ".join(part for part in (problem, note) if part),
        imported=imported if request.report_imports else [],
    )


def build_split_execution(request: ExecutionRequest, nonce: str, judge: Collected,
                          candidate: Collected, duration: float, sandbox_kind: str,
                          engine_name: str, note: str = "") -> Execution:
    """The judge's records are the verdict; the candidate's process adds its output and,
    when a limit ended it, the limit as the reason of the tests it broke."""
    execution = build_execution(request, nonce, judge, duration, sandbox_kind, engine_name, note)
    if request.report_imports:  # (a reference's run: its program ran in the candidate's process)
        execution.candidate_imported = _candidate_imports(candidate)
        execution.imported = list(dict.fromkeys([*execution.imported, *execution.candidate_imported]))
    execution.stdout = (candidate.stdout + judge.stdout).decode(errors="replace")
    execution.stderr = (candidate.stderr + judge.stderr).decode(errors="replace")
    died = _death_reason(candidate.exit_code)
    limit = None
    if candidate.over_budget or candidate.killed_for_memory:
        limit = ("memory", "memory", "its memory budget")
    elif candidate.over_processes:
        limit = ("error", "process-limit", "its process limit")
    elif died == "SIGXCPU":
        limit = ("timeout", "cpu-time", "the CPU-time limit")
    elif died == "SIGXFSZ":
        limit = ("error", "output-limit", "the file-size limit")
    elif candidate.timed_out:  # its wall clock, started just before the judge's, ran out first
        limit = ("timeout", "timeout", "the wall-clock limit")
    last_words = last_stderr_lines(candidate)
    for outcome in execution.tests:
        if outcome.reason == "candidate-died" and candidate.exit_code not in (None, 0):
            outcome.exit_code = candidate.exit_code
            outcome.message += f" (the candidate's process: {died}){last_words}"
    if candidate.killed_for_memory:
        _void_passes(execution.tests, "memory", "memory", _KILLED_FOR_MEMORY)
    elif candidate.over_processes:
        _void_passes(execution.tests)
    elif candidate.left_over_budget:
        _void_passes(execution.tests, "memory", "memory", "passed, but the files the candidate's "
                     "process left passed its memory budget (counted every 50 ms and as it ended)")
    if limit is not None:
        for outcome in execution.tests:
            if outcome.reason == "candidate-died":
                outcome.status, outcome.reason = limit[0], limit[1]  # type: ignore[assignment]
                outcome.message += f" (the candidate's process passed {limit[2]})"
        execution.status = _summary_status(execution.tests)
    return execution


def _candidate_imports(candidate: Collected) -> list[str]:
    """The library modules a split candidate's process reported it imported (a fork server's
    candidate reports them, then `done`, on its result pipe: `knowbench_runner._candidate_end`),
    or none where it did not end that way."""
    records = []
    for line in candidate.results.splitlines()[-2:]:
        try:
            records.append(load_json(line))
        except ValueError:
            return []
    if len(records) != 2 or records[1] != {"done": True, "role": "candidate"}:
        return []
    reported = records[0].get("imported") if isinstance(records[0], dict) else None
    return reported.split() if type(reported) is str else []


def _collect_runner(process: subprocess.Popen[bytes], results: object | None, config: dict[str, Any],
                   limits: Limits, wrappers: int, workdir: Path | None = None,
                   diagnostics: socket.socket | None = None) -> Collected:
    """`_collect` for a one-shot runner, whose exit code `_PROCESS_LIMIT_EXIT` is its own
    count of the sample's processes as it ended, after the last of the engine's counts."""
    collected = _collect(process, results, json.dumps(config).encode(), limits, wrappers, workdir,
                         diagnostics=diagnostics)
    if collected.exit_code == _PROCESS_LIMIT_EXIT and not collected.timed_out:
        collected.over_processes = True
    return collected


def _collect(process: subprocess.Popen[bytes], results: object | None, config: bytes,
             limits: Limits, wrappers: int, workdir: Path | None = None,
             workdir_base: int | None = None, diagnostics: socket.socket | None = None) -> Collected:
    """Feed the config, read all three pipes with caps, and enforce the wall-clock limit, the
    process limit and the memory budget, which counts what the host work directory `workdir`
    grows by from `workdir_base` bytes (None: from what it holds now) and, once the runner
    has sent one on `diagnostics`, what the sockets of the sandbox hold queued (it makes the
    socket that asks the kernel in the sandbox's network namespace, which this process cannot
    enter). `process` is the sandbox tool's, `wrappers` levels above the runner
    (`Sandbox.wrappers`)."""
    collected = Collected()
    # Before the runner has its config, so before any of the sample's code runs.
    budget = _MEMORY.Budget(limits.memory_mb * 1024 * 1024, workdir=str(workdir) if workdir else None,
                            workdir_base=workdir_base)
    try:
        return _collect_within(process, results, config, limits, wrappers, budget, collected, diagnostics)
    finally:
        for held in (diagnostics, budget.sockets):
            if isinstance(held, socket.socket):
                held.close()


def _collect_within(process: subprocess.Popen[bytes], results: object | None, config: bytes,
                    limits: Limits, wrappers: int, budget: Any, collected: Collected,
                    diagnostics: socket.socket | None) -> Collected:
    deadline = time.monotonic() + limits.wall_s
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(config)
        process.stdin.close()
    except BrokenPipeError:
        pass
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ, "stdout")
    selector.register(process.stderr, selectors.EVENT_READ, "stderr")
    if results is not None:
        selector.register(results, selectors.EVENT_READ, "results")  # type: ignore[arg-type]
    if diagnostics is not None:
        selector.register(diagnostics, selectors.EVENT_READ, "diagnostics")
    caps = {"stdout": limits.output_bytes, "stderr": limits.output_bytes, "results": 16 * 1024 * 1024}
    exited_at: float | None = None
    next_poll = time.monotonic() + _BUDGET_POLL_S
    while selector.get_map():
        now = time.monotonic()
        if now >= deadline and process.poll() is None:
            collected.timed_out = True
            _kill_group(process)
        if (now >= next_poll and process.poll() is None
                and not (collected.over_budget or collected.over_processes)):
            next_poll = now + _BUDGET_POLL_S
            tree = _sample_tree(process.pid, wrappers)
            spawned = tree[1:]
            if len(spawned) > limits.processes:
                collected.over_processes = True
                _kill_group(process)
            elif budget.exceeded(spawned, holders=tree):
                collected.over_budget = True
                _kill_group(process)
        if process.poll() is not None:
            # Stragglers holding a pipe open cannot keep us waiting once the runner is gone.
            exited_at = exited_at or now
            if now - exited_at > 0.5:
                break
        for key, _ in selector.select(timeout=0.05):
            if key.data == "diagnostics":
                selector.unregister(key.fileobj)
                budget.sockets = _received_diagnostics(key.fileobj)
                continue
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            name = key.data
            if name == "stderr":
                collected.stderr_tail = (collected.stderr_tail + chunk)[-STDERR_TAIL_BYTES:]
            kept = getattr(collected, name)
            if len(kept) < caps[name]:
                setattr(collected, name, kept + chunk[: caps[name] - len(kept)])
    selector.close()
    if process.poll() is None:
        _kill_group(process)
    collected.exit_code = process.wait()
    for stream in (process.stdout, process.stderr):
        stream.close()
    if not (collected.timed_out or collected.over_budget or collected.over_processes):
        # What it wrote in the work directory since the last poll: a burst that ended before
        # a poll is held against it too.
        collected.left_over_budget = budget.exceeded_at_end()
    return collected


def _received_diagnostics(channel: socket.socket) -> socket.socket | None:
    """The socket-diagnostics socket the runner sent on `channel` (None when it sent none or
    something else), which then asks about the sandbox's network namespace."""
    try:
        _, fds, _, _ = socket.recv_fds(channel, 1, 4)
    except OSError:
        return None
    received = [socket.socket(fileno=fd) for fd in fds]
    for extra in received[1:]:
        extra.close()
    if received and _MEMORY.is_diagnostics_socket(received[0]):
        return received[0]
    if received:
        received[0].close()
    return None


def _sample_tree(root: int, wrappers: int) -> list[int]:
    """The runner first, then every process the sample started: the process tree below `root`
    less the sandbox tool's `wrappers` processes above the runner (`Sandbox.wrappers`).

    Found by position, never by name (a sample may call a process `bwrap`): the tool's
    processes are the first `wrappers` levels of the tree; the runner is the first process
    started on the level below them, where orphans the sample left (adopted by the PID
    namespace's init) are too. `[1:]` is what the sample started: the runner's own memory
    RLIMIT_AS bounds, over its interpreter's baseline."""
    children, started = _MEMORY.process_table()
    level = [root]
    for _ in range(wrappers):
        level = [child for pid in level for child in children.get(pid, ())]
    if not level:
        return []
    runner = min(level, key=lambda pid: (started.get(pid, 0), pid))
    return [*_MEMORY.descendants(runner, children),
            *(pid for other in level if other != runner for pid in _MEMORY.descendants(other, children))]


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _runner_outcome(item_id: object, record: dict[str, Any]) -> TestOutcome | None:
    """The outcome a runner record reports, or None when the record is not one the runner
    writes: a field of the wrong type, a status or reason outside their closed sets, a
    reason on a pass or none on a failure."""
    if "exit_code" in record:  # the engine's to say, never the runner's
        return None
    try:
        outcome = TestOutcome.model_validate({**record, "id": item_id})
    except ValidationError:
        return None
    if (outcome.status == "pass") != (outcome.reason is None):
        return None
    return outcome


def _outcomes(items: list[TestItem], collected: Collected, nonce: str,
              exit_code: int | None) -> tuple[list[TestOutcome], str, list[str]]:
    """(each item's outcome, a note on the run, the modules the runner reported imported)."""
    reported: dict[str, TestOutcome] = {}
    running: str | None = None
    imported: list[str] = []
    done = False
    forged = False
    for line in collected.results.splitlines():
        try:
            # A record carries the sample's own text (its exception's message), which JSON
            # may decode to a lone surrogate: load_json keeps it writable.
            record = load_json(line)
        except ValueError:
            forged = True
            continue
        if not isinstance(record, dict) or record.pop("nonce", None) != nonce:
            forged = True
            continue
        if record.get("done"):
            done = True
        elif "start" in record:
            running = record["start"]
        elif type(record.get("imported")) is str:
            imported = record["imported"].split()
        elif "item" in record:
            outcome = _runner_outcome(record.pop("item"), record)
            if outcome is None or outcome.id in reported:
                forged = True
                continue
            reported[outcome.id] = outcome
            running = None
    died = _death_reason(exit_code)
    last_words = last_stderr_lines(collected)
    outcomes: list[TestOutcome] = []
    for item in items:
        outcome = reported.get(item.id)
        if forged:
            outcome = _failed(item.id, "error", "forged-record",
                              "the result channel carried records knowbench did not write")
        elif outcome is None:
            hit = next((limit for limit in _LIMITS_HIT if getattr(collected, limit.flag)), None)
            if hit is not None:
                outcome = (_failed(item.id, hit.status, hit.reason, hit.during)
                           if item.id == running else
                           _failed(item.id, hit.status, "not-run", hit.earlier))
            elif item.id == running:
                status, reason = _DEATHS.get(died, ("error", "exited-early"))
                outcome = _failed(item.id, status, reason,
                                  f"the sample process ended during this test ({died}){last_words}")
                outcome.exit_code = exit_code
            else:  # (a limit's death, even while the program loaded, gives that limit's status)
                outcome = _failed(item.id, _DEATHS.get(died, ("error",))[0], "not-run",
                                  f"not run: the sample process ended early ({died}){last_words}")
                outcome.exit_code = exit_code
        outcomes.append(outcome)
    note = ""
    if not done and not collected.timed_out:
        note = f"runner did not finish ({died}){last_words}"
    if forged:
        note = "forged or corrupt result records"
    return outcomes, note, imported if done and not forged else []


_KILLED_FOR_MEMORY = ("passed, but the kernel killed a process of the sample for memory: the sample's "
                      "memory cgroup, which counts the kernel's memory too, passed its budget")


def _void_passes(outcomes: list[TestOutcome], status: Status = "error", reason: Reason = "process-limit",
                 message: str = "passed while the sample went over its process limit (counted every "
                                "50 ms, so the extra processes may have started in this test)") -> None:
    """A sample found over a limit as it ended (its process limit, its memory budget in the
    files it left) fails the items it passed too: the counts are polled, so a test can pass
    the limit and pass before the next poll sees it."""
    for index, outcome in enumerate(outcomes):
        if outcome.status == "pass":
            outcomes[index] = _failed(outcome.id, status, reason, message)


def last_stderr_lines(collected: Collected) -> str:
    """The last lines the process wrote to stderr, as a suffix for a message ("" if none)."""
    tail = (collected.stderr_tail or collected.stderr[-STDERR_TAIL_BYTES:]).decode(errors="replace")
    lines = tail.rstrip("\n").splitlines()[-_LAST_LINES:]
    if not any(line.strip() for line in lines):
        return ""
    return "; its last lines on stderr:\n" + "\n".join(lines)


# Deaths that are a limit being hit rather than the sample ending itself: the kernel sends
# SIGXCPU at RLIMIT_CPU and SIGXFSZ at RLIMIT_FSIZE (when the sample restored its default
# action; Python ignores it, and a write past the limit then raises OSError instead).
@dataclass(frozen=True)
class _LimitHit:
    """A limit the engine saw passed (`flag`, an attribute of what it collected): the status
    and reason of the test running then, and what it and the tests after it say."""

    flag: str
    status: Status
    reason: Reason
    during: str
    earlier: str


# Checked in this order: the first limit passed decides every test that did not report.
_LIMITS_HIT = (
    _LimitHit("killed_for_memory", "memory", "memory",
              "the kernel killed a process of the sample for memory during this test (its memory "
              "cgroup, which counts the kernel's memory too, passed its budget)",
              "not run: the sample's memory cgroup passed its budget earlier"),
    _LimitHit("over_budget", "memory", "memory",
              "the sample's processes and files passed its memory budget during this test",
              "not run: the memory budget was passed earlier"),
    _LimitHit("over_processes", "error", "process-limit",
              "the sample started more processes than its limit allows during this test",
              "not run: the process limit was passed earlier"),
    _LimitHit("timed_out", "timeout", "timeout",
              "the wall-clock limit was reached during this test",
              "not run: the wall-clock limit was reached earlier"),
)

_DEATHS: dict[str, tuple[Status, Reason]] = {"SIGXCPU": ("timeout", "cpu-time"),
                                             "SIGXFSZ": ("error", "output-limit")}


def _failed(item_id: str, status: Status, reason: Reason, message: str) -> TestOutcome:
    return TestOutcome(id=item_id, status=status, reason=reason, message=message)


def killed_by(exit_code: int | None) -> str | None:
    """The signal that ended a process with this exit code ("SIGKILL", "signal 70"), or None
    when it exited by itself (or nothing is known)."""
    if exit_code is None:
        return None
    if exit_code < 0:
        try:
            return signal.Signals(-exit_code).name
        except ValueError:
            return f"signal {-exit_code}"
    if exit_code > 128:  # bwrap and unshare report a child's signal as 128 + n
        try:
            return signal.Signals(exit_code - 128).name
        except ValueError:
            pass
    return None


def _death_reason(exit_code: int | None) -> str:
    if exit_code is None:
        return "unknown"
    return killed_by(exit_code) or f"exit code {exit_code}"


def _summary_status(outcomes: list[TestOutcome]) -> Status:
    worst: Status = "pass"
    for outcome in outcomes:
        if _SEVERITY[outcome.status] > _SEVERITY[worst]:
            worst = outcome.status
    return worst


def infrastructure_execution(request: ExecutionRequest, engine: Engine, message: str) -> Execution:
    """Every test `infrastructure`: knowbench could not run the sample at all."""
    outcomes = [_failed(item.id, "infrastructure", "infrastructure", message)
                for item in request.items()]
    return Execution(status="infrastructure", tests=outcomes, sandbox=str(engine.describe()["sandbox"]),
                     engine=engine.name, limits=request.limits, note=message)


def nproc_base(uid: int | None) -> int | None:
    """Where RLIMIT_NPROC counts from for a process that runs as `uid` (None: the uid
    knowbench runs as). A worker's leased uid runs nothing else, so its budget starts at zero;
    an unprivileged user's starts at what that user already runs; root has none."""
    if uid is not None:
        return 0
    return None if os.geteuid() == 0 else _processes_of_user()


def _processes_of_user() -> int:
    """How many processes and threads this uid already runs (RLIMIT_NPROC counts them all)."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count
