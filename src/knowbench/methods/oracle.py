"""Oracle knowledge cells (`oracle:<cell>`, e.g. `oracle:S+E`): each task gets parts of its own
knowledge bundle, as NovelAPIBench's oracle prepend does, isolating what knowledge helps from
how well a retriever finds it.

A task without a bundle (every choice task, and function tasks built without one) gets no
knowledge; its trace says `"bundle": false`, so such samples can be told apart in a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.knowledge.bundles import CELLS, render_cell
from knowbench.knowledge.context import approx_tokens
from knowbench.methods.base import Method, Prompt
from knowbench.methods.prompts import task_messages


class OracleMethod(Method):
    name = "oracle"
    variant_option = "cell"

    def __init__(self, cell: str | None = None, **options: Any) -> None:
        del options  # retrieval options do not apply: the bundle is the knowledge
        if cell is None:
            raise UserError(f"method 'oracle' needs a knowledge cell, e.g. --method oracle:S+E; "
                            f"cells: {', '.join(CELLS)}")
        if cell not in CELLS:
            raise UserError(f"unknown knowledge cell '{cell}'; cells: {', '.join(CELLS)}")
        self.cell = cell

    def prompt(self, task: FunctionTask | ChoiceTask) -> Prompt:
        bundle = task.bundle if isinstance(task, FunctionTask) else None
        knowledge, present = render_cell(bundle, self.cell) if bundle is not None else ("", {})
        messages = task_messages(task, knowledge=knowledge)
        trace: dict[str, Any] = {
            "method": f"oracle:{self.cell}", "cell": self.cell, "bundle": bundle is not None,
            "components": present, "knowledge_tokens": approx_tokens(knowledge),
            "prompt_tokens": Prompt(messages=messages).approx_tokens,
        }
        if isinstance(task, FunctionTask) and task.target_api:
            trace["target_api"] = task.target_api
        return Prompt(messages=messages, trace=trace)

    def describe(self) -> dict[str, Any]:
        return {"method": f"oracle:{self.cell}", "cell": self.cell}

    def check(self, tasks: Sequence[FunctionTask | ChoiceTask]) -> list[str]:
        """Refuses tasks none of which carry a bundle (the run would equal `--method none`);
        warns when only some do."""
        bare = [task.task_id for task in tasks
                if not isinstance(task, FunctionTask) or task.bundle is None]
        if tasks and len(bare) == len(tasks):
            raise UserError(f"--method oracle:{self.cell}: none of the {len(tasks)} selected tasks "
                            "carries a knowledge bundle, so every prompt would be the same as "
                            "with --method none\n  fix: use --method none, or a benchmark built "
                            "with knowledge bundles (NovelAPIBench; see docs/knowledge.md)")
        if bare:
            shown = ", ".join(bare[:5]) + (" …" if len(bare) > 5 else "")
            return [f"--method oracle:{self.cell}: {len(bare)} of {len(tasks)} tasks carry no "
                    f"knowledge bundle and get no knowledge (as with --method none): {shown}"]
        return []
