"""Paired comparison statistics, checked against hand-computed values and scipy."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from diagnosis_helpers import sample
from knowbench.scoring.compare import compare, mcnemar_exact, paired_bootstrap_ci


@pytest.mark.parametrize("only_a, only_b, expected", [
    (0, 0, 1.0),  # no discordant pair: no evidence either way
    (1, 6, 2 * (1 + 7) / 2**7),  # 0.125
    (0, 12, 2 / 2**12),
    (5, 5, 1.0),  # min(1, 2 * P[X <= 5]) with X ~ Bin(10, 1/2) > 1
    (3, 10, 2 * (1 + 13 + 78 + 286) / 2**13),
])
def test_exact_mcnemar_matches_hand_computed_values(only_a: int, only_b: int, expected: float) -> None:
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-12)
    assert mcnemar_exact(only_b, only_a) == pytest.approx(expected, rel=1e-12)


def test_exact_mcnemar_matches_scipy_binomial_test() -> None:
    stats = pytest.importorskip("scipy.stats")
    for only_a in range(0, 15):
        for only_b in range(0, 15):
            if only_a + only_b == 0:
                continue
            expected = stats.binomtest(only_a, only_a + only_b, 0.5).pvalue
            assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_exact_mcnemar_stays_exact_for_many_pairs() -> None:
    # 2 * P[X <= 400] for X ~ Bin(1000, 1/2): tiny, and computed without float underflow.
    exact = 2 * sum(comb(1000, i) for i in range(401)) / 2**1000
    assert mcnemar_exact(400, 600) == pytest.approx(exact, rel=1e-12)
    assert mcnemar_exact(400, 600) > 0


def test_bootstrap_interval_equals_scipy_percentile_bootstrap() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2, 40).astype(float)
    b = rng.integers(0, 2, 40).astype(float)
    low, high = paired_bootstrap_ci(list(a), list(b), resamples=2000, seed=3, confidence=0.9)
    reference = stats.bootstrap((b - a,), np.mean, n_resamples=2000, method="percentile",
                                confidence_level=0.9, random_state=np.random.default_rng(3),
                                vectorized=True)
    assert (low, high) == pytest.approx((reference.confidence_interval.low,
                                         reference.confidence_interval.high), abs=1e-12)


def test_bootstrap_interval_of_a_constant_difference_is_that_difference() -> None:
    assert paired_bootstrap_ci([0, 0, 0], [1, 1, 1], resamples=50) == (1.0, 1.0)
    assert paired_bootstrap_ci([0.5, 0.25], [0.5, 0.25], resamples=50) == (0.0, 0.0)


def test_bootstrap_interval_covers_the_exact_resampling_distribution() -> None:
    # Two paired items with differences 0 and 1: the resampled mean is 0, 0.5 or 1 with
    # probabilities 1/4, 1/2, 1/4, so the 95% percentile interval is [0, 1].
    assert paired_bootstrap_ci([0, 0], [0, 1], resamples=4000, seed=1) == (0.0, 1.0)
    # An 80% interval excludes both tails (each 25% > 10%): [0.5, 0.5].
    assert paired_bootstrap_ci([0, 0], [0, 1], resamples=4000, seed=1, confidence=0.4) == (0.5, 0.5)


def test_bootstrap_is_reproducible_and_seed_dependent() -> None:
    a, b = [0, 1, 0, 1, 1, 0, 0, 1], [1, 1, 0, 1, 0, 1, 1, 1]
    assert paired_bootstrap_ci(a, b, seed=5) == paired_bootstrap_ci(a, b, seed=5)
    assert paired_bootstrap_ci(a, b, seed=5, resamples=200) != paired_bootstrap_ci(a, b, seed=6, resamples=200)
    with pytest.raises(ValueError):
        paired_bootstrap_ci([], [])
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1], [1], confidence=1.0)


def test_compare_pairs_shared_tasks_and_lists_the_flips() -> None:
    run_a = [sample("t1", True), sample("t2", True), sample("t3", False), sample("t4", False),
             sample("only-a", True)]
    run_b = [sample("t1", False), sample("t2", True), sample("t3", True), sample("t4", True),
             sample("only-b", False), sample("q", False, kind="choice")]
    result = compare(run_a, run_b, resamples=500)
    assert (result.shared_tasks, result.only_in_a, result.only_in_b) == (4, 1, 1)
    assert (result.pass1_a, result.pass1_b) == (0.5, 0.75)
    assert result.difference == pytest.approx(0.25)
    assert result.ci_low is not None and result.ci_high is not None
    assert result.ci_low <= 0.25 <= result.ci_high
    assert (result.mcnemar.only_a, result.mcnemar.only_b, result.mcnemar.both,
            result.mcnemar.neither) == (1, 2, 1, 0)
    assert result.mcnemar.p_value == pytest.approx(1.0)  # 2 * P[X <= 1], X ~ Bin(3, 1/2) = 1
    assert [(f.task_id, f.direction) for f in result.flipped] == [
        ("t1", "lost"), ("t3", "gained"), ("t4", "gained")]


def test_compare_uses_pass_rates_for_the_difference_and_first_samples_for_mcnemar() -> None:
    run_a = [sample("t", False, idx=0), sample("t", True, idx=1), sample("t", True, idx=2),
             sample("u", False, idx=0), sample("u", False, idx=1), sample("u", False, idx=2)]
    run_b = [sample("t", True, idx=0), sample("t", True, idx=1), sample("t", True, idx=2),
             sample("u", True, idx=0), sample("u", False, idx=1), sample("u", False, idx=2)]
    result = compare(run_a, run_b, resamples=100)
    assert result.pass1_a == pytest.approx((2 / 3 + 0) / 2)
    assert result.pass1_b == pytest.approx((1 + 1 / 3) / 2)
    assert (result.mcnemar.only_a, result.mcnemar.only_b) == (0, 2)


def test_compare_without_shared_tasks_has_no_statistics() -> None:
    result = compare([sample("a", True)], [sample("b", True)])
    assert result.shared_tasks == 0 and result.difference is None and result.ci_low is None
    assert result.mcnemar.p_value == 1.0 and result.flipped == []


def test_the_compare_command_refuses_runs_that_share_no_task(tmp_path) -> None:
    from diagnosis_helpers import settings, store_run
    from helpers import run_knowbench

    domaineval = settings(model="a", benchmark_hash="sha256:1111")
    domaineval["benchmark"]["name"] = "domaineval-basic"
    koco = settings(model="b", benchmark_hash="sha256:2222")
    koco["benchmark"]["name"] = "koco-bench"
    one = store_run(tmp_path / "one", [sample("crypto/1", True)], domaineval)
    other = store_run(tmp_path / "other", [sample("koco/1", False)], koco)
    for extra in ((), ("--json",)):
        refused = run_knowbench("compare", str(one), str(other), *extra)
        assert refused.returncode == 2, refused.stdout
        assert "Traceback" not in refused.stderr and refused.stdout == ""
        assert "domaineval-basic" in refused.stderr and "koco-bench" in refused.stderr
        assert "different benchmarks" in refused.stderr and "fix:" in refused.stderr


def test_the_compare_command_warns_when_runs_share_only_some_tasks(tmp_path) -> None:
    from diagnosis_helpers import settings, store_run
    from helpers import run_knowbench

    one = store_run(tmp_path / "one", [sample("a", True), sample("b", True), sample("c", True)],
                    settings(model="a"))
    other = store_run(tmp_path / "other", [sample("a", False), sample("b", True)], settings(model="b"))
    done = run_knowbench("compare", str(one), str(other), "--resamples", "100")
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "share 2 function tasks" in done.stderr
    assert "1 only in A" in done.stderr
    assert "b · none" in done.stdout and "a · none" in done.stdout  # the runs' labels
