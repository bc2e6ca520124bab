"""Metrics computed from SampleResult records: pass@k, AvgPassRate, Pass@any and accuracy.

Definitions follow the two papers this project reproduces:

* pass@k is the unbiased estimator of Chen et al. (2021), as used by DomainEval:
  for a task with n samples of which c pass, pass@k = 1 - C(n-c, k) / C(n, k).
* Pass@1 (KOCO-Bench) is "the proportion of samples where all test cases pass"; with n samples
  per task this is pass@1 = c / n, the same estimator at k = 1.
* AvgPassRate, APR (KOCO-Bench) is "the average proportion of test cases passed per sample":
  a sample passing 2 of 4 tests counts 0.5 (SampleResult.pass_fraction).
* Pass@any (KOCO-Bench) counts a task as solved if at least one of its samples passes.
* ACC (KOCO-Bench) is the accuracy on multiple-choice ("choice") tasks: a sample is right only
  when it names exactly the correct letters (the exact set), as KOCO-Bench scores it.
* Two secondary multiple-choice figures, never folded into ACC: the unanswered rate (the share
  of samples whose reply names no offered letter: cut off, refused, or an answer in a form the
  parser does not read) and partial credit, the Jaccard index |chosen ∩ answer| /
  |chosen ∪ answer| of a sample's letters and the correct ones (0 for an unanswered sample; 1
  exactly when the sample is right). Both are per task means over its samples, then averaged
  over tasks like ACC.
* API_acc and Param_corr (NovelAPIBench's companion metrics, defined here since its code
  computes neither; docs/novel.md): for tasks whose target API is spied on (`api_check`),
  the fraction of a task's samples that called the target API in a test
  (`SampleResult.api_called`), and the fraction whose calls of it all bound to its signature
  (`params_correct`; samples whose signature could not be read are left out); each averaged
  over such tasks like pass@1. Tasks without a spy count in neither.

Aggregation. Every metric is first computed per task, then averaged with each task weighted
equally ("micro" average over tasks: a domain with more tasks weighs more). DomainEval also
reports a "macro" average: the metric is computed per domain and the domain values are averaged
with each domain weighted equally, together with the standard deviation across domains.

Standard deviation across domains: the *sample* standard deviation (n - 1 in the denominator,
``statistics.stdev``). DomainEval's Table 1 caption says only "Std indicates the standard
deviation of Pass@k across different domains"; the denominator is fixed by its published
numbers. The project's leaderboard data (domaineval.github.io, data/data_*.json) gives, for
gpt-4o-mini Pass@5, the domain values 71.03, 91.26, 49.00, 72.66, 61.83 and (System, recovered
from the reported mean 67.13) 57.00: their sample std is 14.75, exactly the "14.75 standard
deviation in Pass@5" quoted in the paper's text, while the population std would be 13.46. The
same holds for every model checked (e.g. Llama-2-13b-chat Pass@1: 24.97 sample vs 22.80
population). With fewer than two domains the std is undefined and reported as None.

Confidence intervals. The headline pass@1 and accuracy carry a 95% percentile bootstrap
interval (`Scores.ci`): the run's tasks of that kind are resampled with replacement 1,000
times from numpy's PCG64 generator seeded with 0, the metric is recomputed on each resample
(the mean of the per-task values c / n), and the 2.5th and 97.5th percentiles of those means
(numpy's linear interpolation) are the bounds. The seed is fixed, so the same results give
the same interval in every report. It measures how much the score depends on which tasks the
benchmark happened to contain, not the sampling noise of the model within a task.

Rounding. Every score shown to a reader goes through `percent`: 100 × the fraction, rounded
half up to one decimal after dropping float noise below 1e-9 percentage points, so a value
computed along two paths (0.5375 and 0.5374999999999999) prints the same everywhere.

Everything here is pure: no I/O, no global state. NaN never appears in the pydantic models;
a value that cannot be computed (no task of that kind, too few samples for k) is None, which
serialises as JSON null.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from knowbench.records import SampleResult

DEFAULT_KS: tuple[int, ...] = (1, 5, 10)
CI_RESAMPLES = 1000
CI_SEED = 0
CI_CONFIDENCE = 0.95


def percent(value: float | None, digits: int = 1, *, signed: bool = False) -> str:
    """A fraction as the percentage every knowbench output shows ("—" for None): 100 × value
    rounded half up to `digits` decimals after float noise below 1e-9 points is dropped;
    `signed` writes "+" before a positive result (differences)."""
    if value is None or math.isnan(value):
        return "—"
    rounded = Decimal(repr(round(100 * value, 9))).quantize(Decimal(1).scaleb(-digits),
                                                            rounding=ROUND_HALF_UP)
    if rounded == 0:
        rounded = abs(rounded)
    return f"+{rounded}" if signed and rounded > 0 else str(rounded)


def percent_interval(low: float | None, high: float | None, *, signed: bool = False) -> str:
    """"[low, high]" in percent through `percent` ("—" when either bound is None)."""
    if low is None or high is None:
        return "—"
    return f"[{percent(low, signed=signed)}, {percent(high, signed=signed)}]"


def jaccard(chosen: Iterable[str], answer: Iterable[str]) -> float:
    """Partial credit of a multiple-choice sample: |chosen ∩ answer| / |chosen ∪ answer|
    (0.0 when both are empty)."""
    picked, right = set(chosen), set(answer)
    union = picked | right
    return len(picked & right) / len(union) if union else 0.0


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimate for one task with ``n`` samples of which ``c`` are correct.

    Returns 1 - C(n-c, k) / C(n, k), the probability that a uniformly random k-subset of the n
    samples contains at least one correct sample. Computed in product form,
    1 - prod_{i=n-c+1}^{n} (1 - k / i), which avoids huge binomial coefficients.

    Returns float('nan') when n < k (the estimate is undefined). Raises ValueError unless
    k >= 1 and 0 <= c <= n.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if c < 0 or c > n:
        raise ValueError(f"c must satisfy 0 <= c <= n, got c={c}, n={n}")
    if n < k:
        return float("nan")
    if n - c < k:
        return 1.0
    prob_all_wrong = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_wrong *= 1.0 - k / i
    return 1.0 - prob_all_wrong


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskScore(_Model):
    """Scores of one task, computed from all of its samples.

    pass_at maps every requested k to pass_at_k(n, c, k), or None when n < k.
    apr is the mean SampleResult.pass_fraction over the task's samples.
    pass_any is True when at least one sample passed (c >= 1).
    accuracy is the fraction of samples that passed (c / n) for choice tasks, None otherwise;
    unanswered the fraction of its samples that name no letter, and jaccard the mean partial
    credit of its samples (None for function tasks, and None when a sample does not record its
    letters or credit, e.g. one stored before partial credit existed).
    """

    task_id: str
    kind: Literal["function", "choice"]
    domain: str
    framework: str | None = None
    difficulty: str | None = None
    n: int
    c: int
    pass_at: dict[int, float | None]
    apr: float
    pass_any: bool
    accuracy: float | None = None
    unanswered: float | None = None
    jaccard: float | None = None
    api_acc: float | None = None
    param_corr: float | None = None


class MetricSet(_Model):
    """Metrics over a set of tasks, each task weighted equally.

    tasks/samples count all tasks and samples in the set; function_tasks/choice_tasks by kind.
    pass_at[k] is the mean of pass@k over function tasks with n >= k (None when there are none);
    pass_at_tasks[k] is how many function tasks contributed to pass_at[k].
    apr and pass_any (fraction of tasks with at least one passing sample) are over function
    tasks, accuracy, unanswered and jaccard over choice tasks; each is None when there is no
    task of that kind (jaccard also when a choice task has none).
    """

    tasks: int
    samples: int
    function_tasks: int
    choice_tasks: int
    pass_at: dict[int, float | None]
    pass_at_tasks: dict[int, int]
    apr: float | None = None
    pass_any: float | None = None
    accuracy: float | None = None
    unanswered: float | None = None
    jaccard: float | None = None
    api_acc: float | None = None
    param_corr: float | None = None
    api_tasks: int = 0


class MacroStat(_Model):
    """One metric macro-averaged across domains.

    groups is the number of domains that have a value for the metric; mean is their unweighted
    mean (None when groups == 0); std is their sample standard deviation (n - 1 denominator,
    as in DomainEval), None when groups < 2.
    """

    mean: float | None = None
    std: float | None = None
    groups: int


class Interval(_Model):
    """A percentile bootstrap confidence interval of a headline metric (fractions)."""

    low: float
    high: float
    confidence: float
    resamples: int
    seed: int
    tasks: int


class Scores(_Model):
    """All scores of one run.

    ks: the k values requested, sorted and without duplicates.
    overall: micro average over all tasks.
    by_domain, by_framework, by_difficulty: the same metrics per group; tasks without a
    framework (or difficulty) are left out of that breakdown.
    macro: for "pass@<k>" (each k in ks), "apr", "pass_any", "accuracy", "unanswered" and
    "jaccard", the mean and
    sample std across domains of the by_domain values.
    ci: bootstrap intervals (module docstring) of the overall "pass@1" (function tasks) and
    "accuracy" (choice tasks); a metric without tasks has no entry.
    """

    ks: list[int]
    overall: MetricSet
    by_domain: dict[str, MetricSet]
    by_framework: dict[str, MetricSet]
    by_difficulty: dict[str, MetricSet]
    macro: dict[str, MacroStat]
    ci: dict[str, Interval] = {}


def bootstrap_interval(values: Sequence[float], *, resamples: int = CI_RESAMPLES,
                       seed: int = CI_SEED, confidence: float = CI_CONFIDENCE) -> Interval | None:
    """Percentile bootstrap interval of the mean of per-task `values` (None when empty).

    Draws `resamples` index vectors of len(values) with `numpy.random.default_rng(seed)`
    and takes the (1 - confidence) / 2 and (1 + confidence) / 2 percentiles of the means.
    """
    if not values:
        return None
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError("resamples must be >= 1 and confidence in (0, 1)")
    import numpy as np  # imported where scores are made, not by every command that imports this module

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    batch = max(1, min(resamples, 10_000_000 // len(data)))  # bounded memory for large runs
    for start in range(0, resamples, batch):
        rows = min(batch, resamples - start)
        means[start:start + rows] = data[rng.integers(0, len(data), size=(rows, len(data)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.percentile(means, [100 * alpha, 100 * (1 - alpha)])
    return Interval(low=float(low), high=float(high), confidence=confidence, resamples=resamples,
                    seed=seed, tasks=len(data))


def _headline_intervals(tasks: Sequence[TaskScore]) -> dict[str, Interval]:
    per_metric = {"pass@1": [t.c / t.n for t in tasks if t.kind == "function"],
                  "accuracy": [t.accuracy for t in tasks if t.accuracy is not None]}
    intervals = {name: bootstrap_interval(values) for name, values in per_metric.items()}
    return {name: interval for name, interval in intervals.items() if interval is not None}


def _normalise_ks(ks: Iterable[int]) -> list[int]:
    """Sorted, de-duplicated ks; ValueError when empty or when any k < 1."""
    out = sorted(set(ks))
    if not out:
        raise ValueError("ks must contain at least one k")
    if out[0] < 1:
        raise ValueError(f"every k must be >= 1, got {out[0]}")
    return out


def _mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, or None for an empty sequence."""
    if not values:
        return None
    return math.fsum(values) / len(values)


def _score_one_task(samples: list[SampleResult], ks: list[int]) -> TaskScore:
    """Score one task from its samples (non-empty, all with the same task_id and metadata)."""
    first = samples[0]
    n = len(samples)
    c = sum(1 for s in samples if s.passed)
    pass_at: dict[int, float | None] = {}
    for k in ks:
        value = pass_at_k(n, c, k)
        pass_at[k] = None if math.isnan(value) else value
    apr = math.fsum(s.pass_fraction for s in samples) / n
    choice = first.kind == "choice"
    credits = [s.jaccard for s in samples]
    called = [s.api_called for s in samples if s.api_called is not None]
    bound = [s.params_correct for s in samples if s.params_correct is not None]
    return TaskScore(
        api_acc=sum(called) / len(called) if called else None,
        param_corr=sum(bound) / len(bound) if bound else None,
        task_id=first.task_id,
        kind=first.kind,
        domain=first.domain,
        framework=first.framework,
        difficulty=first.difficulty,
        n=n,
        c=c,
        pass_at=pass_at,
        apr=apr,
        pass_any=c >= 1,
        accuracy=c / n if choice else None,
        unanswered=(sum(not s.chosen for s in samples) / n
                    if choice and all(s.chosen is not None for s in samples) else None),
        jaccard=(math.fsum(credits) / n  # type: ignore[arg-type]
                 if choice and all(value is not None for value in credits) else None),
    )


def score_tasks(results: Iterable[SampleResult], ks: Iterable[int] = DEFAULT_KS) -> list[TaskScore]:
    """Group sample results by task_id and score each task.

    Tasks come out in the order their first sample appears. Tasks may have different numbers of
    samples. Raises ValueError when ks is empty or has a k < 1, when a (task_id, sample_idx)
    pair repeats, or when samples of one task disagree on kind, domain, framework or difficulty.
    """
    ks_list = _normalise_ks(ks)
    by_task: dict[str, list[SampleResult]] = {}
    seen: set[tuple[str, int]] = set()
    for result in results:
        key = (result.task_id, result.sample_idx)
        if key in seen:
            raise ValueError(f"duplicate sample {result.sample_idx} for task {result.task_id!r}")
        seen.add(key)
        group = by_task.setdefault(result.task_id, [])
        if group:
            first = group[0]
            for field in ("kind", "domain", "framework", "difficulty"):
                if getattr(result, field) != getattr(first, field):
                    raise ValueError(
                        f"task {result.task_id!r}: samples disagree on {field} "
                        f"({getattr(first, field)!r} vs {getattr(result, field)!r})"
                    )
        group.append(result)
    return [_score_one_task(samples, ks_list) for samples in by_task.values()]


def _metric_set(tasks: Sequence[TaskScore], ks: list[int]) -> MetricSet:
    """Micro-average the task scores, each task weighted equally."""
    function = [t for t in tasks if t.kind == "function"]
    choice = [t for t in tasks if t.kind == "choice"]
    pass_at: dict[int, float | None] = {}
    pass_at_tasks: dict[int, int] = {}
    for k in ks:
        values = [v for t in function if (v := t.pass_at.get(k)) is not None]
        pass_at[k] = _mean(values)
        pass_at_tasks[k] = len(values)
    return MetricSet(
        tasks=len(tasks),
        samples=sum(t.n for t in tasks),
        function_tasks=len(function),
        choice_tasks=len(choice),
        pass_at=pass_at,
        pass_at_tasks=pass_at_tasks,
        apr=_mean([t.apr for t in function]),
        pass_any=_mean([1.0 if t.pass_any else 0.0 for t in function]),
        accuracy=_mean([t.accuracy for t in choice if t.accuracy is not None]),
        unanswered=(_mean([t.unanswered for t in choice])  # type: ignore[misc]
                    if all(t.unanswered is not None for t in choice) else None),
        jaccard=(_mean([t.jaccard for t in choice])  # type: ignore[misc]
                 if all(t.jaccard is not None for t in choice) else None),
        api_acc=_mean([t.api_acc for t in function if t.api_acc is not None]),
        param_corr=_mean([t.param_corr for t in function if t.param_corr is not None]),
        api_tasks=sum(t.api_acc is not None for t in function),
    )


def _breakdown(
    tasks: Sequence[TaskScore], key: Callable[[TaskScore], str | None], ks: list[int]
) -> dict[str, MetricSet]:
    """MetricSet per group, groups sorted by name; tasks whose key is None are left out."""
    groups: dict[str, list[TaskScore]] = {}
    for task in tasks:
        name = key(task)
        if name is not None:
            groups.setdefault(name, []).append(task)
    return {name: _metric_set(groups[name], ks) for name in sorted(groups)}


def _macro_stat(values: Sequence[float]) -> MacroStat:
    """Unweighted mean and sample standard deviation (n - 1) of per-domain values."""
    return MacroStat(
        mean=_mean(values),
        std=statistics.stdev(values) if len(values) >= 2 else None,
        groups=len(values),
    )


def _macro(by_domain: dict[str, MetricSet], ks: list[int]) -> dict[str, MacroStat]:
    """Macro average and sample std across domains for every metric name."""
    per_metric: dict[str, list[float]] = {f"pass@{k}": [] for k in ks}
    per_metric.update({"apr": [], "pass_any": [], "accuracy": [], "unanswered": [], "jaccard": []})
    for metrics in by_domain.values():
        for k in ks:
            value = metrics.pass_at[k]
            if value is not None:
                per_metric[f"pass@{k}"].append(value)
        for name, value in (
            ("apr", metrics.apr),
            ("pass_any", metrics.pass_any),
            ("accuracy", metrics.accuracy),
            ("unanswered", metrics.unanswered),
            ("jaccard", metrics.jaccard),
        ):
            if value is not None:
                per_metric[name].append(value)
    return {name: _macro_stat(values) for name, values in per_metric.items()}


def score(results: Iterable[SampleResult], ks: Iterable[int] = DEFAULT_KS) -> Scores:
    """Score a run: per-task scores aggregated overall, per group, and macro across domains.

    Raises ValueError under the same conditions as score_tasks. An empty input gives zero
    counts and None for every metric.
    """
    ks_list = _normalise_ks(ks)
    tasks = score_tasks(results, ks_list)
    by_domain = _breakdown(tasks, lambda t: t.domain, ks_list)
    return Scores(
        ks=ks_list,
        overall=_metric_set(tasks, ks_list),
        by_domain=by_domain,
        by_framework=_breakdown(tasks, lambda t: t.framework, ks_list),
        by_difficulty=_breakdown(tasks, lambda t: t.difficulty, ks_list),
        macro=_macro(by_domain, ks_list),
        ci=_headline_intervals(tasks),
    )


def k_shortfalls(scores: Scores, ks: Iterable[int]) -> list[str]:
    """For each k in `ks` that some function tasks cannot be scored at (pass@k needs n >= k
    samples of a task), one sentence saying so: pass@k left out, or counted over fewer tasks."""
    overall = scores.overall
    notes = []
    for k in sorted(set(ks)):
        counted, total = overall.pass_at_tasks.get(k, 0), overall.function_tasks
        if counted == total:
            continue
        if counted == 0:
            notes.append(f"pass@{k} is left out: it needs n >= {k} samples per task, and no "
                         f"function task has that many (sample more with --n {k})")
        else:
            notes.append(f"pass@{k} counts only {counted} of {total} function tasks: the others "
                         f"have fewer than {k} samples (pass@k needs n >= k)")
    return notes


def isolation_share(results: list[SampleResult]) -> dict[str, Any]:
    """How many executed samples were judged split, and which tasks ran in-process."""
    executed = [result for result in results if result.execution is not None]
    split = sum(result.execution.isolation == "split" for result in executed)  # type: ignore[union-attr]
    in_process = sorted({result.task_id for result in executed
                         if result.execution.isolation != "split"})  # type: ignore[union-attr]
    return {"split": split, "in_process": len(executed) - split,
            "split_share": float(percent(split / len(executed))) if executed else None,
            "in_process_tasks": in_process}
