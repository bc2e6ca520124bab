"""The records of a failure diagnosis: the labels, KOCO-Bench's categories and `Diagnosis`.

These are what `knowbench diagnose` stores (RUN/diagnoses.jsonl) and what reports read.
The label set and its meaning are described in `knowbench.scoring.taxonomy` and
docs/diagnosis.md; the rules that assign them live in `knowbench.scoring.classifier`.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from knowbench.records import SampleResult

Label = Literal["WrongSyntax", "WrongAPISelection", "WrongImport", "WrongParam",
                "WrongShapeDtype", "WrongLogic", "Timeout", "Resource", "Infrastructure",
                "NoCode", "Truncated"]

LABELS: tuple[Label, ...] = ("WrongSyntax", "WrongAPISelection", "WrongImport", "WrongParam",
                             "WrongShapeDtype", "WrongLogic", "Timeout", "Resource",
                             "Infrastructure", "NoCode", "Truncated")
"""All labels, in NovelAPIBench's pipeline order, then the evaluation failures, then the
failures of the reply (`REPLY_LABELS`)."""

REPLY_LABELS: tuple[Label, ...] = ("NoCode", "Truncated")
"""Failures of the reply rather than of its code: it holds no code, or it was cut off at
the token limit. They are decided from the sample alone, before any test is read."""

KocoCategory = Literal["invalid API call", "invalid API arguments", "data constraint violation",
                       "attribute/key access error", "type error", "undefined variable",
                       "syntax error", "incorrect implementation"]

KOCO_CATEGORIES: tuple[KocoCategory, ...] = (
    "invalid API call", "invalid API arguments", "data constraint violation",
    "attribute/key access error", "type error", "undefined variable", "syntax error",
    "incorrect implementation")

# When tests of one sample fail in different ways, the sample takes the label that comes
# first here: a broken evaluation first, then the earliest point of the invocation pipeline.
# Memory comes before time (exhausting memory is slow, so a later test often times out) and
# both before WrongLogic, the default for wrong output.
PRECEDENCE: tuple[Label, ...] = ("Infrastructure", "WrongSyntax", "WrongAPISelection",
                                 "WrongImport", "WrongParam", "WrongShapeDtype", "Resource",
                                 "Timeout", "WrongLogic")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Evidence(_Model):
    """Why a label was given: the rule that fired and what it fired on.

    rule: the rule's id (docs/diagnosis.md lists them). detail: one sentence for a person.
    test_id: the test whose failure was classified. exception: "Type: message" (cut to
    300 characters). frame: the frame that decided it ("file:line in function: source").
    name: the API, module or variable involved. called: the runner's spy for that test
    (whether the target's code ran; None when unknown).
    """

    rule: str
    detail: str
    test_id: str | None = None
    exception: str | None = None
    frame: str | None = None
    name: str | None = None
    called: bool | None = None


class Diagnosis(_Model):
    """The failure label of one sample.

    label and koco: the NovelAPIBench label and the KOCO-Bench category (None for
    Timeout, Resource and Infrastructure). ambiguous: the deterministic rules had to fall
    back to a default; such cases are the ones an LLM judge sees. source: "rule" or
    "judge". per_test maps each failing test to its own label. sample_digest identifies
    the stored sample the diagnosis was made from (see `sample_digest`).
    """

    task_id: str
    sample_idx: int
    label: Label
    koco: KocoCategory | None
    evidence: Evidence
    ambiguous: bool = False
    source: Literal["rule", "judge"] = "rule"
    judge: dict[str, str] | None = Field(
        default=None, description="model, label and reason when a judge decided.")
    per_test: dict[str, Label] = Field(default_factory=dict)
    sample_digest: str = ""


class TaskInfo(_Model):
    """What the classifier may know about a task besides the stored sample.

    given_code: code the task supplies (context and the masked prompt): a failure on one
    of its lines while the program loads is the task's fault, not the candidate's.
    """

    entry_point: str
    target_api: str | None = None
    reference: str = ""
    instruction: str = ""
    given_code: str = ""

    @classmethod
    def from_task(cls, task: object) -> TaskInfo:
        """From a `FunctionTask` (any object with its attributes)."""
        return cls(entry_point=task.entry_point,  # type: ignore[attr-defined]
                   target_api=getattr(task, "target_api", None),
                   reference=getattr(task, "reference", ""),
                   instruction=getattr(task, "instruction", ""),
                   given_code="\n".join(part for part in (getattr(task, "context", ""),
                                                          getattr(task, "prompt_code", "")) if part))


def sample_digest(result: SampleResult) -> str:
    """A short content hash of a stored sample: a saved diagnosis is reused only for the
    exact sample it was made from."""
    return hashlib.sha256(result.model_dump_json().encode()).hexdigest()[:16]

