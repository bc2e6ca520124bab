"""`knowbench contamination`: ask a model for each task's greedy and sampled outputs and
check them with CDD (knowbench.scoring.contamination).

Each function task is asked as a run without knowledge asks it (the `none` method's
prompt): once greedy (temperature 0, sample 0) and `settings.samples` times at
`settings.temperature` (samples 0 … n-1). Requests go through the model backend, so an
HTTP model's replies land in the generation cache and a second check, or a run with the
same prompt and sampling settings, asks nothing again. What is compared is the code of
each reply (`knowbench.program.extract_code`), or the stripped reply when it holds none.
Multiple-choice tasks are left out: their one-letter answers are peaked by nature.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date

from knowbench.benchmark.load import Benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.errors import UserError
from knowbench.methods import get_method
from knowbench.models.base import BackendError, ModelBackend
from knowbench.program import extract_code
from knowbench.records import SamplingParams
from knowbench.scoring.contamination import (
    CddSettings,
    CddSummary,
    TaskCdd,
    check_task,
    date_check,
    summarise,
)


def check_contamination(benchmark: Benchmark, backend: ModelBackend,
                    settings: CddSettings = CddSettings(),  # noqa: B008 (frozen)
                    *, task_ids: list[str] | None = None, cutoff: date | None = None,
                    max_tokens: int = 1024, seed: int | None = None,
                    on_task: Callable[[TaskCdd], None] | None = None) -> CddSummary:
    """CDD of every selected function task of `benchmark` (all when `task_ids` is None).

    Raises `UserError` for unknown task ids or a selection without function tasks, and when
    the backend fails (replies received so far stay in the generation cache).
    """
    tasks = _function_tasks(benchmark, task_ids)
    model = str(backend.describe().get("model") or backend.name)
    try:
        results = asyncio.run(_check_all(tasks, backend, settings, max_tokens, seed, cutoff, on_task))
    except BackendError as error:
        raise UserError(f"the model backend failed: {error}\n  replies received so far are "
                        "cached; run the same command again to go on") from None
    return summarise(model, settings, results, cutoff)


def _function_tasks(benchmark: Benchmark, task_ids: list[str] | None) -> list[FunctionTask]:
    known = {task.task_id: task for task in benchmark.tasks}
    unknown = [task_id for task_id in task_ids or [] if task_id not in known]
    if unknown:
        raise UserError(f"unknown task ids: {', '.join(unknown)} (see `knowbench validate "
                        f"{benchmark.path}` for the list)")
    wanted = set(task_ids or known)
    tasks = [task for task in benchmark.tasks
             if task.task_id in wanted and isinstance(task, FunctionTask)]
    if not tasks:
        raise UserError(f"{benchmark.path}: no function task selected; CDD compares generated "
                        "code, and multiple-choice answers are left out")
    return tasks


async def _check_all(tasks: list[FunctionTask], backend: ModelBackend, settings: CddSettings,
                     max_tokens: int, seed: int | None, cutoff: date | None,
                     on_task: Callable[[TaskCdd], None] | None) -> list[TaskCdd]:
    method = get_method("none")
    greedy = SamplingParams(n=1, temperature=0.0, max_tokens=max_tokens, seed=seed)
    sampled = SamplingParams(n=settings.samples, temperature=settings.temperature,
                             max_tokens=max_tokens, seed=seed)

    async def one(task: FunctionTask) -> TaskCdd:
        messages = method.prompt(task).messages
        replies = await asyncio.gather(
            backend.generate(task, messages, greedy, 0),
            *(backend.generate(task, messages, sampled, index) for index in range(settings.samples)))
        texts = [extract_code(reply.text, task.entry_point) or reply.text.strip() for reply in replies]
        result = check_task(task.task_id, texts[0], texts[1:], settings)
        created, check = date_check(task.metadata, cutoff)
        result = result.model_copy(update={"source_created": created, "date_check": check})
        if on_task is not None:
            on_task(result)
        return result

    pending = [asyncio.ensure_future(one(task)) for task in tasks]
    try:
        return list(await asyncio.gather(*pending))
    finally:
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await backend.aclose()
