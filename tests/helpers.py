"""Helpers shared by the execution tests (import as `from helpers import ...`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from knowbench.benchmark.schema import TestSpec
from knowbench.execution.engine import ExecutionRequest, Isolation
from knowbench.records import Limits


def make_request(program: str, tests: Mapping[str, str] | str, entry_point: str | None = None,
                 *, preload: Iterable[str] = (), isolation: Isolation = "in-process",
                 trusted_program: str | None = None, **limits: Any) -> ExecutionRequest:
    """An ExecutionRequest; `tests` maps spec name -> code (a bare string is the spec 't').

    `isolation="split"` runs `program` (the candidate) in its own untrusted process and the
    tests against `trusted_program` (the benchmark's own code, target stubbed); when it is not
    given, a stub of `entry_point` is made (never derived from `program`: the judge must not
    run the candidate's module-level code). Keyword arguments other than these override
    fields of `Limits`.
    """
    if isolation == "split" and trusted_program is None:
        trusted_program = stub_program(entry_point)
    specs = {"t": tests} if isinstance(tests, str) else dict(tests)
    return ExecutionRequest(
        program=program,
        tests=[TestSpec(name=name, code=code) for name, code in specs.items()],
        entry_point=entry_point,
        limits=Limits(**limits),
        preload=list(preload),
        isolation=isolation,
        trusted_program=trusted_program,
    )


def stub_program(entry_point: str | None) -> str:
    """A benchmark's program with its target stubbed (a top-level function or Class.method)."""
    if not entry_point:
        return ""
    if "." not in entry_point:
        return f"def {entry_point}(*args, **kwargs):\n    raise NotImplementedError\n"
    owner, method = entry_point.split(".", 1)
    return (f"class {owner}:\n    def {method}(self, *args, **kwargs):\n"
            "        raise NotImplementedError\n")
