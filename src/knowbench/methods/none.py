"""The `none` method: the task alone, no added knowledge."""

from __future__ import annotations

from typing import Any

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.methods.base import Method, Prompt
from knowbench.methods.prompts import task_messages


class NoKnowledge(Method):
    name = "none"

    def __init__(self, **options: Any) -> None:
        del options  # `none` uses no options

    def prompt(self, task: FunctionTask | ChoiceTask) -> Prompt:
        return Prompt(messages=task_messages(task))
