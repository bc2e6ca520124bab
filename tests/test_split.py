"""Split execution: tests in a trusted process, the candidate's code in its own process.

Every behaviour runs on the subprocess and the fork-server engines (the Ray engine hosts
fork servers; the hostile suite covers it). Calls cross by value: return values,
exceptions, printed text and changes to arguments and `self` come back; what cannot cross
fails the test instead of passing it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent, indent

import pytest

from helpers import make_request, runner_module
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.execution.engine import Engine, SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import RUNNER_DIR, Sandbox
from knowbench.methods import get_method
from knowbench.models.offline import ReferenceBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark

ROOT = Path(__file__).resolve().parents[1]

ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = "def add(a, b):\n    return a - b\n"
CHECK_ADD = "def test_add():\n    assert add(2, 3) == 5\n\n\ndef test_add_zero():\n    assert add(1, 0) == 1\n"


@pytest.fixture(scope="module", params=["subprocess", "forkserver"])
def split_engine(request: pytest.FixtureRequest, best_sandbox: Sandbox) -> Iterator[Engine]:
    engine: Engine
    if request.param == "subprocess":
        engine = SubprocessEngine(best_sandbox, workers=1)
    else:
        engine = ForkServerEngine(best_sandbox, workers=1, preload=["json", "unittest", "numpy"])
    yield engine
    engine.close()


def run(engine: Engine, program: str, tests: str, entry_point: str = "add", **options: object):
    return engine.execute(make_request(dedent(program), dedent(tests), entry_point,
                                       isolation="split", **options))  # type: ignore[arg-type]


def assert_all_pass(engine: Engine, program: str, tests: str, isolation: str, benchmark: str,
                    **options: object) -> None:
    """Every test passes the candidate's `program` with `isolation`, the judge loading
    `benchmark` as the benchmark's own program (split)."""
    result = engine.execute(make_request(dedent(program), dedent(tests), "add", isolation=isolation,  # type: ignore[arg-type]
                                         trusted_program=dedent(benchmark), **options))  # type: ignore[arg-type]
    assert result.status == "pass", [(t.id, t.message[-400:]) for t in result.tests if t.status != "pass"]


def test_an_honest_sample_passes_and_a_wrong_one_fails(split_engine: Engine) -> None:
    passing = run(split_engine, ADD, CHECK_ADD)
    assert passing.status == "pass", passing.tests
    assert passing.isolation == "split" and all(t.called for t in passing.tests)
    failing = run(split_engine, WRONG_ADD, CHECK_ADD)
    assert [t.status for t in failing.tests] == ["fail", "pass"]
    assert failing.tests[0].called is True


@pytest.mark.parametrize("engine_name", ["subprocess", "forkserver"])
def test_a_candidate_process_does_not_import_the_testing_frameworks(engine_name: str,
                                                                   best_sandbox: Sandbox) -> None:
    """pytest and `numpy.testing`, preloaded for the tests (by the engine and by the request),
    are imported where the tests run, never in the candidate's process: no value of a testing
    framework crosses the wire, so the candidate never needs one, and a candidate process
    without pytest's modules costs less to fork and to end. The package above a testing
    module (numpy) is still preloaded there, and a program that imports pytest gets it."""
    preload = ["pytest", "numpy.testing"]
    engine: Engine = (SubprocessEngine(best_sandbox, workers=1) if engine_name == "subprocess"
                      else ForkServerEngine(best_sandbox, workers=1, preload=[*preload, "json"]))
    program = ("import sys\nAT_LOAD = {name: name in sys.modules for name in ('numpy', 'numpy.testing')}\n\n"
               "def loaded(name, at_load=False):\n    return AT_LOAD[name] if at_load else name in sys.modules\n")
    tests = ("import sys\n\ndef test_loaded():\n    assert 'pytest' in sys.modules and 'numpy.testing' in sys.modules\n"
             "    assert (loaded('pytest'), loaded('_pytest'), loaded('json')) == (False, False, True)\n"
             "    assert (loaded('numpy', True), loaded('numpy.testing', True)) == (True, False)\n")
    try:
        result = run(engine, program, tests, "loaded", preload=preload)
        assert result.status == "pass", result.tests
        result = run(engine, "import pytest\n" + program,
                     "def test_loaded():\n    assert loaded('pytest')\n", "loaded", preload=preload)
        assert result.status == "pass", result.tests
    finally:
        engine.close()


@pytest.mark.parametrize("preload", [[], ["pytest"]])
def test_a_candidate_rebuilds_values_of_modules_only_the_tests_imported(split_engine: Engine,
                                                                        preload: list[str]) -> None:
    """A test passes the target a function of a module that neither the program nor anything
    the candidate's process loaded imports: the candidate imports it to rebuild the value (its
    side guards nothing of the judge's), whatever the tests' preload brings in the judge."""
    program = "def apply(f, x):\n    return f(x)\n"
    tests = ("import shlex\nimport html\n\n\ndef test_quote():\n    assert apply(shlex.quote, 'a b') == \"'a b'\"\n"
             "\n\ndef test_escape():\n    assert apply(html.escape, '<') == '&lt;'\n")
    result = run(split_engine, program, tests, "apply", preload=preload)
    assert result.status == "pass", result.tests


def test_the_tests_see_the_benchmark_program_not_the_candidates(split_engine: Engine) -> None:
    # The candidate redefines a helper of the benchmark's program; the tests still use the
    # benchmark's own helper, and only the target's calls reach the candidate.
    trusted = "def helper():\n    return 1\n\n\ndef add(a, b):\n    raise NotImplementedError\n"
    program = "def helper():\n    return 100\n\n\ndef add(a, b):\n    return a + b + helper()\n"
    tests = "def test_helper():\n    assert helper() == 1\n\n\ndef test_add():\n    assert add(1, 1) == 102\n"
    result = run(split_engine, program, tests, trusted_program=trusted)
    assert result.status == "pass", result.tests


def test_a_method_changes_self_by_value(split_engine: Engine) -> None:
    trusted = dedent("""
        class Counter:
            def __init__(self):
                self.count = 0
                self.history = []

            def bump(self, by):
                raise NotImplementedError
    """)
    program = trusted.replace("raise NotImplementedError",
                              "self.count += by\n        self.history.append(by)\n        return self.count")
    tests = """
        def test_bump():
            counter = Counter()
            history = counter.history
            assert counter.bump(2) == 2
            assert counter.bump(3) == 5
            assert counter.count == 5 and counter.history == [2, 3]
            assert counter.history is history  # changed in place, as in one process
    """
    result = run(split_engine, program, tests, "Counter.bump", trusted_program=trusted)
    assert result.status == "pass", result.tests[0].message
    assert result.tests[0].called is True


def test_arguments_changed_in_place_come_back(split_engine: Engine) -> None:
    program = "def add(items, value):\n    items.append(value)\n    items.sort()\n"
    tests = """
        def test_in_place():
            items = [3, 1]
            assert add(items, 2) is None
            assert items == [1, 2, 3]
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


def test_exceptions_cross_as_the_nearest_class_the_tests_know(split_engine: Engine) -> None:
    program = """
        class Mine(ValueError):
            pass


        def add(a, b):
            if a < 0:
                raise Mine("negative input")
            return a + b
    """
    tests = """
        import pytest


        def test_raises():
            with pytest.raises(ValueError, match="negative"):
                add(-1, 2)
    """
    result = run(split_engine, program, tests, preload=["pytest"])
    assert result.status == "pass", result.tests[0].message


def test_a_failure_shows_the_candidates_frames(split_engine: Engine) -> None:
    program = "def add(a, b):\n    return helper(a)\n\n\ndef helper(a):\n    return a / 0\n"
    result = run(split_engine, program, CHECK_ADD)
    message = result.tests[0].message
    assert result.tests[0].status == "error"
    assert 'File "solution.py", line 6, in helper' in message and "ZeroDivisionError" in message


def test_what_cannot_cross_fails_even_when_the_test_catches_everything(split_engine: Engine) -> None:
    program = "import threading\n\n\ndef add(a, b):\n    return threading.Lock()\n"
    tests = """
        def test_caught():
            try:
                add(1, 2)
            except Exception:
                pass
    """
    result = run(split_engine, program, tests)
    assert result.tests[0].status == "error"
    assert result.tests[0].reason == "cannot-cross", result.tests[0]
    assert "lock" in result.tests[0].message


def test_a_candidate_that_exits_fails_every_later_test(split_engine: Engine) -> None:
    program = "import os\n\n\ndef add(a, b):\n    os._exit(0)\n"
    result = run(split_engine, program, CHECK_ADD)
    assert [t.status for t in result.tests] == ["error", "error"]
    assert {t.reason for t in result.tests} == {"candidate-died"}


def test_a_program_that_fails_to_load_fails_every_test(split_engine: Engine) -> None:
    result = run(split_engine, "import no_such_module_here\n" + ADD, CHECK_ADD)
    assert [t.status for t in result.tests] == ["error", "error"]
    assert "the program failed to load" in result.tests[0].message
    assert "ModuleNotFoundError" in result.tests[0].message


def test_printed_text_reaches_capsys(split_engine: Engine) -> None:
    program = "def add(a, b):\n    print('adding', a, b)\n    return a + b\n"
    tests = """
        def test_prints(capsys):
            assert add(1, 2) == 3
            assert capsys.readouterr().out == "adding 1 2\\n"
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


def test_files_the_candidate_writes_are_visible_to_the_tests(split_engine: Engine) -> None:
    program = "def add(path, text):\n    with open(path, 'w') as handle:\n        handle.write(text)\n"
    tests = """
        def test_file(tmp_path):
            target = tmp_path / "out.txt"
            add(str(target), "hello")
            assert target.read_text() == "hello"
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


# The tests write the expected value into a file and read back, through the path the
# candidate made, what `add` linked there.
LINK_TESTS = """
    def test_link(tmp_path):
        secret = tmp_path / "expected.txt"
        secret.write_text("42")
        out = tmp_path / "out.txt"
        add(str(out), str(secret))
        assert out.read_text() == "42"
"""


def test_the_candidate_cannot_plant_links_for_the_tests(split_engine: Engine) -> None:
    program = """
        import os


        def add(path, target):
            os.symlink(target, path)
    """
    result = run(split_engine, program, LINK_TESTS)
    assert result.tests[0].status == "error"
    assert "PermissionError" in result.tests[0].message


def test_the_tests_never_write_into_a_file_the_candidate_made_first(split_engine: Engine) -> None:
    """In a shared directory the candidate may make a file under the name the tests will give
    their own reference; the tests' `open(path, "w")` would reuse it, and the candidate could
    rewrite it while the tests compare. That open is refused; reading the candidate's files
    is not."""
    if not split_engine.sandbox.drops_privileges:  # type: ignore[attr-defined]
        pytest.skip("the candidate runs under its own uid only when knowbench runs as root")
    program = """
        import os


        def add(directory, text):
            with open(os.path.join(directory, "out.txt"), "w") as handle:
                handle.write(text)
            os.close(os.open(os.path.join(directory, "reference.txt"), os.O_CREAT | os.O_WRONLY, 0o666))
            os.chmod(os.path.join(directory, "reference.txt"), 0o666)
    """
    result = run(split_engine, program, """
        import os
        import tempfile

        import pytest


        def test_a_planted_reference(tmp_path):
            for directory in (str(tmp_path), tempfile.mkdtemp()):
                add(directory, "nope")
                with pytest.raises(PermissionError, match="the candidate's process made"):
                    open(os.path.join(directory, "reference.txt"), "w")
                with open(os.path.join(directory, "out.txt")) as handle:
                    assert handle.read() == "nope"
    """)
    assert result.status == "pass", result.tests[0].message[-800:]


def test_the_tests_never_write_into_a_directory_the_candidate_made_first(split_engine: Engine) -> None:
    """A directory the candidate made under the name the tests give theirs is the candidate's:
    it may rename the tests' files in it. Their writes there are refused, whatever opens the
    file (`open`, `os.open`, `io.FileIO`, tarfile's own `open`, sqlite)."""
    if not split_engine.sandbox.drops_privileges:  # type: ignore[attr-defined]
        pytest.skip("the candidate runs under its own uid only when knowbench runs as root")
    program = """
        import os

        os.mkdir("expected", 0o777)
        os.chmod("expected", 0o777)


        def add(a, b):
            return a + b
    """
    result = run(split_engine, program, """
        import io
        import os
        import sqlite3
        import tarfile

        import pytest


        def test_writes_into_the_candidates_directory():
            assert add(1, 2) == 3
            os.makedirs("expected", exist_ok=True)
            for write in (lambda path: open(path, "w"), lambda path: os.open(path, os.O_WRONLY | os.O_CREAT),
                          lambda path: io.FileIO(path, "w"), lambda path: tarfile.open(path, "w"),
                          lambda path: sqlite3.connect(path)):
                with pytest.raises(PermissionError, match="the candidate's process made"):
                    write("expected/report")
            with open("mine.txt", "w") as handle:  # (the tests' own, elsewhere: theirs to write)
                handle.write("ok")
    """)
    assert result.status == "pass", result.tests[0].message[-800:]


def test_no_sample_gets_io_uring(split_engine: Engine) -> None:
    """Its operations make links, sockets and extended attributes with no system call the
    seccomp filter sees: it answers ENOSYS, as a kernel without it."""
    program = """
        import ctypes
        import platform


        def add(a, b):
            syscall = ctypes.CDLL(None, use_errno=True).syscall
            params = ctypes.create_string_buffer(120)
            return [syscall(425, 8, params), ctypes.get_errno()]  # io_uring_setup(8, &params)
    """
    for isolation in ("split", "in-process"):
        result = split_engine.execute(make_request(dedent(program), dedent("""
            import errno


            def test_ring():
                assert add(1, 2) == [-1, errno.ENOSYS]
        """), "add", isolation=isolation))  # type: ignore[arg-type]
        assert result.status == "pass", (isolation, result.tests[0].message[-800:])


def test_the_candidate_takes_no_lease_and_no_directory_notice(split_engine: Engine) -> None:
    """A write lease on a file the tests will open would hold their open until the candidate
    has acted, between two of their steps; a directory notice would tell it when they wrote."""
    program = """
        import errno
        import fcntl
        import os


        def add(path, _):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            refused = []
            for command, argument in ((1024, fcntl.F_WRLCK), (1026, 0x1)):  # F_SETLEASE, F_NOTIFY
                target = fd if command == 1024 else os.open(os.path.dirname(path), os.O_RDONLY)
                try:
                    fcntl.fcntl(target, command, argument)
                except OSError as error:
                    refused.append(error.errno == errno.EPERM)
            return refused
    """
    result = run(split_engine, program, """
        def test_lease(tmp_path):
            assert add(str(tmp_path / "out.txt"), None) == [True, True]
    """)
    assert result.status == "pass", result.tests[0].message[-800:]


def test_the_candidate_sees_no_keys_and_cannot_use_the_keyrings(split_engine: Engine) -> None:
    """The kernel's keyrings belong to a uid, outside every sandbox: a sample judged
    in-process (which may read its tests) could leave expected values there for a later
    candidate of the same uid. /proc/keys is empty, and `keyctl` is denied."""
    program = """
        import ctypes
        import platform

        KEYCTL = {"x86_64": 250, "aarch64": 219}[platform.machine()]


        def add(a, b):
            syscall = ctypes.CDLL(None, use_errno=True).syscall
            found = syscall(KEYCTL, 0, -4, 0, 0, 0)  # KEYCTL_GET_KEYRING_ID of the user keyring
            with open("/proc/keys") as keys:
                return [found, ctypes.get_errno(), keys.read()]
    """
    result = run(split_engine, program, """
        import errno


        def test_keys():
            assert add(1, 2) == [-1, errno.EPERM, ""]
    """)
    assert result.status == "pass", result.tests[0].message[-800:]


def test_the_candidate_cannot_hard_link_the_tests_files(split_engine: Engine) -> None:
    """Hard links are denied, or (where the kernel protects them, so that multiprocessing's
    semaphores work) limited to files the candidate's own uid could write anyway."""
    if not split_engine.sandbox.drops_privileges:  # type: ignore[attr-defined]
        pytest.skip("the candidate runs under its own uid only when knowbench runs as root")
    program = """
        import os


        def add(path, target):
            os.link(target, path)
    """
    result = run(split_engine, program, LINK_TESTS)
    assert result.tests[0].status == "error"
    assert "PermissionError" in result.tests[0].message


def test_an_iterator_is_replayed_with_the_exception_it_ended_with(split_engine: Engine) -> None:
    program = """
        def add(a, b):
            yield a
            yield b
            raise KeyError("done")
    """
    tests = """
        import pytest


        def test_items():
            produced = add(1, 2)
            assert next(produced) == 1 and next(produced) == 2
            with pytest.raises(KeyError):
                next(produced)
    """
    result = run(split_engine, program, tests, preload=["pytest"])
    assert result.status == "pass", result.tests[0].message


def test_async_targets_are_awaited(split_engine: Engine) -> None:
    trusted = "async def add(a, b):\n    raise NotImplementedError\n"
    program = "import asyncio\n\n\nasync def add(a, b):\n    await asyncio.sleep(0)\n    return a + b\n"
    tests = """
        import asyncio


        def test_async():
            assert asyncio.run(add(2, 2)) == 4
    """
    result = run(split_engine, program, tests, trusted_program=trusted)
    assert result.status == "pass", result.tests[0].message


def test_numpy_arrays_cross_by_value(split_engine: Engine) -> None:
    program = """
        import numpy as np


        def add(a, b):
            a += 1
            return np.asarray(a) + b
    """
    tests = """
        import numpy as np


        def test_arrays():
            a = np.arange(4.0)
            out = add(a, np.ones(4))
            assert out.dtype == np.float64 and out.tolist() == [2.0, 3.0, 4.0, 5.0]
            assert a.tolist() == [1.0, 2.0, 3.0, 4.0]  # changed in place by the candidate
    """
    result = run(split_engine, program, tests, preload=["numpy"])
    assert result.status == "pass", result.tests[0].message


def test_the_candidate_never_holds_the_tests(split_engine: Engine) -> None:
    # The expected value exists only in the tests; a candidate that searches its whole
    # process for it must come up empty in split mode.
    program = """
        import gc


        def add(a, b):
            for obj in gc.get_objects():
                if isinstance(obj, dict):
                    for value in obj.values():
                        if isinstance(value, str) and "KB-SECRET-" in value:
                            return int(value.rsplit("-", 1)[1])
            return -1
    """
    tests = """
        EXPECTED = "KB-SECRET-" + "7331"


        def test_secret():
            assert add(1, 2) == 7331
    """
    result = run(split_engine, program, tests)
    assert result.tests[0].status == "fail"


def test_a_mock_cannot_come_back_as_a_passing_answer(split_engine: Engine) -> None:
    program = "from unittest import mock\n\n\ndef add(a, b):\n    return mock.ANY\n"
    result = run(split_engine, program, CHECK_ADD, preload=["unittest"])
    assert all(t.status != "pass" for t in result.tests)
    assert {t.reason for t in result.tests} == {"cannot-cross"}


def test_a_candidate_over_its_cpu_limit_times_out(split_engine: Engine) -> None:
    program = "def add(a, b):\n    while True:\n        pass\n"
    result = run(split_engine, program, CHECK_ADD, wall_s=20, cpu_s=1)
    assert result.tests[0].status == "timeout" and result.tests[0].reason == "cpu-time", result.tests


def test_a_candidate_that_never_returns_times_out_on_the_wall_clock(split_engine: Engine) -> None:
    """Its process may reach the wall clock before the judge's does (each is timed from its
    own start): the judge then sees the channel close, and the verdict is still `timeout`."""
    program = "def add(a, b):\n    while True:\n        pass\n"
    result = run(split_engine, program, CHECK_ADD, wall_s=1.5, cpu_s=20)
    assert result.status == "timeout", result.tests
    assert (result.tests[0].status, result.tests[0].reason) == ("timeout", "timeout"), result.tests


INTERRUPTIBLE = """
    import time


    def add(a, b, wait=0.0, callback=None):
        if callback is not None:
            try:
                callback()
            except BaseException:
                pass
        time.sleep(wait)
        return a + b
"""
ALARM = """
    import signal


    def interrupted(call, error):
        def expired(signum, frame):
            raise error

        previous = signal.signal(signal.SIGALRM, expired)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            call()
        except type(error):
            return True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return False
"""


@pytest.mark.parametrize("error", ["ValueError('slow')", "TimeoutError(62, 'Timer expired')", "KeyError('x')"])
def test_a_test_sees_the_exception_its_signal_handler_raised_during_a_call(
        split_engine: Engine, error: str) -> None:
    """As under the frameworks, whatever the handler raises reaches the test, whatever its
    type (an OSError with an errno included); a later call then fails (see test_executor)."""
    tests = ALARM + f"""

    def test_interrupted():
        assert interrupted(lambda: add(1, 1, wait=1.0), {error})
    """
    result = run(split_engine, INTERRUPTIBLE, tests)
    assert result.status == "pass", result.tests


def test_a_nested_call_that_was_interrupted_does_not_answer_the_outer_one(split_engine: Engine) -> None:
    """A callback the test passes calls the target again, and that call is interrupted: its
    answer is still on its way, so the outer call must not take it for its own."""
    tests = ALARM + """

    def test_nested():
        def callback():
            interrupted(lambda: add(900, 99, wait=1.0), KeyError("slow"))

        assert add(1, 0, callback=callback) == 1
    """
    result = run(split_engine, INTERRUPTIBLE, tests)
    assert (result.tests[0].status, result.tests[0].reason) == ("error", "interrupted"), result.tests
    assert "interrupted" in result.tests[0].message


def test_a_call_interrupted_in_a_test_of_its_own_process_stops_the_later_tests_plainly(
        split_engine: Engine) -> None:
    """Direct invocation forks a process per test on each side. When a call of one test is
    interrupted, that test's copy of the candidate is still answering it and cannot be ended
    from the judge's side: the later tests are not run, and say why (they used to read the
    stale answer and report that the candidate broke the protocol)."""
    tests = ALARM + """

    def test_interrupted():
        assert interrupted(lambda: add(1, 1, wait=1.0), TimeoutError("slow"))


    def test_later():
        assert add(2, 3) == 5
    """
    result = run(split_engine, INTERRUPTIBLE, tests, invocation="direct")
    assert [(t.status, t.reason) for t in result.tests] == [("pass", None), ("error", "interrupted")], result.tests
    assert "interrupted" in result.tests[1].message and "protocol" not in result.tests[1].message
    # Uninterrupted, each test of its own process gets a fresh copy of the candidate.
    calm = run(split_engine, INTERRUPTIBLE, tests.replace("wait=1.0", "wait=0.0").replace("assert interrupted",
                                                                                            "assert not interrupted"),
               invocation="direct")
    assert calm.status == "pass", calm.tests


def test_a_returned_closure_is_called_back_by_value(split_engine: Engine) -> None:
    program = """
        def add(a):
            def adder(b, log):
                log.append(b)
                return a + b
            return adder
    """
    tests = """
        def test_closure():
            log = []
            adder = add(10)
            assert adder(5, log) == 15 and adder(1, log) == 11
            assert log == [5, 1]
            assert adder != 15  # a handle compares by identity: it never answers for a value
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


def test_an_object_of_the_tests_comes_back_as_itself(split_engine: Engine) -> None:
    """What the tests hand the target that cannot cross by value (an object of a class they
    define, a callback) reaches the candidate as a stand-in; handed back, it is the tests'
    object again, as in-process: `is` holds, inside containers and across calls."""
    result = run(split_engine, """
        def keep(value):
            return value
    """, """
        class Box:
            def __init__(self):
                self.items = []

        def test_an_object_comes_back():
            box = Box()
            assert keep(box) is box and keep([box, {"k": box}]) == [box, {"k": box}]
            assert keep([box])[0] is keep((box,))[0] is box

        def test_a_callback_comes_back():
            callback = lambda: 1
            assert keep(callback) is callback and keep(callback)() == 1
    """, "keep")
    assert result.status == "pass", [(t.id, t.message[-400:]) for t in result.tests]


VIEWS = """
    import numpy


    def merge_into(base, extra, factory):
        out = factory()
        out.update(base)
        for key in extra:
            out[key] = extra[key]
        for key, value in extra.items():
            out[key] = value + 1
        if "drop" in out:
            del out["drop"]
        from collections.abc import Mapping, Sequence

        assert isinstance(out, Mapping) and not isinstance(out, Sequence)
        seen = {base: 1}  # (a Table hashes by identity)
        return out, len(out), bool(out), out.size, repr(out), out == extra, out != extra, seen[base]


    def arith(values):
        more = values + [4]
        values += [5]
        return more, values < [9], list(reversed(values))


    def duplicate(table):
        import copy

        clone = copy.deepcopy(table)
        clone["z"] = 9
        return clone, copy.copy(table)


    def first_two(items):
        return [next(items), next(items)]


    def total(items):
        return sum(x for x in items)


    def apply_all(function, items):
        return [function(item, times=2) for item in items]


    def feed(sink, values):
        doubled = (value * 2 for value in values)
        return sink(doubled), list(doubled), sink(map(str, values)), sink(numpy.ones(2) * v for v in values)
"""
TABLE = """
    from collections.abc import MutableMapping


    class Table(MutableMapping):
        def __init__(self, *args):
            self._rows = dict(*args)

        def __getitem__(self, key):
            return self._rows[key]

        def __setitem__(self, key, value):
            self._rows[key] = value

        def __delitem__(self, key):
            del self._rows[key]

        def __iter__(self):
            return iter(self._rows)

        def __len__(self):
            return len(self._rows)

        def __contains__(self, key):
            return key in self._rows

        def update(self, other):
            for key in other:
                self[key] = other[key]

        def items(self):
            return self._rows.items()

        @property
        def size(self):
            return len(self._rows)

        def __repr__(self):
            return f"Table({self._rows})"

        def __eq__(self, other):
            return isinstance(other, Table) and self._rows == other._rows

        __hash__ = object.__hash__
"""
VIEWS_TESTS = TABLE + """

    def test_an_object_of_the_tests_is_used_where_it_lives():
        made = []

        def factory():
            made.append(Table())
            return made[-1]

        out, size, truth, also, text, same, differs, seen = merge_into(Table({"a": 1, "drop": 0}),
                                                                      Table({"b": 2}), factory)
        assert out is made[0] and out._rows == {"a": 1, "b": 3} and (size, truth, also) == (2, True, 2)
        assert (text, same, differs, seen) == ("Table({'a': 1, 'b': 3})", False, True, 1)
        assert merge_into(Table(), Table(), factory)[5:7] == (True, False)


"""
VIEWS_TESTS_OF = {"merge_into": VIEWS_TESTS, "arith": """
    class Vec(list):
        pass


    def test_operators_are_done_where_the_object_lives():
        values = Vec([1])
        more, less, back = arith(values)
        assert (more, less, back) == ([1, 4], True, [5, 1]) and values == [1, 5] and type(values) is Vec
""", "duplicate": TABLE + """

    def test_a_copy_is_made_where_the_object_lives():
        table = Table({"a": 1})
        clone, shallow = duplicate(table)
        assert isinstance(clone, Table) and clone._rows == {"a": 1, "z": 9} and table._rows == {"a": 1}
        assert shallow is not table and shallow._rows is table._rows
""", "first_two": """
    def test_an_iterator_of_the_tests_advances_by_what_the_candidate_took():
        items = iter([1, 2, 3, 4])
        assert first_two(items) == [1, 2]
        assert next(items) == 3
""", "apply_all": """
    class Scale:
        def __init__(self, factor):
            self.factor = factor

        def __call__(self, value, times=1):
            return self.factor * value * times


    def test_a_callable_object_of_the_tests_is_called_where_it_lives():
        assert apply_all(Scale(3), iter([1, 2])) == [6, 12]
""", "feed": """
    def first(items):  # (the tests' functions run in their process: the candidate calls back)
        return next(items)


    def every(items):
        return list(items)


    def test_an_iterator_of_the_candidates_is_advanced_by_what_the_tests_take():
        import numpy  # noqa: F401  (the arrays it yields are rebuilt here)

        head, rest, text, array = feed(first, [1, 2, 3])
        assert (head, rest, text, array.tolist()) == (2, [4, 6], "1", [1.0, 1.0])
        everything = feed(every, [1, 2])
        assert everything[:3] == ([2, 4], [], ["1", "2"]) and [a.tolist() for a in everything[3]] == [[1, 1], [2, 2]]
""", "total": """
    def test_a_generator_of_the_tests_runs_in_their_process():
        def numbers():
            yield from range(5)

        assert total(numbers()) == 10
"""}


STREAMS = """
    import io


    def report(buffer, lines):
        for line in lines:
            {write}
        return io.BytesIO(buffer.getvalue().upper().encode())
"""


@pytest.mark.parametrize(("write", "verdict"), [
    ("buffer.write(line + chr(10))", "pass"),
    ("io.StringIO().write(line)", "fail"),  # writes where the tests never look
], ids=["writes-to-the-tests-stream", "writes-elsewhere"])
def test_in_memory_streams_cross_by_value(split_engine: Engine, write: str, verdict: str) -> None:
    """An `io.StringIO` or `io.BytesIO` crosses as a copy of its state, as other values do: what
    the candidate writes into a stream of the tests, and where it leaves its position, is made
    in the tests' stream too; a returned stream reads from where it was left."""
    tests = """
        import io


        def test_report():
            buffer = io.StringIO()
            buffer.write("head" + chr(10))
            out = report(buffer, ["a", "b"])
            assert buffer.getvalue() == "head" + chr(10) + "a" + chr(10) + "b" + chr(10)
            assert buffer.tell() == 9
            assert out.read() == b"HEAD" + bytes([10]) + b"A" + bytes([10]) + b"B" + bytes([10])
    """
    result = run(split_engine, STREAMS.format(write=write), tests, "report")
    assert result.isolation == "split"
    assert [t.status for t in result.tests] == [verdict], [t.message[-400:] for t in result.tests]


def test_an_object_of_the_tests_reaches_the_candidate_as_a_view(split_engine: Engine) -> None:
    """An object the tests hand over that cannot cross by value (an object of a class they
    define, an iterator) is a view in the candidate's process: its attributes, items, length,
    truth and iteration are done on the tests' object, so the candidate's changes are made
    there and an iterator advances by exactly what the candidate consumed."""
    for entry_point in ("merge_into", "arith", "duplicate", "first_two", "total", "apply_all", "feed"):
        tests = VIEWS_TESTS_OF[entry_point]
        result = run(split_engine, VIEWS.replace("def ", "def _").replace(f"def _{entry_point}", f"def {entry_point}"),
                     tests, entry_point)
        assert result.isolation == "split"
        assert result.status == "pass", [(t.id, t.message[-1500:]) for t in result.tests]


PROBE = """
    import sys


    def probe(obj, op, name, args):
        split = sys.modules["knowbench_split"]
        peer = object.__getattribute__(obj, "_knowbench_peer")
        number = object.__getattribute__(obj, "_knowbench_number")
        arguments, keywords = tuple(args), ({"x": 1} if op == "keywords" else {})
        reply = peer.call("op", (number, "getitem" if op == "keywords" else op, name), arguments, keywords)
        return split.settle(peer, reply, arguments, keywords, None)
"""


@pytest.mark.parametrize(("given", "op", "name", "args", "refused"), [
    ("Box()", "getattr", "__class__", [], "no dunder attribute"),
    ("Box()", "getattr", "__dict__", [], "no dunder attribute"),
    ("Box()", "setattr", "items", [[]], "no such operation"),
    ("Box()", "getitem", None, [], "takes 1 argument"),
    ("Box()", "keywords", None, [0], "no such operation"),
    ("numbers()", "getattr", "gi_frame", [], "can be passed back, not used"),
    ("self", "getattr", "assertEqual", [], "can be passed back, not used"),
    ("threading.Lock()", "getattr", "release", [], "can be passed back, not used"),
    ("Box()", "hash", None, [], "has no __hash__"),
    ("Box()", "repr", None, [], "has no __repr__"),
    ("Prepared()", "getattr", "prepared", [], "can be passed back, not used"),
    ("Opener()", "call", None, ["judge-file.txt", "w"], "has no __call__"),
    ("Table()", "hash", None, [], "has no __hash__"),
    ("Logged('x')", "copy", None, [], "would run a library's code"),
    ("Printer()", "deepcopy", None, [], "would run a library's code"),
    ("Holder()", "deepcopy", None, [], "would run a library's code"),
    ("Slotted()", "deepcopy", None, [], "would run a library's code"),
], ids=["class", "dict", "setattr", "arity", "keywords", "generator-frame", "test-case", "library-object",
        "object-hash", "object-repr", "pytest-class", "special-the-tests-named-not-wrote", "identity-hash",
        "copy-of-a-library-base", "copy-hook-the-tests-named-not-wrote", "deep-copy-of-a-library-object-held",
        "deep-copy-of-a-library-object-in-a-slot"])
def test_a_view_does_only_what_the_judge_allows(split_engine: Engine, given: str, op: str, name: str | None,
                                                args: list, refused: str) -> None:
    """A candidate that sends its own requests for a view (not through `RemoteView`) is
    refused what the view does not offer: dunder attributes (the way to the tests' module),
    setting attributes, anything on a test case (pytest's, which has no base class, too), a
    library's object or an iterator's frame, and `object`'s own hash and repr (the judge's
    addresses)."""
    tests = dedent(f"""
        import logging
        import threading
        import unittest

        SECRET = "what the tests expect"


        class Box:
            def __init__(self):
                self.items = []


        def numbers():
            yield SECRET


        class Opener:  # (a special method the tests named, not wrote: it runs nothing)
            __call__ = staticmethod(open)


        class Logged(logging.Logger):  # (a copy would run Logger.__reduce__)
            pass


        class Printer:
            __deepcopy__ = staticmethod(print)


        class Holder:
            def __init__(self):
                self.logger = logging.getLogger("held")


        class Slotted:
            __slots__ = ("logger",)

            def __init__(self):
                self.logger = logging.getLogger("held")


        class Table(dict):  # (its hash would be the judge's address)
            __hash__ = object.__hash__


        class Prepared:  # (a test class by its test method: pytest collects it as `TestPrepared`)
            prepared = SECRET

            def test_nothing(self):
                pass


        class TestProbe(unittest.TestCase):
            def test_probe(self):
                self.assertEqual(probe({given}, {op!r}, {name!r}, {args!r}), SECRET)
    """)
    [outcome] = run(split_engine, PROBE, tests, "probe").tests
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
    assert refused in outcome.message, outcome.message[-800:]


LENDER = """
    def use(thing, *args):
        return getattr(thing, "method")(*args)
"""


@pytest.mark.parametrize(("tests", "lent"), [
    ("""
        import pathlib

        class Workdir(type(pathlib.Path())):
            method = pathlib.Path.write_text

        def test_it():
            assert use(Workdir("note.txt"), "written by the judge") == 20
    """, False),
    ("""
        import sqlite3

        class Counting:
            def __init__(self, connection):
                self.connection, self.calls = connection, 0

            def __getattr__(self, name):
                self.calls += 1
                return getattr(self.connection, name.replace("method", "execute"))

        def test_it():
            assert use(Counting(sqlite3.connect(":memory:")), "select 1") is not None
    """, False),
    ("""
        import sqlite3

        class Store:
            def __init__(self):
                self.connection = sqlite3.connect(":memory:")

            def method(self):
                return self.connection.execute

        def test_it():
            assert use(Store()) is not None
    """, False),
    ("""
        import pathlib

        class Hooks(dict):
            method = dict.get

        def test_it():
            assert use(Hooks(save=pathlib.Path("note.txt").write_text), "save") is not None
    """, False),
    ("""
        class Counts(dict):
            method = dict.setdefault

        def test_it():
            counts = Counts(a=1)
            assert use(counts, "b", 2) == 2 and counts == {"a": 1, "b": 2}
    """, True),
    ("""
        from collections import OrderedDict

        class Recent(OrderedDict):
            def method(self, key):
                self.move_to_end(key)
                return list(self)

        def test_it():
            assert use(Recent(a=1, b=2), "a") == ["b", "a"]
    """, True),
], ids=["library-subclass", "delegating-wrapper", "handed-out-by-tests-method", "handed-out-by-dict-get",
        "dict-subclass", "tests-method"])
def test_a_view_lends_only_methods_the_tests_wrote(split_engine: Engine, tests: str, lent: bool) -> None:
    """A method read on a view is called back in the judge with the candidate's arguments: one
    the tests wrote, or one a builtin container gives their object, is lent; a library's (a
    `Path` subclass's `write_text`, a wrapper handing out `sqlite3.Connection.execute`) would
    do what the candidate asks with the judge's rights, and fails the test as `cannot-cross`."""
    result = run(split_engine, LENDER, tests, "use")
    assert result.isolation == "split"
    if lent:
        assert result.status == "pass", [(t.id, t.message[-800:]) for t in result.tests]
    else:
        [outcome] = result.tests
        assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
        assert "is a library's" in outcome.message, outcome.message[-800:]


CALLER = """
    import decimal
    import fractions
    import string


    def hand(runner, what, *args, echo=None):
        if what == "echo":  # the judge sends a Template back: its class is still not a value it sent
            echo(list, [string.Template("$x")])
            what = string.Template
        if what == "template":  # rebuilt from the candidate's state, its library's code would run
            return runner.submit(len, string.Template("$x"))
        chosen = {"int": int, "fraction": fractions.Fraction}.get(what, what)
        return runner.submit(chosen, *args)
"""
CALLER_TESTS = """
    import decimal
    import fractions
    from unittest import mock

    import pytest


    class Runner:  # a test double that calls what it is given, as an executor does
        def submit(self, function, *args):
            return function(*args)


    def test_a_builtin_class():
        assert hand(Runner(), "int", "7") == 7


    def test_a_class_the_tests_sent():
        assert hand(Runner(), decimal.Decimal, "1.5") == decimal.Decimal("1.5")


    def test_a_class_the_candidate_chose():
        assert hand(Runner(), "fraction", 1, 2) == fractions.Fraction(1, 2)


    def test_a_class_the_candidate_made_the_judge_send():
        assert hand(Runner(), "echo", "$y", echo=Runner().submit).template == "$y"


    def test_values_the_candidate_made():
        assert hand(Runner(), list, [fractions.Fraction(1, 2), decimal.Decimal(1)]) == [0.5, 1]


    def test_an_object_the_candidate_rebuilt_from_its_state():
        with pytest.raises(TypeError):  # (a Template has no len: what matters is that it never ran)
            hand(Runner(), "template")


    def test_a_mock_the_tests_passed():
        notify = mock.Mock()
        hand(Runner(), notify, "done")
        notify.assert_called_once_with("done")
"""


def test_what_the_judge_runs_calls_only_classes_it_sent_and_objects_it_lends(split_engine: Engine) -> None:
    """A method of the tests that calls what it is given (an executor's `submit`, a
    `list.sort(key=...)`) runs in the judge: a class the candidate names there would run with
    its arguments (`subprocess.Popen`, `ctypes.CDLL`), and a mock of the tests' it passes back
    would record a call the candidate could not make. A builtin class and one the tests sent
    cross; others (one the judge sent back while serving the candidate too: an echo, or
    `type(x)`, would let the candidate choose it), and the tests' objects it may not call,
    fail the test as `cannot-cross`. So does an object rebuilt from the candidate's state
    handed to what a view lends: its library's code (a `Maildir`'s `keys()`) would run there
    on the state the candidate chose, and what it gives would come back."""
    result = run(split_engine, CALLER, CALLER_TESTS, "hand", trusted_program=dedent(CALLER))
    outcomes = {t.id.rsplit("::", 1)[1]: t for t in result.tests}
    assert result.isolation == "split" and len(outcomes) == 7
    for name in ("test_a_builtin_class", "test_a_class_the_tests_sent", "test_values_the_candidate_made"):
        assert outcomes[name].status == "pass", outcomes[name].message[-800:]
    chose, mocked = outcomes["test_a_class_the_candidate_chose"], outcomes["test_a_mock_the_tests_passed"]
    assert (chose.status, chose.reason) == ("error", "cannot-cross"), chose.message[-800:]
    assert "'fractions'.'Fraction': a class this process never sent cannot cross as a value" in chose.message
    echoed = outcomes["test_a_class_the_candidate_made_the_judge_send"]
    assert (echoed.status, echoed.reason) == ("error", "cannot-cross"), echoed.message[-800:]
    assert "'string'.'Template': a class this process never sent" in echoed.message
    rebuilt = outcomes["test_an_object_the_candidate_rebuilt_from_its_state"]
    assert (rebuilt.status, rebuilt.reason) == ("error", "cannot-cross"), rebuilt.message[-800:]
    assert "an object the candidate rebuilt (Template) cannot be handed to what a view" in rebuilt.message
    assert (mocked.status, mocked.reason) == ("error", "cannot-cross"), mocked.message[-800:]
    assert "cannot be called by what the judge runs" in mocked.message


def test_the_judges_addresses_do_not_reach_the_candidate(split_engine: Engine) -> None:
    """A view's text and an exception's message carry no `at 0x7f...` of the judge's."""
    result = run(split_engine, """
        def show(table):
            try:
                table[table.get]
            except KeyError as error:
                return repr(table), str(error)
    """, """
        class Secret:
            pass


        class Table(dict):
            pass


        def test_no_address():
            text, error = show(Table(x=Secret()))
            assert "0x" in repr(Table(x=Secret())) and "0x7" not in text + error and "Secret object at" in text
    """, "show")
    assert result.status == "pass", [(t.id, t.message[-800:]) for t in result.tests]


def test_what_the_judge_hands_the_candidate_while_serving_it_is_lent_the_same_way(split_engine: Engine) -> None:
    """A lent `list.sort(key=...)` calls the candidate's key with the tests' items: a library's
    bound method among them is not handed over, as it is not in a reply."""
    result = run(split_engine, """
        def sort_with(items, grabbed):
            items.sort(key=lambda item: grabbed.append(item) or 0)
            return len(grabbed)
    """, """
        import pathlib


        class Hooks(list):
            pass


        def test_sort_with():
            assert sort_with(Hooks([pathlib.Path("note.txt").write_text, len]), []) == 2
    """, "sort_with")
    [outcome] = result.tests
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
    assert "Path.write_text is a library's" in outcome.message, outcome.message[-800:]


def test_no_object_rebuilt_from_the_candidates_state_reaches_container_code_while_served(split_engine: Engine) -> None:
    """A builtin container's method (`dict.update` lent by a view, `set.add` the tests pass in)
    calls protocol methods of what it is given: an object rebuilt from the candidate's state
    would run its library's code in the judge, however it arrives (an item of the candidate's
    iterator, an argument). Plain values go through."""
    result = run(split_engine, """
        import string


        def fill(target, how):
            if how == "plain":
                target.update((key, key) for key in "ab")
            elif how == "iterator":
                target.update((key, string.Template(key)) for key in "ab")
            else:
                target(string.Template("x"))
            return True
    """, """
        class Registry(dict):
            pass


        def test_plain():
            registry = Registry()
            assert fill(registry, "plain") and registry == {"a": "a", "b": "b"}


        def test_iterator():
            assert fill(Registry(), "iterator")


        def test_sink():
            seen = set()
            assert fill(seen.add, "sink")
    """, "fill", trusted_program="import string\n\n\ndef fill(target, how):\n    raise NotImplementedError\n")
    outcomes = {t.id.rsplit("::", 1)[1]: t for t in result.tests}
    assert outcomes["test_plain"].status == "pass", outcomes["test_plain"].message[-800:]
    for name in ("test_iterator", "test_sink"):
        outcome = outcomes[name]
        assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), (name, outcome.message[-800:])
        assert "an object the candidate rebuilt (Template)" in outcome.message, (name, outcome.message[-800:])


def test_an_object_the_candidate_rebuilt_never_goes_back_as_a_handle(split_engine: Engine) -> None:
    """An object rebuilt from the candidate's state that cannot go back by value (its nesting
    fits a reply but not a call, one level deeper) fails the call instead of going back as a
    handle: passed back, the judge's object would reach what a view lends (`dict.update` would
    run its library's `keys()` there)."""
    program = """
        import string


        def solve(step, token=None, registry=None):
            if step == "make":
                token, pad = string.Template("$x"), []
                for _ in range(297):
                    pad = [pad]
                token.pad = pad
                return token
            registry.update(token)
            return registry
    """
    result = run(split_engine, program, """
        class Registry(dict):
            pass


        def test_round_trip():
            token = solve("make")
            assert token.template == "$x"
            solve("use", token, Registry())
    """, "solve", trusted_program=dedent(program))
    [outcome] = result.tests
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
    assert "crosses back by value or not at all" in outcome.message, outcome.message[-800:]


@pytest.mark.parametrize(("given", "change", "left_alone"), [
    ("os.environ", 'state["KB_PLANTED"] = "/planted"', '"KB_PLANTED" not in os.environ'),
    ("sys.path", 'state.insert(0, "/planted")', '"/planted" not in sys.path'),
    ("rebound()", 'state.insert(0, "/planted")', '"/planted" not in sys.path'),
    ('{"argv": sys.argv, "n": [1]}', 'state["argv"].append("--planted"); state["n"].append(2)',
     '"--planted" not in sys.argv'),
    ('[{"words": keyword.kwlist}]', 'state[0]["words"].append("planted")', '"planted" not in keyword.kwlist'),
    ("imported()", 'state[60] = "planted"',
     'importlib.import_module("html.entities").codepoint2name[60] == "lt"'),
    ("table()[:5]", "state[0] = 99", "table()[0] == 0"),
    ('{"cmd": ("prog", sys.argv)}', 'state["cmd"][1].append("--planted")', '"--planted" not in sys.argv'),
    ('numpy.frombuffer(table("BUFFER"), dtype="u1")', "state[0] = 99", 'table("BUFFER")[0] == 0'),
    ("pandas.DataFrame(table().reshape(5, 2), copy=False)", "state.iloc[0, 0] = 99", "table()[0] == 0"),
], ids=["environ", "sys-path", "sys-path-rebound-after-a-first-replay", "nested-in-a-dict",
        "nested-deeper", "a-module-imported-after-a-first-replay", "a-view-of-a-librarys-array",
        "in-a-tuple-in-a-dict", "an-array-over-a-librarys-buffer", "a-frame-over-a-librarys-array"])
def test_a_change_to_the_judges_process_state_is_never_replayed(split_engine: Engine, given: str, change: str,
                                                                left_alone: str) -> None:
    """What the candidate changes in an argument is made in the tests' object too, but never in
    what a module of the judge's process holds: `os.environ` would choose the programs the
    tests' subprocesses run (`PATH`), `sys.path` what the tests import. The call fails instead,
    also where such an object is held by a container passed in, and for a module imported after
    the first change was replayed."""
    result = run(split_engine, f"""
        def plant(state):
            {change}
            return True
    """, f"""
        import importlib
        import keyword
        import os
        import sys

        import numpy
        import pandas


        def rebound():
            assert plant([])  # a change replayed first, into the tests' own list
            sys.path = list(sys.path)
            return sys.path


        def table(name="TABLE"):  # a library's array and buffer
            import types
            if "kb_table" not in sys.modules:
                sys.modules["kb_table"] = types.ModuleType("kb_table")
                sys.modules["kb_table"].TABLE = numpy.arange(10)
                sys.modules["kb_table"].BUFFER = bytearray(8)
            return getattr(sys.modules["kb_table"], name)


        def imported():
            assert plant({{}})  # a change replayed first, into the tests' own dict
            assert "html.entities" not in sys.modules
            return importlib.import_module("html.entities").codepoint2name


        def test_plant():
            assert plant({given})


        def test_left_alone():
            assert {left_alone}
    """, "plant")
    planted, left = result.tests
    assert (planted.status, planted.reason) == ("error", "cannot-cross"), planted.message[-800:]
    assert "cannot be made in the tests' process too" in planted.message, planted.message[-800:]
    assert left.status == "pass", left.message[-800:]


HANDS_ON = """
    def use(thing, how):
        try:
            if how == "parents":
                thing.parents["KB_PLANTED"] = "/planted"
            elif how == "update":
                thing.update({"planted": 1})
            elif how == "read":
                return [thing["a"], thing.parents["b"], sorted(thing.keys())]
            elif how == "hash":
                return [hash(thing), len({thing, thing})]
            elif how == "proxy":
                registry, proxy = thing
                registry.update(proxy)
            elif how == "len":
                return [len(thing), thing[1], list(thing)]
        except Exception as error:
            return type(error).__name__
        return "done"
"""


@pytest.mark.parametrize(("setup", "how", "check"), [
    # a ChainMap of the tests layered over os.environ: its `parents` is one whose first map is it
    ("import collections, os\nclass Settings(collections.ChainMap):\n    pass\n"
     "thing = Settings({'mode': 'test'}, os.environ)", "parents", "'KB_PLANTED' not in os.environ"),
    # a mixin of collections.abc on a library base calls that base's item methods
    ("import dbm.dumb, shelve, tempfile\nclass Store(shelve.Shelf):\n    pass\n"
     "thing = Store(dbm.dumb.open(tempfile.mkdtemp() + '/db', 'c'))\nthing['victim'] = 'kept'",
     "update", "'planted' not in thing and thing['victim'] == 'kept'"),
    # a builtin wrapper of a library's object, passed back, is that object's code again
    ("import dbm.dumb, shelve, tempfile, types\nclass Registry(dict):\n    pass\n"
     "shelf = shelve.Shelf(dbm.dumb.open(tempfile.mkdtemp() + '/db', 'c'))\nshelf['secret'] = 1\n"
     "thing = (Registry(), types.MappingProxyType(shelf))", "proxy", "len(thing[0]) == 0"),
], ids=["chainmap-over-environ", "mixin-update-of-a-library-base", "builtin-wrapper-of-a-library-object"])
def test_container_code_runs_only_on_what_hands_its_work_to_the_tests_or_builtins(
        split_engine: Engine, setup: str, how: str, check: str) -> None:
    """A builtin container's or `collections`' code that a view runs (or lends) calls what the
    tests' object holds and what its bases define: it runs only where those are the tests' or
    a builtin container's. A `ChainMap` over `os.environ`, a mixin of `collections.abc` under
    a library's base (`shelve.Shelf`) are refused, and nothing happens in the judge."""
    result = run(split_engine, HANDS_ON, f"""
        import os

{indent(setup, " " * 8)}


        def test_use():
            use(thing, {how!r})


        def test_nothing_happened():
            assert {check}
    """, "use")
    used, nothing = result.tests
    assert (used.status, used.reason) == ("error", "cannot-cross"), used.message[-800:]
    assert nothing.status == "pass", nothing.message[-800:]


def test_container_code_still_serves_what_holds_only_the_tests_and_builtins(split_engine: Engine) -> None:
    """The same operations on a `ChainMap` of plain dicts, and an identity hash, answer as
    in-process (the hash is the view's, in the candidate's process: the judge's would be the
    object's address); any other hash arrives as a digest under the judge's key."""
    result = run(split_engine, HANDS_ON, """
        import collections


        class Settings(collections.ChainMap):
            pass


        class Table(dict):
            __hash__ = object.__hash__


        def test_read():
            assert use(Settings({"a": 1}, {"b": 2}), "read") == [1, 2, ["a", "b"]]


        def test_hash():
            table = Table()
            value, count = use(table, "hash")
            assert count == 1 and value not in (hash(table), id(table))


        def test_slotted():  # (no __dict__ of its own)
            assert use(collections.namedtuple("Error", "code message")(1, "x"), "len") == [2, "x", [1, "x"]]


        def test_keyed_hash():  # (a tuple's hash can be undone item by item: None's is its address)
            pair = collections.namedtuple("Pair", "empty function")(None, test_keyed_hash)
            value, count = use(pair, "hash")
            assert count == 1 and value not in (hash(pair), hash(None), id(None))
    """, "use")
    assert [t.status for t in result.tests] == ["pass"] * 4, [t.message[-800:] for t in result.tests]


def test_a_log_record_carries_only_what_the_candidates_side_sends(split_engine: Engine) -> None:
    """A record the candidate's process hands the tests' handlers carries plain attributes,
    and values decoded as any of its values are: no `exc_info` of its making (a traceback
    rebuilt from state whose file name the formatter would open with the judge's rights), no
    class the tests never sent (`subprocess.Popen`)."""
    program = """
        import logging
        import subprocess
        import sys


        class Node:
            pass


        def forge(path):
            split = sys.modules["knowbench_split"]
            number = next(h.number for h in logging.root.handlers if hasattr(h, "number"))

            def bag(**state):
                made = Node()
                vars(made).update(state)
                return made

            frame = bag(f_code=bag(co_filename=path, co_name="leak"), f_globals={})
            traceback = bag(tb_frame=frame, tb_lineno=1, tb_lasti=-1, tb_next=None)
            attributes = {"name": "root", "levelno": 40, "levelname": "ERROR",
                          "exc_info": (None, None, traceback), "exc_text": "made up"}
            extras = {"factory": split.wire.dumps(subprocess.Popen), "kept": split.wire.dumps([1])}
            split._LOG_PENDING.append((number, (attributes, extras, None, "hello", None)))
            return True
    """
    result = run(split_engine, program, """
        import os


        def test_record(caplog):
            secret = os.path.join(os.path.expanduser("~"), "judge-only.txt")
            with open(secret, "w") as handle:
                handle.write("TOP-SECRET-LINE")
            assert forge(secret)
            [record] = [found for found in caplog.records if found.getMessage() == "hello"]
            assert record.exc_info is None and record.exc_text is None and record.kept == [1]
            assert not hasattr(record, "factory") and "TOP-SECRET-LINE" not in caplog.text
    """, "forge", trusted_program=dedent(program))
    [outcome] = result.tests
    assert outcome.status == "pass", outcome.message[-800:]


def test_a_warning_names_a_file_of_the_candidates_only_where_it_is_its_program(split_engine: Engine) -> None:
    """A warning the candidate raises is raised again in the tests' process under its own file
    name only for the candidate's program; any other path is one the judge would open to show
    the warning's line, so it becomes a name no one opens (`<candidate>/...`)."""
    result = run(split_engine, """
        import warnings


        def warn(path):
            warnings.warn("own")
            warnings.warn_explicit("elsewhere", UserWarning, path, 1)
            return True
    """, """
        import warnings


        def test_warned():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert warn("/etc/hostname")
            assert [w.filename for w in caught] == ["solution.py", "<candidate>/hostname"]
    """, "warn")
    [outcome] = result.tests
    assert outcome.status == "pass", outcome.message[-800:]


@pytest.mark.parametrize("use", [
    'solve("use", History([made])) is False',
    'solve("partial", functools.partial(History([made]).count)) == 0',
    'solve("use", History([types.MappingProxyType({"frame": made})])) is False',
], ids=["kept-in-a-list", "through-a-partial", "inside-a-builtin-holder"])
def test_container_code_never_runs_on_what_the_candidate_rebuilt_and_the_tests_kept(split_engine: Engine,
                                                                                     use: str) -> None:
    """A result the tests keep in their own container (an object of a library's class the
    candidate rebuilt from its state) never meets container code the candidate has served,
    however it is kept or served (a partial of a method, a `MappingProxyType` the walk cannot
    read): `list.__contains__` would run `traceback.FrameSummary.__eq__`, which reads the file
    the candidate named with the judge's rights."""
    program = """
        import traceback


        def solve(step, history=None, path=None):
            probe = ("x", 1, "leak", "TOP-SECRET-LINE")
            if step == "make":
                return traceback.FrameSummary(path, 1, "leak", lookup_line=False)
            if step == "partial":
                return history(probe)
            return probe in history or {"frame": probe} in history
    """
    result = run(split_engine, program, f"""
        import functools
        import os
        import types


        class History(list):
            pass


        def test_history():
            secret = os.path.join(os.path.expanduser("~"), "judge-only.txt")
            with open(secret, "w") as handle:
                handle.write("TOP-SECRET-LINE")
            made = solve("make", path=secret)
            assert {use}
    """, "solve", trusted_program=dedent(program))
    [outcome] = result.tests
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
    assert "holds an object the candidate rebuilt" in outcome.message, outcome.message[-800:]


def test_a_stream_the_candidates_output_goes_to_is_never_put_back_over_it(split_engine: Engine) -> None:
    """The stream the tests' process prints to (`sys.stdout`, redirected to the tests' own
    buffer) is process state: what the candidate printed is written there first, and a copy
    of the stream put back over it would erase it. The call fails instead of passing a test
    that checks nothing else was printed."""
    result = run(split_engine, """
        def render(out):
            print("FORBIDDEN DEBUG OUTPUT")
            out.write("board")
    """, """
        import contextlib
        import io


        def test_a_change_replayed_first():  # (the table of process state is taken here)
            buffer = io.StringIO()
            render(buffer)
            assert buffer.getvalue() == "board"


        def test_render():
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                render(buffer)
            assert buffer.getvalue() == "board"
    """, "render")
    first, outcome = result.tests
    assert first.status == "pass", first.message[-800:]
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]


def test_what_the_candidates_iterator_yields_is_held_to_the_rule_for_what_it_passes_back(
        split_engine: Engine) -> None:
    """A library's object of the tests the candidate passes back reaches no code the judge
    serves, whether in the request's arguments or as an item of the candidate's iterator that
    the served code advances (`dict.update` would read the tests' open file as a pair)."""
    result = run(split_engine, """
        def solve(registry, handle):
            registry.update(item for item in [handle])
            return dict(registry)
    """, """
        import os


        class Registry(dict):
            pass


        def test_count():
            secret = os.path.join(os.path.expanduser("~"), "judge-only.txt")
            with open(secret, "w") as handle:
                handle.write("TOP-SECRET-LINE-1" + chr(10) + "TOP-SECRET-LINE-2" + chr(10))
            with open(secret) as handle:
                assert solve(Registry(), handle) == {}
    """, "solve")
    [outcome] = result.tests
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
    assert "passed back cannot be handed" in outcome.message, outcome.message[-800:]


def test_a_returned_iterator_over_an_endless_one_of_the_tests_fails_fast(split_engine: Engine) -> None:
    """The target's returned iterator is drained at the call; one that reads the tests'
    endless iterator through a view would take a round trip per item until the wall clock.
    It fails as `cannot-cross` after a bounded number of uses instead (in-process it is lazy)."""
    result = run(split_engine, """
        def evens(numbers):
            return (n for n in numbers if n % 2 == 0)
    """, """
        import itertools


        def test_endless():
            assert next(evens(itertools.count())) == 0
    """, "evens", wall_s=60.0)
    [outcome] = result.tests
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
    assert "one that reads them lazily cannot cross" in outcome.message, outcome.message[-800:]


METER = """
    class Scale:
        def __init__(self, factor):
            self.factor = factor

        def __call__(self, text):
            return self.factor * len(text)


    class Meter:
        def __init__(self, measure=len, unit=str):
            self.measure, self.unit, self.total = measure, unit, 0

        def describe(self):
            return self.unit(self.total)


    def add_to(meter, item):
        meter.total += meter.measure(item)
        return meter
"""
METER_TESTS = """
    def test_a_function_by_name():
        meter = Meter()
        add_to(meter, "abc")
        assert meter.total == 3 and meter.measure is len and add_to(meter, "ab").total == 5

    def test_a_class():
        meter = Meter(int)
        add_to(meter, "12")
        assert meter.total == 12 and meter.describe() == "12"

    def test_a_callback_of_the_tests():
        seen = []

        def measure(text):
            seen.append(text)
            return 7

        meter = Meter(measure)
        add_to(meter, "x")
        assert meter.total == 7 and meter.measure is measure and seen == ["x"]

    def test_a_callable_object():
        meter = Meter(Scale(2))
        add_to(meter, "abc")
        assert meter.total == 6 and meter.measure.factor == 2
"""


def test_what_an_object_of_the_tests_holds_crosses_both_ways(split_engine: Engine) -> None:
    """An object the tests hand the target may hold code (a function, a class, a callback of
    the tests, a callable object of the library): it crosses, and comes back changed with the
    same code in the same places."""
    result = split_engine.execute(make_request(dedent(METER), dedent(METER_TESTS), "add_to", isolation="split",
                                               trusted_program=dedent(METER)))
    assert result.isolation == "split" and len(result.tests) == 4
    assert result.status == "pass", [(t.id, t.message[-400:]) for t in result.tests if t.status != "pass"]


def test_an_object_of_a_class_the_benchmarks_program_never_imports_comes_back(split_engine: Engine) -> None:
    """The judge rebuilds classes of the packages the benchmark's program imports, and the
    classes it sent itself: a `textwrap.TextWrapper` a test hands over comes back changed."""
    result = run(split_engine, """
        def widen(wrapper):
            wrapper.width += 10
            return wrapper
    """, """
        import textwrap

        def test_widen():
            wrapper = textwrap.TextWrapper(width=5)
            assert widen(wrapper).width == 15 and wrapper.width == 15
    """, "widen")
    assert result.status == "pass", [(t.id, t.message[-400:]) for t in result.tests]


@pytest.mark.parametrize("change", [
    "meter.measure = meter.unit",  # code the judge sent, moved to another place
    "import os; meter.measure = os.getcwd",  # a function the judge never sent
    "meter.measure = lambda text: 0",  # the candidate's own function
    "meter.describe = Scale(0)",  # a callable object standing in for a method
])
def test_a_candidate_cannot_put_code_where_the_tests_put_none(split_engine: Engine, change: str) -> None:
    """What comes back may hold only the code the judge sent, in the place it sent it: the
    object's own methods would call anything else and answer for the candidate."""
    program = dedent(METER).replace("    meter.total += meter.measure(item)\n",
                                    f"    meter.total += meter.measure(item)\n    {change}\n")
    assert change in program
    result = split_engine.execute(make_request(program, dedent(METER_TESTS), "add_to", isolation="split",
                                               trusted_program=dedent(METER)))
    assert result.isolation == "split" and len(result.tests) == 4
    assert {(t.status, t.reason) for t in result.tests} == {("error", "cannot-cross")}, result.tests
    assert all("the state of a rebuilt object cannot hold" in t.message for t in result.tests)


SORT_BY = """
    from collections import UserList


    def sort_by(items, key):
        return UserList(sorted(items, key=key))
"""
# Code hidden in a slice (which the check does not look into) is sent on by the judge when it
# hands the object to the test's callback: noted there, it would let the next reply hold it in
# the open, and `UserList.__eq__` would call the candidate's function with the expected value.
SORT_BY_LAUNDERING = """
    from collections import UserList


    def agree(other):
        return ["whatever"]


    def sort_by(items, key):
        bait = UserList()
        bait._UserList__cast = slice(agree, agree, None)
        try:
            key(bait)
        except Exception:
            pass
        out = UserList(["whatever"])
        out._UserList__cast = agree
        return out
"""


@pytest.mark.parametrize(("program", "honest"), [(SORT_BY, True), (SORT_BY_LAUNDERING, False)],
                         ids=["honest", "laundering"])
def test_code_hidden_where_the_check_does_not_look_never_comes_back_in_the_open(
        split_engine: Engine, program: str, honest: bool) -> None:
    result = split_engine.execute(make_request(dedent(program), dedent("""
        def test_sort_by_key():
            assert sort_by(UserList([3, 9, 5, 7]), key=lambda x: -x) == UserList([9, 7, 5, 3])
    """), "sort_by", isolation="split", trusted_program=dedent(SORT_BY)))
    assert result.isolation == "split"
    if honest:
        assert result.status == "pass", result.tests
    else:
        [outcome] = result.tests
        assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome
        assert "UserList._UserList__cast: the state of a rebuilt object cannot hold" in outcome.message


def test_a_callback_from_the_tests_is_called_in_the_judge(split_engine: Engine) -> None:
    program = "def add(items, key):\n    return sorted(items, key=key)\n"
    tests = """
        def test_callback():
            seen = []

            def key(item):
                seen.append(item)
                return -item

            assert add([1, 3, 2], key) == [3, 2, 1]
            assert sorted(seen) == [1, 2, 3]  # ran here, in the tests' own process
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


def test_a_callback_that_raises_shows_the_candidate_no_line_of_the_tests(split_engine: Engine) -> None:
    """The exception crosses (the target may catch it), the test's source lines do not, nor the
    message of a test's assertion (it names what the tests expect)."""
    program = """
        import traceback


        def add(items, key, catch=ValueError):
            try:
                return sorted(items, key=key)
            except catch as error:
                return [str(error), getattr(error, "knowbench_remote_frames", ""), traceback.format_exc()]
    """
    tests = """
        EXPECTED = "cc1f5e-expected"


        def test_callback():
            def key(item):
                raise ValueError("no key")  # EXPECTED is cc1f5e-expected

            message, frames, text = add([1, 2], key)
            assert message == "no key"
            assert "cc1f5e" not in frames + text, frames + text


        def test_assertion_in_a_callback():
            def key(item):
                assert item == 7, f"expected {EXPECTED}"
                return item

            caught = add([1, 2], key, catch=AssertionError)
            assert caught[0] == "" and "cc1f5e" not in "".join(caught), caught


        class Mismatch(Exception):
            pass


        def raising(make):
            def key(item):
                raise make()
            return key


        def test_a_testing_frameworks_failure_in_a_callback():  # not an Exception
            caught = add([1, 2], raising(lambda: pytest.fail.Exception(f"expected {EXPECTED}")),
                         catch=BaseException)
            assert "cc1f5e" not in "".join(caught), caught


        def test_the_tests_own_exception_in_a_callback():
            caught = add([1, 2], raising(lambda: Mismatch(f"expected {EXPECTED}")), catch=Exception)
            assert "cc1f5e" not in "".join(caught), caught


        def test_an_assertion_in_a_group_in_a_callback():
            caught = add([1, 2], raising(lambda: ExceptionGroup("g", [AssertionError(f"expected {EXPECTED}")])),
                         catch=Exception)
            assert "cc1f5e" not in "".join(caught), caught
    """
    result = run(split_engine, program, "import pytest\n" + dedent(tests))
    assert result.status == "pass", [t.message for t in result.tests if t.status != "pass"]
    assert len(result.tests) == 5


def test_a_returned_decorator_wraps_a_test_function(split_engine: Engine) -> None:
    program = """
        import functools


        def add(times):
            def decorate(function):
                @functools.wraps(function)
                def wrapper(*args):
                    return [function(*args) for _ in range(times)]
                return wrapper
            return decorate
    """
    tests = """
        def test_decorator():
            calls = []

            def greet(name):
                calls.append(name)
                return "hi " + name

            assert add(2)(greet)("ada") == ["hi ada", "hi ada"]
            assert calls == ["ada", "ada"]
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


def test_warnings_reach_the_tests(split_engine: Engine) -> None:
    program = """
        import warnings


        def add(a, b):
            warnings.warn("add is old", DeprecationWarning, stacklevel=2)
            return a + b
    """
    tests = """
        import pytest


        def test_warns():
            with pytest.warns(DeprecationWarning, match="old"):
                assert add(1, 2) == 3
    """
    result = run(split_engine, program, tests, preload=["pytest"])
    assert result.status == "pass", result.tests[0].message


def test_a_returned_decorator_can_decorate_a_method(split_engine: Engine) -> None:
    program = """
        def add(function):
            def wrapper(*args):
                return ("wrapped", function(*args))
            return wrapper
    """
    tests = """
        class TestMethods:
            @add
            def helper(self, value):
                return value * 2

            def test_bound(self):
                assert self.helper(21) == ("wrapped", 42)
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


def test_direct_invocation_gives_each_test_a_fresh_judge(split_engine: Engine) -> None:
    """Each item runs in its own fork of the judge; the candidate's process answers them all."""
    tests = """
        import unittest

        SEEN = []

        class TestAdd(unittest.TestCase):
            def setUp(self):
                raise RuntimeError("a script that calls the test never runs setUp")

            def test_a(self):
                SEEN.append("a")
                self.assertEqual((add(1, 1), SEEN), (2, ["a"]))

            def test_b(self):
                SEEN.append("b")
                self.assertEqual((add(2, 2), SEEN), (4, ["b"]))
    """
    result = run(split_engine, ADD, tests, invocation="direct")
    assert [(t.status, t.called) for t in result.tests] == [("pass", True), ("pass", True)], result.tests


COUNTING_ADD = dedent("""
    import os

    CALLS = []


    def add(a, b):
        if a < 0:
            os._exit(3)
        CALLS.append(1)
        return a + b + len(CALLS) - 1  # right only on the first call of a fresh process
""")


def test_direct_invocation_gives_each_test_a_fresh_candidate(split_engine: Engine) -> None:
    """As DomainEval loaded the candidate's code again for every test script."""
    tests = "def test_a():\n    assert add(1, 1) == 2\n\n\ndef test_b():\n    assert add(2, 2) == 4\n"
    direct = run(split_engine, COUNTING_ADD, tests, invocation="direct")
    assert [t.status for t in direct.tests] == ["pass", "pass"], direct.tests
    shared = run(split_engine, COUNTING_ADD, tests)
    assert [t.status for t in shared.tests] == ["pass", "fail"], shared.tests


def test_direct_invocation_survives_a_candidate_that_dies_in_one_test(split_engine: Engine) -> None:
    tests = ("def test_dies():\n    assert add(-1, 1) == 0\n\n\n"
             "def test_after():\n    assert add(2, 2) == 4\n")
    result = run(split_engine, COUNTING_ADD, tests, invocation="direct")
    assert [(t.status, t.reason) for t in result.tests] == [("error", "candidate-died"), ("pass", None)], \
        result.tests
    assert "exit code 3" in result.tests[0].message


def test_direct_invocation_reports_a_candidate_copy_that_exits_cleanly(split_engine: Engine) -> None:
    program = "import os\n\n\ndef add(a, b):\n    if a < 0:\n        os._exit(0)\n    return a + b\n"
    tests = "def test_exits():\n    assert add(-1, 1) == 0\n\n\ndef test_after():\n    assert add(2, 2) == 4\n"
    result = run(split_engine, program, tests, invocation="direct", wall_s=20)
    assert [(t.status, t.reason) for t in result.tests] == [("error", "candidate-died"), ("pass", None)], \
        result.tests



def test_the_servers_warm_up_of_the_wire_imports_nothing() -> None:
    """A fork server makes a round of split calls of its own before forking (numpy and pandas
    values among them when it preloaded those): every sample's process then starts with the
    modules the server preloaded, and no other."""
    probe = dedent("""
        import sys

        import numpy
        import pandas

        import knowbench_runner
        import knowbench_split

        before = set(sys.modules)
        answered = knowbench_split.warm_up()
        print(sorted(set(sys.modules) - before))
        print(sorted(set(answered)), len(answered))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=RUNNER_DIR,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    imported, answered = done.stdout.strip().splitlines()
    assert imported == "[]"
    assert answered.startswith("['raise', 'return']"), answered  # answered as calls, not refused


# What the candidate's process cannot see of the tests', or did that cannot be made in the
# tests' process too, fails the call (`cannot-cross`) instead of being dropped: otherwise a
# wrong program would pass a test that checks something did not happen.

PRINTS_AND_REMOVES = """
    import os


    def add(a, b):
        print("noise")
        os.environ.get("HOME")
        try:
            os.remove("/nonexistent/knowbench")
        except OSError:
            pass
        return a + b
"""
PATCHING_TESTS = {
    "monkeypatch": """
        def test_no_print(monkeypatch):
            printed = []
            monkeypatch.setattr("builtins.print", lambda *args, **kwargs: printed.append(args))
            assert add(1, 2) == 3
            assert printed == []
    """,
    "mock-decorator": """
        from unittest import mock


        @mock.patch("os.remove")
        def test_no_remove(fake_remove):
            assert add(1, 2) == 3
            fake_remove.assert_not_called()
    """,
    "mock-context": """
        import os
        from unittest import mock


        def test_no_remove():
            with mock.patch.object(os, "remove") as fake_remove:
                assert add(1, 2) == 3
            fake_remove.assert_not_called()
    """,
    "mock-started": """
        import os
        import unittest
        from unittest import mock


        class TestAdd(unittest.TestCase):
            def setUp(self):
                self.patcher = mock.patch.object(os, "remove")
                self.fake_remove = self.patcher.start()
                self.addCleanup(self.patcher.stop)

            def test_no_remove(self):
                self.assertEqual(add(1, 2), 3)
                self.fake_remove.assert_not_called()
    """,
    "by-hand": """
        import os


        def test_no_remove():
            removed = []
            original, os.remove = os.remove, removed.append
            try:
                assert add(1, 2) == 3
            finally:
                os.remove = original
            assert removed == []
    """,
    "by-hand-setattr": """
        import os as system


        class TestAdd:
            def setup_method(self):
                self.removed, self.original = [], system.remove
                setattr(system, "remove", self.removed.append)

            def teardown_method(self):
                system.remove = self.original

            def test_no_remove(self):
                assert add(1, 2) == 3
                assert self.removed == []
    """,
    "by-hand-computed-name": """
        import os


        def test_no_remove():
            removed, saved = [], {}
            for name in ("remove", "unlink"):
                saved[name] = getattr(os, name)
                setattr(os, name, removed.append)
            try:
                assert add(1, 2) == 3
            finally:
                for name, value in saved.items():
                    setattr(os, name, value)
            assert removed == []
    """,
    "by-hand-builtins": """
        def test_no_print():
            printed = []
            original, __builtins__.print = print, lambda *args, **kwargs: printed.append(args)
            try:
                assert add(1, 2) == 3
            finally:
                __builtins__.print = original
            assert printed == []
    """,
    "by-hand-top-level": """
        import os

        REMOVED = []
        os.remove = REMOVED.append


        def test_no_remove():
            assert add(1, 2) == 3
            assert REMOVED == []
    """,
    "mocker": """
        def test_no_remove(mocker):
            fake_remove = mocker.patch("os.remove")
            assert add(1, 2) == 3
            fake_remove.assert_not_called()
    """,
}


# The hand-made spy again, spelled otherwise: through the program's own `os` (no import of the
# tests'), and through an alias.
PATCHING_TESTS["by-hand-programs-os"] = PATCHING_TESTS["by-hand"].replace("        import os\n\n\n", "")
PATCHING_TESTS["by-hand-alias"] = (PATCHING_TESTS["by-hand"].replace("import os\n", "import os\n\n        fs = os\n")
                                   .replace("os.remove", "fs.remove"))


@pytest.mark.parametrize("style", sorted(PATCHING_TESTS))
def test_a_call_made_while_the_tests_patch_something_cannot_cross(split_engine: Engine, style: str) -> None:
    """A patch lives in the tests' process: the candidate's code would run unpatched, so a
    test that checks the patched thing was not used would pass any program."""
    result = run(split_engine, PRINTS_AND_REMOVES, PATCHING_TESTS[style], preload=["pytest"],
                 trusted_program=dedent(PRINTS_AND_REMOVES))  # (the benchmark's program imports os too)
    [test] = result.tests
    assert test.status == "error" and test.reason == "cannot-cross", test
    assert "patch" in test.message and "in-process" in test.message
    # the same tests in-process: the patch reaches the program
    result = split_engine.execute(make_request(dedent(PRINTS_AND_REMOVES), dedent(PATCHING_TESTS[style]),
                                               "add", preload=["pytest"]))
    assert result.tests[0].status == ("fail" if style in ("monkeypatch", "mock-decorator", "by-hand", "mock-started",
                                                          "by-hand-setattr", "mock-context", "mocker",
                                                          "by-hand-programs-os", "by-hand-computed-name",
                                                          "by-hand-builtins", "by-hand-top-level",
                                                          "by-hand-alias")
                                      else "pass")


def test_a_patch_undone_before_the_call_lets_it_cross(split_engine: Engine) -> None:
    tests = """
        import os
        from unittest import mock


        def test_after(monkeypatch):
            with mock.patch.object(os, "remove"):
                pass
            monkeypatch.setenv("KNOWBENCH_FLAG", "1")
            monkeypatch.undo()
            assert add(1, 2) == 3
    """
    result = run(split_engine, PRINTS_AND_REMOVES, tests, preload=["pytest"])
    assert result.status == "pass", result.tests[0].message


# The environment and the working directory are one process's in-process: the tests' changes
# reach the target.
READS_THE_ENVIRONMENT = """
    import os

    os.environ.setdefault("KNOWBENCH_MODE", "own")  # the program's own, set as it loads


    def add(a, b, export=None):
        if export is not None:
            os.environ[export[0]] = export[1]
        scale = int(os.environ.get("KNOWBENCH_SCALE", "1"))
        return ((a + b) * scale, os.environ.get("KNOWBENCH_MODE"), os.environ.get("KNOWBENCH_TOP"),
                os.getcwd(), os.environ.get("KNOWBENCH_EXPORTED"))
"""
# The benchmark's own program: the same context code, a target that reads nothing.
READS_NOTHING = """
    import os

    os.environ.setdefault("KNOWBENCH_MODE", "own")


    def add(a, b, export=None):
        return ((a + b), None, None, "", None)
"""
ENVIRONMENT_TESTS = """
    import os
    from unittest import mock

    import pytest

    os.environ["KNOWBENCH_TOP"] = "set-up"  # the spec's top level


    def test_monkeypatch_setenv(monkeypatch):
        monkeypatch.setenv("KNOWBENCH_SCALE", "10")
        assert add(1, 2)[0] == 30


    def test_the_programs_own_value_comes_back(monkeypatch):
        assert os.environ["KNOWBENCH_MODE"] == "own"
        assert add(0, 0)[1] == "own"
        monkeypatch.setenv("KNOWBENCH_MODE", "tests")
        assert add(0, 0)[1] == "tests"
        monkeypatch.undo()
        assert add(0, 0)[1] == "own"
        monkeypatch.delenv("KNOWBENCH_MODE")
        assert add(0, 0)[1] is None
        monkeypatch.undo()
        assert add(0, 0)[1] == "own"


    def test_pytests_own_monkeypatch():
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("KNOWBENCH_SCALE", "4")
            assert add(1, 1)[0] == 8
        assert add(1, 1)[0] == 2


    def test_mock_patch_dict():
        with mock.patch.dict(os.environ, {"KNOWBENCH_SCALE": "3"}):
            assert add(1, 1)[0] == 6
        with mock.patch.dict(os.environ, clear=True):
            assert add(1, 1)[:2] == (2, None)
        assert add(1, 1)[:2] == (2, "own")


    def test_by_hand():
        os.environ["KNOWBENCH_SCALE"] = "5"
        try:
            assert add(1, 1)[0] == 10
        finally:
            del os.environ["KNOWBENCH_SCALE"]
        assert add(1, 1)[0] == 2


    def test_the_specs_set_up():
        assert add(0, 0)[2] == "set-up"


    def test_chdir(monkeypatch, tmp_path):
        start = os.getcwd()
        assert add(0, 0)[3] == start
        monkeypatch.chdir(tmp_path)
        assert add(0, 0)[3] == str(tmp_path)
        monkeypatch.undo()
        assert add(0, 0)[3] == start
"""


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_the_environment_and_the_working_directory_are_shared_with_the_target(split_engine: Engine,
                                                                                isolation: str) -> None:
    assert_all_pass(split_engine, READS_THE_ENVIRONMENT, ENVIRONMENT_TESTS, isolation, READS_NOTHING,
                    preload=["pytest"])
    # A program that reads none of it fails the tests that need it.
    ignores = READS_THE_ENVIRONMENT.replace('int(os.environ.get("KNOWBENCH_SCALE", "1"))', "1")
    result = split_engine.execute(make_request(dedent(ignores), dedent(ENVIRONMENT_TESTS), "add",  # type: ignore[arg-type]
                                               isolation=isolation, trusted_program=dedent(READS_NOTHING),
                                               preload=["pytest"]))
    assert sorted(t.id.rsplit(":", 1)[-1] for t in result.tests if t.status != "pass") == [
        "test_by_hand", "test_mock_patch_dict", "test_monkeypatch_setenv", "test_pytests_own_monkeypatch"]


def test_a_view_the_candidate_refused_is_sent_again(split_engine: Engine) -> None:
    """A request the candidate's process could not rebuild (a class only the benchmark's program
    defines) never reached its state: the next call carries the tests' changes again."""
    trusted = """
        import os


        class Point:
            def __init__(self, x):
                self.x = x


        def add(a=None, b=None):
            return os.environ.get("KNOWBENCH_TOP")
    """
    program = 'import os\n\n\ndef add(a=None, b=None):\n    return os.environ.get("KNOWBENCH_TOP")\n'
    tests = """
        import os

        os.environ["KNOWBENCH_TOP"] = "top"


        def test_refused():
            add(Point(1))


        def test_later():
            assert add() == "top"
    """
    result = run(split_engine, program, tests, trusted_program=dedent(trusted))
    assert [(t.status, t.reason) for t in result.tests] == [("error", "cannot-cross"), ("pass", None)], result.tests


TIME_ZONE_TESTS = """
    import time


    def test_time_zone(monkeypatch):
        monkeypatch.setenv("TZ", "UTC0")
        time.tzset()
        assert add(0, 0) == "00"
        monkeypatch.setenv("TZ", "JST-9")
        time.tzset()
        assert add(0, 0) == "09"
        monkeypatch.setenv("TZ", "UTC0")
        time.tzset()
        assert add(0, 0) == "00"
        monkeypatch.undo()
        time.tzset()
"""


# The time zone is the tests' last `time.tzset()`'s: setting TZ alone changes nothing, and
# putting TZ back without it keeps the zone set (in-process, glibc reads TZ at tzset only).
TIME_ZONE_LATER_TESTS = """
    import os
    import time


    def test_set_by_the_first_test(monkeypatch):
        monkeypatch.setenv("TZ", "JST-9")
        time.tzset()
        assert add(0, 0) == "09"


    def test_kept_after_the_undo():
        assert add(0, 0) == "09" == time.strftime("%H", time.localtime(0))


    def test_tz_alone_changes_nothing(monkeypatch):
        monkeypatch.setenv("TZ", "UTC0")
        assert add(0, 0) == "09"
        time.tzset()
        assert add(0, 0) == "00"
"""


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_time_zone_the_tests_set_holds_for_the_target(split_engine: Engine, isolation: str) -> None:
    program = 'import time\n\n\ndef add(a, b):\n    return time.strftime("%H", time.localtime(a + b))\n'
    assert_all_pass(split_engine, program, TIME_ZONE_TESTS, isolation, program)
    assert_all_pass(split_engine, program, TIME_ZONE_LATER_TESTS, isolation, program)


TZSET_BOUND_BY_THE_PROGRAM = """
    from time import tzset  # bound as the program loads, before any test
    import os
    import time


    def add(a, b, zone=None):
        if zone is not None:  # the target sets a zone of its own, and leaves TZ as it found it
            saved = os.environ.get("TZ")
            os.environ["TZ"] = zone
            time.tzset()
            hour = time.localtime(a + b).tm_hour
            os.environ["TZ"] = saved
            return hour
        return time.localtime(a + b).tm_hour
"""
TZSET_TESTS = """
    import os


    def test_the_programs_tzset(monkeypatch):
        monkeypatch.setenv("TZ", "JST-9")
        tzset()
        assert add(0, 0) == 9


    def test_the_same_zone_set_again(monkeypatch):
        monkeypatch.setenv("TZ", "JST-9")
        tzset()
        assert add(0, 0, zone="UTC0") == 0
        tzset()  # the same TZ, the zone set again (the target left UTC behind)
        assert add(0, 0) == 9
        monkeypatch.setenv("TZ", "UTC0")
        tzset()
"""


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_every_tzset_of_the_tests_reaches_the_target(split_engine: Engine, isolation: str) -> None:
    """A `tzset` the benchmark's program bound as it loaded is the one the tests call; each
    call counts, the same TZ again included."""
    assert_all_pass(split_engine, TZSET_BOUND_BY_THE_PROGRAM, TZSET_TESTS, isolation, TZSET_BOUND_BY_THE_PROGRAM)


def test_a_tzset_the_candidate_replaced_is_not_the_one_its_process_calls(split_engine: Engine) -> None:
    program = """
        import time


        def tzset():
            raise RuntimeError("no")


        time.tzset = tzset


        def add(a, b):
            return time.localtime(a + b).tm_hour
    """
    tests = """
        import os
        import time


        def test_zone(monkeypatch):
            monkeypatch.setenv("TZ", "JST-9")
            time.tzset()
            assert add(0, 0) == 9
            monkeypatch.setenv("TZ", "UTC0")
            time.tzset()
            assert add(0, 0) == 0
    """
    result = run(split_engine, program, tests, trusted_program=dedent(TZSET_BOUND_BY_THE_PROGRAM))
    assert result.status == "pass", result.tests[0].message


def test_what_the_candidate_sets_in_its_environment_stays_in_its_process(split_engine: Engine) -> None:
    """Not the other way: in the tests' process the candidate's environment would choose what
    their subprocesses load (`LD_PRELOAD`) and where their temporary files go (`TMPDIR`)."""
    tests = """
        import os


        def test_exported():
            assert add(0, 0, export=("LD_PRELOAD", "/tmp/sample/evil.so"))[0] == 0
            assert "LD_PRELOAD" not in os.environ
            os.environ["KNOWBENCH_SCALE"] = "2"
            assert add(1, 1)[0] == 4
            assert "LD_PRELOAD" not in os.environ
    """
    program = READS_THE_ENVIRONMENT.replace('os.environ.get("KNOWBENCH_EXPORTED")', 'os.environ.get("LD_PRELOAD")')
    result = run(split_engine, program, tests, trusted_program=dedent(READS_NOTHING))
    assert result.status == "pass", result.tests[0].message


def test_a_working_directory_made_again_at_the_same_path_is_entered_again(split_engine: Engine) -> None:
    program = 'import os\n\n\ndef add(a, b):\n    return open("a.txt").read() if os.path.exists("a.txt") else ""\n'
    tests = """
        import os
        import shutil


        def test_again(tmp_path):
            place = tmp_path / "place"
            place.mkdir()
            os.chdir(place)
            assert add(0, 0) == ""
            os.chdir(tmp_path)
            shutil.rmtree(place)
            place.mkdir()
            os.chdir(place)
            (place / "a.txt").write_text("again")
            assert add(0, 0) == "again"
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message


def test_a_working_directory_the_candidate_cannot_enter_fails_the_call(split_engine: Engine) -> None:
    tests = """
        import os


        def test_private(tmp_path):
            private = tmp_path / "private"
            private.mkdir(mode=0o700)
            os.chdir(private)
            try:
                add(1, 2)
            finally:
                os.chdir(tmp_path)
            assert add(1, 2) == 3
    """
    result = run(split_engine, ADD, tests)
    [test] = result.tests
    assert (test.status, test.reason) == ("error", "cannot-cross"), test
    assert "working directory" in test.message
    removed = """
        import os


        def test_removed(tmp_path):
            gone = tmp_path / "gone"
            gone.mkdir()
            os.chdir(gone)
            os.rmdir(gone)
            try:
                add(1, 2)
            finally:
                os.chdir(tmp_path)
    """
    [test] = run(split_engine, ADD, removed).tests
    assert (test.status, test.reason) == ("error", "cannot-cross") and "removed" in test.message, test


def test_a_directory_the_candidate_could_not_enter_is_tried_again_whatever_else_changes() -> None:
    """After a refused directory, a view that changes only the environment still fails: the
    call must not run in the directory the candidate's process was left in."""
    probe = dedent("""
        import os
        import tempfile

        import knowbench_split as split

        start = os.getcwd()
        split._STATE["cwd"] = start
        missing = (os.path.join(tempfile.gettempdir(), "knowbench-no-such-dir"), 1, 2)
        split._take_process_state(((), missing, None))
        first = split._apply_process_state()
        split._take_process_state(((("KNOWBENCH_X", "1"),), missing, None))
        second = split._apply_process_state()
        split._take_process_state(((("KNOWBENCH_X", "1"),), None, None))
        third = split._apply_process_state()
        print(bool(first), bool(second), third, os.environ.get("KNOWBENCH_X"), os.getcwd() == start)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=RUNNER_DIR,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "None", "1", "True"]


def test_a_read_only_array_stays_read_only_in_the_candidates_process(split_engine: Engine) -> None:
    wrong = """
        def add(x, b):
            x -= x.mean()
            return x + b
    """
    right = """
        def add(x, b):
            return x - x.mean() + b
    """
    tests = """
        import numpy as np


        def test_read_only():
            x = np.arange(4.0)
            x.flags.writeable = False
            assert add(x, 0).tolist() == [-1.5, -0.5, 0.5, 1.5]
            assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    """
    failing = run(split_engine, wrong, tests, preload=["numpy"])
    assert failing.tests[0].status in ("fail", "error") and "read-only" in failing.tests[0].message
    passing = run(split_engine, right, tests, preload=["numpy"])
    assert passing.status == "pass", passing.tests[0].message


def test_lists_inside_a_tuple_argument_change_in_place(split_engine: Engine) -> None:
    program = """
        def add(pair, value):
            pair[0].append(value)
            pair[1].sort()
            return len(pair[0])
    """
    tests = """
        def test_changed():
            first, second = [1], [3, 2]
            pair = (first, second)
            assert add(pair, 5) == 2
            assert pair == ([1, 5], [2, 3]) and pair[0] is first and first == [1, 5]


        def test_unchanged():
            data = ([3, 1], [2, 0])
            add(data, 7)
            assert data == ([3, 1], [2, 0])
    """
    result = run(split_engine, program, tests)
    assert [t.status for t in result.tests] == ["pass", "fail"], result.tests


@pytest.mark.parametrize("what", ["output", "warnings"])
def test_more_output_or_warnings_than_cross_fail_the_call(split_engine: Engine, what: str) -> None:
    program = {"output": """
        def add(a, b):
            print("x" * 70000)
            print("secret")
            return a + b
    """, "warnings": """
        import warnings


        def add(a, b):
            for n in range(1200):
                warnings.warn(f"noise {n}", UserWarning)
            warnings.warn("old", DeprecationWarning)
            return a + b
    """}[what]
    tests = """
        import warnings


        def test_quiet(capsys):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert add(1, 2) == 3
            assert "secret" not in capsys.readouterr().out
            assert not any(issubclass(w.category, DeprecationWarning) for w in caught)
    """
    result = run(split_engine, program, tests)
    [test] = result.tests
    assert test.status == "error" and test.reason == "cannot-cross", test
    assert ("printed more" if what == "output" else "different warnings") in test.message
    # within the caps, all of it crosses: the last line printed, the last warning raised
    fewer = run(split_engine, program.replace("70000", "7000").replace("1200", "120"), tests)
    assert fewer.tests[0].status == "fail" and fewer.tests[0].reason == "assertion", fewer.tests[0]


def test_an_exception_group_crosses_or_fails_the_call(split_engine: Engine) -> None:
    program = """
        def add(a, b):
            raise ExceptionGroup("several", [KeyError("a"), ValueError("b")])
    """
    tests = """
        import pytest


        def test_forged():
            with pytest.raises(TypeError):
                add(1, 2)


        def test_group():
            with pytest.raises(ExceptionGroup) as caught:
                add(1, 2)
            assert len(caught.value.exceptions) == 2
    """
    result = run(split_engine, program, tests, preload=["pytest"])
    statuses = {t.id.split("::")[-1]: (t.status, t.reason) for t in result.tests}
    assert statuses["test_forged"][0] != "pass", result.tests
    assert statuses["test_group"][0] == "pass" or statuses["test_group"][1] == "cannot-cross", result.tests


def test_a_pandas_index_keeps_its_dtype(split_engine: Engine) -> None:
    pytest.importorskip("pandas")
    program = """
        import pandas as pd


        def add(a, b):
            return pd.DataFrame({"v": [a, b]}, index=pd.Index(["x", "y"], dtype=object))
    """
    tests = """
        import pandas as pd


        def test_index():
            frame = add(1, 2)
            assert frame.index.dtype == object
            expected = pd.DataFrame({"v": [1, 2]}, index=pd.Index(["x", "y"], dtype=object))
            pd.testing.assert_frame_equal(frame, expected)
    """
    result = run(split_engine, program, tests, preload=["pandas"])
    assert result.status == "pass", result.tests[0].message


def test_a_task_whose_tests_patch_is_judged_in_process_with_the_reason(
        best_sandbox: Sandbox, tmp_path: Path) -> None:
    """--isolation auto: the reference fails split under a patch, so calibration judges the
    task in-process (and a wrong program fails it there); the task beside it stays split."""
    basic = load_benchmark(ROOT / "examples" / "basic")
    plain = FunctionTask(task_id="algorithms/plain", domain="algorithms", instruction="Add.", entry_point="add",
                         prompt_code="def add(a, b):\n    ...\n", reference="def add(a, b):\n    return a + b\n",
                         tests=[TestSpec(name="t", code=dedent(CHECK_ADD))])
    patched = plain.model_copy(update={"task_id": "algorithms/patched", "tests": [
        TestSpec(name="t", code=dedent(PATCHING_TESTS["mock-decorator"]))]})
    bench = write_benchmark(tmp_path / "bench", basic.manifest, [plain, patched])
    engine = SubprocessEngine(best_sandbox, workers=1)
    try:
        summary = run_benchmark(bench, ReferenceBackend(), get_method("none"), engine,
                                tmp_path / "run", SamplingParams(), Limits())
    finally:
        engine.close()
    modes = {r.task_id: r.execution.isolation for r in summary.results if r.execution}
    assert modes == {"algorithms/plain": "split", "algorithms/patched": "in-process"}
    assert all(r.passed for r in summary.results)
    with sqlite3.connect(tmp_path / "run" / "run.sqlite") as db:
        why = dict(db.execute("SELECT task_id, why FROM isolation WHERE mode = 'in-process'").fetchall())
    assert list(why) == ["algorithms/patched"]
    assert "cannot-cross" in why["algorithms/patched"] and "os.remove" in why["algorithms/patched"]


def test_pytests_own_monkeypatch_and_a_mock_imported_late_are_seen(split_engine: Engine) -> None:
    pytest.importorskip("pytest")
    tests = """
        import importlib
        import os

        import pytest


        def test_pytest_monkeypatch():
            with pytest.MonkeyPatch.context() as patch:
                printed = []
                patch.setattr("builtins.print", lambda *args, **kwargs: printed.append(args))
                assert add(1, 2) == 3
            assert printed == []


        def test_mock_imported_while_the_test_runs():
            mock = importlib.import_module("unittest.mock")
            with mock.patch("os.remove") as fake_remove:
                assert add(1, 2) == 3
            fake_remove.assert_not_called()
    """
    result = run(split_engine, PRINTS_AND_REMOVES, tests, preload=["pytest"])
    assert [(t.status, t.reason) for t in result.tests] == [("error", "cannot-cross")] * 2, result.tests


def test_an_array_inside_an_argument_reshaped_in_place_is_reshaped_in_the_tests(split_engine: Engine) -> None:
    program = """
        def add(arrays, value):
            arrays[0].shape = (-1, 1)
            return value
    """
    tests = """
        import numpy as np


        def test_reshaped():
            x = np.arange(6.0)
            arrays = [x]
            assert add(arrays, 1) == 1
            assert x.shape == (6, 1) and arrays[0] is x
    """
    result = run(split_engine, program, tests, preload=["numpy"])
    assert result.status == "pass", result.tests[0].message


def test_a_set_argument_left_alone_crosses_back_as_it_was(split_engine: Engine) -> None:
    program = """
        def add(items, seen, key=None):
            items.sort()
            return len(seen)


        class Names:
            def __init__(self):
                self.names = set()

            def add(self, name):
                self.names.add(name)
                return len(self.names)
    """
    tests = """
        def test_sets():
            for n in range(30):
                seen = set(range(n, 3 * n, 2)) | {"a", "b", n * 7}
                items = [3, 1, 2]
                assert add(items, seen, key=lambda item: item) == len(seen)
                assert items == [1, 2, 3]
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message
    method_tests = """
        def test_names():
            names = Names()
            for n in range(40):
                assert names.add(f"n{n}") == n + 1
            assert names.names == {f"n{n}" for n in range(40)}
    """
    result = run(split_engine, program, method_tests, entry_point="Names.add",
                 trusted_program=dedent(program))
    assert result.status == "pass", result.tests[0].message


def test_many_warnings_of_one_kind_cross_and_exception_groups_of_any_size(split_engine: Engine) -> None:
    program = """
        import warnings


        def add(a, b):
            if a == "warn":
                for _ in range(1500):
                    warnings.warn("divide by zero", RuntimeWarning)
                return b
            if a == "wide":
                raise ExceptionGroup("wide", [ValueError(n) for n in range(1500)])
            error = KeyError("inner")
            for depth in range(10):
                error = ExceptionGroup(f"level {depth}", [error])
            raise error
    """
    tests = """
        import warnings

        import pytest


        def test_warnings():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert add("warn", 3) == 3
            assert len(caught) == 1500


        def test_wide():
            with pytest.raises(ExceptionGroup) as caught:
                add("wide", 0)
            assert len(caught.value.exceptions) == 1500


        def test_deep():
            with pytest.raises(ExceptionGroup) as caught:
                add("deep", 0)
            assert caught.group_contains(KeyError, depth=10)
    """
    result = run(split_engine, program, tests, preload=["pytest"])
    assert result.status == "pass", [(t.id, t.message[-300:]) for t in result.tests if t.status != "pass"]


def test_state_of_the_tests_the_candidate_would_not_see_fails_the_call(split_engine: Engine) -> None:
    """Warnings made errors, numpy's error state, a pool the tests fork: the candidate's
    process runs without them, so the call cannot be judged split (calibration then judges the
    task in-process); a warning attributed to the target's caller points at the test."""
    program = """
        import warnings

        import numpy as np


        def add(a, b):
            warnings.warn("add is old", DeprecationWarning, stacklevel=2)
            return float(np.float64(a) / np.float64(b))
    """
    tests = """
        import multiprocessing
        import warnings

        import numpy as np


        def test_errors():
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert add(1, 2) == 0.5


        def test_errstate():
            with np.errstate(divide="raise"):
                assert add(1, 0) == float("inf")


        def test_pool():
            with multiprocessing.get_context("fork").Pool(2) as pool:
                assert pool.starmap(add, [(1, 2), (3, 4)]) == [0.5, 0.75]


        def test_warning_points_at_the_test():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert add(1, 4) == 0.25
            assert caught[0].filename == __file__, caught[0].filename
    """
    result = run(split_engine, program, tests, preload=["numpy"], wall_s=30)
    outcomes = {t.id.split("::")[-1]: (t.status, t.reason) for t in result.tests}
    assert outcomes["test_errors"] == ("error", "cannot-cross"), result.tests
    assert outcomes["test_errstate"] == ("error", "cannot-cross"), result.tests
    assert outcomes["test_pool"][0] == "error" and "process the tests started" in result.tests[2].message
    assert outcomes["test_warning_points_at_the_test"] == ("pass", None), result.tests[3].message


LOGGING_PROGRAM = """
    import logging

    log = logging.getLogger("shop")


    def add(a, b):
        if a < 0:
            log.warning("negative %s", a, extra={"user": "ann"})
        if b == 0:
            try:
                1 / b
            except ZeroDivisionError:
                log.exception("dividing by %d", b)
        log.debug("adding %r and %r", a, b)
        logging.info("root info %d", b)
        for _ in range(20000):
            log.debug("a loop's debug line, made only when the tests ask for it")
        return a + b
"""

LOGGING_TESTS = """
    import logging
    import unittest


    class Logs(unittest.TestCase):
        def test_assert_logs(self):
            with self.assertLogs("shop", level="WARNING") as seen:
                self.assertEqual(add(-1, 2), 1)
            self.assertEqual(seen.output, ["WARNING:shop:negative -1"])
            self.assertEqual(seen.records[0].user, "ann")
            self.assertEqual(seen.records[0].args, (-1,))

        def test_assert_no_logs(self):
            with self.assertNoLogs("shop", level="WARNING"):
                self.assertEqual(add(1, 2), 3)

        def test_debug_when_asked(self):
            with self.assertLogs("shop", level="DEBUG") as seen:
                add(2, 3)
            self.assertEqual(seen.output[0], "DEBUG:shop:adding 2 and 3")
            self.assertEqual(len(seen.output), 20001)


    def test_caplog(caplog):
        caplog.set_level(logging.INFO)
        add(-3, 4)
        assert [(r.name, r.levelname) for r in caplog.records] == [("shop", "WARNING"), ("root", "INFO")]
        assert "negative -3" in caplog.text


    def test_exception_info(caplog):
        add(5, 0)
        record = caplog.records[0]
        assert record.exc_info[0] is ZeroDivisionError
        assert "ZeroDivisionError: division by zero" in caplog.text
        assert record.getMessage() == "dividing by 0"


    def test_disabled(caplog):
        logging.disable(logging.CRITICAL)
        try:
            add(-1, 0)
        finally:
            logging.disable(logging.NOTSET)
        assert caplog.records == []

"""


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_log_records_reach_the_tests_loggers(split_engine: Engine, isolation: str) -> None:
    # The candidate's records are made at the levels the tests set and handled by the tests'
    # loggers: assertLogs, assertNoLogs and caplog judge split as they judge in-process.
    honest = split_engine.execute(make_request(dedent(LOGGING_PROGRAM), dedent(LOGGING_TESTS), "add",
                                               isolation=isolation))  # type: ignore[arg-type]
    assert honest.status == "pass", [(t.id, t.message[-400:]) for t in honest.tests if t.status != "pass"]
    noisy = LOGGING_PROGRAM.replace("if a < 0:", "if a < 0 or a == 1:")
    wrong = split_engine.execute(make_request(dedent(noisy), dedent(LOGGING_TESTS), "add",
                                              isolation=isolation))  # type: ignore[arg-type]
    assert [t.id.rsplit(":", 1)[-1] for t in wrong.tests if t.status != "pass"] == ["test_assert_no_logs"]


@pytest.mark.parametrize("forged", [
    "(number, ({'name': 'shop', 'levelno': 'not a level'}, None, None, 'x', None))",
    "([], ({}, None, None, 'x', None))",
])
def test_a_log_record_made_up_to_raise_in_the_tests_handlers_fails_the_call(split_engine: Engine,
                                                                             forged: str) -> None:
    # Records sent as the stand-in for caplog's handler would send them, with a level that is
    # not a number (caplog's handler compares it: TypeError in the tests' process) or a handler
    # number that is not one (a TypeError looking it up): never an exception the test takes.
    program = f"""
        import logging
        import sys


        def add(a, b):
            number = next(h.number for h in logging.root.handlers if hasattr(h, "number"))
            sys.modules["knowbench_split"]._LOG_PENDING.append({forged})
    """
    tests = """
        import pytest


        def test_rejects_strings(caplog):
            with pytest.raises(TypeError):
                add("1", 2)
    """
    result = run(split_engine, program, tests, preload=["pytest"])
    assert result.tests[0].status == "error", result.tests[0]
    assert result.tests[0].reason in ("cannot-cross", "candidate-died"), result.tests[0].message


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_the_candidates_logging_is_its_own_and_the_tests_handlers_see_its_records(split_engine: Engine,
                                                                                  isolation: str) -> None:
    # The benchmark's program (the tests' process) quiets "shop" and filters it; the candidate's
    # own handlers, levels and objects are the candidate's: as in-process, where only its
    # program is loaded.
    benchmark = """
        import logging

        logging.getLogger("shop").setLevel(logging.ERROR)
        logging.getLogger("shop").addFilter(lambda record: "secret" not in record.getMessage())


        def add(a, b):
            raise NotImplementedError
    """
    program = """
        import io
        import logging
        import threading

        log = logging.getLogger("shop")
        log.setLevel(logging.DEBUG)
        chatty = logging.getLogger("shop.chatty")
        chatty.addHandler(logging.NullHandler())
        chatty.propagate = False


        class Item:
            def __init__(self, value):
                self.value = value

            def __repr__(self):
                return f"Item({self.value})"


        def add(a, b):
            if a == "own":
                stream = io.StringIO()
                handler = logging.StreamHandler(stream)
                handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
                log.addHandler(handler)
                log.info("adding %s", b)
                log.removeHandler(handler)
                return stream.getvalue()
            if a == "chatty":
                for n in range(200_000):
                    chatty.info("step %d", n)
                return b
            if a == "later":
                threading.Timer(0.05, log.warning, ("after the call",)).start()
                return b
            items = [a]
            log.warning("items %s and %r", items, Item(b))
            items.append(b)
            log.debug("the secret is %s", b)
            return a + b
    """
    tests = """
        import logging
        import time


        def test_own_handler():
            assert add("own", 7) == "INFO adding 7\\n"


        def test_records_as_made(caplog):
            assert add(1, 2) == 3
            assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG"]
            assert "items [1] and Item(2)" in caplog.text and "the secret is 2" in caplog.text


        def test_nobody_listens():
            assert add("chatty", 5) == 5


        def test_set_level_undone(caplog):
            caplog.set_level(logging.WARNING, logger="shop")
            assert add(1, 2) == 3
            assert len(caplog.records) == 1


        def test_own_level_back(caplog):
            add(1, 2)
            assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG"]


        def test_a_thread_logs_after_the_call(caplog):
            add("later", 1)
            time.sleep(0.3)
            add(1, 2)
            assert "after the call" in caplog.messages
    """
    # (pytest 9 passes these tests too, with the candidate's program as the module they import)
    assert_all_pass(split_engine, program, tests, isolation, benchmark)


def test_a_reply_over_the_frame_cap_fails_its_call_and_later_calls_still_cross(split_engine: Engine) -> None:
    program = """
        def add(a, b):
            if a == "big":
                return b"x" * (65 * 1024 * 1024)
            return a + b
    """
    tests = """
        def test_big():
            add("big", 0)


        def test_after():
            assert add(1, 2) == 3
    """
    result = run(split_engine, program, tests)
    assert [(t.status, t.reason) for t in result.tests] == [("error", "cannot-cross"), ("pass", None)], result.tests


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_what_the_tests_set_in_the_logging_holds_for_the_candidate_during_the_test(split_engine: Engine,
                                                                                   isolation: str) -> None:
    # A level the tests set holds while their test runs, even where the benchmark's program
    # already had it; a filter they add screens the candidate's records; assertLogs' handlers
    # replace the candidate's own during its block; a generator's records are taken as it is
    # drained; structured `extra` values cross. (pytest 9 passes these tests too.)
    benchmark = """
        import logging

        logging.basicConfig(level=logging.INFO)


        def add(a, b):
            raise NotImplementedError
    """
    program = """
        import logging

        logging.getLogger().setLevel(logging.ERROR)
        log = logging.getLogger("calc")
        seen = []


        class Seen(logging.Handler):
            def emit(self, record):
                seen.append(record.getMessage())


        log.addHandler(Seen())


        def add(a, b):
            if a == "many":
                def items():
                    for n in range(b):
                        log.warning("item %d", n)
                        yield n
                return items()
            if a == "seen":
                return len(seen)
            log.warning("adding %s and %s, secret", a, b, extra={"context": {"a": [a]}, "pair": (a, b)})
            return a + b
    """
    tests = """
        import logging
        import unittest


        def test_a_level_the_benchmark_had_already(caplog):
            caplog.set_level(logging.WARNING)
            assert add(1, 2) == 3
            assert "adding 1 and 2" in caplog.text
            assert caplog.records[0].context == {"a": [1]} and caplog.records[0].pair == (1, 2)


        def test_a_filter_the_tests_add(caplog):
            caplog.set_level(logging.WARNING)
            logging.getLogger("calc").addFilter(lambda record: "secret" not in record.getMessage())
            try:
                assert add(1, 2) == 3
            finally:
                logging.getLogger("calc").filters.clear()
            assert caplog.records == []


        def test_a_generators_records(caplog):
            caplog.set_level(logging.WARNING)
            assert list(add("many", 3)) == [0, 1, 2]
            assert caplog.messages == ["item 0", "item 1", "item 2"]


        class TestBlock(unittest.TestCase):
            def test_assert_logs_replaces_the_handlers(self):
                before = add("seen", 0)
                with self.assertLogs("calc", level="WARNING"):
                    add(1, 2)
                self.assertEqual(add("seen", 0), before)
    """
    assert_all_pass(split_engine, program, tests, isolation, benchmark)


def test_what_the_tests_set_up_or_replace_harmlessly_still_crosses(split_engine: Engine) -> None:
    # Not rebindings the candidate would miss: the spec's top-level set-up (made before any test),
    # an attribute that was not there before, sys.stdout (what the candidate prints is written to
    # the tests' own), and a spy wrapped around the target itself.
    program = """
        class Counter:
            def __init__(self):
                self.count = 0

            def bump(self, by):
                print("bumped")
                self.count += by
                return self.count
    """
    tests = """
        import io
        import sys
        import unittest.util

        import pytest

        unittest.util._MAX_LENGTH = 2000


        def test_new_attribute():
            pytest.knowbench_shared = 3
            assert Counter().bump(pytest.knowbench_shared) == 3


        def test_stdout_replaced():
            saved, sys.stdout = sys.stdout, io.StringIO()
            try:
                Counter().bump(1)
                printed = sys.stdout.getvalue()
            finally:
                sys.stdout = saved
            assert printed == "bumped\\n"


        def test_spy_on_the_target():
            calls, original = [], Counter.bump

            def spy(self, by):
                calls.append(by)
                return original(self, by)

            Counter.bump = spy
            try:
                assert Counter().bump(2) == 2
            finally:
                Counter.bump = original
            assert calls == [2]
    """
    result = split_engine.execute(make_request(dedent(program), dedent(tests), "Counter.bump",
                                               isolation="split", preload=["pytest"],
                                               trusted_program=dedent(program)))
    assert result.status == "pass", [(t.id, t.message[-400:]) for t in result.tests if t.status != "pass"]


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_the_tests_save_and_restore_the_candidates_logging_not_the_benchmarks(split_engine: Engine,
                                                                              isolation: str) -> None:
    # The benchmark's program sets the root logger to INFO; the candidate's sets it to ERROR
    # and "calc" to DEBUG. What caplog and assertLogs find, change and put back is the
    # candidate's, as in-process; what a class's set-up and the spec's top level add holds
    # for all their tests. (pytest 9 and unittest pass these tests too.)
    benchmark = """
        import logging

        logging.getLogger().setLevel(logging.INFO)


        def add(a, b):
            raise NotImplementedError
    """
    program = """
        import logging

        logging.getLogger().setLevel(logging.ERROR)
        log = logging.getLogger("calc")
        log.setLevel(logging.DEBUG)


        class Conn:
            pass


        def add(a, b):
            log.info("adding %s and %s", a, b, extra={"conn": Conn(), "tags": {"x"}})
            log.debug("debug %s", a)
            return a + b
    """
    tests = """
        import logging
        import unittest

        SEEN = []


        class Keep(logging.Handler):
            def emit(self, record):
                SEEN.append(record.getMessage())


        logging.getLogger("calc").addHandler(Keep())


        def test_root_is_the_candidates(caplog):
            assert add(1, 2) == 3
            assert [r.levelname for r in caplog.records] == ["INFO", "DEBUG"]  # through "calc"
            assert caplog.records[0].tags == {"x"}


        def test_at_level_puts_back_the_candidates(caplog):
            with caplog.at_level(logging.WARNING, logger="calc"):
                add(1, 2)
            assert caplog.records == []
            add(2, 3)
            assert [r.getMessage() for r in caplog.records] == ["adding 2 and 3", "debug 2"]


        def test_the_top_levels_handler_holds():
            SEEN.clear()
            add(3, 4)
            assert SEEN == ["adding 3 and 4", "debug 3"]


        class TestSetUpClass(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.seen = []
                cls.handler = logging.Handler()
                cls.handler.emit = lambda record: cls.seen.append(record.levelname)
                logging.getLogger("calc").addHandler(cls.handler)

            @classmethod
            def tearDownClass(cls):
                logging.getLogger("calc").removeHandler(cls.handler)

            def test_a(self):
                add(1, 1)
                self.assertEqual(self.seen[-2:], ["INFO", "DEBUG"])

            def test_b(self):
                add(2, 2)
                self.assertEqual(self.seen[-2:], ["INFO", "DEBUG"])
    """
    assert_all_pass(split_engine, program, tests, isolation, benchmark, preload=["pytest"])


def test_a_spy_wrapped_around_the_target_through_its_module_crosses(split_engine: Engine) -> None:
    tests = """
        import solution


        def test_spy():
            calls, original = [], solution.add

            def spy(a, b):
                calls.append((a, b))
                return original(a, b)

            solution.add = spy
            try:
                assert solution.add(1, 2) == 3
            finally:
                solution.add = original
            assert calls == [(1, 2)]
    """
    result = run(split_engine, ADD, tests)
    assert result.status == "pass", result.tests[0].message


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_builtin_exceptions_keep_the_fields_their_messages_are_made_of(split_engine: Engine,
                                                                       isolation: str) -> None:
    """`str()` of an OSError is made of its errno, strerror and file names, which are not its
    args, and a UnicodeError's or a SyntaxError's of fields its __init__ sets: a test that
    matches the message (`pytest.raises(..., match=the file)`) sees them, as it sees
    `SystemExit.code` and `ImportError.name`."""
    program = """
        import os
        import sys


        def add(a, b):
            if a == "exit":
                sys.exit(3)
            if a == "decode":
                return bytes([255]).decode("utf-8")
            if a == "import":
                import knowbench_no_such_module
            if a == "syntax":
                compile("x = = 1", "made.py", "exec")
            if a == "noted":
                error = ValueError("bad")
                error.add_note("hint: use ints")
                raise error
            if a == "blocked":
                raise BlockingIOError(11, "blocked", 5)
            if a == "url":
                import urllib.error
                raise urllib.error.URLError("down")
            if b:
                os.rename(a, b)
            return open(a).read()
    """
    tests = """
        import errno
        import urllib.error

        import pytest


        def test_missing():
            with pytest.raises(FileNotFoundError, match="knowbench-missing") as caught:
                add("knowbench-missing.txt", None)
            error = caught.value
            assert (error.errno, error.strerror, error.filename, error.filename2) == (
                errno.ENOENT, "No such file or directory", "knowbench-missing.txt", None)


        def test_two_names():
            with pytest.raises(OSError, match="knowbench-a.txt' -> 'knowbench-b.txt") as caught:
                add("knowbench-a.txt", "knowbench-b.txt")
            assert caught.value.filename2 == "knowbench-b.txt"


        def test_other_builtins():
            with pytest.raises(SystemExit) as caught:
                add("exit", None)
            assert caught.value.code == 3
            with pytest.raises(UnicodeDecodeError, match="invalid start byte") as caught:
                add("decode", None)
            assert (caught.value.start, caught.value.reason) == (0, "invalid start byte")
            with pytest.raises(ImportError) as caught:
                add("import", None)
            assert caught.value.name == "knowbench_no_such_module"
            with pytest.raises(SyntaxError, match="made.py, line 1") as caught:
                add("syntax", None)
            assert caught.value.lineno == 1
            with pytest.raises(ValueError) as caught:
                add("noted", None)
            assert caught.value.__notes__ == ["hint: use ints"]
            with pytest.raises(BlockingIOError) as caught:
                add("blocked", None)
            assert caught.value.characters_written == 5
            with pytest.raises(urllib.error.URLError, match="urlopen error down"):  # a library's OSError
                add("url", None)
    """
    assert_all_pass(split_engine, program, tests, isolation, program, preload=["pytest"])


@pytest.mark.parametrize("start", [-(2**40), -40, 10**6])
def test_a_forged_unicode_error_does_not_reach_the_judges_memory(split_engine: Engine, start: int) -> None:
    """CPython's `UnicodeDecodeError.__str__` reads `object[start]` unchecked: a rebuilt one
    whose positions lie outside its object keeps them unset (its message empty), instead of
    reading the tests' process's memory or crashing it."""
    program = f"""
        class Forged(UnicodeDecodeError):
            def __str__(self):
                return "forged"


        def add(a, b):
            raise Forged("utf-8", b"a", {start}, {start} + 1, "reason")
    """
    tests = """
        import pytest


        def test_message():
            with pytest.raises(ValueError) as caught:
                add(1, 2)
            assert str(caught.value) == ""


        def test_failure_described():
            add(1, 2)
    """
    result = run(split_engine, program, tests, preload=["pytest"])
    assert [(t.status, t.reason) for t in result.tests] == [("pass", None), ("error", "exception")], result.tests


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_struct_sequences_cross_both_ways(split_engine: Engine, isolation: str) -> None:
    """`time.struct_time` (with its zone fields) and `os.stat_result` cross by value, as
    returns and as arguments."""
    program = """
        import os
        import time


        def add(a, b):
            if a == "stat":
                return os.stat(b)
            if a == "format":
                return time.strftime("%H:%M %Z", b)
            return time.localtime(a + b)
    """
    tests = """
        import os
        import time


        def test_returned(monkeypatch):
            monkeypatch.setenv("TZ", "JST-9")
            time.tzset()
            local = add(0, 0)
            assert isinstance(local, time.struct_time) and local.tm_hour == 9 and local.tm_zone == "JST"
            assert local == time.localtime(0)
            monkeypatch.setenv("TZ", "UTC0")
            time.tzset()


        def test_passed():
            assert add("format", time.gmtime(3600)) == "01:00 GMT"


        def test_stat(tmp_path):
            path = tmp_path / "f"
            path.write_text("four")
            assert add("stat", str(path)).st_size == 4
    """
    assert_all_pass(split_engine, program, tests, isolation, program)


def test_a_function_the_target_returns_runs_in_the_candidates_process(split_engine: Engine) -> None:
    """A function of a module the judge knows (`os.remove`, `len`) crosses as a handle, never
    by name: a test that calls what the target returned calls it back in the candidate's
    process, which cannot remove the tests' files (in the judge, the real `os.remove` would)."""
    program = """
        import os


        def add(a, b):
            return os.remove if a == "remove" else len
    """
    tests = """
        import os


        def test_remove(tmp_path):
            kept = tmp_path / "kept.txt"
            kept.write_text("the tests'")
            returned = add("remove", None)
            assert returned is not os.remove
            try:
                returned(str(kept))
            except OSError:
                pass
            assert kept.read_text() == "the tests'"


        def test_len():
            assert add(None, None)([1, 2, 3]) == 3
    """
    result = run(split_engine, program, tests, trusted_program=dedent(program))
    assert result.status == "pass", [(t.id, t.message[-300:]) for t in result.tests]


def test_a_change_that_raises_as_it_is_made_fails_the_call(split_engine: Engine) -> None:
    """Replaying a change can raise in the judge: numpy cannot flag an array over memory it
    does not own writable again (`as_strided`). Caught by `pytest.raises(ValueError)`, that
    would pass a program that changed the array where the task wants it refused: the call
    fails instead."""
    result = run(split_engine, """
        import numpy

        def clip(values):
            numpy.clip(values, 0.0, 1.0, out=values)  # (never refuses a NaN)
    """, """
        import numpy
        import pytest
        from numpy.lib.stride_tricks import as_strided


        def test_refuses_a_nan():
            values = numpy.array([5.0, 1.0, numpy.nan, 7.0])
            with pytest.raises(ValueError):
                clip(as_strided(values, shape=(2,), strides=(16,)))
    """, "clip")
    [outcome] = result.tests
    assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome.message[-800:]
    assert "ValueError when the change was made here" in outcome.message, outcome.message[-800:]


def test_a_change_that_raises_as_it_is_compared_fails_the_call() -> None:
    """A reply's changes are the candidate's to write: a signalling NaN where the tests passed
    a `Decimal` raises `InvalidOperation` when the judge compares the two, which
    `pytest.raises(ArithmeticError)` would take for the target's own. The call fails instead."""
    probe = dedent("""
        from decimal import Decimal

        import knowbench_split as split

        failures = []

        def broken(kind, message):
            failures.append(message)
            raise kind(message)

        try:
            split._replay(None, (((Decimal("sNaN"),), {}), "", "", [], []), (Decimal(-4),), {}, broken)
        except split.CrossingFailed:
            pass
        print(failures)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=RUNNER_DIR,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "argument 1 (InvalidOperation when the change was made here)" in done.stdout, done.stdout


def test_attrs_objects_and_a_defaultdict_of_a_program_class_cross_both_ways(split_engine: Engine) -> None:
    """attrs' slotted classes (frozen ones too) and a `defaultdict` whose factory is the
    program's class cross by value, as the program's plain classes do (the factory back from
    the candidate only as the class the tests sent: the tests would call it)."""
    program = """
        import collections
        import attrs


        @attrs.frozen
        class Point:
            x: int
            y: int


        class Node:
            def __init__(self):
                self.hits = 0


        def add(point, grid):
            grid[point.y].hits += 1
            return attrs.evolve(point, x=point.x + 3)
    """
    tests = """
        import collections


        def test_add():
            grid = collections.defaultdict(Node)
            moved = add(Point(1, 2), grid)
            assert moved == Point(4, 2) and type(moved) is Point
            assert grid.default_factory is Node and grid[2].hits == 1 and grid[5].hits == 0
    """
    stub = dedent(program).replace("grid[point.y].hits += 1\n    return attrs.evolve(point, x=point.x + 3)",
                                   "raise NotImplementedError")
    assert "NotImplementedError" in stub
    result = split_engine.execute(make_request(dedent(program), dedent(tests), "add", isolation="split",
                                               trusted_program=stub))
    assert result.status == "pass" and result.isolation == "split", [t.message[-400:] for t in result.tests]


# In-place changes a call may make to plain arguments, each (arguments, change); the
# candidate's process tells them by comparing the containers' items by identity, not by
# encoding the arguments before and after the call.
_PLAIN_CHANGES = {
    "appended": ([[1, 2]], lambda a: a[0].append(3)),
    "an int for an equal float": ([[1]], lambda a: a[0].__setitem__(0, 1.0)),
    "an int for an equal bool": ([[1]], lambda a: a[0].__setitem__(0, True)),
    "a dict reordered": ([{"a": 1, "b": 2}], lambda a: a[0].__setitem__("a", a[0].pop("a"))),
    "a dict's value": ([{"a": [1]}], lambda a: a[0]["a"].append(2)),
    "a set grown": ([{1, 2}], lambda a: a[0].add(3)),
    "a list inside a tuple": ([([1], 2)], lambda a: a[0][0].clear()),
    "a list inside a frozenset's tuple": ([frozenset({(1, 2)}), [[]]], lambda a: a[1][0].append(a[0])),
    "two names for one list made two": ([[[1], None]], lambda a: (a[0].__setitem__(1, a[0][0]),
                                                                   a[0].__setitem__(1, [1]))),
    "one list made two names for it": ([[[1], [1]]], lambda a: a[0].__setitem__(1, a[0][0])),
    "a list holding itself": ([[0]], lambda a: a[0].__setitem__(0, a[0])),
    "a keyword's list": ([{"k": [1]}], lambda a: a[0]["k"].pop()),
}
# ... and changes the encoding does not show, which the comparison sees too: the change is
# sent back and made again in the tests' process, to the same values.
_PLAIN_CHANGES_ENCODED_ALIKE = {
    "a str for an equal one": ([["ab"]], lambda a: a[0].__setitem__(0, "".join(["a", "b"]))),
    "a list for an equal one": ([[[1]]], lambda a: a[0].__setitem__(0, [1])),
}


@pytest.mark.parametrize("change", sorted([*_PLAIN_CHANGES, *_PLAIN_CHANGES_ENCODED_ALIKE]))
def test_a_plain_arguments_change_is_seen_wherever_its_encoding_changes(change: str) -> None:
    split, wire = runner_module("knowbench_split"), runner_module("knowbench_wire")
    arguments, make = {**_PLAIN_CHANGES, **_PLAIN_CHANGES_ENCODED_ALIKE}[change]
    state = split._plain_state((tuple(arguments), {}))
    assert state is not None
    before = wire.dumps((tuple(arguments), {}))
    assert split._plain_unchanged(state)
    make(arguments)
    # (what the comparison stands in for)
    assert (wire.dumps((tuple(arguments), {})) != before) is (change in _PLAIN_CHANGES)
    assert not split._plain_unchanged(state)


def test_arguments_that_are_not_plain_data_are_compared_by_their_encoding() -> None:
    split = runner_module("knowbench_split")

    class Box(list):
        pass

    assert split._plain_state(((1, "a", b"b", None, 2.5, [1, (2, {3: {4}})]), {"k": frozenset({1})})) is not None
    for odd in (Box(), object(), print, [[Box()]], ({"k": object()},), bytearray(b"x")):
        assert split._plain_state(((odd,), {})) is None, odd


@pytest.mark.parametrize("change", ["a[0] = 1.0", "a[0] = True", "a.append(a.pop(0))", "b['x'] = b.pop('x')",
                                    "c.add(9)", "a[1] = a[2]"])
def test_an_in_place_change_to_an_equal_value_of_another_kind_comes_back(split_engine: Engine,
                                                                           change: str) -> None:
    program = f"def add(a, b, c):\n    {change}\n"
    tests = f"""
        def test_changed():
            shared = [5]
            a, b, c = [1, 1, shared, shared], {{'x': 1, 'y': 2}}, {{1}}
            before = repr((a, b, c)), [type(x) for x in a], list(b), a[2] is a[3]
            expected_a, expected_b, expected_c = [1, 1, shared, shared], {{'x': 1, 'y': 2}}, {{1}}
            (lambda a, b, c: exec({change!r}))(expected_a, expected_b, expected_c)
            add(a, b, c)
            assert (repr((a, b, c)), [type(x) for x in a], list(b), a[2] is a[3]) == (
                repr((expected_a, expected_b, expected_c)), [type(x) for x in expected_a], list(expected_b),
                expected_a[2] is expected_a[3]) != before
    """
    result = run(split_engine, program, tests)
    assert result.status == "pass", result.tests[0].message
