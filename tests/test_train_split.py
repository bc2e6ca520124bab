"""`knowbench split`: train and test parts that never share a target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowbench.benchmark.load import Benchmark, load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.errors import UserError
from knowbench.training.split import library_of, make_split, read_split, target_key, write_split

ROOT = Path(__file__).resolve().parents[1]
BASIC = load_benchmark(ROOT / "examples" / "basic")


def with_tasks(tasks: list) -> Benchmark:
    return Benchmark(BASIC.path, BASIC.manifest, tasks, BASIC.content_hash + "-changed")


def shared_targets(bench: Benchmark, train: list[str], test: list[str]) -> set[str]:
    def targets(ids: list[str]) -> set[str]:
        return {key for task_id in ids if (key := target_key(bench.task(task_id)))}
    return targets(train) & targets(test)


def copies(count: int) -> list[FunctionTask]:
    """`count` function tasks of examples/basic, each copied under a new id with the same
    target API, so tasks that share a target exist."""
    functions = [task for task in BASIC.tasks if isinstance(task, FunctionTask)]
    return [task.model_copy(update={"task_id": f"{task.task_id}-copy"}) for task in functions[:count]]


@pytest.mark.parametrize("by", ["task", "api", "library"])
def test_train_and_test_never_share_a_target(by: str) -> None:
    bench = with_tasks([*BASIC.tasks, *copies(6)])
    for seed in range(5):
        split = make_split(bench, by, test_share=0.3, seed=seed)
        assert not shared_targets(bench, split.train, split.test)
        assert sorted(split.train + split.test) == sorted(task.task_id for task in bench.tasks)
        assert split.test and split.train


def test_a_split_is_reproducible_and_independent_of_task_order() -> None:
    first = make_split(BASIC, "task", test_share=0.25, seed=3)
    reordered = with_tasks(list(reversed(BASIC.tasks)))
    again = make_split(reordered, "task", test_share=0.25, seed=3)
    assert set(first.test) == set(again.test)
    assert len(first.test) == round(0.25 * len(BASIC.tasks))
    assert make_split(BASIC, "task", test_share=0.25, seed=4).test != first.test


def test_by_api_keeps_tasks_that_share_a_knowledge_api_together() -> None:
    functions = [task for task in BASIC.tasks if isinstance(task, FunctionTask)]
    linked = [task.model_copy(update={"knowledge_apis": ["shared.api"]}) for task in functions[:2]]
    ids = {task.task_id for task in linked}
    bench = with_tasks([*linked, *(task for task in BASIC.tasks if task.task_id not in ids)])
    apart = 0
    for seed in range(8):
        split = make_split(bench, "api", test_share=0.2, seed=seed)
        assert ids <= set(split.train) or ids <= set(split.test)
        by_task = make_split(bench, "task", test_share=0.2, seed=seed)
        apart += not (ids <= set(by_task.train) or ids <= set(by_task.test))
    assert apart, "by task, the two tasks (different targets) are split apart for some seed"


def test_leave_one_library_out() -> None:
    split = make_split(BASIC, "library", leave_out="json")
    assert split.test == [task.task_id for task in BASIC.tasks if library_of(task) == "json"]
    assert split.by == "library" and split.leave_out == "json"
    with pytest.raises(UserError, match="its libraries: bisect, calendar"):
        make_split(BASIC, "library", leave_out="numpy")


def test_a_split_file_is_refused_for_another_benchmark_content(tmp_path: Path) -> None:
    path = tmp_path / "split.json"
    write_split(make_split(BASIC, "task"), path)
    assert read_split(path, BASIC).test == json.loads(path.read_text())["test"]
    with pytest.raises(UserError, match="make the split again"):
        read_split(path, with_tasks(BASIC.tasks))
    with pytest.raises(UserError, match="not found"):
        read_split(tmp_path / "none.json")
    with pytest.raises(UserError, match="strictly between"):
        make_split(BASIC, "task", test_share=1.0)
