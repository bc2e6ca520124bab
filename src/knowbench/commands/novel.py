"""`knowbench novel tasks | filter`: novel-API tasks from knowledge bundles, and their
model-conditional filters (see docs/novel.md). The work is in knowbench.builders.novel_tasks and
knowbench.builders.novel_filters."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from knowbench.commands._console import engine_notices

novel_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Novel-API benchmarks: tasks from knowledge bundles, per-model filters.")
out = Console()
console = Console(stderr=True)

SandboxOption = Annotated[str, typer.Option(help="auto, bwrap, unshare or none.")]
PythonOption = Annotated[str | None, typer.Option(
    "--python", help="Interpreter of the environment with the library's new version (default: this one).")]
BaseUrlOption = Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible API root.")]


def _engine(sandbox: str, python: str | None, workers: int | None):
    from knowbench.execution import create_engine, resolve_sandbox

    with engine_notices(console):
        return create_engine("forkserver", resolve_sandbox(sandbox, python=python), workers or os.cpu_count() or 2,
                             python, [], [])


def _backend(model: str, base_url: str | None):
    from knowbench.models import BackendOptions, create_backend

    return create_backend(model, BackendOptions(base_url=base_url))


@novel_app.command("tasks")
def tasks(
    bundles: Annotated[Path, typer.Argument(help="A pool of knowledge bundles: bundles.jsonl (release or "
                                            "imported records), a release root, or a benchmark.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Benchmark directory to write.")],
    llm: Annotated[str | None, typer.Option("--llm", help="Model that writes three graded tasks per bundle; "
                                            "without it, tasks are masked from executed examples.")] = None,
    base_url: BaseUrlOption = None,
    name: Annotated[str, typer.Option(help="Benchmark name.")] = "novel",
    requirement: Annotated[list[str] | None, typer.Option(
        "--requirement", help="pip requirement the tasks need (the library's new version), repeatable.")] = None,
    python: PythonOption = None,
    sandbox: SandboxOption = "auto",
    time_limit: Annotated[float, typer.Option(help="Wall-clock seconds per execution.")] = 30.0,
    workers: Annotated[int | None, typer.Option(help="Parallel executions.")] = None,
) -> None:
    """Build novel-API tasks with execute-then-assert harnesses from a bundle pool."""
    from knowbench.builders.novel_corpus import read_pool
    from knowbench.builders.novel_tasks import build_benchmark
    from knowbench.records import Limits

    pool = read_pool(bundles)
    engine = _engine(sandbox, python, workers)
    try:
        report = build_benchmark(pool, out_dir, engine, Limits(wall_s=time_limit),
                                 llm=_backend(llm, base_url) if llm else None, name=name,
                                 requirements=requirement or [], source=str(bundles))
    finally:
        engine.close()
    out.print(f"{report['bundles']} bundles → {report['drafts']} drafts → {report['tasks']} tasks ({report['mode']})")
    for reason, count in report["dropped_by_reason"].items():
        out.print(f"  dropped {count}: {reason}")
    out.print(f"benchmark: {out_dir}  (report: {out_dir / 'tasks_report.json'})")


@novel_app.command("filter")
def filter_tasks(
    benchmark: Annotated[Path, typer.Argument(help="A benchmark built by `knowbench novel tasks` (or imported).")],
    model: Annotated[str, typer.Option("--model", help="The model the instance is for (C2: novelty).")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Where the filter records and runs go.")],
    solver: Annotated[str | None, typer.Option(
        "--solver", help="The (stronger) model of C3, given the Full bundle (default: --model).")] = None,
    base_url: BaseUrlOption = None,
    solver_base_url: Annotated[str | None, typer.Option(help="API root of --solver (default: --base-url).")] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="Samples per task for C2 and C3.")] = 3,
    temperature: Annotated[float, typer.Option(min=0.0)] = 0.8,
    novel_fails: Annotated[int, typer.Option(min=1, help="C2: failing samples that make a task novel.")] = 2,
    python: PythonOption = None,
    sandbox: SandboxOption = "auto",
    time_limit: Annotated[float, typer.Option(help="Wall-clock seconds per execution.")] = 30.0,
    workers: Annotated[int | None, typer.Option(help="Parallel executions.")] = None,
) -> None:
    """C1 (reference passes), C2 (novel for --model), C3 (solvable with the Full bundle) and the instance."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.builders.novel_filters import run_filters
    from knowbench.errors import UserError
    from knowbench.records import Limits

    if novel_fails > n:
        raise UserError(f"--novel-fails {novel_fails} cannot exceed --n {n}")
    bench = load_benchmark(benchmark)
    engine = _engine(sandbox, python, workers)
    try:
        counts = run_filters(bench, out_dir, engine, Limits(wall_s=time_limit), model=_backend(model, base_url),
                             model_name=model, solver=_backend(solver or model, solver_base_url or base_url),
                             solver_name=solver or model, n=n, temperature=temperature, novel_fails=novel_fails)
    finally:
        engine.close()
    out.print(json.dumps(counts, indent=2))


def register(app: typer.Typer) -> None:
    app.add_typer(novel_app, name="novel")
