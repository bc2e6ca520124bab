"""Failure taxonomy: why a `function` sample failed, with the evidence for it.

Every failed function sample gets exactly one label. The first six are NovelAPIBench's
classes, one per point of the API-invocation pipeline; the last three are failures of the
evaluation rather than of the code:

    WrongSyntax        the candidate is not valid Python (or holds no code)
    WrongAPISelection  a hallucinated API is called, or the target API is never used
    WrongImport        the right symbol is used, but imported from a wrong place or not at all
    WrongParam         the right callable with the wrong arguments (the call cannot bind)
    WrongShapeDtype    the right call, but a value breaks the API's contract inside its body
    WrongLogic         the calls are right and the surrounding program is wrong
    Timeout            a time limit was hit
    Resource           the memory limit was hit, or the process was killed
    Infrastructure     the evaluation itself failed: a missing test dependency, task code
                       that does not load in this environment, a test that never ran the target

Each label also carries one of KOCO-Bench's error categories (`KOCO_CATEGORIES`; None for
the last three). The mapping depends on the evidence, not only on the label: a NameError
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
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from knowbench.execution.engine import killed_by
from knowbench.records import Reason, SampleResult, TestOutcome
from knowbench.scoring.surface import ApiSurface, stdlib_surface
from knowbench.scoring.tracebacks import Frame, ParsedError, Stage, parse_traceback

Label = Literal["WrongSyntax", "WrongAPISelection", "WrongImport", "WrongParam",
                "WrongShapeDtype", "WrongLogic", "Timeout", "Resource", "Infrastructure"]

LABELS: tuple[Label, ...] = ("WrongSyntax", "WrongAPISelection", "WrongImport", "WrongParam",
                             "WrongShapeDtype", "WrongLogic", "Timeout", "Resource",
                             "Infrastructure")
"""All labels, in NovelAPIBench's pipeline order, then the evaluation failures."""

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

_BUILTIN_TYPES = frozenset({
    "NoneType", "str", "bytes", "bytearray", "int", "float", "complex", "bool", "list", "tuple",
    "dict", "set", "frozenset", "range", "memoryview", "function", "method", "generator",
    "builtin_function_or_method", "dict_keys", "dict_values", "dict_items", "map", "filter",
    "zip", "enumerate", "_io.StringIO", "_io.BytesIO", "_io.TextIOWrapper", "coroutine"})
_SIGNATURE = re.compile(
    r"unexpected keyword argument|missing \d+ required (?:positional|keyword-only) argument"
    r"|takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given"
    r"|takes no (?:keyword )?arguments|got multiple values for (?:keyword )?argument"
    r"|is an invalid keyword argument|takes exactly (?:one|\d+) arguments?"
    r"|expected (?:at most |at least )?\d+ arguments?, got \d+|required argument '.*' \(pos \d+\) not found"
    r"|got some positional-only arguments passed as keyword arguments"
    r"|takes (?:at most|at least) \d+ (?:positional )?arguments? \(\d+ given\)")
_CALLEE = re.compile(r"^(?:[\w.]+\.)?(?P<name>[A-Za-z_]\w*)\(\)")
_OPERATOR_TYPE_ERROR = re.compile(
    r"unsupported operand type|not subscriptable|is not iterable|is not callable|can only concatenate"
    r"|can't multiply sequence|unhashable type|not supported between instances|cannot unpack non-iterable"
    r"|does not support item assignment|doesn't support item deletion|object cannot be interpreted as an integer"
    r"|indices must be integers|bad operand type|has no len\(\)|can't convert|must be str, not"
    r"|object is not reversible|argument of type '.*' is not iterable")
_BUILTIN_NAMES = frozenset(dir(builtins))
# Labels that blame the candidate's use of APIs after its code parsed.
_MODEL_ERRORS = frozenset({"WrongImport", "WrongParam", "WrongShapeDtype", "WrongLogic"})
_UNPACK = re.compile(r"(?:not enough|too many) values to unpack")
_EXPECTED_EXCEPTION = re.compile(r"DID NOT RAISE|DID NOT WARN|Regex pattern did not match"
                                 r"|not raised|Pattern .* does not match")
_VALUE_ERRORS = frozenset({"ValueError", "OverflowError", "error", "Error", "UnicodeDecodeError",
                           "UnicodeEncodeError", "UnicodeError", "JSONDecodeError",
                           "InvalidOperation", "FloatingPointError", "DecimalException",
                           "OutOfBoundsDatetime", "ParserError", "DateParseError"})
_ASSERTIONS = frozenset({"AssertionError", "Failed", "AssertionFailedError"})
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})
_SYNTAX_ERRORS = frozenset({"SyntaxError", "IndentationError", "TabError"})


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


# ---------------------------------------------------------------------------- code facts


@dataclass(frozen=True)
class CodeFacts:
    """What the candidate's code does, read from its syntax tree."""

    parses: bool
    syntax_error: str | None
    calls: frozenset[str]  # dotted callee names: "f", "np.zeros", "obj.method"
    called_names: frozenset[str]  # last components of every callee
    names: frozenset[str]  # every identifier and attribute name used
    imported: Mapping[str, str]  # local name -> "module" or "module.symbol"
    defined: frozenset[str]  # functions and classes defined anywhere in the code
    stub: bool  # the target's body does nothing (pass, ..., return None, raise NotImplementedError)


def code_facts(code: str | None, entry_point: str = "") -> CodeFacts:
    """Facts about `code`; a code that does not parse gives `parses=False`."""
    text = textwrap.dedent(code or "")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError) as error:
        message = f"{getattr(error, 'msg', error)} (line {getattr(error, 'lineno', '?')})"
        return CodeFacts(False, message, frozenset(), frozenset(), frozenset(), {}, frozenset(),
                         False)
    calls, names, defined = set(), set(), set()
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            dotted = _dotted(node.func)
            if dotted:
                calls.add(dotted)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imported[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return CodeFacts(True, None, frozenset(calls), frozenset(c.rsplit(".", 1)[-1] for c in calls),
                     frozenset(names), imported, frozenset(defined), _is_stub(tree, entry_point))


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call) and parts:  # a().b(): keep ".b"
        parts.append("")
    else:
        return None if not parts else ".".join(reversed(parts))
    return ".".join(reversed(parts))


def _is_stub(tree: ast.Module, entry_point: str) -> bool:
    name = entry_point.rsplit(".", 1)[-1]
    target = next((node for node in ast.walk(tree)
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name),
                  None)
    if target is None:
        return not any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                       for node in tree.body) and not tree.body
    body = [stmt for stmt in target.body
            if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str))]
    if not body:
        return True
    if len(body) != 1:
        return False
    stmt = body[0]
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is ...:
        return True
    if isinstance(stmt, ast.Return) and (stmt.value is None or (
            isinstance(stmt.value, ast.Constant) and stmt.value.value is None)):
        return True
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        raised = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    return False


@functools.lru_cache(maxsize=64)
def _parse_program(program: str) -> ast.Module | None:
    try:
        return ast.parse(program)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _statement(program: str | None, line: int) -> ast.stmt | None:
    """The innermost statement of `program` covering `line`, or None."""
    tree = _parse_program(program) if program else None
    if tree is None:
        return None
    covering = [node for node in ast.walk(tree)
                if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno)]
    # The innermost statement spans the fewest lines; ties go to the one found last (deepest).
    return min(reversed(covering), key=lambda node: (node.end_lineno or node.lineno) - node.lineno,
               default=None)


def statement_calls(program: str | None, line: int) -> frozenset[str]:
    """The dotted callee names in the innermost statement of `program` covering `line`
    (for a compound statement, in its header only)."""
    best = _statement(program, line)
    if best is None:
        return frozenset()
    scope: list[ast.AST] = [best]
    if isinstance(best, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.If | ast.For
                  | ast.While | ast.With | ast.Try):
        scope = [child for child in ast.iter_child_nodes(best) if not isinstance(child, ast.stmt)]
    found = set()
    for root in scope:
        for node in ast.walk(root):
            if isinstance(node, ast.Call):
                dotted = _dotted(node.func)
                if dotted:
                    found.add(dotted)
    return frozenset(found)


# ---------------------------------------------------------------------------- classification


@dataclass(frozen=True)
class _Verdict:
    label: Label
    koco: KocoCategory | None
    rule: str
    detail: str
    ambiguous: bool = False
    frame: Frame | None = None
    name: str | None = None


@dataclass(frozen=True)
class _Context:
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
    context = _Context(result, task, known, facts, given)
    digest = sample_digest(result)

    whole = _whole_sample(context)
    if whole is not None:
        return _diagnosis(result, whole, None, digest, {})
    per_test: dict[str, tuple[_Verdict, TestOutcome]] = {}
    execution = result.execution
    for outcome in execution.tests if execution else []:
        if outcome.status == "pass" or outcome.reason == "not-run":
            continue  # a test that never ran says nothing; the event that stopped it does
        per_test[outcome.id] = (_classify_test(outcome, context), outcome)
    if not per_test:
        verdict = _Verdict("WrongLogic", "incorrect implementation", "no-failing-test",
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


def _diagnosis(result: SampleResult, verdict: _Verdict, outcome: TestOutcome | None, digest: str,
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


def _whole_sample(context: _Context) -> _Verdict | None:
    """Rules that decide from the sample alone, before any test is looked at."""
    result, facts = context.result, context.facts
    assembly_error = result.extra.get("assembly_error")
    if not (result.code or "").strip() and not result.completion.strip():
        return _Verdict("WrongSyntax", "syntax error", "no-code",
                        "the reply holds no code, so the masked stub ran")
    if not facts.parses:
        return _Verdict("WrongSyntax", "syntax error", "does-not-parse",
                        f"the candidate code does not parse: {facts.syntax_error}")
    if result.program is None or result.execution is None:
        detail = f"the code could not be put into the task: {assembly_error or 'no program'}"
        if re.match(r"the (prompt|context) ", str(assembly_error or "")):
            return _Verdict("Infrastructure", None, "task-not-assemblable", detail)
        return _Verdict("WrongSyntax", "syntax error", "not-spliceable", detail, True)
    # Unless a test says more precisely why it could not run (isolation-required, ...).
    specific = any(test.reason not in (None, "infrastructure", "not-run")
                   for test in result.execution.tests if test.status == "infrastructure")
    if result.status == "infrastructure" and not specific:
        return _Verdict("Infrastructure", None, "runner-failed",
                        f"knowbench could not run the sample: {result.execution.note or 'see the tests'}")
    return None


def _classify_test(outcome: TestOutcome, context: _Context) -> _Verdict:
    if outcome.reason is None:
        # Stored before outcomes carried reasons: the status still names a limit that was
        # hit; anything else is read as a test's traceback.
        legacy = _STATUS_RULES.get(outcome.status)
        return legacy(outcome, context) if legacy else _classify_traceback(outcome, context, "test")
    rule = REASON_RULES.get(outcome.reason)
    if rule is not None:
        return rule(outcome, context)
    return _classify_traceback(outcome, context, TRACEBACK_REASONS.get(outcome.reason, "test"))


def _classify_traceback(outcome: TestOutcome, context: _Context, stage: Stage) -> _Verdict:
    """A failure whose message is the runner's traceback: the exception decides."""
    message = outcome.message
    parsed = parse_traceback(message, stage)
    if parsed.exc_type is None:
        return _Verdict("WrongLogic", "incorrect implementation", "unreadable-failure",
                        f"the failure message holds no exception: {message[:120]!r}", True)
    verdict = _classify_exception(parsed, outcome, context)
    if verdict.label in _MODEL_ERRORS and verdict.rule != "stub-body":
        # NovelAPIBench's fast path: a target API the candidate never names was never invoked,
        # whatever went wrong instead; the KOCO category still says what was observed.
        unused = _target_api_unused(context)
        if unused:
            return _Verdict("WrongAPISelection", verdict.koco, "target-api-unused",
                            f"the reference uses {unused}; the candidate never does "
                            f"(it failed with: {verdict.detail})"[:300], frame=verdict.frame,
                            name=unused)
    return verdict


def _fixed(label: Label, rule: str, detail: str) -> Callable[[TestOutcome, _Context], _Verdict]:
    """A verdict that the reason alone decides (none of these labels has a KOCO category)."""
    def verdict(outcome: TestOutcome, context: _Context) -> _Verdict:
        return _Verdict(label, None, rule, detail)
    return verdict


def _interference(rule: str, detail: str) -> Callable[[TestOutcome, _Context], _Verdict]:
    """The sample interfered with the verdict itself: the candidate's fault, whatever it did."""
    def verdict(outcome: TestOutcome, context: _Context) -> _Verdict:
        return _Verdict("WrongLogic", "incorrect implementation", rule, detail)
    return verdict


def _runner_failed(outcome: TestOutcome, context: _Context) -> _Verdict:
    return _Verdict("Infrastructure", None, "runner-failed",
                    outcome.message or "knowbench could not run the sample")


def _process_ended(outcome: TestOutcome, context: _Context) -> _Verdict:
    """The sample's process ended during the test: by itself (an exit code) or by a signal."""
    exit_code = context.result.execution.exit_code if context.result.execution else None
    signal_name = killed_by(exit_code)
    if exit_code is not None and signal_name is None:
        return _Verdict("WrongLogic", "incorrect implementation", "process-exit",
                        f"the sample ended its own process (exit code {exit_code})",
                        name=f"exit code {exit_code}")
    how = signal_name or "unknown"
    return _Verdict("Resource", None, "process-killed", f"the sample process died ({how})", True,
                    name=how)


def _candidate_died(outcome: TestOutcome, context: _Context) -> _Verdict:
    # Split execution: the tests' process survived, so the candidate's own process ended
    # (exited, crashed or was killed); limits hit there come as timeout/memory instead.
    return _Verdict("WrongLogic", "incorrect implementation", "candidate-died",
                    "the candidate's process ended during a call", True)


REASON_RULES: dict[Reason, Callable[[TestOutcome, _Context], _Verdict]] = {
    "timeout": _fixed("Timeout", "time-limit", "the wall-clock limit was reached"),
    "cpu-time": _fixed("Timeout", "cpu-limit", "the CPU-time limit was reached"),
    "memory": _fixed("Resource", "memory-limit", "the memory limit was reached"),
    "output-limit": _fixed("Resource", "output-limit", "the file-size limit was reached"),
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
_STATUS_RULES: dict[str, Callable[[TestOutcome, _Context], _Verdict]] = {
    "timeout": REASON_RULES["timeout"], "memory": REASON_RULES["memory"],
    "infrastructure": REASON_RULES["infrastructure"],
}


def _classify_exception(parsed: ParsedError, outcome: TestOutcome, context: _Context) -> _Verdict:
    kind = parsed.short_type or ""
    raised = parsed.raise_frame
    owner = raised.owner if raised else "runner"
    candidate_frame = parsed.last("candidate")

    if kind in _SYNTAX_ERRORS and (owner in ("candidate", "runner") or parsed.stage == "load"):
        return _Verdict("WrongSyntax", "syntax error", "syntax-error",
                        f"Python rejects the program: {parsed.message}", frame=raised)
    if parsed.stage == "load" and raised is not None and raised.owner == "candidate" \
            and raised.function == "<module>" and raised.source \
            and raised.source.strip() in context.given_lines:
        return _Verdict("Infrastructure", None, "given-code-fails",
                        "a line the task itself supplies fails while the program loads "
                        "(the task does not run in this environment)", frame=raised)
    if owner == "candidate" and raised is not None and raised.source.startswith("raise ") \
            and kind not in _ASSERTIONS:
        return _candidate_raised(kind, parsed, raised)
    if kind in _IMPORT_ERRORS:
        return _import_error(parsed, owner, raised, context)
    if kind == "NameError":
        return _name_error(parsed, owner, raised, context)
    if kind == "UnboundLocalError":
        return _Verdict("WrongLogic", "undefined variable", "unbound-local",
                        f"a local variable is used before it is assigned: {parsed.message}",
                        frame=raised)
    if kind == "AttributeError":
        return _attribute_error(parsed, owner, raised, candidate_frame, context)
    if kind == "TypeError":
        return _type_error(parsed, owner, raised, candidate_frame, context)
    if kind in _ASSERTIONS or (owner in ("test", "harness") and kind == "AssertionError"):
        return _assertion(parsed, outcome, owner, raised, context)
    if kind in ("KeyError", "IndexError"):
        return _access_error(parsed, owner, raised)
    if kind in _VALUE_ERRORS or (kind.endswith("Error") and owner == "library"):
        return _value_error(parsed, owner, raised, context)
    if kind == "RecursionError":
        return _Verdict("WrongLogic", "incorrect implementation", "recursion",
                        "the code recursed without end", frame=raised)
    if kind == "ZeroDivisionError":
        return _Verdict("WrongLogic", "data constraint violation", "zero-division",
                        "the code divided by zero", frame=raised)
    if kind == "SystemExit":
        if owner == "library":
            return _Verdict("WrongShapeDtype", "data constraint violation", "library-exited",
                            "a library called by the code gave up and exited", True, raised)
        return _Verdict("WrongLogic", "incorrect implementation", "process-exit",
                        "the code exits instead of returning", frame=raised)
    return _fallback(parsed, owner, raised)


def _candidate_raised(kind: str, parsed: ParsedError, raised: Frame) -> _Verdict:
    if kind == "NotImplementedError":
        return _Verdict("WrongLogic", "incorrect implementation", "stub-body",
                        "the candidate raises NotImplementedError", frame=raised)
    return _Verdict("WrongLogic", "incorrect implementation", "candidate-raised",
                    f"the candidate's own check rejects the test's input ({kind})",
                    frame=raised)


def _import_error(parsed: ParsedError, owner: str, raised: Frame | None,
                  context: _Context) -> _Verdict:
    missing_module = re.search(r"No module named '([^']+)'", parsed.message)
    missing_name = re.search(r"cannot import name '([^']+)' from '([^']+)'", parsed.message)
    if owner in ("test", "harness"):
        return _Verdict("Infrastructure", None, "test-dependency-missing",
                        f"the test code cannot import what it needs: {parsed.message}",
                        frame=raised, name=missing_module[1] if missing_module else None)
    if owner == "library":
        return _Verdict("Infrastructure", None, "library-dependency-missing",
                        f"a library used by the code lacks an optional dependency: {parsed.message}",
                        True, raised, missing_module[1] if missing_module else None)
    if missing_name:
        name, module = missing_name[1], missing_name[2]
        elsewhere = [m for m in context.surface.defining(name) if m != module]
        if elsewhere:
            return _Verdict("WrongImport", "invalid API call", "wrong-module-path",
                            f"'{name}' is not in {module}, but {', '.join(elsewhere[:3])} exports it",
                            frame=raised, name=name)
        if context.surface.knows(module):
            return _Verdict("WrongAPISelection", "invalid API call", "hallucinated-import",
                            f"no known module exports '{name}' (imported from {module})",
                            frame=raised, name=name)
        return _Verdict("WrongImport", "invalid API call", "bad-import",
                        f"'{name}' cannot be imported from {module}", True, raised, name)
    name = missing_module[1] if missing_module else None
    return _Verdict("WrongImport", "invalid API call", "bad-import",
                    f"the code imports a module that is not available: {parsed.message}",
                    frame=raised, name=name)


def _name_error(parsed: ParsedError, owner: str, raised: Frame | None,
                context: _Context) -> _Verdict:
    found = re.search(r"name '([^']+)' is not defined", parsed.message)
    name = found[1] if found else None
    if owner in ("test", "harness"):
        return _Verdict("WrongLogic", "undefined variable", "missing-definition",
                        f"the tests use '{name}', which the program does not define", True,
                        raised, name)
    if name is None:
        return _Verdict("WrongLogic", "undefined variable", "undefined-name", parsed.message, True,
                        raised)
    modules = _modules_exporting(name, context)
    if modules:
        return _Verdict("WrongImport", "undefined variable", "missing-import",
                        f"'{name}' is exported by {', '.join(modules[:3])} but never imported",
                        frame=raised, name=name)
    if name in context.facts.called_names and name not in context.facts.defined:
        return _Verdict("WrongAPISelection", "invalid API call", "undefined-function",
                        f"the code calls '{name}', which exists nowhere", frame=raised, name=name)
    return _Verdict("WrongLogic", "undefined variable", "undefined-name",
                    f"'{name}' is used but never assigned", frame=raised, name=name)


def _modules_exporting(name: str, context: _Context) -> list[str]:
    """Modules from which `name` could have been imported (the module itself for a module)."""
    if name in dir(builtins):
        return []
    modules = []
    target = context.task.target_api if context.task else None
    if target and target.rsplit(".", 1)[-1] == name:
        modules.append(target.rsplit(".", 1)[0])
    if context.surface.knows(name):
        modules.append(name)
    modules.extend(context.surface.defining(name))
    return sorted(set(modules), key=modules.index)


def _attribute_error(parsed: ParsedError, owner: str, raised: Frame | None,
                     candidate_frame: Frame | None, context: _Context) -> _Verdict:
    module_attr = re.search(r"module '([^']+)' has no attribute '([^']+)'", parsed.message)
    if module_attr:
        module, name = module_attr[1], module_attr[2]
        top = module.split(".")[0]
        elsewhere = [m for m in context.surface.defining(name) + context.surface.members_defining(name)
                     if m != module]
        same_package = [m for m in elsewhere if m.split(".")[0] == top]
        if same_package or elsewhere:
            where = same_package or elsewhere
            return _Verdict("WrongImport", "invalid API call", "wrong-module-path",
                            f"'{name}' is not in {module}, but {', '.join(where[:3])} has it",
                            frame=raised, name=f"{module}.{name}")
        return _Verdict("WrongAPISelection", "invalid API call", "missing-module-attribute",
                        f"{module} has no '{name}': a hallucinated API", frame=raised,
                        name=f"{module}.{name}")
    object_attr = re.search(r"(?:'([^']+)' object|type object '([^']+)') has no attribute '([^']+)'",
                            parsed.message)
    type_name = (object_attr[1] or object_attr[2]) if object_attr else "?"
    name = object_attr[3] if object_attr else None
    if owner == "library":
        return _Verdict("WrongShapeDtype", "attribute/key access error", "library-rejected-value",
                        f"the library expected a different kind of object (a '{type_name}' has "
                        f"no '{name}')", True, raised, name)
    if owner in ("test", "harness"):
        return _Verdict("WrongLogic", "attribute/key access error", "wrong-return-value",
                        f"the tests expected another kind of result (a '{type_name}' has no "
                        f"'{name}')", frame=raised, name=name)
    if type_name in _BUILTIN_TYPES:
        return _Verdict("WrongLogic", "attribute/key access error", "attribute-on-builtin",
                        f"the code treats a '{type_name}' as something else ('{name}')",
                        frame=raised, name=name)
    if type_name in context.facts.defined:
        return _Verdict("WrongLogic", "attribute/key access error", "attribute-on-own-class",
                        f"the code's own class '{type_name}' has no '{name}'", True, raised, name)
    line_calls = statement_calls(context.result.program, raised.line) if raised else frozenset()
    if name and any(call.rsplit(".", 1)[-1] == name and "." in call for call in line_calls):
        return _Verdict("WrongAPISelection", "invalid API call", "missing-method",
                        f"'{type_name}' has no method '{name}': a hallucinated API", frame=raised,
                        name=f"{type_name}.{name}")
    return _Verdict("WrongAPISelection", "attribute/key access error", "missing-attribute",
                    f"'{type_name}' has no attribute '{name}'", True, raised, f"{type_name}.{name}")


def _type_error(parsed: ParsedError, owner: str, raised: Frame | None,
                candidate_frame: Frame | None, context: _Context) -> _Verdict:
    if _SIGNATURE.search(parsed.message):
        callee_match = _CALLEE.match(parsed.message)
        callee = callee_match["name"] if callee_match else None
        if callee == "__init__":
            owner_class = re.match(r"^(?:[\w.]+\.)?(\w+)\.__init__", parsed.message)
            callee = owner_class[1] if owner_class else callee
        if owner in ("test", "harness"):
            if callee is None or callee == context.entry_name or callee in context.facts.defined:
                return _Verdict("WrongParam", "invalid API arguments", "target-signature",
                                "the tests cannot call the candidate with the task's signature: "
                                f"{parsed.message}", frame=raised, name=callee)
            return _Verdict("WrongLogic", "type error", "wrong-return-value",
                            f"the tests cannot use what the candidate returned: {parsed.message}",
                            True, raised, callee)
        if callee and callee in context.facts.defined and callee != context.entry_name:
            return _Verdict("WrongLogic", "type error", "helper-signature",
                            f"the code calls its own helper '{callee}' with the wrong arguments",
                            frame=raised, name=callee)
        return _Verdict("WrongParam", "invalid API arguments", "call-signature",
                        f"the call's arguments do not fit the API: {parsed.message}",
                        frame=raised, name=callee)
    if owner == "library":
        return _Verdict("WrongShapeDtype", "type error", "library-type-contract",
                        f"the library rejected a value of the wrong type: {parsed.message}",
                        frame=raised, name=_callee_name(candidate_frame, context))
    if owner in ("test", "harness"):
        return _Verdict("WrongLogic", "type error", "wrong-return-value",
                        f"the tests cannot use the returned value: {parsed.message}", frame=raised)
    if _OPERATOR_TYPE_ERROR.search(parsed.message) and not _raised_inside_call(parsed, raised, context):
        return _Verdict("WrongLogic", "type error", "operand-type",
                        f"an operation got a value of the wrong type: {parsed.message}",
                        frame=raised)
    if _calls_foreign(raised, context):
        return _Verdict("WrongShapeDtype", "type error", "builtin-type-contract",
                        f"a called API rejected a value of the wrong type: {parsed.message}",
                        True, raised, _callee_name(raised, context))
    return _Verdict("WrongLogic", "type error", "type-error", parsed.message, True, raised)


def _assertion(parsed: ParsedError, outcome: TestOutcome, owner: str, raised: Frame | None,
               context: _Context) -> _Verdict:
    if owner == "candidate":
        return _Verdict("WrongLogic", "incorrect implementation", "candidate-assert",
                        "an assert in the candidate's own code failed", frame=raised)
    if outcome.called is False:
        return _Verdict("Infrastructure", None, "target-not-called",
                        "the test failed without running the candidate's code", True, raised)
    if context.facts.stub:
        return _Verdict("WrongLogic", "incorrect implementation", "stub-body",
                        "the candidate's body does nothing", frame=raised)
    if _EXPECTED_EXCEPTION.search(parsed.message):
        return _Verdict("WrongLogic", "incorrect implementation", "expected-exception",
                        "the code does not raise or warn as the tests require", frame=raised)
    return _Verdict("WrongLogic", "incorrect implementation", "wrong-output",
                    "the code runs but its result is wrong", True, raised)


def _target_api_unused(context: _Context) -> str | None:
    target = context.task.target_api if context.task else None
    if not target:
        return None
    name = target.rsplit(".", 1)[-1]
    reference = code_facts(context.task.reference if context.task else "")
    if name not in reference.names:
        return None
    return None if name in context.facts.names else target


def _access_error(parsed: ParsedError, owner: str, raised: Frame | None) -> _Verdict:
    if owner == "library":
        return _Verdict("WrongShapeDtype", "attribute/key access error", "library-value-contract",
                        f"the library did not find what it expects in the data: {parsed.message}",
                        frame=raised)
    if owner in ("test", "harness"):
        return _Verdict("WrongLogic", "attribute/key access error", "wrong-return-value",
                        "the tests cannot index the returned value", frame=raised)
    return _Verdict("WrongLogic", "attribute/key access error", "index-or-key",
                    f"the code indexes past its data ({parsed.exc_type}: {parsed.message})"[:200],
                    frame=raised)


def _value_error(parsed: ParsedError, owner: str, raised: Frame | None,
                 context: _Context) -> _Verdict:
    if owner == "library":
        return _Verdict("WrongShapeDtype", "data constraint violation", "library-value-contract",
                        f"the library rejected a value: {parsed.message}"[:200], frame=raised)
    if owner in ("test", "harness"):
        return _Verdict("WrongLogic", "data constraint violation", "wrong-return-value",
                        f"the tests cannot use the returned value: {parsed.message}"[:200],
                        frame=raised)
    if _UNPACK.search(parsed.message):
        return _Verdict("WrongLogic", "data constraint violation", "unpacking",
                        f"the code's data has another structure: {parsed.message}", frame=raised)
    if _calls_foreign(raised, context):
        return _Verdict("WrongShapeDtype", "data constraint violation", "builtin-value-contract",
                        f"a called API rejected a value: {parsed.message}"[:200], True, raised,
                        _callee_name(raised, context))
    return _Verdict("WrongLogic", "data constraint violation", "value-error",
                    parsed.message[:200], True, raised)


def _fallback(parsed: ParsedError, owner: str, raised: Frame | None) -> _Verdict:
    if owner == "library":
        return _Verdict("WrongShapeDtype", "data constraint violation", "library-raised",
                        f"a library called by the code raised {parsed.exc_type}", True, raised)
    return _Verdict("WrongLogic", "incorrect implementation", "other-exception",
                    f"{parsed.exc_type}: {parsed.message}"[:200], True, raised)


def _foreign_calls(frame: Frame | None, context: _Context) -> list[str]:
    """The calls of the failing statement to APIs: not the candidate's own functions and not
    bare builtins (`int`, `len`, ...), whose misuse is the program's logic."""
    if frame is None:
        return []
    calls = statement_calls(context.result.program, frame.line)
    return sorted(call for call in calls
                  if call.split(".")[0] not in context.facts.defined
                  and call.rsplit(".", 1)[-1] not in context.facts.defined
                  and not ("." not in call and call in _BUILTIN_NAMES))


def _calls_foreign(frame: Frame | None, context: _Context) -> bool:
    return bool(_foreign_calls(frame, context))


def _callee_name(frame: Frame | None, context: _Context) -> str | None:
    calls = _foreign_calls(frame, context)
    return calls[0] if calls else None


# Which syntax can raise an operator-style TypeError by itself; when the failing statement
# has none of it but calls an API, the API raised it (e.g. heappush comparing dicts).
_OPERATOR_SYNTAX: tuple[tuple[str, tuple[type[ast.AST], ...]], ...] = (
    ("not supported between", (ast.Compare,)),
    ("unsupported operand|can only concatenate|can't multiply|bad operand", (ast.BinOp, ast.UnaryOp,
                                                                            ast.AugAssign)),
    ("not subscriptable|indices must be|item assignment|item deletion", (ast.Subscript,)),
    ("unhashable", (ast.Subscript, ast.Dict, ast.Set, ast.DictComp, ast.SetComp)),
    ("not iterable|cannot unpack", (ast.For, ast.comprehension, ast.Starred, ast.Tuple, ast.List,
                                    ast.Compare)),
    ("is not callable", (ast.Call,)),
)


def _raised_inside_call(parsed: ParsedError, frame: Frame | None, context: _Context) -> bool:
    """Whether an operator-style TypeError came from inside a called API rather than from
    the failing statement's own operators."""
    if frame is None or not _calls_foreign(frame, context):
        return False
    node = _statement(context.result.program, frame.line)
    if node is None:
        return False
    for pattern, syntax in _OPERATOR_SYNTAX:
        if re.search(pattern, parsed.message):
            return not any(isinstance(child, syntax) for child in ast.walk(node))
    return False
