"""Which candidates and tests survive execution (stages 6 and 7 of `knowbench mine`).

- **prune**: run each reference in the sandbox; repair names the context missed (a
  `NameError` in the program becomes an import from the installed module, a bounded number of
  rounds); run again without a test that stopped the whole run (it hung past the wall clock,
  took the memory, ended the process), so that the tests after it run too; keep the tests that
  pass on the reference, run the target and are not slow.
- **certify**: re-run the pruned suites on the reference and both stubs; tests that pass on a
  stub leave and the task is certified once more; only certified tasks are published.

Why each task or test left is recorded in its `TaskRecord`, from the runner's outcome reasons
and the first line of its error message.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from knowbench.builders.candidates import Draft, build_specs
from knowbench.builders.certify import Checker, TaskCheck, TaskRuns, evaluate
from knowbench.builders.context import repair_context
from knowbench.builders.discover import TestUnit
from knowbench.builders.options import MineOptions, Progress
from knowbench.records import Execution, Reason, TestOutcome

MAX_REPAIRS = 3
MAX_RESUMES = 2
# What the test that was running gets when the whole run stops (the tests after it: `not-run`).
_STOPPING = frozenset({"timeout", "cpu-time", "memory", "process-limit", "output-limit", "exited-early"})
_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")


def prune(drafts: list[Draft], pruner: Checker, options: MineOptions, say: Progress
          ) -> tuple[list[Draft], dict[str, TaskRuns]]:
    """Run each reference; repair names the context missed; keep the tests that pass on it,
    run the target and are not slow.

    Returns the survivors and, for those whose suite was kept whole, the reference run
    (certification need not repeat it)."""
    pending = list(drafts)
    results: dict[str, TaskRuns] = {}
    for _ in range(MAX_REPAIRS + MAX_RESUMES + 1):
        runs = pruner.executions([d.task for d in pending], variants=("reference",))
        results.update(runs)
        repaired: list[Draft] = []
        resumed: list[Draft] = []
        for draft in pending:  # a repaired context runs again first; resumed once it runs
            reference = runs[draft.task.task_id].outcomes["reference"]
            if _repair(draft, reference):
                repaired.append(draft)
            elif _resume(draft, reference):
                resumed.append(draft)
        if not repaired and not resumed:
            break
        if repaired:
            say(f"repaired the context of {len(repaired)} task(s); running them again …")
        if resumed:
            say(f"{len(resumed)} task(s) had a test that stopped the whole run; running the others again …")
        pending = repaired + resumed
    survivors = []
    known: dict[str, TaskRuns] = {}
    for draft in drafts:
        kept = _judge_tests(draft, results[draft.task.task_id].outcomes["reference"], options)
        if kept is None:
            continue
        if len(kept) == len(draft.units):
            known[draft.task.task_id] = results[draft.task.task_id]
            draft.record.tests_kept = len(kept)
        elif not rebuild(draft, [draft.units[unit_id] for unit_id in sorted(kept)]):
            continue
        survivors.append(draft)
    return survivors, known


def _repair(draft: Draft, reference: Execution | str) -> bool:
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


def _resume(draft: Draft, reference: Execution | str) -> bool:
    """A test that stops the whole run (it hangs past the wall clock, takes the memory, ends
    the process) leaves every test after it not run. Leave that test out, recording why, and
    run the others again (at most `MAX_RESUMES` times); True when the draft changed."""
    if isinstance(reference, str) or draft.resumed >= MAX_RESUMES:
        return False
    outcomes = {outcome.id: outcome for outcome in reference.tests}
    if not any(outcome.reason == "not-run" for outcome in outcomes.values()):
        return False
    stopped = {unit_id for unit_id, item_id in draft.item_of_unit.items()
               if item_id in outcomes and outcomes[item_id].reason in _STOPPING}
    kept = [unit for unit_id, unit in draft.units.items() if unit_id not in stopped]
    if not stopped or not kept:
        return False
    for unit_id in sorted(stopped):
        outcome = outcomes[draft.item_of_unit[unit_id]]
        draft.record.drop_test(unit_id, failure_reason(outcome), first_line_of_error(outcome.message))
    draft.resumed += 1
    return rebuild(draft, kept)


def _judge_tests(draft: Draft, reference: Execution | str, options: MineOptions) -> set[str] | None:
    """The unit ids worth keeping, recording why each other test leaves; None drops the task."""
    record = draft.record
    if isinstance(reference, str):
        return record.drop("assembly-failed", reference)
    statuses = {outcome.id: outcome for outcome in reference.tests}
    if reference.tests and all(o.reason == "program-failed-to-load" for o in reference.tests):
        return record.drop("program-fails", first_line_of_error(reference.tests[0].message))
    slow = options.time_limit_s / 4
    kept: set[str] = set()
    for unit_id, item_id in draft.item_of_unit.items():
        outcome = statuses.get(item_id)
        if outcome is None:
            record.drop_test(unit_id, "not-run")
        elif outcome.status != "pass":
            record.drop_test(unit_id, failure_reason(outcome),
                             first_line_of_error(outcome.message))
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


def certify_drafts(drafts: list[Draft], checker: Checker, known: dict[str, TaskRuns], say: Progress
                   ) -> tuple[list[Draft], dict[str, TaskRuns]]:
    """Certify; tests passing on a stub are dropped and the task certified once more.

    Returns the certified drafts and their runs; `known` holds reference runs that need not
    be repeated."""
    published: list[Draft] = []
    all_runs: dict[str, TaskRuns] = {}
    pending = drafts
    for attempt in range(2):
        runs = checker.executions([d.task for d in pending], known=known)
        again: list[Draft] = []
        for draft in pending:
            run = runs[draft.task.task_id]
            check = evaluate(draft.task, run)
            draft.record.certification = certification_record(check)
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


def _drop_stub_passers(draft: Draft, passes_on_stub: dict[str, list[str]]) -> bool:
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
    return rebuild(draft, kept)


def rebuild(draft: Draft, units: list[TestUnit]) -> bool:
    """Rewrite the draft's specs for `units` alone; False (task dropped) when none rewrites."""
    specs, item_of_unit = build_specs(draft.repository, draft.resolver, draft.target, units, None)
    if not specs:
        draft.record.drop("no-test-survives", "rewriting the kept tests failed")
        return False
    draft.task = draft.task.model_copy(update={"tests": specs})
    draft.item_of_unit = item_of_unit
    draft.units = {unit.id: unit for unit in units}
    draft.record.tests_kept = len(units)
    return True


def certification_record(check: TaskCheck) -> dict[str, Any]:
    """A task's certification as its `TaskRecord` keeps it in the build report."""
    return {"certified": check.certified, "failed_checks": list(check.failed_checks),
            "items": len(check.reference),
            "reference_failures": {item.id: first_line_of_error(item.message)
                                   for item in check.reference if item.status != "pass"},
            "not_called": check.not_called,
            "passes_on_stub": {k: v for k, v in check.passes_on_stub.items() if v},
            "mutants": check.mutants.model_dump() if check.mutants else None}


# ------------------------------------------------------------- reading the runner's messages


# How a reference's failing test is recorded, by its outcome's reason; any other reason is
# "error". (The names predate `Reason` and are what build reports have always said.)
_REFERENCE_FAILURES: dict[Reason, str] = {
    "skipped": "skipped", "unsupported-fixture": "unsupported-fixture",
    "test-code-failed": "test-module-error", "assertion": "assertion",
}


def failure_reason(outcome: TestOutcome) -> str:
    """Why a test that fails on the reference leaves: `fails-on-reference:<what>`."""
    if outcome.status == "timeout":  # the wall clock or CPU time, in this test or before it
        return "fails-on-reference:timeout"
    found = _REFERENCE_FAILURES.get(outcome.reason) if outcome.reason is not None else None
    return f"fails-on-reference:{found or 'error'}"


def first_line_of_error(message: str) -> str:
    """The line of a runner message that names the error (its last such line), at most 240
    characters; the last line when none does."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|Exit|Interrupt)\b", line.strip())
              or "Error:" in line]
    return (errors[-1] if errors else lines[-1] if lines else "").strip()[:240]
