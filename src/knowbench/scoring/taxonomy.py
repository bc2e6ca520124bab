"""Failure taxonomy: why a `function` sample failed, with the evidence for it.

Every failed function sample gets exactly one label. The first six are NovelAPIBench's
classes, one per point of the API-invocation pipeline; the next three are failures of the
evaluation rather than of the code, and the last two failures of the reply itself:

    WrongSyntax        the candidate is not valid Python
    WrongAPISelection  a hallucinated API is called, or the target API is never used
    WrongImport        the right symbol is used, but imported from a wrong place or not at all
    WrongParam         the right callable with the wrong arguments (the call cannot bind)
    WrongShapeDtype    the right call, but a value breaks the API's contract inside its body
    WrongLogic         the calls are right and the surrounding program is wrong
    Timeout            a time limit was hit
    Resource           the memory limit was hit, or the process was killed
    Infrastructure     the evaluation itself failed: a missing test dependency, task code
                       that does not load in this environment, a test that never ran the target
    NoCode             the reply holds no code (empty, prose only, unclosed reasoning)
    Truncated          the reply was cut off at the token limit (finish_reason "length")

Each label also carries one of KOCO-Bench's error categories (`KOCO_CATEGORIES`; None for
the last five). The mapping depends on the evidence, not only on the label: a NameError
is an "undefined variable" whether it means a missing import (WrongImport) or a typo
(WrongLogic). `docs/diagnosis.md` lists every rule.

The classifier reads only what a run stores: the per-test outcomes (status, reason, the
runner's traceback text, whether the target was called), the candidate's code and the
executed program. What kind of failure a test had comes from its `reason`, never from the
wording of its message; the message is read only as a traceback (exception type, frames).
Optionally it uses the task (entry point, target API, reference, the code the task
supplies) and an `ApiSurface` (which module exports which name). Without a surface it uses
the standard library's, introspected once in this process. Everything here is a
deterministic function of its inputs.

This module is the public face of the classifier; each job lives in its own module:

    failure_records  the labels, KOCO categories, `Diagnosis`, `Evidence`, `TaskInfo`
    code_facts       what the candidate's code calls, imports and defines (its syntax tree)
    tracebacks       the runner's traceback text turned back into frames and an exception
    reason_rules     the labels a test outcome's reason decides by itself
    exception_rules  the labels a traceback decides (exception, raising frame, failing line)
    classifier       `classify`: whole-sample rules, then one label per failing test
"""

from __future__ import annotations

from knowbench.scoring.classifier import classify, classify_all
from knowbench.scoring.code_facts import CodeFacts, code_facts, statement_calls
from knowbench.scoring.failure_records import (
    KOCO_CATEGORIES,
    LABELS,
    PRECEDENCE,
    REPLY_LABELS,
    Diagnosis,
    Evidence,
    KocoCategory,
    Label,
    TaskInfo,
    sample_digest,
)
from knowbench.scoring.reason_rules import REASON_RULES, TRACEBACK_REASONS

__all__ = [
    "KOCO_CATEGORIES", "LABELS", "PRECEDENCE", "REASON_RULES", "REPLY_LABELS", "TRACEBACK_REASONS", "CodeFacts",
    "Diagnosis", "Evidence", "KocoCategory", "Label", "TaskInfo", "classify", "classify_all",
    "code_facts", "sample_digest", "statement_calls",
]
