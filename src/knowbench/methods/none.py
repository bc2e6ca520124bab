"""The `none` method: the task alone, no added knowledge."""

from __future__ import annotations

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.methods.base import Method
from knowbench.methods.prompts import task_messages
from knowbench.models.base import Message


class NoKnowledge(Method):
    name = "none"

    def messages(self, task: FunctionTask | ChoiceTask) -> list[Message]:
        return task_messages(task)
