"""Loading benchmarks: valid ones load, every kind of bad input names file, line and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import FunctionTask, Manifest, Provenance, TestSpec, imported_names
from knowbench.errors import BenchmarkError

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


def test_imported_names_sees_every_spelling_of_an_import_statement() -> None:
    """What a fork server preloads comes from these names; code with no import statement is
    not even parsed (every import statement spells the keyword), so each spelling counts."""
    code = ("import\tos.path\nfrom json import(dumps)\nif True: import a.b as c\n"
            "def f():\n    from x.y import *\nfrom . import local\nclass K:\n    import zz\n")
    assert imported_names(code) == {"os.path", "json.dumps", "a.b", "x.y", "zz"}
    assert imported_names("x = __import__('os')\nimportlib_name = 1\n") == set()
    assert imported_names("def f(:\n    import os\n") == set()  # not Python: nothing
