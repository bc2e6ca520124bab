"""The model backend interface shared by every way of producing completions."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel, ConfigDict

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.records import SamplingParams, Usage


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    content: str


class Reply(BaseModel):
    """What a backend returns for one sample."""

    model_config = ConfigDict(extra="forbid")

    text: str
    usage: Usage = Usage()
    finish_reason: str | None = None
    cached: bool = False


class ModelBackend(ABC):
    """Turns (task, messages, sampling params, sample index) into a reply.

    Backends are async so one run can keep many requests in flight; those that need no
    I/O (reference, null, replay) simply return at once.
    """

    name: str = "abstract"

    @abstractmethod
    async def generate(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                       params: SamplingParams, sample_idx: int) -> Reply:
        """The reply for sample `sample_idx` of `task`. Raises `BackendError` when it cannot."""

    def describe(self) -> dict[str, Any]:
        """Identity written into run.json and used in cache keys (no secrets)."""
        return {"backend": self.name}

    async def aclose(self) -> None:  # noqa: B027 (optional hook: most backends hold nothing)
        """Release connections; called once at the end of a run."""


class BackendError(RuntimeError):
    """A backend could not produce a reply after its retries."""
