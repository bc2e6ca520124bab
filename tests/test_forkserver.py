"""The fork-server engine: warm servers, isolation between samples, recovery, calibration."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent

import pytest

from helpers import RUNNER_GLOBALS, make_request
from knowbench.benchmark.load import load_benchmark
from knowbench.errors import UserError
from knowbench.execution import engine as engine_module
from knowbench.execution import forkserver as forkserver_module
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import Sandbox
from knowbench.methods import get_method
from knowbench.models.offline import ReferenceBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import TimePolicy, limits_for, run_benchmark
from knowbench.store import RunStore

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "basic"
ADD = "def add(a, b):\n    return a + b\n"
CHECK_ADD = "def test_add():\n    assert add(2, 3) == 5\n"
_START_S = 120.0  # as long as the engine waits for a server to start


@pytest.fixture(scope="module")
def forkserver(best_sandbox: Sandbox) -> Iterator[ForkServerEngine]:
    engine = ForkServerEngine(best_sandbox, workers=1, preload=["json", "unittest"])
    yield engine
    engine.close()


def test_a_passing_and_a_failing_sample_are_told_apart(forkserver: ForkServerEngine) -> None:
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
    failing = forkserver.execute(make_request("def add(a, b):\n    return a - b\n", CHECK_ADD, "add"))
    assert failing.status == "fail" and failing.tests[0].called is True
    assert failing.engine == "forkserver"


# Each leaker changes shared state in a way that would flip the next sample's outcome if it
# survived; the probe asserts the state is pristine.
LEAKS = {
    "a preloaded module": ("import json\njson.dumps = lambda *a, **k: 'leaked'\n",
                           "import json\nassert json.dumps([1]) == '[1]'\n"),
    "sys.modules": ("import sys, types\nsys.modules['leaky'] = types.ModuleType('leaky')\n",
                    "import sys\nassert 'leaky' not in sys.modules\n"),
    "an environment variable": ("import os\nos.environ['KB_LEAK'] = '1'\n",
                                "import os\nassert 'KB_LEAK' not in os.environ\n"),
    "a file in /tmp": ("open('/tmp/kb-leak', 'w').write('x')\n",
                       "import os\nassert not os.path.exists('/tmp/kb-leak')\n"),
    "a file in the work directory": ("open('kb-leak', 'w').write('x')\n",
                                     "import os\nassert not os.listdir('.') or 'kb-leak' not in os.listdir('.')\n"),
    "the working directory": ("import os\nos.chdir('/')\n",
                              "import os\nassert os.getcwd() != '/'\n"),
    "a class attribute of unittest": ("import unittest\nunittest.TestCase.maxDiff = 1\n",
                                      "import unittest\nassert unittest.TestCase.maxDiff == 80 * 8\n"),
    "a file in /dev/shm": ("open('/dev/shm/kb-leak', 'w').write('x')\n",
                           "import os\nassert not os.path.exists('/dev/shm/kb-leak')\n"),
    # (IPC_CREAT | 0o600; a key no one else uses: the sandbox's IPC namespace is its own)
    "a System V segment": ("import ctypes\nassert ctypes.CDLL(None).shmget(0x4b42, 4096, 0o1600) >= 0\n",
                           "import ctypes\nassert ctypes.CDLL(None).shmget(0x4b42, 0, 0) == -1\n"),
    "a POSIX message queue": ("import ctypes, os\nassert ctypes.CDLL(None).mq_open(b'/kb-leak', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0\n",
                              "import ctypes, os\nassert ctypes.CDLL(None).mq_open(b'/kb-leak', os.O_RDWR) == -1\n"),
    "a System V message queue": ("import ctypes\nassert ctypes.CDLL(None).msgget(0x4b42, 0o1600) >= 0\n",
                                 "import ctypes\nassert ctypes.CDLL(None).msgget(0x4b42, 0) == -1\n"),
}


@pytest.mark.parametrize("what", sorted(LEAKS))
def test_state_left_by_one_sample_does_not_reach_the_next(forkserver: ForkServerEngine, what: str,
                                                         best_sandbox: Sandbox) -> None:
    if what in ("a file in /dev/shm", "a POSIX message queue") and best_sandbox.kind != "bwrap":
        pytest.skip("only bwrap shows the sandbox its own /dev/shm and message queues")
    leaker, probe = LEAKS[what]
    left = forkserver.execute(make_request(leaker + ADD, CHECK_ADD, "add"))
    # (it did leave it; patching unittest is caught as tampering)
    assert left.status != "error" or "tampering detected" in left.tests[0].message, left.tests[0].message
    clean = forkserver.execute(make_request(probe + ADD, CHECK_ADD, "add"))
    assert clean.status == "pass", clean.tests[0].message


def test_a_sample_sees_no_init(forkserver: ForkServerEngine, best_sandbox: Sandbox) -> None:
    """The sandbox's init outlives every sample of a server and, when knowbench is not root,
    has their uid: it is hidden (and then no sample may trace it: `test_unprivileged.py`)."""
    if best_sandbox.kind != "bwrap":
        pytest.skip("only bwrap hides the sandbox's init")
    program = "import os\n\n\ndef add(a, b):\n    return [os.listdir('/proc/1'), a + b]\n"
    result = forkserver.execute(make_request(program, "def test_add():\n    assert add(2, 3) == [[], 5]\n", "add"))
    assert result.status == "pass", result.tests[0].message


# 200 MB that no process of the sample holds once it returns (in pieces: a file's size and
# the address space are limited): files on the sandbox's /dev/shm, and System V segments
# written through attachments it then drops.
UNHELD = {
    "/dev/shm": dedent("""\
        for i in range(14):
            open('/dev/shm/kb-hoard-%d' % i, 'wb').write(b'x' * (15 << 20))
        """),
    # Empty files take no block, but each takes kernel memory: counted 4 KiB each, as a walk does.
    "empty files on /tmp": dedent("""\
        import os
        os.makedirs('/tmp/kb-inodes')
        for i in range(40000):
            open('/tmp/kb-inodes/%d' % i, 'wb').close()
        """),
    "System V": dedent("""\
        import ctypes
        libc = ctypes.CDLL(None)
        libc.shmat.restype = ctypes.c_void_p
        for i in range(5):
            segment = libc.shmget(0, 40 << 20, 0o1600)
            address = libc.shmat(segment, None, 0)
            assert segment >= 0 and address not in (None, ctypes.c_void_p(-1).value)
            ctypes.memset(address, 1, 40 << 20)
            libc.shmdt(ctypes.c_void_p(address))
        """),
}


@pytest.mark.parametrize("where", sorted(UNHELD))
def test_memory_no_process_holds_counts_against_the_sample(forkserver: ForkServerEngine, where: str,
                                                          best_sandbox: Sandbox) -> None:
    """Files on the private /dev/shm and System V segments outlive every process of the
    sample: its budget counts them, and they are gone before the next sample."""
    if where in ("/dev/shm", "empty files on /tmp") and best_sandbox.kind != "bwrap":
        pytest.skip("only bwrap gives the sandbox a /dev/shm of its own")
    hoarder = forkserver.execute(make_request(UNHELD[where] + ADD, CHECK_ADD, "add", memory_mb=128))
    assert hoarder.status == "memory", (hoarder.status, hoarder.tests[0].message)
    fits = forkserver.execute(make_request(UNHELD[where] + ADD, CHECK_ADD, "add", memory_mb=512))
    assert fits.status == "pass", fits.tests[0].message


def test_an_infinite_loop_times_out_and_the_next_sample_is_unaffected(forkserver: ForkServerEngine) -> None:
    looping = forkserver.execute(make_request("def add(a, b):\n    while True:\n        pass\n",
                                              CHECK_ADD, "add", wall_s=1.0))
    assert looping.status == "timeout"
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"


def test_a_server_killed_from_outside_is_replaced(forkserver: ForkServerEngine) -> None:
    forkserver.execute(make_request(ADD, CHECK_ADD, "add"))
    server = forkserver._servers[0]
    assert server.process is not None
    before = forkserver.restarts
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
    assert forkserver.restarts == before + 1


def test_a_server_killed_during_a_sample_is_named_in_its_note(forkserver: ForkServerEngine) -> None:
    """The sample's note says how the server ended (its replies close a moment before it
    exits: the engine waits for the exit, instead of reporting "code None")."""
    forkserver.execute(make_request(ADD, CHECK_ADD, "add"))
    server = forkserver._servers[0]
    assert server.process is not None
    sleeping = make_request("import time\n\ndef add(a, b):\n    time.sleep(30)\n", CHECK_ADD, "add", wall_s=60.0)
    killer = threading.Timer(1.0, os.killpg, (server.process.pid, signal.SIGKILL))
    killer.start()
    try:
        execution = forkserver.execute(sleeping)
    finally:
        killer.cancel()
    assert "fork server replaced: the fork server was killed by SIGKILL" in execution.note, execution.note
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"


def test_a_server_that_closed_its_replies_and_does_not_exit_is_never_waited_for_without_a_limit(
        best_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server whose replies ended and which then does not exit: its note says so, and what
    asks for its exit code (whether it ended unsettled, so that the sample is sent again) gets
    none after a limit instead of waiting for good."""
    engine = ForkServerEngine(best_sandbox, workers=1)  # (its server is never started)
    server = engine._servers[0]
    monkeypatch.setattr(forkserver_module, "_EXIT_WAIT_S", 0.2)
    monkeypatch.setattr(forkserver_module, "_EXIT_LIMIT_S", 0.2)
    server.process = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        gone = server._gone()
        assert str(gone) == "the fork server closed its replies and did not exit" and not gone.hung
        assert server.exit_code() is None
        server.process.kill()
        server.process.wait()
        assert server.exit_code() == -signal.SIGKILL and "killed by SIGKILL" in str(server._gone())
    finally:
        engine.close()


def test_processes_that_outlive_a_sample_get_the_server_replaced(forkserver: ForkServerEngine) -> None:
    # (the sample waits until its child has left its group: under load the child could
    # otherwise still be in it when the sample ends, and die with it)
    escaper = ("import os, time\n"
               "ready, told = os.pipe()\n"
               "if os.fork() == 0:\n"
               "    os.setsid()\n"
               "    os.write(told, b'x')\n"
               "    time.sleep(60)\n"
               "    os._exit(0)\n"
               "os.read(ready, 1)\n") + ADD
    before = forkserver.restarts
    execution = forkserver.execute(make_request(escaper, CHECK_ADD, "add"))
    assert "outlived the sample" in execution.note
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
    assert forkserver.restarts == before + 1


def test_the_note_names_the_processes_that_outlived_the_sample(forkserver: ForkServerEngine) -> None:
    """What escaped the sample's process group is named in the note: pid, state, group and
    command line, so that a reader can tell what the sample left behind."""
    escaper = ("import subprocess\n"
               "subprocess.Popen(['sleep', '61'], start_new_session=True)\n") + ADD
    execution = forkserver.execute(make_request(escaper, CHECK_ADD, "add"))
    assert execution.note.startswith("1 process(es) outlived the sample and were killed (pid ")
    assert "group " in execution.note and execution.note.endswith(": sleep 61)"), execution.note
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"


def test_a_process_left_in_the_samples_own_group_is_killed_without_replacing_the_server(
        forkserver: ForkServerEngine) -> None:
    """The reply leaves as soon as the runner's last record arrives; the sample's process
    group is killed then. What ran in that group is the sample's, not a straggler."""
    lingering = ("import subprocess\n"
                 "subprocess.Popen(['sleep', '60'])\n") + ADD
    before = forkserver.restarts
    execution = forkserver.execute(make_request(lingering, CHECK_ADD, "add"))
    assert execution.status == "pass" and execution.note == ""
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
    assert forkserver.restarts == before


def test_output_written_just_before_the_end_comes_back(forkserver: ForkServerEngine) -> None:
    loud = ("import sys\n"
            "def add(a, b):\n"
            "    sys.stdout.write('x' * 100000)\n"
            "    sys.stderr.write('last words')\n"
            "    return a + b\n")
    execution = forkserver.execute(make_request(loud, CHECK_ADD, "add"))
    assert execution.status == "pass"
    assert execution.stdout.count("x") == min(100000, execution.limits.output_bytes)
    assert execution.stderr.endswith("last words")


def test_a_sample_process_holds_no_earlier_samples_request(forkserver: ForkServerEngine) -> None:
    """Each sample's process is forked before its request arrives: from a server that must
    no longer hold the previous request (its tests, its program)."""
    forkserver.execute(make_request(ADD + "SECRET_OF_THE_EARLIER_SAMPLE = 1\n", CHECK_ADD, "add"))
    finder = RUNNER_GLOBALS + dedent('''
        import gc


        def add(a, b):
            scope = _runner_globals()
            guarded = scope["_GUARDED_AUDIT_EVENTS"]
            scope["_GUARDED_AUDIT_EVENTS"] = frozenset()
            try:
                found = [o for o in gc.get_objects() if type(o) is dict
                         and "SECRET_OF_THE_" + "EARLIER_SAMPLE" in str(o.get("program", ""))]
            finally:
                scope["_GUARDED_AUDIT_EVENTS"] = guarded
            return a + b + len(found)
    ''')
    execution = forkserver.execute(make_request(finder, CHECK_ADD, "add"))
    assert execution.status == "pass", execution.tests[0].message


# A sample that reads its whole process memory (every writable mapping, in place, through
# `ctypes`) for a mark, and fails where it finds one anywhere but in its own needle. The needle
# is made in place and searched for with libc's `memmem`, so that the finder leaves no copy of
# its own to find: `bytes(generator)` leaves one on the C stack, and `re.compile` of a bytes
# pattern one in the str it decodes it to, both freed but not overwritten when the scan runs.
MEMORY_FINDER = dedent("""
    import ctypes

    def add(a, b):
        needle = bytearray(16)
        for index, code in enumerate(b"L@SJ^DBSMHDS^P6["):  # the mark, made here
            needle[index] = code ^ 1
        own = ctypes.addressof((ctypes.c_char * len(needle)).from_buffer(needle))
        memmem = ctypes.CDLL(None).memmem
        memmem.restype = ctypes.c_void_p
        memmem.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
        found = []
        with open("/proc/self/maps") as maps:
            regions = [line.split() for line in maps]
        for fields in regions:
            if not fields[1].startswith("rw") or fields[-1] in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
                continue
            at, high = (int(x, 16) for x in fields[0].split("-"))
            while at < high:
                hit = memmem(at, high - at, own, len(needle))
                if not hit:
                    break
                if hit != own:
                    found.append(hit)
                at = hit + 1
        assert not found, "found %d copies of an earlier sample's text" % len(found)
        return a + b
""")
MARK = "MARK_ECRLIER_Q7Z"  # (what MEMORY_FINDER's needle decodes to)


@pytest.mark.parametrize("isolation", ["split", "in-process"])
def test_no_sample_finds_an_earlier_samples_program_or_tests_in_its_memory(
        forkserver: ForkServerEngine, isolation: str) -> None:
    """The server receives every request and every reply, and forks the next sample's process
    from its own memory: what it freed of an earlier sample (its program, its tests, what it
    printed, a failure that quotes a test's line) must not be there to read. Split, the
    candidate's process may read all its memory (`ctypes`): an earlier sample's program there,
    the reference's during calibration, would be an answer to copy."""
    earlier = make_request(ADD + f"print('{MARK}')\n", CHECK_ADD.replace("== 5", f"== 6  # {MARK}"), "add",
                           isolation=isolation)
    execution = forkserver.execute(earlier)
    assert execution.status == "fail" and MARK in execution.tests[0].message, execution.tests[0].message
    for _ in range(2):
        execution = forkserver.execute(make_request(MEMORY_FINDER, CHECK_ADD, "add", isolation=isolation))
        assert execution.status == "pass", execution.tests[0].message


def test_what_the_server_keeps_of_a_samples_output_is_all_of_it_or_its_end_and_nothing_outgrown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`_keep` holds what a sample's processes wrote (whole, or its last bytes for the stderr
    tail) in a bytearray it grows by copying; every bytearray it outgrows is left zeroed, not
    freed holding the sample's bytes."""
    import random

    monkeypatch.syspath_prepend(str(Path(forkserver_module.__file__).parent / "sandboxed"))
    import knowbench_runner

    rng = random.Random(7)
    for _ in range(300):
        whole, end, written, outgrown = [bytearray(), 0], [bytearray(), 0], b"", []
        for _ in range(rng.randint(0, 12)):
            data = rng.randbytes(rng.choice([0, 1, 7, 300, 2047, 2049, 5000, 70000]))
            for store, limit in ((whole, None), (end, 2048)):
                before = store[0]
                knowbench_runner._keep(store, memoryview(data), limit)
                if store[0] is not before:
                    outgrown.append(before)
            written += data
        assert bytes(whole[0][:whole[1]]) == written
        assert bytes(end[0][:end[1]]) == written[-2048:]
        assert not any(any(buffer) for buffer in outgrown)


def test_the_servers_warm_up_leaves_nothing_a_sample_can_see(forkserver: ForkServerEngine) -> None:
    """The server runs a program and tests of the runner's own, passing and failing, before
    its snapshot (so that its children run tests and describe failures from warm state): no
    trace of them reaches a sample."""
    probe = dedent('''
        import linecache
        import sys
        import unittest


        def test_no_warm_up_left():
            assert not [name for name in linecache.cache if "warm-up" in name]
            assert not [cls for cls in unittest.TestCase.__subclasses__()
                        if cls.__module__ == "knowbench_warm_up" or cls.__name__ == "TestCases"]
            assert "knowbench_warm_up" not in sys.modules
            runner = sys.modules["knowbench_runner"]  # what it registered of the warm-up's spec
            assert not [name for name in runner._SPEC_CODE if "warm-up" in name]
            assert sorted(runner._SPEC_FUNCTIONS.values()) == ["the tests' test_no_warm_up_left"]
            assert add(2, 3) == 5
    ''')
    execution = forkserver.execute(make_request(ADD, probe, "add"))
    assert execution.status == "pass", execution.tests[0].message
    failing = forkserver.execute(make_request("def add(a, b):\n    return a - b\n", probe, "add"))
    assert failing.status == "fail" and "assert add(2, 3) == 5" in failing.tests[0].message


def test_the_split_warm_up_leaves_nothing_either_process_can_see(forkserver: ForkServerEngine) -> None:
    """Both servers make a round of split calls of the runner's own before forking (so that
    their children make their first call from warm state): the candidate's program finds no
    object of it, the judge's tests no module, and the calls of the sample cross as ever."""
    candidate = dedent('''
        import gc
        import sys

        gc.unfreeze()  # what the server froze before forking: all of its objects
        # (Loaded before the candidate's process makes its own channel's end.)
        LEFT = [repr(obj)[:80] for obj in gc.get_objects()
                if getattr(obj, "__module__", None) == "knowbench_warm_up"
                or type(obj).__module__ == "knowbench_split"]


        def add(a, b):
            assert "knowbench_warm_up" not in sys.modules, "a warm-up module"
            assert not LEFT, LEFT[:5]
            print("added")
            return a + b
    ''')
    tests = dedent('''
        import linecache
        import sys


        def test_no_warm_up_left(capsys):
            assert not [name for name in linecache.cache if "warm-up" in name]
            assert "knowbench_warm_up" not in sys.modules
            assert add(2, 3) == 5
            assert capsys.readouterr().out == "added\\n"
    ''')
    execution = forkserver.execute(make_request(candidate, tests, "add", isolation="split"))
    assert execution.isolation == "split" and execution.status == "pass", execution.tests[0].message


def _prepared_children(engine: ForkServerEngine) -> list[int]:
    """The host pids of the processes the fork server forked ahead of their samples (after a
    sample has ended, its own process is reaped: only the prepared one is left)."""
    memory = engine_module._MEMORY
    root = engine._servers[0].process.pid  # type: ignore[union-attr]
    stats = {pid: fields for pid in memory.descendants(root)
             if (fields := memory.stat_fields(pid)) is not None}
    servers = {pid for pid, fields in stats.items() if _command(pid).startswith("python")
               and not _command(fields[1].decode()).startswith("python")}
    return [pid for pid, fields in stats.items() if int(fields[1]) in servers and fields[0] != b"Z"]


def _command(pid: int | str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
def test_a_prepared_child_that_was_killed_or_stopped_does_not_cost_the_next_sample(
        forkserver: ForkServerEngine, how: signal.Signals) -> None:
    """The next sample's process is forked while the previous sample runs; when the sample
    runs under knowbench's own uid (no root) it could signal that process. A dead one is
    replaced at the hand-over and a stopped one woken: the next sample is judged as usual."""
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
    give_up = time.monotonic() + 5  # the sample's own process is reaped after the reply
    while len(prepared := _prepared_children(forkserver)) > 1 and time.monotonic() < give_up:
        time.sleep(0.01)
    assert len(prepared) == 1, prepared
    os.kill(prepared[0], how)
    before = forkserver.restarts
    execution = forkserver.execute(make_request(ADD, CHECK_ADD, "add"))
    assert execution.status == "pass" and execution.note == "", execution.tests[0].message
    assert forkserver.restarts == before
    assert forkserver.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"


def test_the_unsettled_exit_code_agrees_with_the_runner() -> None:
    """The runner cannot import knowbench: the engine keeps its own copy of the code."""
    runner_dir = Path(forkserver_module.__file__).parent / "sandboxed"
    sys.path.insert(0, str(runner_dir))
    try:
        import knowbench_runner
    finally:
        sys.path.remove(str(runner_dir))
    assert forkserver_module._UNSETTLED_EXIT == knowbench_runner.UNSETTLED_EXIT


def test_the_server_flushes_every_stream_a_sample_may_write_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before each fork: `sys.stdout` and `sys.stderr`, and the interpreter's own streams,
    which a sample writes through even where a preloaded library replaced `sys.stdout`
    after printing (what it printed would otherwise start every sample's output)."""
    import io

    runner_dir = Path(forkserver_module.__file__).parent / "sandboxed"
    monkeypatch.syspath_prepend(str(runner_dir))
    import knowbench_runner

    class Recording(io.StringIO):
        def flush(self) -> None:
            flushed.append(self)

    flushed: list[object] = []
    streams = [Recording() for _ in range(4)]
    for name, stream in zip(("stdout", "stderr", "__stdout__", "__stderr__"), streams):  # noqa: B905
        monkeypatch.setattr(sys, name, stream)
    knowbench_runner._flush_streams()
    assert sorted(map(id, flushed)) == sorted(map(id, streams))
    flushed.clear()
    monkeypatch.setattr(sys, "stdout", streams[2])  # the same stream twice: flushed once
    knowbench_runner._flush_streams()
    assert len(flushed) == 3


def test_a_child_whose_runner_fails_says_why(forkserver: ForkServerEngine) -> None:
    """The runner failing around the sample (here: its uid already runs as many tasks as
    RLIMIT_NPROC allows, so the thread the tests run on cannot start) ends the child with
    code 70, and the outcome carries the runner's traceback."""
    uid = forkserver.uids.judge[0]
    if uid is None:
        pytest.skip("samples run under a sandbox uid only when knowbench runs as root")
    threads = 16

    def become() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    holders = [subprocess.Popen(["sleep", "600"], cwd="/", preexec_fn=become) for _ in range(threads)]
    try:
        execution = forkserver.execute(make_request(ADD, CHECK_ADD, "add", threads=threads))
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
    outcome = execution.tests[0]
    assert outcome.exit_code == 70
    assert "can't start new thread" in outcome.message, outcome.message


def test_the_fork_server_refuses_to_run_without_a_pid_namespace() -> None:
    with pytest.raises(UserError, match="PID namespace"):
        ForkServerEngine(Sandbox("none"))


def test_calibrated_limit_is_floor_or_factor_times_the_reference() -> None:
    bench = load_benchmark(EXAMPLE)
    task = next(t for t in bench.tasks if t.kind == "function")
    policy = TimePolicy(mode="calibrated", floor_s=2.0, factor=10.0)
    assert limits_for(task, bench, Limits(), policy, reference_s=0.05).wall_s == 2.0
    assert limits_for(task, bench, Limits(), policy, reference_s=0.5).wall_s == 5.0
    assert limits_for(task, bench, Limits(), policy, reference_s=None).wall_s == bench.manifest.time_limit_s
    fixed = TimePolicy(mode="fixed", fixed_s=7.0)
    assert limits_for(task, bench, Limits(), fixed, reference_s=0.5).wall_s == 7.0


def test_a_run_records_calibration_and_uses_it_for_every_sample(forkserver: ForkServerEngine,
                                                                tmp_path: Path) -> None:
    bench = load_benchmark(EXAMPLE)
    policy = TimePolicy(mode="calibrated", floor_s=1.5, factor=20.0)
    summary = run_benchmark(bench, ReferenceBackend(), get_method("none"), forkserver, tmp_path,
                            SamplingParams(), Limits(), time_policy=policy)
    store = RunStore(tmp_path)
    try:
        calibration = store.calibration()
    finally:
        store.close()
    functions = [t for t in bench.tasks if t.kind == "function"]
    assert set(calibration) == {t.task_id for t in functions}
    for result in summary.results:
        if result.execution is not None:
            reference_s = calibration[result.task_id][0]
            assert reference_s is not None
            assert result.execution.limits.wall_s == round(max(1.5, 20.0 * reference_s), 3)


def test_a_warning_registry_the_tests_reset_is_not_tampering(best_sandbox: Sandbox) -> None:
    """A preloaded module that warns on import leaves a (empty) `__warningregistry__` in the
    runner's globals; a warning attributed to a runner frame fills it, and unittest's
    `assertWarns` then replaces every non-empty registry. That is the interpreter's own cache,
    not tampering (Django's tests did exactly this)."""
    program = "def add(a, b):\n    return a + b\n"
    tests = (
        "import unittest\nimport warnings\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_warns(self):\n"
        "        with warnings.catch_warnings():\n"
        "            warnings.simplefilter('default')\n"
        "            for level in range(1, 40):\n"
        "                warnings.warn('anywhere', UserWarning, stacklevel=level)\n"
        "        with self.assertWarns(UserWarning):\n"
        "            warnings.warn('w', UserWarning)\n"
        "        self.assertEqual(add(1, 2), 3)\n")
    engine = ForkServerEngine(best_sandbox, workers=1, preload=["imp"])  # `imp` warns on import
    try:
        for invocation in ("framework", "direct"):
            execution = engine.execute(make_request(program, tests, "add", isolation="in-process",
                                                    invocation=invocation))
            assert [(t.status, t.reason) for t in execution.tests] == [("pass", None)], execution.tests
    finally:
        engine.close()


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_what_a_preloaded_module_prints_never_reaches_a_samples_output(
        best_sandbox: Sandbox, isolation: str) -> None:
    """The server's own output (here `this`, which prints the Zen of Python on import, still
    in the buffer of the server's stdout) is not a sample's, though the sample writes through
    the same stream objects (the interpreter's own)."""
    program = "import this\n\ndef add(a, b):\n    print('adding')\n    return a + b\n"
    engine = ForkServerEngine(best_sandbox, workers=1, preload=["this"])
    try:
        for _ in range(3):  # the first sample's process and the ones forked after a sample
            execution = engine.execute(make_request(program, "def test_a():\n    assert add(1, 2) == 3\n",
                                                    "add", isolation=isolation))
            assert execution.status == "pass", execution.tests
            assert (execution.stdout, execution.stderr) == ("adding\n", "")
    finally:
        engine.close()


def test_the_submodules_a_benchmark_imports_are_preloaded_once_not_by_every_sample(
        best_sandbox: Sandbox) -> None:
    """`import xml.dom.minidom` and `from email.mime import text` in a task's code preload
    those submodules in the server (not only `xml` and `email`), so a sample finds them
    already imported; `from typing import List` (an attribute, not a submodule) is harmless."""
    from knowbench.benchmark.preload import preload_modules
    from knowbench.benchmark.schema import FunctionTask, TestSpec

    context = "import sys\nLOADED = [name for name in WANTED if name in sys.modules]\n"
    prompt = ("import xml.dom.minidom\nfrom email.mime import text\nfrom typing import List\n\n"
              "def loaded() -> List[str]:\n    ...")
    task = FunctionTask(task_id="preloaded", domain="d", instruction="x", entry_point="loaded",
                        context="WANTED = ['xml.dom.minidom', 'email.mime.text']\n" + context,
                        prompt_code=prompt, reference="def loaded():\n    return LOADED",
                        tests=[TestSpec(name="t", code="def test_loaded():\n    assert loaded() == "
                                                       "['xml.dom.minidom', 'email.mime.text']\n")])
    preload = preload_modules([task])
    assert {"xml.dom.minidom", "email.mime.text", "typing.List"} <= set(preload)
    assert "asyncio" not in preload  # the runner imports it only for coroutines
    coroutine = task.model_copy(update={"prompt_code": "async def loaded():\n    ..."})
    assert "asyncio" in preload_modules([coroutine])
    # Every sample imports pytest where a test only mentions it (`guarded_modules`): so does
    # the server, else each sample would import it again.
    assert "pytest" not in preload
    mentions = task.model_copy(update={"tests": [TestSpec(name="t", code='def test_a():\n    """by pytest"""\n')]})
    assert "pytest" in preload_modules([task, mentions])
    # A mined task's installed module: the graft imports it in every sample, and the server
    # indexes its package for their grafts (`knowbench_graft.index`).
    assert "email.utils" not in preload
    assert "email.utils" in preload_modules([task.model_copy(update={"installed_module": "email.utils"})])
    program = task.context + "\n" + prompt.replace("    ...", "    return LOADED")
    for modules, passes in ((preload, True), (["xml", "email", "typing"], False)):
        engine = ForkServerEngine(best_sandbox, workers=1, preload=modules)
        try:
            execution = engine.execute(make_request(program, task.tests[0].code, "loaded"))
        finally:
            engine.close()
        assert (execution.status == "pass") is passes, execution.tests


def _other_pythons() -> dict[tuple[int, int], str]:
    """Interpreters of other versions on this machine (pyenv's, or python3.X on PATH)."""
    import glob
    import shutil

    found: dict[tuple[int, int], str] = {}
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python")))
    candidates += [path for minor in range(8, 15) if (path := shutil.which(f"python3.{minor}"))]
    for path in candidates:
        done = subprocess.run([path, "-c", "import sys; print(*sys.version_info[:2])"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            major, minor = map(int, done.stdout.split())
            if (major, minor) != sys.version_info[:2]:
                found.setdefault((major, minor), path)
    return found


OTHER_PYTHONS = _other_pythons()


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(v for v in OTHER_PYTHONS if v >= (3, 9)) or [None])
def test_the_runner_works_in_an_environment_of_another_python(best_sandbox: Sandbox,
                                                              version: tuple[int, int] | None) -> None:
    """The benchmark's environment may have another Python than knowbench's: the runner (and
    what it imports, `knowbench_wire` included) must run there, checks and all."""
    if version is None:
        pytest.skip("no other Python 3.9+ on this machine")
    tamper = "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n" + ADD
    check = "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(add(1, 2), 3)\n"
    engine = ForkServerEngine(best_sandbox, workers=1, python=OTHER_PYTHONS[version])
    try:
        assert engine.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
        assert engine.execute(make_request(ADD.replace("+", "-"), CHECK_ADD, "add")).status == "fail"
        assert engine.execute(make_request(ADD, CHECK_ADD, "add", isolation="split")).status == "pass"
        tampered = engine.execute(make_request(tamper, check, "add"))
        assert [(t.status, t.reason) for t in tampered.tests] == [("error", "tampering")]
    finally:
        engine.close()


def test_an_environment_python_too_old_for_the_fork_server_is_refused_clearly(best_sandbox: Sandbox) -> None:
    old = [path for version, path in OTHER_PYTHONS.items() if version < (3, 9)]
    if not old:
        pytest.skip("no Python older than 3.9 on this machine")
    with pytest.raises(UserError, match=r"needs Python 3\.9 or later.*--engine subprocess"):
        ForkServerEngine(best_sandbox, workers=1, python=old[0])


def test_a_started_engine_runs_its_first_sample_on_the_server_it_started(best_sandbox: Sandbox) -> None:
    """`start` begins every worker's server without waiting; the first sample runs on it (no
    second start), a running server is left alone, and an engine closed while its servers
    start leaves none running."""
    engine = ForkServerEngine(best_sandbox, workers=2, preload=["json"])
    try:
        engine.start()
        assert all(server.starting is not None for server in engine._servers)
        for server in engine._servers:
            server.settle()
        processes = [server.process for server in engine._servers]
        assert all(process is not None and process.poll() is None for process in processes)
        assert engine.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
        engine.start()
        assert all(server.starting is None for server in engine._servers)
        assert [server.process for server in engine._servers] == processes and engine.restarts == 0
    finally:
        engine.close()
    assert all(process is not None and process.poll() is not None for process in processes)
    closed_early = ForkServerEngine(best_sandbox, workers=1)
    closed_early.start()
    closed_early.close()
    assert closed_early._servers[0].process is None and not closed_early.scratch.exists()


def test_a_start_that_failed_is_made_again_by_the_first_sample(best_sandbox: Sandbox) -> None:
    engine = ForkServerEngine(best_sandbox, workers=1)
    try:
        shutil.rmtree(engine.scratch)  # the server cannot make its work directory
        engine.start()
        starting = engine._servers[0].starting
        assert starting is not None and isinstance(starting.exception(timeout=_START_S), OSError)
        engine.scratch.mkdir(mode=0o755)
        engine._trash.mkdir(mode=0o700)
        assert engine.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
        assert engine._servers[0].starting is None
    finally:
        engine.close()


class _Watching(ReferenceBackend):
    """The reference backend, noting at each reply whether the engine's servers (the judges',
    the split candidates') were started."""

    def __init__(self, engine: ForkServerEngine) -> None:
        self.engine, self.started_before_reply = engine, []

    async def generate(self, task, messages, params, sample_idx):  # type: ignore[no-untyped-def]
        self.started_before_reply.append(tuple(
            all(server.starting is not None or server.process is not None for server in servers)
            for servers in (self.engine._servers, self.engine._candidates)))
        return await super().generate(task, messages, params, sample_idx)


@pytest.mark.parametrize("kind", ["function", "choice"])
def test_a_run_starts_the_servers_before_the_model_replies_when_it_has_code_to_run(
        best_sandbox: Sandbox, tmp_path: Path, kind: str) -> None:
    """With the references' checks reused from an earlier run, nothing runs before the model's
    first reply; the servers start meanwhile, where the tasks have code to run, and the split
    candidates' servers too where the tasks run split."""
    bench = load_benchmark(EXAMPLE)
    tasks = [task.task_id for task in bench.tasks if task.kind == kind][:2]
    for attempt, isolation in (("earlier", "auto"), ("watched", "auto"), ("in-process", "in-process")):
        engine = ForkServerEngine(best_sandbox, workers=1)
        try:
            backend = _Watching(engine)
            summary = run_benchmark(bench, backend, get_method("none"), engine, tmp_path / attempt,
                                    SamplingParams(), Limits(), task_ids=tasks, isolation=isolation)
            assert [result.status for result in summary.results] == ["pass"] * len(tasks)
            splits = {result.execution.isolation for result in summary.results if result.execution}
        finally:
            engine.close()
        if attempt == "watched":
            assert splits == ({"split"} if kind == "function" else set())
            assert backend.started_before_reply == [(kind == "function",) * 2] * len(tasks)
    assert backend.started_before_reply == [(kind == "function", False)] * len(tasks)
