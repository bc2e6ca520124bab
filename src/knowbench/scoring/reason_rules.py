"""Rules that a test outcome's `reason` decides by itself, and the reasons left to its traceback.

The runner records why each test did not pass (docs/execution.md). A limit, a runner
failure, a skipped test or interference with the verdict needs no traceback: its reason
names the label (`REASON_RULES`). An assertion or an exception is decided by the traceback,
read at the stage the reason names (`TRACEBACK_REASONS`, see `exception_rules`).
"""

from __future__ import annotations

from collections.abc import Callable

from knowbench.execution.engine import killed_by
from knowbench.records import Reason, TestOutcome
from knowbench.scoring.failure_records import Label
from knowbench.scoring.tracebacks import Stage
from knowbench.scoring.verdicts import RuleContext, Verdict


def _fixed(label: Label, rule: str, detail: str) -> Callable[[TestOutcome, RuleContext], Verdict]:
    """A verdict that the reason alone decides (none of these labels has a KOCO category)."""
    def verdict(outcome: TestOutcome, context: RuleContext) -> Verdict:
        return Verdict(label, None, rule, detail)
    return verdict


def _interference(rule: str, detail: str) -> Callable[[TestOutcome, RuleContext], Verdict]:
    """The sample interfered with the verdict itself: the candidate's fault, whatever it did."""
    def verdict(outcome: TestOutcome, context: RuleContext) -> Verdict:
        return Verdict("WrongLogic", "incorrect implementation", rule, detail)
    return verdict


def _runner_failed(outcome: TestOutcome, context: RuleContext) -> Verdict:
    return Verdict("Infrastructure", None, "runner-failed",
                    outcome.message or "knowbench could not run the sample")


def _process_ended(outcome: TestOutcome, context: RuleContext) -> Verdict:
    """The sample's process ended during the test: by itself (an exit code) or by a signal."""
    exit_code = context.result.execution.exit_code if context.result.execution else None
    signal_name = killed_by(exit_code)
    if exit_code is not None and signal_name is None:
        return Verdict("WrongLogic", "incorrect implementation", "process-exit",
                        f"the sample ended its own process (exit code {exit_code})",
                        name=f"exit code {exit_code}")
    how = signal_name or "unknown"
    return Verdict("Resource", None, "process-killed", f"the sample process died ({how})", True,
                    name=how)


def _candidate_died(outcome: TestOutcome, context: RuleContext) -> Verdict:
    # Split execution: the tests' process survived, so the candidate's own process ended
    # (exited, crashed or was killed); limits hit there come as timeout/memory instead.
    return Verdict("WrongLogic", "incorrect implementation", "candidate-died",
                    "the candidate's process ended during a call or while loading the program", True)


REASON_RULES: dict[Reason, Callable[[TestOutcome, RuleContext], Verdict]] = {
    "timeout": _fixed("Timeout", "time-limit", "the wall-clock limit was reached"),
    "cpu-time": _fixed("Timeout", "cpu-limit", "the CPU-time limit was reached"),
    "interrupted": _fixed("Timeout", "call-interrupted",
                          "the test's own timeout (its signal handler) interrupted a call of the "
                          "candidate before it answered, so its process could take no later call"),
    "memory": _fixed("Resource", "memory-limit", "the memory limit was reached"),
    "output-limit": _fixed("Resource", "output-limit", "the file-size limit was reached"),
    "process-limit": _fixed("Resource", "process-limit", "the process limit was reached"),
    "infrastructure": _runner_failed,
    "isolation-required": _fixed("Infrastructure", "isolation-required",
                                 "the run requires split isolation and this task cannot run split"),
    "cannot-cross": _fixed("Infrastructure", "cannot-cross",
                           "a value could not cross between the tests' and the candidate's "
                           "processes (a limitation of split execution, not the candidate's error)"),
    "skipped": _fixed("Infrastructure", "test-skipped",
                      "the test skipped itself (usually a missing dependency)"),
    "unsupported-fixture": _fixed("Infrastructure", "unsupported-fixture",
                                  "the test needs a pytest fixture knowbench does not provide"),
    "tampering": _interference("tampering", "the sample changed the testing machinery"),
    "forged-record": _interference("forged-results", "the sample wrote forged result records"),
    "exited-early": _process_ended,
    "candidate-died": _candidate_died,
}
"""The reasons that decide a test's label by themselves."""

TRACEBACK_REASONS: dict[Reason, Stage] = {
    "assertion": "test", "exception": "test", "test-code-failed": "spec",
    "program-failed-to-load": "load",
}
"""The reasons whose message is a traceback that decides the label, with its stage.
(`not-run`, the only other reason, is not diagnosed: see `classify`.)"""

# Outcomes stored without a reason (before reasons existed): the status alone names a limit.
LEGACY_STATUS_RULES: dict[str, Callable[[TestOutcome, RuleContext], Verdict]] = {
    "timeout": REASON_RULES["timeout"], "memory": REASON_RULES["memory"],
    "infrastructure": REASON_RULES["infrastructure"],
}

