"""Which modules an execution imports before the sample's code runs, computed from tasks.

Two lists with two jobs, both decided here so every engine user agrees:

- `preload_modules`: what a warm server (fork server, Ray actor) imports once, so each
  sample does not pay for it again. Speed only: a sample imports what it needs anyway.
- `guarded_modules`: what each sample imports before its limits and guards are set, so the
  runner can watch those modules for tampering (pytest, when tests use it).

A third list is learned as a run starts, not computed: `learned_modules`, what the tasks'
references imported as they ran, which the warm servers load too (`Engine.warm`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from knowbench.benchmark.schema import (
    ChoiceTask,
    FunctionTask,
    ProjectTask,
    imported_modules,
    imported_names,
)


def preload_modules(tasks: Iterable[FunctionTask | ChoiceTask], declared: Iterable[str] = ()) -> list[str]:
    """Modules worth importing once in a warm server, sorted: `declared` ones (a manifest's
    `preload`) plus every name the tasks' context, prompt code and tests import, dotted as
    written (`imported_names`): `import matplotlib.pyplot` and `from scipy import stats`
    preload those submodules, not only their packages, which every sample would otherwise
    import again. The server imports a.b.c as `from a.b import c` would: the submodule only
    where a.b has no attribute c (`from typing import List` imports typing). asyncio too
    where the code defines coroutines (the runner runs them with `asyncio.run`), and what
    every sample imports before it runs (`guarded_modules`: pytest where a test only
    mentions it, which every sample would otherwise import, 70 ms against 3), and the module
    a mined task's target is grafted into (`installed_module`: with it loaded, the server
    indexes its package once for every sample's graft, `knowbench_graft.index`)."""
    tasks = list(tasks)  # (read twice)
    modules = set(declared) | set(guarded_modules(tasks))
    local: set[str] = set()
    for task in tasks:
        if isinstance(task, FunctionTask):
            for code in (task.context, task.prompt_code, *(spec.code for spec in task.tests)):
                modules |= imported_names(code)
                if "async def" in code:  # the runner runs coroutines with asyncio.run
                    modules.add("asyncio")
            if task.installed_module:  # the graft imports it in each sample, and its package is
                modules.add(task.installed_module)  # then indexed once, in the server
        if isinstance(task, ProjectTask):
            modules.add("pytest")
            local |= _project_modules(task)
    # A project's own packages are never preloaded: one imported from the environment would
    # shadow the project's copy (and a sample's changes to it).
    return sorted(name for name in modules if name.split(".")[0] not in local | {"__future__"})


def learned_modules(tasks: Iterable[FunctionTask | ChoiceTask], imports: Mapping[str, Iterable[str]]) -> list[str]:
    """What a warm server loads once more (`Engine.warm`) from `imports`, the library modules
    each task's reference imported as it ran ({task id: modules}, in the order each was
    loaded): every task's in turn, each module once, never one of a project's own packages
    (as `preload_modules`)."""
    tasks = list(tasks)
    local = {name for task in tasks if isinstance(task, ProjectTask) for name in _project_modules(task)}
    learned: dict[str, None] = {}
    for task in tasks:
        for name in imports.get(task.task_id, ()):
            if name.split(".")[0] not in local:
                learned[name] = None
    return list(learned)


def _project_modules(task: ProjectTask) -> set[str]:
    """Top-level names the project's python_path directories provide (all of its test
    files' top-level names too, when the tree is not at hand)."""
    names = {spec.name.rsplit("/", 1)[-1].removesuffix(".py") for spec in task.tests}
    if task.root is None:
        return names | {name for spec in task.tests for name in imported_modules(spec.code)}
    base = Path(task.root) / task.project.path / task.project.workdir
    for entry in task.project.python_path:
        folder = base / entry
        if folder.is_dir():
            names |= {child.name.removesuffix(".py") for child in folder.iterdir()
                      if child.suffix == ".py" or (child / "__init__.py").is_file() or child.is_dir()}
    return names


def guarded_modules(tasks: Iterable[FunctionTask | ChoiceTask]) -> list[str]:
    """Modules each sample imports before it runs: pytest when any test mentions it, so the
    runner can guard it against tampering."""
    uses_pytest = any("pytest" in spec.code for task in tasks
                      if isinstance(task, FunctionTask) for spec in task.tests)
    return ["pytest"] if uses_pytest else []
