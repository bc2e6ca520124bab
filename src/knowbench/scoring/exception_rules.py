"""Rules that read a failing test's traceback: the exception, where it was raised, and the code.

The label depends on the exception type, on whose code raised it (the candidate, the tests,
the testing machinery or a library, see `tracebacks.frame_owner`), on the statement of the
program that failed (`code_facts`) and on the API surface (which module exports a name).
docs/diagnosis.md lists every rule by its id.
"""

from __future__ import annotations

import ast
import builtins
import re

from knowbench.records import TestOutcome
from knowbench.scoring.code_facts import code_facts, innermost_statement, statement_calls
from knowbench.scoring.tracebacks import Frame, ParsedError, Stage, parse_traceback
from knowbench.scoring.verdicts import RuleContext, Verdict

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


def classify_traceback(outcome: TestOutcome, context: RuleContext, stage: Stage) -> Verdict:
    """A failure whose message is the runner's traceback: the exception decides."""
    message = outcome.message
    parsed = parse_traceback(message, stage)
    if parsed.exc_type is None:
        return Verdict("WrongLogic", "incorrect implementation", "unreadable-failure",
                        f"the failure message holds no exception: {message[:120]!r}", True)
    verdict = _classify_exception(parsed, outcome, context)
    if verdict.label in _MODEL_ERRORS and verdict.rule != "stub-body":
        # NovelAPIBench's fast path: a target API the candidate never names was never invoked,
        # whatever went wrong instead; the KOCO category still says what was observed.
        unused = _target_api_unused(context)
        if unused:
            return Verdict("WrongAPISelection", verdict.koco, "target-api-unused",
                            f"the reference uses {unused}; the candidate never does "
                            f"(it failed with: {verdict.detail})"[:300], frame=verdict.frame,
                            name=unused)
    return verdict



def _classify_exception(parsed: ParsedError, outcome: TestOutcome, context: RuleContext) -> Verdict:
    kind = parsed.short_type or ""
    raised = parsed.raise_frame
    owner = raised.owner if raised else "runner"
    candidate_frame = parsed.last("candidate")

    if kind in _SYNTAX_ERRORS and (owner in ("candidate", "runner") or parsed.stage == "load"):
        return Verdict("WrongSyntax", "syntax error", "syntax-error",
                        f"Python rejects the program: {parsed.message}", frame=raised)
    if parsed.stage == "load" and raised is not None and raised.owner == "candidate" \
            and raised.function == "<module>" and raised.source \
            and raised.source.strip() in context.given_lines:
        return Verdict("Infrastructure", None, "given-code-fails",
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
        return Verdict("WrongLogic", "undefined variable", "unbound-local",
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
        return Verdict("WrongLogic", "incorrect implementation", "recursion",
                        "the code recursed without end", frame=raised)
    if kind == "ZeroDivisionError":
        return Verdict("WrongLogic", "data constraint violation", "zero-division",
                        "the code divided by zero", frame=raised)
    if kind == "SystemExit":
        if owner == "library":
            return Verdict("WrongShapeDtype", "data constraint violation", "library-exited",
                            "a library called by the code gave up and exited", True, raised)
        return Verdict("WrongLogic", "incorrect implementation", "process-exit",
                        "the code exits instead of returning", frame=raised)
    return _fallback(parsed, owner, raised)


def _candidate_raised(kind: str, parsed: ParsedError, raised: Frame) -> Verdict:
    if kind == "NotImplementedError":
        return Verdict("WrongLogic", "incorrect implementation", "stub-body",
                        "the candidate raises NotImplementedError", frame=raised)
    return Verdict("WrongLogic", "incorrect implementation", "candidate-raised",
                    f"the candidate's own check rejects the test's input ({kind})",
                    frame=raised)


def _import_error(parsed: ParsedError, owner: str, raised: Frame | None,
                  context: RuleContext) -> Verdict:
    missing_module = re.search(r"No module named '([^']+)'", parsed.message)
    missing_name = re.search(r"cannot import name '([^']+)' from '([^']+)'", parsed.message)
    if owner in ("test", "harness"):
        return Verdict("Infrastructure", None, "test-dependency-missing",
                        f"the test code cannot import what it needs: {parsed.message}",
                        frame=raised, name=missing_module[1] if missing_module else None)
    if owner == "library":
        return Verdict("Infrastructure", None, "library-dependency-missing",
                        f"a library used by the code lacks an optional dependency: {parsed.message}",
                        True, raised, missing_module[1] if missing_module else None)
    if missing_name:
        name, module = missing_name[1], missing_name[2]
        elsewhere = [m for m in context.surface.defining(name) if m != module]
        if elsewhere:
            return Verdict("WrongImport", "invalid API call", "wrong-module-path",
                            f"'{name}' is not in {module}, but {', '.join(elsewhere[:3])} exports it",
                            frame=raised, name=name)
        if context.surface.knows(module):
            return Verdict("WrongAPISelection", "invalid API call", "hallucinated-import",
                            f"no known module exports '{name}' (imported from {module})",
                            frame=raised, name=name)
        return Verdict("WrongImport", "invalid API call", "bad-import",
                        f"'{name}' cannot be imported from {module}", True, raised, name)
    name = missing_module[1] if missing_module else None
    return Verdict("WrongImport", "invalid API call", "bad-import",
                    f"the code imports a module that is not available: {parsed.message}",
                    frame=raised, name=name)


def _name_error(parsed: ParsedError, owner: str, raised: Frame | None,
                context: RuleContext) -> Verdict:
    found = re.search(r"name '([^']+)' is not defined", parsed.message)
    name = found[1] if found else None
    if owner in ("test", "harness"):
        return Verdict("WrongLogic", "undefined variable", "missing-definition",
                        f"the tests use '{name}', which the program does not define", True,
                        raised, name)
    if name is None:
        return Verdict("WrongLogic", "undefined variable", "undefined-name", parsed.message, True,
                        raised)
    modules = _modules_exporting(name, context)
    if modules:
        return Verdict("WrongImport", "undefined variable", "missing-import",
                        f"'{name}' is exported by {', '.join(modules[:3])} but never imported",
                        frame=raised, name=name)
    if name in context.facts.called_names and name not in context.facts.defined:
        return Verdict("WrongAPISelection", "invalid API call", "undefined-function",
                        f"the code calls '{name}', which exists nowhere", frame=raised, name=name)
    return Verdict("WrongLogic", "undefined variable", "undefined-name",
                    f"'{name}' is used but never assigned", frame=raised, name=name)


def _modules_exporting(name: str, context: RuleContext) -> list[str]:
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
                     candidate_frame: Frame | None, context: RuleContext) -> Verdict:
    module_attr = re.search(r"module '([^']+)' has no attribute '([^']+)'", parsed.message)
    if module_attr:
        module, name = module_attr[1], module_attr[2]
        top = module.split(".")[0]
        elsewhere = [m for m in context.surface.defining(name) + context.surface.members_defining(name)
                     if m != module]
        same_package = [m for m in elsewhere if m.split(".")[0] == top]
        if same_package or elsewhere:
            where = same_package or elsewhere
            return Verdict("WrongImport", "invalid API call", "wrong-module-path",
                            f"'{name}' is not in {module}, but {', '.join(where[:3])} has it",
                            frame=raised, name=f"{module}.{name}")
        return Verdict("WrongAPISelection", "invalid API call", "missing-module-attribute",
                        f"{module} has no '{name}': a hallucinated API", frame=raised,
                        name=f"{module}.{name}")
    object_attr = re.search(r"(?:'([^']+)' object|type object '([^']+)') has no attribute '([^']+)'",
                            parsed.message)
    type_name = (object_attr[1] or object_attr[2]) if object_attr else "?"
    name = object_attr[3] if object_attr else None
    if owner == "library":
        return Verdict("WrongShapeDtype", "attribute/key access error", "library-rejected-value",
                        f"the library expected a different kind of object (a '{type_name}' has "
                        f"no '{name}')", True, raised, name)
    if owner in ("test", "harness"):
        return Verdict("WrongLogic", "attribute/key access error", "wrong-return-value",
                        f"the tests expected another kind of result (a '{type_name}' has no "
                        f"'{name}')", frame=raised, name=name)
    if type_name in _BUILTIN_TYPES:
        return Verdict("WrongLogic", "attribute/key access error", "attribute-on-builtin",
                        f"the code treats a '{type_name}' as something else ('{name}')",
                        frame=raised, name=name)
    if type_name in context.facts.defined:
        return Verdict("WrongLogic", "attribute/key access error", "attribute-on-own-class",
                        f"the code's own class '{type_name}' has no '{name}'", True, raised, name)
    line_calls = statement_calls(context.result.program, raised.line) if raised else frozenset()
    if name and any(call.rsplit(".", 1)[-1] == name and "." in call for call in line_calls):
        return Verdict("WrongAPISelection", "invalid API call", "missing-method",
                        f"'{type_name}' has no method '{name}': a hallucinated API", frame=raised,
                        name=f"{type_name}.{name}")
    return Verdict("WrongAPISelection", "attribute/key access error", "missing-attribute",
                    f"'{type_name}' has no attribute '{name}'", True, raised, f"{type_name}.{name}")


def _type_error(parsed: ParsedError, owner: str, raised: Frame | None,
                candidate_frame: Frame | None, context: RuleContext) -> Verdict:
    if _SIGNATURE.search(parsed.message):
        callee_match = _CALLEE.match(parsed.message)
        callee = callee_match["name"] if callee_match else None
        if callee == "__init__":
            owner_class = re.match(r"^(?:[\w.]+\.)?(\w+)\.__init__", parsed.message)
            callee = owner_class[1] if owner_class else callee
        if owner in ("test", "harness"):
            if callee is None or callee == context.entry_name or callee in context.facts.defined:
                return Verdict("WrongParam", "invalid API arguments", "target-signature",
                                "the tests cannot call the candidate with the task's signature: "
                                f"{parsed.message}", frame=raised, name=callee)
            return Verdict("WrongLogic", "type error", "wrong-return-value",
                            f"the tests cannot use what the candidate returned: {parsed.message}",
                            True, raised, callee)
        if callee and callee in context.facts.defined and callee != context.entry_name:
            return Verdict("WrongLogic", "type error", "helper-signature",
                            f"the code calls its own helper '{callee}' with the wrong arguments",
                            frame=raised, name=callee)
        return Verdict("WrongParam", "invalid API arguments", "call-signature",
                        f"the call's arguments do not fit the API: {parsed.message}",
                        frame=raised, name=callee)
    if owner == "library":
        return Verdict("WrongShapeDtype", "type error", "library-type-contract",
                        f"the library rejected a value of the wrong type: {parsed.message}",
                        frame=raised, name=_callee_name(candidate_frame, context))
    if owner in ("test", "harness"):
        return Verdict("WrongLogic", "type error", "wrong-return-value",
                        f"the tests cannot use the returned value: {parsed.message}", frame=raised)
    if _OPERATOR_TYPE_ERROR.search(parsed.message) and not _raised_inside_call(parsed, raised, context):
        return Verdict("WrongLogic", "type error", "operand-type",
                        f"an operation got a value of the wrong type: {parsed.message}",
                        frame=raised)
    if _calls_foreign(raised, context):
        return Verdict("WrongShapeDtype", "type error", "builtin-type-contract",
                        f"a called API rejected a value of the wrong type: {parsed.message}",
                        True, raised, _callee_name(raised, context))
    return Verdict("WrongLogic", "type error", "type-error", parsed.message, True, raised)


def _assertion(parsed: ParsedError, outcome: TestOutcome, owner: str, raised: Frame | None,
               context: RuleContext) -> Verdict:
    if owner == "candidate":
        return Verdict("WrongLogic", "incorrect implementation", "candidate-assert",
                        "an assert in the candidate's own code failed", frame=raised)
    if outcome.called is False:
        return Verdict("Infrastructure", None, "target-not-called",
                        "the test failed without running the candidate's code", True, raised)
    if context.facts.stub:
        return Verdict("WrongLogic", "incorrect implementation", "stub-body",
                        "the candidate's body does nothing", frame=raised)
    if _EXPECTED_EXCEPTION.search(parsed.message):
        return Verdict("WrongLogic", "incorrect implementation", "expected-exception",
                        "the code does not raise or warn as the tests require", frame=raised)
    return Verdict("WrongLogic", "incorrect implementation", "wrong-output",
                    "the code runs but its result is wrong", True, raised)


def _target_api_unused(context: RuleContext) -> str | None:
    target = context.task.target_api if context.task else None
    if not target:
        return None
    name = target.rsplit(".", 1)[-1]
    reference = code_facts(context.task.reference if context.task else "")
    if name not in reference.names:
        return None
    return None if name in context.facts.names else target


def _access_error(parsed: ParsedError, owner: str, raised: Frame | None) -> Verdict:
    if owner == "library":
        return Verdict("WrongShapeDtype", "attribute/key access error", "library-value-contract",
                        f"the library did not find what it expects in the data: {parsed.message}",
                        frame=raised)
    if owner in ("test", "harness"):
        return Verdict("WrongLogic", "attribute/key access error", "wrong-return-value",
                        "the tests cannot index the returned value", frame=raised)
    return Verdict("WrongLogic", "attribute/key access error", "index-or-key",
                    f"the code indexes past its data ({parsed.exc_type}: {parsed.message})"[:200],
                    frame=raised)


def _value_error(parsed: ParsedError, owner: str, raised: Frame | None,
                 context: RuleContext) -> Verdict:
    if owner == "library":
        return Verdict("WrongShapeDtype", "data constraint violation", "library-value-contract",
                        f"the library rejected a value: {parsed.message}"[:200], frame=raised)
    if owner in ("test", "harness"):
        return Verdict("WrongLogic", "data constraint violation", "wrong-return-value",
                        f"the tests cannot use the returned value: {parsed.message}"[:200],
                        frame=raised)
    if _UNPACK.search(parsed.message):
        return Verdict("WrongLogic", "data constraint violation", "unpacking",
                        f"the code's data has another structure: {parsed.message}", frame=raised)
    if _calls_foreign(raised, context):
        return Verdict("WrongShapeDtype", "data constraint violation", "builtin-value-contract",
                        f"a called API rejected a value: {parsed.message}"[:200], True, raised,
                        _callee_name(raised, context))
    return Verdict("WrongLogic", "data constraint violation", "value-error",
                    parsed.message[:200], True, raised)


def _fallback(parsed: ParsedError, owner: str, raised: Frame | None) -> Verdict:
    if owner == "library":
        return Verdict("WrongShapeDtype", "data constraint violation", "library-raised",
                        f"a library called by the code raised {parsed.exc_type}", True, raised)
    return Verdict("WrongLogic", "incorrect implementation", "other-exception",
                    f"{parsed.exc_type}: {parsed.message}"[:200], True, raised)


def _foreign_calls(frame: Frame | None, context: RuleContext) -> list[str]:
    """The calls of the failing statement to APIs: not the candidate's own functions and not
    bare builtins (`int`, `len`, ...), whose misuse is the program's logic."""
    if frame is None:
        return []
    calls = statement_calls(context.result.program, frame.line)
    return sorted(call for call in calls
                  if call.split(".")[0] not in context.facts.defined
                  and call.rsplit(".", 1)[-1] not in context.facts.defined
                  and not ("." not in call and call in _BUILTIN_NAMES))


def _calls_foreign(frame: Frame | None, context: RuleContext) -> bool:
    return bool(_foreign_calls(frame, context))


def _callee_name(frame: Frame | None, context: RuleContext) -> str | None:
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


def _raised_inside_call(parsed: ParsedError, frame: Frame | None, context: RuleContext) -> bool:
    """Whether an operator-style TypeError came from inside a called API rather than from
    the failing statement's own operators."""
    if frame is None or not _calls_foreign(frame, context):
        return False
    node = innermost_statement(context.result.program, frame.line)
    if node is None:
        return False
    for pattern, syntax in _OPERATOR_SYNTAX:
        if re.search(pattern, parsed.message):
            return not any(isinstance(child, syntax) for child in ast.walk(node))
    return False
