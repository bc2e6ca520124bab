"""Executing samples: sandboxes (how a sample is isolated) and engines (how samples are run).

`ENGINES` names every engine and `create_engine(...)` builds one; `SANDBOXES` names every
sandbox and `resolve_sandbox(...)` builds one. An engine factory takes the sandbox and the
keyword options of `create_engine` (ignoring what it does not use) and returns an `Engine`;
it imports its engine when called, so optional dependencies (Ray) load only when chosen.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Protocol

from knowbench.execution.engine import Engine, SubprocessEngine, default_workers
from knowbench.execution.sandbox import SANDBOXES, Sandbox, resolve_sandbox
from knowbench.registry import Registry


class EngineFactory(Protocol):
    def __call__(self, sandbox: Sandbox, *, workers: int, python: str | None, preload: list[str],
                 requirements: list[str], ray_address: str | None) -> Engine: ...


ENGINES: Registry[EngineFactory] = Registry("engine")


class EngineFallback(UserWarning):
    """The engine asked for cannot run as configured; another one runs the samples."""


def create_engine(name: str, sandbox: Sandbox, workers: int | None = None, python: str | None = None,
                  preload: Sequence[str] = (), requirements: Sequence[str] = (),
                  ray_address: str | None = None) -> Engine:
    """The engine called `name`, running samples in `sandbox` with `python` (default: this
    interpreter).

    `workers`: samples executed at once (default: half the cores). `preload`: modules a warm
    server imports once (see `knowbench.benchmark.preload_modules`). `requirements` and
    `ray_address` are for engines that build environments on other machines (Ray).
    `forkserver` without a sandbox falls back to `subprocess` with an `EngineFallback`
    warning. Raises `UserError` for an unknown name or a missing optional dependency.
    """
    return ENGINES.get(name)(sandbox, workers=workers or default_workers(), python=python,
                             preload=list(preload), requirements=list(requirements),
                             ray_address=ray_address)


@ENGINES.register("forkserver")
def _forkserver(sandbox: Sandbox, *, workers: int, python: str | None, preload: list[str],
                requirements: list[str], ray_address: str | None) -> Engine:
    if sandbox.kind == "none":
        # A fork server needs its own PID namespace to kill whatever a sample leaves behind.
        warnings.warn("--sandbox none: using the subprocess engine", EngineFallback, stacklevel=3)
        return SubprocessEngine(sandbox, workers=workers, python=python)
    from knowbench.execution.forkserver import ForkServerEngine

    return ForkServerEngine(sandbox, workers=workers, python=python, preload=preload)


@ENGINES.register("subprocess")
def _subprocess(sandbox: Sandbox, *, workers: int, python: str | None, preload: list[str],
                requirements: list[str], ray_address: str | None) -> Engine:
    return SubprocessEngine(sandbox, workers=workers, python=python)


@ENGINES.register("ray")
def _ray(sandbox: Sandbox, *, workers: int, python: str | None, preload: list[str],
         requirements: list[str], ray_address: str | None) -> Engine:
    from knowbench.execution.ray_engine import RayEngine

    return RayEngine(sandbox.kind, address=ray_address, workers=workers, requirements=requirements,
                     preload=preload, tmp_bytes=sandbox.tmp_bytes, python=python, hidden=sandbox.hidden)


__all__ = ["ENGINES", "SANDBOXES", "Engine", "EngineFactory", "EngineFallback", "Sandbox",
           "create_engine", "resolve_sandbox"]
