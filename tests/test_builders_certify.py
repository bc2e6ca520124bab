"""`knowbench certify`: certification of any benchmark, in the real sandbox."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from builders_helpers import FIXTURES, ROOT
from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.builders.certify import CertifyReport, TaskRuns, certify_benchmark, evaluate
from knowbench.execution.engine import SubprocessEngine
from knowbench.records import Execution, Limits, Reason, TestOutcome

HANDMADE = FIXTURES / "handmade"


@pytest.fixture(scope="module")
def handmade(engine: SubprocessEngine) -> CertifyReport:
    return certify_benchmark(load_benchmark(HANDMADE), engine, mutants=3)


def _check(report: CertifyReport, task_id: str):
    return next(check for check in report.tasks if check.task_id == task_id)


def test_a_sound_task_is_certified_with_a_mutation_score(handmade: CertifyReport) -> None:
    check = _check(handmade, "good/word_count")
    assert check.certified and check.failed_checks == []
    assert all(item.status == "pass" and item.called for item in check.reference)
    assert check.mutants is not None and check.mutants.total == 3 and check.mutants.killed >= 2


def test_a_test_that_reimports_the_target_is_caught_as_shadowed(handmade: CertifyReport) -> None:
    check = _check(handmade, "shadowed/dedent")
    assert not check.certified
    assert check.not_called == ["tests::test_dedent"]
    assert "not-called" in check.failed_checks
    # what DomainEval's harness could not see: the suite passes whatever the candidate does
    assert {"passes-on-stub-raise", "passes-on-stub-none"} <= set(check.failed_checks)


def test_a_test_that_passes_on_a_stub_is_caught(handmade: CertifyReport) -> None:
    check = _check(handmade, "weak/first_word")
    assert check.failed_checks == ["passes-on-stub-none"]
    assert check.passes_on_stub == {"stub-raise": [], "stub-none": ["tests::test_first_word"]}


def test_choice_tasks_are_listed_as_not_applicable(handmade: CertifyReport) -> None:
    check = _check(handmade, "knowledge/split")
    assert not check.applicable and not check.certified
    assert handmade.summary["function_tasks"] == 3 and handmade.summary["certified"] == 1


def test_every_task_of_the_basic_example_is_certified(engine: SubprocessEngine) -> None:
    report = certify_benchmark(load_benchmark(ROOT / "examples" / "basic"), engine)
    assert report.summary["certified"] == report.summary["function_tasks"] == 12


def test_cli_writes_the_report_and_exits_1_when_a_task_fails(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = run_knowbench("certify", str(HANDMADE), "--report", str(report), "--engine", "subprocess")
    assert done.returncode == 1, done.stderr
    assert "certified 1 of 3" in done.stdout and "failed certification" in done.stderr
    # Progress goes to stderr even when it is not a terminal; the last task always shows.
    assert "3/3 checked, 1 certified" in done.stderr
    written = json.loads(report.read_text())
    assert written["summary"]["shadowed_or_not_called"] == 1
    assert [t["task_id"] for t in written["tasks"] if t["certified"]] == ["good/word_count"]


def _execution(*outcomes: TestOutcome) -> Execution:
    worst = "pass" if all(o.status == "pass" for o in outcomes) else "error"
    return Execution(status=worst, tests=list(outcomes), sandbox="none", limits=Limits())


@pytest.mark.parametrize("reason, noted", [("program-failed-to-load", True), ("exception", False)])
def test_a_reference_that_fails_to_load_is_noted_by_its_reason(reason: Reason, noted: bool) -> None:
    task = next(t for t in load_benchmark(HANDMADE).tasks if t.task_id == "good/word_count")
    assert isinstance(task, FunctionTask)
    # The message's wording decides nothing: it names neither case.
    failing = TestOutcome(id="t::a", status="error", reason=reason, message="ValueError: x")
    stub = _execution(TestOutcome(id="t::a", status="fail", reason="assertion"))
    check = evaluate(task, TaskRuns({"reference": _execution(failing), "stub-raise": stub,
                                     "stub-none": stub}))
    assert "reference-fails" in check.failed_checks
    assert (check.note == "ValueError: x") is noted
    assert check.reference[0].reason == reason


def test_the_time_per_task_leaves_out_the_time_it_waited_for_a_worker(best_sandbox) -> None:
    # One worker and twelve tasks: most of each task's wait is behind the others. Counted from
    # the moment the task was queued, the times would add up to several times the whole run.
    single = SubprocessEngine(best_sandbox, workers=1)
    try:
        began = time.monotonic()
        report = certify_benchmark(load_benchmark(ROOT / "examples" / "basic"), single)
        whole = time.monotonic() - began
    finally:
        single.close()
    seconds = [check.seconds for check in report.tasks if check.applicable]
    assert len(seconds) == 12 and all(s > 0 for s in seconds)
    assert sum(seconds) <= whole
