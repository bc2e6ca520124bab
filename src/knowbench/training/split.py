"""Train/test splits of a benchmark (`knowbench split`): tasks that share a target never fall on
both sides, so a model tuned on the train part has not seen a test task's answer.

Tasks are linked when they share a key and linked tasks form one group; groups, not tasks,
are assigned to a side:

- `task`: each task is its own group, except that tasks with the same target (its
  `target_api`, else module + entry point) stay together;
- `api`: also tasks that share any API of `knowledge_apis`: no API a test task needs is
  taught by a train task's answer;
- `library`: the task's library (`framework`, else the top package of its target, else its
  domain), plus the target links. `leave_out=LIB` makes LIB's groups the test part
  (leave-one-library-out).

Groups are ordered by a hash of the seed and their first task id and taken into the test part
until it holds `test_share` of the tasks, so a split is reproducible and independent of the
order of tasks.jsonl.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from knowbench.benchmark.load import Benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask, source_location
from knowbench.errors import UserError, first_problem

SplitBy = Literal["task", "api", "library"]
SPLIT_BY: tuple[str, ...] = ("task", "api", "library")


class Split(BaseModel):
    """A split of one benchmark, as `knowbench split` writes it (JSON)."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    content_hash: str
    by: SplitBy
    test_share: float
    seed: int
    leave_out: str | None = None
    groups: int
    train: list[str]
    test: list[str]


def target_key(task: FunctionTask | ChoiceTask) -> str | None:
    """What a task's answer defines: its target API, else its module and entry point."""
    if not isinstance(task, FunctionTask):
        return None
    if task.target_api:
        return task.target_api
    module = source_location(task.metadata).module
    return f"{module}.{task.entry_point}" if module else None


def library_of(task: FunctionTask | ChoiceTask) -> str:
    if task.framework:
        return task.framework
    target = target_key(task)
    return target.split(".")[0] if target else task.domain


def _keys(task: FunctionTask | ChoiceTask, by: str) -> set[str]:
    keys = {f"task:{task.task_id}"}
    target = target_key(task)
    if target:
        keys.add(f"target:{target}")
    if by == "api" and isinstance(task, FunctionTask):
        keys.update(f"target:{api}" for api in task.knowledge_apis)
    if by == "library":
        keys.add(f"library:{library_of(task)}")
    return keys


def _groups(tasks: list[FunctionTask | ChoiceTask], by: str) -> list[list[str]]:
    parent = list(range(len(tasks)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    owner: dict[str, int] = {}
    for index, task in enumerate(tasks):
        for key in _keys(task, by):
            if key in owner:
                parent[root(index)] = root(owner[key])
            else:
                owner[key] = index
    members: dict[int, list[str]] = {}
    for index, task in enumerate(tasks):
        members.setdefault(root(index), []).append(task.task_id)
    return list(members.values())


def make_split(benchmark: Benchmark, by: str = "task", test_share: float = 0.2, seed: int = 0,
               leave_out: str | None = None) -> Split:
    """Split `benchmark` (see the module docstring). Raises `UserError` for a split with an
    empty side, an unknown `by`, or a library to leave out that the benchmark lacks."""
    if by not in SPLIT_BY:
        raise UserError(f"--by must be one of {', '.join(SPLIT_BY)}, not '{by}'")
    if not 0.0 < test_share < 1.0:
        raise UserError(f"--test-share must lie strictly between 0 and 1, got {test_share}")
    tasks = list(benchmark.tasks)
    groups = _groups(tasks, "library" if leave_out else by)
    test: set[str] = set()
    if leave_out:
        libraries = {task.task_id: library_of(task) for task in tasks}
        known = sorted(set(libraries.values()))
        if leave_out not in known:
            raise UserError(f"--leave-out {leave_out}: {benchmark.name} has no such library; "
                            f"its libraries: {', '.join(known)}")
        for group in groups:
            if any(libraries[task_id] == leave_out for task_id in group):
                test.update(group)
    else:
        wanted = test_share * len(tasks)

        def order(group: list[str]) -> str:
            return hashlib.sha256(f"{seed}\0{min(group)}".encode()).hexdigest()

        for group in sorted(groups, key=order):
            if len(test) >= wanted:
                break
            if len(test) + len(group) < len(tasks):
                test.update(group)
    train = [task.task_id for task in tasks if task.task_id not in test]
    if not train or not test:
        raise UserError(f"the split of {benchmark.name} by {by} leaves one side empty ("
                        f"{len(train)} train, {len(test)} test tasks in {len(groups)} groups)\n"
                        "  fix: change --test-share or --by, or leave out another library")
    return Split(benchmark=benchmark.name, content_hash=benchmark.content_hash,
                 by="library" if leave_out else by, test_share=test_share, seed=seed,  # type: ignore[arg-type]
                 leave_out=leave_out, groups=len(groups), train=train,
                 test=[task.task_id for task in tasks if task.task_id in test])


def write_split(split: Split, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(split.model_dump_json(indent=2) + "\n")


def read_split(path: Path, benchmark: Benchmark | None = None) -> Split:
    """A split file; with `benchmark`, refused when it was made from other content."""
    try:
        split = Split.model_validate(json.loads(path.read_text()))
    except FileNotFoundError:
        raise UserError(f"{path}: split file not found (make one with `knowbench split BENCH`)") from None
    except (ValueError, ValidationError) as error:
        raise UserError(f"{path}: not a split written by `knowbench split` ({first_problem(error)})") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory; give a split file (make one with `knowbench split BENCH`)") from None
    if benchmark is not None and split.content_hash != benchmark.content_hash:
        raise UserError(f"{path} splits {split.benchmark} as it was ({split.content_hash[:19]}…), "
                        f"not {benchmark.path} as it is now\n  fix: make the split again")
    return split
