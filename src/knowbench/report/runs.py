"""Stored runs as a report sees them, and the report's tables (markdown, CSV, JSON).

Everything here reads what `knowbench run` stored, through `RunDirectory`, and, when the
benchmark directory named in run.json still exists unchanged, its tasks; nothing is executed.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.diagnosis.runs import load_diagnoses, task_infos
from knowbench.records import SampleResult
from knowbench.report.charts import Series
from knowbench.scoring.cost import (
    CostSummary,
    Price,
    format_money,
    model_name,
    price_for,
    sample_tokens,
    summarise_cost,
)
from knowbench.scoring.metrics import Scores, percent, percent_interval, score
from knowbench.scoring.taxonomy import KOCO_CATEGORIES, LABELS, Diagnosis
from knowbench.store import RunDirectory, run_label

TableFormat = Literal["md", "csv", "json"]


@dataclass
class RunView:
    """One stored run with its scores and failure diagnoses."""

    name: str
    run_dir: Path
    run_json: dict[str, Any]
    results: list[SampleResult]
    scores: Scores
    diagnoses: list[Diagnosis]
    tasks: dict[str, FunctionTask | ChoiceTask] = field(default_factory=dict)
    price: Price | None = None

    @property
    def cost(self) -> CostSummary:
        """Tokens per sample and, when the run has a price, money (knowbench.scoring.cost)."""
        return summarise_cost(self.results, self.scores.overall.pass_at.get(1), self.price)

    @property
    def settings(self) -> dict[str, Any]:
        return self.run_json.get("settings", {})

    @property
    def model(self) -> str:
        model = self.settings.get("model", {})
        return str(model.get("model") or model.get("backend") or "?")

    @property
    def method(self) -> str:
        return str(self.settings.get("method", {}).get("method", "?"))

    @property
    def benchmark(self) -> str:
        benchmark = self.settings.get("benchmark", {})
        digest = str(benchmark.get("content_hash", ""))
        return f"{benchmark.get('name', '?')} v{benchmark.get('version', '?')} ({digest[:19]})"

    @property
    def sampling(self) -> str:
        """"n=<samples per task>, T=<temperature>"; n is what the run holds (a replay file
        decides it), falling back to the requested n."""
        per_task = Counter(r.task_id for r in self.results)
        params = self.settings.get("params", {})
        counts = sorted(set(per_task.values()))
        n = (str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}") if counts \
            else str(params.get("n", 1))
        return f"n={n}, T={params.get('temperature', 0)}"

    def applied_limits(self) -> str:
        """The limits the samples ran under (their execution records), and the time policy."""
        return applied_limits(self.results, self.settings)

    def failure_counts(self) -> Counter[str]:
        """'pass' and every label -> number of function samples."""
        counts: Counter[str] = Counter(d.label for d in self.diagnoses)
        counts["pass"] = sum(r.passed for r in self.results if r.kind == "function")
        return counts

    def koco_counts(self) -> Counter[str]:
        return Counter(d.koco for d in self.diagnoses if d.koco is not None)


def load_views(run_dirs: list[Path], ks: tuple[int, ...] = (1, 5, 10),
               prices: dict[str, Price] | None = None) -> list[RunView]:
    """Load every run; names are the runs' labels (knowbench.store.label), made unique with
    the directory name. A run's price is its entry in `prices` (a price file, by model name
    or pattern) when there is one, else the price it was run or scored with (run.json)."""
    views = []
    for run_dir in run_dirs:
        run = RunDirectory.open(run_dir)
        results = run.results()
        tasks = run.tasks()
        diagnoses = load_diagnoses(run_dir, results, task_infos(tasks))
        view = RunView(name="", run_dir=run_dir, run_json=run.document(), results=results,
                       scores=score(results, ks), diagnoses=diagnoses, tasks=tasks)
        view.name = run_label(view.run_json)
        stored = view.run_json.get("price")
        view.price = (price_for(model_name(view.settings), prices or {})
                      or (Price.model_validate(stored) if stored else None))
        views.append(view)
    names = Counter(view.name for view in views)
    for view in views:
        if names[view.name] > 1:
            view.name = f"{view.name} ({view.run_dir.name})"
    return views


def applied_limits(results: list[SampleResult], settings: dict[str, Any]) -> str:
    """What limits the executed samples really had: the wall-clock limit as one value or
    "low–high s (median m s)" over the samples' `execution.limits`, the memory limit, and the
    time policy that chose them. Falls back to the configured limits when nothing ran."""
    limits = [r.execution.limits for r in results if r.execution is not None]
    policy = settings.get("time_policy", {})
    mode = policy.get("mode", "")
    configured = settings.get("limits", {})
    why = {"calibrated": f"calibrated: max({_seconds(policy.get('floor_s', 3.0))}, "
                         f"{policy.get('factor', 10.0):g} × the reference's runtime)",
           "fixed": f"fixed by --timeout {_seconds(policy.get('fixed_s') or configured.get('wall_s'))}",
           "benchmark": "the benchmark's limits"}.get(mode, "policy not recorded")
    if not limits:
        return (f"configured {_seconds(configured.get('wall_s'))}, "
                f"{configured.get('memory_mb', '?')} MB ({why}; no sample was executed)")
    walls = sorted(limit.wall_s for limit in limits)
    median = statistics.median(walls)
    wall = (_seconds(walls[0]) if walls[0] == walls[-1] else
            f"{walls[0]:.3g}–{_seconds(walls[-1])} (median {_seconds(median)})")
    memory = sorted({limit.memory_mb for limit in limits})
    memory_text = (f"{memory[0]} MB" if len(memory) == 1 else f"{memory[0]}–{memory[-1]} MB")
    return f"{wall}, {memory_text} over {len(limits)} executed samples ({why})"


def _seconds(value: Any) -> str:
    return "? s" if value is None else f"{float(value):.3g} s"


def tokens_per_sample(results: list[SampleResult]) -> float | None:
    """Mean tokens per sample: the usage the model reported, else the estimate
    (knowbench.scoring.cost.sample_tokens)."""
    if not results:
        return None
    total = sum(prompt + completion for prompt, completion, _ in map(sample_tokens, results))
    return total / len(results) if total else None


def series_of(view: RunView) -> Series:
    """The chart data of one run; pass@k for every k up to the fewest samples of any task."""
    function = [r for r in view.results if r.kind == "function"]
    per_task = Counter(r.task_id for r in function)
    max_k = min(per_task.values()) if per_task else 0
    curve: dict[int, float] = {}
    if max_k:
        full = score(function, range(1, max_k + 1))
        curve = {k: v for k, v in full.overall.pass_at.items() if v is not None}
    per_domain = {domain: metrics.pass_at.get(1) for domain, metrics in view.scores.by_domain.items()}
    return Series(name=view.name, per_domain=per_domain, pass_at_k=curve,
                  failures=dict(view.failure_counts()), koco=dict(view.koco_counts()),
                  tokens_per_sample=tokens_per_sample(view.results),
                  pass_at_1=view.scores.overall.pass_at.get(1),
                  cost_per_sample=view.cost.cost_per_sample,
                  currency=view.price.currency if view.price else None)


def table_rows(views: list[RunView]) -> list[dict[str, Any]]:
    """One row per run and scope: "all (micro)", "macro" (mean; std in *_std columns) and
    each domain. Scores are fractions in [0, 1]; None where undefined."""
    rows = []
    for view in views:
        ks = view.scores.ks
        base = {"run": view.name, "run_dir": str(view.run_dir), "model": view.model,
                "method": view.method, "benchmark": view.benchmark, "sampling": view.sampling,
                "limits": view.applied_limits()}
        scopes = [("all (micro)", view.scores.overall), *view.scores.by_domain.items()]
        for scope, metrics in scopes:
            row = {**base, "scope": scope, "tasks": metrics.tasks, "samples": metrics.samples}
            row.update({f"pass@{k}": metrics.pass_at.get(k) for k in ks})
            row.update({"apr": metrics.apr, "pass_any": metrics.pass_any, "accuracy": metrics.accuracy,
                        "unanswered": metrics.unanswered, "jaccard": metrics.jaccard})
            if metrics.api_tasks:
                row.update({"api_acc": metrics.api_acc, "param_corr": metrics.param_corr})
            if scope == "all (micro)":
                for key in ("pass@1", "accuracy"):
                    interval = view.scores.ci.get(key)
                    row[f"{key}_ci_low"] = interval.low if interval else None
                    row[f"{key}_ci_high"] = interval.high if interval else None
                cost = view.cost
                row.update({"tokens_per_sample": cost.tokens_per_sample,
                            "cost_per_sample": cost.cost_per_sample, "cost": cost.cost,
                            "currency": cost.price.currency if cost.price else None})
            rows.append(row)
            if scope == "all (micro)":
                macro = {**base, "scope": "macro", "tasks": metrics.tasks, "samples": metrics.samples}
                for key in (*(f"pass@{k}" for k in ks), "apr", "pass_any", "accuracy"):
                    stat = view.scores.macro.get(key)
                    macro[key] = stat.mean if stat else None
                    macro[f"{key}_std"] = stat.std if stat else None
                rows.append(macro)
    return rows


def render_table(views: list[RunView], fmt: TableFormat) -> str:
    """The report's tables as markdown, CSV or JSON text."""
    if fmt == "json":
        document = {"runs": [{
            "name": view.name, "run_dir": str(view.run_dir), "model": view.model,
            "method": view.method, "benchmark": view.benchmark, "sampling": view.sampling,
            "limits": view.applied_limits(),
            "scores": view.scores.model_dump(mode="json"),
            "failures": {label: view.failure_counts().get(label, 0) for label in ("pass", *LABELS)},
            "koco": {category: view.koco_counts().get(category, 0) for category in KOCO_CATEGORIES},
            "tokens_per_sample": tokens_per_sample(view.results),
            "cost": view.cost.model_dump(mode="json"),
        } for view in views], "rows": table_rows(views)}
        return json.dumps(document, indent=2) + "\n"
    rows = table_rows(views)
    columns = _columns(rows)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if row.get(key) is None else row.get(key) for key in columns})
        return buffer.getvalue()
    return _markdown(views, rows)


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    return columns


def _markdown(views: list[RunView], rows: list[dict[str, Any]]) -> str:
    ks = sorted({k for view in views for k in view.scores.ks})
    metrics = [*(f"pass@{k}" for k in ks), "apr", "pass_any", "accuracy"]
    if any("api_acc" in row for row in rows):  # tasks with a target-API spy (docs/novel.md)
        metrics += ["api_acc", "param_corr"]
    lines = ["| run | sampling | scope | tasks | samples | " + " | ".join(metrics) + " |",
             "|---|---|---|---:|---:|" + "---:|" * len(metrics)]
    for row in rows:
        cells = []
        for key in metrics:
            value = row.get(key)
            text = percent(value)
            std = row.get(f"{key}_std")
            if value is not None and std is not None:
                text += f" ± {percent(std)}"
            if value is not None and row.get(f"{key}_ci_low") is not None:
                text += " " + percent_interval(row[f"{key}_ci_low"], row[f"{key}_ci_high"])
            cells.append(text)
        lines.append(f"| {row['run']} | {row['sampling']} | {row['scope']} | {row['tasks']} | {row['samples']} | "
                     + " | ".join(cells) + " |")
    lines += ["", "| run | " + " | ".join(("pass", *LABELS)) + " |",
              "|---|" + "---:|" * (len(LABELS) + 1)]
    for view in views:
        counts = view.failure_counts()
        lines.append(f"| {view.name} | " + " | ".join(str(counts.get(key, 0))
                                                       for key in ("pass", *LABELS)) + " |")
    lines += ["", "| run | tokens per sample | cost per sample | cost | pass@1 |", "|---|---:|---:|---:|---:|"]
    for view in views:
        cost = view.cost
        currency = cost.price.currency if cost.price else "USD"
        tokens = "—" if cost.tokens_per_sample is None else f"{cost.tokens_per_sample:,.0f}"
        lines.append(f"| {view.name} | {tokens} | {format_money(cost.cost_per_sample, currency)} | "
                     f"{format_money(cost.cost, currency)} | {percent(cost.pass_at_1)} |")
    lines += ["", "pass@1 and ACC of the micro rows carry their 95% bootstrap interval over tasks "
                  "(1,000 resamples, seed 0)."]
    return "\n".join(lines) + "\n"
