"""CDD: contamination detection by the peakedness of a model's output distribution.

Dong et al., "Generalization or Memorization: Data Contamination and Trustworthy Evaluation
for Large Language Models" (ACL Findings 2024, arXiv:2402.15938), the check KOCO-Bench
applies to its models. For one task, with the greedy output s₀ (temperature 0) and n outputs
s₁ … sₙ sampled at temperature 0.8:

- every output is tokenised and cut to its first `length` tokens (100, as the paper's code);
- dᵢ = the token-level edit (Levenshtein) distance between sᵢ and s₀;
- l = the longest of the outputs in tokens (s₀ included);
- the edit-distance distribution p(d) = |{i : dᵢ = d}| / n, and the peakedness
  Peak = F(α·l) = Σ_{d ≤ α·l} p(d): the share of samples within α·l edits of the greedy one;
- the task is flagged (its output is suspiciously peaked: likely memorised) when Peak > ξ.

Defaults are the paper's: α = 0.05, ξ = 0.01 (with n = 50, one sample out of fifty that is
within 5% of the longest output's length from the greedy one flags the task). The paper's
code also names a stricter setting "to enhance the detection precision" for real-world
use, α = 0 and ξ = 0.2 (more than a fifth of the samples identical to the greedy output).

Tokens here are not the model's own (its tokenizer is rarely at hand behind an API): an
output is split into identifiers, numbers and single punctuation characters
(`TOKEN_PATTERN`); edit distances and lengths are counted in those. `normalised` distances
(dᵢ / max(|sᵢ|, |s₀|), 0 … 1) are reported beside the distribution for people to read; the
verdict uses the paper's α·l rule.

The date check: a task whose source was created after the model's training cutoff cannot
have been trained on; one created before may have been. Tasks record their source's
creation date as `metadata["source_created"]` (ISO 8601 date or time).
"""

from __future__ import annotations

import re
import statistics
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ALPHA = 0.05
XI = 0.01
LENGTH = 100
SAMPLES = 50
TEMPERATURE = 0.8
SOURCE_CREATED = "source_created"
TOKEN_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[^\sA-Za-z0-9_]")

Verdict = Literal["flagged", "not flagged", "no output"]
DateCheck = Literal["after cutoff", "before cutoff", "no date", "no cutoff"]


class CddSettings(BaseModel):
    """How the check is made: recorded with its results."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    samples: int = Field(default=SAMPLES, ge=1, description="Sampled outputs per task.")
    temperature: float = Field(default=TEMPERATURE, gt=0)
    alpha: float = Field(default=ALPHA, ge=0, le=1, description="Edits allowed, as a share of l.")
    xi: float = Field(default=XI, ge=0, lt=1, description="Peakedness above which a task is flagged.")
    length: int = Field(default=LENGTH, ge=1, description="Tokens of each output compared.")


class TaskCdd(BaseModel):
    """The check of one task."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    distances: list[int] = Field(description="Token edit distance of each sample to the greedy output.")
    max_length: int = Field(description="l: the longest output in tokens (after the cut).")
    peak: float = Field(description="Share of samples within alpha * l edits of the greedy output.")
    verdict: Verdict
    normalised_median: float | None = Field(description="Median of d_i / max(|s_i|, |s_0|).")
    identical: float = Field(description="Share of samples identical to the greedy output (d = 0).")
    source_created: str | None = None
    date_check: DateCheck = "no cutoff"


class CddSummary(BaseModel):
    """A benchmark's check: the settings, every task, and the share flagged."""

    model_config = ConfigDict(extra="forbid")

    model: str
    settings: CddSettings
    cutoff: str | None = None
    tasks: list[TaskCdd]
    flagged: int
    checked: int = Field(description="Tasks with some output (no-output tasks are left out).")
    flagged_share: float | None
    mean_peak: float | None
    dates: dict[str, int] = Field(default_factory=dict, description="Tasks per date check.")
    flagged_after_cutoff: list[str] = Field(
        default_factory=list, description="Flagged tasks whose source is newer than the cutoff.")


def tokens(text: str, length: int = LENGTH) -> list[str]:
    """The first `length` tokens of `text` (see TOKEN_PATTERN)."""
    return TOKEN_PATTERN.findall(text)[:length]


def edit_distance(a: list[str], b: list[str]) -> int:
    """Levenshtein distance between two token lists (insert, delete, substitute: cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, left in enumerate(a, start=1):
        current = [i]
        for j, right in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (left != right)))
        previous = current
    return previous[-1]


def check_task(task_id: str, greedy: str, samples: list[str],
               settings: CddSettings = CddSettings()) -> TaskCdd:  # noqa: B008 (frozen)
    """CDD of one task from its greedy output and its sampled outputs (texts already
    reduced to what is compared, e.g. the code of a reply)."""
    if not samples:
        raise ValueError("CDD needs at least one sampled output")
    reference = tokens(greedy, settings.length)
    sampled = [tokens(sample, settings.length) for sample in samples]
    distances = [edit_distance(reference, sample) for sample in sampled]
    longest = max(len(reference), *(len(sample) for sample in sampled))
    within = sum(distance <= settings.alpha * longest for distance in distances)
    peak = within / len(distances)
    normalised = [distance / max(len(reference), len(sample)) if max(len(reference), len(sample))
                  else 0.0 for distance, sample in zip(distances, sampled, strict=True)]
    verdict: Verdict = ("no output" if longest == 0 else
                        "flagged" if peak > settings.xi else "not flagged")
    return TaskCdd(task_id=task_id, distances=distances, max_length=longest, peak=round(peak, 6),
                   verdict=verdict, normalised_median=round(statistics.median(normalised), 6),
                   identical=round(sum(d == 0 for d in distances) / len(distances), 6))


def parse_date(text: str) -> date:
    """An ISO 8601 date or date-time ("2024-05-01", "2024-05-01T12:00:00Z") as a date;
    `ValueError` otherwise."""
    text = text.strip()
    try:
        return date.fromisoformat(text[:10]) if len(text) <= 10 else \
            datetime.fromisoformat(text.replace("Z", "+00:00")).date()
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 date (YYYY-MM-DD)") from None


def date_check(metadata: dict[str, Any], cutoff: date | None) -> tuple[str | None, DateCheck]:
    """(the task's recorded source date, how it compares with the model's cutoff). A date
    that does not parse counts as none."""
    created = metadata.get(SOURCE_CREATED)
    when = None
    if isinstance(created, str):
        try:
            when = parse_date(created)
        except ValueError:
            created = None
    else:
        created = None
    if cutoff is None:
        return created, "no cutoff"
    if when is None:
        return created, "no date"
    return created, "after cutoff" if when > cutoff else "before cutoff"


def summarise(model: str, settings: CddSettings, tasks: list[TaskCdd],
              cutoff: date | None = None) -> CddSummary:
    """The benchmark-level share flagged over the tasks that had output."""
    checked = [task for task in tasks if task.verdict != "no output"]
    flagged = [task for task in checked if task.verdict == "flagged"]
    dates: dict[str, int] = {}
    for task in tasks:
        dates[task.date_check] = dates.get(task.date_check, 0) + 1
    return CddSummary(
        model=model, settings=settings, cutoff=cutoff.isoformat() if cutoff else None, tasks=tasks,
        flagged=len(flagged), checked=len(checked),
        flagged_share=round(len(flagged) / len(checked), 6) if checked else None,
        mean_peak=round(statistics.fmean(t.peak for t in checked), 6) if checked else None,
        dates=dates if cutoff else {},
        flagged_after_cutoff=[t.task_id for t in flagged if t.date_check == "after cutoff"])
