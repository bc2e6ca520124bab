"""One parse lock (`knowbench.benchmark.schema.PARSE_LOCK`): every thread that parses code to
run it (evaluation, certification) parses under it, so no two threads parse at once."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

import knowbench.builders.certify as certify
from knowbench.benchmark.schema import PARSE_LOCK, FunctionTask, TestSpec
from knowbench.execution.engine import Engine, ExecutionRequest
from knowbench.program import assemble
from knowbench.records import Execution

ADD = "def add(a, b):\n    return a + b\n"
TASK = FunctionTask(task_id="math/add", domain="math", instruction="Add.",
                    prompt_code="def add(a, b):\n    ...\n", entry_point="add", reference=ADD,
                    tests=[TestSpec(name="t", code="def test_add():\n    assert add(1, 2) == 3\n")])


def held_elsewhere() -> bool:
    """Whether some other thread holds the parse lock now."""
    free: list[bool] = []
    probe = threading.Thread(target=lambda: free.append(PARSE_LOCK.acquire(blocking=False)))
    probe.start()
    probe.join()
    if free[0]:
        PARSE_LOCK.release()
    return not free[0]


class RecordingEngine(Engine):
    """Runs nothing: records the request it was handed."""

    def __init__(self) -> None:
        self.workers = 1
        self.requests: list[ExecutionRequest] = []

    def execute(self, request: ExecutionRequest) -> Execution:
        self.requests.append(request)
        raise RuntimeError("not run")

    def hide(self, paths: Iterable[str | Path]) -> None:
        pass


def test_a_thread_holding_the_lock_can_read_a_specs_items() -> None:
    found: list[int] = []
    spec = TestSpec(name="fresh", code="def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")

    def read() -> None:
        with PARSE_LOCK:
            found.append(len(spec.items()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert found == [2]


def test_certification_assembles_programs_under_the_schema_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def spying_assemble(*args: str) -> object:
        seen.append(held_elsewhere())
        return assemble(*args)

    monkeypatch.setattr(certify, "assemble", spying_assemble)
    engine = RecordingEngine()
    with pytest.raises(RuntimeError, match="not run"):
        certify.Checker(engine).execute(TASK, ADD)
    assert seen == [True] and len(engine.requests) == 1
