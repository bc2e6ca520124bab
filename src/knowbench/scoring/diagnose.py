"""Diagnosing a stored run: failure labels for every failed function sample of a run directory.

`diagnose_run` reads the run (never executes a sample), labels it with the deterministic
classifier, optionally asks a judge about the ambiguous cases, and `write_diagnoses` stores
the labels as `diagnoses.jsonl` next to the run's other files. `load_diagnoses` gives the
stored labels back for the samples they were made from, and labels the rest on the spot
(deterministically), so a report always covers every failure.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.records import SampleResult
from knowbench.scoring.surface import ApiSurface, introspect_surface
from knowbench.scoring.taxonomy import (
    Diagnosis,
    TaskInfo,
    classify,
    classify_all,
    code_facts,
    sample_digest,
)

DIAGNOSES_FILE = "diagnoses.jsonl"


def run_tasks(run_json: Mapping[str, Any]) -> dict[str, FunctionTask | ChoiceTask]:
    """The tasks of the benchmark a run used, when its directory still exists and its
    content hash still matches; {} otherwise (reports then omit instructions and reference
    diffs)."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.errors import UserError

    benchmark = run_json.get("settings", {}).get("benchmark", {})
    path = benchmark.get("path")
    if not path or not Path(path).is_dir():
        return {}
    try:
        loaded = load_benchmark(Path(path))
    except UserError:
        return {}
    if benchmark.get("content_hash") and loaded.content_hash != benchmark["content_hash"]:
        return {}
    return {task.task_id: task for task in loaded.tasks}


def task_infos(tasks: Mapping[str, FunctionTask | ChoiceTask]) -> dict[str, TaskInfo]:
    """What the classifier may know of each function task."""
    return {task_id: TaskInfo.from_task(task) for task_id, task in tasks.items()
            if isinstance(task, FunctionTask)}


def imported_packages(results: Iterable[SampleResult]) -> list[str]:
    """Top-level third-party packages that the failed samples' code imports."""
    stdlib = sys.stdlib_module_names
    packages: set[str] = set()
    for result in results:
        if result.passed or result.kind != "function":
            continue
        facts = code_facts(result.program or result.code or result.completion)
        packages |= {target.split(".")[0] for target in facts.imported.values()}
    return sorted(package for package in packages if package and package not in stdlib)


def diagnose_run(run_dir: Path, *, introspect: bool = False, python: str | None = None,
                 judge_backend: Any = None, judge_model: str = "") -> list[Diagnosis]:
    """Label every failed function sample of the run in `run_dir`.

    introspect: also learn the API surface of the third-party packages the samples import
    (imported in a separate process with `python`). judge_backend: a model backend that
    decides the ambiguous cases (see knowbench.scoring.judge). Raises `UserError` when
    `run_dir` is not a run directory.
    """
    from knowbench.run import load_run

    run_json, results = load_run(run_dir)
    infos = task_infos(run_tasks(run_json))
    surface = None
    if introspect:
        surface, _ = introspect_surface(imported_packages(results), python=python)
    diagnoses = classify_all(results, infos, surface)
    if judge_backend is not None:
        from knowbench.scoring.judge import judge

        by_key = {(r.task_id, r.sample_idx): r for r in results}
        diagnoses = judge(diagnoses, by_key, infos, judge_backend, judge_model)
    return diagnoses


def write_diagnoses(run_dir: Path, diagnoses: Iterable[Diagnosis]) -> Path:
    path = Path(run_dir) / DIAGNOSES_FILE
    with path.open("w") as handle:
        for diagnosis in diagnoses:
            handle.write(diagnosis.model_dump_json() + "\n")
    return path


def load_diagnoses(run_dir: Path, results: Iterable[SampleResult],
                   tasks: Mapping[str, TaskInfo] | None = None,
                   surface: ApiSurface | None = None) -> list[Diagnosis]:
    """A diagnosis for every failed function sample of `results`: the stored one when it
    was made from exactly that sample (same digest), a fresh deterministic one otherwise."""
    stored: dict[tuple[str, int], Diagnosis] = {}
    path = Path(run_dir) / DIAGNOSES_FILE
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                diagnosis = Diagnosis.model_validate_json(line)
            except (ValidationError, json.JSONDecodeError):
                continue
            stored[(diagnosis.task_id, diagnosis.sample_idx)] = diagnosis
    found = []
    for result in results:
        if result.passed or result.kind != "function":
            continue
        saved = stored.get((result.task_id, result.sample_idx))
        if saved is not None and saved.sample_digest == sample_digest(result):
            found.append(saved)
            continue
        fresh = classify(result, (tasks or {}).get(result.task_id), surface)
        if fresh is not None:
            found.append(fresh)
    return found
