"""Errors that reach the user.

A `UserError` is bad input or a bad invocation: the CLI prints its message (no traceback)
and exits with code 2. Anything else is a bug in knowbench and keeps its traceback.
"""

from __future__ import annotations


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


def first_problem(error: Exception) -> str:
    """One line for a record that did not validate: where in it and what (a pydantic
    `ValidationError`'s first error, and how many more), instead of pydantic's whole report;
    any other error's own message."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    found = errors(include_url=False)
    if not found:
        return str(error)
    first = found[0]
    where = ".".join(str(part) for part in first["loc"]) or "the record"
    more = len(found) - 1
    return (f"{where}: {first['msg'].removeprefix('Value error, ')}"
            + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))
