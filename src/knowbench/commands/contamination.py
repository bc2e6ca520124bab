"""`knowbench contamination BENCH --model M`: has the model memorised the benchmark? (CDD)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from knowbench.errors import UserError
from knowbench.paths import check_output
from knowbench.scoring.contamination import ALPHA, LENGTH, SAMPLES, TEMPERATURE, XI, CddSummary

out = Console()
console = Console(stderr=True, soft_wrap=True)


def contamination(
    benchmark: Annotated[Path, typer.Argument(help="Benchmark directory.")],
    model: Annotated[str, typer.Option(
        "--model", "-m", help="The model to check, as `knowbench run --model` takes it.")],
    samples: Annotated[int, typer.Option(
        "--n", min=1, help="Outputs sampled per task, besides the greedy one.")] = SAMPLES,
    temperature: Annotated[float, typer.Option(min=0.01, help="Temperature of the samples.")]
    = TEMPERATURE,
    alpha: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Edits allowed, as a share of the longest output (α).")] = ALPHA,
    xi: Annotated[float, typer.Option(
        min=0.0, max=0.99, help="A task is flagged when its peakedness exceeds ξ.")] = XI,
    length: Annotated[int, typer.Option(min=1, help="Tokens of each output compared.")] = LENGTH,
    cutoff: Annotated[str | None, typer.Option(
        help="The model's training cutoff (YYYY-MM-DD): tasks whose source_created date is later "
             "cannot have been trained on.")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Check only this task (repeatable).")]
    = None,
    out_file: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write every task's distances, peakedness and verdict as JSON.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint.")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key; never written to disk.")] = None,
    max_tokens: Annotated[int, typer.Option(min=1)] = 1024,
    seed: Annotated[int | None, typer.Option(help="Sampling seed; sample i uses seed + i.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Model requests in flight.")] = 8,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Do not read or write the generation cache.")] = False,
) -> None:
    """Flag the tasks a model may have memorised (CDD). Samples outputs per task and flags
    those whose outputs all stay close to the greedy one (Dong et al. 2024; see
    docs/cost-and-contamination.md)."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.diagnosis.contamination import check_contamination
    from knowbench.models import BackendOptions, create_writer
    from knowbench.scoring.contamination import CddSettings, parse_date

    try:
        cutoff_date = parse_date(cutoff) if cutoff else None
    except ValueError as error:
        raise UserError(f"--cutoff: {error}") from None
    if out_file is not None:  # (written after all the sampling)
        check_output(out_file, "--out")
    bench = load_benchmark(benchmark)
    backend = create_writer(model, BackendOptions(base_url=base_url, api_key=api_key,
                                                  concurrency=concurrency, no_cache=no_cache),
                            "--model", "CDD needs one that samples")
    backend.notify = lambda message: console.print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)
    settings = CddSettings(samples=samples, temperature=temperature, alpha=alpha, xi=xi, length=length)
    console.print(f"CDD of {bench.name} · model {model} · {samples} samples at T={temperature:g} + "
                  f"greedy per task · α={alpha:g}, ξ={xi:g}", highlight=False, soft_wrap=True)
    summary = check_contamination(bench, backend, settings, task_ids=task or None, cutoff=cutoff_date,
                                  max_tokens=max_tokens, seed=seed)
    _print(summary)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
        out.print(f"written to {out_file}")


def _print(summary: CddSummary) -> None:
    table = Table(title=f"CDD · {summary.model} · α={summary.settings.alpha:g}, "
                        f"ξ={summary.settings.xi:g}", title_justify="left")
    columns = ["task", "peak", "identical", "median distance (normalised)", "l (tokens)", "verdict"]
    if summary.cutoff:
        columns += ["source created", "vs cutoff"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("task", "verdict") else "right",
                         overflow="fold", min_width=len(column) if column == "task" else None)
    for task in summary.tasks:
        row = [task.task_id, f"{task.peak:.2f}", f"{task.identical:.2f}",
               "—" if task.normalised_median is None else f"{task.normalised_median:.2f}",
               str(task.max_length), task.verdict]
        if summary.cutoff:
            row += [task.source_created or "—", task.date_check]
        table.add_row(*row, style="bold red" if task.verdict == "flagged" else None)
    out.print(table)
    share = "—" if summary.flagged_share is None else f"{100 * summary.flagged_share:.1f}%"
    out.print(f"flagged: {summary.flagged} of {summary.checked} tasks ({share}); mean peakedness "
              f"{summary.mean_peak if summary.mean_peak is not None else '—'}", highlight=False, soft_wrap=True)
    if summary.cutoff:
        counts = ", ".join(f"{name} {count}" for name, count in sorted(summary.dates.items()))
        out.print(f"sources vs the cutoff {summary.cutoff}: {counts}", highlight=False, soft_wrap=True)
        if summary.flagged_after_cutoff:
            out.print(f"flagged although newer than the cutoff (peaked for another reason, e.g. a "
                      f"task with one obvious answer): {', '.join(summary.flagged_after_cutoff)}",
                      highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(contamination)
