"""The Ray engine: spread execution over a Ray cluster (optional extra `knowbench[ray]`).

Each Ray actor hosts one fork server (see `forkserver.py`) on its node, inside that node's
sandbox and benchmark environment; results come back as the same `Execution` records and
flow into the same run store. With no address, a fresh local Ray instance is started (and
shut down on close), never one that a file under Ray's temporary directory names; `auto`
joins the cluster this machine belongs to. An actor that dies (the kernel's OOM killer, Ray's
memory monitor, a lost node) is replaced, and the sample it was running is run once more on
the new one; a second death gives that sample an `infrastructure` result, never an exception.
"""

from __future__ import annotations

import contextlib
import json
import queue
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from knowbench.errors import UserError
from knowbench.execution.engine import (
    Engine,
    ExecutionRequest,
    default_workers,
    infrastructure_execution,
)
from knowbench.execution.sandbox import TMP_BYTES_DEFAULT
from knowbench.records import Execution

_ACTOR_CPUS = 0.5


class _Executor:
    """A Ray actor: one fork-server worker on whichever node Ray places it."""

    def __init__(self, sandbox_kind: str, tmp_bytes: int, requirements: list[str] | None,
                 preload: list[str], scratch: str | None, python: str | None = None,
                 hidden: Sequence[str] = ()) -> None:
        from knowbench.execution.environments import ensure_env
        from knowbench.execution.forkserver import ForkServerEngine
        from knowbench.execution.sandbox import resolve_sandbox

        python = ensure_env(requirements).python if requirements else python
        sandbox = resolve_sandbox(sandbox_kind, python=python, tmp_bytes=tmp_bytes)
        self.engine = ForkServerEngine(sandbox.hiding(hidden, python), workers=1, python=python,
                                       preload=preload, scratch=Path(scratch) if scratch else None)

    def hide(self, paths: list[str]) -> None:
        self.engine.hide(paths)

    def warm(self, modules: list[str], candidate_modules: list[str]) -> None:
        self.engine.warm(modules, candidate_modules)

    def unlearned(self) -> str | None:
        return self.engine.unlearned

    def describe(self) -> dict[str, object]:
        return self.engine.describe()

    def execute(self, request_json: str) -> tuple[str, str | None]:
        """The execution, and why this actor's engine stopped loading what `warm` named (or
        None), so that the driver never has to ask an actor that may be busy."""
        # (json, not pydantic's JSON: a program may hold a lone surrogate, which JSON escapes)
        request = ExecutionRequest.model_validate(json.loads(request_json))
        return self.engine.execute(request).model_dump_json(), self.engine.unlearned

    def node(self) -> str:
        import socket

        return socket.gethostname()

    def close(self) -> None:
        self.engine.close()


class RayEngine(Engine):
    """Executes samples on Ray actors, each hosting a fork server."""

    name = "ray"
    learns = True

    def __init__(self, sandbox_kind: str, address: str | None = None, workers: int | None = None,
                 requirements: list[str] | None = None, preload: list[str] | None = None,
                 tmp_bytes: int = TMP_BYTES_DEFAULT, scratch: str | None = None,
                 python: str | None = None, hidden: Iterable[str | Path] = ()) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("the ray engine needs Ray: pip install 'knowbench[ray]'") from None
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        self.workers = workers or default_workers()
        if self._owns_ray:
            # "local": a new instance, never the cluster that /tmp/ray/ray_current_cluster names
            # (a file any process of this machine may have written).
            ray.init(address=address or "local", include_dashboard=False, logging_level="ERROR",
                     log_to_driver=False)
        cpus = ray.cluster_resources().get("CPU", 0) if self._owns_ray and address in (None, "local") else None
        if cpus is not None and self.workers * _ACTOR_CPUS > cpus:
            ray.shutdown()
            raise UserError(f"{self.workers} Ray workers need {self.workers * _ACTOR_CPUS:g} CPUs and the "
                            f"local Ray instance has {cpus:g}: they would wait forever\n"
                            f"  fix: --workers {max(1, int(cpus / _ACTOR_CPUS))} or fewer")
        self.sandbox_kind, self.address = sandbox_kind, address
        self._hidden = [str(path) for path in hidden]
        # (`warm`: told to every actor, a replacement's too; the modules, the candidates')
        self._learned: tuple[list[str], list[str]] = ([], [])
        self._unlearned: str | None = None  # (`unlearned`: kept once an actor said it)
        actor = ray.remote(num_cpus=_ACTOR_CPUS)(_Executor)
        self._new_actor = lambda: actor.remote(sandbox_kind, tmp_bytes, requirements, preload or [], scratch,
                                               python, list(self._hidden))
        self._actors = [self._new_actor() for _ in range(self.workers)]
        self._sandbox = ray.get(self._actors[0].describe.remote())
        self.nodes = sorted(set(ray.get([a.node.remote() for a in self._actors])))
        self._free: queue.Queue[Any] = queue.Queue()
        for executor in self._actors:
            self._free.put(executor)

    def describe(self) -> dict[str, object]:
        # The first actor's fork server's (sandbox, interpreter, preload, memory budget), as Ray's.
        return {**self._sandbox, **super().describe(), "address": self.address, "nodes": self.nodes}

    def hide(self, paths: Iterable[str | Path]) -> None:
        # Paths as this machine names them: the benchmark and run directories live on a
        # shared file system (or on this node) for the actors to mask them.
        names = [str(path) for path in paths]
        self._hidden += names
        self._ray.get([executor.hide.remote(names) for executor in self._actors])

    def warm(self, modules: Sequence[str], candidate_modules: Sequence[str] = ()) -> None:
        # A new list starts over on every actor (`ForkServerEngine.warm`), and so here.
        self._learned = (list(dict.fromkeys(modules)), list(dict.fromkeys(candidate_modules)))
        self._unlearned = None
        self._ray.get([executor.warm.remote(*self._learned) for executor in self._actors])

    @property  # type: ignore[override]
    def unlearned(self) -> str | None:
        """Why an actor's engine stopped loading what `warm` named (the first one's), or None.
        Once one has, replacements are told nothing either (`_replace`). (Not to be asked
        while executions run: an actor answers after its sample.)"""
        for executor in self._actors:
            if self._unlearned:
                break
            with contextlib.suppress(Exception):  # (an actor that died took its reason with it)
                self._unlearned = self._ray.get(executor.unlearned.remote())
        if self._unlearned:
            self._learned = ([], [])
        return self._unlearned

    def execute(self, request: ExecutionRequest) -> Execution:
        executor = self._free.get()
        try:
            for _ in range(2):
                try:
                    reply, unlearned = self._ray.get(
                        executor.execute.remote(json.dumps(request.model_dump(mode="json"))))
                    if unlearned and not self._unlearned:  # (the first reason stays, whichever thread saw it)
                        self._unlearned = unlearned
                    return Execution.model_validate_json(reply)
                except self._ray.exceptions.RayActorError as error:
                    executor = self._replace(executor)
                    died = (str(error).splitlines() or [type(error).__name__])[0]
            return infrastructure_execution(request, self, "the Ray actor running this sample died "
                                            f"twice, the second time: {died}")
        finally:
            self._free.put(executor)

    def _replace(self, dead: Any) -> Any:
        """A new actor in the place of `dead` (with every path hidden so far)."""
        fresh = self._new_actor()
        self._actors[self._actors.index(dead)] = fresh
        with contextlib.suppress(Exception):  # (already gone: nothing to release)
            self._ray.kill(dead)
        # (An actor runs its calls in order: before the sample it is given. Not where an
        # actor's engine found that what was learned kills its servers, as its last sample
        # said: asking the others would wait for their samples.)
        if any(self._learned) and not self._unlearned:
            fresh.warm.remote(*self._learned)
        return fresh

    def close(self) -> None:
        # Every actor is killed and an instance this engine started is shut down, whatever
        # failed before: a dead actor's close() raises.
        try:
            for executor in self._actors:
                with contextlib.suppress(Exception):  # (a dead one's server went with it)
                    self._ray.get(executor.close.remote(), timeout=60)
                self._ray.kill(executor)
        finally:
            if self._owns_ray:
                self._ray.shutdown()
