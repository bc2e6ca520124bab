"""Printing shared by the command modules and `knowbench.cli` (which imports the commands,
so nothing here may import it)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from knowbench.execution import EngineFallback


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
