"""What a diagnosis rule sees (`RuleContext`) and what it returns (`Verdict`).

Shared by the rules that the outcome's reason decides (`reason_rules`), the rules that read
a traceback (`exception_rules`) and the classifier that runs them (`classifier`).
"""

from __future__ import annotations

from dataclasses import dataclass

from knowbench.records import SampleResult
from knowbench.scoring.code_facts import CodeFacts
from knowbench.scoring.failure_records import KocoCategory, Label, TaskInfo
from knowbench.scoring.surface import ApiSurface
from knowbench.scoring.tracebacks import Frame


@dataclass(frozen=True)
class Verdict:
    """One rule's decision: label, KOCO category, the rule's id and a sentence for a person;
    `ambiguous` when the rule fell back to a default (the cases a judge may see), the frame
    and the API or name it fired on."""

    label: Label
    koco: KocoCategory | None
    rule: str
    detail: str
    ambiguous: bool = False
    frame: Frame | None = None
    name: str | None = None


@dataclass(frozen=True)
class RuleContext:
    """Everything the per-test rules look at for one sample."""

    result: SampleResult
    task: TaskInfo | None
    surface: ApiSurface
    facts: CodeFacts
    given_lines: frozenset[str]

    @property
    def entry_name(self) -> str:
        entry = self.task.entry_point if self.task else self.result.task_id
        return entry.rsplit(".", 1)[-1]

