"""`knowbench train` and `knowbench split`: parametric knowledge for local models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from knowbench.commands._console import one_of
from knowbench.errors import UserError

out = Console()
console = Console(stderr=True, soft_wrap=True)


def split(
    benchmark: Annotated[Path, typer.Argument(help="Benchmark directory.")],
    by: Annotated[str, typer.Option(
        help="'task' (tasks with the same target stay together), 'api' (also tasks sharing a "
             "knowledge API), 'library' (whole libraries).")] = "task",
    test_share: Annotated[float, typer.Option(help="Share of tasks in the test part, strictly between 0 and 1.")] = 0.2,
    seed: Annotated[int, typer.Option(help="Which groups go to the test part.")] = 0,
    leave_out: Annotated[str | None, typer.Option(
        help="Leave-one-library-out: this library's tasks are the test part.")] = None,
    out_file: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Split file to write. Default: BENCH/splits/<by>-<seed>.json.")] = None,
) -> None:
    """Split a benchmark into train and test parts that share no target."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.training.split import make_split, write_split

    bench = load_benchmark(benchmark)
    made = make_split(bench, by, test_share, seed, leave_out)
    name = f"leave-out-{leave_out}" if leave_out else f"{by}-{seed}"
    path = out_file or bench.path / "splits" / f"{name}.json"
    write_split(made, path)
    out.print(f"{bench.name}: {len(made.train)} train, {len(made.test)} test tasks in "
              f"{made.groups} groups (by {made.by}) → {path}", highlight=False)
    out.print(f"  train with: knowbench train --data tasks:{bench.path} --split {path} ...\n"
              f"  evaluate the test part: knowbench run {bench.path} --split {path} ...",
              highlight=False)


def train(
    model: Annotated[str, typer.Option(
        "--model", "-m", help="Base model: hf:PATH (a directory with config.json) or hf:NAME (in "
                              "the local Hugging Face cache).")],
    data: Annotated[str, typer.Option(
        help="corpus:NAME (causal LM on a knowledge corpus) or tasks:BENCH (instruction tuning "
             "on a benchmark's train split).")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
    method: Annotated[str, typer.Option(callback=one_of("lora", "full"), help="'lora' (an adapter) or 'full' (all weights).")] = "lora",
    rank: Annotated[int, typer.Option(min=1, help="LoRA rank.")] = 16,
    alpha: Annotated[int, typer.Option(min=1, help="LoRA alpha.")] = 32,
    dropout: Annotated[float, typer.Option(min=0.0, max=0.99, help="LoRA dropout.")] = 0.05,
    target_modules: Annotated[list[str] | None, typer.Option(
        "--target-modules", help="LoRA target module names (repeatable). Default: every linear "
                                 "layer but the output head.")] = None,
    epochs: Annotated[float, typer.Option(min=0.01)] = 1.0,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Stop after this many steps "
                                                              "(overrides --epochs).")] = None,
    lr: Annotated[float, typer.Option(min=0.0, help="Peak learning rate.")] = 2e-4,
    schedule: Annotated[str, typer.Option(callback=one_of("linear", "cosine", "constant"), help="linear, cosine or constant.")] = "linear",
    batch_size: Annotated[int, typer.Option(min=1)] = 4,
    grad_accum: Annotated[int, typer.Option(min=1, help="Gradient accumulation steps.")] = 1,
    max_length: Annotated[int, typer.Option(min=8, help="Tokens per training sequence.")] = 512,
    seed: Annotated[int, typer.Option()] = 0,
    save_steps: Annotated[int, typer.Option(min=1, help="Checkpoint every this many steps.")] = 200,
    withhold: Annotated[list[Path] | None, typer.Option(
        "--withhold", help="corpus data: leave out every chunk that leakage control withholds "
                           "from a task of this benchmark (repeatable).")] = None,
    corpus_share: Annotated[float, typer.Option(
        min=0.001, max=1.0, help="corpus data: train on this share of the corpus's chunks.")] = 1.0,
    split_file: Annotated[Path | None, typer.Option(
        "--split", help="tasks data: a split file (`knowbench split`); its train part is used.")]
    = None,
    knowledge: Annotated[str, typer.Option(
        help="tasks data: the knowledge in each training prompt, as `knowbench run --method`: "
             "none, oracle:CELL (the task's bundle), rag-bm25 / rag-dense / rag-hybrid with "
             "--corpus (retrieval-augmented fine-tuning).")] = "none",
    corpus: Annotated[str | None, typer.Option(help="tasks data with rag-* knowledge: the corpus.")]
    = None,
    top_k: Annotated[int, typer.Option(min=1, help="tasks data with rag-*: chunks per prompt.")] = 5,
    budget: Annotated[int, typer.Option(min=0, help="tasks data: knowledge token budget.")] = 2000,
    overwrite: Annotated[bool, typer.Option(help="Discard earlier output in --out.")] = False,
) -> None:
    """Fine-tune a local model (full or LoRA); rerun the same command to resume."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.training.data import corpus_data, parse_data, task_data
    from knowbench.training.train import TrainConfig, check_base
    from knowbench.training.train import train as run_training

    base = model.removeprefix("hf:")
    check_base(base)  # (before the training data is built)
    kind, source = parse_data(data)
    if kind == "corpus":
        if split_file or knowledge != "none" or corpus:
            raise UserError("--split, --knowledge and --corpus apply to --data tasks:BENCH only")
        if not withhold:
            console.print("[yellow]warning:[/] no --withhold BENCH: nothing is withheld from the "
                          "corpus, so a benchmark's targets in it are trained on", highlight=False)
        training = corpus_data(source, [load_benchmark(path) for path in withhold or []],
                               corpus_share)
    else:
        if withhold or corpus_share < 1.0:
            raise UserError("--withhold and --corpus-share apply to --data corpus:NAME only")
        training, warnings = task_data(source, split_file, knowledge, corpus, top_k, budget)
        for warning in warnings:
            console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    config = TrainConfig(base=base, method=method, rank=rank, alpha=alpha, dropout=dropout,  # type: ignore[arg-type]
                         target_modules=target_modules or None, epochs=epochs, max_steps=max_steps,
                         lr=lr, schedule=schedule, batch_size=batch_size,  # type: ignore[arg-type]
                         grad_accum=grad_accum, max_length=max_length, seed=seed,
                         save_steps=save_steps)
    console.print(f"training {base} ({method}) on {kind}:{source}: {len(training.examples)} "
                  f"examples → {out_dir}", highlight=False)
    manifest = run_training(config, training, out_dir, overwrite=overwrite,
                            on_progress=lambda line: console.print(line, highlight=False))
    out.print(f"loss {manifest['initial_loss']} → {manifest['final_loss']} in {manifest['steps']} "
              f"steps ({manifest['wall_s']} s) · {out_dir}\n  use: {manifest['use']}",
              highlight=False)


def register(app: typer.Typer) -> None:
    app.command("train")(train)
    app.command("split")(split)
