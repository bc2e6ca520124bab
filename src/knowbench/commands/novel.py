"""`knowbench novel`: benchmarks of APIs a library added or changed after a model's cutoff
(NovelAPIBench's pipeline). `discover` is stage 1 (version diff and filter cascade),
`bundles` stage 2 (a knowledge bundle S/E/M/C per kept API)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

novel_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Novel-API benchmarks: discover new APIs between two releases, build "
                             "their knowledge bundles.")
out = Console(soft_wrap=True)
console = Console(stderr=True, soft_wrap=True)


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
        help="Which file of a release to read: 'sdist' (carries tests and docs) or 'wheel'.")] = "sdist",
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
    from knowbench.errors import UserError

    if prefer not in ("sdist", "wheel"):
        raise UserError(f"--prefer {prefer!r}: use 'sdist' or 'wheel'")
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
    from knowbench.errors import UserError

    backend = None
    if llm:
        from knowbench.models import BackendOptions, create_backend
        from knowbench.models.openai import OpenAIBackend

        backend = create_backend(llm, BackendOptions(base_url=base_url, api_key=api_key, concurrency=4,
                                                     max_retries=4))
        if not isinstance(backend, OpenAIBackend):
            raise UserError(f"--llm {llm!r}: name a model served by an OpenAI-compatible endpoint "
                            "(with --base-url)")
    directory = candidates if candidates.is_dir() else candidates.parent
    target = out_dir or directory
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


def register(app: typer.Typer) -> None:
    app.add_typer(novel_app, name="novel")
