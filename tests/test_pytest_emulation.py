"""The sandbox's pytest emulation (`knowbench_pytest`), as code: the runner's fixtures and
calling conventions, and the spec harness that mining copies into test specs.

The spec harness is exercised the way a spec runs it: its section of the module's source,
executed on its own in a fresh namespace that plays the spec.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import unittest
import unittest.mock
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import make_request
from knowbench.builders.harness import (
    EMULATION,
    HARNESS,
    HOOK_REGISTRIES,
    RUNNER_FIXTURES,
    spec_harness,
)
from knowbench.execution.engine import Engine
from knowbench.execution.sandbox import RUNNER_DIR

sys.path.insert(0, str(RUNNER_DIR))
emulation = importlib.import_module("knowbench_pytest")
runner = importlib.import_module("knowbench_runner")


def spec_namespace(**globals_: Any) -> dict[str, Any]:
    """A fresh namespace holding only the spec harness (and `globals_`), as a spec has it."""
    namespace: dict[str, Any] = {"__name__": "knowbench_test", **globals_}
    exec(compile(HARNESS, "test:spec", "exec"), namespace)
    return namespace


def builtin_fixtures(tmp_path: Path) -> dict[str, Any]:
    return {"tmp_path": tmp_path, "monkeypatch": emulation.MonkeyPatch(), "capsys": None}


# ------------------------------------------------------------------------ one module, shared


def test_the_runner_uses_the_emulations_functions_and_fixture_error() -> None:
    assert runner.run_test_function is emulation.run_test_function
    assert runner.run_test_class is emulation.run_test_class
    assert runner.run_unittest is emulation.run_unittest
    assert runner.UnsupportedFixture is emulation.UnsupportedFixture


def test_the_mined_harness_is_the_emulations_spec_section() -> None:
    assert EMULATION.parent == Path(RUNNER_DIR)
    assert spec_harness(Path(emulation.__file__).read_text(encoding="utf-8")) == HARNESS
    assert "def _kb_call(" in HARNESS and "class MonkeyPatch" not in HARNESS


def test_the_runner_watches_the_emulation_for_tampering() -> None:
    assert "knowbench_pytest" in runner._WATCHED_MODULES


def test_mining_wraps_tests_for_exactly_the_fixtures_the_runner_provides() -> None:
    assert RUNNER_FIXTURES == emulation.RUNNER_FIXTURES


def test_mining_carries_exactly_the_hooks_the_harness_has_registries_for() -> None:
    assert HOOK_REGISTRIES == emulation.HOOK_REGISTRIES
    harness = spec_namespace()
    assert set(HOOK_REGISTRIES.values()) < set(emulation.HARNESS_REGISTRIES)
    for registry in emulation.HARNESS_REGISTRIES:  # a mined spec's harness defines each
        assert type(harness[registry]) is type(getattr(emulation, registry))
    assert runner.HARNESS_REGISTRIES is emulation.HARNESS_REGISTRIES  # and the runner watches each


def test_a_source_without_the_harness_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="spec harness begins"):
        spec_harness("def f():\n    pass\n")


# ------------------------------------------------------------------------------- monkeypatch


def test_monkeypatch_setattr_is_undone() -> None:
    target = type("Target", (), {"value": 1})
    patch = emulation.MonkeyPatch()
    patch.setattr(target, "value", 2)
    patch.setattr(target, "added", 3, raising=False)
    assert (target.value, target.added) == (2, 3)
    patch.undo()
    assert target.value == 1 and not hasattr(target, "added")


def test_monkeypatch_setattr_by_dotted_name() -> None:
    patch = emulation.MonkeyPatch()
    patch.setattr("os.path.sep", "|")
    try:
        assert os.path.sep == "|"
    finally:
        patch.undo()
    assert os.path.sep == "/"


def test_monkeypatch_delattr_by_dotted_name() -> None:
    patch = emulation.MonkeyPatch()
    patch.delattr("os.path.sep")
    try:
        assert not hasattr(os.path, "sep")
    finally:
        patch.undo()
    assert os.path.sep == "/"
    with pytest.raises(TypeError):
        patch.delattr(os.path)


def test_monkeypatch_refuses_a_missing_attribute_unless_told() -> None:
    with pytest.raises(AttributeError):
        emulation.MonkeyPatch().setattr(object(), "nothing", 1)
    with pytest.raises(AttributeError):
        emulation.MonkeyPatch().delattr(object(), "nothing")
    emulation.MonkeyPatch().delattr(object(), "nothing", raising=False)


def test_monkeypatch_items_and_environment_are_undone() -> None:
    mapping = {"kept": 1, "gone": 2}
    patch = emulation.MonkeyPatch()
    patch.setitem(mapping, "kept", 10)
    patch.setitem(mapping, "new", 3)
    patch.delitem(mapping, "gone")
    patch.setenv("KNOWBENCH_EMULATION_TEST", 5)
    patch.setenv("KNOWBENCH_EMULATION_TEST", "a", prepend=":")
    assert mapping == {"kept": 10, "new": 3}
    assert os.environ["KNOWBENCH_EMULATION_TEST"] == "a:5"
    patch.undo()
    assert mapping == {"kept": 1, "gone": 2}
    assert "KNOWBENCH_EMULATION_TEST" not in os.environ


def test_monkeypatch_chdir_and_syspath_are_undone(tmp_path: Path) -> None:
    before, path_before = os.getcwd(), list(sys.path)
    patch = emulation.MonkeyPatch()
    patch.chdir(tmp_path)
    patch.syspath_prepend(tmp_path)
    assert os.getcwd() == str(tmp_path) and sys.path[0] == str(tmp_path)
    patch.undo()
    assert os.getcwd() == before and sys.path == path_before


# ------------------------------------------------------------------------------------ capsys


def test_capsys_captures_until_read_and_restores_on_close() -> None:
    saved = (sys.stdout, sys.stderr)
    capsys = emulation.Capsys()
    try:
        print("out")
        print("err", file=sys.stderr)
        captured = capsys.readouterr()
        print("later")
        assert (captured.out, captured.err) == ("out\n", "err\n")
        assert capsys.readouterr() == ("later\n", "")
        with capsys.disabled():  # written where the output went before the capture
            assert (sys.stdout, sys.stderr) == saved
        print("after")
        assert capsys.readouterr().out == "after\n"
    finally:
        capsys.close()
    assert (sys.stdout, sys.stderr) == saved
    binary = emulation.CapsysBinary()
    try:
        sys.stdout.buffer.write(b"\xff")
        print("text")
        assert binary.readouterr() == (b"\xfftext\n", b"")
    finally:
        binary.close()
    assert (sys.stdout, sys.stderr) == saved


# --------------------------------------------------------------------- calling a test item


def test_run_function_gives_the_fixtures_a_test_names(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    target = type("Target", (), {"value": 1})

    def test_it(tmp_path, monkeypatch, capsys):
        seen["tmp_path"] = tmp_path
        monkeypatch.setattr(target, "value", 2)
        print("hello")
        seen["printed"] = capsys.readouterr().out

    undo: list[Callable[[], None]] = []
    emulation.run_function(test_it, lambda: str(tmp_path / "fresh"), undo)
    for step in undo:
        step()
    assert seen == {"tmp_path": tmp_path / "fresh", "printed": "hello\n"}
    assert target.value == 1


def test_run_function_refuses_a_fixture_it_does_not_provide() -> None:
    def test_it(benchmark):
        raise AssertionError("must not run")

    with pytest.raises(emulation.UnsupportedFixture, match="'benchmark'"):
        emulation.run_function(test_it, lambda: "", [])


def test_run_function_gives_mocker_caplog_and_capfd() -> None:
    import logging

    seen = []

    def test_it(mocker, caplog, capfd):
        mocker.patch.object(_Greeter, "greet", return_value="patched")
        logging.getLogger("kb").warning("logged")
        print("out")
        seen.append((_Greeter().greet("x"), caplog.messages, capfd.readouterr().out))

    undo: list[Callable[[], None]] = []
    emulation.run_function(test_it, lambda: "", undo)
    for step in undo:
        step()
    assert seen == [("patched", ["logged"], "out\n")]
    assert _Greeter().greet("x") == "hello x"


def test_run_function_awaits_a_coroutine_test() -> None:
    ran = []

    async def test_it():
        ran.append(True)

    emulation.run_function(test_it, lambda: "", [])
    assert ran == [True]


def test_run_test_class_uses_a_fresh_instance_with_xunit_hooks() -> None:
    calls = []

    class TestThing:
        def setup_method(self, method):
            calls.append(("setup", method.__name__, id(self)))

        def teardown_method(self, method):
            calls.append(("teardown", method.__name__, id(self)))

        def test_fails(self):
            calls.append(("test", "test_fails", id(self)))
            raise AssertionError

    for _ in range(2):
        with pytest.raises(AssertionError):
            emulation.run_test_class(TestThing, "test_fails", lambda: "", [])
    assert [step[:2] for step in calls] == [("setup", "test_fails"), ("test", "test_fails"),
                                            ("teardown", "test_fails")] * 2
    assert calls[0][2] == calls[2][2]


def test_run_unittest_sets_the_class_up_once_and_cleans_up_each_case() -> None:
    calls = []

    class Case(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            calls.append("setUpClass")

        @classmethod
        def tearDownClass(cls):
            calls.append("tearDownClass")

        def setUp(self):
            calls.append("setUp")
            self.addCleanup(calls.append, "cleanup")

        def tearDown(self):
            calls.append("tearDown")

        def test_one(self):
            calls.append("test")

    namespace, ready = {"Case": Case}, {}
    for last in (False, True):
        item = {"spec": "t", "cls": "Case", "function": "test_one"}
        emulation.enter_scopes(namespace, item, ready)
        emulation.run_unittest(Case, "test_one")
        emulation.leave_scopes(namespace, item, ready, last_of_class=last, last_of_spec=last)
    assert calls == ["setUpClass", *["setUp", "test", "tearDown", "cleanup"] * 2, "tearDownClass"]


def test_a_failing_class_set_up_errors_every_test_of_the_class() -> None:
    class Case(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            raise RuntimeError("no database")

        def test_one(self):
            pass

    namespace, ready = {"Case": Case}, {}
    item = {"spec": "t", "cls": "Case", "function": "test_one"}
    for _ in range(2):
        with pytest.raises(RuntimeError, match="no database"):
            emulation.enter_scopes(namespace, item, ready)


def test_run_unittest_reports_skips_subtests_and_expected_failures() -> None:
    class Case(unittest.TestCase):
        @unittest.skip("later")
        def test_skip(self):
            pass

        def test_sub(self):
            for n in range(2):
                with self.subTest(n=n):
                    self.assertEqual(n, 0)

        @unittest.expectedFailure
        def test_expected(self):
            self.assertEqual(1, 2)

        @unittest.expectedFailure
        def test_unexpected(self):
            pass

    with pytest.raises(unittest.SkipTest, match="later"):
        emulation.run_unittest(Case, "test_skip")
    with pytest.raises(AssertionError, match="1 != 0"):
        emulation.run_unittest(Case, "test_sub")
    emulation.run_unittest(Case, "test_expected")
    with pytest.raises(AssertionError, match="unexpected success"):
        emulation.run_unittest(Case, "test_unexpected")


def test_run_direct_calls_the_test_without_set_up() -> None:
    class Case(unittest.TestCase):
        def setUp(self):
            raise RuntimeError("never")

        def test_one(self):
            self.ran = True

    emulation.run_direct({"Case": Case}, {"kind": "unittest", "cls": "Case", "function": "test_one"})


# ------------------------------------------------------------------------------ spec harness


def test_the_harness_runs_every_parametrize_combination(tmp_path: Path) -> None:
    spec = spec_namespace()
    seen = []

    @pytest.mark.parametrize("a", [1, 2])
    @pytest.mark.parametrize("b, c", [(3, 4), pytest.param(5, 6, marks=pytest.mark.skip)])
    def test_it(a, b, c):
        seen.append((a, b, c))

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert sorted(seen) == [(1, 3, 4), (2, 3, 4)]


@pytest.mark.parametrize("mark", [pytest.mark.skip, pytest.mark.xfail(run=False), pytest.mark.skipif(True, reason=""),
                                  pytest.mark.skipif("FLAG", reason="")])
def test_the_harness_skips_marked_tests(mark: pytest.MarkDecorator, tmp_path: Path) -> None:
    spec = spec_namespace(FLAG=True)  # a string condition is evaluated in the spec's globals

    @mark
    def test_it():
        raise AssertionError("must not run")

    with pytest.raises(unittest.SkipTest):
        spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))


def test_the_harness_applies_the_modules_pytestmark(tmp_path: Path) -> None:
    spec = spec_namespace(pytestmark=[pytest.mark.skip])

    def test_it():
        raise AssertionError("must not run")

    with pytest.raises(unittest.SkipTest):
        spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))


def test_the_harness_sets_fixtures_up_and_tears_them_down_in_reverse(tmp_path: Path) -> None:
    spec = spec_namespace()
    events = []

    def outer():
        events.append("outer up")
        yield "outer"
        events.append("outer down")

    def inner(outer, tmp_path):
        events.append("inner up")
        yield (outer, tmp_path)
        events.append("inner down")

    spec["_kb_FIXTURES"].update(outer=(outer, None), inner=(inner, None))

    def test_it(inner):
        events.append(("test", inner))

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert events == ["outer up", "inner up", ("test", ("outer", tmp_path)), "inner down", "outer down"]


def test_the_harness_request_node_finds_the_tests_marks(tmp_path: Path) -> None:
    spec = spec_namespace(pytestmark=[pytest.mark.usefixtures()])
    seen = []

    def limit(request):
        seen.append((request.node.get_closest_marker("filterwarnings").args, request.node.get_closest_marker("none"),
                     [mark.name for mark in request.node.iter_markers()]))
        return request.node.get_closest_marker("filterwarnings").args[0]

    spec["_kb_FIXTURES"].update(limit=(limit, None))

    @pytest.mark.filterwarnings("ignore")
    def test_it(limit):
        assert limit == "ignore"

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert seen == [(("ignore",), None, ["filterwarnings", "usefixtures"])]


def test_the_harness_runs_once_per_param_of_a_parametrized_fixture(tmp_path: Path) -> None:
    spec = spec_namespace()
    seen = []

    def number(request):
        return request.param * 10

    spec["_kb_FIXTURES"]["number"] = (number, [1, 2])

    def test_it(number, request):
        seen.append((number, request.function.__name__))

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert seen == [(10, "test_it"), (20, "test_it")]


def test_the_harness_runs_autouse_and_usefixtures_fixtures(tmp_path: Path) -> None:
    spec = spec_namespace()
    events = []
    spec["_kb_FIXTURES"].update(auto=(lambda: events.append("auto"), None),
                                used=(lambda: events.append("used"), None),
                                late=(lambda: "late value", None))
    spec["_kb_AUTOUSE"].append("auto")

    @pytest.mark.usefixtures("used")
    def test_it(request):
        events.append(request.getfixturevalue("late"))

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert events == ["auto", "used", "late value"]


def test_the_harness_raises_the_runners_error_for_an_unknown_fixture(tmp_path: Path) -> None:
    spec = spec_namespace()

    def test_it(benchmark):
        raise AssertionError("must not run")

    with pytest.raises(emulation.UnsupportedFixture, match="'benchmark'"):
        spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))


def test_the_harness_runs_xfail_tests_as_pytest_does(tmp_path: Path) -> None:
    """xfailed: passes; XPASS: passes unless strict; a failure other than `raises`: fails."""
    spec = spec_namespace()

    @pytest.mark.xfail(reason="known bug")
    def test_fails():
        raise AssertionError("expected")

    @pytest.mark.xfail(reason="fixed since")
    def test_passes():
        pass

    @pytest.mark.xfail(strict=True, reason="must fail")
    def test_passes_strictly():
        pass

    @pytest.mark.xfail(raises=ZeroDivisionError, reason="only that")
    def test_other_error():
        raise KeyError("not the expected one")

    @pytest.mark.xfail(False, reason="condition false: an ordinary test")
    def test_not_expected():
        raise AssertionError("real")

    spec["_kb_call"](test_fails, **builtin_fixtures(tmp_path))
    spec["_kb_call"](test_passes, **builtin_fixtures(tmp_path))
    with pytest.raises(AssertionError, match="XPASS"):
        spec["_kb_call"](test_passes_strictly, **builtin_fixtures(tmp_path))
    with pytest.raises(KeyError):
        spec["_kb_call"](test_other_error, **builtin_fixtures(tmp_path))
    with pytest.raises(AssertionError, match="real"):
        spec["_kb_call"](test_not_expected, **builtin_fixtures(tmp_path))



def test_the_harness_counts_pytest_fail_and_system_exit_as_an_xfail_tests_failure(tmp_path: Path) -> None:
    """pytest's `Failed` and `SystemExit` are BaseExceptions, and xfailed under pytest; a skip is
    still a skip."""
    spec = spec_namespace()

    @pytest.mark.xfail(reason="known bug")
    def test_fails_by_pytest_fail():
        pytest.fail("expected")

    @pytest.mark.xfail(reason="known bug")
    def test_exits():
        raise SystemExit(3)

    @pytest.mark.xfail(reason="known bug")
    def test_skips():
        pytest.skip("not here")

    spec["_kb_call"](test_fails_by_pytest_fail, **builtin_fixtures(tmp_path))
    spec["_kb_call"](test_exits, **builtin_fixtures(tmp_path))
    with pytest.raises(pytest.skip.Exception):
        spec["_kb_call"](test_skips, **builtin_fixtures(tmp_path))


def test_the_harness_runs_every_teardown_when_one_raises(tmp_path: Path) -> None:
    """As pytest: a fixture whose teardown raises fails the test, and the teardowns after it
    still run."""
    spec = spec_namespace()
    events = []

    def restores():
        yield
        events.append("restored")

    def breaks():
        yield
        raise RuntimeError("teardown failed")

    spec["_kb_FIXTURES"].update(restores=(restores, None), breaks=(breaks, None))

    def test_it(restores, breaks):
        events.append("ran")

    with pytest.raises(RuntimeError, match="teardown failed"):
        spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert events == ["ran", "restored"]


def test_a_class_scoped_fixture_is_fresh_for_each_test_outside_a_class(tmp_path: Path) -> None:
    """pytest sets a class-scoped fixture up anew for each test function outside any class."""
    spec = spec_namespace()

    def fresh_list():
        return []

    spec["_kb_FIXTURES"]["fresh_list"] = (fresh_list, None, "class")

    def test_one(fresh_list):
        fresh_list.append(1)
        assert fresh_list == [1]

    spec["_kb_call"](test_one, **builtin_fixtures(tmp_path))
    spec["_kb_call"](test_one, **builtin_fixtures(tmp_path))


class _Greeter:
    def greet(self, name):
        return f"hello {name}"


def test_the_harness_gives_mocker_with_patches_undone_after_the_test(tmp_path: Path) -> None:
    spec = spec_namespace()
    seen = []

    def test_it(mocker):
        mocker.patch("os.getcwd", return_value="/nowhere")
        mocker.patch.object(_Greeter, "greet", return_value="patched")
        mocker.patch.dict(os.environ, {"KB_MOCKER": "1"})
        seen.append((os.getcwd(), _Greeter().greet("x"), os.environ.get("KB_MOCKER"),
                     isinstance(mocker.MagicMock(), unittest.mock.MagicMock), mocker.ANY == 3))

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert seen == [("/nowhere", "patched", "1", True, True)]
    assert os.getcwd() != "/nowhere" and _Greeter().greet("x") == "hello x" and "KB_MOCKER" not in os.environ


def test_the_harness_mocker_spy_calls_the_original(tmp_path: Path) -> None:
    spec = spec_namespace()
    seen = []

    def test_it(mocker):
        spy = mocker.spy(_Greeter, "greet")
        seen.append((_Greeter().greet("ann"), spy.call_count, spy.spy_return))
        stub = mocker.stub(name="callback")
        stub(1)
        stub.assert_called_once_with(1)

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert seen == [("hello ann", 1, "hello ann")]
    assert not isinstance(_Greeter.greet, unittest.mock.Mock)


def test_the_harness_gives_caplog(tmp_path: Path) -> None:
    import logging

    spec = spec_namespace()
    seen = []

    def test_it(caplog):
        logging.getLogger("kb.test").warning("careful %s", "now")
        with caplog.at_level(logging.DEBUG, logger="kb.test"):
            logging.getLogger("kb.test").debug("details")
        seen.append((caplog.messages, caplog.record_tuples[0], "careful now" in caplog.text))
        caplog.clear()
        seen.append(caplog.records)

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert seen == [(["careful now", "details"], ("kb.test", logging.WARNING, "careful now"), True), []]
    assert not [h for h in logging.getLogger().handlers if type(h).__name__ == "Handler"]


def test_the_harness_sets_a_wider_scoped_fixture_up_once(tmp_path: Path) -> None:
    spec = spec_namespace()
    made = []

    def database():
        made.append("db")
        return object()

    def per_test():
        made.append("per test")

    spec["_kb_FIXTURES"].update(database=(database, None, "module"), per_test=(per_test, None))

    def test_it(database, per_test):
        made.append(database)

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert made[0] == "db" and made.count("db") == 1 and made.count("per test") == 2
    assert made[2] is made[4]


def test_the_harness_leaves_mock_patch_arguments_to_mock(tmp_path: Path) -> None:
    spec = spec_namespace()
    seen = []

    @unittest.mock.patch("os.getcwd")
    def test_it(getcwd, tmp_path):
        seen.append((isinstance(getcwd, unittest.mock.MagicMock), tmp_path))

    spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))
    assert seen == [(True, tmp_path)]


def test_the_harness_runs_class_methods_with_class_and_method_hooks(tmp_path: Path) -> None:
    spec = spec_namespace()
    events = []

    class TestThing:
        __module__ = "knowbench_test"  # a class the spec defines (a program's class would be ignored)

        @classmethod
        def setup_class(cls):
            events.append("setup_class")

        def setup_method(self, method):
            events.append("setup")

        def teardown_method(self, method):
            events.append("teardown")

        def _kb_fixture_value(self):
            return 7

        def test_it(self, value):
            events.append(value)

    for _ in range(2):
        spec["_kb_call_method"](TestThing, "test_it", **builtin_fixtures(tmp_path))
    assert events == ["setup_class", *["setup", 7, "teardown"] * 2]


# ------------------------------------------------------------ on a real engine, as pytest runs


ADD = "def add(a, b):\n    return a + b\n"


def _run(engine: Engine, tests: str, program: str = ADD) -> dict[str, tuple[str, str]]:
    execution = engine.execute(make_request(program, tests, "add"))
    return {test.id: (test.status, test.message) for test in execution.tests}


def _statuses(engine: Engine, tests: str, program: str = ADD) -> dict[str, str]:
    return {test_id: status for test_id, (status, _) in _run(engine, tests, program).items()}


def test_xunit_hooks_get_their_argument_only_when_they_take_one(engine: Engine) -> None:
    """pytest calls setup_module/setup_function/setup_method with the module, function or
    method only if they accept it, and setup_class with the class also as a plain method."""
    tests = ("STATE = {}\n"
             "def setup_module(module):\n    module.STATE['module'] = module.__name__\n"
             "def setup_function():\n    STATE['function'] = STATE.get('function', 0) + 1\n"
             "def teardown_function(function):\n    STATE['last'] = function.__name__\n"
             "def test_function():\n    assert STATE['module'] == 'knowbench_test' and STATE['function'] == 1\n"
             "def test_after():\n    assert STATE == {'module': 'knowbench_test', 'function': 2, 'last': 'test_function'}\n"
             "class TestPlain:\n"
             "    def setup_class(self):\n        self.base = 1\n"
             "    def setup_method(self):\n        self.offset = 2\n"
             "    def teardown_method(self):\n        pass\n"
             "    def test_one(self):\n        assert add(self.base, self.offset) == 3\n"
             "class TestStatic:\n"
             "    @staticmethod\n    def setup_class():\n        STATE['static'] = True\n"
             "    def test_two(self):\n        assert STATE['static']\n")
    assert set(_statuses(engine, tests).values()) == {"pass"}


def test_a_parameter_with_a_default_is_no_fixture(engine: Engine) -> None:
    tests = "def test_one(n=3, *, m=4):\n    assert add(n, m) == 7\n"
    assert _statuses(engine, tests) == {"t::test_one": "pass"}


def test_a_test_that_yields_is_refused_as_pytest_refuses_it(engine: Engine) -> None:
    tests = "def test_gen():\n    assert add(1, 1) == 3\n    yield\n"
    outcome = _run(engine, tests)["t::test_gen"]
    assert outcome[0] == "error" and "'yield' keyword is allowed in fixtures, but not in tests" in outcome[1]


def test_deprecation_warnings_are_shown_during_a_test_as_pytest_shows_them(engine: Engine) -> None:
    program = "import warnings\ndef add(a, b):\n    warnings.warn('old', DeprecationWarning)\n    return a + b\n"
    tests = ("import warnings\n"
             "def test_recorded():\n"
             "    with warnings.catch_warnings(record=True) as caught:\n        assert add(1, 2) == 3\n"
             "    assert [w.category for w in caught] == [DeprecationWarning]\n"
             "def test_again():\n"
             "    with warnings.catch_warnings(record=True) as caught:\n        add(1, 2)\n"
             "    assert len(caught) == 1\n")
    assert _statuses(engine, tests, program) == {"t::test_recorded": "pass", "t::test_again": "pass"}


def test_the_specs_module_is_importable_by_name_while_its_tests_run(engine: Engine) -> None:
    tests = ("import pickle, sys, typing\n"
             "class Point:\n    x: 'int'\n    def __init__(self, x):\n        self.x = x\n"
             "def test_pickle():\n    assert pickle.loads(pickle.dumps(Point(add(1, 2)))).x == 3\n"
             "def test_hints():\n    assert typing.get_type_hints(Point) == {'x': int}\n"
             "    assert sys.modules[__name__].Point is Point\n")
    other = "import sys\ndef test_own_module():\n    assert not hasattr(sys.modules[__name__], 'Point')\n"
    execution = engine.execute(make_request(ADD, {"t": tests, "u": other}, "add"))
    assert {test.id: test.status for test in execution.tests} == {
        "t::test_pickle": "pass", "t::test_hints": "pass", "u::test_own_module": "pass"}


WRONG = "def add(a, b):\n    return a - b\n"


@pytest.mark.parametrize("tests", [
    "from typing import NamedTuple\nclass TestPoint(NamedTuple):\n    a: int\n    def test_sum(self):\n"
    "        return self.a\ndef test_points():\n    assert add(1, 2) == 3\n",
    "from enum import Enum\nclass TestMode(Enum):\n    A = 1\n    def test_x(self):\n        return 1\n"
    "def test_modes():\n    assert add(1, 2) == 3\n",
    "from typing import Protocol\nclass Testable(Protocol):\n    __test__ = True\n    def test(self): ...\n"
    "def test_impl():\n    assert add(1, 2) == 3\n",
    "from abc import ABC, abstractmethod\nclass TestBase(ABC):\n    @abstractmethod\n    def make(self): ...\n"
    "    def test_add(self):\n        assert add(*self.make()) == 3\n"
    "class TestInts(TestBase):\n    def make(self):\n        return 1, 2\n",
    "class Acc:\n    def __init__(self, start):\n        self.total = start\n"
    "Base = [Acc][0]\nclass TestAcc(Base):\n    def test_add(self):\n        assert False\n"
    "def test_f():\n    assert add(1, 2) == 3\n",
    "def test_helper(a, b):\n    return add(a, b) == a + b\ntest_helper.__test__ = False\n"
    "class TestOne:\n    def test_c(self):\n        assert test_helper(3, 3)\n"
    "    def test_d(self):\n        assert False\n    test_d.__test__ = False\n",
])
def test_a_correct_program_passes_where_pytest_collects_no_class_or_function(engine: Engine, tests: str) -> None:
    """A class with an `__init__` or `__new__` of its own or inherited (a NamedTuple, an Enum,
    a Protocol, a base known only at run time), an abstract class and an object whose
    `__test__` is false are not pytest's tests; the runner does not run them either."""
    statuses = _statuses(engine, tests)
    assert statuses and set(statuses.values()) == {"pass"}, _run(engine, tests)


@pytest.mark.parametrize("tests", [
    "import unittest\nclass AddCheck(unittest.TestCase):\n    def runTest(self):\n"
    "        self.assertEqual(add(1, 2), 3)\n",
    "class Checks:\n    __test__ = True\n    def test_a(self):\n        assert add(1, 2) == 3\n",
    "def check_b():\n    assert add(2, 2) == 4\ncheck_b.__test__ = True if 1 else None\n",
    "import functools\ndef _check(a, b):\n    assert add(a, b) == a + b\n"
    "test_one = functools.partial(_check, 1, 2)\n",
    "import sys\nif sys.version_info >= (3,):\n    class TestNew:\n        def test_new(self):\n"
    "            assert add(1, 2) == 3\n",
    "class Acc:\n    pass\nBase = [Acc][0]\nclass TestAcc(Base):\n    def test_add(self):\n"
    "        assert add(1, 2) == 3\n",
])
def test_tests_pytest_collects_fail_a_wrong_program(engine: Engine, tests: str) -> None:
    """`runTest` alone, a class or function whose `__test__` is True, a `functools.partial` of
    a check, a class bound under a condition or on a base known only at run time: pytest
    runs each, so a wrong program must not pass."""
    assert set(_statuses(engine, tests).values()) == {"pass"}
    assert "pass" not in _statuses(engine, tests, WRONG).values()


def test_set_up_class_without_classmethod_errors_every_test_as_unittest_does(engine: Engine) -> None:
    """unittest (and pytest) call `setUpClass()` with no argument: a plain method fails."""
    tests = ("import unittest\nclass AddTest(unittest.TestCase):\n    def setUpClass(cls):\n"
             "        cls.v = add(1, 2)\n    def test_v(self):\n        self.assertEqual(self.v, 3)\n"
             "    def test_w(self):\n        pass\n")
    outcomes = _run(engine, tests)
    assert {status for status, _ in outcomes.values()} == {"error"}
    assert all("missing 1 required positional argument" in message for _, message in outcomes.values())


MODULE_CLEANUP = """
import unittest

def setUpModule():
    unittest.addModuleCleanup(check)

def check():
    assert add(2, 3) == 5, "checked as the module ends"

class AddTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual(add(0, 0), 0)
"""


def test_module_cleanups_run_as_the_module_ends_as_unittest_runs_them(engine: Engine) -> None:
    """`addModuleCleanup`: a cleanup that fails fails the module's last test (unittest reports
    an error in tearDownModule), so a wrong program the cleanup checks does not pass."""
    assert set(_statuses(engine, MODULE_CLEANUP).values()) == {"pass"}
    assert set(_statuses(engine, MODULE_CLEANUP, "def add(a, b):\n    return a * b\n").values()) != {"pass"}


def test_class_cleanups_run_when_set_up_class_fails_as_unittest_runs_them(engine: Engine) -> None:
    """What a failed `setUpClass` registered with `addClassCleanup` is cleaned up before the
    next class runs."""
    assert _statuses(engine, CLASS_CLEANUP) == {"t::TestA::test_1": "error", "t::TestB::test_2": "pass"}


CLASS_CLEANUP = """
import unittest

FLAGS = {}

class TestA(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.addClassCleanup(FLAGS.__setitem__, "clean", True)
        raise RuntimeError("set-up failed")

    def test_1(self):
        pass

class TestB(unittest.TestCase):
    def test_2(self):
        self.assertTrue(FLAGS.get("clean"))
        self.assertEqual(add(1, 2), 3)
"""


SCALE = "SETTINGS = {'factor': 1}\n\n\ndef scale(x):\n    return x * SETTINGS['factor']\n"
SCOPED_TEARDOWNS = """
import pytest

@pytest.fixture(scope="class")
def tenfold():
    SETTINGS["factor"] = 10
    yield
    SETTINGS["factor"] = 1

@pytest.fixture(scope="module")
def hundredfold():
    saved = SETTINGS["factor"]
    SETTINGS["factor"] = 100
    yield
    SETTINGS["factor"] = saved

class TestScaled:
    def test_scaled(self, tenfold):
        assert scale(2) == 20

def test_after_the_class():
    assert scale(2) == 2

def test_in_the_module(hundredfold):
    assert scale(2) == 200
"""


def test_class_and_module_fixtures_are_torn_down_as_their_scope_ends(engine: Engine) -> None:
    """As pytest: a class-scoped fixture's tear-down runs after the class's last test (the
    tests after it see what it restored), a module-scoped one's after the spec's last test
    (the next spec does)."""
    tests = {"a": SCOPED_TEARDOWNS, "b": "def test_the_next_spec():\n    assert scale(2) == 2\n"}
    execution = engine.execute(make_request(SCALE, tests, "scale", isolation="in-process"))
    assert {test.id: test.status for test in execution.tests} == {
        "a::TestScaled::test_scaled": "pass", "a::test_after_the_class": "pass",
        "a::test_in_the_module": "pass", "b::test_the_next_spec": "pass"}, [t.message for t in execution.tests]


def test_a_fixtures_params_given_as_pytest_param_reach_it_as_their_values(engine: Engine) -> None:
    """`params=[pytest.param(1, id=...), pytest.param(2, marks=pytest.mark.skip)]`: the fixture
    gets 1 (a value, not a ParameterSet); the skipped one is not run."""
    tests = ("import pytest\n\n@pytest.fixture(params=[pytest.param(1, id='one'), "
             "pytest.param(2, marks=pytest.mark.skip(reason='no'))])\ndef number(request):\n"
             "    assert request.param == 1\n    return request.param\n\n"
             "def test_number(number):\n    assert add(number, 0) == 1\n")
    assert _statuses(engine, tests) == {"t::test_number": "pass"}


def test_caplog_keeps_what_fixtures_logged_apart_from_the_test_call(engine: Engine) -> None:
    """As pytest: `caplog.records` holds the call's records; what the fixtures logged while
    they were set up is `caplog.get_records("setup")`."""
    tests = ("import logging\nimport pytest\n\n@pytest.fixture\ndef prepared():\n"
             "    logging.getLogger('app').warning('prepared %d', add(1, 1))\n\n"
             "def test_logged(caplog, prepared):\n    logging.getLogger('app').warning('called')\n"
             "    assert caplog.messages == ['called']\n"
             "    assert [r.getMessage() for r in caplog.get_records('setup')] == ['prepared 2']\n")
    assert _statuses(engine, tests) == {"t::test_logged": "pass"}


def test_a_testcase_gets_pytests_setup_class_and_setup_method(engine: Engine) -> None:
    tests = ("import unittest\nclass AddTest(unittest.TestCase):\n"
             "    def setup_method(self, method):\n        self.v = add(1, 2)\n"
             "    @classmethod\n    def setup_class(cls):\n        cls.c = add(2, 2)\n"
             "    def test_v(self):\n        self.assertEqual(self.v, 3)\n"
             "    def test_c(self):\n        self.assertEqual(self.c, 4)\n")
    assert _statuses(engine, tests) == {"t::AddTest::test_c": "pass", "t::AddTest::test_v": "pass"}


def test_a_static_method_test_gets_the_fixtures_its_signature_names(engine: Engine) -> None:
    tests = ("class TestS:\n    @staticmethod\n    def test_tmp(tmp_path):\n"
             "        (tmp_path / 'x').write_text(str(add(1, 2)))\n        assert (tmp_path / 'x').read_text() == '3'\n"
             "    @classmethod\n    def test_c(cls):\n        assert add(2, 2) == 4\n")
    assert _statuses(engine, tests) == {"t::TestS::test_tmp": "pass", "t::TestS::test_c": "pass"}


def test_the_harness_calls_xunit_hooks_with_an_optional_argument(tmp_path: Path) -> None:
    spec = spec_namespace()
    events = []

    class TestThing:
        def setup_class(self):
            events.append(("class", self))

        def setup_method(self):
            events.append("method")

        def test_it(self):
            events.append("test")

    spec["_kb_call_method"](TestThing, "test_it", **builtin_fixtures(tmp_path))
    assert events == [("class", TestThing), "method", "test"]


def test_the_harness_refuses_a_test_that_yields(tmp_path: Path) -> None:
    spec = spec_namespace()

    def test_it():
        yield

    with pytest.raises(TypeError, match="'yield' keyword"):
        spec["_kb_call"](test_it, **builtin_fixtures(tmp_path))


def test_monkeypatch_puts_back_what_a_class_holds_and_has_a_context() -> None:
    class Target:
        @staticmethod
        def make():
            return 1

    class Child(Target):
        pass

    patch = emulation.MonkeyPatch()
    patch.setattr(Target, "make", lambda: 2)
    patch.setattr(Child, "make", lambda: 3)
    patch.undo()
    assert isinstance(Target.__dict__["make"], staticmethod) and "make" not in Child.__dict__
    with emulation.MonkeyPatch.context() as scoped:
        scoped.setattr(Target, "make", staticmethod(lambda: 4))
        assert Target.make() == 4
    assert Target().make() == 1


def test_a_plain_functions_fixtures_read_from_its_code_agree_with_its_signature() -> None:
    """The fast reading (code object) and inspect.signature name the same fixtures; what the
    fast one cannot read (wrapped, patched, partial) it leaves to the signature."""
    import functools
    import inspect

    def plain(tmp_path, capsys, flag=True, *rest, monkeypatch, level=2, **more): ...

    class Holder:
        def method(self, tmp_path, x=1): ...

        @staticmethod
        def static(tmp_path): ...

        @classmethod
        def klass(cls, capsys): ...

    @functools.wraps(plain)
    def wrapped(*args, **kwargs): ...

    def by_signature(function: Callable[..., Any]) -> list[str]:
        return [p.name for p in inspect.signature(function).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty]

    for function in (plain, Holder().method, Holder.static, Holder().static, Holder.klass, lambda: None):
        assert emulation._kb_plain_arguments(function) == by_signature(function), function
        assert emulation._kb_arguments(function) == by_signature(function)
    assert emulation._kb_plain_arguments(wrapped) is None
    assert emulation._kb_plain_arguments(functools.partial(plain, 1)) is None
    assert emulation._kb_arguments(wrapped) == by_signature(wrapped) == ["tmp_path", "capsys", "monkeypatch"]


# A spec written by hand for pytest (not mined): marks, module and class fixtures. Its verdicts
# with the wrong program below are pytest 9's on the same file (`from solution import add`).
PYTEST_STYLE_SPEC = '''
import sys
import pytest

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture
def base(tmp_path):
    (tmp_path / "x").write_text("1")
    yield 10


@pytest.fixture(params=[0, 1])
def offset(request):
    return request.param


@pytest.mark.parametrize("a, b, expected", [(1, 2, 3), (2, 3, 5), pytest.param(0, 0, 1, marks=pytest.mark.xfail)])
def test_param(a, b, expected):
    assert add(a, b) == expected


def test_fixture(base, offset, capsys):
    print(add(base, offset))
    assert capsys.readouterr().out == f"{10 + offset}\\n"


@pytest.mark.skip(reason="never")
def test_skipped():
    assert False


@pytest.mark.skipif("sys.version_info < (3,)")
def test_skipif_false():
    assert add(1, 1) == 2


@pytest.mark.xfail(strict=True)
def test_xfail():
    assert add(1, 1) == 3


class TestClass:
    @pytest.fixture(autouse=True)
    def setup(self):
        self.value = 5

    @pytest.fixture
    def two(self):
        return 2

    @pytest.mark.parametrize("x", [1, 3])
    def test_method(self, x, two):
        assert add(self.value, x) == 5 + x
        assert add(x, two) == x + 2
'''
WRONG_ON_THREE = "def add(a, b):\n    return a - b if b == 3 else a + b\n"


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_spec_written_for_pytest_runs_its_marks_and_fixtures_as_pytest_does(engine: Engine,
                                                                               isolation: str) -> None:
    """A spec knowbench did not mine gets the spec harness at run time when it uses pytest's
    marks or defines fixtures: parametrize, skip, skipif, xfail, the module's and a class's
    fixtures (autouse, parametrized, yielding) and the runner's own beside them."""
    def statuses(program: str) -> dict[str, str]:
        execution = engine.execute(make_request(program, PYTEST_STYLE_SPEC, "add", isolation=isolation,
                                                preload=["pytest"]))  # type: ignore[arg-type]
        return {test.id.rsplit("::", 1)[-1]: test.reason or test.status for test in execution.tests}

    assert statuses(ADD) == {"test_param": "pass", "test_fixture": "pass", "test_skipped": "skipped",
                             "test_skipif_false": "pass", "test_xfail": "pass", "test_method": "pass"}
    assert statuses(WRONG_ON_THREE) == {"test_param": "assertion", "test_fixture": "pass",
                                        "test_skipped": "skipped", "test_skipif_false": "pass",
                                        "test_xfail": "pass", "test_method": "assertion"}


def test_a_fixture_is_read_as_every_pytest_release_makes_it() -> None:
    """pytest 8.4 and later wrap a fixture in a `FixtureFunctionDefinition`; earlier releases
    marked the function (`_pytestfixturefunction`) and wrapped it (`__pytest_wrapped__`)."""
    @pytest.fixture(params=[1, 2], scope="module", autouse=True, name="renamed", ids=["a", "b"])
    def current(request: Any) -> int:
        return 3

    function, name, params, scope, autouse, ids = emulation._fixture_of(current)
    assert (function(None), name, params, scope, autouse, list(ids)) == (3, "renamed", [1, 2], "module", True,
                                                                         ["a", "b"])

    def original() -> int:
        return 4

    def older() -> None:
        raise AssertionError("a fixture called directly")

    older._pytestfixturefunction = type("Marker", (), {"scope": "class", "params": None, "autouse": False,  # type: ignore[attr-defined]
                                                       "name": None, "ids": None})()
    older.__pytest_wrapped__ = type("Wrapped", (), {"obj": staticmethod(original)})()  # type: ignore[attr-defined]
    function, name, params, scope, autouse, ids = emulation._fixture_of(older)
    assert (function(), name, params, scope, autouse, ids) == (4, None, None, "class", False, None)
    assert emulation._fixture_of(original) is None and emulation._fixture_of(3) is None


@pytest.mark.parametrize("program", [
    # a module-level pytestmark of the program's, duck-typed or pytest's own
    "class _M:\n    name = 'xfail'; args = (); kwargs = {}\npytestmark = [_M()]\ndef add(a, b):\n    return a - b\n",
    "import pytest\npytestmark = pytest.mark.xfail()\ndef add(a, b):\n    return a - b\n",
    # a fixture of the program's named as the runner's
    "import pytest\nclass Fake:\n    def readouterr(self):\n        return ('3\\n', '')\n"
    "@pytest.fixture(name='capsys')\ndef _fake():\n    return Fake()\ndef add(a, b):\n    return a - b\n",
    # a module hook of the program's, which would swap each test's code for a pass
    "def setup_function(function):\n    function.__code__ = (lambda *a, **k: None).__code__\n"
    "def add(a, b):\n    return a - b\n",
    # a builtin the harness calls, shadowed by the program's, and the harness's own names
    "import builtins, pytest\ndef getattr(obj, name, *default):\n"
    "    if name == 'pytestmark':\n        return [pytest.mark.xfail(reason='x')]\n"
    "    return builtins.getattr(obj, name, *default)\n"
    "def globals():\n    return {'pytestmark': [pytest.mark.skip]}\n"
    "_kb_SPEC = {'pytestmark': [pytest.mark.xfail]}\n_kb_INHERITED = ()\ndef add(a, b):\n    return a - b\n",
])
def test_the_programs_marks_and_fixtures_are_not_the_specs(engine: Engine, program: str) -> None:
    """A spec's namespace starts as a copy of the program's globals: what the program put there
    (in-process, the candidate's) never marks or serves the spec's tests."""
    tests = ("import pytest\n@pytest.mark.parametrize('x', [1])\ndef test_add(x):\n    assert add(1, 2) == 3\n"
             "def test_print(capsys):\n    print(add(1, 2))\n    assert capsys.readouterr()[0] == '3\\n'\n")
    execution = engine.execute(make_request(program, tests, "add", preload=["pytest"]))
    assert [(test.status, test.reason) for test in execution.tests] == [("fail", "assertion")] * 2


# More of pytest, by the spec harness at run time. pytest 9 on this file (as test_h.py, with
# `from solution import add`): test_no_cases skipped ("got empty parameter set"),
# TestDerived's test xfailed (the base class's mark), every other test passed, and no test of
# the fixture named test_data.
PYTEST_MORE_SPEC = '''
import warnings

import pytest

CALLS = []


@pytest.fixture
def test_data():
    return 5


@pytest.fixture(scope="class")
def per_class(request):
    CALLS.append(request.cls.__name__)
    return request.cls.__name__


@pytest.fixture
def maybe(request):
    return getattr(request, "param", 7)


@pytest.mark.parametrize("x", [])
def test_no_cases(x):
    assert add(x, 1) == -1


@pytest.mark.skipif("sys.platform == 'no-such' or os.sep == '?' or platform.system() == 'Nowhere'")
def test_skipif_names(test_data, maybe):
    assert add(test_data, maybe) == 12


def test_tmpdir_and_recwarn(tmpdir, recwarn):
    tmpdir.join("f").write("x")
    warnings.warn("careful", UserWarning)
    assert len(recwarn) == 1 and add(1, 1) == 2


class TestOne:
    def test_scope(self, per_class):
        assert per_class == "TestOne" and add(1, 2) == 3


class TestTwo:
    def test_scope(self, per_class):
        assert per_class == "TestTwo" and add(2, 2) == 4


@pytest.mark.xfail(strict=True)
class Base:
    pass


class TestDerived(Base):
    @pytest.mark.parametrize("y", [1])
    def test_expected_to_fail(self, y):
        assert add(y, 1) == 3


@pytest.fixture
def val():
    return 1


class TestOverride:
    @pytest.fixture
    def val(self, val):
        return val + 1

    def test_outer_and_own(self, val):
        assert add(val, 0) == 2


@pytest.mark.skipif(reason="no condition: skipped")
def test_skipif_without_condition():
    assert add(1, 1) == 3
'''


def test_more_of_pytest_in_a_hand_written_spec(engine: Engine) -> None:
    execution = engine.execute(make_request(ADD, PYTEST_MORE_SPEC, "add", preload=["pytest"]))
    assert {test.id.split("::", 1)[1]: test.reason or test.status for test in execution.tests} == {
        "test_no_cases": "skipped", "test_skipif_names": "pass", "test_tmpdir_and_recwarn": "pass",
        "TestOne::test_scope": "pass", "TestTwo::test_scope": "pass", "TestDerived::test_expected_to_fail": "pass",
        "TestOverride::test_outer_and_own": "pass", "test_skipif_without_condition": "skipped"}


def test_tmpdir_and_recwarn_without_the_harness(engine: Engine) -> None:
    tests = ("import warnings\n"
             "def test_it(tmpdir, recwarn):\n"
             "    tmpdir.join('f').write('x')\n"
             "    warnings.warn('careful', UserWarning)\n"
             "    assert len(recwarn) == 1 and add(1, 1) == 2\n")
    execution = engine.execute(make_request(ADD, tests, "add", preload=["pytest"]))
    assert execution.status == "pass", execution.tests[0].message


def test_the_programs_classes_and_names_never_mark_the_specs_tests(engine: Engine) -> None:
    # In-process the program is the candidate's: a base class of its marked xfail, or a `sys`
    # of its shadowing the one a skipif string names, must not excuse a wrong answer.
    program = ("import pytest\nclass Stack:\n    pytestmark = [pytest.mark.xfail]\n"
               "class sys:\n    platform = 'win32'\ndef add(a, b):\n    return a - b\n")
    tests = {"derived": "class TestStack(Stack):\n    def test_add(self):\n        assert add(1, 2) == 3\n",
             "condition": "import pytest\n@pytest.mark.xfail(\"sys.platform == 'win32'\", reason='known bug')\n"
                          "def test_add():\n    assert add(1, 2) == 3\n"}
    execution = engine.execute(make_request(program, tests, "add", preload=["pytest"]))
    assert [(test.status, test.reason) for test in execution.tests] == [("fail", "assertion")] * 2, execution.tests


FILTERWARNINGS_SPEC = """
import warnings

import pytest

pytestmark = pytest.mark.filterwarnings("error::UserWarning")


def test_an_error_by_the_module_mark():
    with pytest.raises(UserWarning):
        warnings.warn("made an error", UserWarning)
    assert add(1, 2) == 3


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_tests_own_mark_too():
    warnings.warn("noisy", DeprecationWarning)
    assert add(1, 2) == 3


@pytest.mark.filterwarnings("ignore:noisy")
def test_the_modules_mark_is_put_in_front_last():
    warnings.warn("noisy", UserWarning)  # (pytest: the module's `error` wins)


def test_recorded(recwarn):
    warnings.warn("seen", DeprecationWarning)
    assert [str(w.message) for w in recwarn] == ["seen"]
    assert add(1, 2) == 3
"""


def test_filterwarnings_marks_and_recwarn_are_pytests(engine: Engine, tmp_path: Path) -> None:
    """The module's and the test's `filterwarnings` marks hold while the test runs, as pytest
    applies them (the module's put in front last, so it wins a conflict), and `recwarn`
    records; pytest itself agrees on the same file."""
    program = "def add(a, b):\n    return a + b\n"
    result = engine.execute(make_request(program, FILTERWARNINGS_SPEC, "add", preload=["pytest"]))
    failed = [t.id.rsplit(":", 1)[-1] for t in result.tests if t.status != "pass"]
    assert failed == ["test_the_modules_mark_is_put_in_front_last"], [(t.id, t.message[-300:]) for t in result.tests]
    (tmp_path / "test_spec.py").write_text(program + FILTERWARNINGS_SPEC)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_spec.py"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "1 failed, 3 passed" in done.stdout and "FAILED test_spec.py::" + failed[0] in done.stdout, (
        done.stdout[-1500:])


MARK_ORDER_SPEC = """
import warnings

import pytest


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("x", [pytest.param(2, marks=pytest.mark.filterwarnings("ignore::UserWarning"))])
def test_a_cases_mark_comes_after_the_tests_own(x):
    warnings.warn("w", UserWarning)
    assert add(x, 0) == 2


@pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.xfail(strict=False))])
@pytest.mark.xfail(strict=True)
def test_the_tests_own_xfail_is_found_first(x):
    assert add(x, 0) == 1


class Base:
    pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.filterwarnings("ignore::UserWarning")
class TestDerived(Base):
    def test_the_derived_classes_mark_wins(self):
        warnings.warn("w", UserWarning)
        assert add(1, 1) == 2


class TestSetUpWarns:
    pytestmark = pytest.mark.filterwarnings("error")

    def setup_method(self):
        warnings.warn("set-up", UserWarning)

    def test_never_runs(self):
        assert add(1, 1) == 2
"""


def test_marks_come_in_pytests_order(engine: Engine, tmp_path: Path) -> None:
    """A case's marks after the test's own, a base class's before its subclass's: which
    `filterwarnings` wins and which `xfail` is found first are pytest's; a class's
    `filterwarnings` holds around its `setup_method` too."""
    program = "def add(a, b):\n    return a + b\n"
    result = engine.execute(make_request(program, MARK_ORDER_SPEC, "add", preload=["pytest"]))
    failed = [(t.id.rsplit(":", 1)[-1], t.status) for t in result.tests if t.status != "pass"]
    assert failed == [("test_the_tests_own_xfail_is_found_first", "fail"), ("test_never_runs", "error")], (
        [(t.id, t.message[-300:]) for t in result.tests])
    (tmp_path / "test_spec.py").write_text(program + MARK_ORDER_SPEC)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_spec.py"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "1 failed, 2 passed, 1 error" in done.stdout, done.stdout[-1500:]
    assert "FAILED test_spec.py::test_the_tests_own_xfail_is_found_first" in done.stdout
    assert "ERROR test_spec.py::TestSetUpWarns::test_never_runs" in done.stdout


UNITTEST_MARKS_SPEC = """
import sys
import unittest
import warnings

import pytest

LOG = []
needs_py2 = pytest.mark.skipif(sys.version_info >= (3,), reason="Python 2 only")


@pytest.fixture(autouse=True)
def logged(request):
    LOG.append(("auto", type(request.instance).__name__))
    yield
    LOG.append("auto-down")


@pytest.fixture
def value(request):
    request.instance.value = 5
    LOG.append("value")
    yield
    LOG.append("value-down")


@pytest.mark.skipif("sys.version_info >= (3,)", reason="Python 2 only")
class TestSkippedCase(unittest.TestCase):
    def test_never_runs(self):
        assert add(1, 1) == 3


@needs_py2
class TestSkippedByAName(unittest.TestCase):
    def test_never_runs_either(self):
        assert add(1, 1) == 3


@pytest.mark.usefixtures("value")
class TestFixtures(unittest.TestCase):
    def setUp(self):
        LOG.append("setUp")

    def tearDown(self):
        LOG.append("tearDown")

    def test_the_fixture_set_the_instance_up(self):
        assert add(self.value, 0) == 5

    @pytest.mark.parametrize("x", [1, 2])
    def test_parametrize_is_ignored(self, x=0):
        assert add(x, 0) == 0

    def test_the_order_is_pytests(self):
        assert LOG[-3:] == [("auto", "TestFixtures"), "value", "setUp"], LOG


class TestMarkedMethods(unittest.TestCase):
    pytestmark = pytest.mark.filterwarnings("error")

    def test_a_warning_is_an_error(self):
        warnings.warn("w", UserWarning)
        assert add(1, 1) == 2

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_the_classs_filter_wins_over_the_methods(self):
        warnings.warn("w", UserWarning)
        assert add(1, 1) == 2


class TestExpectations(unittest.TestCase):
    @pytest.mark.xfail(reason="known", strict=True)
    def test_expected_to_fail(self):
        assert add(1, 1) == 3

    @pytest.mark.xfail(strict=True)
    def test_strict_xpass_fails(self):
        assert add(1, 1) == 2
"""


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_pytests_marks_and_autouse_fixtures_apply_to_unittest_cases(engine: Engine, tmp_path: Path,
                                                                    isolation: str) -> None:
    """skip/skipif (as a string, and through a name the module binds), usefixtures and autouse
    fixtures (set up before `setUp`, `request.instance` the case), filterwarnings (its class's
    winning over the method's own, as in pytest 9) and xfail on `unittest.TestCase` classes and methods, with
    parametrize ignored: pytest's verdicts on the same file, split and in-process."""
    program = "def add(a, b):\n    return a + b\n"
    result = engine.execute(make_request(program, UNITTEST_MARKS_SPEC, "add", preload=["pytest"],
                                         isolation=isolation))
    verdicts = {t.id.rsplit(":", 1)[-1]: t.reason or t.status for t in result.tests}
    assert result.isolation == isolation and verdicts == {
        "test_never_runs": "skipped", "test_never_runs_either": "skipped",
        "test_the_fixture_set_the_instance_up": "pass", "test_parametrize_is_ignored": "pass",
        "test_the_order_is_pytests": "pass", "test_a_warning_is_an_error": "exception",
        "test_the_classs_filter_wins_over_the_methods": "exception", "test_expected_to_fail": "pass",
        "test_strict_xpass_fails": "assertion"}, [(t.id, t.message[-300:]) for t in result.tests]
    (tmp_path / "test_spec.py").write_text(program + UNITTEST_MARKS_SPEC)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "test_spec.py"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "3 failed, 3 passed, 2 skipped, 1 xfailed" in done.stdout, done.stdout[-1500:]
    assert "FAILED test_spec.py::TestMarkedMethods::test_a_warning_is_an_error" in done.stdout
    assert "FAILED test_spec.py::TestExpectations::test_strict_xpass_fails" in done.stdout
    assert "FAILED test_spec.py::TestMarkedMethods::test_the_classs_filter_wins_over_the_methods" in done.stdout


MORE_BUILTIN_FIXTURES_SPEC = """
import pytest


@pytest.fixture(autouse=True)
def add_to_doctests(doctest_namespace):
    doctest_namespace["add"] = add


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    made = tmp_path_factory.mktemp("data")
    (made / "n.txt").write_text("2")
    return made


def test_a_session_directory(data_dir, tmp_path_factory):
    assert add(int((data_dir / "n.txt").read_text()), 1) == 3
    assert tmp_path_factory.mktemp("other", numbered=False).is_dir()


def test_recorded(record_property, record_testsuite_property):
    record_property("size", 3)
    record_testsuite_property("suite", "x")
    assert add(1, 2) == 3


def test_plain(doctest_namespace):
    doctest_namespace["x"] = 1
    assert add(2, 2) == 4
"""


def test_more_of_pytests_builtin_fixtures_are_served(engine: Engine, tmp_path: Path) -> None:
    """`doctest_namespace` (which a conftest's autouse fixture fills: semver's), `tmp_path_factory`
    (behind a session fixture), `record_property` and `record_testsuite_property`: pytest passes
    every test; so must the harness, and fail them on a wrong program."""
    program = "def add(a, b):\n    return a + b\n"
    result = engine.execute(make_request(program, MORE_BUILTIN_FIXTURES_SPEC, "add", preload=["pytest"]))
    assert [(t.status, t.called) for t in result.tests] == [("pass", True)] * 3, [t.message for t in result.tests]
    wrong = engine.execute(make_request("def add(a, b):\n    return a - b\n", MORE_BUILTIN_FIXTURES_SPEC, "add",
                                        preload=["pytest"]))
    assert [t.status for t in wrong.tests] == ["fail"] * 3, [t.message for t in wrong.tests]
    (tmp_path / "test_spec.py").write_text(program + MORE_BUILTIN_FIXTURES_SPEC)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_spec.py"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "3 passed" in done.stdout, done.stdout[-1500:]


UNITTEST_RUNNER_FIXTURES_SPEC = """
import os
import unittest

import pytest


@pytest.fixture(autouse=True)
def isolate(request, tmp_path, monkeypatch, capsys):
    if request.cls is not None and request.cls.__name__ == "TestSkipped":
        raise RuntimeError("pytest runs no fixture of a skipped TestCase")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KB_ISOLATED", "1")


class TestInIsolation(unittest.TestCase):
    @pytest.fixture(autouse=True)
    def inject(self, tmp_path):
        self.where = tmp_path

    def test_in_its_directory(self):
        assert os.getcwd() == str(self.where) and os.environ["KB_ISOLATED"] == "1"
        assert add(1, 1) == 2


@unittest.skip("never")
class TestSkipped(unittest.TestCase):
    def test_skipped(self):
        assert add(1, 1) == 3


def test_plain():
    assert add(2, 2) == 4
"""


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_unittest_cases_autouse_fixtures_get_the_runners_fixtures(engine: Engine, tmp_path: Path,
                                                                    isolation: str) -> None:
    """An autouse fixture that asks for `tmp_path`, `monkeypatch` and `capsys`, and a class's
    own autouse fixture asking for `tmp_path`, around a TestCase's method; a skipped TestCase
    runs no fixture. pytest's verdicts on the same file: pass, skipped, pass."""
    program = "def add(a, b):\n    return a + b\n"
    result = engine.execute(make_request(program, UNITTEST_RUNNER_FIXTURES_SPEC, "add", preload=["pytest"],
                                         isolation=isolation))
    assert [(t.id.rsplit(":", 1)[-1], t.reason or t.status) for t in result.tests] == [
        ("test_in_its_directory", "pass"), ("test_skipped", "skipped"), ("test_plain", "pass")], (
        [t.message[-400:] for t in result.tests])
    (tmp_path / "test_spec.py").write_text(program + UNITTEST_RUNNER_FIXTURES_SPEC)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_spec.py"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "2 passed, 1 skipped" in done.stdout, done.stdout[-1500:]


REQUEST_AND_XFAIL_SPEC = '''
import sys

import pytest


@pytest.fixture
def named(request):
    return (request.fixturename, request.scope)


@pytest.fixture(scope="module")
def wide(request):
    return (request.fixturename, request.scope)


def test_fixturename_and_scope(named, wide, request):
    assert named == ("named", "function") and wide == ("wide", "module")
    assert request.fixturename is None and request.scope == "function"
    assert {"named", "wide", "request"} <= set(request.fixturenames)
    assert add(1, 2) == 3


MARKER = 41


def test_module_and_config(request, pytestconfig):
    assert request.module.MARKER == 41
    assert request.config is pytestconfig and pytestconfig.getoption("verbose") == 0
    assert request.config.getoption("--no-such-option", default="d") == "d"
    with pytest.raises(ValueError):
        request.config.getoption("--no-such-option")
    assert not request.config.pluginmanager.hasplugin("xdist")
    assert add(1, 2) == 3


@pytest.mark.slow
def test_keywords_and_nodeid(request):
    assert "slow" in request.keywords and "test_keywords_and_nodeid" in request.keywords
    assert "nope" not in request.keywords
    assert request.node.nodeid.endswith("::test_keywords_and_nodeid")
    assert request.node.name == "test_keywords_and_nodeid"
    assert add(1, 2) == 3


@pytest.mark.parametrize("x, label", [(1, "one"), pytest.param(2, "two", id="second")])
def test_the_case_names_the_node(request, x, label):
    assert request.node.name == ("test_the_case_names_the_node[1-one]" if x == 1
                                 else "test_the_case_names_the_node[second]")
    assert request.node.callspec.params == {"x": x, "label": label}
    assert request.node.originalname == "test_the_case_names_the_node"
    assert add(x, 1) == x + 1


NAMES = []


@pytest.fixture(params=[1, 1])
def number(request):
    return request.param


@pytest.mark.parametrize("word", ["", "a", "a", "b1", "b1"])
def test_ids_are_pytests(request, word, number):
    NAMES.append(request.node.name)
    assert add(number, 2) == number + 2


def test_every_id_was_pytests():
    assert sorted(NAMES) == sorted(f"test_ids_are_pytests[{number}-{word}]" for number in ("1_0", "1_1")
                                   for word in ("", "a0", "a1", "b1_0", "b1_1"))
    assert add(1, 2) == 3


@pytest.fixture
def known_bug(request):
    request.node.add_marker(pytest.mark.xfail(reason="known"))


def test_an_xfail_a_fixture_adds(known_bug):
    assert add(1, 2) == 4


def test_an_xfail_the_test_applies(request):
    request.applymarker(pytest.mark.xfail(reason="known", strict=True))
    assert add(1, 2) == 3


def test_an_xfail_the_test_calls():
    if add(1, 2) != 4:
        pytest.xfail("not yet")
    assert add(1, 2) == 3


def test_an_xfail_the_test_calls_only_on_a_wrong_answer():
    if add(2, 2) != 4:
        pytest.xfail("wrong")
    assert add(2, 2) == 4


@pytest.fixture
def twice():
    yield 1
    yield 2


def test_a_fixture_that_yields_twice(twice):
    assert add(1, 2) == 3


@pytest.mark.xfail(True)
def test_a_boolean_condition_without_a_reason():
    assert add(1, 2) == 3


def test_tmpdir_factory(tmpdir_factory):
    made = tmpdir_factory.mktemp("data")
    made.join("f.txt").write("x")
    assert made.join("f.txt").read() == "x" and made.check(dir=1)
    assert made.dirpath() == tmpdir_factory.getbasetemp()
    assert add(1, 2) == 3


def test_capsysbinary_and_capsys_disabled(capsysbinary):
    sys.stdout.buffer.write(b"x")
    sys.stdout.flush()
    with capsysbinary.disabled():
        print("let through")
    assert capsysbinary.readouterr().out == b"x"
    assert add(1, 2) == 3
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_request_config_and_the_ways_to_xfail_are_pytests(engine: Engine, tmp_path: Path, isolation: str) -> None:
    """More of `request` (`fixturename`, `scope`, `module`, `config`, `keywords`, `node.nodeid`,
    `node.name` with the case's id, `node.callspec`), `pytestconfig`, `capsysbinary`, `tmpdir_factory`,
    `capsys.disabled()`, an xfail mark added while the test runs, `pytest.xfail()` called by the
    test, and pytest's errors for a fixture that yields twice and a boolean condition without
    a reason: each test's verdict is pytest's on the same file, for a right and a wrong program."""
    for program in (ADD, "def add(a, b):\n    return a - b\n"):
        ours, report = _as_pytest_judges(engine, tmp_path, program, REQUEST_AND_XFAIL_SPEC, isolation, 14)
        # (the file holds passes, failures and xfails either way: the comparison can fail)
        assert len(set(ours.values())) == 2 and "XFAIL" in report


FIXTURE_IDS_SPEC = '''
import pytest

NAMES = []


@pytest.fixture(params=[1, 2, 3], ids=["one", None, "three"])
def listed(request):
    return request.param


@pytest.fixture(params=[10, 20, (1, 2)], ids=lambda value: f"v{value}" if value == 20 else None)
def called(request):
    return request.param


@pytest.fixture(params=[pytest.param(5, id="five"), pytest.param(6, marks=pytest.mark.skip(reason="no")), 7],
                ids=["x", "y", "z"])
def mixed(request):
    return request.param


@pytest.fixture(params=[0, pytest.param(-1, marks=pytest.mark.xfail(reason="negative", strict=True))])
def sign(request):
    return request.param


@pytest.fixture(params=["a", "a", object()], ids=["same", "same", None])
def repeated(request):
    return request.param


class TestInAClass:
    @pytest.fixture(params=[3, 4], ids=["three", "four"])
    def own(self, request):
        return request.param

    def test_own(self, request, own):
        NAMES.append(request.node.name)
        assert add(own, 1) == own + 1


def test_listed(request, listed):
    NAMES.append(request.node.name)
    assert add(listed, 1) == listed + 1


def test_called(request, called):
    NAMES.append(request.node.name)
    assert add(called, called) == called * 2


def test_mixed(request, mixed):
    NAMES.append(request.node.name)
    assert add(mixed, 1) == mixed + 1


def test_sign(sign):
    assert add(sign, 1) > 0


@pytest.mark.parametrize("n", [1, 2], ids=["first", "second"])
def test_repeated(request, n, repeated):
    NAMES.append(request.node.name)
    assert add(n, 1) == n + 1


def test_every_id_was_pytests():
    assert sorted(NAMES) == sorted(
        ["test_own[three]", "test_own[four]", "test_listed[one]", "test_listed[2]", "test_listed[three]",
         "test_called[10]", "test_called[v20]", "test_called[called2]", "test_mixed[five]", "test_mixed[z]",
         *(f"test_repeated[{param}-{case}]" for param in ("same0", "same1", "repeated2")
           for case in ("first", "second"))])
    assert add(1, 2) == 3
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_fixtures_ids_and_its_params_marks_are_pytests(engine: Engine, tmp_path: Path, isolation: str) -> None:
    """A fixture's `ids=` (a list with gaps, a function that may return None) and its params'
    own ids and marks (`pytest.param(..., id=, marks=)`) name the test and apply to it as
    pytest applies them: an xfail param's failure is an xfail, a skipped one is not run, a
    repeated id is numbered. The last test checks the names the others saw against the names
    pytest gives them, and pytest passes it on the same file."""
    report = _right_passes_and_wrong_fails_as_pytest_judges(engine, tmp_path, FIXTURE_IDS_SPEC, isolation, 7)
    assert "XFAIL" in report and "SKIPPED" in report


INDIRECT_SPEC = '''
import pytest


@pytest.fixture
def doubled(request):
    return add(request.param, request.param)


@pytest.mark.parametrize("doubled, expected", [(1, 2), (3, 6)], indirect=["doubled"])
def test_indirect_for_one_name(doubled, expected):
    assert doubled == expected


@pytest.fixture(params=[100])
def base(request):
    return request.param


@pytest.mark.parametrize("base", [1, 2], indirect=True)
def test_indirect_in_place_of_the_fixtures_params(request, base):
    assert request.node.callspec.params["base"] == base
    assert request.node.name == f"test_indirect_in_place_of_the_fixtures_params[{base}]"
    assert add(base, 1) == base + 1


@pytest.fixture
def shifted(request, tmp_path):
    assert tmp_path.is_dir()
    return add(request.param, 1)


@pytest.mark.parametrize("shifted", [pytest.param(0, marks=pytest.mark.xfail(strict=True)), 5], indirect=True)
def test_indirect_to_a_fixture_with_fixtures_of_its_own(shifted):
    assert shifted == 6
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_indirect_parametrization_gives_the_fixtures_their_params(engine: Engine, tmp_path: Path,
                                                                  isolation: str) -> None:
    """`parametrize(..., indirect=True)` and `indirect=[names]`: the case's value reaches the
    fixture of that name as `request.param` (in place of the fixture's own `params`), not the
    test, and the fixture still gets the fixtures it asks for, as pytest runs them: each
    test's verdict is pytest's on the same file, for a right and a wrong program."""
    assert "XFAIL" in _right_passes_and_wrong_fails_as_pytest_judges(engine, tmp_path, INDIRECT_SPEC, isolation, 3)


GENERATE_TESTS_SPEC = '''
import pytest

NAMES = []


def pytest_generate_tests(metafunc):
    if "g" in metafunc.fixturenames:
        metafunc.parametrize("g", [1, pytest.param(2, id="two")], ids=["one", None])
    if "h" in metafunc.fixturenames:
        metafunc.parametrize("h", [5, pytest.param(0, marks=pytest.mark.xfail(strict=True))], indirect=True)
    if metafunc.definition.get_closest_marker("pairs"):
        metafunc.parametrize("a, b", [(1, 2), (3, 4)])


@pytest.fixture(params=["p"])
def fx(request):
    return request.param


@pytest.fixture
def h(request):
    return add(request.param, request.param)


@pytest.mark.parametrize("m", [7])
def test_order(request, g, m, fx):
    NAMES.append(request.node.name)
    assert add(g, m) == g + m


def test_indirect(h):
    assert h == 10


@pytest.mark.pairs
def test_marked(a, b):
    assert add(a, b) == a + b


class TestOwnHook:
    def pytest_generate_tests(self, metafunc):
        metafunc.parametrize("c", [0])

    def test_c(self, request, c, g):
        NAMES.append(request.node.name)
        assert add(c, g) == g


def test_every_name_was_pytests():
    assert sorted(NAMES) == sorted(["test_order[one-p-7]", "test_order[two-p-7]", "test_c[0-one]", "test_c[0-two]"])
    assert add(1, 2) == 3
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_specs_pytest_generate_tests_parametrizes_its_tests(engine: Engine, tmp_path: Path, isolation: str) -> None:
    """The spec's `pytest_generate_tests` (the module's, and a test class's, called first) gets
    a `metafunc` (`fixturenames`, `definition`'s marks) and parametrizes the tests as pytest
    does: a direct and an `indirect` argument, `pytest.param` ids and marks, the cases' ids in
    pytest's order (a class's hook, the module's, the fixtures' params, the marks). Every
    verdict is pytest's on the same file, for a right and a wrong program."""
    assert "XFAIL" in _right_passes_and_wrong_fails_as_pytest_judges(engine, tmp_path, GENERATE_TESTS_SPEC,
                                                                     isolation, 5)


def _right_passes_and_wrong_fails_as_pytest_judges(engine: Engine, directory: Path, spec: str, isolation: str,
                                                   tests: int) -> str:
    """`_as_pytest_judges` for `ADD`, which passes every test of `spec`, and for `WRONG`, which
    fails every one; pytest's report of `ADD`'s run."""
    right, report = _as_pytest_judges(engine, directory, ADD, spec, isolation, tests)
    assert all(right.values())
    wrong, _ = _as_pytest_judges(engine, directory, WRONG, spec, isolation, tests)
    assert not any(wrong.values())
    return report


def _as_pytest_judges(engine: Engine, directory: Path, program: str, spec: str, isolation: str,
                      tests: int) -> tuple[dict[str, bool], str]:
    """Whether knowbench passes each of the `tests` tests of `spec` on `program`, asserted to be
    what real pytest says of them, and pytest's report."""
    pytests, report = _pytests_verdicts(directory, program + spec)
    result = engine.execute(make_request(program, spec, "add", preload=["pytest"], isolation=isolation,
                                         trusted_program=ADD))
    ours = {t.id.rsplit(":", 1)[-1]: t.status == "pass" for t in result.tests}
    assert result.isolation == isolation and len(ours) == tests
    assert ours == pytests, [(t.id, t.status, t.message[-300:]) for t in result.tests]
    return ours, report


def _pytests_verdicts(directory: Path, source: str) -> tuple[dict[str, bool], str]:
    """Whether real pytest passes each test of `source` (by its name, a class's dropped: an
    xfail is a pass, and a case, a set-up or a tear-down failing fails the test, as knowbench
    judges it), and pytest's report."""
    (directory / "test_spec.py").write_text(source)
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_spec.py"],
                          capture_output=True, text=True, timeout=120, cwd=directory)
    verdicts: dict[str, bool] = {}
    for line in done.stdout.splitlines():
        found = re.match(r"(PASSED|XFAIL|XPASS|FAILED|ERROR) (?:at \w+ of )?test_spec\.py::(\S+)", line)
        if found:  # (a strict XPASS is reported FAILED)
            name = found.group(2).split("[")[0].rsplit("::", 1)[-1]
            verdicts[name] = verdicts.get(name, True) and found.group(1) in ("PASSED", "XFAIL", "XPASS")
    return verdicts, done.stdout


SUBTESTS_SPEC = '''
import pytest


def test_every_sub_test(subtests):
    for i in range(3):
        with subtests.test("plus one", i=i):
            assert add(i, 1) == i + 1


def test_a_sub_test_fails_the_test_whose_body_passes(subtests):
    with subtests.test(msg="the sum"):
        assert add(2, 2) == 4
    assert True


def test_a_sub_tests_error_and_exit(subtests):
    with subtests.test():
        if add(1, 1) != 2:
            raise SystemExit(3)
    with subtests.test(kind="error"):
        {2: None}[add(1, 1)]


def test_the_body_after_sub_tests(subtests):
    with subtests.test():
        pass
    assert add(3, 3) == 6


@pytest.mark.xfail(raises=ZeroDivisionError, reason="only that")
def test_an_xfail_mark_that_expects_another_error(subtests):
    with subtests.test():
        assert add(1, 2) == 3


@pytest.mark.xfail(strict=True, reason="known")
def test_a_strict_xfail_mark_expects_the_sub_tests_failure(subtests):
    with subtests.test():
        assert add(1, 2) != 3
    assert add(1, 2) != 3


def test_a_sub_tests_own_xfail(subtests):
    with subtests.test("not yet"):
        pytest.xfail("later")
    assert add(1, 2) == 3


class TestInAClass:
    def test_sub_tests_of_a_method(self, subtests):
        for i in range(2):
            with subtests.test(i=i):
                assert add(i, i) == 2 * i
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_pytests_subtests_fixture_is_pytests(engine: Engine, tmp_path: Path, isolation: str) -> None:
    """pytest's `subtests` (pytest 9's own, pytest-subtests' before it): an exception ends its
    block, not the test (a `SystemExit` too), and a failed sub-test fails a test whose body
    passed; a failure the test's xfail mark expects is the sub-test's expected failure (so a
    strict mark's test passes only if a sub-test fails); a sub-test's own `pytest.xfail()`
    is an xfail. Every verdict is pytest's on the same file, for a right and a wrong program."""
    report = _right_passes_and_wrong_fails_as_pytest_judges(engine, tmp_path, SUBTESTS_SPEC, isolation, 8)
    assert "contains 1 failed subtest" not in report
    wrong, report = _as_pytest_judges(engine, tmp_path, WRONG, SUBTESTS_SPEC, isolation, 8)
    assert "contains 1 failed subtest" in report and not any(wrong.values())
    result = engine.execute(make_request(WRONG, SUBTESTS_SPEC, "add", preload=["pytest"], isolation=isolation,
                                         trusted_program=ADD))
    failed = {t.id.rsplit(":", 1)[-1]: t.message for t in result.tests}
    assert "in sub-test [plus one] (i=0)" in failed["test_every_sub_test"]
    assert "in sub-test [the sum]" in failed["test_a_sub_test_fails_the_test_whose_body_passes"]
    assert "in sub-test (<subtest>)" in failed["test_a_sub_tests_error_and_exit"]


def test_a_skipped_sub_test_is_no_pass(engine: Engine) -> None:
    """Where pytest passes a test around a sub-test that skips, knowbench does not: no skipped
    test passes (as with a unittest `subTest`), so the skip is what the test ends with."""
    spec = ("import pytest\n\n\ndef test_around_a_skip(subtests):\n    with subtests.test('here'):\n"
            "        pytest.skip('not on this platform')\n    assert add(1, 2) == 3\n")
    result = engine.execute(make_request(ADD, spec, "add", preload=["pytest"]))
    assert [(t.status, t.reason) for t in result.tests] == [("error", "skipped")]
    assert "not on this platform" in result.tests[0].message


PHASES_SPEC = '''
import unittest

import pytest


@pytest.fixture
def xfails_as_it_ends():
    yield
    pytest.xfail("tear-down")


def test_a_fixtures_tear_down_calls_xfail(xfails_as_it_ends):
    assert add(1, 2) == 3


def test_a_finalizer_calls_xfail(request):
    request.addfinalizer(lambda: pytest.xfail("finalizer"))
    assert add(1, 2) == 3


@pytest.fixture(scope="module")
def shared():
    yield 1
    pytest.xfail("module tear-down")


def test_before_the_module_ends(shared):
    assert add(1, 2) == 3


class TestTearDownMethod:
    def teardown_method(self, method):
        pytest.xfail("teardown_method")

    def test_in_a_class(self):
        assert add(1, 2) == 3


class TestCases(unittest.TestCase):
    def tearDown(self):
        pytest.xfail("tearDown")

    def test_unittests_tear_down(self):
        self.assertEqual(add(1, 2), 3)

    def test_a_sub_tests_xfail(self):
        with self.subTest(i=1):
            pytest.xfail("sub-test")
        self.assertEqual(add(2, 2), 4)


@pytest.fixture
def marked_then_failing(request):
    request.node.add_marker(pytest.mark.xfail(reason="known"))
    assert add(1, 2) == 3


def test_a_mark_added_in_a_failing_set_up(marked_then_failing):
    pass


@pytest.fixture
def marked_as_it_ends(request):
    yield
    request.node.add_marker(pytest.mark.xfail(reason="late"))
    assert add(1, 2) == 3


def test_a_mark_added_in_the_tear_down(marked_as_it_ends):
    pass


def test_last(shared):
    assert add(2, 2) == 4
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_later_xfail_never_takes_the_place_of_a_failure(engine: Engine, tmp_path: Path, isolation: str) -> None:
    """pytest's phases: the first failure decides a test, so an xfail a tear-down (a fixture's,
    a finalizer, `teardown_method`, `tearDown`, a module fixture's) or a sub-test calls never
    makes a failed call pass; a mark added in a set-up that then fails, or in a tear-down, does
    not excuse that failure. Every verdict is pytest's on the same file."""
    for program in (ADD, "def add(a, b):\n    return a - b\n"):
        ours, _ = _as_pytest_judges(engine, tmp_path, program, PHASES_SPEC, isolation, 9)
        assert set(ours.values()) == {program == ADD}  # (a wrong program fails each: none is excused)


# A test that would pass only as pytest's xfail: what a candidate does to raise it.
XFAIL_FORGERIES = {
    "calls_xfail": "import pytest\ndef add(a, b):\n    pytest.xfail('x')\n",
    "raises_xfailed": "from _pytest.outcomes import XFailed\ndef add(a, b):\n    raise XFailed('x')\n",
    "is_xfail": "import pytest\nadd = type(pytest.xfail).__call__\n",  # (add("a", "b"): xfail's self "a", reason "b")
    "code_named_as_the_specs": ("import pytest\nnames = {'pytest': pytest}\n"
                                "exec(compile('def add(a, b):\\n    pytest.xfail(\"x\")\\n', 'test:t', 'exec'), names)\n"
                                "add = names['add']\n"),
    # the tests' own code that calls xfail, run on globals the candidate made
    "runs_the_tests_code_on_its_globals": (
        "import sys, types, pytest\n"
        "def add(a, b):\n"
        "    spec = vars(sys.modules['knowbench_test'])\n"
        "    fake = {'add': lambda a, b: None, 'pytest': pytest, '__builtins__': __builtins__}\n"
        "    types.FunctionType(spec['test_guarded'].__code__, fake)()\n"),
    # the tests' source, where the call of xfail is looked up, rewritten so that the line of
    # their comparison reads as one
    "rewrites_the_tests_source": (
        "import ast, linecache, pytest\n"
        "class Truth:\n    __bool__ = type(pytest.xfail).__call__\n"
        "class R:\n    def __eq__(self, other):\n        return Truth()\n"
        "def add(a, b):\n"
        "    for name, (size, mtime, lines, full) in list(linecache.cache.items()):\n"
        "        if name.startswith('test:'):\n"
        "            lines = list(lines)\n"
        "            for node in ast.walk(ast.parse(''.join(lines))):\n"
        "                if isinstance(node, ast.Compare) and node.lineno == node.end_lineno:\n"
        "                    width, line = node.end_col_offset - node.col_offset, lines[node.lineno - 1]\n"
        "                    lines[node.lineno - 1] = (line[:node.col_offset] + 'xfail(' + ' ' * (width - 7)\n"
        "                                              + ')' + line[node.end_col_offset:])\n"
        "            linecache.cache[name] = (size, mtime, lines, full)\n"
        "    return R()\n"),
    "xfail_as_a_special_method": ("import pytest\nclass Truth:\n    __bool__ = type(pytest.xfail).__call__\n"
                                  "class R:\n    def __eq__(self, other):\n        return Truth()\n"
                                  "def add(a, b):\n    return R()\n"),
}


@pytest.mark.parametrize("isolation", ["in-process", "split"])
@pytest.mark.parametrize("forgery", sorted(XFAIL_FORGERIES))
def test_only_the_tests_own_call_of_pytest_xfail_makes_an_xfail(engine: Engine, forgery: str,
                                                              isolation: str) -> None:
    tests = ("import pytest\n\ndef test_add():\n    assert add('a', 'b') == 'ab'\n\n"
             "def test_guarded():\n    if add(2, 2) != 4:\n        pytest.xfail('honest')\n    assert False\n")
    result = engine.execute(make_request(XFAIL_FORGERIES[forgery], tests, "add", preload=["pytest"],
                                         isolation=isolation, trusted_program=ADD))
    assert result.isolation == isolation
    verdicts = [(t.status, t.message.startswith("xfailed")) for t in result.tests]
    assert verdicts[0][0] != "pass", result.tests[0].message
    # the test's own call, on what the candidate returned, is an xfail where that call is reached
    assert verdicts[1] in (("pass", True), ("error", False)), result.tests[1].message


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_an_xfail_as_the_spec_loads_is_no_pass(engine: Engine, isolation: str) -> None:
    """pytest reports an xfail at a module's top level as a collection error: no test passes."""
    tests = ("import pytest\n\nif add(1, 2) != 3:\n    pytest.xfail('collection')\n\n\n"
             "def test_one():\n    assert add(2, 2) == 4\n\n\ndef test_two():\n    assert add(3, 3) == 6\n")
    wrong = engine.execute(make_request("def add(a, b):\n    return a - b\n", tests, "add", preload=["pytest"],
                                        isolation=isolation, trusted_program=ADD))
    assert [t.status for t in wrong.tests] == ["error", "error"], [t.message for t in wrong.tests]
    right = engine.execute(make_request(ADD, tests, "add", preload=["pytest"], isolation=isolation,
                                        trusted_program=ADD))
    assert [t.status for t in right.tests] == ["pass", "pass"]


SUB_TESTS = """
import unittest

import pytest


class TestAdd(unittest.TestCase):
    def test_in_sub_tests(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(add(i, 1), i + 1)
"""


PYTEST_SUB_TESTS = """
def test_in_sub_tests(subtests):
    for i in range(2):
        with subtests.test(i=i):
            assert add(i, 1) == i + 1
"""


@pytest.mark.parametrize("isolation", ["in-process", "split"])
@pytest.mark.parametrize("outcome", ["skip", "xfail"])
@pytest.mark.parametrize("tests", [SUB_TESTS, PYTEST_SUB_TESTS], ids=["unittest", "pytest"])
def test_a_sub_tests_skip_or_xfail_is_the_tests_to_make(engine: Engine, outcome: str, isolation: str,
                                                        tests: str) -> None:
    """A sub-test's skip or xfail (unittest's `subTest`, pytest's `subtests`) gives way to a
    later failure (a later sub-test's), and otherwise is judged as any other: the candidate's
    own `pytest.skip()` or `pytest.xfail()` never passes the test."""
    program = f"import pytest\n\n\ndef add(a, b):\n    pytest.{outcome}('not mine')\n"
    result = engine.execute(make_request(program, tests, "add", preload=["pytest"], isolation=isolation,
                                         trusted_program=ADD))
    assert [t.status for t in result.tests] == ["error"], [t.message for t in result.tests]
    program = f"import pytest\n\n\ndef add(a, b):\n    if a == 0:\n        pytest.{outcome}('not mine')\n    return 0\n"
    result = engine.execute(make_request(program, tests, "add", preload=["pytest"], isolation=isolation,
                                         trusted_program=ADD))
    if isolation == "in-process":  # (split: the candidate's skip crosses as an exception, a failure itself)
        assert [(t.status, t.reason) for t in result.tests] == [("fail", "assertion")], \
            [t.message for t in result.tests]
        assert "(i=1)" in result.tests[0].message
    else:
        assert [t.status for t in result.tests] == ["error"], [t.message for t in result.tests]


HELPERS_THE_TESTS_CHANGE = """
import functools
import unittest


class Store:
    def load(self):
        return 2


def total():
    return add(1, 2)


class TestCached(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.connect = lambda self: 42  # a helper method of the test class, replaced for its tests

    def connect(self):
        raise RuntimeError("no database here")

    def test_connects(self):
        assert self.connect() == 42 and add(1, 2) == 3


def test_a_cache_over_a_helper():
    global total
    total = functools.lru_cache(None)(total)
    Store.load = staticmethod(functools.lru_cache(None)(lambda: 2))
    assert total() == 3 and Store.load() == 2


def retry(times):  # a decorator that keeps a count of its own
    def decorate(test):
        attempts = 0

        @functools.wraps(test)
        def run(*args, **kwargs):
            nonlocal attempts
            attempts += 1
            return test(*args, **kwargs)
        return run
    return decorate


class TestFiles(unittest.TestCase):
    test_dir = None  # data named like a test

    @classmethod
    def setUpClass(cls):
        cls.test_dir = "made"

    @retry(3)
    def test_with_a_directory(self):
        assert self.test_dir == "made" and add(1, 2) == 3

    @classmethod
    def tearDownClass(cls):
        del cls.test_dir


@retry(2)
def test_later():
    assert add(2, 2) == 4
"""


def test_the_tests_may_change_their_own_helpers(engine: Engine) -> None:
    """In-process, the spec's module is watched only for what the runner runs: its helpers, a
    test class's helper methods and a helper class are the tests' to change, as pytest lets them."""
    result = engine.execute(make_request(ADD, HELPERS_THE_TESTS_CHANGE, "add"))
    assert [t.status for t in result.tests] == ["pass"] * 4, [t.message for t in result.tests]
