"""Hostile samples: none may pass a single test item, and none may change the host.

One conformance table, run against every sandbox this machine has (bwrap, unshare). Each
case is written so that its tests pass only if the attack worked: a passing item means the
engine was fooled or the sandbox leaked. After each case the host is checked: canary files
unchanged, nothing written outside the work directory, no connection reached the test's
own servers, no process of a sandbox uid left behind.

Programs and tests are `string.Template`s: `$name` is replaced by a value of `Host.values()`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import socket
import stat
import subprocess
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import pytest

from helpers import RUNNER_GLOBALS, make_request
from knowbench.errors import UserError
from knowbench.execution.engine import (
    CANDIDATE_UID_BASE,
    SANDBOX_UID_BASE,
    UID_SLOTS,
    Engine,
    ExecutionRequest,
    Isolation,
    SubprocessEngine,
)
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.records import Execution

REPO = Path(__file__).resolve().parents[1]
# Every uid a worker may lease, for judges and for candidates.
SANDBOX_UIDS = frozenset({*range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + UID_SLOTS),
                          *range(CANDIDATE_UID_BASE, CANDIDATE_UID_BASE + UID_SLOTS)})
SMALL_LIMITS: dict[str, Any] = {"wall_s": 3.0, "memory_mb": 256, "cpu_s": 5}
# Imported by the runner before it drops privileges, so that an attack does not fail merely
# because the sandbox uid cannot import a module (see test_sandbox_imports_without_preload).
PRELOAD = ("socket", "ctypes", "resource", "signal", "threading", "types", "gc", "json", "select",
           "errno", "builtins", "unittest")
NO_FS_ISOLATION = ("unshare gives the sample no mount isolation: the host file system is visible "
                   "and writable wherever its permissions allow")
NO_HIDING = "unshare cannot hide paths: the repository/benchmark is readable by any uid"


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


ENGINE_NAMES = ("subprocess", "forkserver", "ray")


@dataclass(frozen=True)
class Case:
    id: str
    program: str
    tests: dict[str, str]
    limits: dict[str, Any] = field(default_factory=dict)
    preload: tuple[str, ...] = ()
    unshare_gap: str = ""  # why this case cannot hold under unshare: expected to fail there
    linger_s: float = 0.0  # watch the host this long after the sample ended
    # Why in-process isolation cannot stop this case (the sample forges the verdict from inside
    # the process that computes it): expected to fail there, on `gap_engines`; split must hold.
    in_process_gap: str = ""
    gap_engines: tuple[str, ...] = ENGINE_NAMES
    # A host secret that must not show up in the stored stdout/stderr or any message.
    leak_marker: str = ""
    # The engine must answer within the wall clock plus a few seconds (no stalled server).
    prompt: bool = False
    # Watch the host's available memory while the sample runs: it must never run low.
    watch_memory: bool = False
    slow: bool = False
    # The benchmark's own program (split: what the judge runs, target stubbed); it decides
    # which packages' classes may cross. Default: the target's stub alone.
    trusted: str | None = None
    # A race wins only some of the time: the sample runs up to this many times, and the
    # verdict must hold in every run (so where a gap is expected, one forged run shows it).
    attempts: int = 1


HONEST_ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = "def add(a, b):\n    return a - b\n"
# Pass with an honest add: the sample must not pass them by exiting or crashing early.
T_TRUE = {"t": "def test_a():\n    assert add(1, 2) == 3\n\n\ndef test_b():\n    assert add(2, 2) == 4\n"}
# False for every add: only a forged verdict passes them.
T_FALSE = {"t": "def test_a():\n    assert add(1, 2) == 4\n\n\ndef test_b():\n    assert add(2, 2) == 5\n"}
T_UNITTEST_FALSE = {"t": dedent("""
    import unittest


    class TestAdd(unittest.TestCase):
        def test_a(self):
            self.assertEqual(add(1, 2), 4)

        def test_b(self):
            self.assertTrue(add(2, 2) == 5)
""")}
T_UNITTEST_RAISES = {"t": dedent("""
    import unittest


    class TestAdd(unittest.TestCase):
        def test_a(self):
            with self.assertRaises(TypeError):
                add(1, 2)

        def test_b(self):
            with self.assertRaises(ValueError):
                add(2, 2)
""")}
# Pass with an honest add, checked against a fixture (`want`): a candidate that makes the
# fixture's value its own answer passes them.
def _hook_added_to_the_harness(registry: str, hook: str) -> str:
    """A program whose target adds `hook` (a conftest hook that marks the tests xfail) to the
    harness's `registry` of conftest hooks while the tests run."""
    return "import knowbench_pytest\nimport pytest\n\n" + dedent(hook) + dedent(f"""

        def add(a, b):
            for harness in list(knowbench_pytest._HARNESSED.values()):
                if harness:
                    harness["{registry}"].append(hook)
            return a - b
    """)


T_WANT_FIXTURE = {"t": dedent("""
    import pytest


    @pytest.fixture
    def want():
        return 3


    def test_a(want):
        assert add(1, 2) == want


    def test_b(want):
        assert add(2, 2) == want + 1
""")}
T_PYTEST_APPROX = {"t": dedent("""
    import pytest


    def test_a():
        assert add(0.1, 0.2) == pytest.approx(0.4)


    def test_b():
        assert add(2.0, 2.0) == pytest.approx(5.0)
""")}
T_PYTEST_RAISES = {"t": dedent("""
    import pytest


    def test_a():
        with pytest.raises(TypeError):
            add(1, 2)


    def test_b():
        with pytest.raises(ValueError):
            add(2, 2)
""")}

# Writes forged result records (for every item, with guessed nonces) to fds 1..20.
FORGE = dedent("""
    import json
    import os

    def _forge(nonces=("", "0" * 32, None)):
        records = [{"item": item, "status": "pass", "message": "", "duration_s": 0.0, "nonce": nonce}
                   for nonce in nonces for item in ("t::test_a", "t::test_b")]
        records += [{"done": True, "nonce": nonce} for nonce in nonces]
        data = "".join(json.dumps(record) + "\\n" for record in records).encode()
        for fd in range(1, 21):
            try:
                os.write(fd, data)
            except OSError:
                pass
""")

# Finds the runner's frame from inside the sample.
FRAME_WALK = dedent("""
    import sys

    def _runner_locals(name):
        frame = sys._getframe()
        while frame is not None and name not in frame.f_locals:
            frame = frame.f_back
        return frame.f_locals
""")

PARENT_GONE = dedent("""
    import os
    import signal
    import time

    def _parent_gone(kill):
        parent = os.getppid()
        kill(parent)
        time.sleep(0.3)
        if parent == 0:  # the parent is outside this pid namespace: nothing was proven
            return False
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            return True
        return False
""")

# Why in-process isolation cannot stop a class of attack (README: "Trust").
FRAMES_GAP = "in-process, the sample's own frames lead to the worker's hand-over"
FINALIZER_GAP = "in-process, the sample's finalizers run on the reporting thread"
GLOBALS_GAP = "in-process, the sample can add names to the runner's globals or patch what it calls"
MEMORY_GAP = "in-process, ctypes reads the runner's thread states and memory"
FD_GAP = "in-process, the sample can re-point the result pipe and rewrite records in flight"
RACE_GAP = "in-process, the sample can race or intercept the worker's hand-over"

# T_FALSE with many items: for attacks that win some of the time.
T_NUMPY_TESTING_FALSE = {"t": dedent("""
    import numpy as np


    def test_a():
        np.testing.assert_allclose(add(1.0, 2.0), 4.0)


    def test_b():
        np.testing.assert_array_equal(add(np.arange(2), np.arange(2)), [1, 5])
""")}
T_PANDAS_TESTING_FALSE = {"t": dedent("""
    import pandas as pd


    def test_a():
        pd.testing.assert_series_equal(add(pd.Series([1]), pd.Series([2])), pd.Series([4]))
""")}
# A benchmark program importing collections (split: its classes may cross), target stubbed.
TRUSTED_IMPORTS_COLLECTIONS = "from collections import Counter\n\n\ndef add(a, b):\n    raise NotImplementedError\n"
T_MANY_FALSE = {"t": "\n\n".join(f"def test_{n}():\n    assert add({n}, 1) == {n + 2}\n" for n in range(40))}

# The reporting thread's scope (nonce, items, report) from a frame on its stack, and a forged
# pass for every item through its own `report`.
RUNNER_SCOPE = dedent("""
    import os
    import sys


    def _runner_scope(frame):
        while frame is not None and not {"report", "items"} <= frame.f_locals.keys():
            frame = frame.f_back
        return None if frame is None else frame.f_locals


    def _report_all_passed(scope):
        for item in scope["items"]:
            scope["report"]({"item": item["id"], "status": "pass", "message": "", "duration_s": 0.0,
                             "called": True})
        scope["report"]({"done": True})
        os._exit(0)
""")

# The runner's module globals from the frame of its function that loads the program: no
# import, no sys.modules.

# The result pipe: the first pipe above fd 2, found through /proc/self/fd.
RESULT_PIPE = dedent("""
    import os


    def _result_pipe():
        for name in sorted(os.listdir("/proc/self/fd"), key=int):
            try:
                if int(name) > 2 and os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                    return int(name)
            except OSError:
                pass
        raise LookupError("no result pipe")
""")

# The files that stdout and stderr are captured in, if they are files (the fork server's).
OUTPUT_FILES = dedent("""
    import os


    def _output_files():
        paths = [os.readlink(f"/proc/self/fd/{fd}") for fd in (1, 2)]
        return [path for path in paths if path.startswith("/") and os.path.isfile(path)]
""")


# Files of 8 MB (under the file-size limit) at `path_of(megabytes written so far)`, until
# something stops the sample or they hold `megabytes`: a bound, so that the host survives when
# nothing stops it.
FILL_FILES = dedent("""
    import os


    def _fill(megabytes, path_of):
        chunk = b"x" * (1 << 20)
        written = 0
        try:
            while written < megabytes:
                with open(path_of(written), "wb") as handle:
                    for _ in range(8):
                        handle.write(chunk)
                written += 8
        except OSError:
            pass
        return written
""")


# Tests whose second test is parametrized: what a candidate called by the first may rewrite.
PARAMETRIZED_LATER_TEST = {"t": dedent("""
    import pytest


    def test_a():
        assert add(1, 2) == 3


    @pytest.mark.parametrize("x, expected", [(2, 4), (3, 5)])
    def test_b(x, expected):
        assert add(x, 2) == expected
""")}


def write_case(case_id: str, path: str, marker: str, gap: str = "") -> Case:
    """Write `path`; `marker` is a file that exists there only on the host, so that a write
    into a private directory of the sandbox (bwrap's /tmp) proves nothing."""
    program = dedent(f"""
        import os


        def add(a, b):
            with open("{path}", "w") as handle:
                handle.write("written by a sample")
            return a + b
    """)
    tests = {"t": dedent(f"""
        import os


        def test_a():
            assert add(1, 2) == 3
            assert os.path.exists("{marker}")


        def test_b():
            assert os.path.exists("{path}") and os.path.exists("{marker}")
    """)}
    return Case(case_id, program, tests, unshare_gap=gap)


CASES = [
    # -- exiting and interrupting: an exit code of 0 proves nothing ------------------------------
    Case("os_exit_at_import", HONEST_ADD + "import os\nos._exit(0)\n", T_TRUE),
    Case("os_exit_in_target", "import os\n\n\ndef add(a, b):\n    os._exit(0)\n", T_TRUE),
    Case("sys_exit_before_tests", HONEST_ADD + "import sys\nsys.exit(0)\n", T_TRUE),
    Case("sys_exit_inside_test", HONEST_ADD, {"t": dedent("""
        import sys


        def test_a():
            assert add(1, 2) == 3
            sys.exit(0)


        def test_b():
            sys.exit(0)
    """)}),
    Case("system_exit_in_target", "def add(a, b):\n    raise SystemExit(0)\n", T_TRUE),
    Case("keyboard_interrupt_at_import", HONEST_ADD + "raise KeyboardInterrupt\n", T_TRUE),
    Case("keyboard_interrupt_in_target", "def add(a, b):\n    raise KeyboardInterrupt\n", T_TRUE),
    # -- the tests' own module, changed as the first test calls the target: later tests pass ----------
    Case("rebind_the_later_tests", dedent("""
        import sys


        def add(a, b):
            spec = vars(sys.modules["knowbench_test"])
            for name in [name for name in spec if name.startswith("test_")]:
                spec[name] = lambda: None
            return a - b
    """), T_TRUE),
    Case("new_code_for_the_later_tests", dedent("""
        import sys


        def add(a, b):
            spec = vars(sys.modules["knowbench_test"])
            for name in [name for name in spec if name.startswith("test_")]:
                spec[name].__code__ = (lambda: None).__code__
            return a - b
    """), T_TRUE),
    Case("mark_the_tests_module_xfail", dedent("""
        import sys

        import pytest


        def add(a, b):
            vars(sys.modules["knowbench_test"])["pytestmark"] = [pytest.mark.xfail(reason="x").mark]
            return a - b
    """), {"t": dedent("""
        import pytest


        @pytest.mark.parametrize("x", [1])
        def test_a(x):
            assert add(x, 2) == 3


        def test_b():
            assert add(2, 2) == 4
    """)}, preload=("pytest",)),
    Case("rebind_a_test_classs_method", dedent("""
        import sys


        def add(a, b):
            vars(sys.modules["knowbench_test"])["TestAdd"].test_b = lambda self: None
            return a - b
    """), {"t": dedent("""
        class TestAdd:
            def test_a(self):
                assert add(1, 2) == 3

            def test_b(self):
                assert add(2, 2) == 4
    """)}),
    Case("append_an_xfail_to_the_tests_marks", dedent("""
        import sys

        import pytest


        def add(a, b):
            vars(sys.modules["knowbench_test"])["test_b"].pytestmark.append(pytest.mark.xfail(reason="x").mark)
            return a - b
    """), {"t": dedent("""
        import pytest


        def test_a():
            assert add(1, 2) == 3


        @pytest.mark.parametrize("x", [2])
        def test_b(x):
            assert add(x, 2) == 4
    """)}, preload=("pytest",)),
    Case("rewrite_a_later_tests_parametrize_cases", dedent("""
        import sys


        def add(a, b):
            test_b = vars(sys.modules["knowbench_test"])["test_b"]
            for mark in test_b.pytestmark:  # the cases become ones this add passes
                if mark.name == "parametrize":
                    mark.args[1][:] = [(x, add_wrong(x, 2)) for x, _ in mark.args[1]]
            return a - b


        def add_wrong(a, b):
            return a - b
    """), PARAMETRIZED_LATER_TEST, preload=("pytest",)),
    Case("give_a_later_tests_mark_other_arguments", dedent("""
        import sys


        def add(a, b):
            test_b = vars(sys.modules["knowbench_test"])["test_b"]
            for mark in test_b.pytestmark:  # a frozen dataclass: set as object does
                if mark.name == "parametrize":
                    object.__setattr__(mark, "args", ("x, expected", [(2, 0), (3, 1)]))
            return a - b
    """), PARAMETRIZED_LATER_TEST, preload=("pytest",)),
    Case("shadow_an_inherited_test", dedent("""
        import sys


        def add(a, b):
            vars(sys.modules["knowbench_test"])["TestMore"].test_b = lambda self: None
            return a - b
    """), {"t": dedent("""
        def test_a():
            assert add(1, 2) == 3


        class TestBase:
            def test_b(self):
                assert add(2, 2) == 4


        class TestMore(TestBase):
            pass
    """)}),
    Case("swap_a_test_classs_bases", dedent("""
        import sys
        import unittest


        class Passing(unittest.TestCase):
            def test_b(self):
                pass


        def add(a, b):
            spec = vars(sys.modules["knowbench_test"])
            spec["TestAdd"].__bases__ = (Passing,)
            return a - b
    """), {"t": dedent("""
        import unittest


        def test_a():
            assert add(1, 2) == 3


        class Checks:
            def test_b(self):
                self.assertEqual(add(2, 2), 4)


        class TestAdd(Checks, unittest.TestCase):
            pass
    """)}),
    Case("replace_a_fixture_in_the_harness", dedent("""
        import knowbench_pytest


        def add(a, b):
            for harness in list(knowbench_pytest._HARNESSED.values()):
                if harness:
                    harness["_kb_FIXTURES"]["want"] = (lambda: a - b, None, "function")
            return a - b
    """), T_WANT_FIXTURE, preload=("pytest",)),
    # -- a pytest_generate_tests hook the tests never had parametrizes a fixture's value away ----------
    Case("add_a_generate_tests_hook_to_the_spec", dedent("""
        import sys


        def add(a, b):
            spec = vars(sys.modules["knowbench_test"])
            spec["pytest_generate_tests"] = lambda metafunc: (
                metafunc.parametrize("want", [a - b]) if "want" in metafunc.fixturenames else None)
            return a - b
    """), T_WANT_FIXTURE, preload=("pytest",)),
    Case("add_a_collection_hook_to_the_harness", _hook_added_to_the_harness("_kb_MODIFY_HOOKS", """
        def hook(items):
            for item in items:
                item.add_marker(pytest.mark.xfail(reason="known"))
    """), T_WANT_FIXTURE, preload=("pytest",)),
    Case("add_a_setup_hook_to_the_harness", _hook_added_to_the_harness("_kb_SETUP_HOOKS", """
        def hook(item):
            item.add_marker(pytest.mark.xfail(reason="known"))
    """), T_WANT_FIXTURE, preload=("pytest",)),
    Case("program_defines_pytest_generate_tests", dedent("""
        def pytest_generate_tests(metafunc):
            if "want" in metafunc.fixturenames:
                metafunc.parametrize("want", [-1])


        def add(a, b):
            return a - b
    """), T_WANT_FIXTURE, preload=("pytest",)),
    Case("add_a_conftest_hook_to_the_harness", dedent("""
        import knowbench_pytest


        def add(a, b):
            for harness in list(knowbench_pytest._HARNESSED.values()):
                if harness:
                    harness["_kb_GENERATE_HOOKS"].append(lambda metafunc: (
                        metafunc.parametrize("want", [a - b]) if "want" in metafunc.fixturenames else None))
            return a - b
    """), T_WANT_FIXTURE, preload=("pytest",)),
    Case("new_code_for_a_fixture", dedent("""
        import sys


        def add(a, b):
            spec = vars(sys.modules["knowbench_test"])
            fixture = spec["expected"]
            function = getattr(fixture, "_fixture_function", None) or getattr(fixture, "__pytest_wrapped__").obj
            function.__code__ = (lambda: -1).__code__
            return a - b
    """), {"t": dedent("""
        import pytest


        @pytest.fixture
        def expected():
            return 3


        def test_a(expected):
            assert add(1, 2) == expected


        def test_b(expected):
            assert add(1, 2) == expected
    """)}, preload=("pytest",)),
    # -- pytest's xfail is a pass only when the tests call it ---------------------------------------
    Case("target_calls_pytests_xfail", "import pytest\n\n\ndef add(a, b):\n    pytest.xfail('x')\n", T_FALSE,
         preload=("pytest",)),
    Case("target_is_pytests_xfail", dedent("""
        import pytest
        names = {"pytest": pytest}
        exec(compile("def add(a, b):\\n    pytest.xfail('x')\\n", "test:t", "exec"), names)
        add = names["add"]
    """), T_FALSE, preload=("pytest",)),
    # -- tampering with the testing machinery -----------------------------------------------------
    Case("patch_testcase_asserts", dedent("""
        import unittest
        unittest.TestCase.assertEqual = lambda self, *args, **kwargs: None
        unittest.TestCase.assertTrue = lambda self, *args, **kwargs: None
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("patch_testcase_assert_code_objects", dedent("""
        import unittest
        unittest.TestCase.assertEqual.__code__ = (lambda self, first, second, msg=None: None).__code__
        unittest.TestCase.assertTrue.__code__ = (lambda self, expr, msg=None: None).__code__
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    # The fork server's record of the functions it watches is reachable as a module global of
    # the runner: emptying it must not blind the check that sees `__code__` replaced.
    Case("forget_the_watched_functions_then_patch_code_objects", dedent("""
        import sys
        import unittest

        for _value in vars(sys.modules["knowbench_runner"]).values():
            if type(_value) is list and _value and type(_value[0]) is tuple:
                for _part in _value[0]:
                    if hasattr(_part, "clear"):
                        try:
                            _part.clear()
                        except Exception:
                            pass
        unittest.TestCase.assertEqual.__code__ = (lambda self, first, second, msg=None: None).__code__
        unittest.TestCase.assertTrue.__code__ = (lambda self, expr, msg=None: None).__code__
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("replace_unittest_in_sys_modules", dedent("""
        import sys
        import types
        import unittest

        class _TestCase(unittest.TestCase):
            def assertEqual(self, *args, **kwargs):
                pass

            def assertTrue(self, *args, **kwargs):
                pass

        _fake = types.ModuleType("unittest")
        _fake.__dict__.update(vars(unittest))
        _fake.TestCase = _TestCase
        sys.modules["unittest"] = _fake
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("patch_assert_raises_context", dedent("""
        import unittest.case
        unittest.case._AssertRaisesContext.__exit__ = lambda self, *exc: True
    """) + HONEST_ADD, T_UNITTEST_RAISES),
    Case("rebind_program_builtins", dedent("""
        import builtins
        import types
        import unittest

        class _TestCase(unittest.TestCase):
            def assertEqual(self, *args, **kwargs):
                pass

            def assertTrue(self, *args, **kwargs):
                pass

        _fake = types.ModuleType("unittest")
        _fake.__dict__.update(vars(unittest))
        _fake.TestCase = _TestCase
        _real_import = builtins.__import__

        def _import(name, *args, **kwargs):
            return _fake if name == "unittest" else _real_import(name, *args, **kwargs)

        __builtins__ = {**vars(builtins), "__import__": _import}
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("patch_builtins_assertion_error", dedent("""
        import builtins
        builtins.AssertionError = type("AssertionError", (Exception,), {})
    """) + WRONG_ADD, T_FALSE),
    Case("patch_builtins_isinstance", dedent("""
        import builtins
        builtins.isinstance = lambda obj, kind: True
    """) + WRONG_ADD, {"t": "def test_a():\n    assert isinstance(add(1, 2), str)\n\n\n"
                            "def test_b():\n    assert isinstance(add(2, 2), bytes)\n"}),
    Case("patch_runner_globals_via_sys_modules", dedent("""
        import sys
        _runner = sys.modules["knowbench_runner"]
        _runner._status_of = lambda error, failure_types: "pass"
        _runner._describe = lambda error: ""
    """) + WRONG_ADD, T_FALSE),
    Case("patch_runner_code_objects_via_sys_modules", dedent("""
        import sys
        sys.modules["knowbench_runner"]._status_of.__code__ = (lambda error, failure_types: "pass").__code__
    """) + WRONG_ADD, T_FALSE),
    Case("patch_the_pytest_emulation_via_sys_modules", dedent("""
        import sys
        sys.modules["knowbench_pytest"].run_function = lambda *args, **kwargs: None  # what classes call
    """) + WRONG_ADD, {"t": "class TestAdd:\n    def test_a(self):\n        assert add(1, 2) == 4\n\n"
                            "    def test_b(self):\n        assert add(2, 2) == 5\n"}),
    Case("patch_the_pytest_emulation_code_objects", dedent("""
        import sys
        sys.modules["knowbench_pytest"].run_function.__code__ = (lambda *args, **kwargs: None).__code__
    """) + WRONG_ADD, T_FALSE),
    Case("patch_pytest_approx", dedent("""
        import pytest

        class _Anything:
            def __eq__(self, other):
                return True

        pytest.approx = lambda *args, **kwargs: _Anything()
    """) + WRONG_ADD, T_PYTEST_APPROX, preload=("pytest",)),
    Case("patch_pytest_approx_class", dedent("""
        import pytest
        type(pytest.approx(1.0)).__eq__ = lambda self, other: True
    """) + WRONG_ADD, T_PYTEST_APPROX, preload=("pytest",)),
    Case("patch_pytest_raises_class", dedent("""
        import pytest
        type(pytest.raises(ValueError)).__exit__ = lambda self, *exc: True
    """) + HONEST_ADD, T_PYTEST_RAISES, preload=("pytest",)),
    Case("patch_numpy_testing", dedent("""
        import numpy.testing
        numpy.testing.assert_allclose = lambda *args, **kwargs: None
        numpy.testing.assert_array_equal = lambda *args, **kwargs: None
    """) + WRONG_ADD, T_NUMPY_TESTING_FALSE, preload=("numpy", "numpy.testing")),
    # The watched modules as their packages and sys.modules hand them out: a package's attribute
    # rebound, a package replaced, a module given a class that answers attributes otherwise.
    Case("rebind_numpy_testing_on_numpy", dedent("""
        import types

        import numpy

        numpy.testing = types.SimpleNamespace(assert_allclose=lambda *args, **kwargs: None,
                                              assert_array_equal=lambda *args, **kwargs: None)
    """) + WRONG_ADD, T_NUMPY_TESTING_FALSE, preload=("numpy", "numpy.testing")),
    Case("replace_numpy_in_sys_modules", dedent("""
        import sys
        import types

        import numpy

        _fake = types.ModuleType("numpy")
        _fake.__dict__.update(vars(numpy))
        _fake.testing = types.SimpleNamespace(assert_allclose=lambda *args, **kwargs: None,
                                              assert_array_equal=lambda *args, **kwargs: None)
        sys.modules["numpy"] = _fake
    """) + WRONG_ADD, T_NUMPY_TESTING_FALSE, preload=("numpy", "numpy.testing")),
    Case("rebind_pandas_testing_on_pandas", dedent("""
        import types

        import pandas

        pandas.testing = types.SimpleNamespace(assert_series_equal=lambda *args, **kwargs: None)
    """) + WRONG_ADD, T_PANDAS_TESTING_FALSE, preload=("pandas", "pandas.testing")),
    Case("swap_the_class_of_pytest", dedent("""
        import types

        import pytest


        class _Anything:
            def __eq__(self, other):
                return True


        class _Module(types.ModuleType):
            def __getattribute__(self, name):
                if name == "approx":
                    return lambda *args, **kwargs: _Anything()
                return super().__getattribute__(name)


        pytest.__class__ = _Module
    """) + WRONG_ADD, T_PYTEST_APPROX, preload=("pytest",)),
    Case("swap_the_class_of_numpy", dedent("""
        import types

        import numpy

        _fake = types.SimpleNamespace(assert_allclose=lambda *args, **kwargs: None,
                                      assert_array_equal=lambda *args, **kwargs: None)


        class _Module(types.ModuleType):
            def __getattribute__(self, name):
                return _fake if name == "testing" else super().__getattribute__(name)


        numpy.__class__ = _Module
    """) + WRONG_ADD, T_NUMPY_TESTING_FALSE, preload=("numpy", "numpy.testing")),
    # The watched machinery's behaviour, not only its names (defaults, names added to a class
    # or hiding a builtin, what a decorated function wraps, the mock and asyncio test cases).
    Case("patch_the_defaults_of_assert_allclose", dedent("""
        import numpy.testing

        numpy.testing.assert_allclose.__defaults__ = (1e9, 1e9) + numpy.testing.assert_allclose.__defaults__[2:]
    """) + WRONG_ADD, {"t": "import numpy as np\n\n\ndef test_a():\n    np.testing.assert_allclose(add(1.0, 2.0), 4.0)\n"},
         preload=("numpy", "numpy.testing")),
    Case("add_getattribute_to_testcase", dedent("""
        import unittest


        def _getattribute(self, name):
            if name.startswith("assert"):
                return lambda *args, **kwargs: None
            return object.__getattribute__(self, name)


        unittest.TestCase.__getattribute__ = _getattribute
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("hide_a_builtin_from_unittest_case", dedent("""
        import unittest.case

        unittest.case.isinstance = lambda obj, kind: True
    """) + WRONG_ADD, {"t": dedent("""
        import unittest


        class TestAdd(unittest.TestCase):
            def test_a(self):
                self.assertIsInstance(add(1, 2), str)
    """)}),
    Case("replace_what_pandas_testing_wraps", dedent("""
        import pandas.testing

        for _name in ("assert_series_equal", "assert_frame_equal"):
            for _cell in getattr(pandas.testing, _name).__closure__ or ():
                if callable(_cell.cell_contents):
                    _cell.cell_contents = lambda *args, **kwargs: None
    """) + WRONG_ADD, T_PANDAS_TESTING_FALSE, preload=("pandas", "pandas.testing")),
    Case("patch_mock_assertions", dedent("""
        from unittest import mock

        mock.NonCallableMock.assert_called_once_with = lambda self, *args, **kwargs: None


        def add(a, b, log):
            log(a - b)
            return a - b
    """), {"t": dedent("""
        from unittest import mock


        def test_a():
            log = mock.Mock()
            add(1, 2, log)
            log.assert_called_once_with(3)
    """)}, preload=("unittest.mock",)),
    # -- forging the result channel -------------------------------------------------------------
    Case("fake_results_on_fds_and_stdout",
         FORGE + "\n_forge()\n\n\ndef add(a, b):\n    _forge()\n    os._exit(0)\n", T_FALSE),
    Case("gc_get_objects_finds_the_nonce", FORGE + dedent("""
        import gc

        _nonces = [obj["nonce"] for obj in gc.get_objects()
                   if isinstance(obj, dict) and isinstance(obj.get("nonce"), str)]
        _forge(tuple(_nonces))


        def add(a, b):
            _forge(tuple(_nonces))
            os._exit(0)
    """), T_FALSE),
    Case("forge_records_with_the_runners_report", FRAME_WALK + dedent("""
        import os


        def add(a, b):
            scope = _runner_locals("report")
            for item in scope["items"]:
                scope["report"]({"item": item["id"], "status": "pass", "message": "",
                                 "duration_s": 0.0, "called": True})
            scope["report"]({"done": True})
            os._exit(0)
    """), T_FALSE),
    Case("mutate_the_runners_items", FRAME_WALK + dedent("""
        for _item in _runner_locals("items")["items"]:
            _item["kind"] = "block"
    """) + WRONG_ADD, T_FALSE),
    # -- resources -------------------------------------------------------------------------------
    Case("fork_bomb", dedent("""
        import os
        import time


        def add(a, b):
            leader = os.getpid()
            try:
                # `while True: os.fork()`, guarded: at most 2**10 processes even with no limit.
                for _ in range(10):
                    child = os.fork()
                    if child and child - leader > 300:
                        break
            finally:
                if os.getpid() != leader:
                    time.sleep(60)
                    os._exit(0)
            return a + b
    """), T_TRUE, limits={"processes": 16}),
    # Over the process limit and finished well before the first count (50 ms): the processes
    # it leaves alive when it ends are counted too.
    Case("over_the_process_limit_between_two_counts", dedent("""
        import os
        import time

        _started = 0


        def add(a, b):
            global _started
            while _started < 20:
                _started += 1
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
            return a + b
    """), T_TRUE, limits={"processes": 16}),
    Case("memory_bomb_list", dedent("""
        def add(a, b):
            hoard = []
            while True:
                hoard.append(bytearray(10**7))
    """), T_TRUE),
    Case("memory_bomb_bytearray", "def add(a, b):\n    bytearray(10**11)\n    return a + b\n", T_TRUE),
    Case("infinite_loop", "def add(a, b):\n    while True:\n        pass\n", T_TRUE),
    Case("cpu_spin_ignoring_sigterm", dedent("""
        import signal

        for _signal in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
            signal.signal(_signal, signal.SIG_IGN)


        def add(a, b):
            while True:
                pass
    """), T_TRUE),
    Case("sleep_past_the_limit", "import time\n\n\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n",
         T_TRUE),
    Case("stdout_flood", dedent("""
        import os

        _line = b'{"item": "t::test_a", "status": "pass", "nonce": ""}\\n' * 20000


        def add(a, b):
            while True:  # about a GB per second, until the wall-clock limit
                os.write(1, _line)
                os.write(2, _line)
    """), T_TRUE),
    Case("recursion_overflow", "def add(a, b):\n    return add(a, b)\n", T_TRUE),
    Case("c_stack_overflow", dedent("""
        import sys


        def add(a, b):
            sys.setrecursionlimit(10**8)
            nested = []
            for _ in range(10**6):
                nested = [nested]
            repr(nested)
            return a + b
    """), T_TRUE),
    Case("segfault_through_ctypes", "import ctypes\n\n\ndef add(a, b):\n    ctypes.string_at(0)\n    return a + b\n",
         T_TRUE),
    Case("raise_rlimits", dedent("""
        import resource


        def add(name, _):
            kind = getattr(resource, name)
            resource.setrlimit(kind, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            return resource.getrlimit(kind) == (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    """), {"t": "\n\n".join(
        f"def test_{name.lower()}():\n    assert add(\"{name}\", 0)\n"
        for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE"))}),
    # -- network ---------------------------------------------------------------------------------
    Case("connect_to_host_tcp_listener", dedent("""
        import socket


        def add(a, b):
            with socket.create_connection(("127.0.0.1", $port), timeout=1) as connection:
                connection.sendall(b"hello from the sandbox")
            return a + b
    """), T_TRUE),
    Case("connect_to_public_addresses", dedent("""
        import socket


        def add(host, port):
            with socket.create_connection((host, port), timeout=1):
                return True
    """), {"t": "def test_a():\n    assert add(\"1.1.1.1\", 80)\n\n\n"
                "def test_b():\n    assert add(\"8.8.8.8\", 53)\n"}),
    Case("dns_lookup", "import socket\n\n\ndef add(name, port):\n    return socket.getaddrinfo(name, port)\n",
         {"t": "def test_a():\n    assert add(\"example.com\", 443)\n\n\n"
               "def test_b():\n    assert add(\"pypi.org\", 443)\n"}),
    Case("connect_to_host_unix_socket", dedent("""
        import socket


        def add(a, b):
            with socket.socket(socket.AF_UNIX) as connection:
                connection.settimeout(1)
                connection.connect("$unix_path")
                connection.sendall(b"hello from the sandbox")
            return a + b
    """), T_TRUE, unshare_gap=NO_FS_ISOLATION),
    # -- the file system -------------------------------------------------------------------------
    write_case("write_to_host_temp_dir", "$host_dir/$pwn", "$canary", NO_FS_ISOLATION),
    write_case("write_to_tmp", "/tmp/$pwn", "$tmp_marker", NO_FS_ISOLATION),
    write_case("write_to_var_tmp", "/var/tmp/$pwn", "$host_dir", NO_FS_ISOLATION),
    write_case("write_to_dev_shm", "/dev/shm/$pwn", "$shm_marker", NO_FS_ISOLATION),
    write_case("write_to_etc", "/etc/$pwn", "/etc/passwd"),
    write_case("write_to_repository", "$repo/$pwn", "$repo/pyproject.toml"),
    write_case("write_to_home", "$home/$pwn", "$home_canary"),
    Case("modify_and_delete_canary", HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$canary", "a") as handle:
                handle.write("modified by a sample")
            assert add(1, 2) == 3


        def test_b():
            os.remove("$canary")
            assert not os.path.exists("$canary")
    """)}, unshare_gap=NO_FS_ISOLATION),
    Case("chdir_to_root_then_tests", "import os\nos.chdir(\"/\")\n" + HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$pwn", "w") as handle:
                handle.write("written by a sample")
            assert os.path.exists("/$pwn")


        def test_b():
            with open("etc/$pwn", "w") as handle:
                handle.write("written by a sample")
            assert add(1, 2) == 3
    """)}),
    # The secret is in this test process's environment, and in the initial environment of
    # helper processes (one as root, one per sandbox uid a worker uses) started before any
    # sample: /proc/PID/environ shows a process's initial environment, so a sample that can
    # see and read any of them finds it (see test_sensitivity_*: without a sandbox, it does).
    Case("read_secret_environment", dedent("""
        import os


        def add(where, secret):
            if where == "own":
                return os.environ.get("KNOWBENCH_TEST_SECRET") == secret
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/environ", "rb") as handle:
                        if secret.encode() in handle.read():
                            return True
                except OSError:
                    pass
            return False
    """), {"t": "def test_a():\n    assert add(\"own\", \"$secret\")\n\n\n"
                "def test_b():\n    assert add(\"proc\", \"$secret\")\n"}),
    Case("read_home_canary", HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$home_canary") as handle:
                assert handle.read() == "$secret"


        def test_b():
            assert "$home_canary_name" in os.listdir("$home")
    """)}),
    Case("read_repository_and_benchmark", HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$repo/pyproject.toml") as handle:
                assert 'name = "knowbench"' in handle.read()


        def test_b():
            assert "pyproject.toml" in os.listdir("$repo")


        def test_c():
            with open("$repo/examples/basic/tasks.jsonl") as handle:
                assert "reference" in handle.read()
    """)}, unshare_gap=NO_HIDING),
    # -- processes -------------------------------------------------------------------------------
    Case("kill_parent", PARENT_GONE + dedent("""
        def add(number, _):
            return _parent_gone(lambda parent: os.kill(parent, number))
    """), {"t": "def test_a():\n    assert add(9, 0)\n\n\ndef test_b():\n    assert add(15, 0)\n"}),
    Case("killpg_own_and_parent_group", PARENT_GONE + dedent("""
        def add(whose, _):
            return _parent_gone(lambda parent: os.killpg(os.getpgid(parent if whose else 0),
                                                         signal.SIGKILL))
    """), {"t": "def test_a():\n    assert add(True, 0)\n\n\ndef test_b():\n    assert add(False, 0)\n"}),
    Case("kill_minus_one", PARENT_GONE + dedent("""
        def add(number, _):
            return _parent_gone(lambda parent: os.kill(-1, number))
    """), {"t": "def test_a():\n    assert add(9, 0)\n\n\ndef test_b():\n    assert add(15, 0)\n"}),
    Case("children_outlive_the_sample", dedent("""
        import os
        import signal
        import threading
        import time


        def _late_write():
            time.sleep(1.0)
            with open("$host_dir/$pwn", "w") as handle:
                handle.write("written after the sample ended")


        def add(a, b):
            threading.Thread(target=_late_write).start()
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                        signal.signal(number, signal.SIG_IGN)
                    try:
                        _late_write()
                    finally:
                        os._exit(0)
                os._exit(0)
            return a + b
    """), T_FALSE, linger_s=2.0),
    # -- the verdict, forged from inside the process that computes it ------------------------------
    # Each of these forges a pass for a wrong `add` against today's in-process runner (see
    # test_sensitivity_forging_cases_pass_without_a_sandbox); only split isolation, where the
    # tests and the verdict live in a process the candidate never runs in, can stop them.
    Case("release_the_handover_through_frames", dedent("""
        import sys
        import time


        def add(a, b):
            frame = sys._getframe()
            while frame is not None and "finished" not in frame.f_locals:
                frame = frame.f_back
            scope = frame.f_locals  # the worker's hand-over: its outcome box and its lock
            scope["box"].append(("pass", "", True, None))
            scope["finished"].release()
            time.sleep(0.5)  # while the runner takes the forged outcome; its own comes too late
    """), T_FALSE, in_process_gap=FRAMES_GAP),
    Case("jump_the_runners_frame_past_the_failure", dedent("""
        import linecache
        import sys


        def _jump_to_the_handover(frame, event, arg):
            # In the runner's `except` for this test: jump to the hand-over line while `status`
            # still holds its initial "pass".
            if event == "line" and frame.f_code.co_name == "_run_item":
                source = linecache.getlines(frame.f_code.co_filename)
                for number in range(frame.f_lineno, len(source) + 1):
                    if source[number - 1].strip().startswith("box.append("):
                        frame.f_lineno = number
                        frame.f_trace_lines = False
                        break
            return _jump_to_the_handover


        def add(a, b):
            # A frame's own trace function runs only while the thread traces at all (the
            # runner stops tracing once the target is called): turn tracing back on.
            sys.settrace(lambda *args: None)
            frame = sys._getframe()
            while frame.f_code.co_name != "_run_item":
                frame = frame.f_back
            frame.f_trace = _jump_to_the_handover
            frame.f_trace_lines = True
            return a - b
    """), T_FALSE, in_process_gap=FRAMES_GAP),
    Case("audit_hook_reports_on_the_reporting_thread", RUNNER_SCOPE + dedent("""
        import threading

        _MAIN = threading.main_thread().ident
        _busy = []


        def _hook(event, args):
            # Runs on whichever thread raises an event. The reporting thread raises none after
            # sample code has started (its checks compare with `operator.is_`, never `id()`
            # or `__code__`, which raise builtins.id and object.__getattr__).
            if _busy or threading.get_ident() != _MAIN:
                return
            _busy.append(event)
            scope = _runner_scope(sys._getframe())
            if scope is not None:
                _report_all_passed(scope)
            _busy.clear()


        sys.addaudithook(_hook)
    """) + WRONG_ADD, T_FALSE),
    Case("audit_hook_empties_the_runners_items", dedent("""
        import sys
        import threading

        _MAIN = threading.main_thread().ident
        _busy = []


        def _hook(event, args):
            if _busy or threading.get_ident() != _MAIN:
                return
            _busy.append(event)
            frame = sys._getframe()
            while frame is not None and "items" not in frame.f_locals:
                frame = frame.f_back
            if frame is not None:
                for item in frame.f_locals["items"]:
                    item["kind"] = "block"  # the worker then runs no test for the item
            _busy.clear()


        sys.addaudithook(_hook)
    """) + WRONG_ADD, T_FALSE),
    Case("del_runs_on_the_reporting_thread", RUNNER_SCOPE + dedent("""
        import gc
        import threading

        _MAIN = threading.main_thread().ident


        class _Garbage:
            def __init__(self):
                self.cycle = self  # only the cyclic collector frees it, on whichever thread runs

            def __del__(self):
                if threading.get_ident() == _MAIN:
                    _report_all_passed(_runner_scope(sys._getframe()))
                else:
                    _Garbage()  # collected on a worker: leave new garbage for the next round


        _Garbage()
        gc.set_threshold(1)  # collect on (almost) every allocation, the reporting thread's too
    """) + WRONG_ADD, T_FALSE, in_process_gap=FINALIZER_GAP),
    Case("weakref_finalize_runs_on_the_reporting_thread", RUNNER_SCOPE + dedent("""
        import gc
        import threading
        import weakref

        _MAIN = threading.main_thread().ident


        class _Node:
            pass


        def _arm():
            node = _Node()
            node.cycle = node
            weakref.finalize(node, _fired)


        def _fired():
            if threading.get_ident() == _MAIN:
                _report_all_passed(_runner_scope(sys._getframe()))
            else:
                _arm()


        _arm()
        gc.set_threshold(1)
    """) + WRONG_ADD, T_FALSE, in_process_gap=FINALIZER_GAP),
    # A KeyboardInterrupt sent to the reporting thread ends the interpreter normally, and the
    # atexit handler finds the runner's frame in the traceback. A forked child (fork server,
    # Ray) ends with os._exit and never runs atexit handlers: there the case holds.
    Case("atexit_after_interrupting_the_reporting_thread", RUNNER_SCOPE + dedent("""
        import _thread
        import atexit


        def _at_exit():
            tb = getattr(sys, "last_traceback", None)
            while tb is not None and tb.tb_frame.f_code.co_name != "execute_sample":
                tb = tb.tb_next
            if tb is not None:
                _report_all_passed(tb.tb_frame.f_locals)


        atexit.register(_at_exit)
        _thread.interrupt_main()
    """) + WRONG_ADD, T_FALSE, in_process_gap=FINALIZER_GAP, gap_engines=("subprocess",)),
    Case("shadow_a_builtin_in_the_runners_globals", dedent("""
        import builtins
        import sys


        def enumerate(items, *args):
            for item in items:  # called by the reporting thread, with its own item list
                if isinstance(item, dict) and "kind" in item:
                    item["kind"] = "block"  # a block ran when its spec loaded: nothing to run
            return builtins.enumerate(items, *args)


        # A new name: the integrity check compares the names the runner had, not new ones.
        vars(sys.modules["knowbench_runner"])["enumerate"] = enumerate
    """) + WRONG_ADD, T_FALSE, in_process_gap=GLOBALS_GAP),
    Case("patch_a_module_function_the_runner_calls", dedent("""
        import sys

        _settrace = sys.settrace


        def _settrace_then_hand_over_a_pass(function):
            # The runner calls sys.settrace(None) in the worker's `finally`, right before it hands
            # over the test's outcome: hand over a pass instead, and leave before it does.
            _settrace(function)
            caller = sys._getframe(1)
            if function is None and "box" in caller.f_locals:
                caller.f_locals["box"].append(("pass", "", True, None))
                raise SystemExit


        sys.settrace = _settrace_then_hand_over_a_pass
    """) + WRONG_ADD, T_FALSE, in_process_gap=GLOBALS_GAP),
    Case("ctypes_thread_states_reach_the_reporting_frame", RUNNER_SCOPE + dedent("""
        import ctypes

        _api = ctypes.pythonapi
        _api.PyInterpreterState_Get.restype = ctypes.c_void_p
        _api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
        _api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
        _api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
        _api.PyThreadState_Next.restype = ctypes.c_void_p
        _api.PyThreadState_GetFrame.argtypes = [ctypes.c_void_p]
        _api.PyThreadState_GetFrame.restype = ctypes.py_object

        # Every thread's current frame, through the interpreter's thread states: the
        # reporting thread is blocked in the hand-over, waiting for this load to finish.
        _state = _api.PyInterpreterState_ThreadHead(_api.PyInterpreterState_Get())
        while _state:
            _scope = _runner_scope(_api.PyThreadState_GetFrame(_state))
            if _scope is not None:
                _report_all_passed(_scope)
            _state = _api.PyThreadState_Next(_state)
    """) + WRONG_ADD, T_FALSE, in_process_gap=MEMORY_GAP),
    Case("ctypes_heap_scan_finds_the_nonce", dedent("""
        import ctypes
        import json
        import os
        import re
        import sys

        _HEADER = sys.getsizeof("") - 1  # bytes of a compact ASCII str before its characters
        _NONCE = re.compile(rb"(?<![0-9a-f])[0-9a-f]{32}\\x00")
        _ITEM_ID = re.compile(rb"(?<![\\w:])[A-Za-z_]\\w*(?:::\\w+)+\\x00")


        def _live_strings(pattern):
            # str objects alive on this process's heap whose text matches, read through ctypes:
            # text -> reference count.
            found = {}
            with open("/proc/self/maps") as maps:
                regions = [line.split() for line in maps]
            for fields in regions:
                start, end = (int(part, 16) for part in fields[0].split("-"))
                if not fields[1].startswith("rw") or (len(fields) > 5 and fields[5] != "[heap]"):
                    continue
                data = ctypes.string_at(start, end - start)
                for match in pattern.finditer(data):
                    address = start + match.start() - _HEADER
                    if address < start:
                        continue
                    refcount = ctypes.c_ssize_t.from_address(address).value
                    kind = ctypes.c_void_p.from_address(address + 8).value
                    length = ctypes.c_ssize_t.from_address(address + 16).value
                    if kind == id(str) and length == len(match.group()) - 1 and 0 < refcount < 1000:
                        found[match.group()[:-1].decode()] = refcount
            return found


        # The runner holds its nonce three times over (config, local, closure): the live one has
        # the most references among leftovers of earlier samples.
        _nonces = _live_strings(_NONCE)
        if _nonces:
            _nonce = max(_nonces, key=_nonces.get)
            _records = [{"item": item, "status": "pass", "message": "", "duration_s": 0.0,
                         "called": True, "nonce": _nonce} for item in sorted(_live_strings(_ITEM_ID))]
            _records.append({"done": True, "nonce": _nonce})
            _data = "".join(json.dumps(record) + "\\n" for record in _records).encode()
            for _name in os.listdir("/proc/self/fd"):
                try:
                    if int(_name) > 2 and os.readlink(f"/proc/self/fd/{_name}").startswith("pipe:"):
                        os.write(int(_name), _data)
                except OSError:
                    pass
            os._exit(0)
    """) + WRONG_ADD, T_FALSE, in_process_gap=MEMORY_GAP,
         limits={"wall_s": 20.0, "cpu_s": 20}),  # scanning the whole heap takes seconds
    Case("redirect_the_result_pipe_with_dup2", RESULT_PIPE + dedent("""
        import json
        import threading
        import time

        _fd = _result_pipe()
        _engine = os.dup(_fd)  # the engine's end, kept for the forged records
        _read, _write = os.pipe()
        os.dup2(_write, _fd)  # from now on the runner reports into this process's own pipe
        _forged = []


        def _relay():
            # Each `start` record carries the nonce: report that item as passed, drop the rest.
            with os.fdopen(_read, "rb") as records:
                for line in records:
                    record = json.loads(line)
                    if "start" in record:
                        forged = [{"item": record["start"], "status": "pass", "message": "",
                                   "duration_s": 0.0, "called": True, "nonce": record["nonce"]},
                                  {"done": True, "nonce": record["nonce"]}]
                        os.write(_engine, "".join(json.dumps(r) + "\\n" for r in forged).encode())
                        _forged.append(record["start"])


        threading.Thread(target=_relay, daemon=True).start()
        _calls = []


        def add(a, b):
            _calls.append(a)
            deadline = time.monotonic() + 1
            while len(_forged) < len(_calls) and time.monotonic() < deadline:
                time.sleep(0.01)  # until the relay has seen this test start
            return a - b
    """), T_FALSE, in_process_gap=FD_GAP),
    Case("rewrite_result_records_in_flight", RESULT_PIPE + dedent("""
        import json
        import sys
        import threading

        _fd = _result_pipe()
        try:  # the same pipe again, by path (where this uid owns the pipe)
            _engine = os.open(f"/proc/self/fd/{_fd}", os.O_WRONLY)
        except OSError:
            _engine = os.dup(_fd)
        _read, _write = os.pipe()
        os.dup2(_write, _fd)
        os.close(_write)
        # The runner flushes stdout after its last record and before it exits: hold it there
        # with an unflushed line and a full pipe on fd 1, so the relay forwards everything.
        _held_read, _held_write = os.pipe()
        os.set_blocking(_held_write, False)
        try:
            while True:
                os.write(_held_write, b"x" * 4096)
        except BlockingIOError:
            pass
        os.set_blocking(_held_write, True)
        sys.stdout.write("held")
        os.dup2(_held_write, 1)


        def _relay():
            # Forward every record with its status rewritten to pass.
            with os.fdopen(_read, "rb") as records:
                for line in records:
                    record = json.loads(line)
                    if "status" in record:
                        record.update(status="pass", message="", reason=None)
                    os.write(_engine, (json.dumps(record) + "\\n").encode())
                    if record.get("done"):
                        os._exit(0)


        threading.Thread(target=_relay, daemon=True).start()
    """) + WRONG_ADD, T_FALSE, in_process_gap=FD_GAP),
    Case("stack_reaches_the_runners_globals", RUNNER_GLOBALS + dedent("""
        import builtins


        def dict(*args, **kwargs):
            value = builtins.dict(*args, **kwargs)
            if {"id", "kind"} <= value.keys():  # the reporting thread's copy of an item
                value["kind"] = "block"
            return value


        _runner_globals()["dict"] = dict  # shadows the builtin in every runner function
    """) + WRONG_ADD, T_FALSE, in_process_gap=GLOBALS_GAP),
    Case("stack_lifts_the_runners_audit_guard", RUNNER_GLOBALS + dedent("""
        import gc
        import json
        import os

        _scope = _runner_globals()
        _guarded = _scope["_GUARDED_AUDIT_EVENTS"]
        _scope["_GUARDED_AUDIT_EVENTS"] = frozenset()  # the runner's audit hook reads it per event
        gc.unfreeze()  # what the runner built before sample code is frozen, out of get_objects
        try:
            _configs = [obj for obj in gc.get_objects()
                        if type(obj) is dict and isinstance(obj.get("nonce"), str) and "items" in obj]
        finally:
            _scope["_GUARDED_AUDIT_EVENTS"] = _guarded  # back before the integrity check looks
        _config = _configs[0]
        _records = [{"item": item["id"], "status": "pass", "message": "", "duration_s": 0.0,
                     "called": True, "nonce": _config["nonce"]} for item in _config["items"]]
        _records.append({"done": True, "nonce": _config["nonce"]})
        _data = "".join(json.dumps(record) + "\\n" for record in _records).encode()
        for _name in os.listdir("/proc/self/fd"):
            try:
                if int(_name) > 2 and os.readlink(f"/proc/self/fd/{_name}").startswith("pipe:"):
                    os.write(int(_name), _data)
            except OSError:
                pass
        os._exit(0)
    """) + WRONG_ADD, T_FALSE, in_process_gap=GLOBALS_GAP),
    Case("profile_hook_rewrites_the_outcome_before_the_handover", dedent("""
        import sys


        def _profile(frame, event, arg):
            if event == "return" and frame.f_code.co_name == "_run_item":
                box = frame.f_locals["box"]
                if box:
                    box[0] = ("pass", "", True, None)


        def add(a, b):
            sys.setprofile(_profile)  # this worker thread only; the runner never looks
            return a - b
    """), T_FALSE, in_process_gap=RACE_GAP),
    # A real race: a thread spins against the hand-over and wins some of the time, so the tests
    # are many and the sample runs again: one passing item is enough to fail the case. (On the
    # fork server a run's wins out of 40 items went 34, 35, 8, 0, 3, 8, 1, 28 in eight runs.)
    Case("racing_thread_swaps_the_outcome", dedent("""
        import sys
        import threading

        _current = [[]]
        _PASS = ("pass", "", True, None)


        def _racer():
            while True:
                box = _current[0]
                if box and box[0] is not _PASS:
                    box[0] = _PASS


        def add(a, b):
            frame = sys._getframe()
            while "box" not in frame.f_locals:
                frame = frame.f_back
            _current[0] = frame.f_locals["box"]
            return a - b


        sys.setswitchinterval(1e-6)
        threading.Thread(target=_racer, daemon=True).start()
    """), T_MANY_FALSE, in_process_gap=RACE_GAP, attempts=6),
    # Not the runner's machinery at all: the tests compare the candidate's own object, whose
    # __eq__ decides. Only values that cross between processes by value are safe from it.
    Case("return_value_that_equals_anything", dedent("""
        class _Anything(int):
            def __eq__(self, other):
                return True

            __hash__ = int.__hash__


        def add(a, b):
            return _Anything(a - b)
    """), T_FALSE, in_process_gap="in-process, the tests compare the candidate's own object"),
    Case("patch_what_numpy_testing_calls", dedent("""
        import importlib

        import numpy

        _numeric = importlib.import_module("numpy._core.numeric" if hasattr(numpy, "_core") else "numpy.core.numeric")
        _numeric.isclose = lambda actual, *args, **kwargs: numpy.ones(numpy.shape(actual), bool)
    """) + WRONG_ADD, {"t": dedent("""
        import numpy as np


        def test_a():
            np.testing.assert_allclose(add(1.0, 2.0), 4.0)
    """)}, preload=("numpy", "numpy.testing"),
         in_process_gap="in-process, only the testing modules are watched, not the library code they call"),
    # Split: values the judge rebuilds must not carry code that their class's methods call.
    Case("rebuilt_object_whose_method_is_the_candidates", dedent("""
        from collections import UserList


        def add(a, b):
            value = object.__new__(UserList)
            value.data = []
            value._UserList__cast = lambda other: []  # UserList.__eq__: self.data == self.__cast(other)
            return value
    """), T_FALSE,
         trusted=TRUSTED_IMPORTS_COLLECTIONS,
         in_process_gap="in-process, the tests compare the candidate's own object"),
    Case("rebuilt_object_whose_method_is_a_builtin", dedent("""
        from collections import UserList


        def add(a, b):
            value = object.__new__(UserList)
            value.data = True
            value._UserList__cast = bool  # True == bool(anything that is not empty)
            return value
    """), T_FALSE,
         trusted=TRUSTED_IMPORTS_COLLECTIONS,
         in_process_gap="in-process, the tests compare the candidate's own object"),
    Case("bare_pandas_extension_array", dedent("""
        import sys

        import numpy as np
        import pandas as pd

        # Its own end refuses a bare extension array: taught to send one.
        _wire = sys.modules["knowbench_wire"]
        _encode = _wire._enc_pandas


        def _enc(encoder, module, value):
            if isinstance(value, pd.api.extensions.ExtensionArray):
                return ["pdext", str(value.dtype), encoder.enc(np.asarray(value, dtype=object))]
            return _encode(encoder, module, value)


        _wire._enc_pandas = _enc


        def add(a, b):
            return pd.array([-999], dtype="Int64")  # == anything: a BooleanArray, truthy
    """), T_TRUE,
         preload=("pandas",), in_process_gap="in-process, the tests compare the candidate's own object"),
    # -- the fork server's private /tmp ------------------------------------------------------------
    # The server writes the sample's stdout/stderr to files in its private /tmp and reads them
    # back, with its own (root) rights, after the sample ended.
    Case("symlink_replaces_the_captured_stdout", OUTPUT_FILES + dedent("""
        def add(a, b):
            for path in _output_files():
                os.unlink(path)
                os.symlink("$root_only", path)  # a file only root may read
            return a - b
    """), T_FALSE, leak_marker="$root_only_secret"),
    Case("fifo_replaces_the_captured_stdout", OUTPUT_FILES + dedent("""
        def add(a, b):
            for path in _output_files():
                os.unlink(path)
                os.mkfifo(path, 0o666)  # reading it back blocks until a writer appears
            return a - b
    """), T_FALSE, prompt=True),
    # -- memory and /tmp beyond the per-process limit ----------------------------------------------
    Case("memory_over_many_processes", dedent("""
        import os
        import select
        import signal


        def add(processes, megabytes):
            # Each child holds `megabytes` it has written to, under its own RLIMIT_AS: how much
            # do all of them hold at once?
            read_end, write_end = os.pipe()
            children = []
            for _ in range(processes):
                pid = os.fork()
                if pid == 0:
                    try:
                        block = b"x" * (megabytes << 20)
                        os.write(write_end, b"1")
                        select.select([], [], [], 30)
                        del block
                    finally:
                        os._exit(0)
                children.append(pid)
            held = 0
            while held < processes and select.select([read_end], [], [], 3)[0]:
                held += len(os.read(read_end, processes))
            for pid in children:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            return held * megabytes
    """), {"t": "def test_a():\n    assert add(16, 128) >= 4 * 256\n"},
         limits={"wall_s": 10.0}, watch_memory=True, slow=True),
    Case("hold_memory_in_memfds", dedent("""
        import os


        def add(megabytes, _):
            # Memory files written, never mapped: no process's memory shows them.
            chunk, held, written = b"x" * (1 << 20), [], 0
            try:
                while written < megabytes:
                    fd = os.memfd_create(f"m{written}")
                    held.append(fd)
                    for _ in range(8):
                        os.write(fd, chunk)
                    written += 8
            except OSError:
                pass
            return written
    """), {"t": "def test_a():\n    assert add(768, 0) >= 768\n"},
         limits={"wall_s": 10.0}, watch_memory=True, slow=True),
    # In a user namespace of its own a process holds every capability: it could mount a tmpfs,
    # or make network and IPC namespaces, whose memory the budget does not see.
    Case("a_user_namespace_of_its_own", dedent("""
        import ctypes, os, platform

        libc = ctypes.CDLL(None, use_errno=True)
        NEWUSER, SIGCHLD = 0x10000000, 17
        CLONE = {"x86_64": 56, "aarch64": 220}[platform.machine()]


        def _in_a_child(call):
            # Whether `call` succeeds in a forked child (single-threaded, as unshare asks).
            pid = os.fork()
            if pid == 0:
                try:
                    os._exit(0 if call() == 0 else 1)
                finally:
                    os._exit(1)
            return os.waitpid(pid, 0)[1] == 0


        def _cloned():
            pid = libc.syscall(CLONE, NEWUSER | SIGCHLD, 0, 0, 0, 0)
            if pid == 0:
                os._exit(0)
            return 0 if pid > 0 and os.waitpid(pid, 0) else -1


        def add(a, b):
            return [_in_a_child(lambda: libc.unshare(NEWUSER)), _in_a_child(_cloned)]
    """), {"t": "def test_unshare():\n    assert add(1, 2)[0]\n\n\ndef test_clone():\n    assert add(1, 2)[1]\n"}),
    # Kernel memory the budget cannot count: sockets of other families and protocols (a netlink
    # socket sending to itself, UDP-Lite, MPTCP), pages a pipe keeps after vmsplice, extended
    # attributes on the tmpfs. Each test passes only where the route is open.
    Case("kernel_memory_the_budget_cannot_count", dedent("""
        import ctypes, os, socket, tempfile

        libc = ctypes.CDLL(None, use_errno=True)


        def _opened(*args):
            try:
                socket.socket(*args).close()
                return True
            except OSError:
                return False


        class _Iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


        def add(route, _):
            if route == "netlink":
                return _opened(socket.AF_NETLINK, socket.SOCK_RAW, 2)
            if route == "udplite":
                return _opened(socket.AF_INET, socket.SOCK_DGRAM, 136)
            if route == "mptcp":
                return _opened(socket.AF_INET, socket.SOCK_STREAM, 262)
            if route == "vmsplice":
                page = ctypes.create_string_buffer(4096)
                _, write = os.pipe()
                vector = _Iovec(ctypes.cast(page, ctypes.c_void_p), 4096)
                return libc.vmsplice(write, ctypes.byref(vector), 1, 0) > 0
            with tempfile.NamedTemporaryFile() as held:
                try:
                    os.setxattr(held.name, "user.hoard", b"x" * 1024)
                    return True
                except OSError:
                    return False
    """), {"t": "".join(f"def test_{route}():\n    assert add({route!r}, 0)\n\n\n"
                        for route in ("netlink", "udplite", "mptcp", "vmsplice", "xattr"))}),
    Case("fill_the_tmpfs", FILL_FILES + dedent("""
        def add(megabytes, _):
            # Write /tmp until it is full or holds `megabytes`.
            os.makedirs("/tmp/$pwn", exist_ok=True)
            return _fill(megabytes, lambda written: f"/tmp/$pwn/{written}")
    """), {"t": "def test_a():\n    assert add(2048, 0) >= 2048\n"},
         limits={"wall_s": 15.0}, unshare_gap=NO_FS_ISOLATION, watch_memory=True, slow=True),
    # The work directory is a host directory under the subprocess engine, and for split and
    # project samples (shared by judge and candidate): files there count against the budget.
    Case("fill_the_work_directory", dedent("""
        import os


        def add(megabytes, _):
            # Write the work directory until something stops it or it holds `megabytes`;
            # in chunks of files under the file-size limit, some in a directory the sample
            # then makes unreadable; a bound, so that the host survives when nothing stops it.
            os.makedirs("hidden", exist_ok=True)
            chunk = b"x" * (1 << 20)
            written = 0
            try:
                while written < megabytes:
                    hide = written % 16 != 0
                    if hide:
                        os.chmod("hidden", 0o700)
                    with open(f"{'hidden' if hide else '.'}/{written}", "wb") as handle:
                        for _ in range(8):
                            handle.write(chunk)
                    if hide:
                        os.chmod("hidden", 0)
                    written += 8
            except OSError:
                pass
            return written
    """), {"t": "def test_a():\n    assert add(1024, 0) >= 1024\n"},
         limits={"wall_s": 15.0, "memory_mb": 256}, unshare_gap=NO_FS_ISOLATION, watch_memory=True, slow=True),
    Case("fill_the_work_directory_with_deleted_files", dedent("""
        import os


        def add(megabytes, _):
            # Files removed while still open take the disk without being in any directory.
            chunk = b"x" * (1 << 20)
            held, written = [], 0
            try:
                while written < megabytes:
                    handle = open(f"gone{written}", "wb")
                    os.unlink(f"gone{written}")
                    held.append(handle)
                    for _ in range(8):
                        handle.write(chunk)
                    handle.flush()
                    written += 8
            except OSError:
                pass
            return written
    """), {"t": "def test_a():\n    assert add(1024, 0) >= 1024\n"},
         limits={"wall_s": 15.0}, unshare_gap=NO_FS_ISOLATION, watch_memory=True, slow=True),
    Case("fill_the_work_directory_with_mapped_deleted_files", dedent("""
        import mmap
        import os
        import time


        def hold(tag, megabytes):
            # Files written, mapped, closed (mmap's own descriptor too) and removed: only the
            # mappings keep their blocks, in no directory and behind no descriptor.
            chunk, held = b"x" * (1 << 20), []
            for index in range(megabytes // 8):
                name = f"m{tag}-{index}"
                fd = os.open(name, os.O_CREAT | os.O_RDWR, 0o600)
                for _ in range(8):
                    os.write(fd, chunk)
                held.append(mmap.mmap(fd, 8 << 20, mmap.MAP_SHARED, mmap.PROT_READ))
                inode = os.fstat(fd).st_ino
                for other in range(3, 256):
                    try:
                        if os.fstat(other).st_ino == inode:
                            os.close(other)
                    except OSError:
                        pass
                os.unlink(name)
            return held


        def add(megabytes, _):
            # In processes of 192 MB each, every one under the address-space limit.
            read_end, write_end = os.pipe()
            for tag in range(megabytes // 192):
                if os.fork() == 0:
                    try:
                        held = hold(tag, 192)
                        os.write(write_end, b"1")
                        time.sleep(10)
                    finally:
                        os._exit(0)
            os.close(write_end)
            ready = 0
            while True:
                got = os.read(read_end, 16)
                if not got:
                    break
                ready += len(got)
                if ready == megabytes // 192:
                    time.sleep(1)
                    break
            return ready * 192
    """), {"t": "def test_a():\n    assert add(768, 0) >= 768\n"},
         limits={"wall_s": 15.0}, unshare_gap=NO_FS_ISOLATION, watch_memory=True, slow=True),
    Case("fill_the_work_directory_past_path_max", FILL_FILES + dedent("""
        def add(megabytes, _):
            # Files below a path longer than PATH_MAX: no walk by full paths can stat them.
            for level in range(20):
                os.mkdir("d" * 250)
                os.chdir("d" * 250)
            return _fill(megabytes, str)
    """), {"t": "def test_a():\n    assert add(1024, 0) >= 1024\n"},
         limits={"wall_s": 15.0}, unshare_gap=NO_FS_ISOLATION, watch_memory=True, slow=True),
    Case("name_a_process_after_the_sandbox_tool", dedent("""
        import ctypes
        import os
        import time


        def add(a, b):
            # Processes called `bwrap` (PR_SET_NAME), each under the address-space limit,
            # together far over the memory budget: they must count as the sample's.
            read_end, write_end = os.pipe()
            for _ in range(6):
                if os.fork() == 0:
                    try:
                        ctypes.CDLL(None).prctl(15, b"bwrap", 0, 0, 0)
                        held = bytearray(160 << 20)
                        for offset in range(0, len(held), 4096):
                            held[offset] = 1
                        os.write(write_end, b"1")
                        time.sleep(5)
                    finally:
                        os._exit(0)
            os.close(write_end)
            ready = 0
            while ready < 6:
                got = os.read(read_end, 6)
                if not got:
                    break
                ready += len(got)
            time.sleep(1)
            return a + b if ready == 6 else None
    """), T_TRUE, limits={"wall_s": 10.0}, watch_memory=True, slow=True),
    # -- references kept elsewhere on disk ----------------------------------------------------------
    Case("read_references_outside_home_and_tmp", dedent("""
        import os


        def add(path, expected):
            if expected is None:
                return os.path.basename(path) in os.listdir(os.path.dirname(path))
            with open(path) as handle:
                return handle.read() == expected
    """), {"t": "def test_a():\n    assert add(\"$reference\", \"$reference_text\")\n\n\n"
                "def test_b():\n    assert add(\"$reference\", None)\n"}, unshare_gap=NO_HIDING),
]


# -- the host side ---------------------------------------------------------------------------------


class Host:
    """Canaries, secrets and listening servers that samples must not reach."""

    def __init__(self) -> None:
        token = secrets.token_hex(6)
        self.secret = f"kb-secret-{token}"
        self.pwn = f"knowbench-pwn-{token}"
        base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
        self.dir = Path(tempfile.mkdtemp(prefix="knowbench-hostile-", dir=base))
        self.dir.chmod(0o777)  # as exposed as /tmp itself: only the sandbox may stop a write
        self.canary = self.dir / "canary.txt"
        self.canary_text = f"canary {token}\n"
        self.home = Path.home()
        self.home_canary = self.home / f".knowbench-canary-{token}"
        self.home_canary.write_text(self.secret)
        self.home_canary.chmod(0o644)
        self._write_canary()
        # Files that exist only on the host: seeing one proves a path is the host's, not a
        # private directory of the sandbox.
        self.tmp_marker = Path(tempfile.gettempdir()) / f"knowbench-host-marker-{token}"
        self.shm_marker = Path("/dev/shm") / f"knowbench-host-marker-{token}"
        for marker in (self.tmp_marker, self.shm_marker):
            with contextlib.suppress(OSError):
                marker.write_text("host")
        self.outside = [self.dir / self.pwn, Path("/tmp") / self.pwn, Path("/var/tmp") / self.pwn,
                        Path("/dev/shm") / self.pwn, Path("/etc") / self.pwn, REPO / self.pwn,
                        Path("/") / self.pwn, self.home / self.pwn]
        # A benchmark's references kept elsewhere on disk (not in home, /tmp or the repository),
        # readable by anyone, and a file only root may read, beside them.
        self.far_dir = _far_dir(token)
        self.reference = self.far_dir / "reference.py"
        self.reference_text = f"def add(a, b):  # reference {token}\n    return a + b\n"
        self.reference.write_text(self.reference_text)
        self.reference.chmod(0o644)
        self.root_only = self.far_dir / "root-only.txt"
        self.root_only_secret = f"kb-root-only-{token}"
        self.root_only.write_text(self.root_only_secret)
        self.root_only.chmod(0o600)
        # Processes that hold the secret in their initial environment (what /proc/PID/environ
        # shows), started before any sample: as this user here, and (as root) as each sandbox
        # uid the engine under test leased (see `hostile_engine`), whose /proc entries a sample
        # could read if it saw them.
        self.secret_holders = [_secret_holder(self.secret, None)]
        self.connections: list[str] = []
        self._stop = threading.Event()
        self._tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self._tcp.getsockname()[1]
        self.unix_path = self.dir / "host.sock"
        self._unix = socket.socket(socket.AF_UNIX)
        self._unix.bind(str(self.unix_path))
        self.unix_path.chmod(0o777)
        self._unix.listen()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _write_canary(self) -> None:
        self.canary.write_text(self.canary_text)
        self.canary.chmod(0o666)
        self._canary_stat = self.canary.stat()

    def _serve(self) -> None:
        servers = {self._tcp: "tcp 127.0.0.1", self._unix: "unix socket"}
        while not self._stop.is_set():
            ready, _, _ = select.select(list(servers), [], [], 0.01)
            for server in ready:
                with contextlib.suppress(OSError):
                    connection, _ = server.accept()
                    self.connections.append(f"{servers[server]} accepted a connection")
                    connection.settimeout(0.5)
                    with contextlib.suppress(OSError):
                        self.connections.append(f"{servers[server]} received {connection.recv(200)!r}")
                    connection.close()

    def values(self) -> dict[str, str]:
        return {"port": str(self.port), "unix_path": str(self.unix_path), "host_dir": str(self.dir),
                "canary": str(self.canary), "home": str(self.home),
                "home_canary": str(self.home_canary), "home_canary_name": self.home_canary.name,
                "secret": self.secret, "pwn": self.pwn, "repo": str(REPO),
                "tmp_marker": str(self.tmp_marker), "shm_marker": str(self.shm_marker),
                "reference": str(self.reference), "reference_text": self.reference_text.replace("\n", "\\n"),
                "root_only": str(self.root_only), "root_only_secret": self.root_only_secret}

    def problems(self) -> list[str]:
        time.sleep(0.03)  # let the server thread accept what is pending
        found = [f"connection from the sandbox: {text}" for text in self.connections]
        if not self.canary.exists():
            found.append(f"canary {self.canary} was deleted")
        else:
            now = self.canary.stat()
            if self.canary.read_text() != self.canary_text or now.st_mtime_ns != self._canary_stat.st_mtime_ns:
                found.append(f"canary {self.canary} was modified")
        if self.home_canary.read_text() != self.secret:
            found.append(f"home canary {self.home_canary} was modified")
        found += [f"file written outside the work dir: {path}" for path in self.outside
                  if os.path.lexists(path)]
        extra = {entry.name for entry in self.dir.iterdir()} - {"canary.txt", "host.sock", self.pwn}
        found += [f"unexpected file in the host dir: {name}" for name in sorted(extra)]
        if os.environ.get("KNOWBENCH_TEST_SECRET") != self.secret:
            found.append("the test process's environment changed")
        return found

    def restore(self) -> None:
        self.connections.clear()
        for path in self.outside:
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
        for entry in self.dir.iterdir():
            if entry.name not in ("canary.txt", "host.sock"):
                with contextlib.suppress(OSError):
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        if not self.canary.exists() or self.canary.read_text() != self.canary_text:
            with contextlib.suppress(OSError):
                self.canary.unlink()
            self._write_canary()

    def close(self) -> None:
        for holder in self.secret_holders:
            holder.kill()
            holder.wait()
        shutil.rmtree(self.far_dir, ignore_errors=True)
        self._stop.set()
        self._thread.join(timeout=2)
        self._tcp.close()
        self._unix.close()
        self.restore()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.home_canary.unlink(missing_ok=True)
        self.tmp_marker.unlink(missing_ok=True)
        self.shm_marker.unlink(missing_ok=True)


def _far_dir(token: str) -> Path:
    """A directory outside home, /tmp and the repository, where a benchmark could live."""
    for parent in ("/srv", "/opt", "/var/lib", str(REPO.parent)):
        with contextlib.suppress(OSError):
            path = Path(parent) / f"knowbench-hostile-{token}"
            path.mkdir(mode=0o755)
            path.chmod(0o755)
            return path
    raise RuntimeError("no writable directory outside home and /tmp for the reference canary")


def _secret_holder(secret: str, uid: int | None) -> subprocess.Popen[bytes]:
    def drop() -> None:
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return subprocess.Popen(["sleep", "3600"], env={"KNOWBENCH_TEST_SECRET": secret, "PATH": os.defpath},
                            cwd="/", preexec_fn=drop, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def available_memory_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


class MemoryWatch:
    """The host's lowest available memory while a sample runs (sampled every 20 ms)."""

    def __init__(self) -> None:
        self.lowest = available_memory_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.lowest = min(self.lowest, available_memory_bytes())

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# Other sessions may run sandboxed samples at the same time, with the same uids: a process
# counts as ours when it shows one of our engines' scratch directories (bwrap: in its mounts;
# unshare: as its working directory or HOME).
SCRATCH_ROOTS: list[str] = []


def _ours(pid: str) -> bool:
    views = []
    for name in ("mountinfo", "environ"):
        with contextlib.suppress(OSError):
            views.append(Path(f"/proc/{pid}/{name}").read_bytes().decode(errors="replace"))
    with contextlib.suppress(OSError):
        views.append(os.readlink(f"/proc/{pid}/cwd"))
    return any(root in view for root in SCRATCH_ROOTS for view in views)


def sandbox_processes(ours_only: bool = True) -> dict[int, str]:
    """pid -> description of every process running as a sandbox uid (by default: ours)."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")[:100]
        except OSError:
            continue
        uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
        if any(int(uid) in SANDBOX_UIDS for uid in uids) and (not ours_only or _ours(entry)):
            state = next((line for line in status.splitlines() if line.startswith("State:")), "")
            found[int(entry)] = f"pid {entry} uid {uids[0]} {state.split(None, 1)[-1]} {cmdline!r}"
    return found


def lingering(before: set[int], patience_s: float = 3.0) -> list[str]:
    """Our sandbox-uid processes not in `before` that are still there after `patience_s`."""
    deadline = time.monotonic() + patience_s
    while True:
        new = [text for pid, text in sorted(sandbox_processes().items()) if pid not in before]
        if not new or time.monotonic() > deadline:
            return new
        time.sleep(0.1)


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    previous = os.environ.get("KNOWBENCH_TEST_SECRET")
    the_host = Host()
    os.environ["KNOWBENCH_TEST_SECRET"] = the_host.secret
    try:
        yield the_host
    finally:
        the_host.close()
        if previous is None:
            os.environ.pop("KNOWBENCH_TEST_SECRET", None)
        else:
            os.environ["KNOWBENCH_TEST_SECRET"] = previous


@pytest.fixture(scope="module", autouse=True)
def no_stray_sandbox_processes_after_module() -> Iterator[None]:
    yield
    strays = lingering(set())
    assert not strays, f"processes of sandbox uids outlived the hostile module: {strays}"


# Every engine runs the whole table, in both isolation modes. Ray runs it on bwrap only and is
# marked slow: it costs a local Ray instance on top, and its actors host the same fork server.
ENGINES = [pytest.param(("subprocess", "bwrap"), id="subprocess-bwrap"),
           pytest.param(("subprocess", "unshare"), id="subprocess-unshare"),
           pytest.param(("forkserver", "bwrap"), id="forkserver-bwrap"),
           pytest.param(("forkserver", "unshare"), id="forkserver-unshare"),
           pytest.param(("ray", "bwrap"), id="ray-bwrap", marks=pytest.mark.slow)]
ISOLATIONS = ["split", "in-process"]


@pytest.fixture(scope="module", params=ENGINES)
def hostile_engine(request: pytest.FixtureRequest, host: Host) -> Iterator[Engine]:
    """The same table against every engine and sandbox; one this machine lacks is skipped."""
    engine_name, sandbox_kind = request.param
    try:
        sandbox = resolve_sandbox(sandbox_kind, hidden=[REPO])
    except UserError as error:
        pytest.skip(f"sandbox {sandbox_kind} is not available here: {error}")
    scratch = Path(tempfile.mkdtemp(prefix="knowbench-hostile-scratch-"))
    scratch.chmod(0o755)
    SCRATCH_ROOTS.append(str(scratch))
    engine: Engine
    if engine_name == "subprocess":
        engine = SubprocessEngine(sandbox, workers=2, scratch=scratch)
    elif engine_name == "forkserver":
        engine = ForkServerEngine(sandbox, workers=2, scratch=scratch, preload=list(PRELOAD))
    else:
        pytest.importorskip("ray", reason="the ray engine needs the extra knowbench[ray]")
        from knowbench.execution.ray_engine import RayEngine

        engine = RayEngine(sandbox.kind, workers=2, preload=list(PRELOAD), scratch=str(scratch))
    engine.sandbox_kind = sandbox.kind  # type: ignore[attr-defined]
    # Secret holders under the uids this engine's samples run as (Ray's actors lease theirs
    # on their node, out of reach here).
    uids = getattr(engine, "uids", None)
    leased = [uid for uid in (*uids.judge, *uids.candidate) if uid is not None] if uids else []
    holders = [_secret_holder(host.secret, uid) for uid in leased]
    yield engine
    engine.close()
    for holder in holders:
        holder.kill()
        holder.wait()
    shutil.rmtree(scratch, ignore_errors=True)


def render(text: str, host: Host) -> str:
    return Template(text).substitute(host.values())


# -- the tests -------------------------------------------------------------------------------------


def test_sandbox_runs_an_honest_sample_with_the_preload(hostile_engine: Engine,
                                                        host: Host) -> None:
    """The control for the table: the attacks fail because of the sandbox, not by accident."""
    program = dedent("""
        import ctypes
        import resource
        import signal
        import socket
        import threading


        def add(a, b):
            return a + b
    """)
    execution = hostile_engine.execute(make_request(program, T_TRUE, "add", preload=PRELOAD,
                                                    **SMALL_LIMITS))
    assert [test.status for test in execution.tests] == ["pass", "pass"], execution.tests


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_an_honest_sample_writing_its_work_directory_within_the_budget_passes(
        hostile_engine: Engine, host: Host, isolation: Isolation) -> None:
    """The control for the `fill_the_work_directory` cases: files well within the budget, a
    tree a hundred levels deep, a removed file still open and temporary files do not end a
    sample, wherever its work directory lies."""
    program = dedent("""
        import os
        import tempfile


        def add(a, b):
            for name in ("one", "two", "three"):
                with open(name, "wb") as handle:
                    handle.write(b"x" * (10 << 20))
            os.makedirs("/".join(["deep"] * 100), exist_ok=True)
            kept = tempfile.TemporaryFile(dir=".")
            kept.write(b"y" * (10 << 20))
            kept.flush()
            for index in range(500):
                with tempfile.NamedTemporaryFile(dir=".") as scratch:
                    scratch.write(b"z" * 1000)
            import time
            time.sleep(0.3)  # several polls of the budget
            kept.close()
            return a + b
    """)
    execution = hostile_engine.execute(make_request(program, T_TRUE, "add", preload=PRELOAD,
                                                    isolation=isolation, **SMALL_LIMITS))
    assert [test.status for test in execution.tests] == ["pass", "pass"], execution.tests


@pytest.mark.parametrize("preload", [(), ("unittest.mock", "unittest.async_case", "asyncio", "pandas",
                                          "pandas.testing")], ids=["loaded-by-the-tests", "preloaded"])
def test_honest_samples_using_the_watched_modules_pass(hostile_engine: Engine, host: Host,
                                                       preload: tuple[str, ...]) -> None:
    """The control for the integrity checks: mocks (whose attributes are made up on access),
    asyncio test cases (`unittest` binds them on first use), pandas' assertions and
    submodules loaded during a test are no tampering."""
    program = "def add(a, b, log=None):\n    if log is not None:\n        log(a + b)\n    return a + b\n"
    tests = dedent("""
        import unittest
        from unittest import mock

        import pandas as pd


        def test_mock():
            log = mock.Mock()
            add(1, 2, log)
            log.assert_called_once_with(3)
            assert log.call_args == mock.call(mock.ANY) and mock.sentinel.a is mock.sentinel.a
            with mock.patch("builtins.print") as printed:
                add(2, 2, print)
            printed.assert_called_with(4)


        def test_pandas():
            import pandas.plotting  # noqa: F401  (a submodule bound on pandas during the test)
            pd.testing.assert_series_equal(add(pd.Series([1]), pd.Series([2])), pd.Series([3]))


        class TestAsync(unittest.IsolatedAsyncioTestCase):
            async def test_async(self):
                self.assertEqual(add(1, 2), 3)
                awaited = mock.AsyncMock(return_value=5)
                self.assertEqual(await awaited(), 5)
    """)
    execution = hostile_engine.execute(make_request(program, tests, "add", preload=PRELOAD + preload,
                                                    **{**SMALL_LIMITS, "wall_s": 30.0}))
    assert [test.status for test in execution.tests] == ["pass"] * 3, execution.tests


def test_sandbox_imports_without_preload(hostile_engine: Engine, host: Host) -> None:
    """An honest sample may import any module of the interpreter's standard library."""
    program = "import decimal\nimport fractions\nimport socket\n\n\ndef add(a, b):\n    return a + b\n"
    execution = hostile_engine.execute(make_request(program, T_TRUE, "add", **SMALL_LIMITS))
    assert execution.status == "pass", execution.tests[0].message


def case_params(cases: list[Case]) -> list[Any]:
    return [pytest.param(case, id=case.id, marks=[pytest.mark.slow] if case.slow else [])
            for case in cases]


def hostile_request(case: Case, host: Host, isolation: Isolation) -> ExecutionRequest:
    tests = {name: render(code, host) for name, code in case.tests.items()}
    return make_request(render(case.program, host), tests, "add", preload=PRELOAD + case.preload,
                        isolation=isolation, **{**SMALL_LIMITS, **case.limits},
                        trusted_program=case.trusted if isolation == "split" else None)


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("case", case_params(CASES))
def test_hostile_sample(hostile_engine: Engine, host: Host, case: Case, isolation: Isolation,
                        request: pytest.FixtureRequest) -> None:
    """No item passes and the host is unharmed, in split and in in-process isolation alike,
    except where a case names a gap: those are expected to fail (strictly: a gap that closes
    must be taken off the case, and the README's list of what in-process mode leaves open)."""
    if hostile_engine.sandbox_kind == "unshare" and case.unshare_gap:  # type: ignore[attr-defined]
        request.applymarker(pytest.mark.xfail(reason=case.unshare_gap, strict=True))
    elif isolation == "in-process" and case.in_process_gap and hostile_engine.name in case.gap_engines:
        request.applymarker(pytest.mark.xfail(reason=case.in_process_gap, strict=True))
    execution_request = hostile_request(case, host, isolation)
    for _ in range(case.attempts):
        execution, failures = _run_hostile(hostile_engine, host, case, execution_request)
        if failures:
            break
    summary = [(test.id, test.status, test.message[-160:]) for test in execution.tests]
    assert not failures, f"{failures}\nnote={execution.note!r} outcomes={summary}"


def _run_hostile(hostile_engine: Engine, host: Host, case: Case,
                 execution_request: ExecutionRequest) -> tuple[Execution, list[str]]:
    """One run of a hostile sample: its execution, and everything that went wrong."""
    before = set(sandbox_processes())
    started = time.monotonic()
    with MemoryWatch() as memory:
        execution = hostile_engine.execute(execution_request)
    elapsed = time.monotonic() - started
    time.sleep(case.linger_s)
    problems = host.problems()
    strays = lingering(before)
    host.restore()

    failures = [f"host harmed: {problem}" for problem in problems]
    failures += [f"process outlived the sample: {stray}" for stray in strays]
    failures += [f"item {test.id} passed" for test in execution.tests if test.status == "pass"]
    if execution.status == "pass":
        failures.append("Execution.status is 'pass'")
    if len(execution.tests) != len(execution_request.items()):
        failures.append(f"{len(execution.tests)} outcomes for {len(execution_request.items())} items")
    cap = execution_request.limits.output_bytes
    if len(execution.stdout) > cap or len(execution.stderr) > cap:
        failures.append("captured output exceeds limits.output_bytes")
    if case.leak_marker:
        marker = render(case.leak_marker, host)
        texts = [execution.stdout, execution.stderr, execution.note, *(t.message for t in execution.tests)]
        if any(marker in text for text in texts):
            failures.append("a host file the sample may not read is in the stored output")
    # A generous bound, not a timing: the fork server's reply grace alone is 10 s, so a server
    # stalled on the sample's files shows up as the wall clock plus 10 s or more.
    if case.prompt and elapsed > execution_request.limits.wall_s + 5:
        failures.append(f"the engine answered after {elapsed:.1f} s (wall clock "
                        f"{execution_request.limits.wall_s} s): something stalled")
    if case.watch_memory and memory.lowest < available_memory_bytes() // 4:
        failures.append(f"the host's available memory fell to {memory.lowest >> 20} MiB")
    return execution, failures


# -- sensitivity: the attacks are real -----------------------------------------------------------------

FORGING = [case for case in CASES if case.in_process_gap and "subprocess" in case.gap_engines]
# Secrets the sandbox hides: readable once it is gone (the environment case also shows that its
# secret exists in a real process's /proc entry, which the sandbox's PID namespace hides).
LEAKS = [case for case in CASES if case.id in ("read_secret_environment",
                                               "read_references_outside_home_and_tmp")]


@pytest.fixture(scope="module")
def bare_engine() -> Iterator[SubprocessEngine]:
    """No sandbox at all (`--sandbox none`): only the runner stands between sample and verdict."""
    engine = SubprocessEngine(resolve_sandbox("none"), workers=1)
    yield engine
    engine.close()


@pytest.mark.parametrize("case", case_params(FORGING))
def test_sensitivity_forging_cases_pass_without_a_sandbox(bare_engine: SubprocessEngine, host: Host,
                                                          case: Case) -> None:
    """Each forging case forges a pass for its wrong `add` in-process: the table's check is live."""
    for _ in range(case.attempts):  # a race: one run that wins a share of its many items will do
        execution = bare_engine.execute(hostile_request(case, host, "in-process"))
        host.restore()
        if any(test.status == "pass" for test in execution.tests):
            break
    if case.attempts > 1:
        assert any(test.status == "pass" for test in execution.tests), execution.tests
    else:
        assert [test.status for test in execution.tests] == ["pass"] * len(execution.tests), (
            execution.note, [(test.id, test.status, test.message[-300:]) for test in execution.tests])


@pytest.mark.parametrize("case", case_params(LEAKS))
def test_sensitivity_secrets_are_readable_without_a_sandbox(bare_engine: SubprocessEngine, host: Host,
                                                            case: Case) -> None:
    execution = bare_engine.execute(hostile_request(case, host, "in-process"))
    host.restore()
    assert any(test.status == "pass" for test in execution.tests), execution.tests


def test_host_dir_is_as_exposed_as_intended(host: Host) -> None:
    """The canary dir must be writable by anyone, or the write cases would prove nothing."""
    mode = host.dir.stat().st_mode
    assert mode & stat.S_IWOTH and host.canary.stat().st_mode & stat.S_IWOTH


# -- the integrity check's baseline: the tests' own imports ------------------------------------------


@pytest.fixture(scope="module")
def psutil_python() -> str:
    """psutil 5.9 (DomainEval pins 5.9.5): `psutil.tests` replaces `unittest.TestCase` with
    its own subclass when imported, as some libraries' test utilities do."""
    from knowbench.execution.environments import ensure_env

    return str(ensure_env(["psutil==5.9.8"]).python)


@pytest.mark.parametrize("engine_name", ["subprocess", "forkserver"])
def test_a_library_that_patches_unittest_when_the_tests_import_it_is_not_tampering(
        engine_name: str, psutil_python: str) -> None:
    sandbox = resolve_sandbox("auto", hidden=[REPO])
    engine: Engine = (SubprocessEngine(sandbox, workers=1, python=psutil_python) if engine_name == "subprocess"
                      else ForkServerEngine(sandbox, workers=1, python=psutil_python, preload=["unittest"]))
    tests = dedent("""
        import unittest
        from psutil.tests import PsutilTestCase

        class TestAdd(PsutilTestCase):
            def test_a(self):
                self.assertEqual(add(1, 2), 3)
    """)
    try:
        execution = engine.execute(make_request("def add(a, b):\n    return a + b\n", tests, "add"))
    finally:
        engine.close()
    assert [(test.status, test.reason) for test in execution.tests] == [("pass", None)], execution.tests


@pytest.mark.parametrize("engine_name", ["subprocess", "forkserver"])
def test_a_sample_that_patches_a_module_the_tests_import_is_caught(engine_name: str) -> None:
    """The baseline holds the tests' imports, so a testing module loaded for them is watched
    even when nothing had loaded it before the sample's code ran."""
    sandbox = resolve_sandbox("auto", hidden=[REPO])
    engine: Engine = (SubprocessEngine(sandbox, workers=1) if engine_name == "subprocess"
                      else ForkServerEngine(sandbox, workers=1, preload=["unittest"]))
    program = dedent("""
        import numpy.testing

        numpy.testing.assert_allclose = lambda *args, **kwargs: None


        def add(a, b):
            return a - b
    """)
    tests = "from numpy.testing import assert_allclose\n\n\ndef test_a():\n    assert_allclose(add(1, 2), 3)\n"
    try:
        execution = engine.execute(make_request(program, tests, "add"))
    finally:
        engine.close()
    assert [(test.status, test.reason) for test in execution.tests] == [("error", "tampering")], execution.tests
