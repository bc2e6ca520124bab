"""The failure classifier: one `Diagnosis` per failed function sample, with its evidence.

Whole-sample rules come first (no code, code that does not parse, a sample knowbench could
not run); otherwise each failing test is classified on its own, by its reason
(`reason_rules`) or by its traceback (`exception_rules`), and the sample takes the label
that comes first in `PRECEDENCE`. Deterministic: the same inputs give the same diagnosis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from knowbench.records import SampleResult, TestOutcome
from knowbench.scoring.code_facts import code_facts
from knowbench.scoring.exception_rules import classify_traceback
from knowbench.scoring.failure_records import (
    PRECEDENCE,
    Diagnosis,
    Evidence,
    Label,
    TaskInfo,
    sample_digest,
)
from knowbench.scoring.reason_rules import LEGACY_STATUS_RULES, REASON_RULES, TRACEBACK_REASONS
from knowbench.scoring.surface import ApiSurface, stdlib_surface
from knowbench.scoring.tracebacks import parse_traceback
from knowbench.scoring.verdicts import RuleContext, Verdict


def classify(result: SampleResult, task: TaskInfo | None = None,
             surface: ApiSurface | None = None) -> Diagnosis | None:
    """The diagnosis of one sample; None for passed samples and for choice tasks.

    `surface` adds to the standard-library surface (pass `ApiSurface()` to add nothing).
    Deterministic: the same inputs give the same diagnosis.
    """
    if result.passed or result.kind != "function":
        return None
    known = stdlib_surface().merged(surface)
    entry_point = task.entry_point if task else ""
    facts = code_facts(result.code if result.code is not None else result.completion, entry_point)
    given = frozenset(line.strip() for line in (task.given_code if task else "").splitlines()
                      if line.strip())
    context = RuleContext(result, task, known, facts, given)
    digest = sample_digest(result)

    whole = _whole_sample(context)
    if whole is not None:
        return _diagnosis(result, whole, None, digest, {})
    per_test: dict[str, tuple[Verdict, TestOutcome]] = {}
    execution = result.execution
    for outcome in execution.tests if execution else []:
        if outcome.status == "pass" or outcome.reason == "not-run":
            continue  # a test that never ran says nothing; the event that stopped it does
        per_test[outcome.id] = (_classify_test(outcome, context), outcome)
    if not per_test:
        verdict = Verdict("WrongLogic", "incorrect implementation", "no-failing-test",
                           "the sample failed but no test carries a failure message", True)
        return _diagnosis(result, verdict, None, digest, {})
    chosen_id = min(per_test, key=lambda test_id: (PRECEDENCE.index(per_test[test_id][0].label),
                                                  list(per_test).index(test_id)))
    verdict, outcome = per_test[chosen_id]
    labels = {test_id: pair[0].label for test_id, pair in per_test.items()}
    return _diagnosis(result, verdict, outcome, digest, labels)


def classify_all(results: Iterable[SampleResult], tasks: Mapping[str, TaskInfo] | None = None,
                 surface: ApiSurface | None = None) -> list[Diagnosis]:
    """Diagnoses of every failed function sample, in input order."""
    found = []
    for result in results:
        diagnosis = classify(result, (tasks or {}).get(result.task_id), surface)
        if diagnosis is not None:
            found.append(diagnosis)
    return found


def _diagnosis(result: SampleResult, verdict: Verdict, outcome: TestOutcome | None, digest: str,
               per_test: dict[str, Label]) -> Diagnosis:
    exception = None
    if outcome is not None:
        parsed = parse_traceback(outcome.message)
        if parsed.exc_type:
            exception = f"{parsed.exc_type}: {parsed.message}".strip().rstrip(":")[:300]
    evidence = Evidence(rule=verdict.rule, detail=verdict.detail,
                        test_id=outcome.id if outcome else None, exception=exception,
                        frame=verdict.frame.describe() if verdict.frame else None,
                        name=verdict.name, called=outcome.called if outcome else None)
    return Diagnosis(task_id=result.task_id, sample_idx=result.sample_idx, label=verdict.label,
                     koco=verdict.koco, evidence=evidence, ambiguous=verdict.ambiguous,
                     per_test=per_test, sample_digest=digest)


def _whole_sample(context: RuleContext) -> Verdict | None:
    """Rules that decide from the sample alone, before any test is looked at."""
    result, facts = context.result, context.facts
    assembly_error = result.extra.get("assembly_error")
    if result.finish_reason == "length":
        return Verdict("Truncated", None, "cut-off",
                        "the reply was cut off at the token limit (finish_reason 'length'); "
                        "raise max_tokens to judge its code")
    if not (result.code if result.code is not None else result.completion).strip():
        return Verdict("NoCode", None, "no-code",
                        "the reply holds no code (empty, prose only, or reasoning that never "
                        "closed), so the masked stub ran")
    if not facts.parses:
        return Verdict("WrongSyntax", "syntax error", "does-not-parse",
                        f"the candidate code does not parse: {facts.syntax_error}")
    if result.program is None or result.execution is None:
        detail = f"the code could not be put into the task: {assembly_error or 'no program'}"
        if re.match(r"the (prompt|context) ", str(assembly_error or "")):
            return Verdict("Infrastructure", None, "task-not-assemblable", detail)
        return Verdict("WrongSyntax", "syntax error", "not-spliceable", detail, True)
    # Unless a test says more precisely why it could not run (isolation-required, ...).
    specific = any(test.reason not in (None, "infrastructure", "not-run")
                   for test in result.execution.tests if test.status == "infrastructure")
    if result.status == "infrastructure" and not specific:
        return Verdict("Infrastructure", None, "runner-failed",
                        f"knowbench could not run the sample: {result.execution.note or 'see the tests'}")
    return None


def _classify_test(outcome: TestOutcome, context: RuleContext) -> Verdict:
    if outcome.reason is None:
        # Stored before outcomes carried reasons: the status still names a limit that was
        # hit; anything else is read as a test's traceback.
        legacy = LEGACY_STATUS_RULES.get(outcome.status)
        return legacy(outcome, context) if legacy else classify_traceback(outcome, context, "test")
    target = context.task.target_api if context.task else None
    if outcome.reason == "assertion" and outcome.api_calls == 0 and target:
        # the runner's target-API spy (api_check) counted no call during the test
        return Verdict("WrongAPISelection", "invalid API call", "target-api-not-called",
                       f"the runner's spy saw no call of {target} during this test", name=target)
    rule = REASON_RULES.get(outcome.reason)
    if rule is not None:
        return rule(outcome, context)
    return classify_traceback(outcome, context, TRACEBACK_REASONS.get(outcome.reason, "test"))

