"""The fork-server engine: one warm, sandboxed interpreter per worker; one fork per sample.

Each worker runs a long-lived server (the in-sandbox runner in `serve` mode) inside its
own bubblewrap sandbox, in the benchmark's environment, with the benchmark's heavy imports
already done. For each sample the server forks a child that drops to the worker's
unprivileged uid, sets its limits and runs the tests; the server enforces the wall clock,
cleans the sample's files and /tmp, and kills anything the sample left running. A server
that dies, hangs, or found stray processes is replaced by a fresh one before the next
sample. No sample code ever runs in a server, so every child starts from the same state.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from knowbench.errors import UserError
from knowbench.execution.cgroup import SLACK_BYTES, MemoryCgroup, memory_cgroups_available
from knowbench.execution.engine import (
    STDERR_TAIL_BYTES,
    Collected,
    Engine,
    ExecutionRequest,
    SandboxUids,
    build_execution,
    build_split_execution,
    compile_runner,
    default_workers,
    infrastructure_execution,
    runner_command,
    runner_config,
    sample_env,
    scratch_directory,
    share_workdir,
    split_configs,
)
from knowbench.execution.environments import python_version
from knowbench.execution.projects import prepare_project
from knowbench.execution.sandbox import Sandbox
from knowbench.jsonl import load_json
from knowbench.records import Execution

_START_TIMEOUT_S = 120.0
# Names the server's request and reply descriptors (`knowbench_runner.serve` reads it).
SERVER_FDS_ENV = "KNOWBENCH_SERVER_FDS"
_REPLY_GRACE_S = 10.0
_UNSETTLED_EXIT = 75  # as knowbench_runner.UNSETTLED_EXIT
_EXIT_LIMIT_S = 60.0  # (the most a caller waits for the exit code of a server whose replies ended)
_EXIT_WAIT_S = 5.0  # how long a server whose replies ended is given to exit, for its code
_CGROUP_NAMES = itertools.count()  # servers' cgroups, unique in this process


class _ServerGone(Exception):
    """The server died or stopped answering (`hung`: it was still there, silent)."""

    def __init__(self, message: str, hung: bool = False) -> None:
        super().__init__(message)
        self.hung = hung


class _Server:
    """One worker's long-lived sandboxed server process.

    Role `judge` runs tests (in-process samples, and the trusted half of split samples);
    role `candidate` only ever receives candidates' programs, so no test code or expected
    value is ever in the memory its children are forked from.
    """

    def __init__(self, engine: ForkServerEngine, slot: int, role: str = "judge") -> None:
        self.engine, self.slot, self.role = engine, slot, role
        self.process: subprocess.Popen[bytes] | None = None
        self.fd_socket: socket.socket | None = None
        self.requests: BinaryIO | None = None  # to the server
        self.replies: _Replies | None = None  # from it
        # Both servers of a slot see the same directory: split samples share a work dir.
        self.workdir = engine.scratch / f"w{slot}"
        self.restarts = -1
        self.warmed: tuple[str, ...] = ()  # the libraries its last start warmed up (knowbench_warm)
        # The modules of its role it was sent (`warm`), as `lessons` then listed them: while
        # they begin `lessons`, it is sent what follows; otherwise it holds modules no longer
        # wanted, and is started anew (`send`).
        self.taught: tuple[str, ...] = ()
        self.warming = False  # it was sent some with its last sample, and has not said it loaded them
        self.sandbox: Sandbox | None = None  # the view this server was started with
        # The last split sample's shared directory, moved out of every sandbox's view as the
        # sample ends and removed while the next one runs (`ForkServerEngine._execute_split`).
        self.leftover: Path | None = None
        self.starting: Future[None] | None = None  # a start begun by `ForkServerEngine.start`
        # The memory cgroup it runs in (None: none could be made), what that held once the
        # server was ready, and its count of kills for memory as the current sample began.
        self.cgroup: MemoryCgroup | None = None
        self.baseline = 0
        self.oom_kills: int | None = None

    def settle(self) -> None:
        """Wait for a start begun in the background; one that failed is forgotten (the next
        `send` starts the server again and reports its error)."""
        if self.starting is not None:
            try:
                self.starting.result()
            except Exception:  # raised again, where it is handled, when `send` starts it anew
                self.stop()
            finally:
                self.starting = None  # (not before: the start is under way until it is done)

    def start(self) -> None:
        self.stop()
        self.workdir.mkdir(mode=0o755, exist_ok=True)
        sandbox = self.sandbox = self.engine.sandbox
        argv = sandbox.command(runner_command(self.engine.python, "serve"), self.workdir,
                               self.engine.python)
        if self.engine.cgroups:
            # A fresh one for each start: what an earlier server left charged there (page cache
            # a sample read) would otherwise raise the baseline, and the next sample's room.
            if self.cgroup is not None:
                self.cgroup.remove()
            self.cgroup = MemoryCgroup.make(f"{next(_CGROUP_NAMES)}-{self.role}")
        if self.cgroup is not None:
            argv = self.cgroup.command(argv)
        self.fd_socket, theirs = socket.socketpair()
        # Requests and replies go through pipes of their own, never the server's stdin and
        # stdout: bwrap's init (the sandbox's pid 1, which runs as knowbench's uid when it is not
        # root, and which nothing else guards) keeps its stdin and stdout, and a sample could
        # reopen them through /proc/1/fd to read the next request and answer for its sample.
        # It closes every other descriptor it was given.
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        theirs_fds = (theirs.fileno(), requests_read, replies_write)
        env = {**sample_env(sandbox.inner_workdir(self.workdir)),
               SERVER_FDS_ENV: f"{requests_read},{replies_write}"}
        # bwrap --die-with-parent uses PR_SET_PDEATHSIG, which fires when the *thread* that
        # started it ends; spawn from the engine's long-lived thread, never a worker's.
        try:
            self.process = self.engine.spawner.submit(
                subprocess.Popen, argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, cwd=self.workdir, pass_fds=theirs_fds,
                env=env, start_new_session=True,
            ).result()
        except BaseException:
            for fd in (requests_write, replies_read):
                os.close(fd)
            raise
        finally:
            theirs_fd = theirs.fileno()
            theirs.close()
            os.close(requests_read)
            os.close(replies_write)
        self.requests = os.fdopen(requests_write, "wb")
        self.replies = _Replies(replies_read)
        learned = self.lessons()
        setup = {"preload": self.engine.preload, "warm": list(learned),
                 "private_tmp": sandbox.kind == "bwrap",
                 "namespaces": sandbox.namespaces,
                 "role": self.role,
                 "fd_socket": theirs_fd}
        self._send(setup)
        try:
            reply = self._receive(_START_TIMEOUT_S)
            if not reply.get("ready"):
                raise _ServerGone(f"the fork server did not start: {reply}")
        except _ServerGone as error:
            if not learned:
                raise
            # (What the references imported may be what it could not load: once more without.)
            self.engine.unlearn(f"a fork server did not start with what the references imported: {error}")
            self.start()
            return
        self.warmed = tuple(reply.get("warmed", ()))
        self.taught, self.warming = learned, False
        if self.cgroup is not None:
            self.baseline = self.cgroup.usage()
        self.restarts += 1

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None
        for stream in (self.requests, self.replies):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.requests = self.replies = None
        if self.fd_socket is not None:
            self.fd_socket.close()
            self.fd_socket = None

    def close(self) -> None:
        self.settle()
        self.stop()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    def run(self, config: dict[str, Any], wall_s: float) -> dict[str, Any]:
        self.send(config)
        try:
            return self.receive(wall_s)
        except _ServerGone as error:
            # It ended before taking this sample (a process of the last one outlived its
            # clean-up): a fresh server runs it.
            if error.hung or self.process is None or self.exit_code() != _UNSETTLED_EXIT:
                raise
        self.send(config)
        return self.receive(wall_s)

    def prepare(self, config: dict[str, Any]) -> None:
        """`ready`, then its cgroup limited to this sample's budget (`_arm`, which may start it
        anew)."""
        self.ready()
        if self.cgroup is not None:
            self._arm(config["limits"]["memory_mb"] * 1024 * 1024)

    def send(self, config: dict[str, Any], fd: int | None = None, prepared: bool = False) -> None:
        """Hand the server one sample (and, split, its end of the channel); `prepare`d first,
        unless the caller did (`prepared`: split, before the sample's clock started, so that
        nothing here starts the server anew while the other process has the sample)."""
        if not prepared:
            self.prepare(config)
        elif self.process is None:
            raise _ServerGone("the fork server is not running")
        # One reading of the list, after anything above that could change it (a start that
        # unlearned), and while another worker's `unlearn` may change it: a server that holds
        # what the list no longer begins with is sent nothing more, and keeps `taught`, so that
        # it is started anew before its next sample (`ready`).
        lessons = self.lessons()
        current = self.holds_only_listed(lessons)
        learned = lessons[len(self.taught):] if current else ()
        # What the server reads (the limits, the work directory, whether a descriptor follows,
        # the installed module a mined task's target is grafted into: `_indexed`, the modules
        # learned since it was last told: `_warmed`), and the request itself as the sample's
        # process gets it, which the server only passes on (`knowbench_runner._read_frame`).
        self._send({"limits": config["limits"], "workdir": config.get("workdir"), "with_fd": fd is not None,
                    "graft": config.get("graft"), **({"warm": list(learned)} if learned else {})},
                   json.dumps(config).encode())
        if current:
            self.taught, self.warming = lessons, bool(learned)
        if fd is not None:
            assert self.fd_socket is not None
            try:
                socket.send_fds(self.fd_socket, [b"f"], [fd])
            except OSError as error:
                raise _ServerGone(f"the fork server stopped ({error})") from None

    def ready(self) -> None:
        """Make the server ready for its next sample: a start begun in the background has
        ended, what it was sent to load is loaded (`_warmed`), and it is started anew where it
        is gone, sees a stale view (the engine was told to hide more since it started) or
        holds modules the engine no longer lists (`warm`, `unlearn`)."""
        self.settle()
        if self.holds_only_listed():  # (else what it may still be loading is no longer wanted)
            self._warmed()
        if not self.current():
            self.start()

    def holds_only_listed(self, lessons: tuple[str, ...] | None = None) -> bool:
        """Whether what it was sent to load still begins what its role is to load (`lessons`,
        read now where not given)."""
        lessons = self.lessons() if lessons is None else lessons
        return lessons[:len(self.taught)] == self.taught

    def current(self) -> bool:
        """Whether it runs, with the engine's present view, holding only modules still listed."""
        return (self.process is not None and self.process.poll() is None
                and self.sandbox == self.engine.sandbox and self.holds_only_listed())

    def lessons(self) -> tuple[str, ...]:
        """The library modules this server is to load (`ForkServerEngine.warm`): a judge's, all
        that the references imported; a split candidate's, what their programs imported."""
        return self.engine.learned if self.role == "judge" else self.engine.candidate_learned

    def _warmed(self) -> None:
        """Wait for a server sent modules to load with its last sample to say it loaded them
        (after that sample's reply: `knowbench_runner._warmed`), so that the time they take is
        never the next sample's. One that died loading them is started anew without them: the
        engine learns nothing more."""
        if not self.warming or self.process is None:
            return
        self.warming = False
        try:
            self._receive(_START_TIMEOUT_S)
        except _ServerGone as error:
            # (One that ended unsettled, before or after its sample, ends as any other.)
            if error.hung or self.exit_code() != _UNSETTLED_EXIT:
                self.engine.unlearn(f"a {self.role}'s fork server stopped while it loaded what the references imported: {error}")
            self.stop()

    def _arm(self, budget: int) -> None:
        """Limit the server's cgroup to what it held when ready plus this sample's budget, and
        note its count of kills for memory as the sample begins."""
        assert self.cgroup is not None
        try:
            self.cgroup.set_limit(self.baseline + budget + SLACK_BYTES)
        except OSError:  # it holds more than that now (the kernel could not reclaim it): anew
            self.start()
            self.cgroup.set_limit(self.baseline + budget + SLACK_BYTES)
        self.oom_kills = self.cgroup.oom_kills()

    def receive(self, wall_s: float) -> dict[str, Any]:
        return self._receive(wall_s + _REPLY_GRACE_S)

    def killed_for_memory(self) -> bool:
        """Whether the kernel killed a process in this server's cgroup for memory since the
        current sample was sent: the sample's doing, whichever process it was."""
        if self.cgroup is None or self.oom_kills is None:
            return False
        now = self.cgroup.oom_kills()
        return now is None or now > self.oom_kills

    def _send(self, message: dict[str, Any], payload: bytes = b"") -> None:
        """One message to the server: a length, `message` as JSON, then `payload` (its length
        in the message's `payload_bytes`)."""
        assert self.process is not None and self.requests is not None
        head = json.dumps({**message, "payload_bytes": len(payload)}).encode()
        try:
            self.requests.write(len(head).to_bytes(8, "big") + head + payload)
            self.requests.flush()
        except (BrokenPipeError, OSError) as error:
            raise _ServerGone(f"the fork server stopped ({error})") from None

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self.process is not None and self.replies is not None
        stream = self.replies
        try:
            line = stream.line(timeout)
        except TimeoutError:
            raise _ServerGone(f"the fork server did not answer within {timeout:.0f} s", hung=True) from None
        if not line:
            raise self._gone()
        # The server shares its sandbox with the samples it forks: its reply is held to
        # valid Unicode as the runner's records are.
        reply = load_json(line)
        # What the server itself grew by (`knowbench_runner._indexed`) is not a sample's.
        if self.cgroup is not None and type(grew := reply.get("server_grew")) is int and grew > 0:
            self.baseline += grew
        # Then what the sample's processes wrote, as they wrote it (the server keeps no copy).
        for name, size in reply.pop("payload_bytes", None) or ():
            data = stream.read(size)
            if len(data) != size:
                raise self._gone()
            reply[name] = data
        return reply


    def exit_code(self) -> int | None:
        """The exit code of a server whose replies ended, or None where it has not exited
        within `_EXIT_LIMIT_S` (its sandbox's processes are torn down as it exits, which can
        take seconds on a loaded machine; never waited for without a limit)."""
        assert self.process is not None
        try:
            return self.process.wait(_EXIT_LIMIT_S)
        except subprocess.TimeoutExpired:
            return None

    def _gone(self) -> _ServerGone:
        """Why the server's replies ended: its exit, once it has exited (its replies close a
        moment before), as a code or the signal that killed it."""
        assert self.process is not None
        try:
            code = self.process.wait(_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return _ServerGone("the fork server closed its replies and did not exit")
        if code < 0:
            with contextlib.suppress(ValueError):
                return _ServerGone(f"the fork server was killed by {signal.Signals(-code).name}")
        return _ServerGone(f"the fork server exited (code {code})")


class _Replies:
    """What a server writes: lines, each followed by the payloads it names, read through a
    buffer of this object's own. What one read brings beyond a reply (the next line a server
    writes at once, such as its `warmed` line) waits there for the next `line`: a wait on the
    descriptor of a buffered file would not see it, and would time out."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = bytearray()
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)

    def line(self, timeout: float) -> bytes:
        """The next line, or b"" at the end of the stream; TimeoutError when no whole line came
        within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (end := self.pending.find(b"\n")) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not self.poller.poll(left * 1000):
                raise TimeoutError
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return b""
            self.pending += chunk
        return self.take(end + 1)

    def read(self, size: int) -> bytes:
        """The next `size` bytes (fewer at the end of the stream)."""
        while len(self.pending) < size:
            chunk = os.read(self.fd, max(1 << 16, size - len(self.pending)))
            if not chunk:
                break
            self.pending += chunk
        return self.take(size)

    def take(self, size: int) -> bytes:
        data = bytes(self.pending[:size])
        del self.pending[:size]
        return data

    def close(self) -> None:
        if self.fd >= 0:  # (once: the number may be another file's afterwards)
            fd, self.fd = self.fd, -1
            os.close(fd)


class ForkServerEngine(Engine):
    """Fast engine: fork from a warm parent instead of starting an interpreter per sample."""

    name = "forkserver"
    learns = True

    def __init__(self, sandbox: Sandbox, workers: int | None = None, python: str | None = None,
                 preload: list[str] | None = None, scratch: Path | None = None, cgroups: bool = True) -> None:
        if sandbox.kind == "none":
            raise UserError("the fork-server engine needs a sandbox with its own PID namespace "
                            "(bwrap or unshare); use --engine subprocess with --sandbox none")
        self.sandbox = sandbox
        self.workers = workers or default_workers()
        self.python = python or sys.executable
        _check_python(self.python)
        compile_runner(self.python)
        self.preload = list(preload or [])
        # Library modules the run's references imported as they ran (`warm`), in the order
        # they were learned, and those their programs imported in a split candidate's process:
        # each server is sent the ones of its role it has not had (`_Server.lessons`).
        self.learned: tuple[str, ...] = ()
        self.candidate_learned: tuple[str, ...] = ()
        self.unlearned: str | None = None  # why the engine stopped (`unlearn`)
        # A memory cgroup per server where one can be made (`cgroups=False`: the budget alone).
        self.cgroups = cgroups and memory_cgroups_available()
        self.scratch, self._remove_scratch = scratch_directory(self, "knowbench-fork-", scratch)
        self._trash = self.scratch / "trash"  # never inside a sandbox's view
        self._trash.mkdir(mode=0o700)
        self.uids = SandboxUids(sandbox, self.workers)
        self._servers = [_Server(self, slot) for slot in range(self.workers)]
        self._candidates = [_Server(self, slot, "candidate") for slot in range(self.workers)]
        self._free: queue.Queue[_Server] = queue.Queue()
        for server in self._servers:
            self._free.put(server)
        self.spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowbench-spawner")
        self._starter = ThreadPoolExecutor(max_workers=2 * self.workers, thread_name_prefix="knowbench-start")

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **self.sandbox.describe(), "python": self.python,
                "preload": self.preload,
                "memory_budget": "per sample (private memory of all its processes + its tmpfs "
                                 "files, System V segments and socket buffers, polled every 50 ms) "
                                 "and RLIMIT_AS per process",
                "memory_cgroup": ("per server (memory cgroup v1): the server's own memory "
                                  "+ the sample's budget + 16 MB, all kernel memory counted"
                                  if self.cgroups else "none (no writable cgroup v1 memory controller)")}

    def hide(self, paths: Iterable[str | Path]) -> None:
        # Servers notice the new view before their next sample and restart (see _Server.send).
        self.sandbox = self.sandbox.hiding(paths, self.python)

    def warm(self, modules: Sequence[str], candidate_modules: Sequence[str] = ()) -> None:
        # A running server imports what it lacks after its next sample
        # (`knowbench_runner._warmed`), one that starts from now on as it starts; one that
        # holds a module no longer listed is started anew before its next sample (`ready`).
        # A new list starts over, as on a fresh engine: why an earlier list was dropped
        # (`unlearn`) is that list's, and is forgotten with it.
        self.learned = tuple(dict.fromkeys(modules))
        self.candidate_learned = tuple(dict.fromkeys(candidate_modules))
        self.unlearned = None

    def unlearn(self, why: str) -> None:
        """Stop sending learned modules (`warm`): servers that loaded some are started anew
        without them, before their next sample, so that every later sample finds the same."""
        self.learned, self.candidate_learned, self.unlearned = (), (), why

    @property
    def restarts(self) -> int:
        """How many times a server was replaced (died, hung, or left processes behind)."""
        return sum(max(server.restarts, 0) for server in (*self._servers, *self._candidates))

    def start(self, split: bool = False) -> None:
        """Start every worker's server in the background, and with `split` every worker's
        candidates' server too (else those start with their first split sample); a server
        already running or starting is left alone."""
        for server in (*self._servers, *(self._candidates if split else ())):
            if server.starting is None and server.process is None:
                server.starting = self._starter.submit(server.start)

    def close(self) -> None:
        for server in (*self._servers, *self._candidates):
            server.close()
        self._starter.shutdown()
        self.spawner.shutdown()
        self._remove_scratch()
        self.uids.close()

    def execute(self, request: ExecutionRequest) -> Execution:
        server = self._free.get()
        try:
            if request.isolation == "split":
                return self._execute_split(server, self._candidates[server.slot], request)
            if request.project is not None:
                return self._execute_project(server, request)
            return self._execute(server, request)
        finally:
            self._free.put(server)

    def _execute_split(self, judge_server: _Server, candidate_server: _Server,
                       request: ExecutionRequest) -> Execution:
        slot = judge_server.slot
        judge, candidate = split_configs(request, self.uids.judge[slot], self.uids.candidate[slot], self.python)
        # Either server may still be starting, loading what the references imported, or due
        # for a fresh start: not on the sample's clock, which starts as the candidate's server
        # hands the sample over. (One that cannot start is reported as `send` would report it.)
        gone: dict[str, _ServerGone] = {}
        try:
            # Until both are current: a server made ready can unlearn (it died loading what the
            # references imported), which leaves the other holding modules no longer listed.
            # (The engine unlearns once per list, so a second round settles it.)
            for _ in range(3):
                for server, config in ((judge_server, judge), (candidate_server, candidate)):
                    try:
                        server.prepare(config)
                    except _ServerGone as error:
                        gone[server.role] = error
                if gone or (judge_server.current() and candidate_server.current()):
                    break
        except (OSError, ValueError) as error:  # (a line that is not the server's: as below)
            judge_server.stop()
            candidate_server.stop()
            return infrastructure_execution(request, self, str(error))
        host_dir, inner = _engine_dir(self.sandbox, judge_server.workdir, "split-")
        share_workdir(host_dir, judge)
        judge["workdir"] = candidate["workdir"] = inner
        judge_end, candidate_end = socket.socketpair()
        started = time.monotonic()
        replies: dict[str, dict[str, Any]] = {}
        notes: list[str] = []
        try:
            for server, config, end in ((candidate_server, candidate, candidate_end),
                                        (judge_server, judge, judge_end)):
                try:
                    if server.role in gone:
                        raise gone[server.role]
                    server.send(config, end.fileno(), prepared=True)
                except _ServerGone as error:
                    server.stop()
                    notes.append(f"{server.role} fork server replaced: {error}")
            judge_end.close()
            candidate_end.close()
            if judge_server.leftover is not None:
                shutil.rmtree(judge_server.leftover, ignore_errors=True)
                judge_server.leftover = None
            for server in (judge_server, candidate_server):
                if server.process is None:
                    continue
                try:
                    replies[server.role] = server.receive(request.limits.wall_s)
                except _ServerGone as error:
                    server.stop()
                    notes.append(f"{server.role} fork server replaced: {error}")
                    replies[server.role] = {"timed_out": "did not answer" in str(error)}
                replies[server.role]["killed_for_memory"] = server.killed_for_memory()
                if replies[server.role].get("stragglers"):
                    server.stop()
                    notes.append(_outlived(replies[server.role], server.role))
        except (OSError, ValueError) as error:
            judge_server.stop()
            candidate_server.stop()
            return infrastructure_execution(request, self, str(error))
        finally:
            judge_end.close()
            candidate_end.close()
            # Out of the servers' view at once (a rename); removed while the next sample runs.
            try:
                judge_server.leftover = self._trash / host_dir.name
                host_dir.rename(judge_server.leftover)
            except OSError:
                judge_server.leftover = None
                shutil.rmtree(host_dir, ignore_errors=True)
        return build_split_execution(
            request, judge["nonce"], _collected(replies.get("judge", {})),
            _collected(replies.get("candidate", {})), time.monotonic() - started,
            self.sandbox.kind, self.name, note="; ".join(notes))

    def _execute_project(self, server: _Server, request: ExecutionRequest) -> Execution:
        """A project sample: its work directory laid out by the engine, then run as any other."""
        config = runner_config(request, self.uids.judge[server.slot], self.python)
        with project_workdir(self.sandbox, server.workdir, request, config) as failed:
            if failed is not None:
                return infrastructure_execution(request, self, failed)
            return self._execute(server, request, config)

    def _execute(self, server: _Server, request: ExecutionRequest,
                 config: dict[str, Any] | None = None) -> Execution:
        config = config or runner_config(request, self.uids.judge[server.slot], self.python)
        started = time.monotonic()
        try:
            reply = server.run(config, request.limits.wall_s)
        except _ServerGone as error:
            server.stop()  # the next sample gets a fresh server
            note = f"fork server replaced: {error}"
            # A server that hung past the sample's wall clock timed the sample out.
            collected = Collected(timed_out=error.hung, killed_for_memory=server.killed_for_memory())
            return build_execution(request, config["nonce"], collected, time.monotonic() - started,
                                   self.sandbox.kind, self.name, note=note)
        except (OSError, ValueError) as error:
            server.stop()
            return infrastructure_execution(request, self, str(error))
        note = ""
        reply["killed_for_memory"] = server.killed_for_memory()
        if reply.get("stragglers"):
            server.stop()  # tearing the sandbox down kills whatever is left, for certain
            note = _outlived(reply, "sample")
        return build_execution(request, config["nonce"], _collected(reply), reply["duration_s"],
                               self.sandbox.kind, self.name, note=note)


def _outlived(reply: dict[str, Any], what: str) -> str:
    """The note for processes that outlived a sample (or one side of it), naming them."""
    named = [str(text) for text in reply.get("straggler_notes") or []]
    return (f"{reply['stragglers']} process(es) outlived the {what} and were killed"
            + (f" ({'; '.join(named)})" if named else ""))


def _check_python(python: str) -> None:
    """The server needs Python 3.9 (pidfd_open, send_fds); an older environment gets a
    clear error instead of servers that exit as they start."""
    try:
        version = python_version(python)
    except (OSError, subprocess.SubprocessError):
        return  # a server that cannot start says so itself
    if tuple(int(part) for part in version.split(".")[:2]) < (3, 9):
        raise UserError(f"the fork-server engine needs Python 3.9 or later in the benchmark's "
                        f"environment; {python} is Python {version}: use --engine subprocess")


@contextlib.contextmanager
def project_workdir(sandbox: Sandbox, server_dir: Path, request: ExecutionRequest,
                    config: dict[str, Any]) -> Iterator[str | None]:
    """For a project sample: a work directory the engine lays out (the project's copy) under
    the server's directory, named in `config["workdir"]`, removed afterwards. Yields None, or
    why it could not be laid out."""
    assert request.project is not None
    host_dir, inner = _engine_dir(sandbox, server_dir, "project-")
    try:
        try:
            if config["uid"] is not None:
                os.chown(host_dir, config["uid"], config["gid"])
            prepare_project(request.project, host_dir, config["uid"], config["gid"])
        except (OSError, ValueError) as error:
            yield f"could not lay out the project: {error}"
            return
        config["workdir"] = inner
        yield None
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)


def _engine_dir(sandbox: Sandbox, server_dir: Path, prefix: str) -> tuple[Path, str]:
    """A fresh directory the engine makes under a server's work directory (a split sample's
    shared one, a project sample's copy): its path here and the path the server sees."""
    server_dir.mkdir(mode=0o755, exist_ok=True)
    host_dir = Path(tempfile.mkdtemp(prefix=prefix, dir=server_dir))
    return host_dir, f"{sandbox.inner_workdir(server_dir)}/{host_dir.name}"


def _collected(reply: dict[str, Any]) -> Collected:
    """A server's reply as raw output (empty when the server could not answer)."""
    return Collected(stdout=reply.get("stdout", b""), stderr=reply.get("stderr", b""),
                     results=reply.get("results", b""), timed_out=reply.get("timed_out", False),
                     over_budget=reply.get("over_budget", False), exit_code=reply.get("exit_code"),
                     over_processes=reply.get("over_processes", False),
                     left_over_budget=reply.get("left_over_budget", False),
                     killed_for_memory=reply.get("killed_for_memory", False),
                     stderr_tail=reply.get("stderr_tail", b"")[-STDERR_TAIL_BYTES:])
