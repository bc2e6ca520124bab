"""Discovery and tracing on the minilib fixture repository: tests found, calls traced to
their definitions through imports, aliases, re-exports and classes. Static: nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders_helpers import MINILIB
from knowbench.builders.discover import discover_units
from knowbench.builders.repository import Repository, Resolver, Symbol


@pytest.fixture(scope="module")
def traced() -> dict[str, set[str]]:
    repository = Repository(MINILIB)
    units = discover_units(repository, Resolver(repository))
    return {unit.id: {symbol.dotted for symbol in unit.targets} for unit in units}


def test_modules_are_named_as_python_imports_them() -> None:
    repository = Repository(MINILIB)
    names = {module.name for module in repository.modules}
    assert {"minilib", "minilib.textutil", "minilib.geometry", "minilib.geometry.shapes",
            "test_text", "conftest", "helpers"} <= names
    assert repository.library_tops == {"minilib"}
    assert repository.module("minilib.textutil").library
    assert not repository.module("test_text").library


def test_a_single_module_library_beside_a_tests_package_is_the_library(tmp_path: Path) -> None:
    """`lib.py` at the root with a `tests/` package (and `setup.py`): the module is the library; a
    loose script beside a real package is not."""
    (tmp_path / "lib.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_lib.py").write_text("from lib import double\n")
    assert Repository(tmp_path).library_tops == {"lib"}
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert Repository(tmp_path).library_tops == {"pkg"}


def test_relative_import_and_init_reexport_resolve_to_the_definition() -> None:
    repository = Repository(MINILIB)
    resolver = Resolver(repository)
    package = repository.module("minilib")
    assert resolver.name(package, "make_slug") == Symbol("minilib.textutil", "slug", "function")
    assert resolver.name(package, "clamp") == Symbol("minilib.mathutil", "clamp", "function")
    geometry = repository.module("minilib.geometry")
    assert resolver.name(geometry, "Rect") == Symbol("minilib.geometry.shapes", "Rect", "class")


SLUG = {"minilib.textutil.slug", "minilib.textutil._clean"}  # _clean: what slug calls


def test_what_the_library_calls_is_traced_two_calls_deep(traced: dict[str, set[str]]) -> None:
    """From what a test calls, on into the library's code: a subclass's `super().book()`,
    `self.balance()`, a module function's calls, a parameter's default it calls
    (`parse=parse_cents`), constructors; two calls deep."""
    ledger = "minilib.ledger."
    assert traced["tests/test_ledger.py::test_an_audited_ledger_sums_and_logs"] == {
        ledger + name for name in ("AuditedLedger.__init__", "AuditedLedger.book", "Ledger.book",
                                   "Accounts.balance", "Accounts.set")}
    # book_lines -> AuditedLedger.book -> Ledger.book; Accounts.* would be a third call
    assert traced["tests/test_ledger.py::test_book_lines_reads_amounts_in_cents"] == {
        ledger + name for name in ("book_lines", "parse_cents", "AuditedLedger.__init__",
                                   "AuditedLedger.book", "Ledger.book")}


def test_alias_of_a_reexport_is_traced(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_text.py::test_slug_via_reexport_alias"] == SLUG


def test_module_attribute_chain_is_traced(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_text.py::test_slug_via_module_attribute"] == SLUG


def test_function_handed_to_an_imported_test_helper_is_traced(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_text.py::test_slug_cases"] == SLUG


def test_star_import_and_assert_raises_callable_are_traced(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_math.py::ClampTest::test_clamp"] == {"minilib.mathutil.clamp"}


def test_method_through_an_aliased_class_set_up_in_setup(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_math.py::StatsTest::test_mean"] == {"minilib.mathutil.Stats.mean"}


def test_method_through_a_conftest_fixture(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_geometry.py::TestRect::test_area"] == {"minilib.geometry.shapes.Rect.area"}


def test_constructor_call_records_init_and_the_method(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_geometry.py::TestRect::test_negative_side"] == {
        "minilib.geometry.shapes.Rect.__init__", "minilib.geometry.shapes.Rect.area"}


def test_tests_without_checks_are_not_units(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_f.py").write_text(
        "from lib import f\n\ndef test_prints():\n    print(f(1))\n\ndef test_checks():\n    assert f(1) == 1\n")
    repository = Repository(tmp_path)
    units = discover_units(repository, Resolver(repository))
    assert [unit.id for unit in units] == ["tests/test_f.py::test_checks"]


OPERATOR_LIBRARY = '''
class Vec:
    def __init__(self, x):
        self.x = x

    def __add__(self, other):
        return Vec(self.x + other.x)

    def __radd__(self, other):
        return Vec(self.x + other)

    def __eq__(self, other):
        return self.x == other.x

    def __len__(self):
        return abs(self.x)

    def __getitem__(self, index):
        return self.x * index

    def __setitem__(self, index, value):
        self.x = value

    def __iter__(self):
        return iter(range(self.x))

    def __contains__(self, item):
        return 0 <= item < self.x

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __neg__(self):
        return Vec(-self.x)

    def __call__(self, y):
        return self.x * y

    def __repr__(self):
        return f"Vec({self.x})"

    @property
    def double(self):
        return self.x * 2

    @property
    def settable(self):
        return self.x

    @settable.setter
    def settable(self, value):
        self.x = value
'''

OPERATOR_TESTS = '''
from lib import Vec


def test_add():
    v = Vec(1)
    assert v + Vec(2) == Vec(3)


def test_radd():
    assert (1 + Vec(2)).x == 3


def test_len_and_repr():
    v = Vec(-2)
    assert len(v) == 2 and repr(v) == "Vec(-2)"


def test_items():
    v = Vec(3)
    v[0] = 4
    assert v[2] == 8


def test_iteration_and_membership():
    v = Vec(3)
    assert [i for i in v] == [0, 1, 2]
    assert 2 in v


def test_context_manager():
    with Vec(1) as v:
        assert v.x == 1


def test_unary_and_call():
    v = Vec(2)
    assert (-v).x == -2 and v(3) == 6


def test_property():
    v = Vec(2)
    assert v.double == 4


def test_property_with_a_setter_is_not_a_target():
    v = Vec(2)
    assert v.settable == 2
'''


def test_operators_iteration_context_managers_and_properties_are_traced(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(OPERATOR_LIBRARY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_vec.py").write_text(OPERATOR_TESTS)
    repository = Repository(tmp_path)
    units = discover_units(repository, Resolver(repository))
    traced = {unit.function: {s.qualname.removeprefix("Vec.") for s in unit.targets} - {"__init__"}
              for unit in units}
    assert traced == {
        "test_add": {"__add__", "__eq__"},
        "test_radd": {"__radd__"},
        "test_len_and_repr": {"__len__", "__repr__"},
        "test_items": {"__setitem__", "__getitem__"},
        "test_iteration_and_membership": {"__iter__", "__contains__"},
        "test_context_manager": {"__enter__", "__exit__"},
        "test_unary_and_call": {"__neg__", "__call__"},
        "test_property": {"double"},
        # a getter and its setter share one name: which one a task would pose is ambiguous
        "test_property_with_a_setter_is_not_a_target": set(),
    }


def test_generic_alias_constructors_and_classes_held_by_the_test_class_are_traced(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(OPERATOR_LIBRARY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_vec.py").write_text(
        "import unittest\nfrom lib import Vec\n\n\nclass VecTest(unittest.TestCase):\n    Kind = Vec\n\n"
        "    def test_generic(self):\n        v = Vec[int](3)\n        self.assertEqual(len(v), 3)\n\n"
        "    def test_class_attribute(self):\n        v = self.Kind(2)\n        self.assertEqual(v.double, 4)\n")
    repository = Repository(tmp_path)
    units = discover_units(repository, Resolver(repository))
    traced = {unit.function: {s.qualname for s in unit.targets} for unit in units}
    assert traced == {"test_generic": {"Vec.__init__", "Vec.__len__"},
                      "test_class_attribute": {"Vec.__init__", "Vec.double"}}
