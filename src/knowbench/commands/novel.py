"""`knowbench novel`: benchmarks of APIs a library added or changed after a model's cutoff
(NovelAPIBench's pipeline, see docs/novel.md). `discover` is stage 1 (version diff and filter
cascade), `bundles` stage 2 (a knowledge bundle S/E/M/C per kept API), `tasks` stage 3 (tasks
with execute-then-assert harnesses) and `filter` stage 4 (per-model C1/C2/C3). The work is in
knowbench.builders.novel (stages 1-2), knowbench.builders.novel_tasks and
knowbench.builders.novel_filters."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from knowbench.commands._console import engine_notices, one_of

novel_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Novel-API benchmarks: discover new APIs between two releases, build their "
                             "knowledge bundles, tasks from the bundles, per-model filters.")
out = Console(soft_wrap=True)
console = Console(stderr=True, soft_wrap=True)

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


def _writer(model: str, base_url: str | None):
    from knowbench.models import BackendOptions, create_writer

    return create_writer(model, BackendOptions(base_url=base_url), "--llm",
                         "the tasks need a model that writes them")


@novel_app.command("discover")
def discover_command(
    library: Annotated[str, typer.Argument(help="Project name on PyPI, e.g. httpx.")],
    old: Annotated[str | None, typer.Option("--old", help="The release before (e.g. 0.25.2).")] = None,
    new: Annotated[str | None, typer.Option("--new", help="The release after (e.g. 0.28.1).")] = None,
    cutoff: Annotated[str | None, typer.Option(
        "--cutoff", help="A date (YYYY-MM-DD): --old defaults to the newest final release uploaded "
                         "before it, --new to the newest uploaded after it.")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Output directory. Default: novel/<library>-<old>-<new>.")] = None,
    package: Annotated[list[str] | None, typer.Option(
        "--package", help="Import package to read (repeatable). Default: found in the distribution.")] = None,
    prefer: Annotated[str, typer.Option(
        callback=one_of("sdist", "wheel"), help="Which file of a release to read: 'sdist' (carries tests and docs) or 'wheel'.")] = "sdist",
    min_docstring_words: Annotated[int, typer.Option(min=0, help="Thinner docstrings are dropped.")] = 5,
    boilerplate_share: Annotated[int, typer.Option(
        min=2, help="A docstring summary shared by this many APIs is boilerplate.")] = 3,
    max_apis: Annotated[int, typer.Option(min=1, help="Per-library cap on kept APIs.")] = 50,
) -> None:
    """Stage 1: diff the public API of two releases (read statically, never installed) and
    filter the added and modified APIs; writes candidates.jsonl and discover_report.json."""
    from knowbench.builders.novel.discover import (
        CANDIDATES,
        FILTERS,
        REPORT,
        DiscoverOptions,
        discover,
    )

    options = DiscoverOptions(old=old, new=new, cutoff=cutoff, packages=package or None,
                              prefer=prefer,  # type: ignore[arg-type]
                              min_docstring_words=min_docstring_words,
                              boilerplate_share=boilerplate_share, max_apis=max_apis)
    if out_dir is None:
        from knowbench.builders.novel.pypi import resolve_versions
        chosen = resolve_versions(library, old, new, cutoff)
        out_dir = Path("novel") / f"{chosen['name']}-{chosen['old']}-{chosen['new']}"
    report = discover(library, out_dir, options)
    counts, versions = report["counts"], report["versions"]
    out.print(f"{report['library']} {versions['old']} -> {versions['new']} ({versions['how']}): "
              f"{counts['added']} added, {counts['modified']} modified, {counts['relocated']} relocated, "
              f"{counts['removed']} removed", highlight=False)
    dropped = ", ".join(f"{reason} {report['dropped'][reason]}" for reason in FILTERS if report["dropped"][reason])
    out.print(f"kept {counts['kept']}" + (f"; dropped: {dropped}" if dropped else ""), highlight=False)
    out.print(f"stage 1 took {report['seconds']['total']:.2f} s; wrote {out_dir / CANDIDATES} and "
              f"{out_dir / REPORT}", highlight=False)


@novel_app.command("bundles")
def bundles_command(
    candidates: Annotated[Path, typer.Argument(
        help="Stage 1's output directory (or its candidates.jsonl).")],
    out_dir: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Output directory. Default: the candidates' directory.")] = None,
    api: Annotated[list[str] | None, typer.Option(
        "--api", help="Build the bundle of this API even if stage 1 dropped it (repeatable); "
                      "default: every kept API.")] = None,
    execute: Annotated[bool, typer.Option(
        "--execute/--no-execute", help="Run the examples in the sandbox with the new release "
                                       "installed (else they are all 'static').")] = True,
    sandbox: Annotated[str, typer.Option(help="Sandbox for the examples: auto, bwrap, unshare.")] = "auto",
    time_limit: Annotated[float, typer.Option(min=1.0, help="Seconds per example.")] = 20.0,
    max_examples: Annotated[int, typer.Option(min=1, help="Examples kept per API.")] = 5,
    max_source_chars: Annotated[int, typer.Option(min=200, help="Size cap of C.")] = 6000,
    keep_without_examples: Annotated[bool, typer.Option(
        "--keep-without-examples", help="Keep APIs with no example that ran or could not run "
                                        "(NovelAPIBench discards them).")] = False,
    domain: Annotated[str | None, typer.Option(help="Domain written into the bundles.")] = None,
    llm: Annotated[str | None, typer.Option(
        "--llm", help="A model (OpenAI-compatible endpoint) that writes M; default: M from the docstring.")]
    = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint for --llm.")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key for --llm (env: OPENAI_API_KEY).")] = None,
) -> None:
    """Stage 2: a knowledge bundle (S, E, M, C) per API; writes bundles.jsonl (NovelAPIBench's
    bundle records) and bundles_report.json."""
    from knowbench.builders.novel.bundles import (
        BUNDLES,
        BUNDLES_REPORT,
        BundleOptions,
        build_bundles,
    )
    from knowbench.paths import check_output

    backend = None
    if llm:
        from knowbench.models import BackendOptions, create_writer

        backend = create_writer(llm, BackendOptions(base_url=base_url, api_key=api_key, concurrency=4,
                                                    max_retries=4),
                                "--llm", "the mechanisms need a model that writes them")
    directory = candidates if candidates.is_dir() else candidates.parent
    target = out_dir or directory
    check_output(target, "--out", directory=True)  # (written after every bundle is built)
    options = BundleOptions(apis=api or None, execute=execute, sandbox=sandbox, time_limit_s=time_limit,
                            max_examples=max_examples, max_source_chars=max_source_chars,
                            keep_without_examples=keep_without_examples, domain=domain, llm=backend)
    report = build_bundles(candidates, target, options, say=lambda m: console.print(m, highlight=False))
    statuses = report["examples"]["by_status"]
    out.print(f"{report['library']} {report['version']}: {report['bundles']} bundle(s) of {report['apis']} "
              f"API(s); examples: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) +
              (f"; discarded {len(report['discarded'])} without a usable example" if report["discarded"] else ""),
              highlight=False)
    out.print(f"wrote {target / BUNDLES} and {target / BUNDLES_REPORT}", highlight=False)


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
    time_limit: Annotated[float, typer.Option(min=1.0, help="Wall-clock seconds per execution (1 or more).")] = 30.0,
    workers: Annotated[int | None, typer.Option(min=1, help="Parallel executions.")] = None,
) -> None:
    """Build novel-API tasks with execute-then-assert harnesses from a bundle pool."""
    from knowbench.builders.novel_corpus import read_pool
    from knowbench.builders.novel_tasks import build_benchmark
    from knowbench.records import Limits

    pool = read_pool(bundles)
    writer = _writer(llm, base_url) if llm else None
    engine = _engine(sandbox, python, workers)
    try:
        report = build_benchmark(pool, out_dir, engine, Limits(wall_s=time_limit), llm=writer, name=name,
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
    time_limit: Annotated[float, typer.Option(min=1.0, help="Wall-clock seconds per execution (1 or more).")] = 30.0,
    workers: Annotated[int | None, typer.Option(min=1, help="Parallel executions.")] = None,
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
