"""Printing and options shared by the command modules and `knowbench.cli` (which imports the
commands, so nothing here may import it)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console

from knowbench.execution import EngineFallback


def one_of(*values: str) -> Callable[[str | None], str | None]:
    """A typer callback refusing any value of a string option but `values`, as the command
    line is read (a usage error, exit 2), before the command does any work."""
    def check(value: str | None) -> str | None:
        if value is not None and value not in values:
            raise typer.BadParameter(f"'{value}' is not one of {', '.join(values)}")
        return value
    return check


KValues = Annotated[list[int] | None, typer.Option("--k", min=1, help="k values for pass@k (repeatable; 1 or more).")]
"""`--k` of the commands that score: refused below 1 as the command starts, not after the run."""


@contextmanager
def engine_notices(console: Console) -> Iterator[None]:
    """Show an engine fallback that happens inside the block as a one-line warning on
    `console`; other Python warnings pass through unchanged."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EngineFallback)
        yield
    for item in caught:
        if issubclass(item.category, EngineFallback):
            console.print(f"[yellow]warning:[/] {item.message}")
        else:
            warnings.showwarning(item.message, item.category, item.filename, item.lineno)
