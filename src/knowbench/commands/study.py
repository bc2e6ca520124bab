"""`knowbench study forgetting | corpus-size | bundle-stripped`: the parametric-knowledge
studies of KOCO-Bench and NovelAPIBench, each one command that trains and runs with the
ordinary `knowbench train` and `knowbench run` into one directory and writes a table
(`study.md` and `study.json`). Nothing here trains or scores in its own way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from knowbench.commands._console import one_of
from knowbench.errors import UserError

out = Console()
console = Console(stderr=True, soft_wrap=True)
study_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                        help="Studies of parametric knowledge: forgetting, corpus size, "
                             "bundle-stripped evaluation (see docs/local-models.md).")

DEFAULT_SHARES = (0.1, 0.25, 0.5, 1.0)
TRAINED = ("lora", "full")
RETRIEVED = ("rag-bm25", "rag-dense", "rag-hybrid", "knn-lm")

# Options shared by every study: how runs generate and execute, and how training goes.
MaxTokens = Annotated[int, typer.Option("--max-tokens", min=1)]
Seed = Annotated[int | None, typer.Option("--seed", help="Sampling seed.")]
Environment = Annotated[str, typer.Option("--env", callback=one_of("auto", "self"), help="'auto' or 'self', as `knowbench run`.")]
Workers = Annotated[int, typer.Option("--workers", min=1, help="Samples executed in parallel.")]
MaxSteps = Annotated[int | None, typer.Option("--max-steps", min=1, help="Training steps.")]
Epochs = Annotated[float, typer.Option("--epochs", min=0.01, help="Training epochs.")]
Lr = Annotated[float, typer.Option("--lr", min=0.0, help="Training learning rate.")]
TrainBatch = Annotated[int, typer.Option("--train-batch-size", min=1)]
MaxLength = Annotated[int, typer.Option("--max-length", min=8, help="Tokens per training sequence.")]


def _knowbench(*args: str) -> None:
    """Run one `knowbench` command in this process; a failure stops the study."""
    from knowbench.cli import app

    code = app(list(args), standalone_mode=False)
    if isinstance(code, int) and code:
        raise UserError(f"`knowbench {' '.join(args)}` stopped with exit code {code}")


def _run(bench: Path, model: str, run_dir: Path, method: str, extra: list[str],
         run_options: list[str]) -> dict[str, Any]:
    """`knowbench run` (resumed when its directory already holds the run) and its scores."""
    from knowbench.store import RunDirectory

    console.print(f"study: run {model} · {method} → {run_dir}", highlight=False)
    _knowbench("run", str(bench), "--model", model, "--method", method, "--out", str(run_dir),
               *extra, *run_options)
    summary = RunDirectory.open(run_dir).summary()
    overall = summary["scores"]["overall"]
    return {"run": str(run_dir), "pass@1": overall["pass_at"].get("1"),
            "tasks": overall.get("function_tasks", overall.get("tasks"))}


def _train(model: str, data: str, out_dir: Path, extra: list[str],
           train_options: list[str]) -> dict[str, Any]:
    from knowbench.training.train import MANIFEST

    console.print(f"study: train {model} on {data} → {out_dir}", highlight=False)
    _knowbench("train", "--model", model, "--data", data, "--out", str(out_dir), *extra,
               *train_options)
    manifest = json.loads((out_dir / MANIFEST).read_text())
    return {"model": str(out_dir), "initial_loss": manifest["initial_loss"],
            "final_loss": manifest["final_loss"], "steps": manifest["steps"],
            "train_tokens": manifest["data"].get("tokens")}


def _run_options(max_tokens: int, seed: int | None, environment: str, workers: int,
                 split: Path | None = None) -> list[str]:
    options = ["--max-tokens", str(max_tokens), "--env", environment, "--workers", str(workers)]
    if seed is not None:
        options += ["--seed", str(seed)]
    if split is not None:
        options += ["--split", str(split)]
    return options


def _train_options(method: str, max_steps: int | None, epochs: float, lr: float,
                   batch_size: int, max_length: int) -> list[str]:
    options = ["--method", method, "--epochs", str(epochs), "--lr", str(lr), "--batch-size",
               str(batch_size), "--max-length", str(max_length)]
    if max_steps is not None:
        options += ["--max-steps", str(max_steps)]
    return options


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _write(out_dir: Path, study: str, document: dict[str, Any], header: list[str],
           rows: list[list[str]], notes: list[str], chart: str = "") -> None:
    """`study.json`, `study.md` and `study.html` (the table, and `chart` when there is one)."""
    from html import escape

    out_dir.mkdir(parents=True, exist_ok=True)
    cells = "".join(f"<th>{escape(text)}</th>" for text in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(text)}</td>" for text in row) + "</tr>"
                   for row in rows)
    (out_dir / "study.html").write_text(
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>knowbench study: {study}"
        f"</title><style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}"
        f"table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .6em}}"
        f"</style></head><body><h1>{escape(study)}</h1><table><tr>{cells}</tr>{body}</table>"
        + "".join(f"<p>{escape(note)}</p>" for note in notes) + chart + "</body></html>\n")
    (out_dir / "study.json").write_text(json.dumps({"study": study, **document}, indent=2) + "\n")
    lines = [f"# {study}", "", "| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", *notes]
    (out_dir / "study.md").write_text("\n".join(lines).rstrip() + "\n")
    out.print("\n".join(lines), highlight=False, markup=False)
    out.print(f"table: {out_dir / 'study.md'} · data: {out_dir / 'study.json'}", highlight=False)


@study_app.command()
def forgetting(
    general: Annotated[list[Path], typer.Argument(help="General benchmark(s) the tuning is not "
                                                       "about, e.g. examples/basic.")],
    model: Annotated[str, typer.Option("--model", "-m", help="The base model, hf:PATH.")],
    tuned: Annotated[str, typer.Option(
        help="The tuned model: hf:ADAPTER_DIR (`knowbench train --method lora`, names its "
             "base) or hf:MODEL_DIR (--method full).")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Study directory.")],
    max_tokens: MaxTokens = 512, seed: Seed = 0, environment: Environment = "auto",
    workers: Workers = 2,
) -> None:
    """Forgetting (KOCO-Bench §4): general benchmarks scored with the base and the tuned model,
    same prompts, sampling and scoring; the delta is tuned − base."""
    for name in (model, tuned):
        if not name.startswith("hf:"):
            raise UserError(f"{name}: the study compares local models; pass hf:PATH")
    options = _run_options(max_tokens, seed, environment, workers)
    rows, table = [], []
    for bench in general:
        base = _run(bench, model, out_dir / "runs" / f"{bench.name}-base", "none", [], options)
        after = _run(bench, tuned, out_dir / "runs" / f"{bench.name}-tuned", "none", [], options)
        delta = (None if base["pass@1"] is None or after["pass@1"] is None
                 else after["pass@1"] - base["pass@1"])
        rows.append({"benchmark": str(bench), "base": base, "tuned": after, "delta": delta})
        table.append([bench.name, _pct(base["pass@1"]), _pct(after["pass@1"]),
                      "—" if delta is None else f"{100 * delta:+.1f}"])
    _write(out_dir, "forgetting", {"model": model, "tuned": tuned, "rows": rows},
           ["benchmark", "base pass@1 %", "tuned pass@1 %", "Δ points"], table,
           ["Method none for both; greedy unless the runs say otherwise. A negative Δ is "
            "general ability lost by tuning."])


@study_app.command("corpus-size")
def corpus_size(
    benchmark: Annotated[Path, typer.Argument(help="The benchmark the corpus is about.")],
    model: Annotated[str, typer.Option("--model", "-m", help="The base model, hf:PATH.")],
    corpus: Annotated[str, typer.Option(help="The knowledge corpus (name or directory).")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Study directory.")],
    methods: Annotated[str, typer.Option(
        help="Comma-separated: lora, full (trained on the share), rag-bm25, rag-dense, "
             "rag-hybrid, knn-lm (retrieving from it).")] = "lora,rag-bm25,knn-lm",
    shares: Annotated[str, typer.Option(help="Comma-separated corpus shares.")] = "0.1,0.25,0.5,1",
    max_tokens: MaxTokens = 512, seed: Seed = 0, environment: Environment = "auto",
    workers: Workers = 2, max_steps: MaxSteps = None, epochs: Epochs = 1.0, lr: Lr = 2e-4,
    train_batch_size: TrainBatch = 4, max_length: MaxLength = 512,
) -> None:
    """Corpus size (KOCO-Bench Fig. 3): each method on 10/25/50/100% of the corpus; pass@1
    against the share's tokens."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.knowledge.corpus import content_hash, open_corpus, write_corpus
    from knowbench.models.hf import load_model
    from knowbench.training.data import select_chunks

    chosen = [name.strip() for name in methods.split(",") if name.strip()]
    for name in chosen:
        if name not in TRAINED + RETRIEVED:
            raise UserError(f"--methods: '{name}' is not one of {', '.join(TRAINED + RETRIEVED)}")
    try:
        fractions = sorted({float(share) for share in shares.split(",") if share.strip()})
    except ValueError as error:
        raise UserError(f"--shares must be numbers such as 0.1,0.25,0.5,1 ({error})") from error
    if not fractions or not all(0 < share <= 1 for share in fractions):
        raise UserError("--shares must be between 0 (excluded) and 1, e.g. 0.1,0.25,0.5,1")
    if not model.startswith("hf:"):
        raise UserError(f"{model}: the study needs a local model; pass hf:PATH")
    bench = load_benchmark(benchmark)
    source = open_corpus(corpus)
    tokenizer = load_model(model.removeprefix("hf:")).tokenizer
    options = _run_options(max_tokens, seed, environment, workers)
    base = _run(benchmark, model, out_dir / "runs" / "base-none", "none", [], options)
    rows: list[dict[str, Any]] = [{"share": 0.0, "chunks": 0, "tokens": 0, "method": "none",
                                   **base}]
    for share in fractions:
        # One sub-corpus per share, the chunks training would keep (leakage control for the
        # benchmark applied, then the share): training and retrieval see the same text.
        kept, withheld = select_chunks(source, [bench], share)
        if not kept:
            raise UserError(f"corpus {source.name}: no chunk is left ({len(withheld)} withheld)")
        sub_dir = out_dir / "corpora" / f"share-{share:g}"
        manifest = source.manifest.model_copy(update={
            "name": f"{source.name}-share-{share:g}", "content_hash": content_hash(kept),
            "chunks": len(kept), "counts": {}, "files": len({chunk.path for chunk in kept})})
        write_corpus(sub_dir, manifest, kept)
        tokens = sum(len(tokenizer(chunk.text, add_special_tokens=False)["input_ids"])
                     for chunk in kept)
        for name in chosen:
            tag = f"{name}-{share:g}"
            if name in TRAINED:
                trained = _train(model, f"corpus:{sub_dir}", out_dir / "models" / tag,
                                 ["--withhold", str(benchmark)],
                                 _train_options(name, max_steps, epochs, lr, train_batch_size,
                                                max_length))
                result = _run(benchmark, f"hf:{trained['model']}", out_dir / "runs" / tag,
                              "none", [], options)
                result["training"] = trained
            else:
                result = _run(benchmark, model, out_dir / "runs" / tag, name,
                              ["--corpus", str(sub_dir)], options)
            rows.append({"share": share, "chunks": len(kept), "tokens": tokens,
                         "method": name, **result})
    table = [[f"{row['share']:g}", str(row["chunks"]), str(row["tokens"]), row["method"],
              _pct(row["pass@1"])] for row in rows]
    _write(out_dir, "corpus-size", {"model": model, "corpus": source.name,
                                    "corpus_hash": source.content_hash, "rows": rows},
           ["share", "chunks", "corpus tokens", "method", "pass@1 %"], table,
           notes=["Corpus tokens are counted with the model's tokenizer over the share's "
                  "chunks (after leakage control for the benchmark). Share 0 is the base "
                  "model without knowledge."], chart=_corpus_chart(rows))


def _corpus_chart(rows: list[dict[str, Any]]) -> str:
    from knowbench.report.charts import corpus_size_curves

    lines: dict[str, list[tuple[int, float | None]]] = {}
    for row in rows:
        if row["method"] != "none":
            lines.setdefault(row["method"], []).append((row["tokens"], row["pass@1"]))
    baseline = next((row["pass@1"] for row in rows if row["method"] == "none"), None)
    return corpus_size_curves(lines, baseline)


@study_app.command("bundle-stripped")
def bundle_stripped(
    benchmark: Annotated[Path, typer.Argument(help="A benchmark whose tasks carry knowledge "
                                                   "bundles (NovelAPIBench).")],
    model: Annotated[str, typer.Option("--model", "-m", help="The base model, hf:PATH.")],
    split: Annotated[Path, typer.Option(help="Split file (`knowbench split`): tuned on its train "
                                             "part, evaluated on its test part.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Study directory.")],
    cell: Annotated[str, typer.Option(help="The bundle cell in the prompt (oracle:CELL).")] = "S+E",
    train_method: Annotated[str, typer.Option("--train-method", callback=one_of("lora", "full"), help="lora or full.")] = "lora",
    max_tokens: MaxTokens = 512, seed: Seed = 0, environment: Environment = "auto",
    workers: Workers = 2, max_steps: MaxSteps = None, epochs: Epochs = 1.0, lr: Lr = 2e-4,
    train_batch_size: TrainBatch = 4, max_length: MaxLength = 512,
) -> None:
    """Bundle-stripped (NovelAPIBench): a model tuned with bundles in its prompts, evaluated
    with and without the bundle; the base model likewise."""
    if not model.startswith("hf:"):
        raise UserError(f"{model}: the study needs a local model; pass hf:PATH")
    knowledge = f"oracle:{cell}"
    trained = _train(model, f"tasks:{benchmark}", out_dir / "models" / "tuned",
                     ["--split", str(split), "--knowledge", knowledge],
                     _train_options(train_method, max_steps, epochs, lr, train_batch_size,
                                    max_length))
    options = _run_options(max_tokens, seed, environment, workers, split)
    rows = []
    for who, name in (("base", model), ("tuned", f"hf:{trained['model']}")):
        for method in (knowledge, "none"):
            label = "bundle" if method == knowledge else "stripped"
            result = _run(benchmark, name, out_dir / "runs" / f"{who}-{label}", method, [],
                          options)
            rows.append({"model": who, "prompt": label, "method": method, **result})
    score = {(row["model"], row["prompt"]): row["pass@1"] for row in rows}
    table = []
    for who in ("base", "tuned"):
        with_bundle, stripped = score[(who, "bundle")], score[(who, "stripped")]
        drop = None if with_bundle is None or stripped is None else stripped - with_bundle
        table.append([who, _pct(with_bundle), _pct(stripped),
                      "—" if drop is None else f"{100 * drop:+.1f}"])
    _write(out_dir, "bundle-stripped", {"model": model, "cell": cell, "split": str(split),
                                        "training": trained, "rows": rows},
           ["model", f"with bundle ({cell}) pass@1 %", "stripped pass@1 %", "Δ points"], table,
           ["Tuned on the split's train part with the bundle in every prompt; evaluated on its "
            "test part. Δ = stripped − with bundle: how much of the tuned model's score needs "
            "the bundle in the prompt."])


def register(app: typer.Typer) -> None:
    app.add_typer(study_app, name="study")
