"""One self-contained HTML report over one or more stored runs.

The file holds everything it shows: styles inline, charts as inline SVG (report/charts.py),
no script, no font, no image and no link to fetch, so it opens from disk and from an
archive years later. Sections (each an element id): `runs`, `headline` (pass@k, APR,
Pass@any, ACC, micro and macro ± std), `domains`, `failures` (failure labels and KOCO
categories per run), `passk`, `cost` (pass@1 against tokens per sample), `compare` (with
two or more runs: each run against the first, paired), and `tasks` (per task and run:
instruction, completion, diff against the reference, the failing test with its
traceback, the diagnosis and any retrieved knowledge).
"""

from __future__ import annotations

import ast
import difflib
import html
import io
import json
import re
import tokenize
from collections import Counter
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from knowbench import __version__
from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.parsing import parse_python
from knowbench.records import SampleResult
from knowbench.report import charts
from knowbench.report.runs import RunView, load_views, series_of
from knowbench.report.table import choice_rows
from knowbench.scoring.compare import compare
from knowbench.scoring.cost import format_money
from knowbench.scoring.metrics import isolation_share, percent, percent_interval
from knowbench.scoring.taxonomy import LABELS, Diagnosis

CHART_IDS = ("chart-domains", "chart-failures", "chart-koco", "chart-passk", "chart-cost",
             "chart-money")
_SAMPLES_SHOWN = 3  # per task and run in the drill-down

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;
padding:1rem 2rem;color:#1b1b1b;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem;table-layout:fixed;width:100%}
th,td{border:1px solid #ddd;padding:.25rem .4rem;text-align:right;overflow-wrap:anywhere;vertical-align:top}
th{background:#f4f4f4;text-align:left;font-size:.8rem}
td:first-child,td.text{text-align:left}.wide{overflow-x:auto;max-width:100%}
figure{margin:1rem 0}figure svg{max-width:100%;height:auto}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:.5rem;overflow-x:auto;font-size:.8rem;
white-space:pre-wrap;word-break:break-word}
.diff .add{color:#116611;background:#eaffea}.diff .del{color:#aa1111;background:#ffecec}
.diff .hunk{color:#555}
.badge{display:inline-block;border-radius:3px;padding:0 .4rem;margin-right:.3rem;font-size:.8rem}
.pass{background:#d8f5d8}.fail{background:#fbdada}.muted{color:#666;font-size:.85rem}
details{border:1px solid #e3e3e3;border-radius:4px;margin:.4rem 0;padding:.3rem .6rem}
details>summary{cursor:pointer}.sample{border-left:3px solid #ddd;padding-left:.8rem;margin:.6rem 0}
"""


def write_report(run_dirs: list[Path], out: Path, ks: tuple[int, ...] = (1, 5, 10)) -> Path:
    """Build the report for `run_dirs` and write it to `out` (parents are created)."""
    document = build_report(load_views(run_dirs, ks))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(document, encoding="utf-8")
    return out


def build_report(views: list[RunView]) -> str:
    """The whole HTML document for already loaded runs."""
    series = [series_of(view) for view in views]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>knowbench report: {_e(', '.join(view.name for view in views))}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<header><h1>knowbench report</h1>",
        f'<p class="muted">{len(views)} run(s) · knowbench {_e(__version__)} · scores in % · '
        "read from stored results; nothing was executed to make this page</p></header>",
        _runs_section(views),
        _headline_section(views),
        _api_section(views),
        _section("domains", "pass@1 by domain", charts.domain_bars(series), _domain_table(views)),
        _choice_section(views),
        _section("failures", "Why samples failed",
                 charts.failure_stacks(series), charts.koco_stacks(series), _failure_table(views),
                 _reply_table(views)),
        _section("passk", "pass@k", charts.pass_at_k_curves(series)),
        _section("cost", "Performance against cost", charts.cost_scatter(series),
                 charts.money_scatter(series), _cost_table(views)),
        _compare_section(views),
        _tasks_section(views),
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


# ---------------------------------------------------------------------------- sections


def _section(section_id: str, title: str, *blocks: str) -> str:
    """A section of tables and charts; each chart goes into a <figure id="figure-<chart id>">."""
    inner = []
    for block in blocks:
        chart = re.match(r'<svg id="([^"]+)"', block)
        inner.append(f'<figure id="figure-{chart[1]}">{block}</figure>' if chart else block)
    return f'<section id="{section_id}"><h2>{_e(title)}</h2>\n' + "\n".join(inner) + "\n</section>"


def _runs_section(views: list[RunView]) -> str:
    rows = []
    for view in views:
        rows.append(_row([view.name, str(view.run_dir), view.benchmark, view.model, view.method,
                          view.sampling, str(view.settings.get("sandbox", "?")),
                          view.applied_limits(), _split_share(view.results), str(len(view.results))],
                         text=range(9)))
    header = _header(["run", "directory", "benchmark", "model", "method", "sampling", "sandbox",
                      "limits applied", "judged split", "samples"])
    widths = (12, 13, 11, 8, 7, 7, 7, 19, 9, 7)
    note = ('<p class="muted">limits applied: the wall-clock limit the executed samples ran under '
            "(one value, or the range and median over samples when the time policy set it per "
            "task), their memory limit, and the time policy that chose them.</p>")
    return (f'<section id="runs"><h2>Runs</h2>{_wide(_table(header, rows, widths))}{note}'
            "</section>")


def _split_share(results: list[SampleResult]) -> str:
    """Executed samples whose verdict came from a process the candidate could not reach."""
    share = isolation_share(results)
    if share["split_share"] is None:
        return "—"
    total = share["split"] + share["in_process"]
    return f"{share['split']}/{total} ({percent(share['split'] / total)}%)"


def _headline_section(views: list[RunView]) -> str:
    # pass@k columns that some run has a value for (pass@1 always): n=1 runs have no pass@5.
    ks = sorted({k for view in views for k in view.scores.ks
                 if k == 1 or view.scores.overall.pass_at.get(k) is not None})
    metrics = [*(f"pass@{k}" for k in ks), "apr", "pass_any", "accuracy"]
    header = _header(["run", "sampling", "scope", "tasks", "samples", *(f"pass@{k}" for k in ks),
                      "pass@1 95% CI", "APR", "Pass@any", "ACC", "ACC 95% CI"])
    rows = []
    for view in views:
        overall = view.scores.overall
        cis = [percent_interval(i.low, i.high) if (i := view.scores.ci.get(key)) else "—"
               for key in ("pass@1", "accuracy")]
        rows.append(_row([view.name, view.sampling, "all (micro)", str(overall.tasks),
                          str(overall.samples), *(percent(overall.pass_at.get(k)) for k in ks),
                          cis[0], percent(overall.apr), percent(overall.pass_any),
                          percent(overall.accuracy), cis[1]], text=(0, 1, 2)))
        macro = []
        for key in metrics:
            stat = view.scores.macro.get(key)
            if stat is None or stat.mean is None:
                macro.append("—")
            else:
                macro.append(percent(stat.mean) + ("" if stat.std is None else f" ± {percent(stat.std)}"))
        macro[len(ks):len(ks)] = [""]
        macro.append("")
        rows.append(_row([view.name, view.sampling, f"macro ± std ({len(view.scores.by_domain)} domains)",
                          "", "", *macro], text=(0, 1, 2)))
    widths = (16, 9, 11, 6, 7, *([7] * len(ks)), 11, 7, 7, 7, 11)
    note = ('<p class="muted">micro: every task weighs the same; macro: every domain weighs the '
            "same, ± the sample standard deviation across domains (DomainEval). pass@k is the "
            "unbiased estimator; APR is the mean fraction of tests passed per sample. 95% CI: "
            "percentile bootstrap over the run's tasks (1,000 resamples, seed 0, so the same "
            "results always give the same interval); it shows how much the score depends on "
            "which tasks were drawn, not on which samples the model happened to produce. Scores "
            "of runs with different n or temperature are not comparable.</p>")
    return (f'<section id="headline"><h2>Headline scores</h2>{_wide(_table(header, rows, widths))}'
            f"{note}</section>")


def _api_section(views: list[RunView]) -> str:
    """API_acc and Param_corr beside pass@1 / pass@5, one row per run (a run is one knowledge
    cell: its method), for runs with tasks whose target API was spied on; "" when none has."""
    shown = [view for view in views if view.scores.overall.api_tasks]
    if not shown:
        return ""
    header = _header(["run", "method (knowledge cell)", "tasks with a spy", "pass@1", "pass@5",
                      "API_acc", "Param_corr"])
    rows = [_row([view.name, view.method, str(view.scores.overall.api_tasks),
                  percent(view.scores.overall.pass_at.get(1)), percent(view.scores.overall.pass_at.get(5)),
                  percent(view.scores.overall.api_acc), percent(view.scores.overall.param_corr)],
                 text=(0, 1)) for view in shown]
    note = ('<p class="muted">API_acc: share of samples that called the task\'s target API in a test; '
            "Param_corr: share whose every call of it bound to its signature (inspect's "
            "Signature.bind). Both are averaged per task, then over the tasks whose target API the "
            "runner spied on (see docs/novel.md); pass@k here is over all of the run's tasks.</p>")
    return (f'<section id="api"><h2>API selection and parameters</h2>'
            f"{_wide(_table(header, rows, (16, 16, 8, 7, 7, 7, 7)))}{note}</section>")


def _domain_table(views: list[RunView]) -> str:
    domains = sorted({d for view in views for d in view.scores.by_domain})
    header = _header(["domain", *(view.name for view in views)])
    rows = []
    for domain in domains:
        cells = []
        for view in views:
            metrics = view.scores.by_domain.get(domain)
            if metrics is None:
                cells.append("—")
            elif metrics.function_tasks:
                cells.append(percent(metrics.pass_at.get(1)))
            else:
                cells.append(f"ACC {percent(metrics.accuracy)}")
        rows.append(_row([domain, *cells]))
    return _wide(_table(header, rows))


def _choice_section(views: list[RunView]) -> str:
    """Multiple-choice scores per framework and domain (only when some run has choice tasks)."""
    rows = []
    for view in views:
        for group, name, metrics in choice_rows(view.scores):
            rows.append(_row([view.name, group, name, str(metrics.choice_tasks), str(metrics.samples),
                              percent(metrics.accuracy), percent(metrics.unanswered),
                              percent(metrics.jaccard)], text=(0, 1, 2)))
    if not rows:
        return ""
    header = _header(["run", "group", "name", "choice tasks", "samples", "ACC", "unanswered",
                      "Jaccard"])
    note = ('<p class="muted">ACC: a sample is right only when it names exactly the correct '
            "letters (KOCO-Bench's accuracy). unanswered: share of samples whose reply names no "
            "offered letter (cut off, refused, or an answer form the parser does not read); they "
            "count as wrong in ACC. Jaccard: partial credit |chosen ∩ correct| / |chosen ∪ "
            "correct| per sample, a secondary figure that ACC never includes. Each is a mean over "
            "tasks of the per-task mean over samples.</p>")
    return (f'<section id="choice"><h2>Multiple choice by framework and domain</h2>'
            f"{_wide(_table(header, rows, (16, 8, 16, 7, 7, 7, 8, 7)))}{note}</section>")


def _failure_table(views: list[RunView]) -> str:
    # Label headers may break between words of their CamelCase (a zero-width space), not inside one.
    header = _header(["run", "pass", *(re.sub(r"(?<=[a-z])(?=[A-Z])", "\u200b", label) for label in LABELS),
                      "judged"])
    rows = []
    for view in views:
        counts = view.failure_counts()
        judged = sum(d.source == "judge" for d in view.diagnoses)
        rows.append(_row([view.name, *(str(counts.get(k, 0)) for k in ("pass", *LABELS)), str(judged)]))
    note = ('<p class="muted">Function samples only. Labels: NovelAPIBench\'s six classes plus '
            "Timeout, Resource and Infrastructure, and NoCode / Truncated for replies that hold no "
            "code or were cut off at the token limit (docs/diagnosis.md). \"judged\": labels decided "
            "by an LLM judge (knowbench diagnose --judge); the others come from rules.</p>")
    return f"{_wide(_table(header, rows, (16, *([7] * (len(LABELS) + 2)))))}{note}"


_REPLY_STATUSES = ("truncated", "no-code", "no-answer")


def _reply_table(views: list[RunView]) -> str:
    """Samples that failed as replies, every task kind, read from the samples themselves (no
    diagnosis needed): the fix for these is in the generation settings or the prompt."""
    header = _header(["run", "samples", "cut off at max_tokens (truncated)", "no code (no-code)",
                      "no option named (no-answer)"])
    rows = []
    for view in views:
        counts = Counter(result.status for result in view.results)
        rows.append(_row([view.name, str(len(view.results)),
                          *(str(counts.get(status, 0)) for status in _REPLY_STATUSES)]))
    note = ('<p class="muted">Samples that did not pass because of the reply itself, of every task '
            "kind: cut off at the token limit (raise --max-tokens), a function reply with no code, "
            "a multiple-choice reply that names no option. Each is also counted in the scores as "
            "a failure.</p>")
    return f"{_wide(_table(header, rows))}{note}"


def _cost_table(views: list[RunView]) -> str:
    header = _header(["run", "tokens per sample", "prompt", "of which knowledge (approx.)",
                      "completion", "requests per sample", "estimated samples", "price per 1M "
                      "in / out", "cost per sample", "cost in all", "pass@1"])
    rows = []
    for view in views:
        cost = view.cost
        price = cost.price
        currency = price.currency if price else "USD"
        rows.append(_row([
            view.name, _count(cost.tokens_per_sample), _count(cost.prompt_tokens_per_sample),
            _count(cost.knowledge_tokens_per_sample), _count(cost.completion_tokens_per_sample),
            f"{cost.requests / cost.samples:.2g}" if cost.samples and cost.requests else "—",
            str(cost.estimated_samples),
            f"{price.input:g} / {price.output:g} {price.currency}" if price else "—",
            format_money(cost.cost_per_sample, currency), format_money(cost.cost, currency),
            percent(cost.pass_at_1)]))
    note = ('<p class="muted">Tokens per sample (means) come from the usage the model reported, '
            "summed over every request a sample took; where a backend reports none (reference, "
            "replay, servers without usage) they are estimated at 4 characters per token and the "
            "sample counts as estimated. Knowledge is the approximate size of what a rag-* or "
            "oracle method added to the prompt, part of the prompt tokens. Prices come from "
            "<code>--price</code> / <code>--prices</code> (run, score or report). A cached reply "
            "counts the tokens it cost when it was generated.</p>")
    return f"{_wide(_table(header, rows))}{note}"


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _compare_section(views: list[RunView]) -> str:
    if len(views) < 2:
        return ""
    base = views[0]
    header = _header(["run B", "against A", "shared tasks", "pass@1 A", "pass@1 B", "B − A",
                      "95% CI", "only A", "only B", "McNemar p", "flipped tasks"])
    rows, notes = [], []
    for view in views[1:]:
        result = compare(base.results, view.results)
        if not result.shared_tasks:
            rows.append(_row([view.name, base.name, "0", "—", "—", "—", "—", "—", "—", "—",
                              "not compared: no function task in common"], text=(0, 1, 10)))
            notes.append(f"{view.name} ({view.benchmark}) shares no function task with "
                         f"{base.name} ({base.benchmark}): compare runs of the same benchmark.")
            continue
        if result.only_in_a or result.only_in_b:
            notes.append(f"{view.name} and {base.name} share {result.shared_tasks} function tasks; "
                         f"{result.only_in_a} only in A and {result.only_in_b} only in B are left "
                         "out of the comparison (but not out of the headline scores).")
        flipped = ", ".join(f"{f.task_id} ({'+' if f.passed_b else '−'})" for f in result.flipped) or "none"
        rows.append(_row([view.name, base.name, str(result.shared_tasks), percent(result.pass1_a),
                          percent(result.pass1_b), percent(result.difference, signed=True),
                          percent_interval(result.ci_low, result.ci_high, signed=True),
                          str(result.mcnemar.only_a), str(result.mcnemar.only_b),
                          f"{result.mcnemar.p_value:.3g}", flipped], text=(0, 1, 10)))
    widths = (13, 13, 6, 6, 6, 6, 11, 5, 5, 7, 22)
    note = ('<p class="muted">Paired on the function tasks both runs have: bootstrap percentile '
            "interval over tasks (10,000 resamples, seed 0) and exact McNemar test on each task's "
            "first sample. + : B passes where A failed; − : the reverse.</p>")
    warnings = "".join(f'<p class="muted"><b>Note:</b> {_e(text)}</p>' for text in notes)
    return (f'<section id="compare"><h2>Paired comparison</h2>{_wide(_table(header, rows, widths))}'
            f"{warnings}{note}</section>")


def _tasks_section(views: list[RunView]) -> str:
    order: list[str] = []
    for view in views:
        order.extend(r.task_id for r in view.results if r.task_id not in order)
    tasks = {}
    for view in views:
        for task_id, task in view.tasks.items():
            tasks.setdefault(task_id, task)
    blocks = []
    for task_id in order:
        by_run = [(view, [r for r in view.results if r.task_id == task_id]) for view in views]
        badges = "".join(_badge(view.name, samples) for view, samples in by_run if samples)
        first = next(samples[0] for _, samples in by_run if samples)
        task = tasks.get(task_id)
        body = [_task_statement(task)]
        for view, samples in by_run:
            if samples:
                body.append(_run_samples(view, samples, task))
        blocks.append(f'<details id="task-{_slug(task_id)}"><summary><b>{_e(task_id)}</b> '
                      f'<span class="muted">{_e(first.domain)} · {_e(first.kind)}</span> {badges}'
                      f"</summary>{''.join(body)}</details>")
    return (f'<section id="tasks"><h2>Tasks</h2><p class="muted">Open a task to see each run\'s '
            f"samples.</p>{''.join(blocks)}</section>")


def _task_statement(task: FunctionTask | ChoiceTask | None) -> str:
    if task is None:
        return '<p class="muted">The benchmark directory is not available: no instruction or reference.</p>'
    if isinstance(task, ChoiceTask):
        options = "\n".join(f"({letter}) {text}" for letter, text in task.options.items())
        return (f"<h4>Question</h4><pre>{_e(task.question)}\n\n{_e(options)}</pre>"
                f"<p>Answer: {_e(', '.join(task.answer))}</p>")
    target = f" · target API <code>{_e(task.target_api)}</code>" if task.target_api else ""
    return (f"<h4>Instruction</h4><p class=\"muted\">entry point <code>{_e(task.entry_point)}</code>"
            f"{target}</p><pre>{_e(task.instruction)}</pre>")


def _run_samples(view: RunView, samples: list[SampleResult], task: FunctionTask | ChoiceTask | None) -> str:
    passed = sum(s.passed for s in samples)
    shown = sorted(samples, key=lambda s: (s.passed, s.sample_idx))[:_SAMPLES_SHOWN]
    diagnoses = {(d.task_id, d.sample_idx): d for d in view.diagnoses}
    parts = [f"<h4>{_e(view.name)}: {passed}/{len(samples)} samples passed</h4>"]
    for sample in shown:
        parts.append(_sample(sample, task, diagnoses.get((sample.task_id, sample.sample_idx))))
    if len(samples) > len(shown):
        parts.append(f'<p class="muted">{len(samples) - len(shown)} more sample(s) not shown.</p>')
    return "".join(parts)


def _sample(sample: SampleResult, task: FunctionTask | ChoiceTask | None,
            diagnosis: Diagnosis | None) -> str:
    status = "pass" if sample.passed else "fail"
    parts = [f'<div class="sample"><p><span class="badge {status}">sample {sample.sample_idx}: '
             f"{_e(sample.status)}</span> {sample.tests_passed}/{sample.tests_total} tests"]
    if sample.chosen is not None:
        parts.append(f" · chose {_e(', '.join(sample.chosen) or 'nothing')}")
    usage = sample.usage
    if usage.total_tokens:
        calls = f" in {len(usage.calls)} model requests" if usage.calls else ""
        parts.append(f' · <span class="muted">{usage.prompt_tokens:,} prompt + '
                     f"{usage.completion_tokens:,} completion tokens{calls}</span>")
    parts.append("</p>")
    if diagnosis is not None:
        parts.append(_diagnosis(diagnosis))
    parts.append(f"<details><summary>completion</summary><pre>{_e(sample.completion)}</pre></details>")
    if isinstance(task, FunctionTask) and sample.code is not None and not sample.passed:
        parts.append(f'<details><summary>diff against the reference <span class="muted">(docstrings '
                     f'and comments omitted)</span></summary>'
                     f'<pre class="diff">{_diff(task.reference, sample.code)}</pre></details>')
    failing = next((t for t in (sample.execution.tests if sample.execution else []) if t.status != "pass"),
                   None)
    if failing is not None:
        why = f", {failing.reason}" if failing.reason else ""
        parts.append(f"<details open><summary>failing test <code>{_e(failing.id)}</code> "
                     f"({_e(failing.status + why)})</summary><pre>{_e(failing.message)}</pre></details>")
    elif sample.extra.get("assembly_error"):
        parts.append(f"<p>The code could not be assembled: {_e(str(sample.extra['assembly_error']))}</p>")
    trajectory = sample.extra.get("trajectory")
    if isinstance(trajectory, dict):
        parts.append(_trajectory(trajectory))
    knowledge = sample.extra.get("knowledge")
    if knowledge:
        parts.append(f"<details><summary>retrieved knowledge</summary>"
                     f"<pre>{_e(json.dumps(knowledge, indent=2, ensure_ascii=False))}</pre></details>")
    parts.append("</div>")
    return "".join(parts)


def _trajectory(trajectory: dict[str, Any]) -> str:
    """An agent's episode, step by step: what the model said and called, what each tool
    returned, with tokens and timing."""
    usage = trajectory.get("usage") or {}
    head = (f"agent episode: {_e(str(trajectory.get('end')))} ({_e(str(trajectory.get('detail', '')))})"
            f" · {trajectory.get('turns', 0)} model calls · {trajectory.get('tool_calls', 0)} tool "
            f"results · {usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} "
            f"completion tokens · {trajectory.get('duration_s', 0)} s")
    rows = []
    for step in trajectory.get("steps") or []:
        if step.get("role") == "assistant":
            step_usage = step.get("usage") or {}
            calls = "\n".join(f"→ {call['function']['name']}({call['function']['arguments']})"
                               for call in step.get("tool_calls") or [])
            text = "\n".join(part for part in (step.get("content") or "", calls) if part)
            rows.append(f"<p><b>model, call {step.get('turn')}</b> <span class=\"muted\">"
                        f"{step_usage.get('prompt_tokens', 0)}+{step_usage.get('completion_tokens', 0)} "
                        f"tokens · {step.get('latency_s')} s"
                        f"{' · cached' if step.get('cached') else ''}</span></p><pre>{_e(text)}</pre>")
        else:
            rows.append(f"<p><b>{_e(str(step.get('name')))}</b> <span class=\"muted\">"
                        f"{step.get('duration_s')} s</span></p><pre>{_e(str(step.get('content')))}</pre>")
    return f"<details><summary>{head}</summary>{''.join(rows)}</details>"


def _diagnosis(diagnosis: Diagnosis) -> str:
    evidence = diagnosis.evidence
    facts = [f"rule <code>{_e(evidence.rule)}</code>"]
    if evidence.name:
        facts.append(f"name <code>{_e(evidence.name)}</code>")
    if evidence.frame:
        facts.append(f"at <code>{_e(evidence.frame)}</code>")
    if evidence.called is not None:
        facts.append(f"target called: {'yes' if evidence.called else 'no'}")
    judged = ""
    if diagnosis.judge and diagnosis.source == "judge":
        judged = f" · judged by {_e(diagnosis.judge.get('model', '?'))}: {_e(diagnosis.judge.get('reason', ''))}"
    koco = f" · KOCO: {_e(diagnosis.koco)}" if diagnosis.koco else ""
    return (f'<p><b>{_e(diagnosis.label)}</b>{koco}{" (ambiguous)" if diagnosis.ambiguous else ""} — '
            f"{_e(evidence.detail)}<br><span class=\"muted\">{' · '.join(facts)}{judged}</span></p>")


# ---------------------------------------------------------------------------- helpers


def without_docstrings(code: str) -> str:
    """`code` without its docstrings (module, class and function) and comments, so a diff
    shows the code that differs. Code that does not parse comes back unchanged."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return code
    lines = code.splitlines()
    drop: set[int] = set()  # 0-based line numbers
    cut: dict[int, int] = {}  # line -> column where a docstring or comment starts
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            continue
        docstring = body[0]
        end = docstring.end_lineno or docstring.lineno
        before = lines[docstring.lineno - 1][:docstring.col_offset]
        after = lines[end - 1][docstring.end_col_offset or 0:].strip()
        if before.strip() or (after and not after.startswith("#")):
            continue  # shares its line with other code (`def f(): "doc"`): keep it
        if len(body) == 1 and not isinstance(node, ast.Module):
            # The body is only the docstring: keep a statement so the code stays Python.
            lines[docstring.lineno - 1] = (lines[docstring.lineno - 1][:docstring.col_offset] + "...")
            drop.update(range(docstring.lineno, end))
        else:
            drop.update(range(docstring.lineno - 1, end))
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                row, column = token.start
                cut[row - 1] = min(column, cut.get(row - 1, column))
    except (tokenize.TokenError, SyntaxError):
        cut = {}
    kept = []
    for number, line in enumerate(lines):
        if number in drop:
            continue
        if number in cut:
            line = line[:cut[number]].rstrip()
            if not line.strip():
                continue
        kept.append(line)
    return "\n".join(kept)


def _diff(reference: str, code: str) -> str:
    lines = difflib.unified_diff(without_docstrings(reference).strip("\n").splitlines(),
                                 without_docstrings(code).strip("\n").splitlines(),
                                 "reference", "candidate", lineterm="")
    out = []
    for line in lines:
        css = ("add" if line.startswith("+") and not line.startswith("+++") else
               "del" if line.startswith("-") and not line.startswith("---") else
               "hunk" if line.startswith("@@") else "")
        out.append(f'<span class="{css}">{_e(line)}</span>' if css else _e(line))
    return "\n".join(out) or "(identical)"


def _wide(table: str) -> str:
    """A table in a container that scrolls rather than widen the page (it should not need to)."""
    return f'<div class="wide">{table}</div>'


def _table(header: str, rows: list[str], widths: Collection[int] = ()) -> str:
    """A fixed-layout table as wide as the page; `widths` are column shares (any unit)."""
    columns = ""
    if widths:
        total = sum(widths)
        columns = "<colgroup>" + "".join(f'<col style="width:{100 * w / total:.1f}%">'
                                         for w in widths) + "</colgroup>"
    return f"<table>{columns}{header}{''.join(rows)}</table>"


def _badge(name: str, samples: list[SampleResult]) -> str:
    passed = sum(s.passed for s in samples)
    css = "pass" if passed == len(samples) else "fail"
    return f'<span class="badge {css}">{_e(name)}: {passed}/{len(samples)}</span>'


def _header(columns: Iterable[str]) -> str:
    return "<tr>" + "".join(f"<th>{_e(c)}</th>" for c in columns) + "</tr>"


def _row(cells: list[str], text: Collection[int] = (0,)) -> str:
    """A table row; cells whose index is in `text` are left-aligned text, the rest numbers."""
    return "<tr>" + "".join(f'<td{" class=text" if i in text else ""}>{_e(c)}</td>'
                            for i, c in enumerate(cells)) + "</tr>"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text)


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
