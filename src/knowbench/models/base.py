"""The model backend interface shared by every way of producing completions."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.records import SamplingParams, Usage


class Message(BaseModel):
    """One chat message. `tool_calls` (an assistant's calls, in the OpenAI wire shape
    `{"id", "type": "function", "function": {"name", "arguments"}}`) and `tool_call_id` (a
    "tool" message answering one) are only set in tool-using conversations; `wire()` leaves
    them out when unset, so plain messages are sent and cached exactly as before."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def wire(self) -> dict[str, Any]:
        """The message as the chat API takes it."""
        return self.model_dump(exclude_none=True)


class Reply(BaseModel):
    """What a backend returns for one sample."""

    model_config = ConfigDict(extra="forbid")

    text: str
    usage: Usage = Usage()
    finish_reason: str | None = None
    cached: bool = False
    tool_calls: list[dict[str, Any]] = Field(
        default_factory=list, description="Tool calls the model made (OpenAI wire shape); only "
        "from `generate_with_tools`.")


class ModelBackend(ABC):
    """Turns (task, messages, sampling params, sample index) into a reply.

    Backends are async so one run can keep many requests in flight; those that need no
    I/O (reference, null, replay) simply return at once.
    """

    name: str = "abstract"
    # Where the backend reports what the user should see while a run goes on (a failing
    # endpoint being retried); None: one "warning:" line on stderr. The CLI sets its console.
    notify: Callable[[str], None] | None = None

    def notice(self, message: str) -> None:
        if self.notify is not None:
            self.notify(message)
        else:
            print(f"warning: {message}", file=sys.stderr, flush=True)

    @abstractmethod
    async def generate(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                       params: SamplingParams, sample_idx: int) -> Reply:
        """The reply for sample `sample_idx` of `task`. Raises `BackendError` when it cannot."""

    async def generate_with_tools(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                                  params: SamplingParams, sample_idx: int,
                                  tools: list[dict[str, Any]]) -> Reply:
        """One turn of a tool-using conversation: the reply may carry `tool_calls` for the
        `tools` offered (OpenAI function-tool schemas). Only backends whose `supports_tools`
        is true implement it; methods that need it refuse other backends in `Method.attach`."""
        del task, messages, params, sample_idx, tools
        raise BackendError(f"model backend '{self.name}' cannot make tool calls")

    supports_tools: bool = False
    converses: bool = False
    """Whether a reply answers the conversation it is sent (a model). Methods that hold a
    conversation over several calls need it; `reference`, `null` and `replay` answer a sample
    alike whatever they are sent."""

    def describe(self) -> dict[str, Any]:
        """Identity written into run.json and used in cache keys (no secrets)."""
        return {"backend": self.name}

    def connection(self) -> dict[str, Any]:
        """How the backend reaches its model (address, concurrency, timeouts): recorded in
        run.json but no part of a run's identity, since none of it changes replies. The keys
        that `describe` shares with it are left out of the run's identity too."""
        return {}

    def check_tasks(self, task_ids: list[str], known_ids: list[str]) -> list[str]:
        """Called once before a run starts work on the selected `task_ids` (of the benchmark's
        `known_ids`): warnings to show, or `UserError` when the backend cannot answer some of
        them (e.g. a replay file that lacks them), so a run never fails half way for a reason
        known up front."""
        del task_ids, known_ids
        return []

    async def aclose(self) -> None:  # noqa: B027 (optional hook: most backends hold nothing)
        """Release connections; called once at the end of a run."""


class BackendError(RuntimeError):
    """A backend could not produce a reply after its retries."""
