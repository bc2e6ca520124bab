"""Rewriting repository tests into specs: rewiring to the candidate, and the pytest harness
(parametrize, fixtures, marks) running for real in the knowbench runner."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from knowbench.benchmark.schema import TestSpec
from knowbench.builders.context import cut_target
from knowbench.builders.discover import discover_units
from knowbench.builders.harness import SpecBuilder
from knowbench.builders.repository import Repository, Resolver, Symbol
from knowbench.execution.engine import ExecutionRequest, SubprocessEngine
from knowbench.program import assemble
from knowbench.records import Limits

LIBRARY = '''
def double(x):
    """Twice `x` (for sequences: repeated)."""
    result = x + x
    return result
'''

TESTS = '''
import pytest
import lib
from lib import double as twice

LOG = []


@pytest.fixture(params=[1, 2])
def number(request):
    return request.param


@pytest.fixture
def log():
    entries = []
    yield entries
    LOG.append(("teardown", list(entries)))


@pytest.fixture(autouse=True)
def record():
    LOG.append("setup")
    yield


@pytest.mark.parametrize("value", [(1, 2)])
def test_single_name_keeps_tuples(value):
    assert twice(value) == (1, 2, 1, 2)


@pytest.mark.parametrize(("a", "b"), [(1, 2), (3, 6), pytest.param(4, 0, marks=pytest.mark.xfail)])
def test_tuple_names(a, b):
    assert lib.double(a) == b


def test_parametrized_fixture(number):
    assert twice(number) == number * 2


def test_yield_fixture_tears_down(log):
    log.append(twice(1))
    assert log == [2]


def test_autouse_fixture_ran():
    assert LOG[-1] == "setup" and twice(2) == 4


def test_local_name_hides_the_target():
    double = 5
    assert lib.double(double) == 10


@pytest.mark.skip(reason="never")
def test_skipped():
    assert twice(1) == 2


def test_plugin_fixture(benchmark):
    assert twice(1) == 2


@pytest.fixture(scope="class")
def class_value(request):
    request.cls.value = twice(5)


@pytest.mark.usefixtures("class_value")
class TestWithRequestCls:
    def test_value(self):
        assert self.value == 10 and twice(1) == 2
'''


@pytest.fixture(scope="module")
def spec_and_program(tmp_path_factory: pytest.TempPathFactory) -> tuple[TestSpec, str]:
    root = tmp_path_factory.mktemp("repo")
    (root / "lib.py").write_text(textwrap.dedent(LIBRARY))
    (root / "tests").mkdir()
    (root / "tests" / "test_lib.py").write_text(textwrap.dedent(TESTS))
    repository = Repository(root)
    resolver = Resolver(repository)
    units = [u for u in discover_units(repository, resolver) if Symbol("lib", "double", "function") in u.targets]
    target = cut_target(repository.module("lib"), Symbol("lib", "double", "function"))
    built = SpecBuilder(repository, resolver, target).build(units[0].module, units)
    program = assemble(target.context, target.prompt_code, target.entry_point, target.reference).program
    assert program is not None
    return TestSpec(name=built.name, code=built.code), program


def test_imports_of_the_target_are_removed_and_aliases_rebound(spec_and_program: tuple[TestSpec, str]) -> None:
    code = spec_and_program[0].code
    assert "from lib import" not in code
    assert "twice = double" in code
    assert "lib.double" not in code  # rewired to the candidate
    assert "_kb_double = double" in code  # where a local `double` hides it


COUNTED = """
def counted(f):
    calls = 0

    def wrapper(x):
        nonlocal calls
        calls += 1
        return f(x)
    return wrapper


@counted
"""


@pytest.mark.parametrize("counted", [False, True])
def test_harness_runs_pytest_features_in_the_real_runner(spec_and_program: tuple[TestSpec, str],
                                                         engine: SubprocessEngine, counted: bool) -> None:
    """Also for a candidate whose target keeps state of its own (a counting decorator): the
    spec binds it to a name of its own (`_kb_double`), and it is the program's, not the tests'
    (the runner watches the tests' definitions in-process, never the program's)."""
    spec, program = spec_and_program
    if counted:
        assert program.startswith("def double(")
        program = COUNTED + program
    execution = engine.execute(ExecutionRequest(program=program, tests=[spec], entry_point="double",
                                                limits=Limits(wall_s=30), preload=["pytest"]))
    status = {outcome.id.rsplit("::", 1)[-1]: outcome for outcome in execution.tests}
    for name in ("test_single_name_keeps_tuples", "test_tuple_names", "test_parametrized_fixture",
                 "test_yield_fixture_tears_down", "test_autouse_fixture_ran", "test_local_name_hides_the_target",
                 "test_value"):
        assert status[name].status == "pass", status[name].message
        assert status[name].called is True
        assert status[name].reason is None
    assert (status["test_skipped"].status, status["test_skipped"].reason) == ("error", "skipped")
    # The harness raises the runner's own exception, so the reason (not the wording) says it.
    assert status["test_plugin_fixture"].reason == "unsupported-fixture"
    assert "fixture 'benchmark' is not available" in status["test_plugin_fixture"].message


def test_a_broken_candidate_fails_the_wrapped_tests(spec_and_program: tuple[TestSpec, str],
                                                    engine: SubprocessEngine, tmp_path: Path) -> None:
    spec, program = spec_and_program
    broken = program.replace("result = x + x", "result = x")
    execution = engine.execute(ExecutionRequest(program=broken, tests=[spec], entry_point="double",
                                                limits=Limits(wall_s=30), preload=["pytest"]))
    status = {outcome.id.rsplit("::", 1)[-1]: outcome.status for outcome in execution.tests}
    assert status["test_tuple_names"] == "fail"
    assert status["test_parametrized_fixture"] == "fail"
    assert status["test_value"] == "fail"


def _mine(root: Path, module: str = "lib", function: str = "double") -> tuple[list, object, object]:
    """The test units of the repository at `root`, the cut target (`lib.double`), and the spec
    mining builds from the first unit's module."""
    repository = Repository(root)
    resolver = Resolver(repository)
    units = discover_units(repository, resolver)
    target = cut_target(repository.module(module), Symbol(module, function, "function"))
    return units, target, SpecBuilder(repository, resolver, target).build(units[0].module, units)


def _run_mined(engine: SubprocessEngine, target: object, built: object, wrong: bool = False) -> object:
    """The mined spec run against the target's reference (`wrong`: one that triples)."""
    program = assemble(target.context, target.prompt_code, target.entry_point, target.reference).program
    if wrong:
        program = program.replace("y = x * 2", "y = x * 3")
    return engine.execute(ExecutionRequest(program=program, tests=[TestSpec(name=built.name, code=built.code)],
                                           entry_point="double", limits=Limits(wall_s=30)))


def _mined_where_pytest_says(root: Path, tests: dict[str, str], summary: str,
                             pytest_args: tuple[str, ...] = ()) -> tuple[object, object]:
    """`tests` (path under tests/: source) written beside a `lib.double`, real pytest's
    summary of them (given `pytest_args`) checked to hold `summary`, and the target and the
    spec mining builds."""
    (root / "lib.py").write_text("def double(x):\n    '''Twice.'''\n    y = x * 2\n    return y\n")
    (root / "tests").mkdir()
    for name, source in tests.items():
        (root / "tests" / name).write_text(source)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args, "tests"],
                          capture_output=True, text=True, timeout=120, cwd=root)
    assert summary in done.stdout, done.stdout[-1500:]
    _, target, built = _mine(root)
    return target, built


IDS_TESTS = """
import pytest
from lib import double


@pytest.fixture(params=[1, 2, pytest.param(0, marks=pytest.mark.xfail(strict=True))], ids=["one", None, "zero"])
def number(request):
    return request.param


def test_named(request, number):
    assert request.node.name == {1: "test_named[one]", 2: "test_named[2]", 0: "test_named[zero]"}[number]
    assert double(number) == number * 2 and number != 0


@pytest.fixture(params=[5], scope="module", ids=lambda value: f"five{value}")
def wide(request):
    return request.param


def test_wide(request, wide):
    assert request.node.name == "test_wide[five5]" and double(wide) == 10


class TestOwn:
    @pytest.fixture(params=[3], ids=lambda value: f"v{value}")
    def own(self, request):
        return request.param

    def test_own(self, request, own):
        assert request.node.name == "test_own[v3]" and double(own) == 6
"""


def test_mined_fixtures_keep_their_ids_and_their_params_marks(tmp_path: Path, engine: SubprocessEngine) -> None:
    """A fixture's `ids=` (module-level, with a scope and without, and a class's own) and its
    params' marks reach the mined spec: each test checks the name pytest gives it, and the
    strict xfail param fails as pytest expects it to. Real pytest passes the same tests."""
    target, built = _mined_where_pytest_says(tmp_path, {"test_lib.py": IDS_TESTS}, "4 passed, 1 xfailed")
    execution = _run_mined(engine, target, built)
    assert {t.id.rsplit("::", 1)[-1]: t.status for t in execution.tests} == {
        "test_named": "pass", "test_wide": "pass", "test_own": "pass"}, [t.message[-400:] for t in execution.tests]


OPTIONS_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="run the slow tests")
    group = parser.getgroup("lib")
    group.addoption("--precision", "-P", dest="digits", default=3, type=int)
    parser.addoption("--backend-name", default="numpy")
    parser.addoption("--computed", default=str(1))
"""

OPTIONS_TESTS = """
import pytest
from lib import double


@pytest.fixture
def settings(request):
    config = request.config
    return (config.getoption("--runslow"), config.getoption("digits"), config.getoption("-P"),
            config.getoption("--precision"), config.getoption("backend_name"), config.getoption("--backend-name"))


def test_options(settings, pytestconfig):
    assert settings == (False, 3, 3, 3, "numpy", "numpy")
    assert pytestconfig.option.runslow is False and pytestconfig.option.digits == 3
    assert double(settings[1]) == 6
"""


def test_mined_specs_know_the_options_their_conftests_add(tmp_path: Path, engine: SubprocessEngine) -> None:
    """`request.config.getoption` and `config.option` give what a conftest's `pytest_addoption`
    adds as a run without those options has them (by option name, long or short, and by dest;
    store_true's False, a literal default), as real pytest does on the same files. An option
    whose default is no literal (`str(1)`) is left out of the spec, not guessed."""
    target, built = _mined_where_pytest_says(
        tmp_path, {"conftest.py": OPTIONS_CONFTEST, "test_lib.py": OPTIONS_TESTS}, "1 passed")
    assert "'computed'" not in built.code
    execution = _run_mined(engine, target, built)
    assert [(t.id.rsplit("::", 1)[-1], t.status) for t in execution.tests] == [("test_options", "pass")], (
        [t.message[-600:] for t in execution.tests])


GENERATED_TESTS = """
import pytest
from lib import double

CASES = [1, 2, 3]


def pytest_generate_tests(metafunc):
    if "n" in metafunc.fixturenames:
        metafunc.parametrize("n", CASES, ids=[f"case{n}" for n in CASES])


def test_generated(request, n):
    assert request.node.name == f"test_generated[case{n}]"
    assert double(n) == n * 2
"""


def test_mined_specs_keep_their_modules_pytest_generate_tests(tmp_path: Path, engine: SubprocessEngine) -> None:
    """A module's `pytest_generate_tests` (and what it reads) travels with the mined spec and
    parametrizes its tests as pytest does; a wrong program fails them."""
    target, built = _mined_where_pytest_says(tmp_path, {"test_lib.py": GENERATED_TESTS}, "3 passed")
    execution = _run_mined(engine, target, built)
    assert [(t.id.rsplit("::", 1)[-1], t.status) for t in execution.tests] == [("test_generated", "pass")], (
        [t.message[-600:] for t in execution.tests])
    assert [t.status for t in _run_mined(engine, target, built, wrong=True).tests] == ["fail"]


CONFTEST_HOOK = """
WIDTHS = [1, 2]


def pytest_generate_tests(metafunc):
    if "width" in metafunc.fixturenames:
        metafunc.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
"""

BOTH_HOOKS_TESTS = """
from lib import double


def pytest_generate_tests(metafunc):
    if "k" in metafunc.fixturenames:
        metafunc.parametrize("k", [3])


def test_both(request, k, width):
    assert request.node.name == f"test_both[{k}-w{width}]"
    assert double(k * width) == 2 * k * width
"""


def test_mined_specs_keep_their_conftests_pytest_generate_tests(tmp_path: Path, engine: SubprocessEngine) -> None:
    """A conftest's `pytest_generate_tests` (and what it reads) travels with the mined spec
    under a name of its own, beside the module's, and both parametrize the test in pytest's
    order (the module's hook first)."""
    target, built = _mined_where_pytest_says(
        tmp_path, {"conftest.py": CONFTEST_HOOK, "test_lib.py": BOTH_HOOKS_TESTS}, "2 passed")
    execution = _run_mined(engine, target, built)
    assert [(t.id.rsplit("::", 1)[-1], t.status) for t in execution.tests] == [("test_both", "pass")], (
        [t.message[-600:] for t in execution.tests])


RUNSLOW_CONFTEST = """
import pytest


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: mark test as slow to run")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="need --runslow option to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
    items[:] = [item for item in items if "unwanted" not in item.nodeid]
"""

RUNSLOW_TESTS = """
import unittest

import pytest
from lib import double


def test_fast():
    assert double(2) == 4


@pytest.mark.slow
def test_slow():
    assert double(3) == 5


@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_cases(n):
    assert double(n) == 2


def test_unwanted():
    assert double(1) == 3


class TestCases(unittest.TestCase):
    @pytest.mark.slow
    def test_slow_method(self):
        self.assertEqual(double(1), 3)

    def test_method(self):
        self.assertEqual(double(1), 2)
"""


def test_mined_specs_run_their_conftests_collection_modifyitems(tmp_path: Path, engine: SubprocessEngine) -> None:
    """The conftest pattern pytest documents for slow tests (`pytest_addoption`'s `--runslow`,
    `pytest_collection_modifyitems` marking the `slow` tests skip unless it is given) and a
    hook that deselects tests: mined, the slow tests and cases are skipped and the deselected
    one does not run, as under pytest, where a run of each would fail."""
    target, built = _mined_where_pytest_says(
        tmp_path, {"conftest.py": RUNSLOW_CONFTEST, "test_lib.py": RUNSLOW_TESTS}, "3 passed, 3 skipped in")
    execution = _run_mined(engine, target, built)
    assert {t.id.rsplit("::", 1)[-1]: t.reason or t.status for t in execution.tests} == {
        "test_fast": "pass", "test_slow": "skipped", "test_cases": "pass", "test_unwanted": "skipped",
        "test_slow_method": "skipped", "test_method": "pass"}, [t.message[-600:] for t in execution.tests]


FLAKY_CONFTEST = """
import pytest

STATE = {}


def pytest_addoption(parser):
    parser.addoption("--run-flaky", action="store_true", default=False, help="run flaky tests")


def pytest_configure(config):
    config.addinivalue_line("markers", "flaky: flaky tests")
    STATE["configured"] = config.getoption("--run-flaky") is False


def pytest_runtest_setup(item):
    if "flaky" in item.keywords and not item.config.getoption("--run-flaky"):
        pytest.skip("set --run-flaky option to run flaky tests")


@pytest.fixture
def configured():
    return STATE.get("configured")
"""

FLAKY_TESTS = """
import unittest

import pytest
from lib import double


def test_configured(configured):
    assert configured is True and double(2) == 4


@pytest.mark.flaky
def test_flaky():
    assert double(3) == 7


class TestMethods:
    @pytest.mark.flaky
    def test_flaky_method(self):
        assert double(1) == 5

    def test_method(self):
        assert double(1) == 2


class TestCaseStyle(unittest.TestCase):
    @pytest.mark.flaky
    def test_flaky_case(self):
        self.assertEqual(double(2), 5)

    def test_case(self):
        self.assertEqual(double(2), 4)
"""


def test_mined_specs_run_their_conftests_configure_and_runtest_setup(tmp_path: Path,
                                                                      engine: SubprocessEngine) -> None:
    """A conftest's `pytest_configure` (run once, with the config) and `pytest_runtest_setup`
    (given each test before its fixtures: xarray's conftest skips its `flaky` and `network`
    tests there unless an option is given) travel with the mined spec: the test that needs the
    configuration passes and the flaky tests (functions, methods, a TestCase's) are skipped, as
    under pytest, where a run of them would fail."""
    target, built = _mined_where_pytest_says(
        tmp_path, {"conftest.py": FLAKY_CONFTEST, "test_lib.py": FLAKY_TESTS}, "3 passed, 3 skipped in")
    execution = _run_mined(engine, target, built)
    assert {t.id.rsplit("::", 1)[-1]: t.reason or t.status for t in execution.tests} == {
        "test_configured": "pass", "test_flaky": "skipped", "test_flaky_method": "skipped",
        "test_method": "pass", "test_flaky_case": "skipped", "test_case": "pass"}, [t.message[-600:] for t in execution.tests]
    assert "--run-flaky option" in next(t.message for t in execution.tests if t.id.endswith("test_flaky"))
    assert {t.id.rsplit("::", 1)[-1]: t.status for t in _run_mined(engine, target, built, wrong=True).tests
            if t.reason != "skipped"} == {"test_configured": "fail", "test_method": "fail", "test_case": "fail"}


NAMED_TESTCASE_HELPER = """
class QuantityTestCase:
    kwargs = {}

    @classmethod
    def setup_class(cls):
        cls.factor = cls.kwargs.get("factor", 1)
"""

NAMED_TESTCASE_TESTS = """
import pytest
from helpers import QuantityTestCase
from lib import double


@pytest.fixture
def registry():
    return {"two": 2}


class TestDoubles(QuantityTestCase):
    kwargs = dict(factor=2)

    def test_with_a_fixture(self, registry):
        assert double(registry["two"]) == 4 == self.factor * 2

    @pytest.mark.parametrize("value", [1, 3])
    def test_cases(self, value):
        assert double(value) == self.factor * value

    def test_plain(self):
        assert double(5) == 10
"""


def test_a_class_whose_repository_base_is_merely_named_testcase_is_pytests(tmp_path: Path,
                                                                            engine: SubprocessEngine) -> None:
    """A test class on a repository base named `*TestCase` that is no `unittest.TestCase`
    (Pint's `QuantityTestCase`: a plain class with `setup_class`) is a pytest-style class, as
    pytest collects it: its methods get their fixtures and parametrize cases, where mining
    took it for a TestCase by the name and its runs failed as `unsupported-fixture`."""
    target, built = _mined_where_pytest_says(
        tmp_path, {"helpers.py": NAMED_TESTCASE_HELPER, "test_lib.py": NAMED_TESTCASE_TESTS}, "4 passed in")
    execution = _run_mined(engine, target, built)
    assert {t.id.rsplit("::", 1)[-1]: t.status for t in execution.tests} == {
        "test_with_a_fixture": "pass", "test_cases": "pass", "test_plain": "pass"}, (
        [t.message[-600:] for t in execution.tests])
    assert [t.status for t in _run_mined(engine, target, built, wrong=True).tests] == ["fail"] * 3


SUBTESTS_TESTS = """
import pytest
from lib import double


@pytest.mark.parametrize("factor", [1, 2])
def test_each_value(subtests, factor):
    for value in (0, 3, -4):
        with subtests.test(str(value), factor=factor):
            assert double(value * factor) == 2 * value * factor


class TestDouble:
    def test_in_a_method(self, subtests):
        with subtests.test(msg="one"):
            assert double(1) == 2
        assert double(0) == 0
"""


def test_mined_specs_serve_pytests_subtests(tmp_path: Path, engine: SubprocessEngine) -> None:
    """Tests that use pytest's `subtests` fixture (pytest 9's own, the pytest-subtests plugin's
    before it), as Pint's do, are mined and pass on the reference, as under pytest; a wrong
    program fails them, though every test's own body passes."""
    target, built = _mined_where_pytest_says(tmp_path, {"test_lib.py": SUBTESTS_TESTS}, "3 passed, 7 subtests passed in")
    assert "def _kb_subtests(" in built.code
    execution = _run_mined(engine, target, built)
    assert [t.status for t in execution.tests] == ["pass", "pass"], [t.message[-600:] for t in execution.tests]
    wrong = _run_mined(engine, target, built, wrong=True)
    assert [(t.status, "in sub-test" in t.message) for t in wrong.tests] == [("fail", True), ("fail", True)]


def test_a_testcase_through_a_helper_base_class_is_found_by_the_runner(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text("def double(x):\n    '''Twice.'''\n    y = x * 2\n    return y\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "base.py").write_text(
        "import unittest\n\n\nclass BaseTest(unittest.TestCase):\n    def two(self):\n        return 2\n")
    (tmp_path / "tests" / "test_lib.py").write_text(
        "from base import BaseTest\nfrom lib import double\n\n\nclass DoubleTest(BaseTest):\n"
        "    def test_double(self):\n        self.assertEqual(double(self.two()), 4)\n")
    _, _, built = _mine(tmp_path)
    assert "class BaseTest(unittest.TestCase):" in built.code  # copied from the helper module
    items = TestSpec(name=built.name, code=built.code).items()
    assert [(item.kind, item.cls, item.function) for item in items] == [("unittest", "DoubleTest", "test_double")]


MUTATING_TESTS = '''
import unittest
from lib import double


class Helper:
    pass


Helper.factor = 2
SCALE = Helper.factor * 3


def make():
    return 1


make.extra = 3
REGISTRY = {}
REGISTRY["a"] = 5
setattr(Helper, "other", 7)
UNUSED = {}
UNUSED["x"] = undefined_name


class Base(unittest.TestCase):
    pass


Base.value = 4


class DoubleTest(Base):
    def test_class_attribute_set_after_the_class(self):
        self.assertEqual(double(Helper.factor), 4)

    def test_function_attribute(self):
        self.assertEqual(double(make.extra), 6)

    def test_item_set_after_the_dict(self):
        self.assertEqual(double(REGISTRY["a"]), 10)

    def test_setattr(self):
        self.assertEqual(double(Helper.other), 14)

    def test_attribute_of_the_base_class(self):
        self.assertEqual(double(self.value), 8)

    def test_constant_using_a_carried_attribute(self):
        self.assertEqual(double(SCALE), 12)


if __name__ == "__main__":
    unittest.main()
'''


def test_module_statements_the_tests_depend_on_are_carried_in_order(tmp_path: Path,
                                                                    engine: SubprocessEngine) -> None:
    (tmp_path / "lib.py").write_text(textwrap.dedent(LIBRARY))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lib.py").write_text(MUTATING_TESTS)
    _, target, built = _mine(tmp_path)
    code = built.code
    assert code.index("class Helper") < code.index("Helper.factor = 2") < code.index("SCALE =")
    assert "make.extra = 3" in code and "REGISTRY['a'] = 5" in code and "Base.value = 4" in code
    assert "setattr(Helper, 'other', 7)" in code
    assert "UNUSED" not in code and "unittest.main()" not in code  # not needed: left out
    execution = _run_mined(engine, target, built)
    assert len(execution.tests) == 6
    for outcome in execution.tests:
        assert (outcome.status, outcome.called) == ("pass", True), outcome.message


def test_tests_inherited_from_a_mixin_in_another_test_module_are_units_and_run(
        tmp_path: Path, engine: SubprocessEngine) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text(textwrap.dedent(LIBRARY))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text(
        "import lib\n\nFACTOR = 2\n\n\nclass DoubleMixin:\n    def test_double(self):\n"
        "        self.assertEqual(self.function(3), 3 * FACTOR)\n\n"
        "    def test_module_function(self):\n        self.assertEqual(lib.double(1), 2)\n")
    (tmp_path / "tests" / "test_lib.py").write_text(
        "import unittest\nfrom lib import double\n\nfrom . import DoubleMixin\n\n\n"
        "class DoubleTest(unittest.TestCase, DoubleMixin):\n    function = staticmethod(double)\n\n"
        "    def test_own(self):\n        self.assertEqual(double(0), 0)\n")
    units, target, built = _mine(tmp_path)
    assert sorted(unit.id for unit in units) == ["tests/test_lib.py::DoubleTest::test_double",
                                                 "tests/test_lib.py::DoubleTest::test_module_function",
                                                 "tests/test_lib.py::DoubleTest::test_own"]
    symbol = Symbol("lib", "double", "function")
    assert all(symbol in unit.targets for unit in units if unit.function != "test_double")
    execution = _run_mined(engine, target, built)
    outcomes = {outcome.id.rsplit("::", 1)[-1]: outcome for outcome in execution.tests}
    assert set(outcomes) == {"test_double", "test_module_function", "test_own"}, built.code
    for outcome in outcomes.values():
        assert (outcome.status, outcome.called) == ("pass", True), outcome.message + built.code


def test_mined_xunit_hooks_and_a_name_defined_twice_run_as_pytest_runs_them(
        tmp_path: Path, engine: SubprocessEngine) -> None:
    """The module's hooks travel with the spec (no test names them), each hook gets its
    argument only when it takes one, and a test defined twice is one unit: the last."""
    (tmp_path / "lib.py").write_text("def double(x):\n    '''Twice.'''\n    y = x * 2\n    return y\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lib.py").write_text(
        "import pytest\nfrom lib import double\n\nSTATE = {}\n\n\n"
        "def setup_module(module):\n    module.STATE['module'] = True\n\n\n"
        "def setup_function():\n    STATE['function'] = True\n\n\n"
        "def test_twice():\n    assert double(1) == 3\n\n\n"
        "def test_twice():\n    assert double(1) == 2 and STATE == {'module': True, 'function': True}\n\n\n"
        "class TestA:\n    def setup_class(self):\n        self.base = 1\n\n"
        "    def setup_method(self):\n        self.offset = 2\n\n"
        "    @pytest.mark.parametrize('b', [2])\n    def test_one(self, b):\n"
        "        assert double(self.base) == b and self.offset == 2\n")
    units, target, built = _mine(tmp_path)
    assert sorted(unit.id for unit in units) == ["tests/test_lib.py::TestA::test_one", "tests/test_lib.py::test_twice"]
    execution = _run_mined(engine, target, built)
    assert {outcome.id: outcome.status for outcome in execution.tests} == {
        "tests/test_lib.py::test_twice": "pass", "tests/test_lib.py::TestA::test_one": "pass"}, built.code


def test_a_fixture_the_modules_pytestmark_uses_is_carried_with_it(tmp_path: Path, engine: SubprocessEngine) -> None:
    """`pytestmark = pytest.mark.usefixtures("name")` at the module's top: the spec keeps the mark,
    so it must carry the fixture (and what that fixture uses), as it does for a test's own mark."""
    (tmp_path / "lib.py").write_text(textwrap.dedent(LIBRARY))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lib.py").write_text(
        "import pytest\nfrom lib import double\n\nSEEN = []\n\n\n"
        "@pytest.fixture\ndef base():\n    return 21\n\n\n"
        "@pytest.fixture\ndef seen(base):\n    SEEN.append(base)\n    yield\n    SEEN.clear()\n\n\n"
        "pytestmark = [pytest.mark.usefixtures('seen'), pytest.mark.filterwarnings('ignore')]\n\n\n"
        "def test_double():\n    assert double(SEEN[0]) == 42\n\n\n"
        "class TestDouble:\n    def test_in_a_class(self):\n        assert double(SEEN[-1]) == 42\n")
    _, target, built = _mine(tmp_path)
    assert "_kb_FIXTURES['seen']" in built.code and "_kb_FIXTURES['base']" in built.code, built.code
    execution = _run_mined(engine, target, built)
    assert [(outcome.status, outcome.called) for outcome in execution.tests] == [("pass", True)] * 2, (
        [outcome.message for outcome in execution.tests], built.code)


def _with_helpers(root: Path, common: str, tests: str) -> None:
    """A repository of `lib` and a `tests` package with a helper module `common`."""
    (root / "lib.py").write_text(textwrap.dedent(LIBRARY))
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "common.py").write_text(common)
    (root / "tests" / "test_lib.py").write_text(tests)


def test_module_marks_made_in_any_shape_carry_what_they_name(tmp_path: Path, engine: SubprocessEngine) -> None:
    """A `pytestmark` built under an `if` and appended to, a helper import of two names, a
    `skipif` whose string reads a module constant: the spec carries the fixture, both helpers
    and the constant; `recwarn` is served: the verdicts are pytest's (pass, pass, skipped, pass)."""
    _with_helpers(tmp_path, "def one():\n    return 1\n\n\ndef two():\n    return 2\n",
        "import sys\n\nimport pytest\nfrom lib import double\nfrom tests.common import one, two\n\n"
        "STATE = {}\nSKIP_ME = True\n\n\n"
        "@pytest.fixture\ndef setstate():\n    STATE['x'] = 21\n    yield\n    STATE.clear()\n\n\n"
        "pytestmark = []\nif sys.version_info >= (3,):\n    pytestmark.append(pytest.mark.usefixtures('setstate'))\n\n\n"
        "def test_double():\n    assert double(STATE['x']) == 42\n\n\n"
        "def test_helpers():\n    assert double(one()) + two() == 4\n\n\n"
        "@pytest.mark.skipif('SKIP_ME', reason='x')\ndef test_skipped():\n    assert double(1) == 3\n\n\n"
        "def test_recorded(recwarn):\n    import warnings\n    warnings.warn('seen', DeprecationWarning)\n"
        "    assert len(recwarn) == 1 and double(1) == 2\n")
    _, target, built = _mine(tmp_path)
    execution = _run_mined(engine, target, built)
    assert [(outcome.id.rsplit("::", 1)[-1], outcome.status, outcome.reason) for outcome in execution.tests] == [
        ("test_double", "pass", None), ("test_helpers", "pass", None), ("test_skipped", "error", "skipped"),
        ("test_recorded", "pass", None)], (
        [outcome.message for outcome in execution.tests], built.code[-1500:])


def test_a_mined_classes_own_marks_and_a_helpers_warning_category_hold(tmp_path: Path,
                                                                       engine: SubprocessEngine) -> None:
    """A class's `pytestmark` in its body has it wrapped (its `filterwarnings` hold, around its
    `setup_method` too), and a `filterwarnings` category defined in a test helper, which the spec
    carries, is found there: pytest's verdicts (pass, error at set-up, pass)."""
    _with_helpers(tmp_path, "class HelperWarning(UserWarning):\n    pass\n",
        "import warnings\n\nimport pytest\nfrom lib import double\nfrom tests.common import HelperWarning\n\n\n"
        "class TestBodyMark:\n    pytestmark = pytest.mark.filterwarnings('error')\n\n"
        "    def test_made_an_error(self):\n        with pytest.raises(UserWarning):\n"
        "            warnings.warn('w', UserWarning)\n        assert double(1) == 2\n\n\n"
        "class TestSetUpWarns:\n    pytestmark = pytest.mark.filterwarnings('error')\n\n"
        "    def setup_method(self):\n        warnings.warn('set-up', UserWarning)\n\n"
        "    def test_never_runs(self):\n        assert double(1) == 2\n\n\n"
        "@pytest.mark.filterwarnings('ignore::tests.common.HelperWarning')\ndef test_a_helpers_category():\n"
        "    warnings.warn('h', HelperWarning)\n    assert double(1) == 2\n")
    _, target, built = _mine(tmp_path)
    execution = _run_mined(engine, target, built)
    assert [(outcome.id.rsplit("::", 1)[-1], outcome.status) for outcome in execution.tests] == [
        ("test_made_an_error", "pass"), ("test_never_runs", "error"), ("test_a_helpers_category", "pass")], (
        [outcome.message for outcome in execution.tests])
    assert "UserWarning: set-up" in execution.tests[1].message


def test_a_helper_imported_as_a_module_is_a_module_of_its_definitions(tmp_path: Path,
                                                                      engine: SubprocessEngine) -> None:
    """`import tests.common as cm`, `import tests.common`, `from tests import common`, `from .
    import common as c2`: the helper is not installed, so each name is bound to a module object
    of the helper's copied definitions, which import the target from the library (rewired to the
    candidate) and another helper as a module. pytest passes all four; so must the spec, on the
    target, and fail them on a wrong one."""
    _with_helpers(tmp_path, "import tests.numbers as numbers\nfrom lib import double\n\n\n"
                  "def one():\n    return numbers.ONE\n\n\ndef two():\n    return double(one())\n\n\nK = 3\n",
                  "import tests.common as cm\nimport tests.common\nfrom tests import common\n"
                  "from . import common as c2\nfrom lib import double\n\n\n"
                  "def test_alias():\n    assert double(cm.one()) == 2\n\n\n"
                  "def test_dotted():\n    assert double(tests.common.two()) == 4\n\n\n"
                  "def test_from_the_package():\n    assert double(common.K) + c2.one() == 7\n\n\n"
                  "def test_the_module_itself():\n    assert getattr(cm, 'two')() == 2 and cm.__name__ == 'tests.common'\n")
    (tmp_path / "tests" / "numbers.py").write_text("ONE = 1\n")
    _, target, built = _mine(tmp_path)
    assert "import tests" not in built.code and "from tests" not in built.code, built.code
    execution = _run_mined(engine, target, built)
    assert [(outcome.status, outcome.called) for outcome in execution.tests] == [("pass", True)] * 4, (
        [outcome.message for outcome in execution.tests], built.code)
    wrong = engine.execute(ExecutionRequest(
        program="def double(x):\n    return x * 3\n", tests=[TestSpec(name=built.name, code=built.code)],
        entry_point="double", limits=Limits(wall_s=30)))
    assert [outcome.status for outcome in wrong.tests] == ["fail"] * 4, [outcome.message for outcome in wrong.tests]


def test_a_mined_testcases_marks_and_the_modules_fixtures_are_pytests(tmp_path: Path,
                                                                       engine: SubprocessEngine) -> None:
    """`unittest.TestCase` classes with pytest's marks (skipif by a name the module binds,
    filterwarnings, usefixtures naming a module fixture, an xfail method): the spec carries
    the harness and the fixture, and the runner applies them as pytest does (skipped, failed,
    pass, xfailed)."""
    _with_helpers(tmp_path, "X = 1\n",
        "import sys\nimport unittest\nimport warnings\n\nimport pytest\nfrom lib import double\n\n"
        "STATE = {}\nneeds_py2 = pytest.mark.skipif(sys.version_info >= (3,), reason='py2')\n\n\n"
        "@pytest.fixture\ndef set_x():\n    STATE['x'] = 2\n    yield\n    STATE.clear()\n\n\n"
        "@needs_py2\nclass SkippedTest(unittest.TestCase):\n"
        "    def test_a(self):\n        self.assertEqual(double(1), 3)\n\n\n"
        "@pytest.mark.filterwarnings('error')\nclass WarnTest(unittest.TestCase):\n"
        "    def test_b(self):\n        warnings.warn('x')\n        self.assertEqual(double(1), 2)\n\n\n"
        "@pytest.mark.usefixtures('set_x')\nclass FixtureTest(unittest.TestCase):\n"
        "    def test_c(self):\n        self.assertEqual(double(STATE['x']), 4)\n\n"
        "    @pytest.mark.xfail(reason='known')\n    def test_d(self):\n        self.assertEqual(double(1), 3)\n")
    _, target, built = _mine(tmp_path)
    execution = _run_mined(engine, target, built)
    assert [(outcome.id.rsplit("::", 1)[-1], outcome.reason or outcome.status) for outcome in execution.tests] == [
        ("test_a", "skipped"), ("test_b", "exception"), ("test_c", "pass"), ("test_d", "pass")], (
        [outcome.message for outcome in execution.tests], built.code[-1500:])
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed" in done.stdout, done.stdout[-1500:]


def test_a_test_of_another_target_that_a_test_calls_is_carried_but_not_collected(
        tmp_path: Path, engine: SubprocessEngine) -> None:
    """`test_double` calls `test_positive` (not one of the target's tests) as a helper: the
    spec carries it, marked `__test__ = False`, so it is no item of the task (pytest: both pass)."""
    _with_helpers(tmp_path, "X = 1\n",
                  "from lib import double\n\n\ndef test_positive(f=abs):\n    assert f(3) >= 3\n\n\n"
                  "def test_double():\n    assert double(2) == 4\n    test_positive(f=double)\n")
    repository = Repository(tmp_path)
    resolver = Resolver(repository)
    symbol = Symbol("lib", "double", "function")
    units = [unit for unit in discover_units(repository, resolver) if symbol in unit.targets]
    assert [unit.function for unit in units] == ["test_double"]
    target = cut_target(repository.module("lib"), symbol)
    built = SpecBuilder(repository, resolver, target).build(units[0].module, units)
    assert [item.function for item in TestSpec(name=built.name, code=built.code).items()] == ["test_double"]
    execution = _run_mined(engine, target, built)
    assert [(outcome.status, outcome.called) for outcome in execution.tests] == [("pass", True)], (
        [outcome.message for outcome in execution.tests], built.code[-600:])


def test_a_version_switch_is_cut_from_the_branch_that_runs_here(tmp_path: Path, engine: SubprocessEngine) -> None:
    """The target is defined in both branches of module-level switches this interpreter decides
    (`hasattr` of a standard-library class, a `PY3` flag, `sys.version_info`): it is cut from
    the branch that runs, and the dead branch's names are not the context's (dateutil's
    `enfold` was cut from its Python 2 branch, whose `_DatetimeWithFold` the context then
    imported and could not find)."""
    (tmp_path / "lib.py").write_text(
        "import sys\nfrom datetime import datetime\n\nPY3 = sys.version_info[0] == 3\n\n"
        "if hasattr(datetime, 'fold'):\n    def double(x):\n        '''Twice.'''\n        y = x\n        y = y * 2\n"
        "        return y\nelse:\n    class _Old(int):\n        pass\n\n"
        "    def double(x):\n        '''Twice.'''\n        y = _Old(x)\n        y = y * 2\n        return y\n\n"
        "if not PY3 or sys.version_info < (3, 6):\n    def half(x):\n        return _Old(x)\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lib.py").write_text(
        "from lib import double\n\n\ndef test_double():\n    assert double(2) == 4\n")
    repository = Repository(tmp_path)
    assert "_Old" not in repository.module("lib").bindings and "half" not in repository.module("lib").bindings
    _, target, built = _mine(tmp_path)
    assert "y = x" in target.reference and "_Old" not in target.context
    execution = _run_mined(engine, target, built)
    assert [(outcome.status, outcome.called) for outcome in execution.tests] == [("pass", True)], (
        [outcome.message for outcome in execution.tests])


def test_a_local_def_named_like_the_target_does_not_hide_it_from_its_own_decorator(
        tmp_path: Path, engine: SubprocessEngine) -> None:
    """`@lib.command()` on a local `def command()` (click's tests): the decorator is read where
    the `def` runs, before the local name exists, so it must reach the target, not the local
    (which raised UnboundLocalError); a default `f=lib.command` likewise."""
    (tmp_path / "lib.py").write_text(
        "def command(label=None):\n    '''A decorator that labels a function.'''\n    def decorator(f):\n"
        "        f.label = label or f.__name__\n        return f\n    return decorator\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lib.py").write_text(
        "import lib\n\n\ndef test_label():\n    @lib.command()\n    def command():\n        pass\n"
        "    assert command.label == 'command'\n\n\n"
        "def test_default(make=lib.command):\n    @make('x')\n    def command():\n        pass\n"
        "    assert command.label == 'x'\n")
    _, target, built = _mine(tmp_path, function="command")
    program = assemble(target.context, target.prompt_code, target.entry_point, target.reference).program
    execution = engine.execute(ExecutionRequest(program=program, tests=[TestSpec(name=built.name, code=built.code)],
                                                entry_point="command", limits=Limits(wall_s=30)))
    assert [(outcome.status, outcome.called) for outcome in execution.tests] == [("pass", True)] * 2, (
        [outcome.message for outcome in execution.tests], built.code)


def test_a_module_named_like_the_target_is_bound_apart_from_it(tmp_path: Path) -> None:
    """`import wc` where the target is `wc.wc` (wcwidth's `wcwidth.wcwidth`): the call becomes
    the program's `wc`, and the module, which would replace it, is bound as `_kb_module_wc` for
    the names still read through it. (Run end to end: minilib's `wordcount.wordcount`.)"""
    (tmp_path / "wc").mkdir()
    (tmp_path / "wc" / "__init__.py").write_text("from .wc import wc, VERSION\n")
    (tmp_path / "wc" / "wc.py").write_text(
        "VERSION = '1'\n\n\ndef wc(s):\n    '''Length.'''\n    n = 0\n    for _ in s:\n        n += 1\n    return n\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "common.py").write_text("from wc import wc\n\n\ndef count(s):\n    return wc(s)\n")
    (tmp_path / "tests" / "test_wc.py").write_text(
        "import wc\nfrom tests.common import count\n\n\n"
        "def test_wc():\n    assert wc.wc('ab') == 2\n    assert wc.VERSION == '1'\n    assert count('abc') == 3\n")
    repository = Repository(tmp_path)
    resolver = Resolver(repository)
    units = discover_units(repository, resolver)
    target = cut_target(repository.module("wc.wc"), Symbol("wc.wc", "wc", "function"))
    code = SpecBuilder(repository, resolver, target).build(units[0].module, units).code
    assert "import wc as _kb_module_wc" in code and "assert wc('ab') == 2" in code
    assert "_kb_module_wc.VERSION == '1'" in code and "\nimport wc\n" not in code
    # the helper's `wc` is the function it imported, not the test module's module
    assert "return wc(s)" in code, code


def test_a_star_import_of_a_package_binds_what_its_own_star_imports_bring(tmp_path: Path) -> None:
    """`from pkg import *`, where `pkg/__init__.py` is `from .core import *` with no `__all__`
    (toolz's shape): the spec imports what the test uses from it by name (`triple`, `NAME`),
    and not the target, which the program defines."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .core import *\nfrom .more import *\n")
    (package / "core.py").write_text(
        "def double(x):\n    '''Twice.'''\n    y = x * 2\n    return y\n\n\ndef triple(x):\n    return x * 3\n")
    (package / "more.py").write_text("from .core import *\n\nNAME = 'more'\n_PRIVATE = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_pkg.py").write_text(
        "from pkg import *\n\n\ndef test_double():\n    assert double(triple(1)) == 6 and NAME == 'more'\n")
    _, _, built = _mine(tmp_path, module="pkg.core")
    imported = {alias.name for node in ast.walk(ast.parse(built.code)) if isinstance(node, ast.ImportFrom)
                and node.module == "pkg" for alias in node.names}
    assert {"triple", "NAME"} <= imported and not imported & {"double", "_PRIVATE", "*"}, built.code


PLUGIN = """
import pytest


@pytest.fixture
def factor():
    return 2


@pytest.fixture
def scale():
    return 3


@pytest.fixture(autouse=True)
def seen():
    return []
"""

PLUGIN_CONFTEST = """
import pytest


@pytest.fixture
def factor(factor, seen):
    seen.append("conftest")
    return factor * 5


@pytest.fixture
def alone(alone):
    return alone
"""

OVERRIDING_TESTS = """
import pytest
from lib import double


@pytest.fixture
def factor(factor, seen):
    seen.append("module")
    return factor + 1


def test_overridden_twice(factor, seen):
    assert double(factor) == 22 and seen == ["conftest", "module"]


def test_the_plugins_own(scale):
    assert double(scale) == 6


def test_nothing_underneath(alone):
    assert double(alone)


class TestInAClass:
    @pytest.fixture
    def factor(self, factor):
        return -factor

    def test_in_a_class(self, factor):
        assert double(factor) == -22
"""


def test_a_fixture_that_overrides_one_of_its_name_gets_that_one(tmp_path: Path, engine: SubprocessEngine) -> None:
    """A fixture that requests its own name gets the one it overrides, as pytest's do: a test
    module's over its conftest's, which overrides the distribution's own pytest plugin's (a
    `pytest11` entry point: Faker's tests override its plugin's `faker` fixture so). Mining
    carries each level; where none is underneath, the test is an unsupported fixture, as
    pytest's is an error, where it recursed without end before."""
    (tmp_path / "lib_plugin.py").write_text(PLUGIN)
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = lib\n\n[options.entry_points]\npytest11 =\n"
                                        "    lib = lib_plugin\n")
    target, built = _mined_where_pytest_says(
        tmp_path, {"conftest.py": PLUGIN_CONFTEST, "test_lib.py": OVERRIDING_TESTS}, "3 passed, 1 error in",
        pytest_args=("-p", "lib_plugin"))
    assert "_kb_OUTER_FIXTURES['factor'] = (*_kb_OUTER_FIXTURES.get('factor', ()), _kb_FIXTURES['factor'])" \
        in built.code
    execution = _run_mined(engine, target, built)
    assert {t.id.rsplit("::", 1)[-1]: t.reason or t.status for t in execution.tests} == {
        "test_overridden_twice": "pass", "test_the_plugins_own": "pass",
        "test_nothing_underneath": "unsupported-fixture", "test_in_a_class": "pass"}, \
        [t.message[-600:] for t in execution.tests]
    assert "requests the fixture 'alone' it overrides" in next(
        t.message for t in execution.tests if t.id.endswith("test_nothing_underneath"))
    assert {t.id.rsplit("::", 1)[-1]: t.status for t in _run_mined(engine, target, built, wrong=True).tests
            if t.reason != "unsupported-fixture"} == {
        "test_overridden_twice": "fail", "test_the_plugins_own": "fail", "test_in_a_class": "fail"}


NAME_READING_TESTS = """
import pytest
from lib import double


@pytest.fixture
def two():
    return 2


class TestNamed:
    def test_its_class_name(self, request, two):
        assert request.cls.__name__ == type(self).__name__ == "TestNamed" == type(self).__qualname__
        assert double(two) == 4


def test_its_function_name(request, two):
    assert request.function.__name__ == "test_its_function_name" and double(two) == 4
"""


def test_what_mining_wraps_keeps_the_name_its_tests_read(tmp_path: Path, engine: SubprocessEngine) -> None:
    """A class or function mining renames to wrap it (`_kb_TestNamed`) keeps its name for
    the tests that read it, as under pytest: Faker's tests pick their locale by the name of
    their class (`request.cls.__name__`)."""
    target, built = _mined_where_pytest_says(tmp_path, {"test_lib.py": NAME_READING_TESTS}, "2 passed in")
    assert "class _kb_TestNamed" in built.code and "def _kb_test_its_function_name" in built.code
    execution = _run_mined(engine, target, built)
    assert {t.id.rsplit("::", 1)[-1]: t.status for t in execution.tests} == {
        "test_its_class_name": "pass", "test_its_function_name": "pass"}, [t.message[-600:] for t in execution.tests]
    assert {t.status for t in _run_mined(engine, target, built, wrong=True).tests} == {"fail"}
