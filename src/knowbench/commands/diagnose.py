"""`knowbench diagnose | report | compare | leaderboard`: understanding stored runs.

Thin wrappers: each command parses its options, calls the library (knowbench.diagnosis,
knowbench.scoring.*, knowbench.report.*) and prints. None of them generates or executes anything.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from knowbench.commands._console import KValues, one_of
from knowbench.errors import UserError
from knowbench.paths import check_output

console = Console(stderr=True)
out = Console()

_FORMATS = ("html", "md", "csv", "json")


def register(app: typer.Typer) -> None:
    """Add the diagnosis commands to the `knowbench` application."""
    app.command()(diagnose)
    app.command()(report)
    app.command()(compare)
    app.command()(leaderboard)


def diagnose(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `knowbench run`.")],
    judge: Annotated[str | None, typer.Option(
        "--judge", help="Send the ambiguous failures to this model (OpenAI-compatible endpoint, "
                        "see --base-url); answers are cached.")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="Endpoint of the judge model (env: KNOWBENCH_BASE_URL or OPENAI_BASE_URL).")] = None,
    api_key: Annotated[str | None, typer.Option(
        help="API key of the judge (env: KNOWBENCH_API_KEY or OPENAI_API_KEY).")] = None,
    introspect: Annotated[bool, typer.Option(
        help="Import the third-party packages the samples use (in a separate process) to tell "
             "wrong import paths from hallucinated APIs.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not cache judge answers.")] = False,
) -> None:
    """Label why every failed function sample failed; writes diagnoses.jsonl into the run."""
    from knowbench.diagnosis import diagnose_run, write_diagnoses
    from knowbench.models import BackendOptions, create_writer
    from knowbench.models.base import BackendError

    backend = None
    if judge:
        backend = create_writer(judge, BackendOptions(base_url=base_url, api_key=api_key, concurrency=4,
                                                      no_cache=no_cache),
                                "--judge", "a judge must read the failures and answer")
    try:
        diagnoses = diagnose_run(run_dir, introspect=introspect, judge_backend=backend,
                                 judge_model=judge or "")
    except BackendError as error:
        raise UserError(f"the judge failed: {error}\n  answers received so far are cached; "
                        "run the same command again to resume") from None
    path = write_diagnoses(run_dir, diagnoses)
    labels = Counter(d.label for d in diagnoses)
    koco = Counter(d.koco or "—" for d in diagnoses)
    table = Table(title=f"{len(diagnoses)} failed function samples · {run_dir}", title_justify="left")
    for header in ("label", "samples", "ambiguous", "judged"):
        table.add_column(header, justify="left" if header == "label" else "right")
    for label, count in labels.most_common():
        ambiguous = sum(d.ambiguous for d in diagnoses if d.label == label)
        judged = sum(d.source == "judge" for d in diagnoses if d.label == label)
        table.add_row(label, str(count), str(ambiguous), str(judged))
    out.print(table)
    out.print("KOCO categories: " + ", ".join(f"{name} {count}" for name, count in koco.most_common()))
    out.print(f"diagnoses written to {path}")


def report(
    runs: Annotated[list[Path], typer.Argument(help="One or more run directories.")],
    out_path: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Output file. Without it, md/csv/json go to stdout.")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help="html, md, csv or json. Default: from the --out suffix, else html.")]
    = None,
    k: KValues = None,
    prices: Annotated[Path | None, typer.Option(
        help="A price file (JSON: model name or pattern -> {input, output} per 1M tokens): "
             "prices the runs whose model it names, instead of the price they were run with.")]
    = None,
) -> None:
    """A report over stored runs: one self-contained HTML file, or tables as md/csv/json."""
    from knowbench.prices import load_prices
    from knowbench.report.html import build_report
    from knowbench.report.runs import load_views, render_table

    if out_path is not None:
        check_output(out_path, "--out")
    suffix = _report_format(out_path.suffix.lstrip(".").lower()) if out_path else ""
    chosen = _report_format(fmt) if fmt else suffix or "html"
    if fmt and chosen not in _FORMATS:
        raise UserError(f"unknown report format '{fmt}'\n  fix: pass --format html, md, csv or json")
    if chosen not in _FORMATS:
        raise UserError(f"--out {out_path}: no report format is written as '{out_path.suffix}'"  # type: ignore[union-attr]
                        "\n  fix: pass --format html, md, csv or json")
    if out_path is not None and suffix in _FORMATS and suffix != chosen:
        raise UserError(f"--format {fmt} but --out {out_path} names a {out_path.suffix} file\n  fix: name the "
                        f"file {out_path.with_suffix('.' + chosen)}, or leave out --format")
    if chosen == "html" and out_path is None:
        raise UserError("an HTML report needs a file\n  fix: pass --out report.html")
    views = load_views(runs, tuple(k or (1, 5, 10)), load_prices(prices) if prices else None)
    text = build_report(views) if chosen == "html" else render_table(views, chosen)  # type: ignore[arg-type]
    if out_path is None:
        out.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        return
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text, encoding="utf-8")
    out.print(f"{chosen} report of {len(views)} run(s) written to {out_path}")


def _report_format(name: str) -> str:
    return {"markdown": "md", "htm": "html"}.get(name.lower(), name.lower())


def compare(
    run_a: Annotated[Path, typer.Argument(help="Run A (the baseline).")],
    run_b: Annotated[Path, typer.Argument(help="Run B, compared against A.")],
    resamples: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999, help="Interval level.")] = 0.95,
    kind: Annotated[str, typer.Option(callback=one_of("function", "choice", "all"),
                                      help="Tasks compared: function, choice or all.")] = "function",
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Paired comparison on shared tasks: pass@1 difference with a bootstrap interval, exact
    McNemar test, and the tasks that flipped. Refuses runs that share no task."""
    from knowbench.scoring.compare import compare as compare_runs
    from knowbench.scoring.metrics import percent, percent_interval
    from knowbench.store import RunDirectory, run_label

    runs = [RunDirectory.open(run_a), RunDirectory.open(run_b)]
    documents = [run.document() for run in runs]
    labels = [run_label(document) for document in documents]
    results_a, results_b = runs[0].results(), runs[1].results()
    result = compare_runs(results_a, results_b, kind=kind, resamples=resamples, seed=seed,  # type: ignore[arg-type]
                          confidence=confidence)
    benchmarks = [_benchmark_of(document) for document in documents]
    if not result.shared_tasks:
        same = benchmarks[0] == benchmarks[1]
        raise UserError(
            f"{run_a} ({labels[0]}, benchmark {benchmarks[0]}) and {run_b} ({labels[1]}, benchmark "
            f"{benchmarks[1]}) share no {'' if kind == 'all' else kind + ' '}task"
            + (": they ran different task selections" if same else
               ": they are runs of different benchmarks") + ", so there is nothing to pair\n"
            "  fix: compare two runs of the same benchmark (and task selection); to show runs of "
            "different benchmarks side by side, use `knowbench report RUN... --out report.html`")
    if runs[0].path.resolve() == runs[1].path.resolve():
        console.print(f"[yellow]warning:[/] A and B are the same run ({run_a}): every difference is 0",
                      highlight=False)
    elif benchmarks[0] != benchmarks[1]:
        console.print(f"[yellow]warning:[/] A ran {benchmarks[0]} and B ran {benchmarks[1]}: tasks are "
                      "paired by id, and a task whose tests or reference changed between them is not "
                      "the same task", highlight=False)
    if result.only_in_a or result.only_in_b:
        console.print(f"[yellow]warning:[/] the runs share {result.shared_tasks} {kind} tasks; "
                      f"{result.only_in_a} only in A and {result.only_in_b} only in B are left out",
                      highlight=False)
    if as_json:
        out.print(result.model_dump_json(indent=2), markup=False, highlight=False)
        return
    table = Table(title=f"B = {labels[1]} ({run_b})  vs  A = {labels[0]} ({run_a})", title_justify="left")
    table.add_column("")
    table.add_column("value", justify="right")
    table.add_row("shared tasks", f"{result.shared_tasks} (only A {result.only_in_a}, only B {result.only_in_b})")
    table.add_row("pass@1 A", percent(result.pass1_a))
    table.add_row("pass@1 B", percent(result.pass1_b))
    table.add_row("B − A", f"{percent(result.difference, signed=True)} points")
    table.add_row(f"{100 * confidence:g}% bootstrap CI",
                  f"{percent_interval(result.ci_low, result.ci_high, signed=True)} "
                  f"({resamples} resamples, seed {seed})")
    test = result.mcnemar
    table.add_row("McNemar (exact)", f"p = {test.p_value:.4g} (only A {test.only_a}, only B {test.only_b})")
    out.print(table)
    for direction, sign in (("gained", "+"), ("lost", "−")):
        tasks = [f.task_id for f in result.flipped if f.direction == direction]
        if tasks:
            out.print(f"{sign} {direction} by B ({len(tasks)}): {', '.join(tasks)}")


def _benchmark_of(document: dict) -> str:
    benchmark = document.get("settings", {}).get("benchmark", {})
    return (f"{benchmark.get('name', '?')} v{benchmark.get('version', '?')} "
            f"{str(benchmark.get('content_hash', ''))[:19]}")


def leaderboard(
    runs: Annotated[list[Path], typer.Argument(help="Run directories to add.")],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="board.json or board.csv (created or "
                                                              "updated).")],
) -> None:
    """Add runs to a leaderboard file; a run already on it (same identity) is updated. Only
    runs of the same benchmark, n and temperature are ranked against each other."""
    from knowbench.report.leaderboard import entry_for, update_board
    from knowbench.scoring.metrics import percent, percent_interval
    from knowbench.store import RunDirectory

    entries = []
    for run_dir in runs:
        run = RunDirectory.open(run_dir)
        entries.append(entry_for(run.document(), run.results(), str(run_dir)))
    board = update_board(out_path, entries)
    table = Table(title=f"{out_path} · {len(board)} entries", title_justify="left")
    for header in ("rank", "benchmark", "run", "sampling", "tasks", "pass@1", "95% CI", "APR",
                   "Pass@any", "ACC", "95% CI", "id"):
        table.add_column(header, justify="left" if header in ("benchmark", "run", "sampling", "id")
                         else "right")
    unranked = []
    for entry in board:
        if entry.rank is None:
            unranked.append(entry)
            continue
        table.add_row(str(entry.rank), entry.benchmark, entry.label or f"{entry.model} · {entry.method}",
                      entry.sampling, str(entry.tasks), percent(entry.pass_at_1),
                      percent_interval(entry.pass_at_1_ci_low, entry.pass_at_1_ci_high),
                      percent(entry.apr), percent(entry.pass_any), percent(entry.accuracy),
                      percent_interval(entry.accuracy_ci_low, entry.accuracy_ci_high), entry.run_id)
    out.print(table)
    for entry in unranked:
        out.print(f"not ranked: {entry.label or entry.model} ({entry.benchmark}, {entry.sampling}, "
                  f"pass@1 {percent(entry.pass_at_1)}, id {entry.run_id}): {entry.unranked}",
                  markup=False, highlight=False, soft_wrap=True)
