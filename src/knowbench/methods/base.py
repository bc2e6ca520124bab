"""Knowledge methods: how a task (and any knowledge) becomes the messages a model sees."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.models.base import Message, ModelBackend
from knowbench.records import Generation, Limits, SamplingParams

if TYPE_CHECKING:
    from knowbench.execution.engine import Engine


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


@dataclass
class SampleContext:
    """What a method may use to produce one sample: the model, the sampling settings, and the
    engine and limits the run executes this task's samples with (a method that runs code
    while generating, the agent's `python` tool, runs it there, never on the host)."""

    backend: ModelBackend
    params: SamplingParams
    sample_idx: int
    engine: Engine
    limits: Limits
    preload: list[str] = field(default_factory=list)


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

    async def generate(self, task: FunctionTask | ChoiceTask, prompt: Prompt,
                       context: SampleContext) -> Generation:
        """One sample of `task`: by default one model call on `prompt`. A method that
        generates through several calls (an agent) overrides this and returns the whole
        episode in `Generation.trajectory`, with `usage` summed over its calls."""
        started = time.monotonic()
        reply = await context.backend.generate(task, prompt.messages, context.params,
                                               context.sample_idx)
        return Generation(task_id=task.task_id, sample_idx=context.sample_idx,
                          completion=reply.text, usage=reply.usage,
                          finish_reason=reply.finish_reason, cached=reply.cached,
                          latency_s=round(time.monotonic() - started, 4))

    def hidden_paths(self) -> list[str]:
        """Host paths samples must not see (the corpus, which holds every task's target):
        the run masks them in the sandbox like the benchmark itself (`Engine.hide`)."""
        return []


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
