"""Knowledge methods: how a task (and any knowledge) becomes the messages a model sees."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.models.base import Message


class Method(ABC):
    """Turns a task into chat messages. Methods differ in the knowledge they add."""

    name: str = "abstract"

    @abstractmethod
    def messages(self, task: FunctionTask | ChoiceTask) -> list[Message]:
        """The conversation to send for `task`."""

    def describe(self) -> dict[str, Any]:
        return {"method": self.name}
