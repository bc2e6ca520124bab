"""`knowbench mine`: DomainEval's construction pipeline, with certified tests.

Stages, each counted in `build_report.json`, and the module that does each:

1. **source**: fetch and unpack each source (directory, sdist/wheel, PyPI requirement):
   `knowbench.builders.source`.
2. **discover**: find test units and trace each to the library functions it calls
   (`knowbench.builders.discover`); every traced function is a candidate target and all the
   tests that call it form its suite.
3. **static filters**: not trivial (constructors, one-statement property getters, pure
   delegation, bodies that only call what the context supplies, abstract stubs), body of `min_lines`..`max_lines` lines, no banned keyword in the
   reference or its context, a prompt of at most `max_prompt_lines`; tests holding a banned
   keyword leave the suite.
4. **assemble**: cut prompt, reference and context (`knowbench.builders.context`); rewrite the
   suite into self-contained specs (`knowbench.builders.harness`). Stages 2 to 4 make the
   candidates of one source: `knowbench.builders.candidates`.
5. **environment**: the benchmark's requirements are the mined distribution and the
   third-party packages its tests and contexts import, pinned to what got installed:
   `knowbench.builders.environment`.
6. **prune**: run reference and both stubs in the sandbox; repair names the context missed
   (NameError -> import from the installed module, a bounded number of rounds); keep the
   tests that pass on the reference, run the target, fail on both stubs and are not slow.
7. **certify**: re-run the pruned suites (reference, stubs, optional mutants); only certified
   tasks are published, and with mutants only those whose tests kill at least
   `min_mutation_score` of them. Stages 6 and 7: `knowbench.builders.selection`, on the executions
   of `knowbench.builders.certify`.
8. **instruct**: Functionality / Inputs / Outputs from the docstring, or from a model.

This module runs them in order and writes the benchmark, its manifest and the build report.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from knowbench import __version__
from knowbench.benchmark.load import write_benchmark
from knowbench.benchmark.preload import guarded_modules, preload_modules
from knowbench.benchmark.schema import Manifest, Provenance
from knowbench.builders.build_log import BuildReport, SourceReport
from knowbench.builders.candidates import Draft as _Draft
from knowbench.builders.candidates import find_candidates
from knowbench.builders.certify import Checker, evaluate
from knowbench.builders.environment import build_environment
from knowbench.builders.instructions import docstring_instruction, llm_instructions
from knowbench.builders.options import MineOptions, Progress
from knowbench.builders.requirements import requirement_name
from knowbench.builders.selection import certification_record, certify_drafts, prune
from knowbench.builders.source import Source, fetch_source
from knowbench.errors import UserError
from knowbench.execution import ENGINES, SANDBOXES, create_engine
from knowbench.execution.environments import BenchEnv
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.paths import check_output
from knowbench.records import Limits

REPORT_FILE = "build_report.json"
PRUNE_TIME_FACTOR = 3


@dataclass(frozen=True)
class SourceRequest:
    spec: str
    domain: str


def mine(requests: list[SourceRequest], out: Path, options: MineOptions | None = None,
         name: str | None = None, progress: Progress | None = None) -> BuildReport:
    """Mine every source into one benchmark at `out`; returns (and writes) the build report.

    Raises `UserError` for unusable sources, requirements that cannot be installed, or an
    output directory that holds something other than a benchmark.
    """
    options = options or MineOptions()
    say = progress or (lambda message: None)
    if not requests:
        raise UserError("nothing to mine: give a SOURCE with --domain, or --source SPEC=DOMAIN")
    specs = [request.spec for request in requests]
    twice = sorted({spec for spec in specs if specs.count(spec) > 1})
    if twice:  # (its tasks would get the same ids: the benchmark could not be written)
        raise UserError(f"{', '.join(twice)} given more than once; mine each source once, with one domain")
    if options.min_lines > options.max_lines:  # (no target could be kept)
        raise UserError(f"--min-lines {options.min_lines} is more than --max-lines {options.max_lines}; "
                        "no function could be a target")
    ENGINES.get(options.engine)  # (refused now, not once the sources are fetched and traced)
    SANDBOXES.get(options.sandbox)
    _check_out(out)
    started = time.monotonic()
    report = BuildReport(tool=f"knowbench {__version__}", created=_now(), options=_options_record(options))
    workdir = Path(tempfile.mkdtemp(prefix="knowbench-mine-"))
    try:
        drafts: list[_Draft] = []
        sources: list[Source] = []
        for request in requests:
            clock = time.monotonic()
            say(f"fetching {request.spec} …")
            source = fetch_source(request.spec, workdir)
            sources.append(source)
            source_report = SourceReport(**source.describe(), domain=request.domain)
            source_report.seconds["fetch"] = round(time.monotonic() - clock, 2)
            report.sources.append(source_report)
            clock = time.monotonic()
            found = find_candidates(source, request.domain, options, source_report, report)
            source_report.seconds["static"] = round(time.monotonic() - clock, 2)
            say(f"{source.name} {source.version}: {source_report.counts['test_units']} test units, "
                f"{source_report.counts['targets_traced']} traced targets, {len(found)} candidates")
            drafts += found
        if not drafts:
            _write_report_only(out, report, started)
            raise UserError(f"no candidate task in {', '.join(r.spec for r in requests)}: "
                            f"{report.sources[-1].counts.get('test_units', 0)} test units found; see "
                            f"{out / REPORT_FILE} for why each traced target was dropped")
        clock = time.monotonic()
        env = build_environment(sources, drafts, report, say)
        report.seconds["environment"] = round(time.monotonic() - clock, 2)
        published = _execute_stages(drafts, env, out, options, report, say)
        clock = time.monotonic()
        _instruct(published, options, report, say)
        report.seconds["instruct"] = round(time.monotonic() - clock, 2)
        manifest = _manifest(out, name, requests, sources, env, options, len(published))
        tasks = [draft.task for draft in published]
        if not tasks:
            _write_report_only(out, report, started)
            raise UserError(f"no task survived certification; see {out / REPORT_FILE} for why each "
                            "candidate was dropped")
        write_benchmark(out, manifest, tasks)
        report.benchmark = str(out)
        report.seconds["total"] = round(time.monotonic() - started, 2)
        _finish_counts(report)
        (out / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n")
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _write_report_only(out: Path, report: BuildReport, started: float) -> None:
    report.seconds["total"] = round(time.monotonic() - started, 2)
    _finish_counts(report)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n")


def _check_out(out: Path) -> None:
    check_output(out, "--out", directory=True)
    if out.is_dir() and any(out.iterdir()) and not (out / "benchmark.json").is_file():
        raise UserError(f"--out {out} exists and is not a benchmark directory\n"
                        "  fix: choose a new or empty directory")


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _options_record(options: MineOptions) -> dict[str, Any]:
    return {"engine": options.engine, "mutants": options.mutants,
            "min_mutation_score": options.min_mutation_score if options.mutants else None,
            "min_lines": options.min_lines,
            "max_lines": options.max_lines,
            "max_prompt_lines": options.max_prompt_lines, "max_tests": options.max_tests,
            "time_limit_s": options.time_limit_s, "max_tasks": options.max_tasks,
            "banned_keywords": len(options.banned), "llm": options.llm.describe() if options.llm else None}


# ------------------------------------------------------------------------ execution stages


def _execute_stages(drafts: list[_Draft], env: BenchEnv, out: Path, options: MineOptions,
                    report: BuildReport, say: Progress) -> list[_Draft]:
    """Prune on the reference, certify (stubs), prune what passes on a stub and certify
    again, then score mutants of what is certified."""
    sandbox = resolve_sandbox(options.sandbox, python=env.python)
    tasks = [d.task for d in drafts]
    # Mined suites come from pytest projects: keep pytest warm even where no kept test names it.
    engine = create_engine(options.engine, sandbox, options.workers or os.cpu_count() or 2, env.python,
                           preload_modules(tasks, declared=["pytest"]), env.requirements)
    engine.hide([out])  # the benchmark being written holds the references
    limits = Limits(wall_s=options.time_limit_s, cpu_s=int(options.time_limit_s) + 1)
    preload = guarded_modules(tasks)
    checker = Checker(engine, options.time_limit_s, limits, preload)
    # Pruning runs whole unpruned suites: give them room, so slow tests are measured and
    # dropped one by one instead of timing out the suite together with the fast ones.
    pruner = Checker(engine, options.time_limit_s * PRUNE_TIME_FACTOR, limits, preload)
    report.sandbox = sandbox.kind
    try:
        clock = time.monotonic()
        say(f"pruning {len(drafts)} candidates on their reference in the sandbox "
            f"({sandbox.kind}, {engine.workers} workers) …")
        survivors, known = prune(drafts, pruner, options, say)
        report.seconds["prune"] = round(time.monotonic() - clock, 2)
        clock = time.monotonic()
        say(f"certifying {len(survivors)} tasks …")
        published, runs = certify_drafts(survivors, checker, known, say)
        if options.mutants and published:
            say(f"scoring {options.mutants} mutants of each of {len(published)} tasks …")
            runs = checker.executions([d.task for d in published], mutants=options.mutants, known=runs)
        kept = []
        for draft in published:
            check = evaluate(draft.task, runs[draft.task.task_id])
            draft.record.certification = certification_record(check)
            draft.record.mutation_score = check.mutants.score if check.mutants else None
            score = check.mutants
            if score is not None and score.total and score.score < options.min_mutation_score:
                draft.record.drop("low-mutation-score", f"the tests kill {score.killed} of {score.total} mutants "
                                  f"(minimum share {options.min_mutation_score})")
                continue
            draft.record.status = "published"
            kept.append(draft)
        report.seconds["certify"] = round(time.monotonic() - clock, 2)
        return kept
    finally:
        engine.close()


# ------------------------------------------------------------------------------ instructions


def _instruct(drafts: list[_Draft], options: MineOptions, report: BuildReport, say: Progress) -> None:
    generated: list[str | None] = [None] * len(drafts)
    if options.llm is not None and drafts:
        say(f"writing {len(drafts)} instructions with {options.llm.describe().get('model', 'the model')} …")
        generated = llm_instructions(options.llm, [draft.task for draft in drafts])
    for draft, text in zip(drafts, generated, strict=True):
        source = "llm"
        if text is None:
            text = docstring_instruction(draft.task, module=draft.module.name,
                                         library=f"{draft.source.name} {draft.source.version}")
            source = "docstring" if draft.target.docstring else "signature"
            if options.llm is not None:
                source += " (model reply lacked the sections)"
        draft.record.instruction_source = source
        metadata = {
            **draft.task.metadata,  # where the target lives (source_path, source_span, module)
            "source": draft.source.name, "version": draft.source.version, "instruction_source": source,
            "tests": sorted(draft.item_of_unit), "context_copied": draft.target.copied,
            "context_imported": draft.target.imported, "context_repaired": draft.repairs,
            "class_subclassed": draft.target.subclassed,
            "mutation_score": draft.record.mutation_score,
        }
        draft.task = draft.task.model_copy(update={"instruction": text, "metadata": metadata})


# ---------------------------------------------------------------------------------- output


def _manifest(out: Path, name: str | None, requests: list[SourceRequest], sources: list[Source], env: BenchEnv,
              options: MineOptions, count: int) -> Manifest:
    domains = list(dict.fromkeys(request.domain for request in requests))
    versions = {source.name: source.version for source in sources}
    versions["python"] = ".".join(map(str, sys.version_info[:3]))
    versions["knowbench"] = __version__
    hashes = {(source.archive or source.name): source.sha256 for source in sources}
    names = ", ".join(f"{s.name} {s.version}" for s in sources)
    requirements = [r for r in env.requirements if requirement_name(r) != "pytest"]
    return Manifest(
        name=name or out.name, version="1",
        description=f"Mined from {names} by knowbench {__version__} (DomainEval pipeline with certified "
                    f"tests): {count} tasks.",
        domains=domains, requirements=requirements, time_limit_s=options.time_limit_s,
        provenance=Provenance(source="; ".join(s.spec for s in sources), created=_now(),
                              tool=f"knowbench {__version__} mine", versions=versions, hashes=hashes),
    )


def _finish_counts(report: BuildReport) -> None:
    dropped = Counter(task.reason for task in report.tasks if task.status == "dropped" and task.reason)
    test_reasons = Counter(t["reason"] for task in report.tasks for t in task.dropped_tests)
    published = sum(task.status == "published" for task in report.tasks)
    report.counts = {
        "sources": len(report.sources),
        "test_files": sum(s.counts.get("test_files", 0) for s in report.sources),
        "test_units": sum(s.counts.get("test_units", 0) for s in report.sources),
        "targets_traced": sum(s.counts.get("targets_traced", 0) for s in report.sources),
        "candidates": sum(s.counts.get("candidates", 0) for s in report.sources),
        "published": published,
    }
    report.dropped_tasks = dict(dropped.most_common())
    report.dropped_tests = dict(test_reasons.most_common())
    for source in report.sources:
        source.counts["published"] = sum(task.status == "published" and task.source == source.name
                                         for task in report.tasks)
