"""Helpers for the diagnosis, report, compare and leaderboard tests.

`FIXTURES` are the labelled failing samples of tests/fixtures/failures.jsonl (rebuilt by
tests/fixtures/make_failures.py). `store_run` writes a real run directory (run.json and a
RunStore with the given results), the layout `knowbench run` produces, so the commands
under test read it exactly as they read a real run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from knowbench.records import SampleResult
from knowbench.scoring.surface import ApiSurface
from knowbench.scoring.taxonomy import TaskInfo
from knowbench.store import RunStore

FIXTURE_FILE = Path(__file__).parent / "fixtures" / "failures.jsonl"


@dataclass(frozen=True)
class LabelledFailure:
    id: str
    source: str
    group: str  # rule-case, real-default or real-other (see tests/fixtures/make_failures.py)
    expected: str
    why: str
    task: TaskInfo
    surface: ApiSurface | None
    result: SampleResult


@cache
def fixtures() -> tuple[LabelledFailure, ...]:
    rows = []
    for line in FIXTURE_FILE.read_text().splitlines():
        row = json.loads(line)
        rows.append(LabelledFailure(
            id=row["id"], source=row["source"], group=row["group"], expected=row["expected"], why=row["why"],
            task=TaskInfo.model_validate(row["task"]),
            surface=ApiSurface.model_validate(row["surface"]) if row["surface"] else None,
            result=SampleResult.model_validate(row["result"])))
    return tuple(rows)


def settings(model: str = "m", method: str = "none", benchmark_hash: str = "sha256:abc",
             **extra: Any) -> dict[str, Any]:
    """A run.json "settings" block like `run_benchmark` writes."""
    return {
        "benchmark": {"name": "bench", "version": "1", "path": "/nonexistent",
                      "content_hash": benchmark_hash},
        "model": {"backend": "openai", "model": model, "base_url": "http://127.0.0.1:1/v1"},
        "method": {"method": method},
        "params": {"n": 1, "temperature": 0.0, "top_p": 1.0, "max_tokens": 1024, "seed": None},
        "limits": {"wall_s": 10.0, "memory_mb": 1024},
        "timeout_override": False, "sandbox": "bwrap", "tasks": None, **extra,
    }


def store_run(run_dir: Path, results: list[SampleResult], run_settings: dict[str, Any]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"knowbench": "test", "settings": run_settings}))
    store = RunStore(run_dir)
    try:
        for result in results:
            store.put_result(result)
    finally:
        store.close()
    return run_dir


def sample(task_id: str, passed: bool, idx: int = 0, domain: str = "d", kind: str = "function",
           **extra: Any) -> SampleResult:
    """A minimal scored sample (no execution record)."""
    return SampleResult(task_id=task_id, sample_idx=idx, kind=kind, domain=domain, completion="",
                        passed=passed, tests_passed=int(passed), tests_total=1,
                        status="pass" if passed else "fail", **extra)
