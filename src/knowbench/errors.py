"""Errors that reach the user.

A `UserError` is bad input or a bad invocation: the CLI prints its message (no traceback)
and exits with code 2. Anything else is a bug in knowbench and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


class UserError(Exception):
    """Bad input the user can fix; `str(error)` says where and what to do."""

    exit_code = 2


class BenchmarkError(UserError):
    """A benchmark directory, manifest or task line is invalid.

    The message names the file, the line (for `tasks.jsonl`), the field, and what to do.
    """

    def __init__(self, path: str, problem: str, *, line: int | None = None,
                 field: str | None = None, hint: str | None = None) -> None:
        self.path, self.line, self.field, self.problem, self.hint = path, line, field, problem, hint
        where = path if line is None else f"{path}:{line}"
        text = f"{where}: {problem}" if field is None else f"{where}: field '{field}': {problem}"
        if hint:
            text += f"\n  fix: {hint}"
        super().__init__(text)


@dataclass(frozen=True)
class Problem:
    """The first error of a pydantic `ValidationError`: the field (dotted; "" for the record
    itself), pydantic's message without its "Value error, " prefix, the error's type, and
    how many more errors the record had."""

    field: str
    message: str
    kind: str
    more: int

    def suffix(self, of: str = "") -> str:
        """" (and N more problems[ of])" when there were more, else ""."""
        if not self.more:
            return ""
        return f" (and {self.more} more problem{'s' if self.more > 1 else ''}{' ' + of if of else ''})"


def validation_problem(error: Exception, skip: Collection[str] = ()) -> Problem | None:
    """The first problem of a pydantic `ValidationError` (None for any other error); the
    parts of its location in `skip` are left out (a tagged union's tag, e.g. "function")."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return None
    found = errors(include_url=False)
    if not found:
        return None
    first = found[0]
    field = ".".join(str(part) for part in first["loc"] if part not in skip)
    return Problem(field, first["msg"].removeprefix("Value error, "), first["type"], len(found) - 1)


def first_problem(error: Exception) -> str:
    """One line for a record that did not validate: where in it and what (a pydantic
    `ValidationError`'s first error, and how many more), instead of pydantic's whole report;
    any other error's own message."""
    problem = validation_problem(error)
    if problem is None:
        return str(error)
    return f"{problem.field or 'the record'}: {problem.message}{problem.suffix()}"
