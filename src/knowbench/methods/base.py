"""Knowledge methods: how a task (and any knowledge) becomes the messages a model sees."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.models.base import Message, ModelBackend


class Prompt(BaseModel):
    """The messages for one task and a record of the knowledge that went into them.

    `trace` is stored with every sample of the task (e.g. retrieved chunk ids, scores and
    ranks, whether the target API was retrieved), so a run can be diagnosed later.
    """

    model_config = ConfigDict(extra="forbid")

    messages: list[Message]
    trace: dict[str, Any] = Field(default_factory=dict)

    @property
    def approx_tokens(self) -> int:
        """A tokenizer-free size estimate (4 characters per token), for budgets and reports."""
        return sum(len(message.content) for message in self.messages) // 4


class Method(ABC):
    """Turns a task into a prompt. Methods differ only in the knowledge they add.

    Constructors take keyword options from `knowbench run` (`corpus`, `top_k`, `budget`,
    `query`); a method ignores options it does not use.
    """

    name: str = "abstract"
    # A method selected as 'name:variant' (e.g. 'oracle:S+E') receives the variant as this
    # keyword option; None: the method takes no variant.
    variant_option: ClassVar[str | None] = None

    @abstractmethod
    def prompt(self, task: FunctionTask | ChoiceTask) -> Prompt:
        """The prompt to send for `task`."""

    def attach(self, backend: ModelBackend) -> None:
        """Called once before a run starts, with the run's backend: a method that changes how
        the model decodes (kNN-LM) installs itself here, or raises `UserError` when the backend
        cannot take it."""
        del backend

    def check(self, tasks: Sequence[FunctionTask | ChoiceTask]) -> list[str]:
        """Before a run: warnings about options that cannot apply to these tasks (raise
        `UserError` when an option would do nothing at all)."""
        del tasks
        return []

    def describe(self) -> dict[str, Any]:
        """Identity written into run.json; include every option that changes prompts."""
        return {"method": self.name}
