"""Tests for knowbench.scoring.metrics: pass@k, APR, Pass@any, accuracy and aggregation."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from fractions import Fraction

import pytest

from knowbench.records import SampleResult
from knowbench.scoring.metrics import (
    MetricSet,
    Scores,
    TaskScore,
    k_shortfalls,
    pass_at_k,
    score,
    score_tasks,
)


def sample(
    task_id: str,
    idx: int,
    passed: bool,
    *,
    domain: str = "dom",
    kind: str = "function",
    framework: str | None = None,
    difficulty: str | None = None,
    tests_passed: int | None = None,
    tests_total: int | None = None,
) -> SampleResult:
    """A SampleResult; by default one test that passes iff the sample passes."""
    if tests_total is None:
        tests_total = 0 if kind == "choice" else 1
    if tests_passed is None:
        tests_passed = tests_total if passed else 0
    return SampleResult(
        task_id=task_id,
        sample_idx=idx,
        kind=kind,
        domain=domain,
        framework=framework,
        difficulty=difficulty,
        completion="",
        passed=passed,
        tests_passed=tests_passed,
        tests_total=tests_total,
        status="pass" if passed else "fail",
    )


def task(task_id: str, outcomes: list[bool], **kwargs: object) -> list[SampleResult]:
    """All samples of one task, one per outcome."""
    return [sample(task_id, i, ok, **kwargs) for i, ok in enumerate(outcomes)]  # type: ignore[arg-type]


# --- pass@k -------------------------------------------------------------------------------


def test_pass_at_k_matches_closed_form_exactly() -> None:
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                got = pass_at_k(n, c, k)
                assert abs(Fraction(got) - exact) < Fraction(1, 10**12), (n, c, k, got, exact)


def test_pass_at_k_matches_brute_force_over_subsets() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            correct = [i < c for i in range(n)]
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(range(n), k))
                hits = sum(1 for s in subsets if any(correct[i] for i in s))
                expected = Fraction(hits, len(subsets))
                assert math.isclose(pass_at_k(n, c, k), float(expected), abs_tol=1e-12)


def test_pass_at_k_simple_values() -> None:
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 10) == 1.0
    assert math.isclose(pass_at_k(10, 3, 1), 0.3)
    assert math.isclose(pass_at_k(5, 1, 5), 1.0)
    assert math.isclose(pass_at_k(4, 1, 2), 0.5)


def test_pass_at_k_large_n_is_stable() -> None:
    value = pass_at_k(1000, 1, 1)
    assert math.isclose(value, 0.001)
    assert 0.0 <= pass_at_k(2000, 7, 100) <= 1.0


def test_pass_at_k_nan_when_too_few_samples() -> None:
    assert math.isnan(pass_at_k(1, 1, 5))
    assert math.isnan(pass_at_k(4, 0, 5))
    assert math.isnan(pass_at_k(0, 0, 1))


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, -3), (-1, 0, 1)],
)
def test_pass_at_k_rejects_bad_input(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# --- per-task scores ----------------------------------------------------------------------


def test_task_score_fields_and_pass_at() -> None:
    [ts] = score_tasks(task("t", [True, False, False, False, True]), ks=(1, 5, 10))
    assert isinstance(ts, TaskScore)
    assert (ts.task_id, ts.n, ts.c) == ("t", 5, 2)
    assert math.isclose(ts.pass_at[1], 0.4)
    assert ts.pass_at[5] == 1.0
    assert ts.pass_at[10] is None
    assert ts.pass_any is True
    assert ts.accuracy is None


def test_apr_counts_partial_test_passes() -> None:
    samples = [
        sample("t", 0, False, tests_passed=2, tests_total=4),
        sample("t", 1, True, tests_passed=4, tests_total=4),
        sample("t", 2, False, tests_passed=0, tests_total=4),
        sample("t", 3, False, tests_passed=1, tests_total=4),
    ]
    [ts] = score_tasks(samples, ks=(1,))
    assert math.isclose(ts.apr, (0.5 + 1.0 + 0.0 + 0.25) / 4)
    assert math.isclose(ts.pass_at[1], 0.25)


def test_apr_of_single_half_passing_sample() -> None:
    scores = score([sample("t", 0, False, tests_passed=2, tests_total=4)], ks=(1,))
    assert scores.overall.apr == 0.5
    assert scores.overall.pass_at[1] == 0.0


def test_pass_any() -> None:
    results = (
        task("a", [False, False, True])
        + task("b", [False, False, False])
        + task("c", [True, True, True])
        + task("d", [False, False, False])
    )
    tasks = {t.task_id: t for t in score_tasks(results)}
    assert [tasks[x].pass_any for x in "abcd"] == [True, False, True, False]
    assert score(results).overall.pass_any == 0.5


def test_choice_accuracy() -> None:
    results = (
        task("q1", [True], kind="choice")
        + task("q2", [False], kind="choice")
        + task("q3", [True, False, True, True], kind="choice")
        + task("f1", [False])
    )
    tasks = {t.task_id: t for t in score_tasks(results)}
    assert tasks["q1"].accuracy == 1.0
    assert tasks["q2"].accuracy == 0.0
    assert tasks["q3"].accuracy == 0.75
    assert tasks["f1"].accuracy is None
    overall = score(results).overall
    assert overall.choice_tasks == 3
    assert overall.function_tasks == 1
    assert math.isclose(overall.accuracy, (1.0 + 0.0 + 0.75) / 3)
    # choice tasks do not enter the code-generation metrics
    assert overall.pass_at[1] == 0.0
    assert overall.pass_any == 0.0
    assert overall.apr == 0.0


def test_metrics_of_missing_kind_are_none() -> None:
    only_function = score(task("f", [True]), ks=(1,)).overall
    assert only_function.accuracy is None
    only_choice = score(task("q", [True], kind="choice"), ks=(1,)).overall
    assert only_choice.pass_at == {1: None}
    assert only_choice.pass_at_tasks == {1: 0}
    assert only_choice.apr is None
    assert only_choice.pass_any is None
    assert only_choice.accuracy == 1.0


# --- aggregation --------------------------------------------------------------------------


def _three_domains() -> list[SampleResult]:
    """Domain A: 2/2 tasks pass, B: 1/2, C: 0/1 (one greedy sample each)."""
    return (
        task("a1", [True], domain="A")
        + task("a2", [True], domain="A")
        + task("b1", [True], domain="B")
        + task("b2", [False], domain="B")
        + task("c1", [False], domain="C")
    )


def test_micro_vs_macro_average() -> None:
    scores = score(_three_domains(), ks=(1,))
    # micro: 3 of 5 tasks pass
    assert math.isclose(scores.overall.pass_at[1], 0.6)
    assert scores.by_domain["A"].pass_at[1] == 1.0
    assert scores.by_domain["B"].pass_at[1] == 0.5
    assert scores.by_domain["C"].pass_at[1] == 0.0
    # macro: mean of 1.0, 0.5, 0.0
    macro = scores.macro["pass@1"]
    assert macro.groups == 3
    assert math.isclose(macro.mean, 0.5)


def test_std_across_domains_is_sample_std() -> None:
    macro = score(_three_domains(), ks=(1,)).macro["pass@1"]
    # sample std of (1.0, 0.5, 0.0) is exactly 0.5; population std would be 0.408...
    assert math.isclose(macro.std, 0.5)
    assert math.isclose(macro.std, statistics.stdev([1.0, 0.5, 0.0]))


def test_std_none_with_single_domain() -> None:
    macro = score(task("t", [True]) + task("u", [False]), ks=(1,)).macro["pass@1"]
    assert macro.groups == 1
    assert macro.mean == 0.5
    assert macro.std is None


def test_macro_has_every_metric_name() -> None:
    scores = score(_three_domains())
    assert set(scores.macro) == {"pass@1", "pass@5", "pass@10", "apr", "pass_any", "accuracy",
                                   "unanswered", "jaccard"}
    assert scores.macro["pass@5"].groups == 0
    assert scores.macro["pass@5"].mean is None
    assert scores.macro["accuracy"].groups == 0
    assert math.isclose(scores.macro["apr"].mean, 0.5)
    assert math.isclose(scores.macro["pass_any"].mean, 0.5)


def test_macro_skips_domains_without_that_kind() -> None:
    results = task("f", [True], domain="A") + task("q", [False], kind="choice", domain="B")
    macro = score(results, ks=(1,)).macro
    assert macro["pass@1"].groups == 1
    assert macro["pass@1"].mean == 1.0
    assert macro["accuracy"].groups == 1
    assert macro["accuracy"].mean == 0.0


def test_breakdowns_by_framework_and_difficulty() -> None:
    results = (
        task("t1", [True], framework="fx", difficulty="easy")
        + task("t2", [False], framework="fx", difficulty="hard")
        + task("t3", [True], framework="fy", difficulty="hard")
        + task("t4", [False])  # no framework, no difficulty: not grouped
    )
    scores = score(results, ks=(1,))
    assert set(scores.by_framework) == {"fx", "fy"}
    assert scores.by_framework["fx"].tasks == 2
    assert scores.by_framework["fx"].pass_at[1] == 0.5
    assert scores.by_framework["fy"].pass_at[1] == 1.0
    assert set(scores.by_difficulty) == {"easy", "hard"}
    assert scores.by_difficulty["easy"].pass_at[1] == 1.0
    assert scores.by_difficulty["hard"].pass_at[1] == 0.5
    assert scores.by_difficulty["hard"].tasks == 2
    assert scores.overall.tasks == 4
    assert scores.by_domain["dom"].tasks == 4


def test_tasks_with_different_n() -> None:
    results = (
        task("one", [True])  # n = 1
        + task("five", [False, False, True, False, False])  # n = 5
        + task("ten", [False] * 9 + [True])  # n = 10
    )
    overall = score(results).overall
    assert overall.tasks == 3
    assert overall.samples == 16
    assert overall.pass_at_tasks == {1: 3, 5: 2, 10: 1}
    assert math.isclose(overall.pass_at[1], (1.0 + 0.2 + 0.1) / 3)
    assert math.isclose(overall.pass_at[5], (1.0 + pass_at_k(10, 1, 5)) / 2)
    assert math.isclose(overall.pass_at[5], (1.0 + 0.5) / 2)
    assert overall.pass_at[10] == 1.0
    assert overall.pass_any == 1.0


def test_k_larger_than_every_n_is_none() -> None:
    scores = score(task("t", [True, False]), ks=(1, 5, 10))
    assert scores.ks == [1, 5, 10]
    assert scores.overall.pass_at == {1: 0.5, 5: None, 10: None}
    assert scores.overall.pass_at_tasks == {1: 1, 5: 0, 10: 0}


def test_ks_are_sorted_and_deduplicated() -> None:
    scores = score(task("t", [True] * 5), ks=[5, 1, 5])
    assert scores.ks == [1, 5]
    assert list(scores.overall.pass_at) == [1, 5]


@pytest.mark.parametrize("ks", [(), (0,), (1, -2)])
def test_bad_ks_rejected(ks: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        score(task("t", [True]), ks=ks)


def test_duplicate_sample_rejected() -> None:
    with pytest.raises(ValueError):
        score_tasks([sample("t", 0, True), sample("t", 0, False)])


def test_inconsistent_task_metadata_rejected() -> None:
    with pytest.raises(ValueError):
        score_tasks([sample("t", 0, True, domain="A"), sample("t", 1, True, domain="B")])


def test_task_order_follows_input() -> None:
    results = [sample("z", 0, True), sample("a", 0, True), sample("z", 1, False)]
    assert [t.task_id for t in score_tasks(results)] == ["z", "a"]


def test_empty_input() -> None:
    scores = score([])
    assert scores.overall == MetricSet(
        tasks=0,
        samples=0,
        function_tasks=0,
        choice_tasks=0,
        pass_at={1: None, 5: None, 10: None},
        pass_at_tasks={1: 0, 5: 0, 10: 0},
    )
    assert scores.by_domain == {}
    assert all(m.groups == 0 and m.mean is None and m.std is None for m in scores.macro.values())


def test_accepts_a_generator() -> None:
    scores = score(iter(_three_domains()), ks=iter([1]))
    assert scores.overall.tasks == 5


# --- serialisation ------------------------------------------------------------------------


def test_scores_json_round_trip_has_no_nan() -> None:
    results = (
        _three_domains()
        + task("q", [True, False], kind="choice", domain="A", framework="fx", difficulty="easy")
        + task("many", [False, True, False, False, False], domain="B", framework="fx")
    )
    scores = score(results, ks=(1, 5, 10))
    text = scores.model_dump_json()
    assert "NaN" not in text
    assert "Infinity" not in text
    parsed = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert parsed["overall"]["pass_at"]["10"] is None
    assert Scores.model_validate_json(text) == scores
    for ts in score_tasks(results):
        assert "NaN" not in ts.model_dump_json()
        assert TaskScore.model_validate_json(ts.model_dump_json()) == ts


def test_models_forbid_extra_fields() -> None:
    with pytest.raises(ValueError):
        MetricSet.model_validate(
            {
                "tasks": 0,
                "samples": 0,
                "function_tasks": 0,
                "choice_tasks": 0,
                "pass_at": {},
                "pass_at_tasks": {},
                "bogus": 1,
            }
        )


def test_k_shortfalls_name_each_k_that_too_few_samples_leave_out() -> None:
    five = [sample("a", i, i == 0) for i in range(5)]
    two = [sample("b", i, False) for i in range(2)]
    choice = [sample("q", 0, True, kind="choice")]
    scores = score([*five, *two, *choice], ks=(1, 2, 5, 10))
    notes = k_shortfalls(scores, (1, 2, 5, 10))
    assert notes == [
        "pass@5 counts only 1 of 2 function tasks: the others have fewer than 5 samples "
        "(pass@k needs n >= k)",
        "pass@10 is left out: it needs n >= 10 samples per task, and no function task has "
        "that many (sample more with --n 10)",
    ]
    assert scores.overall.pass_at[10] is None
    assert k_shortfalls(scores, (1, 2)) == []


# ---------------------------------------------------------------------------- rounding and intervals

# 80 tasks of 3 samples: pass@1 = 0.5375 by math.fsum, 0.5374999999999999 by numpy.mean; the
# one-decimal f-string gives 53.8 and 53.7 for the same score.
NOISY_COUNTS = [2, 3, 0, 3, 0, 0, 2, 3, 3, 1, 0, 3, 0, 3, 2, 0, 3, 0, 2, 3, 1, 3, 1, 0, 3, 1, 0,
                2, 3, 1, 2, 3, 0, 2, 1, 0, 0, 2, 3, 2, 3, 3, 2, 1, 2, 0, 1, 3, 1, 3, 3, 2, 2, 0, 3,
                3, 2, 3, 2, 0, 3, 3, 1, 0, 1, 1, 2, 2, 1, 3, 1, 0, 2, 3, 3, 0, 0, 1, 0, 0]


def test_percent_prints_a_score_the_same_whichever_way_it_was_summed() -> None:
    from knowbench.scoring.metrics import percent, percent_interval

    rates = [c / 3 for c in NOISY_COUNTS]
    by_fsum, by_numpy = math.fsum(rates) / len(rates), float(__import__("numpy").mean(rates))
    assert by_fsum != by_numpy  # the two paths really differ
    assert percent(by_fsum) == percent(by_numpy) == "53.8"
    assert percent(0.4875) == "48.8" and percent(0.48749999999) == "48.7"  # real differences stay
    assert percent(None) == "—" and percent(-1e-15, signed=True) == "0.0"
    assert percent(0.012, signed=True) == "+1.2" and percent(-0.012, signed=True) == "-1.2"
    assert percent_interval(-0.05, 0.1, signed=True) == "[-5.0, +10.0]"


def test_headline_intervals_equal_scipy_percentile_bootstrap_over_tasks() -> None:
    stats = pytest.importorskip("scipy.stats")
    np = pytest.importorskip("numpy")
    from knowbench.scoring.metrics import CI_RESAMPLES, CI_SEED

    results = [s for i, c in enumerate(NOISY_COUNTS)
               for s in task(f"t{i}", [j < c for j in range(3)])]
    results += [sample(f"q{i}", 0, i % 3 != 0, kind="choice") for i in range(30)]
    scores = score(results)
    for name, values in (("pass@1", [c / 3 for c in NOISY_COUNTS]),
                         ("accuracy", [float(i % 3 != 0) for i in range(30)])):
        reference = stats.bootstrap((np.asarray(values),), np.mean, n_resamples=CI_RESAMPLES,
                                    method="percentile", confidence_level=0.95, vectorized=True,
                                    random_state=np.random.default_rng(CI_SEED))
        interval = scores.ci[name]
        assert (interval.low, interval.high) == pytest.approx(
            (reference.confidence_interval.low, reference.confidence_interval.high), abs=1e-12)
        assert interval.low < (scores.overall.pass_at[1] if name == "pass@1"
                               else scores.overall.accuracy) < interval.high
        assert (interval.resamples, interval.seed, interval.confidence) == (1000, 0, 0.95)
    assert score(results).ci == scores.ci  # a fixed seed: the same report every time


def test_headline_intervals_exist_only_for_kinds_the_run_has() -> None:
    scores = score(task("a", [True]) + task("b", [True]))
    assert set(scores.ci) == {"pass@1"}
    assert (scores.ci["pass@1"].low, scores.ci["pass@1"].high) == (1.0, 1.0)
    assert score([]).ci == {}


def test_the_split_share_is_rounded_like_every_other_percentage() -> None:
    from knowbench.records import Execution, Limits
    from knowbench.scoring.metrics import isolation_share, percent

    results = [sample(f"t{i}", 0, True).model_copy(update={"execution": Execution(
        status="pass", tests=[], sandbox="bwrap", isolation="split" if i == 0 else "in-process",
        limits=Limits())}) for i in range(16)]
    share = isolation_share(results)
    assert share["split_share"] == 6.3 and percent(1 / 16) == "6.3"  # round(6.25, 1) gives 6.2


# --- multiple choice: unanswered rate and partial credit ------------------------------------


def _reply(task_id: str, idx: int, chosen: list[str], answer: list[str], *,
           framework: str = "fw", domain: str = "dom") -> SampleResult:
    """A choice sample scored the way a run scores it (knowbench.run.score_choice)."""
    from knowbench.benchmark.schema import ChoiceTask
    from knowbench.records import Generation
    from knowbench.run import score_choice

    options = {letter: f"option {letter}" for letter in "ABCDE"}
    choice = ChoiceTask(task_id=task_id, domain=domain, framework=framework, question="Which?",
                        options=options, answer=answer, multiple=len(answer) > 1 or len(chosen) > 1)
    reply = ("Answer: " + ", ".join(chosen)) if chosen else "I am not sure."
    return score_choice(choice, Generation(task_id=task_id, sample_idx=idx, completion=reply))


def test_jaccard_partial_credit_and_unanswered_rate_per_task_and_group() -> None:
    results = [
        _reply("q1", 0, ["A", "B"], ["A", "B", "E"], framework="x"),  # 2/3
        _reply("q1", 1, [], ["A", "B", "E"], framework="x"),  # unanswered: 0
        _reply("q2", 0, ["C"], ["C"], framework="x"),  # exact: 1
        _reply("q3", 0, ["A", "D"], ["B", "D"], framework="y"),  # 1/3
    ]
    assert [r.chosen for r in results] == [["A", "B"], [], ["C"], ["A", "D"]]
    assert [r.jaccard for r in results] == pytest.approx([2 / 3, 0.0, 1.0, 1 / 3])
    tasks = {t.task_id: t for t in score_tasks(results)}
    assert tasks["q1"].jaccard == pytest.approx(1 / 3)
    assert tasks["q1"].unanswered == 0.5
    assert tasks["q2"].unanswered == 0.0
    scores = score(results)
    assert scores.overall.accuracy == pytest.approx(1 / 3)
    assert scores.overall.jaccard == pytest.approx((1 / 3 + 1 + 1 / 3) / 3)
    assert scores.overall.unanswered == pytest.approx(0.5 / 3)
    assert scores.by_framework["x"].jaccard == pytest.approx((1 / 3 + 1) / 2)
    assert scores.by_framework["y"].unanswered == 0.0
    assert scores.macro["jaccard"].groups == 1
    assert "unanswered" in scores.macro


def test_function_tasks_have_no_choice_metrics_and_old_choice_samples_no_credit() -> None:
    scores = score(task("f", [True]) + task("q", [True], kind="choice"), ks=(1,))
    # a choice sample that records neither its letters nor its credit (stored before partial
    # credit existed): both metrics are unknown, not zero
    assert scores.overall.jaccard is None
    assert scores.overall.unanswered is None
    assert scores.overall.accuracy == 1.0
    assert score(task("f", [True]), ks=(1,)).overall.unanswered is None
