"""Paired comparison of two runs on the tasks they share.

Two runs of the same benchmark are compared task by task, which is far more sensitive than
comparing two averages: each task is its own control.

* Difference in pass@1: mean over shared tasks of pass@1(B) - pass@1(A), where a task's
  pass@1 is c / n (its fraction of passing samples), with a paired percentile bootstrap
  confidence interval: tasks are resampled with replacement `resamples` times from a
  generator seeded with `seed` (numpy's PCG64), so the interval is reproducible.
* Exact McNemar test on the binary outcome of each task's first sample (sample_idx 0, so a
  greedy run uses exactly its result): with b tasks passed only by A and c only by B, the
  two-sided p-value is min(1, 2 * P[X <= min(b, c)]) for X ~ Binomial(b + c, 1/2), computed
  exactly; it is 1 when b + c = 0.
* Flipped tasks: those whose first-sample outcome differs between the runs.

Pure functions over stored results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from math import comb
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from knowbench.records import SampleResult

Kind = Literal["function", "choice", "all"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FlippedTask(_Model):
    """A task whose first sample passed in one run and failed in the other."""

    task_id: str
    domain: str
    passed_a: bool
    passed_b: bool

    @property
    def direction(self) -> Literal["gained", "lost"]:
        """'gained': B passes where A failed; 'lost': the reverse."""
        return "gained" if self.passed_b else "lost"


class McNemar(_Model):
    """only_a: tasks passed by A only (b); only_b: by B only (c); p_value: exact, two-sided."""

    only_a: int
    only_b: int
    both: int
    neither: int
    p_value: float


class Comparison(_Model):
    """B against A on their shared tasks (`difference` is B - A)."""

    kind: Kind
    shared_tasks: int
    only_in_a: int
    only_in_b: int
    pass1_a: float | None
    pass1_b: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    resamples: int
    seed: int
    mcnemar: McNemar
    flipped: list[FlippedTask]


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value for discordant counts b = only_a and c = only_b."""
    if only_a < 0 or only_b < 0:
        raise ValueError("discordant counts must not be negative")
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = Fraction(sum(comb(n, i) for i in range(min(only_a, only_b) + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000,
                        seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval for mean(b - a) over paired items.

    Draws `resamples` index vectors of len(a) with `numpy.random.default_rng(seed).integers`
    (in one (resamples, n) array, or in batches of 1000 rows for large inputs: the draws are
    the same either way) and takes the (1 - confidence) / 2 and (1 + confidence) / 2
    quantiles (numpy's linear interpolation) of the resampled means. Raises ValueError for
    empty or unequal inputs, resamples < 1, or confidence outside (0, 1).
    """
    if len(a) != len(b) or not a:
        raise ValueError("the paired samples must be non-empty and of equal length")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError("resamples must be >= 1 and confidence in (0, 1)")
    differences = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = len(differences)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    batch = resamples if resamples * n <= 10_000_000 else 1000
    for start in range(0, resamples, batch):
        rows = min(batch, resamples - start)
        indices = rng.integers(0, n, size=(rows, n))
        means[start:start + rows] = differences[indices].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.percentile(means, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def compare(results_a: Iterable[SampleResult], results_b: Iterable[SampleResult], *,
            kind: Kind = "function", resamples: int = 10_000, seed: int = 0,
            confidence: float = 0.95) -> Comparison:
    """Compare run B with run A on the tasks of `kind` present in both.

    With no shared task every statistic is None (p_value 1). Tasks are ordered by id.
    """
    by_task_a, by_task_b = _group(results_a, kind), _group(results_b, kind)
    shared = sorted(set(by_task_a) & set(by_task_b))
    rates_a = [_rate(by_task_a[task]) for task in shared]
    rates_b = [_rate(by_task_b[task]) for task in shared]
    firsts = [(_first(by_task_a[task]), _first(by_task_b[task])) for task in shared]
    only_a = sum(a and not b for a, b in firsts)
    only_b = sum(b and not a for a, b in firsts)
    test = McNemar(only_a=only_a, only_b=only_b, both=sum(a and b for a, b in firsts),
                   neither=sum(not a and not b for a, b in firsts),
                   p_value=mcnemar_exact(only_a, only_b))
    flipped = [FlippedTask(task_id=task, domain=by_task_a[task][0].domain, passed_a=a, passed_b=b)
               for task, (a, b) in zip(shared, firsts, strict=True) if a != b]
    low = high = difference = pass1_a = pass1_b = None
    if shared:
        pass1_a, pass1_b = float(np.mean(rates_a)), float(np.mean(rates_b))
        difference = pass1_b - pass1_a
        low, high = paired_bootstrap_ci(rates_a, rates_b, resamples=resamples, seed=seed,
                                        confidence=confidence)
    return Comparison(kind=kind, shared_tasks=len(shared),
                      only_in_a=len(set(by_task_a) - set(by_task_b)),
                      only_in_b=len(set(by_task_b) - set(by_task_a)),
                      pass1_a=pass1_a, pass1_b=pass1_b, difference=difference, ci_low=low,
                      ci_high=high, confidence=confidence, resamples=resamples, seed=seed,
                      mcnemar=test, flipped=flipped)


def _group(results: Iterable[SampleResult], kind: Kind) -> dict[str, list[SampleResult]]:
    grouped: dict[str, list[SampleResult]] = {}
    for result in results:
        if kind == "all" or result.kind == kind:
            grouped.setdefault(result.task_id, []).append(result)
    return grouped


def _rate(samples: list[SampleResult]) -> float:
    return sum(s.passed for s in samples) / len(samples)


def _first(samples: list[SampleResult]) -> bool:
    return min(samples, key=lambda s: s.sample_idx).passed
