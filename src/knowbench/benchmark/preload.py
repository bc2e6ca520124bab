"""Which modules an execution imports before the sample's code runs, computed from tasks.

Two lists with two jobs, both decided here so every engine user agrees:

- `preload_modules`: what a warm server (fork server, Ray actor) imports once, so each
  sample does not pay for it again. Speed only: a sample imports what it needs anyway.
- `guarded_modules`: what each sample imports before its limits and guards are set, so the
  runner can watch those modules for tampering (pytest, when tests use it).
"""

from __future__ import annotations

from collections.abc import Iterable

from knowbench.benchmark.schema import ChoiceTask, FunctionTask, imported_modules


def preload_modules(tasks: Iterable[FunctionTask | ChoiceTask], declared: Iterable[str] = ()) -> list[str]:
    """Modules worth importing once in a warm server: `declared` ones (a manifest's
    `preload`) plus every top-level module the tasks' context, prompt code and tests import,
    sorted."""
    modules = set(declared)
    for task in tasks:
        if isinstance(task, FunctionTask):
            for code in (task.context, task.prompt_code, *(spec.code for spec in task.tests)):
                modules |= imported_modules(code)
    modules.discard("__future__")
    return sorted(modules)


def guarded_modules(tasks: Iterable[FunctionTask | ChoiceTask]) -> list[str]:
    """Modules each sample imports before it runs: pytest when any test mentions it, so the
    runner can guard it against tampering."""
    uses_pytest = any("pytest" in spec.code for task in tasks
                      if isinstance(task, FunctionTask) for spec in task.tests)
    return ["pytest"] if uses_pytest else []
