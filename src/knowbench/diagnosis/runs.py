"""Diagnosing a stored run: failure labels for every failed function sample of a run directory.

`diagnose_run` reads the run through `RunDirectory` (never executes a sample), labels it
with the deterministic classifier, optionally asks a judge about the ambiguous cases, and
`write_diagnoses` stores the labels as the run's `diagnoses.jsonl`. `load_diagnoses` gives the
stored labels back for the samples they were made from, and labels the rest on the spot
(deterministically), so a report always covers every failure.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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
from knowbench.store import RunDirectory


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
    decides the ambiguous cases (see knowbench.diagnosis.judge). Raises `UserError` when
    `run_dir` is not a run directory.
    """
    run = RunDirectory.open(run_dir)
    results = run.results()
    infos = task_infos(run.tasks())
    surface = None
    if introspect:
        surface, _ = introspect_surface(imported_packages(results), python=python)
    diagnoses = classify_all(results, infos, surface)
    if judge_backend is not None:
        from knowbench.diagnosis.judge import judge

        by_key = {(r.task_id, r.sample_idx): r for r in results}
        diagnoses = judge(diagnoses, by_key, infos, judge_backend, judge_model)
    return diagnoses


def write_diagnoses(run_dir: Path, diagnoses: Iterable[Diagnosis]) -> Path:
    """Store the diagnoses with the run; returns the file written."""
    return RunDirectory(run_dir).write_diagnoses(diagnoses)


def load_diagnoses(run_dir: Path, results: Iterable[SampleResult],
                   tasks: Mapping[str, TaskInfo] | None = None,
                   surface: ApiSurface | None = None) -> list[Diagnosis]:
    """A diagnosis for every failed function sample of `results`: the stored one when it
    was made from exactly that sample (same digest), a fresh deterministic one otherwise."""
    stored = {(d.task_id, d.sample_idx): d for d in RunDirectory(run_dir).diagnoses()}
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
