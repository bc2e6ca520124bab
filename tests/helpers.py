"""Helpers shared by the execution tests (import as `from helpers import ...`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from knowbench.benchmark.schema import TestSpec
from knowbench.execution.engine import ExecutionRequest
from knowbench.records import Limits


def make_request(program: str, tests: Mapping[str, str] | str, entry_point: str | None = None,
                 *, preload: Iterable[str] = (), isolation: str = "in-process",
                 trusted_program: str | None = None, **limits: Any) -> ExecutionRequest:
    """An ExecutionRequest; `tests` maps spec name -> code (a bare string is the spec 't').

    Split requests for a plain function without a `trusted_program` get a benchmark side
    that only defines the target (never derived from `program`: the judge must not run the
    candidate's module-level code). Other keyword arguments override fields of `Limits`.
    """
    specs = {"t": tests} if isinstance(tests, str) else dict(tests)
    if isolation == "split" and trusted_program is None:
        assert entry_point is not None and "." not in entry_point, "pass trusted_program"
        trusted_program = f"def {entry_point}(*args, **kwargs):\n    raise NotImplementedError\n"
    return ExecutionRequest(
        program=program,
        tests=[TestSpec(name=name, code=code) for name, code in specs.items()],
        entry_point=entry_point,
        limits=Limits(**limits),
        preload=list(preload),
        isolation=isolation,  # type: ignore[arg-type]
        trusted_program=trusted_program,
    )
