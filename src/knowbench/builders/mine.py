"""`knowbench mine`: DomainEval's construction pipeline, with certified tests.

Stages, each counted in `build_report.json`:

1. **source**: fetch and unpack each source (directory, sdist/wheel, PyPI requirement).
2. **discover**: find test units and trace each to the library functions it calls
   (`knowbench.builders.discover`); every traced function is a candidate target and all the
   tests that call it form its suite.
3. **static filters**: not trivial (constructors, property getters, pure delegation,
   abstract stubs), body of `min_lines`..`max_lines` lines, no banned keyword in the
   reference or its context, a prompt of at most `max_prompt_lines`; tests holding a banned
   keyword leave the suite.
4. **assemble**: cut prompt, reference and context (`knowbench.builders.context`); rewrite the
   suite into self-contained specs (`knowbench.builders.harness`).
5. **environment**: the benchmark's requirements are the mined distribution and the
   third-party packages its tests and contexts import, pinned to what got installed.
6. **prune**: run reference and both stubs in the sandbox; repair names the context missed
   (NameError -> import from the installed module, a bounded number of rounds); keep the
   tests that pass on the reference, run the target, fail on both stubs and are not slow.
7. **certify**: re-run the pruned suites (reference, stubs, optional mutants); only certified
   tasks are published.
8. **instruct**: Functionality / Inputs / Outputs from the docstring, or from a model.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench import __version__
from knowbench.benchmark.load import write_benchmark
from knowbench.benchmark.preload import guarded_modules, preload_modules
from knowbench.benchmark.schema import (
    FunctionTask,
    Manifest,
    Provenance,
    TestSpec,
)
from knowbench.builders.build_log import BuildReport, SourceReport, TaskRecord
from knowbench.builders.certify import Checker, TaskCheck, TaskRuns, evaluate
from knowbench.builders.context import ContextError, TargetCode, cut_target, repair_context
from knowbench.builders.discover import TestUnit, discover_units, test_modules
from knowbench.builders.filters import (
    BANNED_KEYWORDS,
    banned_keywords,
    size_reason,
    triviality_reason,
)
from knowbench.builders.harness import SpecBuilder
from knowbench.builders.instructions import docstring_instruction, llm_instructions
from knowbench.builders.repository import Module, Repository, Resolver, Symbol, find_node
from knowbench.builders.requirements import (
    distribution_for,
    import_roots,
    installable_subset,
    requirement_name,
    third_party,
)
from knowbench.builders.source import Source, fetch_source
from knowbench.errors import UserError
from knowbench.execution import create_engine
from knowbench.execution.environments import BenchEnv, ensure_env
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.models.base import ModelBackend
from knowbench.records import Execution, Limits, Reason, TestOutcome

REPORT_FILE = "build_report.json"
MAX_REPAIRS = 3
PRUNE_TIME_FACTOR = 3
_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")
Progress = Callable[[str], None]


@dataclass
class MineOptions:
    """Knobs of the pipeline; the defaults follow DomainEval where it has one."""

    mutants: int = 0
    min_lines: int = 3
    max_lines: int = 100
    max_prompt_lines: int = 400
    max_tests: int = 40
    time_limit_s: float = 10.0
    max_tasks: int | None = None
    banned: tuple[str, ...] = BANNED_KEYWORDS
    sandbox: str = "auto"
    workers: int | None = None
    llm: ModelBackend | None = None
    engine: str = "forkserver"


@dataclass(frozen=True)
class SourceRequest:
    spec: str
    domain: str


@dataclass
class _Draft:
    """A candidate task on its way through the pipeline."""

    task: FunctionTask
    target: TargetCode
    module: Module
    repository: Repository
    resolver: Resolver
    source: Source
    domain: str
    record: TaskRecord
    units: dict[str, TestUnit]  # unit id -> unit
    item_of_unit: dict[str, str]
    repairs: list[str] = field(default_factory=list)


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
            found = _static_stages(source, request.domain, options, source_report, report)
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
        env = _environment(sources, drafts, report, say)
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
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / "benchmark.json").is_file():
        raise UserError(f"--out {out} exists and is not a benchmark directory\n"
                        "  fix: choose a new or empty directory")


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _options_record(options: MineOptions) -> dict[str, Any]:
    return {"engine": options.engine, "mutants": options.mutants, "min_lines": options.min_lines,
            "max_lines": options.max_lines,
            "max_prompt_lines": options.max_prompt_lines, "max_tests": options.max_tests,
            "time_limit_s": options.time_limit_s, "max_tasks": options.max_tasks,
            "banned_keywords": len(options.banned), "llm": options.llm.describe() if options.llm else None}


# ----------------------------------------------------------------------------- static stages


def _static_stages(source: Source, domain: str, options: MineOptions, source_report: SourceReport,
                   report: BuildReport) -> list[_Draft]:
    repository = Repository(source.root)
    resolver = Resolver(repository)
    counts = source_report.counts
    counts["test_files"] = len(test_modules(repository))
    units = discover_units(repository, resolver)
    counts["test_units"] = len(units)
    counts["test_units_traced"] = sum(1 for unit in units if unit.targets)
    suites: dict[Symbol, list[TestUnit]] = {}
    for unit in units:
        for symbol in unit.targets:
            suites.setdefault(symbol, []).append(unit)
    counts["targets_traced"] = len(suites)
    source_report.library_packages = sorted(repository.library_tops)
    drafts: list[_Draft] = []
    for symbol in sorted(suites, key=lambda s: s.dotted):
        record = TaskRecord(task_id=_task_id(source, symbol), target=symbol.dotted, source=source.name,
                            domain=domain)
        report.tasks.append(record)
        draft = _draft(symbol, suites[symbol], repository, resolver, source, domain, options, record)
        if draft is not None:
            drafts.append(draft)
            if options.max_tasks is not None and len(drafts) >= options.max_tasks:
                break
    counts["candidates"] = len(drafts)
    return drafts


def _task_id(source: Source, symbol: Symbol) -> str:
    return f"{requirement_name(source.name)}/{symbol.dotted}"


def _draft(symbol: Symbol, units: list[TestUnit], repository: Repository, resolver: Resolver,
           source: Source, domain: str, options: MineOptions, record: TaskRecord) -> _Draft | None:
    module = repository.module(symbol.module)
    node = find_node(module.tree, symbol.qualname) if module is not None else None
    if module is None or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return record.drop("not-a-function")
    record.file = repository.relpath(module)
    record.line = node.lineno
    reason = triviality_reason(node)
    if reason:
        return record.drop(reason)
    try:
        target = cut_target(module, symbol, options.max_prompt_lines)
    except ContextError as error:
        return record.drop("cut-failed", str(error))
    record.body_lines = target.body_lines
    reason = size_reason(target.body_lines, options.min_lines, options.max_lines)
    if reason:
        return record.drop(reason, f"{target.body_lines} lines")
    found = banned_keywords(target.reference, options.banned) + banned_keywords(target.context, options.banned)
    if found:
        return record.drop("banned-keyword", ", ".join(sorted(set(found))))
    if target.prompt_code.count("\n") + 1 > options.max_prompt_lines:
        return record.drop("prompt-too-long", f"{target.prompt_code.count(chr(10)) + 1} lines")
    usable: list[TestUnit] = []
    for unit in sorted(units, key=lambda u: u.id):
        text = ast.get_source_segment(unit.module.source, unit.node()) or ""
        hits = banned_keywords(text, options.banned)
        if hits:
            record.drop_test(unit.id, "banned-keyword", ", ".join(hits))
        else:
            usable.append(unit)
    if len(usable) > options.max_tests:
        step = len(usable) / options.max_tests
        chosen = [usable[int(index * step)] for index in range(options.max_tests)]
        for unit in usable:
            if unit not in chosen:
                record.drop_test(unit.id, "over-max-tests")
        usable = chosen
    if not usable:
        return record.drop("no-usable-tests")
    specs, item_of_unit = _build_specs(repository, resolver, target, usable, record)
    if not specs:
        return record.drop("no-usable-tests", "no test module could be rewritten")
    try:
        task = FunctionTask(
            task_id=record.task_id, domain=domain, framework=source.name, instruction="(pending)",
            prompt_code=target.prompt_code, entry_point=target.entry_point, context=target.context,
            reference=target.reference, tests=specs, target_api=symbol.dotted,
        )
    except ValidationError as error:
        return record.drop("invalid-task", str(error.errors()[0]["msg"]))
    record.tests_traced = len(usable)
    return _Draft(task=task, target=target, module=module, repository=repository, resolver=resolver,
                  source=source, domain=domain, record=record,
                  units={unit.id: unit for unit in usable}, item_of_unit=item_of_unit)


def _build_specs(repository: Repository, resolver: Resolver, target: TargetCode, units: list[TestUnit],
                 record: TaskRecord | None) -> tuple[list[TestSpec], dict[str, str]]:
    by_module: dict[str, list[TestUnit]] = {}
    for unit in units:
        by_module.setdefault(unit.relpath, []).append(unit)
    specs: list[TestSpec] = []
    item_of_unit: dict[str, str] = {}
    for relpath in sorted(by_module):
        group = by_module[relpath]
        try:
            built = SpecBuilder(repository, resolver, target).build(group[0].module, group)
            specs.append(TestSpec(name=built.name, code=built.code))
        except (ValidationError, ValueError, RecursionError) as error:
            if record is not None:
                for unit in group:
                    record.drop_test(unit.id, "rewrite-failed", str(error)[:200])
            continue
        item_of_unit.update(built.item_of_unit)
    return specs, item_of_unit


# ------------------------------------------------------------------------------ environment


def _environment(sources: list[Source], drafts: list[_Draft], report: BuildReport, say: Progress) -> BenchEnv:
    """Build the benchmark's environment: the mined distributions plus what tests import."""
    own_tops: set[str] = set()
    for source_report in report.sources:
        own_tops |= set(source_report.library_packages)
    roots: set[str] = set()
    for draft in drafts:
        for code in (draft.task.context, draft.task.prompt_code, *(spec.code for spec in draft.task.tests)):
            roots |= import_roots(code, required_only=True)
    extra = sorted({distribution_for(root) for root in third_party(roots - own_tops)} -
                   {requirement_name(s.name) for s in sources} - {"pytest"},
                   key=str.lower)
    base = [source.requirement for source in sources]
    say(f"environment: {', '.join(base)}" + (f" + test dependencies {', '.join(extra)}" if extra else ""))
    kept, refused = installable_subset([*base, *extra])
    missing = [requirement for requirement in base if requirement in refused]
    if missing:
        raise UserError(f"the mined package itself cannot be installed ({', '.join(missing)}):\n"
                        f"{refused[missing[0]]}")
    for requirement, why in refused.items():
        report.uninstallable.append({"requirement": requirement, "error": why[-300:]})
    kept = [requirement for requirement in kept if requirement not in base]
    try:
        env = ensure_env([*base, *kept])
    except UserError:  # resolvable, yet some package does not build here: find which
        installable = []
        for requirement in kept:
            try:
                ensure_env([*base, requirement])
                installable.append(requirement)
            except UserError as error:
                report.uninstallable.append({"requirement": requirement, "error": str(error)[-300:]})
        kept = installable
        env = ensure_env([*base, *kept])
    installed = {requirement_name(n): (n, v) for n, v in env.info()["installed"].items()}
    pinned = []
    for requirement in [*base, *kept]:
        if "@" in requirement or "==" in requirement:
            pinned.append(requirement)
            continue
        found = installed.get(requirement_name(requirement))
        pinned.append(f"{found[0]}=={found[1]}" if found else requirement)
    report.requirements = pinned
    env = ensure_env(pinned)
    report.environment = {"key": env.key, "python": env.info()["python"], "installed": env.info()["installed"]}
    return env


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
        survivors, known = _prune(drafts, pruner, options, say)
        report.seconds["prune"] = round(time.monotonic() - clock, 2)
        clock = time.monotonic()
        say(f"certifying {len(survivors)} tasks …")
        published, runs = _certify(survivors, checker, known, say)
        if options.mutants and published:
            say(f"scoring {options.mutants} mutants of each of {len(published)} tasks …")
            runs = checker.executions([d.task for d in published], mutants=options.mutants, known=runs)
        for draft in published:
            check = evaluate(draft.task, runs[draft.task.task_id])
            draft.record.certification = _certification_record(check)
            draft.record.status = "published"
            draft.record.mutation_score = check.mutants.score if check.mutants else None
        report.seconds["certify"] = round(time.monotonic() - clock, 2)
        return published
    finally:
        engine.close()


def _certify(drafts: list[_Draft], checker: Checker, known: dict[str, TaskRuns], say: Progress
             ) -> tuple[list[_Draft], dict[str, TaskRuns]]:
    """Certify; tests passing on a stub are dropped and the task certified once more."""
    published: list[_Draft] = []
    all_runs: dict[str, TaskRuns] = {}
    pending = drafts
    for attempt in range(2):
        runs = checker.executions([d.task for d in pending], known=known)
        again: list[_Draft] = []
        for draft in pending:
            run = runs[draft.task.task_id]
            check = evaluate(draft.task, run)
            draft.record.certification = _certification_record(check)
            stub_items = {item for items in check.passes_on_stub.values() for item in items}
            if check.certified and not stub_items:
                published.append(draft)
                all_runs[draft.task.task_id] = run
            elif attempt == 0 and stub_items and set(check.failed_checks) <= {"passes-on-stub-raise",
                                                                              "passes-on-stub-none"}:
                if _drop_stub_passers(draft, check.passes_on_stub):
                    again.append(draft)
            else:
                draft.record.drop("not-certified", ", ".join(check.failed_checks) or "items pass on a stub")
        if not again:
            break
        say(f"{len(again)} task(s) had tests passing on a stub; certifying them again without those …")
        pending, known = again, {}
    return published, all_runs


def _drop_stub_passers(draft: _Draft, passes_on_stub: dict[str, list[str]]) -> bool:
    """Remove the tests that pass on a stub; False (task dropped) when none would remain."""
    unit_of_item = {item: unit for unit, item in draft.item_of_unit.items()}
    removed: set[str] = set()
    for stub, items in passes_on_stub.items():
        for item in items:
            unit = unit_of_item.get(item)
            if unit is not None and unit not in removed:
                removed.add(unit)
                draft.record.drop_test(unit, f"passes-on-{stub}")
    kept = [unit for unit_id, unit in draft.units.items() if unit_id not in removed]
    if not kept or not removed:
        draft.record.drop("no-test-survives", "every test passes on a stub")
        return False
    return _rebuild(draft, kept)


def _rebuild(draft: _Draft, units: list[TestUnit]) -> bool:
    specs, item_of_unit = _build_specs(draft.repository, draft.resolver, draft.target, units, None)
    if not specs:
        draft.record.drop("no-test-survives", "rewriting the kept tests failed")
        return False
    draft.task = draft.task.model_copy(update={"tests": specs})
    draft.item_of_unit = item_of_unit
    draft.units = {unit.id: unit for unit in units}
    draft.record.tests_kept = len(units)
    return True


def _certification_record(check: TaskCheck) -> dict[str, Any]:
    return {"certified": check.certified, "failed_checks": list(check.failed_checks),
            "items": len(check.reference),
            "reference_failures": {item.id: _first_line_of_error(item.message)
                                   for item in check.reference if item.status != "pass"},
            "not_called": check.not_called,
            "passes_on_stub": {k: v for k, v in check.passes_on_stub.items() if v},
            "mutants": check.mutants.model_dump() if check.mutants else None}


def _prune(drafts: list[_Draft], pruner: Checker, options: MineOptions, say: Progress
           ) -> tuple[list[_Draft], dict[str, TaskRuns]]:
    """Run each reference; repair names the context missed; keep the tests that pass on it,
    run the target and are not slow.

    Returns the survivors and, for those whose suite was kept whole, the reference run
    (certification need not repeat it)."""
    pending = list(drafts)
    results: dict[str, TaskRuns] = {}
    for _ in range(MAX_REPAIRS + 1):
        runs = pruner.executions([d.task for d in pending], variants=("reference",))
        results.update(runs)
        repaired = [draft for draft in pending if _repair(draft, runs[draft.task.task_id].outcomes["reference"])]
        if not repaired:
            break
        say(f"repaired the context of {len(repaired)} task(s); running them again …")
        pending = repaired
    survivors = []
    known: dict[str, TaskRuns] = {}
    for draft in drafts:
        kept = _judge_tests(draft, results[draft.task.task_id].outcomes["reference"], options)
        if kept is None:
            continue
        if len(kept) == len(draft.units):
            known[draft.task.task_id] = results[draft.task.task_id]
            draft.record.tests_kept = len(kept)
        elif not _rebuild(draft, [draft.units[unit_id] for unit_id in sorted(kept)]):
            continue
        survivors.append(draft)
    return survivors, known


def _repair(draft: _Draft, reference: Execution | str) -> bool:
    """Add the names the reference's program or tests missed, imported from the installed
    module; True when the context changed."""
    if isinstance(reference, str) or len(draft.repairs) >= MAX_REPAIRS:
        return False
    missing = set()
    for test in reference.tests:
        if "solution.py" in test.message:
            missing |= set(_NAME_ERROR.findall(test.message))
    changed = False
    for name in sorted(missing):  # bound statically or not (a loop may bind it): the import tells
        context = repair_context(draft.task.context, draft.module.name, name)
        if context is not None:
            draft.task = draft.task.model_copy(update={"context": context})
            draft.repairs.append(name)
            draft.record.repaired.append(name)
            changed = True
    return changed


def _judge_tests(draft: _Draft, reference: Execution | str, options: MineOptions) -> set[str] | None:
    """The unit ids worth keeping, recording why each other test leaves; None drops the task."""
    record = draft.record
    if isinstance(reference, str):
        return record.drop("assembly-failed", reference)
    statuses = {outcome.id: outcome for outcome in reference.tests}
    if reference.tests and all(o.reason == "program-failed-to-load" for o in reference.tests):
        return record.drop("program-fails", _first_line_of_error(reference.tests[0].message))
    slow = options.time_limit_s / 4
    kept: set[str] = set()
    for unit_id, item_id in draft.item_of_unit.items():
        outcome = statuses.get(item_id)
        if outcome is None:
            record.drop_test(unit_id, "not-run")
        elif outcome.status != "pass":
            record.drop_test(unit_id, _failure_reason(outcome),
                             _first_line_of_error(outcome.message))
        elif outcome.called is not True:
            record.drop_test(unit_id, "does-not-call-target")
        elif outcome.duration_s > slow:
            record.drop_test(unit_id, "slow", f"{outcome.duration_s:.2f} s")
        else:
            kept.add(unit_id)
    budget = options.time_limit_s / 2  # the whole suite must run well within the limit
    durations = {unit_id: statuses[draft.item_of_unit[unit_id]].duration_s for unit_id in kept}
    while kept and sum(durations[u] for u in kept) > budget:
        slowest = max(kept, key=lambda u: (durations[u], u))
        kept.discard(slowest)
        record.drop_test(slowest, "suite-too-slow", f"{durations[slowest]:.2f} s")
    if not kept:
        reasons = Counter(t["reason"] for t in record.dropped_tests)
        top = ", ".join(f"{reason} {count}" for reason, count in reasons.most_common(3))
        return record.drop("no-test-survives", top)
    return kept


# How a reference's failing test is recorded, by its outcome's reason; any other reason is
# "error". (The names predate `Reason` and are what build reports have always said.)
_REFERENCE_FAILURES: dict[Reason, str] = {
    "skipped": "skipped", "unsupported-fixture": "unsupported-fixture",
    "test-code-failed": "test-module-error", "assertion": "assertion",
}


def _failure_reason(outcome: TestOutcome) -> str:
    if outcome.status == "timeout":  # the wall clock or CPU time, in this test or before it
        return "fails-on-reference:timeout"
    found = _REFERENCE_FAILURES.get(outcome.reason) if outcome.reason is not None else None
    return f"fails-on-reference:{found or 'error'}"


def _first_line_of_error(message: str) -> str:
    lines = [line for line in message.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|Exit|Interrupt)\b", line.strip())
              or "Error:" in line]
    return (errors[-1] if errors else lines[-1] if lines else "").strip()[:240]


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
            "source": draft.source.name, "version": draft.source.version, "module": draft.module.name,
            "file": draft.record.file, "line": draft.record.line, "instruction_source": source,
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
