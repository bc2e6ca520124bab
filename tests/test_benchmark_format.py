"""Loading benchmarks: valid ones load, every kind of bad input names file, line and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import make_request, run_knowbench
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import FunctionTask, Manifest, Provenance, TestSpec, imported_names
from knowbench.errors import BenchmarkError
from knowbench.execution.engine import Engine, Isolation

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "basic"


def _task(**overrides: object) -> dict[str, object]:
    task: dict[str, object] = {
        "task_id": "t1", "domain": "d", "kind": "function", "instruction": "Add two numbers.",
        "prompt_code": "def add(a, b):\n    ...\n", "entry_point": "add",
        "reference": "def add(a, b):\n    return a + b\n",
        "tests": [{"name": "t", "code": "assert add(1, 2) == 3\n"}],
    }
    task.update(overrides)
    return task


def _write(tmp_path: Path, lines: list[str], manifest: dict[str, object] | None = None) -> Path:
    bench = tmp_path / "bench"
    bench.mkdir()
    manifest = manifest or {"name": "b", "provenance": {"source": "test"}}
    (bench / "benchmark.json").write_text(json.dumps(manifest))
    (bench / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return bench


def test_the_built_in_example_loads_with_stable_hash() -> None:
    first, second = load_benchmark(EXAMPLE), load_benchmark(EXAMPLE)
    assert first.content_hash == second.content_hash
    assert {task.kind for task in first.tasks} == {"function", "choice"}
    assert len({task.domain for task in first.tasks}) >= 3
    assert not first.warnings


def test_write_then_load_round_trips_and_records_the_tasks_hash(tmp_path: Path) -> None:
    manifest = Manifest(name="rt", provenance=Provenance(source="unit test"))
    task = FunctionTask.model_validate(_task())
    bench = write_benchmark(tmp_path / "rt", manifest, [task])
    assert bench.tasks == [task]
    assert bench.manifest.provenance.hashes["tasks.jsonl"].startswith("sha256:")


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    bench = _write(tmp_path, [json.dumps(_task()), '{"task_id": "t2", '])
    with pytest.raises(BenchmarkError) as caught:
        load_benchmark(bench)
    assert caught.value.line == 2 and "invalid JSON" in str(caught.value)
    assert str(caught.value).startswith(f"{bench / 'tasks.jsonl'}:2:")


def test_missing_field_names_line_and_field(tmp_path: Path) -> None:
    task = _task()
    del task["entry_point"]
    bench = _write(tmp_path, [json.dumps(task)])
    with pytest.raises(BenchmarkError) as caught:
        load_benchmark(bench)
    assert (caught.value.line, caught.value.field) == (1, "entry_point")
    assert "add the field 'entry_point'" in str(caught.value)


def test_duplicate_task_id_points_at_both_lines(tmp_path: Path) -> None:
    bench = _write(tmp_path, [json.dumps(_task()), json.dumps(_task())])
    with pytest.raises(BenchmarkError) as caught:
        load_benchmark(bench)
    assert caught.value.line == 2 and caught.value.field == "task_id"
    assert "first used on line 1" in str(caught.value)


def test_test_code_that_does_not_parse_names_the_test(tmp_path: Path) -> None:
    task = _task(tests=[{"name": "ok", "code": "assert True"}, {"name": "bad", "code": "assert (1"}])
    bench = _write(tmp_path, [json.dumps(task)])
    with pytest.raises(BenchmarkError) as caught:
        load_benchmark(bench)
    assert caught.value.field == "tests.1.code" and "does not parse" in str(caught.value)


def test_entry_point_missing_from_prompt_code_is_rejected(tmp_path: Path) -> None:
    bench = _write(tmp_path, [json.dumps(_task(entry_point="subtract"))])
    with pytest.raises(BenchmarkError, match="defines no function 'subtract'"):
        load_benchmark(bench)


def test_unknown_field_suggests_metadata(tmp_path: Path) -> None:
    bench = _write(tmp_path, [json.dumps(_task(author="me"))])
    with pytest.raises(BenchmarkError) as caught:
        load_benchmark(bench)
    assert caught.value.field == "author" and "metadata" in str(caught.value)


def test_domain_outside_the_manifest_list_is_rejected(tmp_path: Path) -> None:
    manifest = {"name": "b", "domains": ["other"], "provenance": {"source": "t"}}
    bench = _write(tmp_path, [json.dumps(_task())], manifest)
    with pytest.raises(BenchmarkError) as caught:
        load_benchmark(bench)
    assert caught.value.field == "domain"


def test_choice_answer_must_be_an_option(tmp_path: Path) -> None:
    choice = {"task_id": "q", "domain": "d", "kind": "choice", "question": "?",
              "options": {"A": "x", "B": "y"}, "answer": ["C"]}
    bench = _write(tmp_path, [json.dumps(choice)])
    with pytest.raises(BenchmarkError, match="not among the options"):
        load_benchmark(bench)


def test_unsupported_format_version_is_explained(tmp_path: Path) -> None:
    manifest = {"name": "b", "format_version": 99, "provenance": {"source": "t"}}
    bench = _write(tmp_path, [json.dumps(_task())], manifest)
    with pytest.raises(BenchmarkError) as caught:
        load_benchmark(bench)
    assert caught.value.field == "format_version" and "not supported" in str(caught.value)


def test_edited_tasks_file_is_warned_about(tmp_path: Path) -> None:
    bench = tmp_path / "copy"
    shutil.copytree(EXAMPLE, bench)
    with (bench / "tasks.jsonl").open("a") as handle:
        handle.write(json.dumps(_task(task_id="extra", domain="text")) + "\n")
    assert any("differs from the hash" in warning for warning in load_benchmark(bench).warnings)


def test_test_items_are_found_statically_in_every_style() -> None:
    spec = TestSpec(name="s", code=(
        "import unittest\n"
        "def test_a():\n    pass\n"
        "class TestPlain:\n    def test_b(self):\n        pass\n"
        "class Case(unittest.TestCase):\n    def test_c(self):\n        pass\n"
        "def helper():\n    pass\n"
    ))
    assert [(item.id, item.kind) for item in spec.items()] == [
        ("s::test_a", "function"), ("s::TestPlain::test_b", "class"), ("s::Case::test_c", "unittest"),
    ]
    assert [item.id for item in TestSpec(name="block", code="assert 1").items()] == ["block"]


def test_cli_reports_bad_input_with_exit_code_2_and_no_traceback(tmp_path: Path) -> None:
    bench = _write(tmp_path, [json.dumps(_task()), "not json"])
    done = run_knowbench("validate", str(bench))
    assert done.returncode == 2
    assert "tasks.jsonl:2" in done.stderr and "Traceback" not in done.stderr


def test_a_specs_imports_are_found_anywhere_in_it_and_only_absolute_ones() -> None:
    code = ("import numpy as np, os.path\n"
            "from pandas.testing import assert_frame_equal\n"
            "from . import sibling\n"
            "from math import *\n"
            "def test_x():\n"
            "    import json\n"
            "    assert True\n")
    assert TestSpec(name="t", code=code).imports() == [
        ("numpy", ()), ("os.path", ()), ("pandas.testing", ("assert_frame_equal",)), ("math", ()),
        ("json", ())]
    assert TestSpec(name="t", code="assert 1 + 1 == 2\n").imports() == []


def test_a_specs_rebindings_by_hand_are_found_through_its_imports() -> None:
    code = ("import numpy as np, os.path\n"
            "from requests import Session\n"
            "import solution\n"
            "def test_x(self):\n"
            "    import shutil\n"
            "    saved, os.remove = os.remove, print\n"
            "    os.path.join = lambda *parts: ''\n"
            "    np.random.seed: object = None\n"
            "    Session.get = None\n"
            "    setattr(shutil, 'rmtree', print)\n"
            "    solution.counter += 1\n"
            "    self.value = 3\n"
            "    local.attribute = 4\n"
            "    os.environ['X'] = '1'\n")
    # `local` is bound by no import: looked up in the program's globals (""); `self` is skipped
    assert TestSpec(name="t", code=code).rebinds() == [
        ("os", ("remove",)), ("os", ("path", "join")), ("numpy", ("random", "seed")),
        ("requests", ("Session", "get")), ("solution", ("counter",)), ("", ("local", "attribute")),
        ("shutil", ("rmtree",))]
    spread = ("import os as m\nimport shutil as m\n"
              "def test_x(name):\n    m.copy = None\n    setattr(m, name, None)\n    __builtins__.print = None\n")
    assert TestSpec(name="t", code=spread).rebinds() == [
        ("os", ("copy",)), ("shutil", ("copy",)), ("builtins", ("print",)), ("os", ("*",)), ("shutil", ("*",))]
    aliased = ("import os\nimport importlib\nfs = os\n"
               "def test_a(d=os):\n    fs.remove = None\n    del os.unlink\n    d.rmdir = None\n"
               "    importlib.import_module('shutil').rmtree = None\n    delattr(os, 'rename')\n"
               "def test_b():\n    t, n = os, 1\n    (w := os)\n    t.mkdir = None\n    w.chmod = None\n")
    assert TestSpec(name="t", code=aliased).rebinds() == [
        ("os", ("remove",)), ("os", ("unlink",)), ("os", ("rmdir",)), ("shutil", ("rmtree",)), ("os", ("mkdir",)),
        ("os", ("chmod",)), ("os", ("rename",))]
    assert TestSpec(name="t", code="def test_x():\n    assert add(1, 2) == 3\n").rebinds() == []


def test_imported_names_sees_every_spelling_of_an_import_statement() -> None:
    """What a fork server preloads comes from these names; code with no import statement is
    not even parsed (every import statement spells the keyword), so each spelling counts."""
    code = ("import\tos.path\nfrom json import(dumps)\nif True: import a.b as c\n"
            "def f():\n    from x.y import *\nfrom . import local\nclass K:\n    import zz\n")
    assert imported_names(code) == {"os.path", "json.dumps", "a.b", "x.y", "zz"}
    assert imported_names("x = __import__('os')\nimportlib_name = 1\n") == set()
    assert imported_names("def f(:\n    import os\n") == set()  # not Python: nothing


def _items(code: str) -> list[tuple[str, str]]:
    return [(item.id, item.kind) for item in TestSpec(name="s", code=code).items()]


def test_a_name_defined_twice_is_one_item_the_last_definition_in_the_first_place() -> None:
    """Python binds the last definition (in the module dict's place of the first), and the
    frameworks collect what the module holds."""
    code = ("import unittest\n"
            "def test_one():\n    assert False\n"
            "def test_two():\n    pass\n"
            "def test_one():\n    pass\n"
            "class Case(unittest.TestCase):\n"
            "    def test_a(self):\n        pass\n"
            "    def test_a(self):\n        pass\n")
    assert _items(code) == [("s::test_one", "function"), ("s::test_two", "function"), ("s::Case::test_a", "unittest")]
    assert _items("def test_x():\n    pass\ndel test_x\n") == [("s", "block")]


def test_a_class_mining_wrapped_is_collected_through_its_wrapper_only() -> None:
    """Mining wraps a pytest-style test class as `_kb_<name>` (the original, on its bases)
    and `<name>` (the wrappers): a base from a library merely named *TestCase (Pint's
    `QuantityTestCase`) does not make the original's methods unittest items of their own."""
    code = ("from pint.testsuite import QuantityTestCase\n"
            "class _kb_TestIssues(QuantityTestCase):\n    def test_a(self, registry):\n        pass\n"
            "class TestIssues:\n    def test_a(self):\n        pass\n")
    assert _items(code) == [("s::TestIssues::test_a", "class")]


@pytest.mark.parametrize("code, expected", [
    ("class TestAdd(object):\n    def test_one(self):\n        pass\n", ["s::TestAdd::test_one"]),
    ("class Helpers:\n    def check(self):\n        pass\n"
     "class TestAdd(Helpers):\n    def test_one(self):\n        pass\n", ["s::TestAdd::test_one"]),
    ("import unittest\nclass Base(unittest.TestCase):\n    pass\n"
     "class AddTests(Base):\n    def test_one(self):\n        pass\n", ["s::AddTests::test_one"]),
    ("from unittest import TestCase as TC\nclass AddTests(TC):\n    def test_one(self):\n        pass\n",
     ["s::AddTests::test_one"]),
    ("import unittest as ut\nclass Checks(ut.TestCase):\n    def test_b(self):\n        pass\n"
     "    def test_a(self):\n        pass\n", ["s::Checks::test_a", "s::Checks::test_b"]),  # unittest sorts
    ("import unittest\nclass Mixin:\n    def test_one(self):\n        pass\n"
     "class AddTestCase(Mixin, unittest.TestCase):\n    pass\n", ["s::AddTestCase::test_one"]),
    ("class TestBase:\n    def test_add(self):\n        pass\nclass TestSub(TestBase):\n"
     "    def test_sub(self):\n        pass\n",
     ["s::TestBase::test_add", "s::TestSub::test_add", "s::TestSub::test_sub"]),  # inherited first
    ("class TestOuter:\n    class TestInner:\n        def test_in(self):\n            pass\n",
     ["s::TestOuter::TestInner::test_in"]),
    ("class TestAdd:\n    def __init__(self):\n        pass\n    def test_one(self):\n        pass\n", ["s"]),
    ("class TestHelper:\n    __test__ = False\n    def test_no(self):\n        pass\n"
     "class TestMore(TestHelper):\n    def test_also_no(self):\n        pass\n", ["s"]),
    ("class Checks:\n    def test_one(self):\n        pass\n", ["s"]),  # neither Test* nor a TestCase
    # a library's TestCase is unittest's: its loader's rules
    ("from absl.testing import absltest\nclass FooTest(absltest.TestCase):\n    def test_b(self):\n"
     "        pass\n    def test_a(self):\n        pass\n", ["s::FooTest::test_a", "s::FooTest::test_b"]),
    ("from django.test import TestCase\nclass ViewTests(TestCase):\n    def test_view(self):\n"
     "        pass\n", ["s::ViewTests::test_view"]),
    # a TestCase is unittest's whatever else it mixes in (cachetools' tests: a mixin on a Protocol)
    ("import unittest\nfrom typing import Protocol\nclass Proto(Protocol):\n    def assertEqual(self, a, b): ...\n"
     "class Mixin(Proto):\n    def test_delete(self):\n        pass\n"
     "class CacheTest(unittest.TestCase, Mixin):\n    pass\n", ["s::CacheTest::test_delete"]),
    ("import unittest, helpers\nclass T(unittest.TestCase, helpers.Mixin):\n    def test_a(self):\n"
     "        pass\n", ["s::T::test_a"]),
    # a mark, skip or patch made once and used as a decorator by name
    ("import sys, pytest\nneeds_py4 = pytest.mark.skipif(sys.version_info < (4,), reason='')\n"
     "@needs_py4\nclass TestNew:\n    def test_n(self):\n        pass\n", ["s::TestNew::test_n"]),
    ("import unittest\nlinux_only = unittest.skipUnless(True, '')\n"
     "@linux_only\nclass T(unittest.TestCase):\n    def test_l(self):\n        pass\n", ["s::T::test_l"]),
])
def test_test_classes_are_collected_by_pytests_and_unittests_rules(code: str, expected: list[str]) -> None:
    assert [item_id for item_id, _ in _items(code)] == expected


@pytest.mark.parametrize("code", [
    "from typing import NamedTuple\nclass TestPoint(NamedTuple):\n    a: int\n    def test_sum(self):\n        pass\n",
    "from enum import Enum\nclass TestMode(Enum):\n    A = 1\n    def test_x(self):\n        pass\n",
    "from typing import Protocol\nclass Testable(Protocol):\n    __test__ = True\n    def test(self): ...\n",
    "class TestAcc(Acc):\n    def test_add(self):\n        pass\n",  # Acc: a class of the program
    "import helpers\nclass TestX(helpers.Base):\n    def test_x(self):\n        pass\n",
    "from abc import ABC, abstractmethod\nclass TestBase(ABC):\n    @abstractmethod\n"
    "    def make(self): ...\n    def test_add(self):\n        pass\n",
    "import unittest, abc\nclass Base(unittest.TestCase, metaclass=abc.ABCMeta):\n    @abc.abstractmethod\n"
    "    def make(self): ...\n    def test_add(self):\n        pass\n",
    "class TestK(metaclass=Meta):\n    def test_k(self):\n        pass\n",
    "@attr.s\nclass TestRow:\n    def test_r(self):\n        pass\n",
    "made = attr.s(slots=True)\n@made\nclass TestRow:\n    def test_r(self):\n        pass\n",
])
def test_a_class_with_a_base_from_outside_the_spec_makes_no_item(code: str) -> None:
    """What an outside base brings (an `__init__`, `__new__`, abstract methods, `__test__`)
    cannot be read here: pytest may skip the class, so an item could fail a correct program.
    The runner collects such classes by pytest's rules on the live class."""
    assert [item_id for item_id, _ in _items(code)] == ["s"]


def test_a_class_whose_abstract_methods_are_all_overridden_is_collected() -> None:
    code = ("from abc import ABC, abstractmethod\nimport unittest\n"
            "class TestBase(ABC):\n    @abstractmethod\n    def make(self): ...\n"
            "    def test_add(self):\n        pass\n"
            "class TestInts(TestBase):\n    def make(self):\n        return 1\n"
            "class Base(unittest.TestCase, ABC):\n    @abstractmethod\n    def make(self): ...\n"
            "    def test_b(self):\n        pass\n"
            "class IntTests(Base):\n    def make(self):\n        return 1\n")
    assert [item_id for item_id, _ in _items(code)] == ["s::TestInts::test_add", "s::IntTests::test_b"]


@pytest.mark.parametrize("code, expected", [
    ("import sys\nif sys.version_info >= (3,):\n    def test_new():\n        pass\nelse:\n"
     "    def test_old():\n        pass\ndef test_plain():\n    pass\n", ["s::test_plain"]),
    ("try:\n    import zz\nexcept ImportError:\n    class TestFallback:\n        def test_fb(self):\n"
     "            pass\n", ["s"]),
    ("import contextlib\nwith contextlib.nullcontext():\n    def test_in_with():\n        pass\n", ["s"]),
    ("def test_one():\n    pass\nif FLAG:\n    test_one = None\n", ["s"]),  # maybe rebound
    ("class TestA:\n    if FLAG:\n        def test_a(self):\n            pass\n    def test_b(self):\n"
     "        pass\n", ["s::TestA::test_b"]),
])
def test_tests_bound_under_a_condition_make_no_item(code: str, expected: list[str]) -> None:
    """Which branch runs is not known here; the runner collects what the one that ran bound."""
    assert [item_id for item_id, _ in _items(code)] == expected


@pytest.mark.parametrize("code, expected", [
    ("def test_helper(a):\n    pass\ntest_helper.__test__ = False\ndef test_x():\n    pass\n", ["s::test_x"]),
    ("class TestOne:\n    def test_c(self):\n        pass\n    def test_d(self):\n        pass\n"
     "    test_d.__test__ = False\n", ["s::TestOne::test_c"]),
    ("class Checks:\n    __test__ = True\n    def test_a(self):\n        pass\n", ["s::Checks::test_a"]),
    ("def check_b():\n    pass\ncheck_b.__test__ = True\n", ["s::check_b"]),
    ("class TestLater:\n    __test__ = False\n    def test_a(self):\n        pass\nTestLater.__test__ = True\n",
     ["s::TestLater::test_a"]),
    ("class TestOff:\n    def test_a(self):\n        pass\nTestOff.__test__ = False\n", ["s"]),
    ("class TestMaybe:\n    __test__ = FLAG\n    def test_a(self):\n        pass\n", ["s"]),  # left to the runner
    ("def test_one():\n    pass\ntest_alias = test_one\n", ["s::test_one", "s::test_alias"]),
])
def test_dunder_test_is_honoured_on_classes_functions_and_methods(code: str, expected: list[str]) -> None:
    """pytest collects an object whose `__test__` is True whatever its name, and none whose
    `__test__` is false; a module-level assignment after the definition counts."""
    assert [item_id for item_id, _ in _items(code)] == expected


def test_a_testcase_with_only_run_test_is_one_item() -> None:
    """unittest's loader (and pytest) run `runTest` when a TestCase has no test* method."""
    code = ("import unittest\nclass AddCheck(unittest.TestCase):\n    def runTest(self):\n        pass\n"
            "class Both(unittest.TestCase):\n    def runTest(self):\n        pass\n"
            "    def test_a(self):\n        pass\n")
    assert _items(code) == [("s::AddCheck::runTest", "unittest"), ("s::Both::test_a", "unittest")]


def test_a_name_defined_twice_runs_its_last_definition_and_every_other_item(engine: Engine) -> None:
    tests = ("def test_other():\n    assert add(2, 2) == 4\n"
             "def test_one():\n    assert add(1, 2) == 4\n"
             "def test_one():\n    assert add(1, 2) == 3\n")
    execution = engine.execute(make_request("def add(a, b):\n    return a + b\n", tests, "add"))
    assert {test.id: test.status for test in execution.tests} == {"t::test_other": "pass", "t::test_one": "pass"}


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_classes_found_through_bases_run_and_fail_a_wrong_program(engine: Engine, isolation: Isolation) -> None:
    tests = ("import unittest\nfrom unittest import TestCase as TC\n"
             "class Helpers:\n    def check(self, a, b, c):\n        assert add(a, b) == c\n"
             "class TestAdd(Helpers):\n    def test_one(self):\n        self.check(1, 2, 3)\n"
             "class Base(TC):\n    pass\n"
             "class AddTests(Base):\n    def test_two(self):\n        self.assertEqual(add(2, 2), 4)\n"
             "class TestSub(TestAdd):\n    pass\n"
             "class TestOuter:\n    class TestInner:\n        def test_in(self):\n            assert add(0, 1) == 1\n")
    wrong = "def add(a, b):\n    return a - b\n"
    execution = engine.execute(make_request(wrong, tests, "add", isolation=isolation,
                                            trusted_program="def add(a, b):\n    ...\n"))
    assert {test.id: test.status for test in execution.tests} == {
        "t::TestAdd::test_one": "fail", "t::AddTests::test_two": "fail", "t::TestSub::test_one": "fail",
        "t::TestOuter::TestInner::test_in": "fail"}


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_tests_made_while_the_spec_runs_are_run_so_the_spec_cannot_pass_unchecked(
        engine: Engine, isolation: Isolation) -> None:
    """No reading of the syntax tree finds them: the runner finds them once the spec ran (as
    pytest collects the module) and runs them with the spec's last item."""
    made = ("for i, (a, b, c) in enumerate([(1, 2, 3), (2, 2, 4)]):\n"
            "    def _t(a=a, b=b, c=c):\n        assert add(a, b) == c\n"
            "    globals()[f'test_case_{i}'] = _t\n")
    beside = "def test_plain():\n    assert add(0, 0) == 0\n" + made
    for program, status in (("def add(a, b):\n    return a + b\n", "pass"), ("def add(a, b):\n    return a * b\n", "fail")):
        execution = engine.execute(make_request(program, {"made": made, "beside": beside}, "add", isolation=isolation,
                                                trusted_program="def add(a, b):\n    ...\n"))
        assert {test.id: test.status for test in execution.tests} == {"made": status, "beside::test_plain": "pass"
                                                                      if status == "pass" else "fail"}
        if status == "fail":
            assert "test_case_0" in execution.tests[0].message
