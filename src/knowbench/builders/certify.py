"""Certification: proving by execution that a task's tests measure its target.

A function task is *certified* when, run in the sandbox in the benchmark's environment,

(a) every test item passes on the reference,
(b) the suite fails when the target's body is replaced by `raise NotImplementedError`, and
    again when it is replaced by `return None`,
(c) every test item ran the target's code (`TestOutcome.called`): a test that rebinds the
    target's name by importing the library's own function (shadowing), or that never reaches
    it, proves nothing about the candidate;

and, with mutants requested, it reports (d) the share of simple AST mutants of the reference
that the suite kills. Items that pass on a stub are listed too (a suite can fail on a stub
as a whole while some of its items measure nothing).

`certify_benchmark` checks any benchmark and returns a `CertifyReport`; the miner uses
`Checker` directly to prune tests before certifying what remains.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from knowbench import __version__
from knowbench.benchmark.load import Benchmark
from knowbench.benchmark.preload import guarded_modules
from knowbench.benchmark.schema import PARSE_LOCK, FunctionTask, ProjectTask
from knowbench.builders.mutants import mutants as make_mutants
from knowbench.execution.engine import Engine, ExecutionRequest, Isolation
from knowbench.program import SpliceError, assemble, stubbed_program
from knowbench.records import Execution, Limits, Reason, TestOutcome

Variant = str  # "reference", "reference-split", "stub-raise", "stub-none", "mutant-<i>"
SPLIT_PROBE = "reference-split"  # the reference once more, judged split
STUBS: dict[str, str] = {"stub-raise": "raise NotImplementedError", "stub-none": "return None"}
CheckName = Literal["reference-fails", "not-called", "passes-on-stub-raise", "passes-on-stub-none",
                    "program-error"]
_MESSAGE_CHARS = 300


class ItemResult(BaseModel):
    """One test item under the reference: its status and whether it ran the target."""

    model_config = ConfigDict(extra="forbid")

    id: str
    status: str
    called: bool | None = None
    message: str = ""
    duration_s: float = 0.0
    reason: Reason | None = None


class MutationScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    total: int
    killed: int
    score: float
    survivors: list[str] = Field(default_factory=list)


class TaskCheck(BaseModel):
    """The certification of one task, check by check."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    domain: str
    applicable: bool = True
    certified: bool = False
    failed_checks: list[CheckName] = Field(default_factory=list)
    reference: list[ItemResult] = Field(default_factory=list)
    not_called: list[str] = Field(default_factory=list, description="Items that passed without running the target.")
    passes_on_stub: dict[str, list[str]] = Field(default_factory=dict,
                                                 description="Stub -> items that pass on it.")
    stub_suite_fails: dict[str, bool] = Field(default_factory=dict)
    mutants: MutationScore | None = None
    isolation: Literal["split", "in-process"] | None = Field(
        default=None, description="How runs will judge this task: split when its reference "
        "passes split (tests in a process the candidate cannot reach), else in-process.")
    isolation_note: str = Field(default="", description="Why the task cannot run split.")
    note: str = ""
    seconds: float = Field(default=0.0, description="How long the task's executions ran, added up; time "
                                                    "spent waiting for a worker is not counted.")


class CertifyReport(BaseModel):
    """What `knowbench certify` writes: one TaskCheck per task and the totals."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    content_hash: str
    tool: str = f"knowbench {__version__}"
    environment: dict[str, Any] = Field(default_factory=dict)
    sandbox: str = ""
    limits: Limits
    mutants_per_task: int = 0
    tasks: list[TaskCheck]
    summary: dict[str, Any] = Field(default_factory=dict)


def summarise(checks: list[TaskCheck]) -> dict[str, Any]:
    """Counts per check: how many tasks are certified and how many fail each check."""
    applicable = [c for c in checks if c.applicable]
    failing: dict[str, int] = {}
    for check in applicable:
        for name in check.failed_checks:
            failing[name] = failing.get(name, 0) + 1
    scores = [c.mutants.score for c in applicable if c.mutants is not None and c.mutants.total]
    return {
        "tasks": len(checks), "function_tasks": len(applicable),
        "certified": sum(c.certified for c in applicable),
        "failing": dict(sorted(failing.items())),
        "shadowed_or_not_called": sum(bool(c.not_called) for c in applicable),
        "some_item_passes_on_a_stub": sum(any(c.passes_on_stub.values()) for c in applicable),
        "mean_mutation_score": round(sum(scores) / len(scores), 4) if scores else None,
        "runs_split": sum(c.isolation == "split" for c in applicable),
        "runs_in_process": sum(c.isolation == "in-process" for c in applicable),
    }


def task_limits(task: FunctionTask, default_wall_s: float, base: Limits) -> Limits:
    wall = task.time_limit_s or default_wall_s
    return base.model_copy(update={"wall_s": wall, "cpu_s": max(base.cpu_s, math.ceil(wall) + 1)})


class Checker:
    """Runs variants of tasks (reference, stubs, mutants) on an engine, in parallel."""

    def __init__(self, engine: Engine, default_wall_s: float = 10.0, base_limits: Limits | None = None,
                 preload: list[str] | None = None) -> None:
        self.engine = engine
        self.default_wall_s = default_wall_s
        self.base_limits = base_limits or Limits()
        self.preload = preload or []

    def completion(self, task: FunctionTask, variant: Variant, mutant_code: str | None = None) -> str:
        if variant in ("reference", SPLIT_PROBE):
            return task.reference
        if variant in STUBS:
            return STUBS[variant]
        assert mutant_code is not None
        return mutant_code

    def execute(self, task: FunctionTask, completion: str, wall_s: float | None = None,
                isolation: Isolation = "in-process") -> Execution | str:
        """The execution of `task` with `completion`, or the reason it could not be assembled.

        `wall_s` shortens the task's wall-clock limit (mutants that loop forever need not
        use up the whole limit: a mutant that times out is killed all the same)."""
        with PARSE_LOCK:  # certification runs on threads; see PARSE_LOCK
            limits = task_limits(task, self.default_wall_s, self.base_limits)
        if wall_s is not None and wall_s < limits.wall_s:
            limits = limits.model_copy(update={"wall_s": wall_s, "cpu_s": max(1, math.ceil(wall_s) + 1)})
        with PARSE_LOCK:
            assembly = assemble(task.context, task.prompt_code, task.entry_point, completion)
            if assembly.program is None:
                return assembly.error or "could not assemble the program"
            trusted = None
            if isolation == "split":
                try:
                    trusted = stubbed_program(task.context, task.prompt_code, task.entry_point)
                except SpliceError as error:
                    return str(error)
            request = ExecutionRequest(program=assembly.program, tests=task.tests, entry_point=task.entry_point,
                                       limits=limits, preload=self.preload, isolation=isolation,
                                       trusted_program=trusted, invocation=task.invocation,
                                       graft=task.installed_module)
            request.items()  # found once, here, under the lock
        return self.engine.execute(request)

    def run_all(self, jobs: list[tuple[Any, FunctionTask, str]]) -> dict[Any, Execution | str]:
        """Execute (key, task, completion) jobs on the engine's workers; results by key."""
        with ThreadPoolExecutor(max_workers=max(1, self.engine.workers)) as pool:
            futures = {key: pool.submit(self.execute, task, completion) for key, task, completion in jobs}
            return {key: future.result() for key, future in futures.items()}

    def check(self, task: FunctionTask, mutants: int = 0) -> TaskCheck:
        return self.check_many([task], mutants)[0]

    def check_many(self, tasks: list[FunctionTask], mutants: int = 0,
                   on_done: Callable[[TaskCheck], None] | None = None,
                   known: dict[str, TaskRuns] | None = None) -> list[TaskCheck]:
        """Certify each task (reference, both stubs, then optional mutants), in parallel;
        `on_done` is called as each task's last execution finishes."""
        def finished(task: FunctionTask, runs: TaskRuns) -> None:
            if on_done:
                on_done(evaluate(task, runs))

        runs = self.executions(tasks, mutants=mutants, known=known, on_task_done=finished)
        return [evaluate(task, runs[task.task_id]) for task in tasks]

    def executions(self, tasks: list[FunctionTask],
                   variants: tuple[str, ...] = ("reference", SPLIT_PROBE, *STUBS),
                   mutants: int = 0, known: dict[str, TaskRuns] | None = None,
                   on_task_done: Callable[[FunctionTask, TaskRuns], None] | None = None) -> dict[str, TaskRuns]:
        """Run `variants` of each task, then `mutants` mutants of its reference, in parallel.

        `known` holds runs already made of exactly these tasks: those variants (and mutants)
        are not repeated. Mutants get a wall-clock limit scaled to the reference's run.
        """
        known = known or {}
        by_id = {task.task_id: task for task in tasks}
        runs = {task.task_id: known[task.task_id].copy() if task.task_id in known else TaskRuns()
                for task in tasks}
        pending = {task.task_id: 0 for task in tasks}
        busy = {task.task_id: 0.0 for task in tasks}  # seconds its executions ran, queueing excluded
        busy_lock = threading.Lock()
        with ThreadPoolExecutor(max_workers=max(1, self.engine.workers)) as pool:
            running: dict[Future[Execution | str], tuple[str, str]] = {}

            def timed(task: FunctionTask, completion: str, wall: float | None, isolation: Isolation) -> Execution | str:
                begun = time.monotonic()  # on the worker: the job has left the queue
                try:
                    return self.execute(task, completion, wall, isolation)
                finally:
                    with busy_lock:
                        busy[task.task_id] += time.monotonic() - begun

            def submit(task: FunctionTask, variant: str, completion: str, wall: float | None = None) -> None:
                isolation: Isolation = "split" if variant == SPLIT_PROBE else "in-process"
                running[pool.submit(timed, task, completion, wall, isolation)] = (task.task_id, variant)
                pending[task.task_id] += 1

            def advance(task_id: str, variant: str) -> None:
                task, run = by_id[task_id], runs[task_id]
                if variant == "reference" and mutants and not run.mutant_names:
                    with PARSE_LOCK:  # while the pool's threads assemble programs
                        made = make_mutants(task.reference, mutants)
                    run.mutant_names = [description for description, _ in made]
                    wall = _mutant_wall(run.outcomes["reference"])
                    for index, (_, code) in enumerate(made):
                        submit(task, f"mutant-{index}", code, wall)
                if pending[task_id] == 0:
                    with busy_lock:
                        run.seconds += busy[task_id]
                        busy[task_id] = 0.0
                    if on_task_done:
                        on_task_done(task, run)

            for task in tasks:
                for variant in variants:
                    if variant not in runs[task.task_id].outcomes:
                        submit(task, variant, self.completion(task, variant))
            for task in tasks:
                if pending[task.task_id] == 0 or (mutants and "reference" in runs[task.task_id].outcomes):
                    advance(task.task_id, "reference" if "reference" in runs[task.task_id].outcomes else "")
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    task_id, variant = running.pop(future)
                    runs[task_id].outcomes[variant] = future.result()
                    pending[task_id] -= 1
                    advance(task_id, variant)
        return runs


@dataclass
class TaskRuns:
    """The executions of one task's variants, by variant name, and its mutants' descriptions."""

    outcomes: dict[str, Execution | str] = field(default_factory=dict)
    mutant_names: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def copy(self) -> TaskRuns:
        return TaskRuns(dict(self.outcomes), list(self.mutant_names), self.seconds)


def _mutant_wall(reference: Execution | str) -> float | None:
    """A mutant gets five times the reference's running time (at least two seconds)."""
    if isinstance(reference, str):
        return None
    return max(2.0, 5 * reference.duration_s)


def evaluate(task: FunctionTask, runs: TaskRuns) -> TaskCheck:
    """Turn the executions of one task's variants into its certification."""
    outcome, mutant_names = runs.outcomes, runs.mutant_names
    check = TaskCheck(task_id=task.task_id, domain=task.domain, seconds=round(runs.seconds, 3))
    reference = outcome["reference"]
    if isinstance(reference, str):
        check.failed_checks.append("program-error")
        check.note = reference
        return check
    check.reference = [_item(o) for o in reference.tests]
    if any(o.status != "pass" for o in reference.tests):
        check.failed_checks.append("reference-fails")
        if reference.tests and reference.tests[0].reason == "program-failed-to-load":
            check.note = _short(reference.tests[0].message)
    check.not_called = [o.id for o in reference.tests if o.status == "pass" and o.called is not True]
    if check.not_called:
        check.failed_checks.append("not-called")
    for stub in STUBS:
        execution = outcome[stub]
        if isinstance(execution, str):
            check.stub_suite_fails[stub] = True
            continue
        passing = [o.id for o in execution.tests if o.status == "pass"]
        check.passes_on_stub[stub] = passing
        fails = len(passing) < len(execution.tests) or not execution.tests
        check.stub_suite_fails[stub] = fails
        if not fails:
            check.failed_checks.append("passes-on-stub-raise" if stub == "stub-raise" else "passes-on-stub-none")
    if mutant_names:
        killed, survivors = 0, []
        for index, name in enumerate(mutant_names):
            execution = outcome.get(f"mutant-{index}")
            if isinstance(execution, str) or execution is None or any(o.status != "pass" for o in execution.tests):
                killed += 1
            else:
                survivors.append(name)
        check.mutants = MutationScore(total=len(mutant_names), killed=killed,
                                      score=round(killed / len(mutant_names), 4), survivors=survivors)
    check.isolation, check.isolation_note = _isolation(reference, outcome.get(SPLIT_PROBE))
    check.certified = not check.failed_checks
    return check


def _isolation(reference: Execution, split: Execution | str | None) -> tuple[Any, str]:
    """split when the reference passes split too; otherwise in-process, and why."""
    if split is None:
        return None, ""
    if isinstance(split, str):
        return "in-process", _short(split)
    failing = [o for o in split.tests if o.status != "pass"]
    if not failing:
        return "split", ""
    if any(o.status != "pass" for o in reference.tests):
        return "split", ""  # the reference fails either way: the stricter judge stays
    lines = [line for line in failing[0].message.strip().splitlines() if line.strip()]
    return "in-process", _short(f"{failing[0].reason or failing[0].status}: {lines[-1] if lines else ''}")


def _item(outcome: TestOutcome) -> ItemResult:
    return ItemResult(id=outcome.id, status=outcome.status, called=outcome.called,
                      message=_short(outcome.message), duration_s=outcome.duration_s,
                      reason=outcome.reason)


def _short(message: str) -> str:
    message = message.strip()
    if len(message) <= _MESSAGE_CHARS:
        return message
    return message[: _MESSAGE_CHARS // 3] + " … " + message[-2 * _MESSAGE_CHARS // 3:]


def certify_benchmark(benchmark: Benchmark, engine: Engine, *, mutants: int = 0,
                      base_limits: Limits | None = None, environment: dict[str, Any] | None = None,
                      on_done: Callable[[TaskCheck], None] | None = None) -> CertifyReport:
    """Certify every function task of `benchmark` (choice tasks are listed as not applicable).

    The benchmark directory is hidden from the executed programs (`engine.hide`)."""
    engine.hide([benchmark.path])
    # Project tasks are certified when imported (`koco_projects.certify_projects`: reference
    # and stub through the project's own tests); this checker assembles single programs.
    functions = [t for t in benchmark.tasks if isinstance(t, FunctionTask) and not isinstance(t, ProjectTask)]
    limits = base_limits or Limits(wall_s=benchmark.manifest.time_limit_s)
    checker = Checker(engine, benchmark.manifest.time_limit_s, limits, guarded_modules(functions))
    by_id = {check.task_id: check for check in checker.check_many(functions, mutants, on_done)}
    checks = []
    for task in benchmark.tasks:
        if task.task_id in by_id:
            checks.append(by_id[task.task_id])
        else:
            note = (f"{task.kind} task: nothing to execute" if task.kind == "choice" else
                    "project task: certified when imported (knowbench import koco-project), not here")
            checks.append(TaskCheck(task_id=task.task_id, domain=task.domain, applicable=False,
                                    note=note))
    return CertifyReport(benchmark=benchmark.name, content_hash=benchmark.content_hash,
                         environment=environment or {}, sandbox=str(engine.describe().get("sandbox", "")),
                         limits=limits, mutants_per_task=mutants, tasks=checks, summary=summarise(checks))
