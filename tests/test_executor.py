"""The executor conformance suite: one behaviour per test, on the machine's best sandbox, run
against every engine (subprocess, fork server, Ray). A new engine proves itself by passing it;
where an engine legitimately differs, the test says so."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import in_children, make_request
from knowbench.errors import UserError
from knowbench.execution.cgroup import memory_cgroups_available
from knowbench.execution.engine import (
    CANDIDATE_UID_BASE,
    SANDBOX_UID_BASE,
    UID_SLOTS,
    Engine,
    Isolation,
    SubprocessEngine,
)
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import RUNNER_DIR, Sandbox
from knowbench.records import Execution, Limits

ADD = "def add(a, b):\n    return a + b\n"
NEEDS_CGROUPS = pytest.mark.skipif(not memory_cgroups_available(), reason="knowbench cannot make memory "
                                   "cgroups here (no writable cgroup v1 memory controller)")


@pytest.fixture(scope="module", params=["subprocess", "forkserver",
                                        pytest.param("ray", marks=pytest.mark.slow)])
def engine(request: pytest.FixtureRequest, best_sandbox: Sandbox) -> Iterator[Engine]:
    """Each engine in turn, two workers, on the best sandbox (overrides conftest's `engine`)."""
    the_engine: Engine
    if request.param == "subprocess":
        the_engine = SubprocessEngine(best_sandbox, workers=2)
    elif request.param == "forkserver":
        the_engine = ForkServerEngine(best_sandbox, workers=2, preload=["unittest"])
    else:
        pytest.importorskip("ray", reason="the ray engine needs the extra knowbench[ray]")
        from knowbench.execution.ray_engine import RayEngine

        the_engine = RayEngine(best_sandbox.kind, workers=2, preload=["unittest"])
    yield the_engine
    the_engine.close()


ENGINE_NAMES = ["subprocess", "forkserver", pytest.param("ray", marks=pytest.mark.slow)]


def new_engine(name: str, sandbox: Sandbox, workers: int, preload: list[str] | None = None) -> Engine:
    """A fresh engine of its own for a test (the module's `engine` is shared)."""
    if name == "subprocess":
        return SubprocessEngine(sandbox, workers=workers)
    if name == "forkserver":
        return ForkServerEngine(sandbox, workers=workers, preload=preload)
    pytest.importorskip("ray", reason="the ray engine needs the extra knowbench[ray]")
    from knowbench.execution.ray_engine import RayEngine

    return RayEngine(sandbox.kind, workers=workers, preload=preload)


def sandbox_kind(engine: Engine) -> str:
    """The sandbox an engine runs samples in (Ray's actors resolve theirs on their node)."""
    return engine.sandbox_kind if engine.name == "ray" else engine.sandbox.kind  # type: ignore[attr-defined]


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def statuses(execution: Execution) -> dict[str, str]:
    return {test.id: test.status for test in execution.tests}


@pytest.mark.parametrize("kind", ["subprocess", "forkserver"])
def test_an_engine_byte_compiles_the_runner_it_starts_in_the_sandbox(best_sandbox: Sandbox, kind: str) -> None:
    """The sandbox mounts the runner's directory read-only, so a source tree or an editable
    install (a fresh clone's `make demo`) would have every runner start compile it from source:
    the engine compiles it first, for the interpreter it runs."""
    sources = sorted(RUNNER_DIR.glob("knowbench_*.py"))
    for source in sources:
        Path(importlib.util.cache_from_source(str(source))).unlink(missing_ok=True)
    engine = new_engine(kind, best_sandbox, workers=1)
    try:
        for source in sources:
            cached = Path(importlib.util.cache_from_source(str(source)))
            header = cached.read_bytes()[:16]
            # what the interpreter checks before it uses a .pyc: its magic, then the source's
            # modification time and size
            assert header[:4] == importlib.util.MAGIC_NUMBER, source.name
            assert int.from_bytes(header[4:8], "little") == 0, source.name  # timestamp-based
            stat = source.stat()
            assert int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF, source.name
            assert int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF, source.name
        assert engine.execute(make_request(ADD, "def test_a():\n    assert add(1, 2) == 3\n", "add")).status == "pass"
    finally:
        engine.close()


def test_passing_and_failing_tests_are_reported_per_item(engine: Engine) -> None:
    tests = code("""
        def test_ok():
            assert add(1, 2) == 3

        def test_wrong():
            assert add(1, 2) == 4

        def test_raises():
            raise ValueError("boom")
    """)
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert [test.id for test in execution.tests] == ["t::test_ok", "t::test_wrong", "t::test_raises"]
    assert statuses(execution) == {"t::test_ok": "pass", "t::test_wrong": "fail",
                                   "t::test_raises": "error"}
    assert "ValueError: boom" in execution.tests[2].message
    assert execution.passed == 1
    assert execution.status == "error"  # the worst item decides


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_message_holding_a_lone_surrogate_comes_back_as_its_escape(engine: Engine,
                                                                     isolation: Isolation) -> None:
    """The runner's record escapes a lone surrogate in a sample's message and JSON decodes it
    back: it comes back written out (`\\ud800`), so the execution can be stored."""
    program = 'def add(a, b):\n    raise ValueError("\\ud800")\n'
    execution = engine.execute(make_request(program, "def test_a():\n    assert add(1, 2) == 3\n",
                                            "add", isolation=isolation))
    assert "ValueError: \\ud800" in execution.tests[0].message
    execution.model_dump_json()


def test_all_passing_items_make_a_passing_execution(engine: Engine) -> None:
    execution = engine.execute(make_request(ADD, "def test_a():\n    assert add(2, 2) == 4\n", "add"))
    assert execution.status == "pass"
    assert execution.note == ""
    assert execution.tests[0].duration_s >= 0


def test_unittest_methods_are_items_with_setup(engine: Engine) -> None:
    tests = code("""
        import unittest

        class TestAdd(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.base = 10

            def setUp(self):
                self.offset = 1

            def test_good(self):
                self.assertEqual(add(self.base, self.offset), 11)

            def test_bad(self):
                self.assertEqual(add(1, 1), 3)

            def helper(self):
                raise AssertionError("not a test")
    """)
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert statuses(execution) == {"t::TestAdd::test_good": "pass", "t::TestAdd::test_bad": "fail"}
    # in unittest's order (sorted by name), as unittest and pytest run a TestCase's methods
    assert [test.id for test in execution.tests] == ["t::TestAdd::test_bad", "t::TestAdd::test_good"]
    assert "2 != 3" in execution.tests[0].message


def test_messages_leave_out_the_frames_the_frameworks_hide(engine: Engine) -> None:
    """A failure reads as unittest and pytest report it: without unittest's own frames (which
    ran the test and raised from assertEqual) or frames marked `__tracebackhide__`, and with
    every frame of the test's and the program's own code, in a chain too."""
    program = ADD + code("""
        def checked(value):
            __tracebackhide__ = True
            assert value == 3, f"checked {value}"

        class Loud:
            def __eq__(self, other):
                raise AssertionError("compared")
    """)
    tests = code("""
        import unittest

        class TestAdd(unittest.TestCase):
            def test_equal(self):
                self.assertEqual(add(1, 1), 3)

            def test_raises_inside_the_program(self):
                self.assertEqual(Loud(), 1)

            def test_chain(self):
                try:
                    checked(add(1, 1))
                except AssertionError as error:
                    raise ValueError("again") from error

        def test_hidden_helper():
            checked(add(2, 2))
    """)
    execution = engine.execute(make_request(program, tests, "add"))
    messages = {test.id.rsplit("::", 1)[-1]: test.message for test in execution.tests}
    assert all(test.status in ("fail", "error") for test in execution.tests), messages
    for name, message in messages.items():
        assert "unittest/case.py" not in message and "__tracebackhide__" not in message, (name, message)
        assert "test:t" in message and message.rstrip().splitlines()[-1], (name, message)
    assert 'line 5, in test_equal\n    self.assertEqual(add(1, 1), 3)\n' in messages["test_equal"]
    assert messages["test_equal"].rstrip().endswith("AssertionError: 2 != 3")
    # A frame of the program's own, called from inside assertEqual, stays.
    assert 'File "solution.py", line 9, in __eq__' in messages["test_raises_inside_the_program"]
    # The helper marked hidden is left out of both links of the chain; the rest are there.
    chain = messages["test_chain"]
    assert "in checked" not in chain and "AssertionError: checked 2" in chain
    assert "The above exception was the direct cause" in chain and "ValueError: again" in chain
    assert "in test_hidden_helper" in messages["test_hidden_helper"]
    assert "in checked" not in messages["test_hidden_helper"]


def test_plain_block_is_one_item_named_after_its_spec(engine: Engine) -> None:
    tests = {"good": "assert add(1, 2) == 3\nassert add(-1, 1) == 0\n",
             "bad": "assert add(1, 2) == 3\nassert add(1, 1) == 5\n"}
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert statuses(execution) == {"good": "pass", "bad": "fail"}


def test_pytest_style_items_from_several_specs_keep_their_order(engine: Engine) -> None:
    tests = {"first": "def test_one():\n    assert add(0, 1) == 1\n",
             "second": "def test_two():\n    assert add(1, 1) == 2\n\ndef test_three():\n    assert add(1, 2) == 3\n"}
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert [test.id for test in execution.tests] == ["first::test_one", "second::test_two",
                                                     "second::test_three"]
    assert execution.status == "pass"


def test_tmp_path_fixture_gives_a_fresh_writable_directory(engine: Engine) -> None:
    tests = code("""
        def test_write(tmp_path):
            target = tmp_path / "data.txt"
            target.write_text(str(add(1, 2)))
            assert target.read_text() == "3"

        def test_fresh(tmp_path):
            assert list(tmp_path.iterdir()) == []
    """)
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert execution.status == "pass", execution.tests


def test_tmp_path_is_fresh_even_where_its_usual_name_was_taken_first(engine: Engine) -> None:
    """The runner names a sample's directories after its process; a sample that makes those
    names first gets fresh, empty directories all the same."""
    program = code("""
        import glob
        import os

        for root in glob.glob("tmp_path-*"):
            for number in range(8):
                planted = os.path.join(root, f"tmp{os.getpid()}-{number}")
                os.makedirs(planted, exist_ok=True)
                open(os.path.join(planted, "planted"), "w").close()

        def add(a, b):
            return a + b
    """)
    tests = code("""
        import glob

        def test_fresh(tmp_path):
            assert glob.glob("tmp_path-*"), "the sample's tmp_path root"
            assert list(tmp_path.iterdir()) == []
            assert add(1, 2) == 3
    """)
    execution = engine.execute(make_request(program, tests, "add"))
    assert execution.status == "pass", execution.tests


def test_monkeypatch_fixture_patches_and_undoes(engine: Engine) -> None:
    program = "import os\n\ndef mode():\n    return os.environ.get('KB_MODE', 'plain')\n"
    tests = code("""
        import os

        def test_patched(monkeypatch):
            monkeypatch.setenv("KB_MODE", "patched")
            monkeypatch.setattr(os, "sep", "|")
            assert mode() == "patched"
            assert os.sep == "|"

        def test_undone():
            assert mode() == "plain"
            assert os.sep == "/"
    """)
    execution = engine.execute(make_request(program, tests, "mode"))
    assert execution.status == "pass", execution.tests


def test_capsys_fixture_captures_output(engine: Engine) -> None:
    program = "import sys\n\ndef greet(name):\n    print('hello', name)\n    print('warn', file=sys.stderr)\n"
    tests = code("""
        def test_capture(capsys):
            greet("world")
            captured = capsys.readouterr()
            assert captured.out == "hello world\\n"
            assert captured.err == "warn\\n"
    """)
    execution = engine.execute(make_request(program, tests, "greet"))
    assert execution.status == "pass", execution.tests
    assert "hello world" not in execution.stdout


def test_test_code_that_fails_to_import_errors_all_its_items(engine: Engine) -> None:
    tests = {"broken": code("""
                import knowbench_no_such_module

                def test_a():
                    assert add(1, 2) == 3

                def test_b():
                    assert add(2, 2) == 4
            """),
             "fine": "def test_c():\n    assert add(1, 1) == 2\n"}
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert statuses(execution) == {"broken::test_a": "error", "broken::test_b": "error",
                                   "fine::test_c": "pass"}
    for test in execution.tests[:2]:
        assert "knowbench_no_such_module" in test.message
    # The first item reports the spec's own exception; the later ones say the spec failed.
    assert [test.reason for test in execution.tests] == ["exception", "test-code-failed", None]


@pytest.mark.parametrize("program", [
    "raise ValueError('cannot load')\n",
    "def add(a, b)\n    return a + b\n",  # syntax error
    "import knowbench_no_such_module\n",
], ids=["raises", "syntax-error", "missing-import"])
def test_program_that_fails_to_load_errors_all_items(engine: Engine, program: str) -> None:
    tests = "def test_a():\n    assert add(1, 2) == 3\n\ndef test_b():\n    assert True\n"
    execution = engine.execute(make_request(program, tests, "add"))
    assert statuses(execution) == {"t::test_a": "error", "t::test_b": "error"}
    assert {test.reason for test in execution.tests} == {"program-failed-to-load"}


def test_called_is_true_when_the_test_calls_the_target(engine: Engine) -> None:
    tests = "def test_a():\n    assert add(1, 2) == 3\n\ndef test_b():\n    assert 1 + 2 == 3\n"
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert [test.called for test in execution.tests] == [True, False]


def test_called_is_true_for_a_method_target(engine: Engine) -> None:
    program = "class Calc:\n    def add(self, a, b):\n        return a + b\n"
    execution = engine.execute(make_request(program, "def test_a():\n    assert Calc().add(1, 2) == 3\n",
                                            "Calc.add"))
    assert execution.tests[0].status == "pass"
    assert execution.tests[0].called is True


def test_called_is_true_through_a_decorator_that_keeps_the_function_as_func(engine: Engine) -> None:
    """A target wrapped by a decorator that keeps it as `.func` (functools.partial, toolz's
    `curry`), not `__wrapped__`: a test that calls it calls the target."""
    program = ("class curry:\n    def __init__(self, func):\n        self.func = func\n"
               "    def __call__(self, *args):\n        return self.func(*args)\n\n"
               "@curry\ndef add(a, b):\n    return a + b\n")
    tests = "def test_a():\n    assert add(1, 2) == 3\n\ndef test_b():\n    assert 1 + 2 == 3\n"
    execution = engine.execute(make_request(program, tests, "add"))
    assert [(test.status, test.called) for test in execution.tests] == [("pass", True), ("pass", False)]


def test_called_is_true_through_a_decorator_of_another_module(engine: Engine) -> None:
    """A target wrapped by a decorator whose wrapper runs on another module's globals
    (`contextlib.contextmanager`'s): a test that calls it calls the target, and a test whose
    own calls (and the runner's) only run on other globals does not."""
    program = ("import contextlib\n\n@contextlib.contextmanager\ndef opened(value):\n"
               "    yield value\n")
    tests = ("import contextlib\n\ndef test_a():\n    with opened(3) as value:\n        assert value == 3\n\n"
             "def test_b():\n    with contextlib.nullcontext(3) as value:\n        assert value == 3\n")
    execution = engine.execute(make_request(program, tests, "opened"))
    assert [(test.status, test.called) for test in execution.tests] == [("pass", True), ("pass", False)]


def test_called_is_false_when_the_test_redefines_the_target(engine: Engine) -> None:
    tests = code("""
        def add(a, b):
            return a + b

        def test_shadowed():
            assert add(1, 2) == 3
    """)
    execution = engine.execute(make_request("def add(a, b):\n    return 0\n", tests, "add"))
    assert execution.tests[0].status == "pass"
    assert execution.tests[0].called is False


def test_called_is_false_when_the_test_reimports_the_name(engine: Engine) -> None:
    tests = "from operator import add\n\ndef test_shadowed():\n    assert add(1, 2) == 3\n"
    execution = engine.execute(make_request("def add(a, b):\n    return 0\n", tests, "add"))
    assert execution.tests[0].status == "pass"
    assert execution.tests[0].called is False


def test_called_is_none_without_an_entry_point(engine: Engine) -> None:
    execution = engine.execute(make_request(ADD, "def test_a():\n    assert add(1, 2) == 3\n"))
    assert execution.tests[0].called is None


def test_timeout_is_attributed_to_the_running_test(engine: Engine) -> None:
    tests = code("""
        import time

        def test_quick():
            assert add(1, 2) == 3

        def test_slow():
            time.sleep(60)

        def test_later():
            assert add(1, 2) == 3
    """)
    execution = engine.execute(make_request(ADD, tests, "add", wall_s=1.5))
    assert statuses(execution) == {"t::test_quick": "pass", "t::test_slow": "timeout",
                                   "t::test_later": "timeout"}
    assert [test.reason for test in execution.tests] == [None, "timeout", "not-run"]
    assert execution.status == "timeout"
    assert execution.duration_s < 10


def test_memory_limit_is_reported_as_memory(engine: Engine) -> None:
    tests = "def test_big():\n    assert len(bytearray(10**10)) > 0\n\ndef test_small():\n    assert add(1, 2) == 3\n"
    execution = engine.execute(make_request(ADD, tests, "add", memory_mb=128))
    assert statuses(execution) == {"t::test_big": "memory", "t::test_small": "pass"}
    assert execution.tests[0].reason == "memory"


def test_stdout_and_stderr_are_captured(engine: Engine) -> None:
    program = "import sys\nprint('loaded')\n\ndef add(a, b):\n    print('to stderr', file=sys.stderr)\n    return a + b\n"
    execution = engine.execute(make_request(program, "def test_a():\n    assert add(1, 2) == 3\n", "add"))
    assert execution.status == "pass"
    assert execution.stdout == "loaded\n"
    assert execution.stderr == "to stderr\n"


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_samples_standard_streams_are_the_interpreters_own(engine: Engine, isolation: Isolation) -> None:
    """`sys.stdout` and `sys.stderr` are the streams the interpreter made, as in any Python
    process: `sys.__stdout__` itself, stderr line-buffered and writing what it cannot encode
    as backslash escapes (a lone surrogate, as `os.fsdecode` makes of undecodable bytes).
    Where the tests run, and in-process where the program runs; a split candidate's output
    is captured during each call, to be replayed on the judge's side."""
    program = code("""
        import sys

        def streams():
            return (sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__,
                    sys.stderr.errors, sys.stderr.line_buffering)
    """)
    tests = code("""
        import sys

        OWN = (True, True, "backslashreplace", True)

        def test_streams():
            assert (sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__,
                    sys.stderr.errors, sys.stderr.line_buffering) == OWN
            print("undecodable \\udcff", file=sys.stderr)

        def test_streams_of_the_target():
            assert streams() == OWN
    """)
    execution = engine.execute(make_request(program, tests, "streams", isolation=isolation))
    expected = {"t::test_streams": "pass",
                "t::test_streams_of_the_target": "pass" if isolation == "in-process" else "fail"}
    assert statuses(execution) == expected, execution.tests
    assert "undecodable \\udcff" in execution.stderr


def test_output_is_capped_at_output_bytes(engine: Engine) -> None:
    program = code("""
        import sys

        def add(a, b):
            for _ in range(200):
                sys.stdout.write("o" * 1000)
                sys.stderr.write("e" * 1000)
            return a + b
    """)
    execution = engine.execute(make_request(program, "def test_a():\n    assert add(1, 2) == 3\n", "add",
                                            output_bytes=4096))
    assert execution.status == "pass"
    assert execution.stdout == "o" * 4096
    assert execution.stderr == "e" * 4096


def test_execution_carries_limits_and_sandbox_kind(engine: Engine) -> None:
    request = make_request(ADD, "def test_a():\n    assert add(1, 2) == 3\n", "add",
                           wall_s=7.5, memory_mb=300, output_bytes=2048)
    execution = engine.execute(request)
    assert execution.limits == request.limits
    assert execution.limits == Limits(wall_s=7.5, memory_mb=300, output_bytes=2048)
    assert execution.sandbox == sandbox_kind(engine)
    assert execution.sandbox in ("bwrap", "unshare")
    # Ray's actors each host a fork server and return its record as it is: the record names the
    # engine that ran the sample on its node; the run's describe() names ray.
    assert execution.engine == ("forkserver" if engine.name == "ray" else engine.name)
    assert execution.exit_code == 0


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_samples_processes_are_the_first_the_kernel_kills_for_memory(engine: Engine, isolation: Isolation) -> None:
    """Every process that runs sample code or its tests has oom_score_adj 1000: when memory
    runs out (the server's memory cgroup, the machine), the kernel kills a sample's process,
    never the server first. Split, both the candidate's process and the judge's."""
    program = code("""
        def adj():
            with open("/proc/self/oom_score_adj") as handle:
                return handle.read().strip()
    """)
    tests = code("""
        def test_the_candidates_process():
            assert adj() == "1000"

        def test_the_tests_process():
            with open("/proc/self/oom_score_adj") as handle:
                assert handle.read().strip() == "1000"
    """)
    execution = engine.execute(make_request(program, tests, "adj", isolation=isolation))
    statuses = {test.id.rsplit("::", 1)[-1]: test.status for test in execution.tests}
    assert statuses == {"test_the_candidates_process": "pass", "test_the_tests_process": "pass"}, execution.tests


def test_results_do_not_depend_on_a_previous_sample(engine: Engine) -> None:
    polluter = code("""
        import os

        def add(a, b):
            with open("state.txt", "w") as handle:
                handle.write("left behind")
            with open(os.path.join(os.environ["HOME"], "home-state.txt"), "w") as handle:
                handle.write("left behind")
            os.environ["KB_POLLUTED"] = "1"
            os.putenv("KB_POLLUTED", "1")
            return a + b
    """)
    observer = code("""
        import os

        def add(a, b):
            return a + b

        def leftovers():
            found = [name for name in ("state.txt",) if os.path.exists(name)]
            found += [name for name in ("home-state.txt",)
                      if os.path.exists(os.path.join(os.environ["HOME"], name))]
            if "KB_POLLUTED" in os.environ:
                found.append("KB_POLLUTED")
            return found
    """)
    tests = "def test_a():\n    assert add(1, 2) == 3\n"
    clean = "def test_clean():\n    assert leftovers() == []\n"
    for _ in range(3):  # whatever slot each request gets
        assert engine.execute(make_request(polluter, tests, "add")).status == "pass"
        execution = engine.execute(make_request(observer, clean, "add"))
        assert execution.status == "pass", execution.tests[0].message


def test_parallel_use_from_threads_gives_correct_results(engine: Engine) -> None:
    program_template = code("""
        import os
        import time

        def value():
            with open("mine.txt", "w") as handle:
                handle.write("{n}")
            time.sleep(0.05)
            with open("mine.txt") as handle:
                return int(handle.read())
    """)

    def run(n: int) -> Execution:
        tests = f"def test_value():\n    assert value() == {n}\n\ndef test_wrong():\n    assert value() == {-n - 1}\n"
        return engine.execute(make_request(program_template.format(n=n), tests, "value"))

    numbers = list(range(4 * engine.workers))
    with ThreadPoolExecutor(max_workers=engine.workers) as pool:
        executions = list(pool.map(run, numbers))
    for n, execution in zip(numbers, executions, strict=True):
        assert statuses(execution) == {"t::test_value": "pass", "t::test_wrong": "fail"}, (n, execution)
        assert f"{-n - 1}" in execution.tests[1].message


def test_a_class_whose_base_is_only_named_testcase_runs_like_a_pytest_class(engine: Engine) -> None:
    tests = ("class PlotTestCase:\n    def setup_method(self, method):\n        self.x = 2\n\n\n"
             "class TestPlot(PlotTestCase):\n    def test_ok(self):\n        assert add(self.x, 1) == 3\n\n"
             "    def test_bad(self):\n        assert add(self.x, 1) == 4\n")
    execution = engine.execute(make_request("def add(a, b):\n    return a + b\n", tests, "add"))
    assert [(t.id, t.status) for t in execution.tests] == [("t::TestPlot::test_ok", "pass"),
                                                         ("t::TestPlot::test_bad", "fail")]


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_sample_that_ends_early_leaves_its_exit_status_and_last_stderr_lines(
        engine: Engine, isolation: Isolation) -> None:
    """The outcome says how the process ended and what it last wrote on its stderr (fd 2: what
    a split candidate prints through sys.stderr during a call is sent with the call's reply,
    and dies with it), even past the output cap."""
    program = code("""
        import os

        def add(a, b):
            os.write(2, b"noise\\n" * 20000)
            os.write(2, b"last words before exiting\\n")
            os._exit(3)
    """)
    execution = engine.execute(make_request(program, "def test_a():\n    assert add(1, 2) == 3\n",
                                            "add", isolation=isolation))
    outcome = execution.tests[0]
    assert outcome.status == "error"
    assert outcome.exit_code == 3
    assert "exit code 3" in outcome.message
    assert "last words before exiting" in outcome.message


@pytest.fixture()
def sandbox_uids_busy_elsewhere(best_sandbox: Sandbox) -> Iterator[None]:
    """Another run on this machine (another knowbench, another engine in this process, a Ray
    actor beside this one) has processes and threads under the first sandbox uids, as many
    as a sample may have: RLIMIT_NPROC counts them all, machine-wide, per uid."""
    if not best_sandbox.drops_privileges:
        pytest.skip("samples run under sandbox uids only when knowbench runs as root")
    holders = []

    def become(uid: int) -> Callable[[], None]:
        def drop() -> None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        return drop

    try:
        for base in (SANDBOX_UID_BASE, CANDIDATE_UID_BASE):
            for slot in range(2):
                holders += [subprocess.Popen(["sleep", "600"], cwd="/", preexec_fn=become(base + slot))
                            for _ in range(Limits().processes)]
        yield
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_samples_run_while_the_sandbox_uids_are_busy_elsewhere(
        sandbox_uids_busy_elsewhere: None, best_sandbox: Sandbox, engine_name: str,
        isolation: Isolation) -> None:
    """Each engine's workers get uids that nothing else on the machine runs under, so no
    other run's processes count against a sample's limits."""
    the_engine = new_engine(engine_name, best_sandbox, workers=2)
    try:
        executions = list(ThreadPoolExecutor(2).map(
            lambda _: the_engine.execute(make_request(ADD, "def test_a():\n    assert add(1, 2) == 3\n",
                                                      "add", isolation=isolation)), range(4)))
    finally:
        the_engine.close()
    assert [execution.status for execution in executions] == ["pass"] * 4, executions[0].tests


WRITES_HOME_AND_CACHES = code("""
    import os

    import matplotlib


    def write_everywhere(marker):
        home = os.path.expanduser("~")
        for directory in (home, os.path.join(home, ".config", "tool"), os.path.join(home, ".cache", "tool"),
                          matplotlib.get_configdir(), matplotlib.get_cachedir()):
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, "written"), "w") as handle:
                handle.write(marker)
        return sorted(name for name in os.listdir(home) if name.startswith("left-by-"))


    def add(a, b):
        return write_everywhere("candidate")
""")


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_home_and_cache_directories_are_writable_and_private_to_the_sample(
        best_sandbox: Sandbox, engine_name: str, isolation: Isolation) -> None:
    """HOME, ~/.config, ~/.cache and the paths a library preloaded before the sample worked
    out from them (matplotlib's config and cache) can be written by the sample, on the
    candidate's side too, and nothing written there reaches the next sample."""
    the_engine = new_engine(engine_name, best_sandbox, workers=1, preload=["matplotlib"])
    tests = code("""
        import os

        def test_the_target_writes():
            assert add(1, 2) == []

        def test_the_tests_write():
            assert write_everywhere("judge") == []
            open(os.path.join(os.path.expanduser("~"), "left-by-a-sample"), "w").close()
    """)
    trusted = WRITES_HOME_AND_CACHES.replace('return write_everywhere("candidate")', "raise NotImplementedError")
    try:
        for _ in range(2):
            execution = the_engine.execute(make_request(
                WRITES_HOME_AND_CACHES, tests, "add", preload=["matplotlib"], isolation=isolation,
                trusted_program=trusted if isolation == "split" else None))
            assert execution.status == "pass", [test.message for test in execution.tests]
    finally:
        the_engine.close()


USES_MULTIPROCESSING = code("""
    import concurrent.futures
    import multiprocessing


    def use(kind):
        if kind == "lock":
            with multiprocessing.Lock():
                return True
        if kind == "queue":
            queue = multiprocessing.Queue()
            queue.put(1)
            return queue.get(timeout=10) == 1
        if kind == "pool":
            with multiprocessing.Pool(2) as pool:
                return pool.map(abs, [-1, -2]) == [1, 2]
        if kind == "manager":
            with multiprocessing.Manager() as manager:
                shared = manager.dict()
                shared["a"] = 1
                return dict(shared) == {"a": 1}
        with concurrent.futures.ProcessPoolExecutor(2) as executor:
            return list(executor.map(abs, [-1, -2])) == [1, 2]


    def add(kind, _):
        return use(kind)
""")
MULTIPROCESSING_KINDS = ("lock", "queue", "pool", "manager", "process_pool_executor")


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_multiprocessing_works_in_the_target_and_in_the_tests(engine: Engine, isolation: Isolation) -> None:
    """Locks, queues, pools, managers and process pools work wherever sample code runs: in
    the target (split: the candidate's process, under its seccomp filter) and in the tests."""
    tests = "".join(f"def test_target_{kind}():\n    assert add({kind!r}, 0)\n\n"
                    f"def test_tests_{kind}():\n    assert use({kind!r})\n\n" for kind in MULTIPROCESSING_KINDS)
    trusted = USES_MULTIPROCESSING.replace("return use(kind)", "raise NotImplementedError")
    execution = engine.execute(make_request(
        USES_MULTIPROCESSING, tests, "add", isolation=isolation, wall_s=30, cpu_s=30,
        trusted_program=trusted if isolation == "split" else None))
    failed = {test.id: test.message[-300:] for test in execution.tests if test.status != "pass"}
    assert not failed


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_sample_may_start_more_threads_than_processes(engine: Engine, isolation: Isolation) -> None:
    """Threads are bounded apart from processes: 100 threads pass under the default limits,
    in the target (split: the candidate's process) and in the tests."""
    program = code("""
        import threading


        def start_threads(count):
            done = threading.Barrier(count + 1, timeout=20)
            threads = [threading.Thread(target=done.wait) for _ in range(count)]
            for thread in threads:
                thread.start()
            done.wait()
            for thread in threads:
                thread.join()
            return count


        def add(a, b):
            return start_threads(a) + b
    """)
    tests = "def test_target():\n    assert add(100, 0) == 100\n\ndef test_tests():\n    assert start_threads(100) == 100\n"
    trusted = program.replace("return start_threads(a) + b", "raise NotImplementedError")
    execution = engine.execute(make_request(program, tests, "add", isolation=isolation,
                                            trusted_program=trusted if isolation == "split" else None))
    assert execution.limits.processes < 100
    assert execution.status == "pass", [test.message[-300:] for test in execution.tests]


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_an_allocator_that_reserves_a_large_arena_keeps_the_memory_limit_usable(
        engine: Engine, isolation: Isolation) -> None:
    """The memory limit is an address-space limit (RLIMIT_AS) over the process's size, and
    mimalloc (pyarrow's default pool; polars) reserves 1 GiB of addresses on its first
    allocation where they fit: with a limit a little over 1 GiB (1100 MB), it would leave
    a few MB for everything else, and 100 MB more would fail with MemoryError. The sample's
    environment keeps such reservations small."""
    pytest.importorskip("pyarrow", reason="pyarrow comes with the dev extras (make install)")
    program = code("""
        import pyarrow as pa


        def strings(mb):
            array = pa.array(["x" * 100] * 1_000)
            return len(array) + len(bytearray(mb << 20))
    """)
    tests = "def test_strings():\n    assert strings(100) == 1_000 + (100 << 20)\n"
    trusted = program.replace("array = pa.", "raise NotImplementedError  # pa.")
    # Preloaded, pyarrow is part of the size the limit is set over (as with pandas preloaded).
    execution = engine.execute(make_request(program, tests, "strings", isolation=isolation, memory_mb=1100,
                                            preload=["pyarrow"],
                                            trusted_program=trusted if isolation == "split" else None))
    assert execution.status == "pass", [test.message[-300:] for test in execution.tests]


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_sample_code_runs_with_the_garbage_collector_on(engine: Engine, isolation: Isolation) -> None:
    """The runner imports itself and the preload with the collector paused; the program's
    import, the target (split: the candidate's process) and the tests all run with it on, at
    the interpreter's thresholds."""
    program = code("""
        import gc

        ON_IMPORT = gc.isenabled()


        def add(a, b):
            return [ON_IMPORT, gc.isenabled(), list(gc.get_threshold())]
    """)
    on = [True, True, list(gc.get_threshold())]
    tests = (f"import gc\n\ndef test_target():\n    assert add(1, 2) == {on!r}\n\n"
             f"def test_tests():\n    assert gc.isenabled() and ON_IMPORT\n")
    trusted = program.replace("return [ON_IMPORT", "raise NotImplementedError  # [ON_IMPORT")
    execution = engine.execute(make_request(program, tests, "add", isolation=isolation, preload=["numpy"],
                                            trusted_program=trusted if isolation == "split" else None))
    assert execution.status == "pass", [test.message[-300:] for test in execution.tests]


# A program that sets, while it loads, state kept per context (the `decimal` precision) and per
# thread (a `threading.local`).
LOADS_STATE = code("""
    import decimal
    import threading

    decimal.getcontext().prec = 6
    LOADING = threading.local()
    LOADING.thread = threading.current_thread()


    def seventh():
        return str(decimal.Decimal(1) / decimal.Decimal(7))
""")


def _loads_state_judged(isolation: Isolation) -> str | None:
    """Split, the judge's own program: it sets the same while it loads (its target a stub)."""
    return LOADS_STATE.replace("return str(", "raise NotImplementedError  # ") if isolation == "split" else None


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_the_program_and_its_tests_share_one_thread_as_under_the_frameworks(
        engine: Engine, isolation: Isolation) -> None:
    """unittest and pytest import the module and run every test on one thread, so what is
    kept per thread or per context (the `decimal` context, `threading.local`, numpy's error
    state) and set while the program loads or in a set-up hook holds in every later test."""
    tests = code("""
        import decimal
        import threading
        import unittest


        def test_the_programs_context_holds():
            assert str(decimal.Decimal(1) / decimal.Decimal(7)) == "0.142857"


        def test_on_the_thread_that_loaded_the_program():
            assert getattr(LOADING, "thread", None) is threading.current_thread()


        class TestSetUp(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                decimal.getcontext().prec = 3

            def test_a(self):
                self.assertEqual(str(decimal.Decimal(1) / decimal.Decimal(7)), "0.143")

            def test_b(self):
                self.assertEqual(str(decimal.Decimal(2) / decimal.Decimal(3)), "0.667")
    """)
    request = make_request(LOADS_STATE, tests, "seventh", isolation=isolation,
                           trusted_program=_loads_state_judged(isolation))
    execution = engine.execute(request)
    assert statuses(execution) == dict.fromkeys(
        ["t::test_the_programs_context_holds", "t::test_on_the_thread_that_loaded_the_program",
         "t::TestSetUp::test_a", "t::TestSetUp::test_b"], "pass"), [t.message[-400:] for t in execution.tests]


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_direct_item_runs_in_the_context_the_program_loaded_in(engine: Engine, isolation: Isolation) -> None:
    """Under `direct` invocation each item runs in a fresh copy of the process that loaded the
    program, as a script that runs the program and then the test: what the program's loading
    set in the context (the `decimal` context, numpy's error state) holds in every item."""
    tests = code("""
        import decimal


        def test_a():
            assert str(decimal.Decimal(1) / decimal.Decimal(7)) == "0.142857"


        def test_b():
            assert str(decimal.Decimal(2) / decimal.Decimal(3)) == "0.666667"
    """)
    execution = engine.execute(make_request(LOADS_STATE, tests, "seventh", isolation=isolation,
                                            trusted_program=_loads_state_judged(isolation),
                                            invocation="direct"))
    assert statuses(execution) == {"t::test_a": "pass", "t::test_b": "pass"}, execution.tests


def test_a_split_judge_runs_the_tests_on_its_main_thread_as_the_frameworks_do(engine: Engine) -> None:
    """No code of the candidate's runs in the judge's process, so its tests run where unittest
    and pytest run them, on the main thread: a test may set a signal handler (an alarm-based
    timeout around the call)."""
    tests = code("""
        import signal
        import threading


        def test_on_the_main_thread():
            assert threading.current_thread() is threading.main_thread()


        def test_with_an_alarm_based_timeout():
            def expired(signum, frame):
                raise TimeoutError("too slow")

            previous = signal.signal(signal.SIGALRM, expired)
            try:
                signal.setitimer(signal.ITIMER_REAL, 5)
                assert add(2, 3) == 5
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
    """)
    execution = engine.execute(make_request(ADD, tests, "add", isolation="split"))
    assert execution.isolation == "split"
    assert statuses(execution) == {"t::test_on_the_main_thread": "pass",
                                   "t::test_with_an_alarm_based_timeout": "pass"}, execution.tests


def test_a_call_a_signal_handler_interrupts_is_never_answered_by_a_later_one(engine: Engine) -> None:
    """A handler that raises while a call is crossing leaves the candidate's answer to it on
    its way: the test sees the handler's exception, and no later call may take that stale
    answer for its own (they fail with `interrupted`)."""
    program = code("""
        import time


        def slow_add(a, b, wait=0.0):
            time.sleep(wait)
            return a + b
    """)
    tests = code("""
        import signal


        class Slow(Exception):
            pass


        def test_interrupted_then_called_again():
            def expired(signum, frame):
                raise Slow()

            previous = signal.signal(signal.SIGALRM, expired)
            try:
                signal.setitimer(signal.ITIMER_REAL, 0.2)
                try:
                    slow_add(1, 1, wait=1.0)
                except Slow:
                    pass
                else:
                    raise AssertionError("the alarm did not interrupt the call")
                assert slow_add(2, 3) == 5
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
    """)
    trusted = "def slow_add(a, b, wait=0.0):\n    raise NotImplementedError\n"
    execution = engine.execute(make_request(program, tests, "slow_add", isolation="split",
                                            trusted_program=trusted))
    [outcome] = execution.tests
    assert (outcome.status, outcome.reason) == ("error", "interrupted"), outcome
    assert "interrupted" in outcome.message, outcome.message


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_the_uid_a_sample_runs_under_has_a_user_name(engine: Engine, isolation: Isolation) -> None:
    """getpass.getuser() and pwd lookups of the own uid work, in the candidate's process too."""
    program = code("""
        import getpass
        import os
        import pwd


        def user():
            return pwd.getpwuid(os.getuid()).pw_name == getpass.getuser() != ""


        def add(a, b):
            return user()
    """)
    tests = "def test_target():\n    assert add(1, 2)\n\ndef test_tests():\n    assert user()\n"
    trusted = program.replace("return user()\n", "raise NotImplementedError\n")
    execution = engine.execute(make_request(program, tests, "add", isolation=isolation,
                                            trusted_program=trusted if isolation == "split" else None))
    assert execution.status == "pass", [test.message[-300:] for test in execution.tests]


def test_an_engine_refuses_to_start_when_every_sandbox_uid_is_leased(best_sandbox: Sandbox) -> None:
    """With no free uid left, an engine says so instead of sharing one with another run."""
    if not best_sandbox.drops_privileges:
        pytest.skip("samples run under sandbox uids only when knowbench runs as root")
    leases = []
    try:
        for uid in range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + UID_SLOTS):
            lease = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            leases.append(lease)
            with contextlib.suppress(OSError):  # already leased by another run: just as taken
                lease.bind(f"\0knowbench-sandbox-uid-{uid}")
        with pytest.raises(UserError, match="sandbox uids"):
            SubprocessEngine(best_sandbox, workers=1)
    finally:
        for lease in leases:
            lease.close()


def test_unittest_items_run_as_unittest_runs_them(engine: Engine) -> None:
    """Module and class set-up once, tear-down after the last test, cleanups, skips,
    expected failures and sub-tests: unittest's own semantics."""
    program = "LOG = []\n\ndef add(a, b):\n    return a + b\n"
    tests = code("""
        import unittest

        def setUpModule():
            LOG.append("module")

        def tearDownModule():
            LOG.append("module-down")

        class TestAdd(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                LOG.append("class")

            @classmethod
            def tearDownClass(cls):
                LOG.append("class-down")

            def setUp(self):
                self.addCleanup(LOG.append, "cleanup")

            def test_a(self):
                self.assertEqual(add(1, 1), 2)

            @unittest.expectedFailure
            def test_expected(self):
                self.assertEqual(add(1, 1), 3)

            @unittest.skip("not today")
            def test_skipped(self):
                pass

            def test_sub(self):
                for n in range(3):
                    with self.subTest(n=n):
                        self.assertEqual(add(n, 0), 0)
    """)
    later = "def test_order():\n    assert LOG == ['module', 'class', 'cleanup', 'cleanup', 'cleanup', " \
            "'class-down', 'module-down']\n"
    execution = engine.execute(make_request(program, {"t": tests, "u": later}, "add"))
    assert statuses(execution) == {"t::TestAdd::test_a": "pass", "t::TestAdd::test_expected": "pass",
                                   "t::TestAdd::test_skipped": "error", "t::TestAdd::test_sub": "fail",
                                   "u::test_order": "pass"}, execution.tests
    assert execution.tests[2].reason == "skipped"
    assert "n=1" in execution.tests[3].message


def test_unexpected_success_fails(engine: Engine) -> None:
    tests = code("""
        import unittest

        class TestAdd(unittest.TestCase):
            @unittest.expectedFailure
            def test_a(self):
                self.assertEqual(add(1, 1), 2)
    """)
    execution = engine.execute(make_request(ADD, tests, "add"))
    assert execution.tests[0].status == "fail"


DIRECT_TESTS = code("""
    import unittest

    SEEN = []

    class TestAdd(unittest.TestCase):
        def setUp(self):
            raise RuntimeError("a script that calls the test never runs setUp")

        def test_a(self):
            SEEN.append("a")
            STATE.append("a")
            self.assertEqual((add(1, 1), STATE, SEEN), (2, ["a"], ["a"]))

        def test_b(self):
            SEEN.append("b")
            STATE.append("b")
            self.assertEqual((add(1, 1), STATE, SEEN), (2, ["b"], ["b"]))

    def test_c():
        STATE.append("c")
        assert STATE == ["c"]
""")
DIRECT_PROGRAM = "STATE = []\n\ndef add(a, b):\n    return a + b\n"


def test_direct_invocation_calls_the_test_alone_in_a_fresh_process(engine: Engine) -> None:
    """As DomainEval's scripts did: `TestAdd().test_a()`, no set-up, nothing shared with the
    task's other items (the program's module state included)."""
    execution = engine.execute(make_request(DIRECT_PROGRAM, DIRECT_TESTS, "add", invocation="direct"))
    assert statuses(execution) == {"t::TestAdd::test_a": "pass", "t::TestAdd::test_b": "pass",
                                   "t::test_c": "pass"}, execution.tests
    assert [test.called for test in execution.tests] == [True, True, False]


def test_framework_invocation_runs_set_up_and_shares_the_process(engine: Engine) -> None:
    execution = engine.execute(make_request(DIRECT_PROGRAM, DIRECT_TESTS, "add"))
    assert statuses(execution) == {"t::TestAdd::test_a": "error", "t::TestAdd::test_b": "error",
                                   "t::test_c": "pass"}
    assert "never runs setUp" in execution.tests[0].message


def test_direct_invocation_reports_a_test_that_kills_its_process_and_goes_on(engine: Engine) -> None:
    tests = code("""
        import os

        def test_dies():
            os._exit(3)

        def test_after():
            assert add(1, 1) == 2
    """)
    execution = engine.execute(make_request(ADD, tests, "add", invocation="direct"))
    assert [(t.status, t.reason) for t in execution.tests] == [("error", "exited-early"), ("pass", None)]
    assert "exit code 3" in execution.tests[0].message


def test_direct_invocation_keeps_the_cpu_limit_per_sample(engine: Engine) -> None:
    """Each item's process gets what is left of the sample's CPU time, not a fresh budget."""
    spin = "def test_{n}():\n    import time\n    end = time.process_time() + 0.7\n" \
           "    while time.process_time() < end:\n        pass\n\n\n"
    tests = "".join(spin.format(n=n) for n in range(3))
    execution = engine.execute(make_request(ADD, tests, "add", invocation="direct", cpu_s=1, wall_s=30))
    first, *rest = (t.status for t in execution.tests)
    assert first == "pass"
    assert "timeout" in rest, execution.tests


WARNS = code("""
    import warnings

    def old(x):
        warnings.warn("old is deprecated", DeprecationWarning, stacklevel={level})
        return x
""")
CHECKS_STACKLEVEL = code("""
    import warnings

    def test_the_warning_points_at_the_caller():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old(1)
        assert caught[0].filename == __file__
""")


def test_a_specs_file_is_its_own_so_stacklevel_checks_work(engine: Engine) -> None:
    """As under pytest: `__file__` in a test is the test's file, so a warning raised with the
    right stacklevel points at it, and one raised with the wrong one does not."""
    right = engine.execute(make_request(WARNS.format(level=2), CHECKS_STACKLEVEL, "old"))
    wrong = engine.execute(make_request(WARNS.format(level=1), CHECKS_STACKLEVEL, "old"))
    assert (right.tests[0].status, wrong.tests[0].status) == ("pass", "fail"), (right.tests, wrong.tests)


PANDAS_WARNS = code("""
    import warnings

    from pandas.util._exceptions import find_stack_level

    def rename_axis(x):
        warnings.warn("rename_axis is deprecated", FutureWarning, stacklevel=find_stack_level())
        return x
""")
PANDAS_CHECKS_STACKLEVEL = code("""
    import pandas._testing as tm

    def test_warns():
        with tm.assert_produces_warning(FutureWarning, match="deprecated"):
            assert rename_axis(1) == 1
""")


def test_direct_invocation_runs_program_and_test_as_one_script(engine: Engine) -> None:
    """DomainEval ran `program + test` as one script: a warning pandas attributes to the first
    frame outside pandas (here the target's) is in the test's file too, so pandas' stacklevel
    check passes there and must under direct invocation; the test also shares the program's
    globals, as in that script."""
    shares = code("""
        def test_shares_the_programs_globals():
            global LIMIT
            LIMIT = 10
            assert limit() == 10
    """)
    program = PANDAS_WARNS + "\nLIMIT = 1\n\ndef limit():\n    return LIMIT\n"
    execution = engine.execute(make_request(program, {"t": PANDAS_CHECKS_STACKLEVEL, "u": shares},
                                            "rename_axis", invocation="direct"))
    assert [t.status for t in execution.tests] == ["pass", "pass"], execution.tests


def test_a_failure_in_a_direct_item_points_at_the_tests_own_lines(engine: Engine) -> None:
    tests = "def test_wrong():\n    total = add(1, 2)\n    assert total == 4\n"
    execution = engine.execute(make_request(ADD, tests, "add", invocation="direct"))
    assert "assert total == 4" in execution.tests[0].message, execution.tests[0].message


def test_direct_invocation_reports_a_test_that_cannot_get_a_process(engine: Engine) -> None:
    """A test that leaves processes behind can spend the sample's task budget (`threads`,
    below the `processes` count that would end the sample): the later items then fail (no
    process, or no thread, for them), and the run still finishes."""
    tests = code("""
        import os
        import time

        def fill():
            # Every process left behind takes any slot that frees up, for 30 s.
            end = time.monotonic() + 30
            while time.monotonic() < end:
                try:
                    if os.fork() == 0:
                        continue
                except OSError:
                    time.sleep(0.001)

        def test_fills_the_process_budget():
            if os.fork() == 0:
                fill()
                os._exit(0)
            time.sleep(0.5)

        def test_after():
            assert add(1, 1) == 2
    """)
    execution = engine.execute(make_request(ADD, tests, "add", invocation="direct", threads=16, processes=64, wall_s=20))
    assert [(t.status, t.reason) for t in execution.tests] == [("pass", None), ("error", "exited-early")], \
        execution.tests
    assert "runner did not finish" not in execution.note


@pytest.mark.parametrize("ending", ["returns", "raises", "collected"])
@pytest.mark.parametrize("name", ["subprocess", "forkserver"])
def test_an_engine_that_was_never_closed_leaves_no_directory_behind(name: str, ending: str, tmp_path: Path,
                                                                   best_sandbox: Sandbox) -> None:
    """A script that runs a sample and forgets `close()` (or ends with an exception, or drops
    the engine) leaves none of the engine's files: its directory goes with the interpreter,
    and not with a child the script forked."""
    script = textwrap.dedent(f'''
        import gc, os, pathlib, sys
        from knowbench.execution.engine import ExecutionRequest, SubprocessEngine
        from knowbench.execution.forkserver import ForkServerEngine
        from knowbench.execution.sandbox import resolve_sandbox
        from knowbench.benchmark.schema import TestSpec
        from knowbench.records import Limits

        def entries():
            return len(list(pathlib.Path(sys.argv[1]).iterdir()))

        sandbox = resolve_sandbox({best_sandbox.kind!r})
        kind = SubprocessEngine if {name!r} == "subprocess" else ForkServerEngine
        engine = kind(sandbox, workers=1, scratch=sys.argv[1])
        request = ExecutionRequest(program="def add(a, b):\\n    return a + b\\n", entry_point="add",
                                   tests=[TestSpec(name="t", code="def test_add():\\n    assert add(2, 3) == 5\\n")],
                                   limits=Limits(wall_s=30))
        assert engine.execute(request).status == "pass"
        print(entries(), flush=True)
        if os.fork() == 0:  # a child of the script's that ends normally leaves it alone
            sys.exit(0)
        os.wait()
        print(entries(), flush=True)
        if {ending!r} == "raises":
            raise SystemExit("the script failed")
        if {ending!r} == "collected":
            del engine
            gc.collect()
            print(entries(), flush=True)
    ''')
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == (1 if ending == "raises" else 0), done.stderr[-2000:]
    counts = done.stdout.split()
    assert counts[:2] == ["1", "1"]  # the engine's directory, while it ran, and after the child
    if ending == "collected":
        assert counts[2] == "0"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["subprocess", "forkserver"])
def test_a_new_engine_removes_the_directories_of_engines_killed_outright(name: str, tmp_path: Path,
                                                                         best_sandbox: Sandbox) -> None:
    """A process killed outright (SIGKILL, the OOM killer, `ray.kill`) runs no finalizer, so
    its engine's directory stays behind; the next engine made beside it finds that directory's
    owner gone and removes it. A live engine's directory, in another process, stays, and so
    do a `knowbench-*` directory that no engine made and one marked on another machine."""
    script = textwrap.dedent(f'''
        import os, signal, sys
        from knowbench.execution.engine import ExecutionRequest, SubprocessEngine
        from knowbench.execution.forkserver import ForkServerEngine
        from knowbench.execution.sandbox import resolve_sandbox
        from knowbench.benchmark.schema import TestSpec
        from knowbench.records import Limits

        kind = SubprocessEngine if {name!r} == "subprocess" else ForkServerEngine
        engine = kind(resolve_sandbox({best_sandbox.kind!r}), workers=1, scratch=sys.argv[1])
        request = ExecutionRequest(program="def add(a, b):\\n    return a + b\\n", entry_point="add",
                                   tests=[TestSpec(name="t", code="def test_add():\\n    assert add(2, 3) == 5\\n")],
                                   limits=Limits(wall_s=30))
        assert engine.execute(request).status == "pass"
        print(engine.scratch if hasattr(engine, "scratch") else engine._scratch, flush=True)
        if sys.argv[2] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        sys.stdin.read()  # until the test closes it
    ''')
    live = subprocess.Popen([sys.executable, "-c", script, str(tmp_path), "wait"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None and live.stdin is not None
        live_dir = Path(live.stdout.readline().strip())
        killed = subprocess.run([sys.executable, "-c", script, str(tmp_path), "kill"], capture_output=True,
                                text=True, timeout=120)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        killed_dir = Path(killed.stdout.strip())
        foreign = tmp_path / "knowbench-not-an-engines"
        foreign.mkdir()
        (foreign / "kept").write_text("x")
        # Marked on another machine or boot (a file system shared between machines: its lock
        # may hold only there), and a mark that is a FIFO (no one may stall the sweep).
        elsewhere, fifo = tmp_path / "knowbench-fork-elsewhere", tmp_path / "knowbench-fork-fifo"
        elsewhere.mkdir()
        (elsewhere / ".knowbench-owner").write_text("4242 00000000-0000-0000-0000-000000000000\n")
        fifo.mkdir()
        os.mkfifo(fifo / ".knowbench-owner")
        assert killed_dir.is_dir() and live_dir.is_dir()  # nothing removed the killed one's
        engine: Engine = (SubprocessEngine(best_sandbox, workers=1, scratch=tmp_path) if name == "subprocess"
                          else ForkServerEngine(best_sandbox, workers=1, scratch=tmp_path))
        engine.close()
        assert not killed_dir.exists()
        assert live_dir.is_dir() and (foreign / "kept").is_file() and elsewhere.is_dir() and fifo.is_dir()
        live.stdin.close()
        assert live.wait(timeout=60) == 0
        assert not live_dir.exists()  # its own engine removed it, as it ended
    finally:
        live.kill()
        live.wait()


# What a sample reports of its signal state, and an honest test that interrupts a child.
SIGNAL_STATE = code("""
    import signal, subprocess, sys


    def state():
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        # Every signal Python can use (the C library keeps two real-time ones for itself), less
        # the two Python ignores.
        usable = sum(1 << (number - 1) for number in signal.valid_signals()
                     if number not in (signal.SIGPIPE, signal.SIGXFSZ))
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        child.send_signal(signal.SIGINT)
        return [int(status["SigBlk"], 16) & usable, int(status["SigIgn"], 16) & usable,
                signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                child.wait(timeout=5) != 0]  # an honest test's Ctrl-C reaches the child
""")
SIGNAL_TESTS = "def test_state():\n    assert state() == [0, 0, True, True]\n"


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_sample_starts_with_the_signals_of_a_fresh_interpreter(engine: Engine, isolation: str) -> None:
    """Whatever its engine inherited (Ray's workers block SIGINT)."""
    execution = engine.execute(make_request(SIGNAL_STATE, SIGNAL_TESTS, "state", isolation=isolation))
    assert execution.status == "pass", [test.message for test in execution.tests]


@pytest.mark.parametrize("name", ["subprocess", "forkserver"])
def test_signals_the_engine_blocks_or_ignores_do_not_reach_samples(name: str, best_sandbox: Sandbox) -> None:
    """A shell ignores SIGINT and SIGQUIT in what it starts in the background, nohup SIGHUP;
    a thread may block signals. Both survive fork and exec."""
    ignored = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
    before = {number: signal.getsignal(number) for number in ignored}

    def run() -> Execution:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        the_engine = new_engine(name, best_sandbox, workers=1)
        try:
            return the_engine.execute(make_request(SIGNAL_STATE, SIGNAL_TESTS, "state"))
        finally:
            the_engine.close()

    try:
        for number in ignored:
            signal.signal(number, signal.SIG_IGN)
        with ThreadPoolExecutor(max_workers=1) as pool:  # (the mask is this thread's alone)
            execution = pool.submit(run).result()
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
    assert execution.status == "pass", [test.message for test in execution.tests]


# About 150 MB queued in the kernel's buffers of Unix socket pairs (3 processes, 120 pairs
# each: the open-files limit is 256), held while the budget is polled: no process's memory,
# no file and no limit counts them.
CHECK_ADD = "def test_add():\n    assert add(2, 3) == 5\n"
FILL = code("""
    import socket


    def fill(end):
        end.setblocking(False)
        chunk = b'x' * 65536
        while len(chunk) >= 512:
            try:
                end.send(chunk)
            except BlockingIOError:
                chunk = chunk[:len(chunk) // 2]
""")
SOCKETS = {
    "pairs": FILL + in_children("""
        held = []
        for _ in range(120):
            held += socket.socketpair()
            fill(held[-2])
            fill(held[-1])
        time.sleep(0.6)
    """),
    # The sender's end closed: what waits in the receiver's queue is charged to no socket left.
    "senders closed": FILL + in_children("""
        held = []
        for _ in range(240):
            receiver, sender = socket.socketpair()
            fill(sender)
            sender.close()
            held.append(receiver)
        time.sleep(0.6)
    """),
}


@pytest.mark.parametrize("isolation", ["in-process", "split"])
@pytest.mark.parametrize("held", list(SOCKETS))
def test_memory_queued_in_sockets_counts_against_the_sample(engine: Engine, held: str, isolation: str) -> None:
    """On every engine: the fork server asks the kernel about its sandbox's sockets itself, the
    subprocess engine through a socket its runner makes in the sandbox and hands over."""
    hoarder = engine.execute(make_request(SOCKETS[held] + ADD, CHECK_ADD, "add", memory_mb=64, isolation=isolation))
    assert hoarder.status == "memory", (hoarder.status, hoarder.tests[0].message)
    fits = engine.execute(make_request(SOCKETS[held] + ADD, CHECK_ADD, "add", memory_mb=512, isolation=isolation))
    assert fits.status == "pass", fits.tests[0].message


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_fork_server_without_a_cgroup_counts_what_sockets_hold_itself(best_sandbox: Sandbox, isolation: str) -> None:
    """With no memory cgroup to charge them to, the server's own count of its sandbox's
    sockets is what catches them: through the socket it made before installing the samples'
    seccomp filter (which denies netlink sockets) in itself, the candidates' server too."""
    if not best_sandbox.namespaces:
        pytest.skip("sockets are counted where the sandbox has a network namespace of its own")
    engine = ForkServerEngine(best_sandbox, workers=1, cgroups=False)
    try:
        for memory_mb, status in ((64, "memory"), (512, "pass")):
            execution = engine.execute(make_request(SOCKETS["pairs"] + ADD, CHECK_ADD, "add",
                                                    memory_mb=memory_mb, isolation=isolation))
            assert execution.status == status, (memory_mb, execution.status, execution.tests[0].message)
    finally:
        engine.close()



@NEEDS_CGROUPS
def test_each_start_of_a_server_gets_a_fresh_cgroup(best_sandbox: Sandbox) -> None:
    """What an earlier server left charged to its cgroup (page cache a sample read) would
    raise the next one's baseline, and so the room of every sample after it."""
    engine = ForkServerEngine(best_sandbox, workers=1)
    try:
        assert engine.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
        server = engine._servers[0]
        first = server.cgroup.path  # type: ignore[union-attr]
        server.stop()  # as after a sample that left processes behind
        assert engine.execute(make_request(ADD, CHECK_ADD, "add")).status == "pass"
        assert server.cgroup.path != first and not first.exists()  # type: ignore[union-attr]
    finally:
        engine.close()
    assert not server.cgroup and not first.parent.joinpath(first.name).exists()


READ_FIRST_LINE = ADD + "def first_line(path):\n    with open(path) as handle:\n        return handle.readline()\n"
MOCK_OPEN_TESTS = code("""
    import unittest
    from unittest.mock import mock_open, patch


    class ReadTest(unittest.TestCase):
        def test_reads_the_first_line(self):
            with patch("builtins.open", mock_open(read_data="a = 1\\nb = 2\\n")):
                self.assertEqual(first_line("settings.ini"), "a = 1\\n")

        def test_later(self):
            self.assertEqual(add(2, 3), 5)
""")


def test_state_a_testing_module_keeps_as_it_runs_is_no_tampering(engine: Engine) -> None:
    """`mock_open` sets `unittest.mock.file_spec` and `open_spec` on its first call (its own
    `global` state): an honest test that uses it passes in-process, and so do the tests after
    it; a wrong program still fails."""
    right = engine.execute(make_request(READ_FIRST_LINE, MOCK_OPEN_TESTS, "first_line", isolation="in-process"))
    assert [test.status for test in right.tests] == ["pass", "pass"], [test.message for test in right.tests]
    wrong = READ_FIRST_LINE.replace("handle.readline()", "handle.read()")
    assert engine.execute(make_request(wrong, MOCK_OPEN_TESTS, "first_line", isolation="in-process")).status == "fail"


def test_code_planted_in_a_testing_modules_own_state_is_tampering(engine: Engine) -> None:
    """The state a watched module keeps for itself is not compared only while it is plain
    data: a function planted as `unittest.mock.open_spec` (whose signature every mock of
    `open` would then match calls with) is tampering."""
    planted = READ_FIRST_LINE.replace("handle.readline()", "handle.read()") + code("""
        import inspect
        import unittest.mock


        class _Anything(inspect.Signature):
            def bind(self, *args, **kwargs):
                return inspect.Signature().bind()


        def _spec():
            pass


        _spec.__signature__ = _Anything()
        unittest.mock.open_spec = _spec
    """)
    execution = engine.execute(make_request(planted, MOCK_OPEN_TESTS, "first_line", isolation="in-process"))
    assert execution.tests[0].reason == "tampering", execution.tests[0].message


VIEWS_PROGRAM = code("""
    import array
    import types


    def shown(d):
        return d.keys(), d.values(), d.items(), array.array("i", d.values()), types.SimpleNamespace(**d)
""")
VIEWS_TESTS = code("""
    def test_what_the_standard_library_hands_out_crosses():
        keys, values, items, numbers, namespace = shown({"a": 1, "b": 2})
        assert sorted(keys) == ["a", "b"] and "a" in keys and len(keys) == 2
        assert sorted(values) == [1, 2]
        assert ("b", 2) in items
        assert list(numbers) == [1, 2] and numbers.typecode == "i"
        assert namespace.a == 1 and vars(namespace) == {"a": 1, "b": 2}
""")


def test_dict_views_arrays_and_namespaces_cross_split(engine: Engine) -> None:
    """A correct program that returns a dict view, an `array` or a `SimpleNamespace` where
    another would return a list passes split, as under pytest."""
    right = engine.execute(make_request(VIEWS_PROGRAM, VIEWS_TESTS, "shown", isolation="split"))
    assert right.status == "pass" and right.isolation == "split", right.tests[0].message
    wrong = VIEWS_PROGRAM.replace("types.SimpleNamespace(**d)", "types.SimpleNamespace(a=0)")
    assert engine.execute(make_request(wrong, VIEWS_TESTS, "shown", isolation="split")).status == "fail"


TEMPFILE_PROGRAM = code("""
    import os


    def summarise(directory, listing, forge=None):
        if forge is not None:
            with open(forge, "w") as handle:
                handle.write("forged")
        with open(os.path.join(directory, "input.txt")) as handle:
            total = sum(int(line) for line in handle)
        with open(listing) as handle:
            names = handle.read().split()
        os.mkdir(os.path.join(directory, "out"))
        with open(os.path.join(directory, "out", "total.txt"), "w") as handle:
            handle.write(str(total))
        return total, names
""")
TEMPFILE_TESTS = code("""
    import os
    import tempfile

    import pytest


    def test_the_target_reads_and_adds_to_what_tempfile_made():
        with tempfile.TemporaryDirectory() as directory, tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:
            with open(os.path.join(directory, "input.txt"), "w") as handle:
                handle.write("1\\n2\\n")
            listing.write("a b")
            listing.flush()
            assert summarise(directory, listing.name) == (3, ["a", "b"])
            with open(os.path.join(directory, "out", "total.txt")) as handle:
                assert handle.read() == "3"
        # (removed as far as the tests' uid may: the candidate's subdirectory is left to the
        # work directory's removal)
        assert not os.path.exists(os.path.join(directory, "input.txt"))


    def test_the_tests_own_files_stay_theirs():
        directory = tempfile.mkdtemp()
        expected = os.path.join(directory, "expected.txt")
        with open(expected, "w") as handle:
            handle.write("3")
        with pytest.raises(PermissionError):
            summarise(directory, expected, forge=expected)
        with open(expected) as handle:
            assert handle.read() == "3"
""")


def test_what_the_tests_make_with_tempfile_is_shared_with_the_candidate(engine: Engine) -> None:
    """Split: the candidate reads what the tests put in `tempfile`'s directories and files and
    adds its own, as under pytest, and cannot change the tests' own files (as in `tmp_path`)."""
    execution = engine.execute(make_request(TEMPFILE_PROGRAM, TEMPFILE_TESTS, "summarise", isolation="split"))
    assert execution.isolation == "split"
    assert [test.status for test in execution.tests] == ["pass", "pass"], [test.message for test in execution.tests]


BYTES_PROGRAM = code("""
    import sys


    def emit(data):
        sys.stdout.buffer.write(data)
        sys.stdout.write(" and text\\n")
        return sys.stdout.encoding
""")
BYTES_TESTS = code("""
    def test_bytes_through_the_buffer(capsys):
        assert emit(b"bytes").lower().replace("-", "") == "utf8"
        assert capsys.readouterr().out == "bytes and text\\n"


    def test_bytes_that_are_no_text_as_they_were_written(capsysbinary):
        emit(b"\\xff\\xfe")
        assert capsysbinary.readouterr().out == b"\\xff\\xfe and text\\n"
""")


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_target_may_write_bytes_to_its_stdouts_buffer(engine: Engine, isolation: Isolation) -> None:
    """A process's stdout takes bytes through `.buffer`; split, what the candidate's call
    prints is captured in such a stream and replayed in the tests' process, bytes as they were
    written (`capsysbinary` reads them back)."""
    execution = engine.execute(make_request(BYTES_PROGRAM, BYTES_TESTS, "emit", isolation=isolation))
    assert execution.status == "pass", [test.message for test in execution.tests]


PRINTS_PROGRAM = code("""
    def emit(text):
        print(text)
        return len(text)
""")
PRINTS_TESTS = code("""
    import contextlib
    import io


    def test_into_a_stream_of_another_encoding():
        stream = io.TextIOWrapper(io.BytesIO(), encoding="latin-1", newline="\\r\\n")
        with contextlib.redirect_stdout(stream):
            emit("caf\\u00e9")
        stream.flush()
        assert stream.buffer.getvalue() == "caf\\u00e9\\r\\n".encode("latin-1")


    def test_as_many_characters_as_the_cap_allows(capsys):
        assert emit("\\u00e9" * 40000) == 40000
        assert capsys.readouterr().out == "\\u00e9" * 40000 + "\\n"
""")


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_what_the_target_prints_reaches_the_tests_stream_as_text(engine: Engine, isolation: Isolation) -> None:
    """Split, what the candidate's call printed is written to the tests' stream through its own
    encoding and newlines (only the harness's capture takes the bytes as they were), and the
    output cap counts characters, not their UTF-8 bytes."""
    execution = engine.execute(make_request(PRINTS_PROGRAM, PRINTS_TESTS, "emit", isolation=isolation))
    assert execution.status == "pass", [test.message for test in execution.tests]


# About 100 MB in pipe buffers: each pipe enlarged to 1 MiB until the user's pipe quota is
# spent (`fs.pipe-user-pages-soft`), then 4 KiB ones, 240 a process in 40 processes. No
# process's memory, file, socket or limit counts them; the kernel charges them to the memory
# cgroup the fork server runs the sample in.
PIPES = in_children("""
    import fcntl
    held = []
    for _ in range(120):
        reader, writer = os.pipe()
        os.set_blocking(writer, False)
        try:
            fcntl.fcntl(writer, 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            pass
        try:
            while True:
                os.write(writer, b'x' * 65536)
        except BlockingIOError:
            held.append((reader, writer))
    time.sleep(0.6)
""", children=40)


@NEEDS_CGROUPS
@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_memory_the_kernel_holds_counts_against_the_sample_in_its_cgroup(best_sandbox: Sandbox,
                                                                          isolation: str) -> None:
    """The fork server's memory cgroup counts what no list shows (pipes here); without one, the
    same sample passes a 64 MB budget. The Ray engine's actors run the same fork servers."""
    counted, uncounted = (ForkServerEngine(best_sandbox, workers=1, cgroups=cgroups) for cgroups in (True, False))
    try:
        hoarder = counted.execute(make_request(PIPES + ADD, CHECK_ADD, "add", memory_mb=64, isolation=isolation))
        assert hoarder.status == "memory", (hoarder.status, hoarder.tests[0].message)
        fits = counted.execute(make_request(PIPES + ADD, CHECK_ADD, "add", memory_mb=512, isolation=isolation))
        assert fits.status == "pass", fits.tests[0].message
        unseen = uncounted.execute(make_request(PIPES + ADD, CHECK_ADD, "add", memory_mb=64, isolation=isolation))
        assert unseen.status == "pass", unseen.tests[0].message
        assert "memory cgroup v1" in str(counted.describe()["memory_cgroup"])
    finally:
        counted.close()
        uncounted.close()
