"""What a candidate's code does, read from its syntax tree (never by running it).

`code_facts` reads the names it calls, imports and defines, and whether the target's body is
a stub; `innermost_statement` and `statement_calls` look at the statement of the executed
program on which an exception was raised. Pure functions of the code text.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass

from knowbench.parsing import parse_python


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
        tree = parse_python(text)
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
        return parse_python(program)
    except (SyntaxError, ValueError, RecursionError):
        return None


def innermost_statement(program: str | None, line: int) -> ast.stmt | None:
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
    best = innermost_statement(program, line)
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
