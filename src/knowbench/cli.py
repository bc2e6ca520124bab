"""The `knowbench` command line. Thin: it parses, calls library functions and prints."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.commands._console import KValues, engine_notices, one_of
from knowbench.commands._progress import RunProgress
from knowbench.errors import UserError
from knowbench.execution import ENGINES, SANDBOXES, create_engine, resolve_sandbox
from knowbench.execution.engine import default_workers
from knowbench.methods import METHODS, Method, get_method
from knowbench.models import BackendOptions, calls_model, create_backend
from knowbench.models.base import ModelBackend
from knowbench.paths import check_output
from knowbench.prices import choose_price
from knowbench.records import Limits, SamplingParams
from knowbench.report.table import cost_line, print_scores
from knowbench.scoring.cost import Price, model_name
from knowbench.scoring.metrics import k_shortfalls

app = typer.Typer(
    name="knowbench", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    help="Build, run and diagnose knowledge-grounded code-generation benchmarks.",
)
console = Console(stderr=True, soft_wrap=True)
out = Console()


def _version(value: bool) -> None:
    if value:
        out.print(f"knowbench {knowbench.__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    """Build, run and diagnose knowledge-grounded code-generation benchmarks."""


@app.command()
def run(
    ctx: typer.Context,
    benchmark: Annotated[Path, typer.Argument(help="Benchmark directory (benchmark.json + tasks.jsonl).")],
    model: Annotated[str, typer.Option(
        "--model", "-m",
        help="'reference' (gold code; must score 100%), 'null' (empty bodies; must score 0%), "
             "'replay:FILE' (a samples JSONL with task_id, completion, sample_idx), 'hf:PATH' (a "
             "local transformers model, see docs/local-models.md), or the name "
             "of a model served by an OpenAI-compatible endpoint (see --base-url).")],
    out_dir: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Run directory. Default: runs/<benchmark>-<model>-<method>.")] = None,
    method: Annotated[str, typer.Option(
        help=f"Knowledge method: {', '.join(METHODS.choices())}; oracle's cells (for tasks with a "
             "knowledge bundle): S_name, S, E, M, C, S+M, S+E, S+C, S+M+C, S+E+C, Full. "
             "See docs/knowledge.md.")] = "none",
    corpus: Annotated[str | None, typer.Option(help="Knowledge corpus for rag-* methods.")] = None,
    exclude_file: Annotated[bool, typer.Option(
        "--exclude-file", help="rag-* methods: also withhold every chunk of the target's file (needs "
                               "task metadata source_path), as KOCO-Bench did.")] = False,
    top_k: Annotated[int, typer.Option(min=1, help="Chunks retrieved per task (rag-* methods).")] = 5,
    budget: Annotated[int, typer.Option(
        min=0, help="Token budget for added knowledge (approximate, 4 characters per token).")] = 2000,
    query: Annotated[str, typer.Option(
        help="Retrieval query: 'signature+instruction' or 'signature' (KOCO-Bench's choice).")]
    = "signature+instruction",
    max_turns: Annotated[int, typer.Option(
        min=1, help="agent: model calls per episode (one episode per sample).")] = 20,
    episode_tokens: Annotated[int, typer.Option(
        min=1, help="agent: tokens (prompt + completion, summed over its calls) an episode may "
                    "use.")] = 200_000,
    episode_timeout: Annotated[float, typer.Option(
        min=1.0, help="agent: wall-clock seconds per episode.")] = 600.0,
    loop_limit: Annotated[int, typer.Option(
        min=2, help="agent: the same tool call (same arguments) made this many times ends the "
                    "episode.")] = 3,
    knn_lambda: Annotated[float, typer.Option(
        "--knn-lambda", "--lambda", min=0.0, max=1.0,
        help="knn-lm: weight of the datastore's distribution in the mix.")] = 0.25,
    knn_k: Annotated[int, typer.Option(
        "--knn-k", min=1, help="knn-lm: neighbours looked up per decoding step.")] = 1024,
    knn_temperature: Annotated[float, typer.Option(
        "--knn-temperature", min=1e-6, help="knn-lm: softmax temperature over -distance.")] = 1.0,
    knn_index: Annotated[str, typer.Option(
        "--knn-index", help="knn-lm datastore search: auto (faiss exact up to 1M entries, IVF "
                            "beyond; numpy without faiss), flat, ivf or numpy.")] = "auto",
    base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (env: OPENAI_BASE_URL).")] = None,
    api_key: Annotated[str | None, typer.Option(
        help="API key (env: KNOWBENCH_API_KEY or OPENAI_API_KEY); never written to disk.")] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="Samples per task.")] = 1,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature (0 = greedy).")] = 0.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0)] = 1.0,
    max_tokens: Annotated[int, typer.Option(min=1)] = 1024,
    seed: Annotated[int | None, typer.Option(help="Sampling seed; sample i uses seed + i.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Model requests in flight.")] = 8,
    request_timeout: Annotated[float, typer.Option(min=1.0, help="Seconds per model request.")] = 120.0,
    max_retries: Annotated[int, typer.Option(
        min=0, help="Retries per request on 429 / 5xx / network errors, with backoff.")] = 6,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Do not read or write the generation cache (~/.cache/knowbench).")] = False,
    adapter: Annotated[Path | None, typer.Option(
        help="--model hf:...: a LoRA adapter directory (from `knowbench train --method lora`) "
             "put on top of the model.")] = None,
    batch_size: Annotated[int, typer.Option(
        min=1, help="--model hf:...: prompts generated together in one batch.")] = 8,
    workers: Annotated[int, typer.Option(min=1, help="Samples executed in parallel; by default half the cores, at least 1 (as shown).")]
    = default_workers(),
    engine_name: Annotated[str, typer.Option(
        "--engine", help=f"One of {', '.join(ENGINES.names())}: 'forkserver' (warm sandboxed "
                         "interpreter per worker, fork per sample), 'subprocess' (a fresh sandboxed "
                         "interpreter per sample), 'ray' (fork servers on a Ray cluster; "
                         "pip install 'knowbench[ray]').")]
    = "forkserver",
    ray_address: Annotated[str | None, typer.Option(
        help="Ray cluster for --engine ray ('auto', or host:port); default: a local instance.")]
    = None,
    sandbox: Annotated[str, typer.Option(
        help=f"Isolation: {', '.join(SANDBOXES.names())}. 'auto' takes bwrap, else unshare.")] = "auto",
    environment: Annotated[str, typer.Option(
        "--env", callback=one_of("auto", "self"), help="'auto': run samples in the benchmark's own environment (built once from its "
                      "requirements, see `knowbench env`); 'self': in knowbench's interpreter.")] = "auto",
    timeout: Annotated[float | None, typer.Option(
        min=0.1, help="Wall-clock seconds per sample, overriding the benchmark's limits.")] = None,
    calibrate: Annotated[bool, typer.Option(
        help="Time limit per task = max(--time-floor, --time-factor × the reference's runtime on "
             "this host); --no-calibrate uses the benchmark's limits.")] = True,
    recalibrate: Annotated[bool, typer.Option(
        "--recalibrate", help="Run every reference check again instead of reusing those of earlier "
        "runs of this benchmark under the same engine, environment, limits and host.")] = False,
    time_floor: Annotated[float, typer.Option(min=0.1, help="Smallest calibrated limit, seconds.")] = 3.0,
    time_factor: Annotated[float, typer.Option(min=1.0, help="Calibrated limit = factor × reference.")]
    = 10.0,
    memory_mb: Annotated[int, typer.Option(min=16, help="Memory per sample above the interpreter's own.")]
    = 1024,
    isolation: Annotated[str, typer.Option(
        callback=one_of("auto", "require", "in-process"),
        help="'auto': judge each task split (its tests in a process the candidate's code cannot "
             "reach) when its reference passes split, else in-process, with the reason recorded; "
             "'require': split only, tasks that cannot run split score as infrastructure; "
             "'in-process': never split.")] = "auto",
    learn: Annotated[bool, typer.Option(
        "--learn/--no-learn", help="Have each warm server (fork server, Ray actor) load once the "
        "library modules the references imported as they ran, as an earlier test's imports stay "
        "loaded in one pytest session; --no-learn: every sample imports them itself, as in a fresh "
        "interpreter (docs/execution.md, 'Modules learned from the references').")] = True,
    task: Annotated[list[str] | None, typer.Option(
        "--task", help="Run only this task id (repeatable).")] = None,
    split_file: Annotated[Path | None, typer.Option(
        "--split", help="Run only the test part of this split file (`knowbench split`).")] = None,
    k: KValues = None,
    overwrite: Annotated[bool, typer.Option(help="Discard an existing run in --out and start over.")]
    = False,
    run_label: Annotated[str | None, typer.Option(
        "--label", help="Name of the run in reports, leaderboards and comparisons (stored in "
                        "run.json; not a setting, so a resumed run may be relabelled). Default: "
                        "model (with the samples file name for replay) · method.")] = None,
    progress_every: Annotated[float, typer.Option(
        min=0.0, help="When stderr is not a terminal: print a progress line every this many "
                      "seconds (0: none).")] = 15.0,
    price: Annotated[str | None, typer.Option(
        help="The model's price per 1M input and output tokens, 'INPUT,OUTPUT' (e.g. 0.15,0.60): "
             "the summary adds the run's cost (stored in run.json, not a setting).")] = None,
    prices: Annotated[Path | None, typer.Option(
        help="A price file (JSON: model name or pattern -> {input, output} per 1M tokens); "
             "see docs/cost-and-contamination.md.")] = None,
) -> None:
    """Evaluate a model on a benchmark. Kill it at any time; the same command resumes."""
    from knowbench.benchmark.preload import preload_modules
    from knowbench.run import TimePolicy, run_benchmark

    if run_label is not None and (not run_label.strip() or "\n" in run_label):
        raise UserError("--label must be one non-empty line\n  fix: pass e.g. --label 'gpt-4o-mini, rag'")
    if out_dir is not None:
        check_output(out_dir, "--out", directory=True)
    bench = load_benchmark(benchmark)
    for warning in bench.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    if split_file is not None:
        from knowbench.training.split import read_split

        if task:
            raise UserError("--split and --task both select tasks; give one of them")
        task = read_split(split_file, bench).test
    params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)
    limits = Limits(wall_s=timeout or bench.manifest.time_limit_s, memory_mb=memory_mb,
                    cpu_s=int(timeout or bench.manifest.time_limit_s) + 1)
    if timeout is not None:
        policy = TimePolicy(mode="fixed", fixed_s=timeout)
    elif calibrate:
        policy = TimePolicy(mode="calibrated", floor_s=time_floor, factor=time_factor)
    else:
        policy = TimePolicy(mode="benchmark")
    if adapter is not None and not model.startswith("hf:"):
        raise UserError(f"--adapter needs a local model (--model hf:BASE), not --model {model}")
    backend = create_backend(model, BackendOptions(base_url=base_url, api_key=api_key, concurrency=concurrency,
                                                   request_timeout=request_timeout, max_retries=max_retries,
                                                   no_cache=no_cache,
                                                   adapter=str(adapter) if adapter else None,
                                                   batch_size=batch_size))
    backend.notify = lambda message: console.print(f"[yellow]warning:[/] {message}", highlight=False)
    if n > 1 and temperature == 0 and calls_model(backend):
        console.print("[yellow]warning:[/] --n > 1 with temperature 0 samples the same completion")
    run_price = (choose_price(str(backend.describe().get("model") or model), price, prices)
                 if calls_model(backend) else None)
    progress = RunProgress(console, progress_every)
    method_options = {"corpus": corpus, "top_k": top_k, "budget": budget, "query": query,
                      "exclude_file": exclude_file, "knn_lambda": knn_lambda, "knn_k": knn_k,
                      "knn_temperature": knn_temperature, "knn_index": knn_index,
                      "max_turns": max_turns, "episode_tokens": episode_tokens,
                      "episode_timeout": episode_timeout, "loop_limit": loop_limit}
    if method.startswith(("rag-", "agent")) and corpus:
        with progress.step(f"opening corpus {corpus} for {method} (loading its index; a dense "
                           "index is embedded on first use)"):
            knowledge = get_method(method, **method_options)
    else:
        knowledge = get_method(method, **method_options)
    # Options typed on the command line (typer bundles its own click: compare by name).
    given = {"--" + name.replace("_", "-") for name in ctx.params
             if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"}
    if "--calibrate" in given and not calibrate:
        given.add("--no-calibrate")
    for warning in _ignored_options(given, backend, knowledge, engine_name, timeout, calibrate):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    def label(text: str) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)

    run_dir = out_dir or Path("runs") / f"{bench.name}-{label(model)}-{label(method)}"
    python = None
    if environment == "auto" and bench.manifest.requirements:
        from knowbench.execution.environments import ensure_env

        with progress.step(f"environment for {', '.join(bench.manifest.requirements)} (built "
                           "once, then cached)"):
            python = ensure_env(bench.manifest.requirements).python
    with engine_notices(console):
        engine = create_engine(engine_name, resolve_sandbox(sandbox, python=python), workers, python,
                               preload_modules(bench.tasks, bench.manifest.preload),
                               bench.manifest.requirements, ray_address)
    sandbox_kind = str(engine.describe()["sandbox"])
    if sandbox_kind == "none":
        console.print("[bold red]warning:[/] --sandbox none: samples run WITHOUT isolation")
    console.print(f"knowbench {knowbench.__version__}: {bench.name} ({len(bench.tasks)} tasks) · model {model} · "
                  f"method {method} · {engine.name} engine · sandbox {sandbox_kind} · {engine.workers} workers "
                  f"→ {run_dir}")
    ks = tuple(k or (1, 5, 10))
    with progress:
        try:
            summary = run_benchmark(bench, backend, knowledge, engine, run_dir, params, limits,
                                    time_policy=policy, task_ids=task or None, ks=ks,
                                    overwrite=overwrite, on_start=progress.on_start,
                                    on_result=progress.on_result,
                                    on_references=progress.on_references,
                                    on_warning=lambda text: console.print(
                                        f"[yellow]warning:[/] {text}", highlight=False),
                                    isolation=isolation,  # type: ignore[arg-type]
                                    recalibrate=recalibrate,
                                    label=run_label.strip() if run_label else None,
                                    price=run_price, learn=learn)
        except KeyboardInterrupt:
            interrupted = True
        else:
            interrupted = False
        finally:
            engine.close()
    if interrupted:
        console.print(f"interrupted; {progress.stored} samples stored in {run_dir}; rerun the "
                      "same command to resume", highlight=False)
        raise typer.Exit(130)
    if k:
        for note in k_shortfalls(summary.scores, k):
            console.print(f"[yellow]warning:[/] {note}", highlight=False)
    print_scores(out, summary.scores, title=f"{bench.name} · {model} · {method}")
    statuses = ", ".join(f"{name} {count}" for name, count in sorted(summary.status_counts.items()))
    out.print(f"samples: {len(summary.results)} ({statuses}) · results in {run_dir}")
    if summary.cost is not None and calls_model(backend):
        out.print(cost_line(summary.cost), highlight=False, soft_wrap=True)
    truncated = summary.status_counts.get("truncated", 0)
    if truncated:
        limit, fix = ((f"--max-tokens {max_tokens}", "raise --max-tokens and run again into a new --out")
                      if backend.name != "replay" else
                      ("the token limit they were generated with",
                       "generate them again with a larger limit"))
        console.print(f"[yellow]warning:[/] {truncated} of {len(summary.results)} replies were cut "
                      f"off at {limit} (status truncated): their code or answer was never judged; "
                      f"{fix}")
    _print_isolation(summary.isolation)
    if summary.unlearned:
        console.print(f"[yellow]warning:[/] the servers stopped loading what the references imported "
                      f"(each sample imports it itself): {summary.unlearned}", highlight=False)
    elif summary.learned:
        out.print(f"learned: {summary.learned} library modules the references imported as they ran, "
                  "loaded once by each server (--no-learn: none)")
    _print_self_check(summary.self_check, model)


_AGENT_OPTIONS = ("--max-turns", "--episode-tokens", "--episode-timeout", "--loop-limit")


def _ignored_options(given: set[str], backend: ModelBackend, method: Method,
                     engine_name: str, timeout: float | None, calibrate: bool) -> list[str]:
    """One warning per option given on the command line that does nothing in this run:
    method options the method does not use (those missing from its `describe()`), endpoint
    and sampling options with a backend that calls no model, and so on."""
    used = set(method.describe())
    ignored: list[tuple[str, str]] = []
    for option in ("--corpus", "--top-k", "--budget", "--query", "--exclude-file",
                   "--knn-lambda", "--knn-k", "--knn-temperature", "--knn-index", *_AGENT_OPTIONS):
        if option in given and option.removeprefix("--").replace("-", "_") not in used:
            users = ("knn-lm does" if option.startswith("--knn") else "the agent method does"
                     if option in _AGENT_OPTIONS else "rag-* methods do"
                     if option in ("--budget", "--query") else "rag-* methods and the agent do")
            ignored.append((option, f"--method {method.describe().get('method', method.name)} "
                                    f"does not use it (only {users})"))
    calls_a_model = calls_model(backend)
    if not calls_a_model:
        for option in ("--base-url", "--api-key", "--concurrency", "--request-timeout",
                       "--max-retries", "--no-cache", "--temperature", "--top-p", "--max-tokens",
                       "--seed", "--price", "--prices"):
            if option in given:
                ignored.append((option, f"--model {backend.name} calls no model"))
    if "--batch-size" in given and backend.name != "hf":
        ignored.append(("--batch-size", "only local models (--model hf:...) generate in batches"))
    if "--n" in given and hasattr(backend, "samples_for"):
        ignored.append(("--n", f"--model {backend.name} takes as many samples per task as its "
                               "file holds"))
    if "--ray-address" in given and engine_name != "ray":
        ignored.append(("--ray-address", "it applies only to --engine ray"))
    for option in ("--time-floor", "--time-factor"):
        if option in given and (timeout is not None or not calibrate):
            ignored.append((option, "calibration is off (--timeout or --no-calibrate)"))
    if "--no-calibrate" in given and timeout is not None:
        ignored.append(("--no-calibrate", "--timeout sets every limit anyway"))
    return [f"{option} is ignored: {why}" for option, why in ignored]


def _print_isolation(share: dict[str, object]) -> None:
    if not share.get("split_share") and not share.get("in_process"):
        return
    in_process = share.get("in_process_tasks") or []
    assert isinstance(in_process, list)
    line = (f"judged split: {share['split']} of {int(share['split']) + int(share['in_process'])} "  # type: ignore[call-overload]
            f"executed samples ({share['split_share']}%)")
    if in_process:
        line += f"; in-process tasks: {', '.join(in_process[:10])}{' …' if len(in_process) > 10 else ''}"
    out.print(line)


def _print_self_check(check: dict[str, object], model: str) -> None:
    if not check:
        return
    if check["ok"]:
        out.print(f"[green]self-check passed:[/] --model {model} → {check['expected']}")
        return
    offending = check["offending_tasks"]
    assert isinstance(offending, list)
    console.print(f"[bold red]SELF-CHECK FAILED:[/] --model {model} should give '{check['expected']}', "
                  f"but {len(offending)} task(s) do not: {', '.join(offending[:20])}"
                  f"{' …' if len(offending) > 20 else ''}\n"
                  "  these tasks are defective (or the sandbox blocks something their tests need); "
                  "see samples.jsonl in the run directory for each failure")


@app.command()
def validate(benchmark: Annotated[Path, typer.Argument(help="Benchmark directory.")]) -> None:
    """Check a benchmark directory and summarise it (exit code 2 on the first problem)."""
    bench = load_benchmark(benchmark)
    for warning in bench.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    table = Table(title=f"{bench.name} v{bench.manifest.version} · {bench.content_hash[:19]}…",
                  title_justify="left")
    for header in ("domain", "function tasks", "choice tasks", "test items"):
        table.add_column(header, justify="left" if header == "domain" else "right")
    per_domain: dict[str, list[int]] = {}
    for item in bench.tasks:
        row = per_domain.setdefault(item.domain, [0, 0, 0])
        if isinstance(item, FunctionTask):
            row[0] += 1
            row[2] += len(item.test_items())
        else:
            row[1] += 1
    for domain, (functions, choices, tests) in sorted(per_domain.items()):
        table.add_row(domain, str(functions), str(choices), str(tests))
    out.print(table)
    out.print(f"valid: {len(bench.tasks)} tasks in {bench.path}")


@app.command()
def score(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `knowbench run`.")],
    k: KValues = None,
    price: Annotated[str | None, typer.Option(
        help="Price the run's tokens at 'INPUT,OUTPUT' per 1M tokens instead of the price it "
             "was run with (kept in run.json).")] = None,
    prices: Annotated[Path | None, typer.Option(
        help="A price file (JSON: model name or pattern -> {input, output} per 1M tokens).")] = None,
) -> None:
    """Re-score a run from its stored results (nothing is generated or executed)."""
    from knowbench.run import write_outputs
    from knowbench.store import RunDirectory

    run = RunDirectory.open(run_dir)
    document = run.document()
    settings = document.get("settings", {})
    backend = settings.get("model", {}).get("backend", "")
    chosen = choose_price(model_name(settings), price, prices)
    run.lock()  # a run still working here rewrites the same files: wait for it
    try:
        if chosen is not None:
            run.write_document({**run.document(), "price": chosen.model_dump(mode="json")})
        elif document.get("price"):
            chosen = Price.model_validate(document["price"])
        summary = write_outputs(run_dir, run.results(), backend, tuple(k or (1, 5, 10)), chosen)
    finally:
        run.release()
    for note in k_shortfalls(summary.scores, k or ()):
        console.print(f"[yellow]warning:[/] {note}", highlight=False)
    print_scores(out, summary.scores, title=f"{settings.get('benchmark', {}).get('name', run_dir)}")
    if summary.cost is not None and summary.cost.requests:
        out.print(cost_line(summary.cost), highlight=False, soft_wrap=True)
    _print_self_check(summary.self_check, backend)


def _register_command_groups() -> None:
    import importlib

    for name in COMMAND_GROUPS:
        importlib.import_module(f"knowbench.commands.{name}").register(app)


COMMAND_GROUPS: tuple[str, ...] = ("env", "builders", "corpus", "diagnose", "novel", "contamination",
                                  "train", "study")
_register_command_groups()


def _narrowed(args: list[str]) -> typer.Typer:
    """The CLI with only the command or command group that `args` start with, when they start
    with the name of one; else the whole CLI.

    Building a command's parser reads every one of its parameters' annotations (about 1.5 ms
    a command here), so building all of them cost every invocation about 50 ms, for a command
    line that runs one command. What that command parses, prints as help and reports as a
    usage error is the same either way; only a top-level `--help`, an unknown name or none at
    all needs the others, and those get the whole CLI."""
    if not args:
        return app
    commands = [command for command in app.registered_commands
                if (command.name or typer.main.get_command_name(getattr(command.callback, "__name__", "")))
                == args[0]]
    groups = [group for group in app.registered_groups if group.name == args[0]]
    if len(commands) + len(groups) != 1:
        return app
    narrowed = copy.copy(app)
    narrowed.registered_commands, narrowed.registered_groups = commands, groups
    return narrowed


def main() -> None:
    """Console entry point: user errors print one message and exit 2, never a traceback."""
    try:
        code = _narrowed(sys.argv[1:])(standalone_mode=False)
        if isinstance(code, int) and code:  # a command's typer.Exit(code) comes back as a value
            sys.exit(code)
    except UserError as error:
        console.print(f"error: {error}", style="bold red", highlight=False, markup=False)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted: finished samples are stored; run the same command to resume")
        sys.exit(130)
    except (typer.Abort, typer.Exit) as stop:
        sys.exit(getattr(stop, "exit_code", 1))
    except OSError as error:
        # A path this machine refuses (an output where a file is, under a file, on a read-only
        # mount): the path and the system's reason. Without a path it is no user's to fix.
        if error.filename is None:
            raise
        paths = " -> ".join(str(name) for name in (error.filename, error.filename2) if name is not None)
        console.print(f"error: {paths}: {error.strerror or error}; check the paths given to this command",
                      style="bold red", highlight=False, markup=False)
        sys.exit(2)
    except Exception as error:
        # Usage errors (missing argument, bad option value) from the CLI framework: whichever
        # click typer uses, they carry show() and exit_code.
        if callable(getattr(error, "show", None)) and isinstance(getattr(error, "exit_code", None), int):
            error.show()
            sys.exit(error.exit_code)
        raise


if __name__ == "__main__":
    main()
