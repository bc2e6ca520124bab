"""Cutting a target out of its module: masked prompt, reference, and the context closure."""

from __future__ import annotations

import ast
from pathlib import Path

from builders_helpers import MINILIB
from knowbench.builders.context import cut_target, repair_context
from knowbench.builders.repository import Repository, Symbol


def _cut(module: str, qualname: str, kind: str = "function", **options: int):
    repository = Repository(MINILIB)
    return cut_target(repository.module(module), Symbol(module, qualname, kind), **options)


def test_prompt_masks_the_body_after_the_docstring() -> None:
    target = _cut("minilib.textutil", "slug")
    assert target.prompt_code.splitlines() == [
        "def slug(text, sep=SEPARATOR):",
        '    """Turn `text` into a URL slug: its lower-case words, stop words dropped, joined by `sep`."""',
        "    ...",
    ]
    assert target.reference.startswith("def slug(text, sep=SEPARATOR):")
    assert "return sep.join(words)" in target.reference
    assert target.body_lines == 4


def test_context_copies_helpers_and_constants_and_imports_mutable_state() -> None:
    target = _cut("minilib.textutil", "slug")
    assert "import re" in target.context
    assert 'SEPARATOR = "-"' in target.context
    assert "def _clean(text):" in target.context  # a helper, copied with what it uses
    assert "_WORD = re.compile" in target.context
    # a list could be filled at import time or changed by tests: it keeps its identity
    assert "from minilib.textutil import STOP_WORDS" in target.context
    assert "import os" not in target.context  # not used by slug or its helpers
    assert set(target.copied) == {"SEPARATOR", "_clean", "_WORD"}
    ast.parse(target.context)


def test_relative_import_becomes_absolute() -> None:
    target = _cut("minilib.mathutil", "clamp")
    assert target.context == "from minilib._constants import LIMIT"


def test_method_prompt_is_its_class_and_classes_it_uses_are_imported() -> None:
    target = _cut("minilib.geometry.shapes", "Rect.area", "method")
    assert target.entry_point == "Rect.area"
    assert target.prompt_code.startswith("class Rect:")
    assert "def scale(self, factor):" in target.prompt_code  # the rest of the class stays
    assert target.context == "from minilib.geometry.shapes import RectError"
    assert target.reference.startswith("def area(self):")


def test_method_of_a_long_class_is_posed_as_a_subclass() -> None:
    target = _cut("minilib.geometry.shapes", "Rect.area", "method", max_prompt_lines=10)
    assert target.subclassed
    assert target.prompt_code.startswith("class Rect(_kb_base_Rect):")
    assert "def scale" not in target.prompt_code
    assert "from minilib.geometry.shapes import Rect as _kb_base_Rect" in target.context
    ast.parse(target.prompt_code)


def test_repair_adds_an_import_from_the_installed_module_once() -> None:
    context = "from __future__ import annotations\nimport re"
    repaired = repair_context(context, "minilib.textutil", "_to_upper")
    assert repaired == "from __future__ import annotations\nfrom minilib.textutil import _to_upper\nimport re"
    assert repair_context(repaired, "minilib.textutil", "_to_upper") is None


def test_names_bound_only_at_run_time_are_left_for_the_repair_loop() -> None:
    target = _cut("minilib.textutil", "normalise_case")
    assert {"_to_upper", "_to_lower"} <= set(target.unresolved)


def test_a_definition_on_one_line_cannot_be_masked(tmp_path: Path) -> None:
    (tmp_path / "one.py").write_text("def f(x): return x + 1\n")
    repository = Repository(tmp_path)
    try:
        cut_target(repository.module("one"), Symbol("one", "f", "function"))
    except ValueError as error:
        assert "signature" in str(error)
    else:
        raise AssertionError("expected a ContextError")
