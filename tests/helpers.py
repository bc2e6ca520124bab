"""Helpers shared by the execution tests (import as `from helpers import ...`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from knowbench.benchmark.schema import TestSpec
from knowbench.execution.engine import ExecutionRequest
from knowbench.records import Limits


def make_request(program: str, tests: Mapping[str, str] | str, entry_point: str | None = None,
                 *, preload: Iterable[str] = (), **limits: Any) -> ExecutionRequest:
    """An ExecutionRequest; `tests` maps spec name -> code (a bare string is the spec 't').

    Keyword arguments other than `preload` override fields of `Limits`.
    """
    specs = {"t": tests} if isinstance(tests, str) else dict(tests)
    return ExecutionRequest(
        program=program,
        tests=[TestSpec(name=name, code=code) for name, code in specs.items()],
        entry_point=entry_point,
        limits=Limits(**limits),
        preload=list(preload),
    )
