"""Parsing Python source that is data to knowbench: benchmarks' code, models' replies,
libraries' files. Every parse in knowbench goes through `parse_python` (ruff's banned-api rule
keeps `ast.parse` out of the package).

The compiler reports questionable code it reads through the `warnings` module: an invalid
escape sequence such as `"\\d"` in a regular expression is a `DeprecationWarning` on Python
3.11 and a `SyntaxWarning`, printed by default, from 3.12. For code knowbench only reads,
such a warning is noise on the user's terminal, one per parsed file; and where warnings are
errors (`python -W error`, pytest's `filterwarnings = error`) it becomes a `SyntaxError`, so
valid code would be read as broken: a model's reply taken for prose, a benchmark's task
refused. The samples themselves run in the sandbox with Python's own defaults, where such a
warning is the program's, as anywhere else.
"""

from __future__ import annotations

import ast
import threading
import warnings
from typing import Literal, overload

# `warnings.catch_warnings` saves and restores the process's filter list: two threads inside
# it at once could restore each other's state and leave "ignore" in force for good. knowbench
# parses on several threads (an engine's workers, the runs of a sweep).
_QUIET = threading.Lock()


@overload
def parse_python(source: str | bytes, filename: str = ..., mode: Literal["exec"] = ...) -> ast.Module: ...
@overload
def parse_python(source: str | bytes, filename: str = ..., *, mode: Literal["eval"]) -> ast.Expression: ...


def parse_python(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse(source, filename, mode)`, without the compiler's warnings about the code.

    Raises what `ast.parse` raises for code that does not parse (`SyntaxError`, `ValueError`
    for a null byte, `RecursionError` or `MemoryError` for nesting too deep), and nothing
    for code that does."""
    with _QUIET, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=filename, mode=mode)


def compiles(source: str, filename: str = "<unknown>") -> None:
    """Raise `SyntaxError` when `source` does not compile as a module (the checks `ast.parse`
    leaves to the compiler included: `return` outside a function, a misplaced `nonlocal`),
    without the compiler's warnings about the code."""
    with _QUIET, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(source, filename, "exec", dont_inherit=True)


def dotted_name(expr: ast.expr) -> str:
    """'sys.modules' for `sys.modules`, 'x' for `x`; '' for anything else."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.insert(0, expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.insert(0, expr.id)
        return ".".join(parts)
    return ""
