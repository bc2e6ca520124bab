"""Project tasks: a real project tree copied per sample, the target's body replaced by syntax
tree, the project's own tests run by pytest in the sandbox, on both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ProjectTarget
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.projects import patch_targets
from knowbench.records import Generation, Limits
from knowbench.run import evaluate_function

SHAPES = '''"""Shapes."""
import math


class Circle:
    def __init__(self, r):
        self.r = r

    @staticmethod
    def unit() -> "Circle":
        return Circle(1)

    def area(self) -> float:
        """The area."""
        return math.pi * self.r ** 2


def scale(values, factor=2): return [v * factor for v in values]
'''

TEST_UNIT = '''import unittest

from geometry.shapes import Circle


class TestArea(unittest.TestCase):
    def test_unit(self):
        self.assertAlmostEqual(Circle.unit().area(), 3.14159, places=4)

    def test_two(self):
        self.assertAlmostEqual(Circle(2).area(), 12.56637, places=4)


if __name__ == "__main__":
    unittest.main()
'''

TEST_PYTEST = '''import pytest

from geometry.shapes import Circle, scale


@pytest.mark.parametrize("values", [[1, 2], [0]])
def test_scale(values):
    assert scale(values) == [v * 2 for v in values]


def test_pipeline(tmp_path):
    (tmp_path / "r.txt").write_text("3")
    radius = int((tmp_path / "r.txt").read_text())
    assert scale([Circle(radius).area()], 1)[0] > 28
'''


def _bench(root: Path, targets: list[dict], tests: list[str], reference: str, prompt: str) -> Path:
    code = root / "projects" / "geo" / "code"
    (code / "geometry").mkdir(parents=True)
    (code / "geometry" / "__init__.py").write_text("")
    (code / "geometry" / "shapes.py").write_text(SHAPES)
    (code / "tests").mkdir()
    (code / "tests" / "test_area.py").write_text(TEST_UNIT)
    (code / "tests" / "test_pipeline.py").write_text(TEST_PYTEST)
    (root / "benchmark.json").write_text(json.dumps({
        "format_version": 1, "name": "geo", "domains": ["geo"], "requirements": [],
        "provenance": {"source": "test"}}))
    task = {"task_id": "geo/area", "domain": "geo", "kind": "project", "instruction": "Area.",
            "prompt_code": prompt, "entry_point": targets[0]["qualname"], "reference": reference,
            "tests": [{"name": "tests/test_area.py", "code": TEST_UNIT},
                      {"name": "tests/test_pipeline.py", "code": TEST_PYTEST}],
            "project": {"path": "projects/geo", "workdir": "code", "targets": targets,
                        "tests": tests}}
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    return root


def test_patch_keeps_header_and_string_values(tmp_path):
    (tmp_path / "shapes.py").write_text(SHAPES)
    reply = 'import cmath\n\ndef unit():\n    s = """a\nb"""\n    return Circle(len(s) - 2)\n'
    new = patch_targets(tmp_path, ".", [ProjectTarget(file="shapes.py", qualname="Circle.unit")],
                        reply)["shapes.py"]
    namespace: dict = {}
    exec(compile(new, "shapes.py", "exec"), namespace)
    assert namespace["Circle"].unit().r == 1  # still a staticmethod: the header stayed
    assert 's = """a\nb"""' in new and "import cmath" in new
    assert (tmp_path / "shapes.py").read_text() == SHAPES


@pytest.fixture(scope="module", params=["forkserver", "subprocess"])
def any_engine(request, best_sandbox):
    if request.param == "forkserver":
        engine = ForkServerEngine(best_sandbox, workers=1, preload=["pytest"])
    else:
        engine = SubprocessEngine(best_sandbox, workers=1)
    yield engine
    engine.close()


def test_reference_passes_and_stub_fails_on_both_engines(tmp_path, any_engine):
    reference = "class Circle:\n    def area(self) -> float:\n        return math.pi * self.r ** 2\n"
    prompt = "class Circle:\n    def area(self) -> float:\n        ...\n"
    root = _bench(tmp_path, [{"file": "geometry/shapes.py", "qualname": "Circle.area"}],
                  ["tests/test_area.py", "tests/test_pipeline.py::test_pipeline"], reference, prompt)
    original = (root / "projects/geo/code/geometry/shapes.py").read_text()
    task = load_benchmark(root).tasks[0]
    assert [item.id for item in task.test_items()] == [  # a TestCase's in unittest's (and pytest's) order
        "tests/test_area.py::TestArea::test_two", "tests/test_area.py::TestArea::test_unit",
        "tests/test_pipeline.py::test_pipeline"]
    limits = Limits(wall_s=60)
    results = {}
    for name, reply in (("reference", f"```python\n{reference}```"), ("null", ""),
                        ("wrong", "def area(self):\n    return 2 * self.r")):
        generation = Generation(task_id=task.task_id, sample_idx=0, completion=reply)
        results[name] = evaluate_function(task, generation, any_engine, limits)
    assert results["reference"].passed, results["reference"].execution
    assert results["reference"].tests_passed == 3
    assert results["null"].tests_passed == 0 and not results["null"].passed
    wrong = results["wrong"]
    assert not wrong.passed and wrong.tests_passed == 0
    assert {outcome.reason for outcome in wrong.execution.tests} == {"assertion"}, wrong.execution.tests
    assert (root / "projects/geo/code/geometry/shapes.py").read_text() == original


def test_parametrized_cases_are_one_item_and_failures_of_collection_are_reported(tmp_path, engine):
    prompt = "def scale(values, factor=2):\n    ...\n"
    reference = "def scale(values, factor=2): return [v * factor for v in values]\n"
    root = _bench(tmp_path, [{"file": "geometry/shapes.py", "qualname": "scale"}],
                  ["tests/test_pipeline.py"], reference, prompt)
    task = load_benchmark(root).tasks[0]
    limits = Limits(wall_s=60)
    good = evaluate_function(task, Generation(task_id=task.task_id, sample_idx=0,
                                              completion=reference), engine, limits)
    assert good.passed and good.tests_total == 2
    broken = evaluate_function(task, Generation(
        task_id=task.task_id, sample_idx=0,
        completion="def scale(values, factor=2):\n    import no_such_module_here\n    return values\n"),
        engine, limits)
    assert broken.tests_passed == 0
    # a target file that no longer imports: every test fails with the collection error
    syntax = evaluate_function(task, Generation(
        task_id=task.task_id, sample_idx=0,
        completion="def scale(values, factor=2):\n    return values + undefined_name\n"), engine, limits)
    assert syntax.tests_passed == 0


def test_definitions_of_other_targets_are_not_helpers(tmp_path):
    """A reply for several targets in several files: each file gets its own targets only."""
    (tmp_path / "a.py").write_text("from typing import Optional\n\n\ndef f(x: Optional[int]):\n    return x\n")
    (tmp_path / "b.py").write_text("class K:\n    def g(self):\n        return 1\n")
    reply = "def f(x):\n    return _h(x)\n\n\ndef _h(x):\n    return x + 1\n\n\nclass K:\n    def g(self):\n        return 2\n"
    files = patch_targets(tmp_path, ".", [ProjectTarget(file="a.py", qualname="f"),
                                          ProjectTarget(file="b.py", qualname="K.g")], reply)
    assert "class K" not in files["a.py"] and "def _h" in files["a.py"]
    assert "def f" not in files["b.py"] and "return 2" in files["b.py"]
    namespace: dict = {}
    exec(compile(files["a.py"], "a.py", "exec"), namespace)
    assert namespace["f"](1) == 2


def test_bad_project_tasks_are_refused_with_the_line_and_field(tmp_path):
    from knowbench.errors import BenchmarkError

    root = _bench(tmp_path, [{"file": "geometry/shapes.py", "qualname": "scale"}],
                  ["tests/test_area.py"], "def scale(values, factor=2):\n    return values\n",
                  "def scale(values, factor=2):\n    ...\n")
    task = json.loads((root / "tasks.jsonl").read_text())
    for change, expected in (
            ({"tests": ["tests/missing.py"]}, "names no file among the task's tests"),
            ({"path": "../elsewhere"}, "relative '/'-separated path"),
            ({"path": "projects/absent"}, "project directory 'projects/absent' does not exist")):
        broken = {**task, "project": {**task["project"], **change}}
        (root / "tasks.jsonl").write_text(json.dumps(broken) + "\n")
        with pytest.raises(BenchmarkError, match=expected) as caught:
            load_benchmark(root)
        assert "tasks.jsonl:1" in str(caught.value)


def test_a_program_runs_in_the_copy_without_the_omitted_files_on_both_engines(tmp_path, any_engine):
    """No project tests: the request's own program runs in the project's copy (cwd: the
    workdir, python_path importable), with files written over it and others left out."""
    from knowbench.benchmark.schema import TestSpec
    from knowbench.execution.engine import ExecutionRequest
    from knowbench.execution.projects import ProjectRun, withheld_targets

    root = _bench(tmp_path, [{"file": "geometry/shapes.py", "qualname": "Circle.area"}],
                  ["tests/test_area.py"], "", "class Circle:\n    def area(self):\n        ...\n")
    tree = root / "projects" / "geo"
    files = withheld_targets(tree, "code", [ProjectTarget(file="geometry/shapes.py", qualname="Circle.area")])
    program = ("import os\nfrom geometry.shapes import Circle, scale\nprint(os.path.basename(os.getcwd()), "
               "sorted(os.listdir('tests')), scale([2]))\ntry:\n    Circle(1).area()\n"
               "except NotImplementedError as error:\n    print(error)\n")
    execution = any_engine.execute(ExecutionRequest(
        program=program, tests=[TestSpec(name="snippet", code="pass")], limits=Limits(wall_s=60),
        preload=[], project=ProjectRun(tree=str(tree), workdir="code", files=files, tests=[],
                                       omit=["code/tests/test_area.py"])))
    assert execution.status == "pass", execution
    assert "code ['test_pipeline.py'] [4]" in execution.stdout
    assert "withheld: Circle.area is what the task asks for" in execution.stdout
    assert (tree / "code" / "tests" / "test_area.py").exists()  # the benchmark's tree is untouched


GUARDED = '''import ctypes
import errno
import socket


def test_no_netlink_socket():
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4).close()
    except OSError as error:
        assert error.errno == errno.EAFNOSUPPORT
    else:
        raise AssertionError("a netlink socket was made")


def test_no_io_uring():
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    params = ctypes.create_string_buffer(120)
    assert [syscall(425, 8, params), ctypes.get_errno()] == [-1, errno.ENOSYS]
'''


def test_a_projects_tests_get_every_samples_seccomp_filter_on_both_engines(tmp_path, any_engine):
    """The project's own pytest runs under the filter every other sample's process gets: no
    socket the memory budget cannot count (netlink), no io_uring (x86_64's numbers)."""
    import platform

    from knowbench.benchmark.schema import TestSpec
    from knowbench.execution.engine import ExecutionRequest
    from knowbench.execution.projects import ProjectRun

    if platform.machine() != "x86_64":
        pytest.skip("io_uring_setup's number here is x86_64's")
    tree = tmp_path / "guarded"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_guarded.py").write_text(GUARDED)
    execution = any_engine.execute(ExecutionRequest(
        program="", tests=[TestSpec(name="tests/test_guarded.py", code=GUARDED)], limits=Limits(wall_s=60),
        preload=[], project=ProjectRun(tree=str(tree), tests=["tests/test_guarded.py"])))
    assert [outcome.status for outcome in execution.tests] == ["pass", "pass"], execution
