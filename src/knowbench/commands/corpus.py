"""`knowbench corpus build | stats | search`: knowledge corpora for retrieval methods."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from knowbench.knowledge.corpus import CHUNK_KINDS, KIND_LABELS, Corpus, open_corpus

corpus_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Knowledge corpora: build one from a package, inspect it, search it.")
out = Console()
console = Console(stderr=True)

DirOption = Annotated[Path | None, typer.Option(
    "--dir", help="Corpus directory. Default: $KNOWBENCH_HOME/corpora/NAME "
                  "(KNOWBENCH_HOME defaults to ~/.cache/knowbench).")]


@corpus_app.command("build")
def build(
    source: Annotated[str | None, typer.Argument(
        help="A directory, an sdist/wheel file, a PyPI requirement ('click==8.1.8'), or an "
             "importable package name (ingests the installed package). A KOCO-Bench "
             "knowledge_corpus folder (metadata.json beside the framework's tree) is taken as it "
             "is, named by its framework unless --name is given.")] = None,
    name: Annotated[str, typer.Option("--name", help="Corpus name (how methods refer to it).")] = "",
    installed: Annotated[str | None, typer.Option(
        "--installed", help="Ingest this installed package (an import name).")] = None,
    pypi: Annotated[bool, typer.Option(
        "--pypi", help="Treat SOURCE as a PyPI requirement even when it is importable here.")]
    = False,
    include_tests: Annotated[bool, typer.Option(
        "--include-tests", help="Also ingest tests/ folders and test_*.py files.")] = False,
    bundles: Annotated[Path | None, typer.Option(
        "--bundles", help="Index a pool of knowledge bundles instead (a bundles.jsonl, a "
        "NovelAPIBench release root, or a benchmark whose tasks carry bundles); see docs/novel.md.")]
    = None,
    directory: DirOption = None,
) -> None:
    """Ingest source code, docs, examples and notebooks into a corpus (replacing one there)."""
    from knowbench.errors import UserError
    from knowbench.knowledge.ingest import build_corpus

    corpus_name = name or installed or ""
    if not corpus_name and not (source and (Path(source) / "metadata.json").is_file()):
        raise UserError("give the corpus a name with --name NAME (a KOCO-Bench knowledge-corpus "
                        "folder is named by its metadata.json)")
    started = time.monotonic()
    if bundles is not None:
        if source or installed:
            raise UserError("--bundles indexes knowledge bundles: give no SOURCE or --installed with it")
        from knowbench.builders.novel_corpus import build_bundle_corpus, read_pool
        from knowbench.knowledge.corpus import default_corpus_dir

        corpus = build_bundle_corpus(read_pool(bundles), corpus_name,
                                     directory or default_corpus_dir(corpus_name), f"bundles:{bundles}")
        _print_stats(corpus)
        out.print(f"built in {time.monotonic() - started:.1f} s → {corpus.directory}")
        return
    corpus = build_corpus(source, corpus_name, directory=directory, installed=installed, pypi=pypi,
                          include_tests=include_tests)
    _print_stats(corpus)
    out.print(f"built in {time.monotonic() - started:.1f} s → {corpus.directory}")


@corpus_app.command("stats")
def stats(name: Annotated[str, typer.Argument(help="Corpus name or directory.")],
          directory: DirOption = None) -> None:
    """Summarise a corpus: source, version, hashes and chunks per kind."""
    _print_stats(open_corpus(directory or name))


@corpus_app.command("search")
def search(
    name: Annotated[str, typer.Argument(help="Corpus name or directory.")],
    query: Annotated[str, typer.Argument(help="What to look for.")],
    retriever: Annotated[str, typer.Option(help="bm25, dense or hybrid.")] = "bm25",
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Results to show.")] = 5,
    lines: Annotated[int, typer.Option(min=0, help="Lines of each chunk to show.")] = 6,
    directory: DirOption = None,
) -> None:
    """Retrieve the best chunks for QUERY (builds or loads the retriever's index)."""
    from knowbench.knowledge.retrieval import open_retriever

    corpus = open_corpus(directory or name)
    started = time.monotonic()
    engine = open_retriever(retriever, corpus)
    ready = time.monotonic()
    hits, _ = engine.search(query, k)
    took = time.monotonic() - ready
    out.print(Text(f"{corpus.name} · {retriever} · {query!r}: {len(hits)} results "
                   f"(index ready in {ready - started:.1f} s, query {took * 1000:.1f} ms)",
                   style="bold"))
    for hit in hits:
        chunk = hit.chunk
        name_shown = chunk.full_name or chunk.qualname or chunk.path
        out.print(Text(f"\n{hit.rank}. {hit.score:.4f}  {KIND_LABELS[chunk.kind]}  {name_shown}  "
                       f"{chunk.location}", style="cyan"))
        shown = chunk.text.splitlines()
        for line in shown[:lines]:
            out.print(Text(f"   │ {line}"), soft_wrap=True)
        if len(shown) > lines:
            out.print(Text(f"   │ … {len(shown) - lines} more lines", style="dim"))


def _print_stats(corpus: Corpus) -> None:
    manifest = corpus.manifest
    table = Table(title=f"corpus {manifest.name}", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = [
        ("source", manifest.source),
        ("source kind", manifest.source_kind),
        ("version", manifest.version or "-"),
        *((("framework", manifest.framework),) if manifest.framework else ()),
        *((("description", manifest.description),) if manifest.description else ()),
        ("source sha256", manifest.sha256),
        ("content hash", manifest.content_hash),
        ("files", str(manifest.files)),
        ("chunks", str(manifest.chunks)),
        *((f"  {KIND_LABELS[kind]}", str(manifest.counts.get(kind, 0))) for kind in CHUNK_KINDS),
        ("tokens (approx.)", f"{sum(len(chunk.text) for chunk in corpus.chunks) // 4:,}"),
        ("skipped files", ", ".join(manifest.skipped[:5]) + (" …" if len(manifest.skipped) > 5 else "")
         if manifest.skipped else "none"),
        ("tests included", "yes" if manifest.include_tests else "no"),
        ("built", f"{manifest.created or '-'} by knowbench {manifest.knowbench}"),
        ("directory", str(corpus.directory)),
    ]
    for field, value in rows:
        table.add_row(field, Text(value))
    out.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(corpus_app, name="corpus")
