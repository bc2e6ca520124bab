"""Backends that need no model: gold solutions, empty bodies, and recorded completions.

`reference` must score 1.0 and `null` 0.0 on any sound benchmark, so every benchmark can
check itself. `replay` scores completions produced elsewhere.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.jsonl import read_objects
from knowbench.models.base import BackendError, Message, ModelBackend, Reply
from knowbench.records import SamplingParams


class ReferenceBackend(ModelBackend):
    """Answers with the task's gold solution."""

    name = "reference"

    async def generate(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                       params: SamplingParams, sample_idx: int) -> Reply:
        if isinstance(task, ChoiceTask):
            return Reply(text="Answer: " + ", ".join(task.answer))
        return Reply(text=f"```python\n{task.reference}\n```")


class NullBackend(ModelBackend):
    """Answers with nothing: the target keeps its masked body, a choice gets no letter."""

    name = "null"

    async def generate(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                       params: SamplingParams, sample_idx: int) -> Reply:
        return Reply(text="")


_SHOWN = 20  # missing task ids named in a message


class ReplayBackend(ModelBackend):
    """Replays a samples JSONL file: one `{task_id, completion, sample_idx}` object per line,
    with an optional `finish_reason` ("length": the reply was cut off at its token limit), so
    a run's own samples.jsonl replays as it was scored."""

    name = "replay"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._completions = load_samples(self.path)

    def describe(self) -> dict[str, Any]:
        """The file and a digest of its content: a run resumes only on the same replies."""
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        return {"backend": self.name, "path": str(self.path), "file": self.path.name,
                "sha256": digest}

    def samples_for(self, task_id: str) -> int:
        return sum(1 for key in self._completions if key[0] == task_id)

    def check_tasks(self, task_ids: list[str], known_ids: list[str]) -> list[str]:
        """Refuses a run when the file lacks completions for selected tasks (all of them are
        named up front, not one per attempt); warns about task ids the benchmark does not have.
        A task's samples must be numbered 0, 1, 2, ... without gaps."""
        indices: dict[str, set[int]] = {}
        for task_id, sample_idx in self._completions:
            indices.setdefault(task_id, set()).add(sample_idx)
        missing = []
        for task_id in task_ids:
            have = indices.get(task_id, set())
            gaps = sorted(set(range(max(have, default=-1) + 1)) - have)
            if not have:
                missing.append(task_id)
            elif gaps:
                missing.append(f"{task_id} (sample {', '.join(map(str, gaps[:5]))})")
        if missing:
            shown = ", ".join(missing[:_SHOWN]) + (f", … ({len(missing) - _SHOWN} more)"
                                                   if len(missing) > _SHOWN else "")
            present = len(task_ids) - len(missing)
            raise UserError(
                f"{self.path} lacks completions for {len(missing)} of the {len(task_ids)} "
                f"selected tasks: {shown}\n  fix: add them to the file, or run only the "
                f"{present} task(s) it covers with --task ID (repeatable)")
        known = set(known_ids)
        unknown = sorted({task_id for task_id in indices if task_id not in known})
        if not unknown:
            return []
        shown = ", ".join(unknown[:5]) + (" …" if len(unknown) > 5 else "")
        return [f"{self.path}: {len(unknown)} task id(s) the benchmark does not have are "
                f"ignored: {shown}"]

    async def generate(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                       params: SamplingParams, sample_idx: int) -> Reply:
        try:
            text, finish_reason = self._completions[(task.task_id, sample_idx)]
        except KeyError:
            raise BackendError(f"{self.path} has no completion for task '{task.task_id}' "
                               f"sample {sample_idx}") from None
        return Reply(text=text, finish_reason=finish_reason)


def load_samples(path: Path) -> dict[tuple[str, int], tuple[str, str | None]]:
    """Read a samples JSONL file; errors name the line and field."""
    if path.is_dir():
        raise UserError(f"{path}: is a directory\n  fix: pass replay:FILE, a JSONL file of task_id "
                        "and completion per line (e.g. a run's samples.jsonl)")
    if not path.is_file():
        raise UserError(f"{path}: samples file not found")
    completions: dict[tuple[str, int], tuple[str, str | None]] = {}
    for number, row in read_objects(path):
        for field, kind in (("task_id", str), ("completion", str)):
            if not isinstance(row.get(field), kind):
                raise UserError(f"{path}:{number}: field '{field}' must be a string\n"
                                "  fix: each line needs task_id, completion and (optionally) sample_idx")
        sample_idx = row.get("sample_idx", 0)
        if not isinstance(sample_idx, int) or sample_idx < 0:
            raise UserError(f"{path}:{number}: field 'sample_idx' must be a non-negative integer")
        finish_reason = row.get("finish_reason")
        if finish_reason is not None and not isinstance(finish_reason, str):
            raise UserError(f"{path}:{number}: field 'finish_reason' must be a string or null")
        key = (row["task_id"], sample_idx)
        if key in completions:
            raise UserError(f"{path}:{number}: task '{key[0]}' sample {sample_idx} appears twice")
        completions[key] = (row["completion"], finish_reason)
    if not completions:
        raise UserError(f"{path}: holds no completion\n  fix: write one JSON object per line with "
                        "task_id, completion and (optionally) sample_idx")
    return completions
