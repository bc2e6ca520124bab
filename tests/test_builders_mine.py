"""`knowbench mine` end to end on the minilib fixture: the real pipeline, a real environment
built from the fixture's sdist, real sandboxed executions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builders_helpers import minilib_sdist
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.builders.build_log import BuildReport
from knowbench.builders.certify import Checker
from knowbench.builders.mine import MineOptions, SourceRequest, mine
from knowbench.builders.selection import failure_reason
from knowbench.execution.engine import Execution, Isolation, SubprocessEngine
from knowbench.execution.environments import ensure_env
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.offline import NullBackend, ReferenceBackend
from knowbench.records import Limits, Reason, SamplingParams, Status, TestOutcome
from knowbench.run import run_benchmark

PUBLISHED = {"minilib.textutil.slug", "minilib.textutil.normalise_case", "minilib.mathutil.clamp",
             "minilib.mathutil.Stats.mean", "minilib.geometry.shapes.Rect.area",
             "minilib.geometry.shapes.Rect.scale", "minilib.geometry.shapes.Rect.perimeter",
             "minilib.geometry.shapes.Rect.__add__",  # a property, an operator
             "minilib.units.scale",  # reads its package's data file (`pkgutil.get_data(__name__, ...)`)
             "minilib.units.to_base",  # a relative import in its body
             "minilib.wordcount.wordcount",  # named like its module, which its test imports
             "minilib.ledger.AuditedLedger.book", "minilib.ledger.book_lines",
             "minilib.tally.Tally.add",  # changes `self`, of a class its module defines
             # their tests reach them only through the library: a subclass's super(), a module function
             "minilib.ledger.Ledger.book", "minilib.ledger.parse_cents"}


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildReport]:
    out = tmp_path_factory.mktemp("mined") / "minilib-bench"
    report = mine([SourceRequest(str(minilib_sdist()), "text")], out, MineOptions(mutants=4))
    return out, report


def _record(report: BuildReport, target: str):
    return next(task for task in report.tasks if task.target == target)


def test_exactly_the_expected_targets_are_published(mined: tuple[Path, BuildReport]) -> None:
    _, report = mined
    assert {t.target for t in report.tasks if t.status == "published"} == PUBLISHED
    assert report.counts["published"] == len(PUBLISHED)


@pytest.mark.parametrize(("target", "reason"), [
    ("minilib.textutil.title_slug", "trivial-delegation"),
    ("minilib.textutil.shout", "too-short"),
    ("minilib.textutil.wipe", "banned-keyword"),
    ("minilib.mathutil.Stats.__init__", "trivial-constructor"),
    ("minilib.geometry.shapes.Rect.__init__", "trivial-constructor"),
    ("minilib.textutil.is_stop_or_blank", "trivial-context-delegation"),  # _is_stop, _clean copied
    ("minilib.mathutil.sign_label", "low-mutation-score"),  # its test kills no mutant
])
def test_filters_drop_targets_with_their_reason(mined: tuple[Path, BuildReport], target: str, reason: str) -> None:
    assert _record(mined[1], target).reason == reason


def test_tests_that_measure_nothing_leave_the_suite(mined: tuple[Path, BuildReport]) -> None:
    record = _record(mined[1], "minilib.textutil.slug")
    dropped = {entry["test"].rsplit("::", 1)[-1]: entry["reason"] for entry in record.dropped_tests}
    assert dropped == {"test_slug_empty_cases": "does-not-call-target",
                       "test_slug_never_crashes": "passes-on-stub-none"}
    assert record.tests_kept == 5  # test_title_slug reaches it through title_slug


def test_repair_loop_imports_names_bound_at_run_time(mined: tuple[Path, BuildReport]) -> None:
    record = _record(mined[1], "minilib.textutil.normalise_case")
    assert sorted(record.repaired) == ["_to_lower", "_to_upper"]


def test_output_is_a_standard_benchmark_with_provenance(mined: tuple[Path, BuildReport]) -> None:
    out, report = mined
    bench = load_benchmark(out)
    assert bench.manifest.domains == ["text"]
    assert bench.manifest.requirements == [f"minilib @ {minilib_sdist().as_uri()}"]
    provenance = bench.manifest.provenance
    assert provenance.versions["minilib"] == "0.3.0" and "knowbench" in provenance.versions
    assert provenance.hashes["minilib-0.3.0.tar.gz"].startswith("sha256:")
    task = bench.task("minilib/minilib.textutil.slug")
    assert isinstance(task, FunctionTask)
    assert task.prompt_code.endswith("    ...")
    assert task.instruction.startswith("Functionality: Implement the function `slug`")
    assert "Inputs:" in task.instruction and "Outputs:" in task.instruction
    assert "quick-brown-fox" not in task.instruction  # instructions never reveal tests
    saved = json.loads((out / "build_report.json").read_text())
    assert saved["counts"] == report.counts
    assert saved["dropped_tasks"]["trivial-constructor"] == 4


def test_every_published_task_has_a_mutation_score(mined: tuple[Path, BuildReport]) -> None:
    scores = [t.mutation_score for t in mined[1].tasks if t.status == "published"]
    assert all(score is not None and 0.0 <= score <= 1.0 for score in scores)


def test_reference_passes_and_null_scores_zero_on_every_published_task(
        mined: tuple[Path, BuildReport], tmp_path: Path) -> None:
    out, _ = mined
    bench = load_benchmark(out)
    python = ensure_env(bench.manifest.requirements).python
    # one worker: run_benchmark parses test code in its worker threads, which CPython 3.11.7
    # cannot always do concurrently (cpython#106905)
    engine = SubprocessEngine(resolve_sandbox("auto", hidden=[out]), workers=1, python=python)
    try:
        for backend, expected in ((ReferenceBackend(), True), (NullBackend(), False)):
            summary = run_benchmark(bench, backend, get_method("none"), engine, tmp_path / backend.name,
                                    SamplingParams(), Limits(wall_s=bench.manifest.time_limit_s))
            assert summary.self_check["ok"], summary.self_check
            assert {r.passed for r in summary.results} == {expected}
    finally:
        engine.close()


LEDGER_BOOK_NO_CHECK = '''\
def book(self, name, cents):
    balance = self.get(name, 0) + cents
    super().__setitem__(name, balance)
    return balance
'''
PARSE_CENTS_WHOLE_ONLY = '''\
def parse_cents(text):
    whole, _, part = text.strip().partition(".")
    if not whole.isdigit():
        raise ValueError(text)
    return int(whole) * 100
'''


@pytest.mark.parametrize("isolation", ["in-process", "split"])
def test_a_target_reached_only_through_the_library_runs_the_candidate(
        mined: tuple[Path, BuildReport], isolation: Isolation) -> None:
    """`Ledger.book` is reached only through `AuditedLedger`'s `super().book(...)`, and
    `parse_cents` only through `book_lines`, which holds it as the default of a parameter:
    the run grafts the program's target into the installed `minilib.ledger` (the default
    included), so the library's own calls run the candidate's code. Without the graft the
    same tests never reach it."""
    out, _ = mined
    bench = load_benchmark(out)
    python = ensure_env(bench.manifest.requirements).python
    engine = SubprocessEngine(resolve_sandbox("auto", hidden=[out]), workers=1, python=python)
    checker = Checker(engine, bench.manifest.time_limit_s)
    try:
        for name, wrong in (("Ledger.book", LEDGER_BOOK_NO_CHECK), ("parse_cents", PARSE_CENTS_WHOLE_ONLY)):
            task = bench.task(f"minilib/minilib.ledger.{name}")
            assert task.installed_module == "minilib.ledger"
            reference = checker.execute(task, task.reference, isolation=isolation)
            assert isinstance(reference, Execution)
            assert reference.tests and {(o.status, o.called) for o in reference.tests} == {("pass", True)}, reference
            candidate = checker.execute(task, wrong, isolation=isolation)
            assert isinstance(candidate, Execution)
            assert candidate.status != "pass" and {o.called for o in candidate.tests} == {True}, candidate
            alone = checker.execute(task.model_copy(update={"installed_module": None}), task.reference,
                                    isolation=isolation)
            assert isinstance(alone, Execution)
            assert not any(o.called for o in alone.tests), alone
    finally:
        engine.close()


def test_a_test_that_stops_the_whole_run_is_left_out_and_the_others_run(mined: tuple[Path, BuildReport]) -> None:
    """`test_a_first_tally_then_the_process_ends` ends the sample's process, so the tests after
    it never run; the miner leaves it out, says why, and runs the others again."""
    record = _record(mined[1], "minilib.tally.Tally.add")
    assert record.status == "published" and record.tests_kept == 2
    [dropped] = record.dropped_tests
    assert dropped["test"] == "tests/test_tally.py::test_a_first_tally_then_the_process_ends"
    assert dropped["reason"] == "fails-on-reference:error" and "ended during this test" in dropped["detail"]


def test_an_object_of_the_installed_class_comes_back_from_the_candidate_split(
        mined: tuple[Path, BuildReport]) -> None:
    """`Tally.add` changes the tally it is called on, and its module imports nothing: the
    benchmark's program names no package. Grafted, the program's class is the installed
    `minilib.tally.Tally`, so the changed object comes back under that name, which the judge
    rebuilds since the target is grafted into that package."""
    out, _ = mined
    bench = load_benchmark(out)
    task = bench.task("minilib/minilib.tally.Tally.add")
    assert task.installed_module == "minilib.tally" and "import" not in task.context
    python = ensure_env(bench.manifest.requirements).python
    engine = SubprocessEngine(resolve_sandbox("auto", hidden=[out]), workers=1, python=python)
    try:
        checker = Checker(engine, bench.manifest.time_limit_s)
        split = checker.execute(task, task.reference, isolation="split")
        assert isinstance(split, Execution) and split.isolation == "split"
        assert split.tests and {(o.status, o.called) for o in split.tests} == {("pass", True)}, split
        wrong = task.reference.replace("self.counts.get(key, 0) + times", "times")
        assert wrong != task.reference
        failed = checker.execute(task, wrong, isolation="split")
        assert isinstance(failed, Execution) and failed.status == "fail", failed
    finally:
        engine.close()


def test_a_library_call_on_an_object_of_a_test_defined_class_cannot_be_judged_split(
        mined: tuple[Path, BuildReport]) -> None:
    """The judge cannot hand an object of a class the tests define to the candidate's
    process, which never sees the tests: the call fails as `cannot-cross`, saying why, and
    certification judges such a task in-process (where the same test passes)."""
    out, _ = mined
    bench = load_benchmark(out)
    task = bench.task("minilib/minilib.ledger.Ledger.book")
    spec = TestSpec(name="tests/test_own_ledger.py", code=(
        "from minilib.ledger import AuditedLedger\n\n\nclass Quiet(AuditedLedger):\n    pass\n\n\n"
        "def test_a_ledger_of_the_tests_own_class():\n    assert Quiet().book('rent', 5) == 5\n"))
    task = task.model_copy(update={"tests": [spec]})
    python = ensure_env(bench.manifest.requirements).python
    engine = SubprocessEngine(resolve_sandbox("auto", hidden=[out]), workers=1, python=python)
    try:
        checker = Checker(engine, bench.manifest.time_limit_s)
        split = checker.execute(task, task.reference, isolation="split")
        assert isinstance(split, Execution)
        [outcome] = split.tests
        assert (outcome.status, outcome.reason) == ("error", "cannot-cross"), outcome
        assert "Quiet, a class the tests define" in outcome.message
        in_process = checker.execute(task, task.reference)
        assert isinstance(in_process, Execution) and in_process.status == "pass", in_process
    finally:
        engine.close()


def test_an_unusable_source_is_a_user_error(tmp_path: Path) -> None:
    empty = tmp_path / "repo"
    empty.mkdir()
    (empty / "mod.py").write_text("def f(x):\n    return x\n")
    from knowbench.errors import UserError

    with pytest.raises(UserError, match="no candidate task"):
        mine([SourceRequest(str(empty), "x")], tmp_path / "out", MineOptions())
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


def test_llm_instructions_come_from_the_model_with_domaineval_prompt(tmp_path: Path) -> None:
    from knowbench.models.cache import GenerationCache
    from knowbench.models.openai import OpenAIBackend
    from openai_server import ScriptedOpenAIServer

    def reply(body: dict) -> str:
        name = body["messages"][0]["content"].split("complete the ")[1].split(" function")[0]
        return f"Functionality: what {name} does.\nInputs: its arguments.\nOutputs: its result."

    with ScriptedOpenAIServer(responder=reply) as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url,
                                cache=GenerationCache(tmp_path / "cache.sqlite"))
        report = mine([SourceRequest(str(minilib_sdist()), "text")], tmp_path / "bench", MineOptions(llm=backend))
        asked = len(server.requests)
    # without mutants there is no minimum score: sign_label, whose test kills none, is published too
    assert asked == report.counts["published"] == len(PUBLISHED) + 1
    assert {t.instruction_source for t in report.tasks if t.status == "published"} == {"llm"}
    task = load_benchmark(tmp_path / "bench").task("minilib/minilib.mathutil.clamp")
    assert task.instruction == "Functionality: what clamp does.\nInputs: its arguments.\nOutputs: its result."


@pytest.mark.parametrize(("reason", "status", "recorded"), [
    ("assertion", "fail", "assertion"), ("exception", "error", "error"),
    ("timeout", "timeout", "timeout"), ("cpu-time", "timeout", "timeout"),
    ("skipped", "error", "skipped"), ("unsupported-fixture", "error", "unsupported-fixture"),
    ("test-code-failed", "error", "test-module-error"), ("memory", "memory", "error"),
    ("not-run", "timeout", "timeout"), ("not-run", "error", "error"), ("tampering", "error", "error"),
])
def test_a_test_failing_on_the_reference_is_dropped_with_its_reason(reason: Reason, status: Status,
                                                                    recorded: str) -> None:
    # A message in another failure's old wording must not change what is recorded.
    outcome = TestOutcome(id="t::a", status=status, reason=reason,
                          message="skipped: the test code failed to run: is not supported by the knowbench")
    assert failure_reason(outcome) == f"fails-on-reference:{recorded}"
