"""Helpers shared by the tests (import as `from helpers import ...`)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from textwrap import dedent
from typing import Any

import knowbench
from knowbench.benchmark.schema import Invocation, TestSpec
from knowbench.execution.engine import ExecutionRequest, Isolation
from knowbench.execution.sandbox import RUNNER_DIR
from knowbench.records import Limits

ROOT = Path(__file__).resolve().parents[1]
# Where the knowbench under test was imported from: the child interpreter imports the same
# code, whatever PYTHONPATH or installed copy its environment would otherwise find.
_SOURCE = Path(knowbench.__file__).resolve().parents[1]


@cache
def _console_script() -> tuple[str, str]:
    """(module, function) of the `knowbench` console script as pyproject.toml declares it."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        target = tomllib.load(handle)["project"]["scripts"]["knowbench"]
    module, function = target.split(":")
    return module, function


def knowbench_command(*args: str, prelude: str = "") -> list[str]:
    """The argv that runs `knowbench ARGS` as the installed console script does: the entry
    point pyproject.toml names, called in this interpreter. Nothing is registered on the side,
    so a command missing from the real CLI is missing here too. `prelude`: code run first, as
    the script's own first lines (before knowbench is imported)."""
    module, function = _console_script()
    program = (f"import sys\n{prelude}\nsys.path.insert(0, {str(_SOURCE)!r})\n"
               f"from {module} import {function}\nsys.argv[0] = 'knowbench'\nsys.exit({function}())\n")
    return [sys.executable, "-c", program, *args]


def run_knowbench(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                  timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run `knowbench ARGS` in a fresh interpreter (from the repository root unless `cwd`)."""
    return subprocess.run(knowbench_command(*args), capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=timeout)


def make_request(program: str, tests: Mapping[str, str] | str, entry_point: str | None = None,
                 *, preload: Iterable[str] = (), isolation: Isolation = "in-process",
                 trusted_program: str | None = None, invocation: Invocation = "framework",
                 **limits: Any) -> ExecutionRequest:
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
        invocation=invocation,
    )


def in_children(body: str, children: int = 3) -> str:
    """Module-level code that forks `children` processes, each running `body` (Python at no
    indentation, which may use `os` and `time`) and then exiting, and waits for them all: what
    a sample holds across processes, each within its own limits."""
    indented = "\n".join(" " * 12 + line if line.strip() else "" for line in dedent(body).splitlines())
    return (f"import os, time\n\nchildren = []\nfor _ in range({children}):\n    pid = os.fork()\n"
            f"    if pid == 0:\n        try:\n{indented}\n        finally:\n            os._exit(0)\n"
            "    children.append(pid)\nfor pid in children:\n    os.waitpid(pid, 0)\n")


def stub_program(entry_point: str | None) -> str:
    """A benchmark's program with its target stubbed (a top-level function or Class.method)."""
    if not entry_point:
        return ""
    if "." not in entry_point:
        return f"def {entry_point}(*args, **kwargs):\n    raise NotImplementedError\n"
    owner, method = entry_point.split(".", 1)
    return (f"class {owner}:\n    def {method}(self, *args, **kwargs):\n"
            "        raise NotImplementedError\n")


# Sample code: `_runner_globals()` walks the calling stack to the runner's module globals (an
# in-process sample can; the hostile cases and the fork-server tests build on it).
RUNNER_GLOBALS = dedent("""
    import sys


    def _runner_globals():
        frame = sys._getframe()
        while frame is not None:
            if frame.f_globals.get("__name__") == "knowbench_runner":
                return frame.f_globals
            frame = frame.f_back
        raise LookupError("no runner frame on this stack")
""")


def runner_module(name: str) -> Any:
    """A module of the sandboxed runner (`knowbench_split`, ...), imported here: the runner
    imports them by their bare names, from its own directory."""
    sys.path.insert(0, str(RUNNER_DIR))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(RUNNER_DIR))
