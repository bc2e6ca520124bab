"""Model-conditional filters of novel-API tasks (stage 4 of `knowbench novel`), recorded per task
and per model in NovelAPIBench's layout, so the importer's reader (`novelapibench.read_filters`)
rebuilds the instance from them:

    <out>/data/benchmark/filters/c1.jsonl           C1: the reference passes its own harness
    <out>/data/benchmark/filters/c2/<model>.jsonl   C2: novelty for `model`
    <out>/data/benchmark/filters/c3/<model>.jsonl   C3: informativeness, for `model`'s novel tasks
    <out>/data/benchmark/instances/<model>.txt      C1 ∩ C2(model) ∩ C3, in task order
    <out>/runs/c2-<model>/, <out>/runs/c3-<model>/  the knowbench runs the records come from

C1 runs each task's reference (target-API spy on, as every sample). C2 samples `model` n
times (default 3, temperature 0.8) without knowledge (`--method none`); a task is *novel* when
at least `novel_fails` (default 2) samples fail. C3 samples the solver model n times with the
task's Full bundle (`oracle:Full`) on C1-passed novel tasks; it passes when at least one sample
passes. The release's own records differ in one threshold: its C2 called a task novel only
when all three samples failed (`--novel-fails 3` reproduces that).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from knowbench.benchmark.load import Benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.builders.novelapibench import BENCHMARK_DIR, locate, read_filters
from knowbench.execution.engine import Engine
from knowbench.methods.none import NoKnowledge
from knowbench.methods.oracle import OracleMethod
from knowbench.models.base import ModelBackend
from knowbench.records import Generation, Limits, SampleResult, SamplingParams
from knowbench.run import evaluate_function, run_benchmark


def safe_name(model: str) -> str:
    """A model name as a file name ('org/model:tag' -> 'org_model_tag')."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", model).strip("_") or "model"


def _error(result: SampleResult) -> str | None:
    if result.passed:
        return None
    if result.execution is not None:
        for test in result.execution.tests:
            if test.status != "pass":
                return (test.message.strip() or test.reason or test.status)[:200]
    return str(result.extra.get("assembly_error") or result.status)[:200]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def c1_records(benchmark: Benchmark, engine: Engine, limits: Limits) -> list[dict[str, Any]]:
    rows = []
    for task in _function_tasks(benchmark):
        result = evaluate_function(task, Generation(task_id=task.task_id, sample_idx=0, completion=task.reference),
                                   engine, limits, list(benchmark.manifest.preload), "in-process")
        rows.append({"task_id": task.task_id, "api_name": task.target_api, "passed": result.passed,
                     "error": _error(result)})
    return rows


def run_filters(benchmark: Benchmark, out: Path, engine: Engine, limits: Limits, *, model: ModelBackend,
                model_name: str, solver: ModelBackend, solver_name: str, n: int = 3,
                temperature: float = 0.8, novel_fails: int = 2, max_tokens: int = 1024) -> dict[str, Any]:
    """Write C1, C2(model), C3 records and the instance of `model_name` under `out`; returns counts."""
    folder = out / BENCHMARK_DIR
    tasks = {task.task_id: task for task in _function_tasks(benchmark)}
    c1 = c1_records(benchmark, engine, limits)
    _write(folder / "filters" / "c1.jsonl", c1)
    passed = [row["task_id"] for row in c1 if row["passed"]]
    params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=0)
    key = safe_name(model_name)
    c2: list[dict[str, Any]] = []
    if passed:
        summary = run_benchmark(benchmark, model, NoKnowledge(), engine, out / "runs" / f"c2-{key}", params, limits,
                                task_ids=passed, ks=(1,), isolation="in-process", overwrite=True)
        by_task = _by_task(summary.results)
        for task_id in passed:
            fails = [not result.passed for result in by_task.get(task_id, [])]
            c2.append({"task_id": task_id, "api_name": tasks[task_id].target_api, "model": model_name,
                       "novel": sum(fails) >= novel_fails, "fail_count": sum(fails), "sample_fails": fails})
    _write(folder / "filters" / "c2" / f"{key}.jsonl", c2)
    novel = [row["task_id"] for row in c2 if row["novel"]]
    c3: list[dict[str, Any]] = []
    if novel:
        summary = run_benchmark(benchmark, solver, OracleMethod(cell="Full"), engine, out / "runs" / f"c3-{key}",
                                params, limits, task_ids=novel, ks=(1,), isolation="in-process", overwrite=True)
        by_task = _by_task(summary.results)
        for task_id in novel:
            results = by_task.get(task_id, [])
            failing = [result for result in results if not result.passed]
            c3.append({"task_id": task_id, "api_name": tasks[task_id].target_api, "solver": solver_name,
                       "passed": any(result.passed for result in results),
                       "n_passed": sum(result.passed for result in results),
                       "error": None if len(failing) < len(results) else (_error(failing[-1]) if failing
                                                                          else "no sample")})
    _write(folder / "filters" / "c3" / f"{key}.jsonl", c3)
    instance = read_filters(locate(out), key).instance()
    (folder / "instances").mkdir(parents=True, exist_ok=True)
    (folder / "instances" / f"{key}.txt").write_text("".join(f"{task_id}\n" for task_id in instance))
    return {"model": model_name, "solver": solver_name, "tasks": len(tasks), "c1_passed": len(passed),
            "c2_novel": len(novel), "c3_passed": sum(row["passed"] for row in c3), "instance": len(instance),
            "novel_fails": novel_fails, "n": n, "out": str(out)}


def _function_tasks(benchmark: Benchmark) -> list[FunctionTask]:
    return [task for task in benchmark.tasks if isinstance(task, FunctionTask)]


def _by_task(results: list[SampleResult]) -> dict[str, list[SampleResult]]:
    grouped: dict[str, list[SampleResult]] = {}
    for result in sorted(results, key=lambda r: (r.task_id, r.sample_idx)):
        grouped.setdefault(result.task_id, []).append(result)
    return grouped
