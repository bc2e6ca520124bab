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


def test_relative_import_and_init_reexport_resolve_to_the_definition() -> None:
    repository = Repository(MINILIB)
    resolver = Resolver(repository)
    package = repository.module("minilib")
    assert resolver.name(package, "make_slug") == Symbol("minilib.textutil", "slug", "function")
    assert resolver.name(package, "clamp") == Symbol("minilib.mathutil", "clamp", "function")
    geometry = repository.module("minilib.geometry")
    assert resolver.name(geometry, "Rect") == Symbol("minilib.geometry.shapes", "Rect", "class")


def test_alias_of_a_reexport_is_traced(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_text.py::test_slug_via_reexport_alias"] == {"minilib.textutil.slug"}


def test_module_attribute_chain_is_traced(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_text.py::test_slug_via_module_attribute"] == {"minilib.textutil.slug"}


def test_function_handed_to_an_imported_test_helper_is_traced(traced: dict[str, set[str]]) -> None:
    assert traced["tests/test_text.py::test_slug_cases"] == {"minilib.textutil.slug"}


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
