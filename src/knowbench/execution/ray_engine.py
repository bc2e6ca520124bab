"""The Ray engine: spread execution over a Ray cluster (optional extra `knowbench[ray]`).

Each Ray actor hosts one fork server (see `forkserver.py`) on its node, inside that node's
sandbox and benchmark environment; results come back as the same `Execution` records and
flow into the same run store. With no address, a local Ray instance is started (and shut
down on close); `auto` joins the cluster this machine belongs to.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from knowbench.errors import UserError
from knowbench.execution.engine import Engine, ExecutionRequest, default_workers
from knowbench.execution.sandbox import TMP_BYTES_DEFAULT
from knowbench.records import Execution


class _Executor:
    """A Ray actor: one fork-server worker on whichever node Ray places it."""

    def __init__(self, sandbox_kind: str, tmp_bytes: int, requirements: list[str] | None,
                 preload: list[str], scratch: str | None) -> None:
        from knowbench.execution.environments import ensure_env
        from knowbench.execution.forkserver import ForkServerEngine
        from knowbench.execution.sandbox import resolve_sandbox

        python = ensure_env(requirements).python if requirements else None
        sandbox = resolve_sandbox(sandbox_kind, python=python, tmp_bytes=tmp_bytes)
        self.engine = ForkServerEngine(sandbox, workers=1, python=python, preload=preload,
                                       scratch=Path(scratch) if scratch else None)

    def hide(self, paths: list[str]) -> None:
        self.engine.hide(paths)

    def describe(self) -> dict[str, object]:
        return self.engine.sandbox.describe()

    def execute(self, request_json: str) -> str:
        request = ExecutionRequest.model_validate_json(request_json)
        return self.engine.execute(request).model_dump_json()

    def node(self) -> str:
        import socket

        return socket.gethostname()

    def close(self) -> None:
        self.engine.close()


class RayEngine(Engine):
    """Executes samples on Ray actors, each hosting a fork server."""

    name = "ray"

    def __init__(self, sandbox_kind: str, address: str | None = None, workers: int | None = None,
                 requirements: list[str] | None = None, preload: list[str] | None = None,
                 tmp_bytes: int = TMP_BYTES_DEFAULT, scratch: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("the ray engine needs Ray: pip install 'knowbench[ray]'") from None
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address, include_dashboard=False, logging_level="ERROR",
                     log_to_driver=False)
        self.workers = workers or default_workers()
        self.sandbox_kind, self.address = sandbox_kind, address
        actor = ray.remote(num_cpus=0.5)(_Executor)
        self._actors = [actor.remote(sandbox_kind, tmp_bytes, requirements, preload or [], scratch)
                        for _ in range(self.workers)]
        self._sandbox = ray.get(self._actors[0].describe.remote())
        self.nodes = sorted(set(ray.get([a.node.remote() for a in self._actors])))
        self._free: queue.Queue[Any] = queue.Queue()
        for executor in self._actors:
            self._free.put(executor)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **self._sandbox, "address": self.address, "nodes": self.nodes}

    def hide(self, paths: Iterable[str | Path]) -> None:
        # Paths as this machine names them: the benchmark and run directories live on a
        # shared file system (or on this node) for the actors to mask them.
        self._ray.get([executor.hide.remote([str(path) for path in paths]) for executor in self._actors])

    def execute(self, request: ExecutionRequest) -> Execution:
        executor = self._free.get()
        try:
            reply = self._ray.get(executor.execute.remote(request.model_dump_json()))
        finally:
            self._free.put(executor)
        return Execution.model_validate_json(reply)

    def close(self) -> None:
        self._ray.get([executor.close.remote() for executor in self._actors])
        for executor in self._actors:
            self._ray.kill(executor)
        if self._owns_ray:
            self._ray.shutdown()
