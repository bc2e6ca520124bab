"""The Ray engine: spread execution over a Ray cluster (optional extra `knowbench[ray]`).

Each Ray actor hosts one fork server (see `forkserver.py`) on its node, inside that node's
sandbox and benchmark environment; results come back as the same `Execution` records and
flow into the same run store. With no address, a local Ray instance is started (and shut
down on close); `auto` joins the cluster this machine belongs to.
"""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from knowbench.errors import UserError
from knowbench.execution.engine import Engine, ExecutionRequest, default_workers
from knowbench.records import Execution


class _Executor:
    """A Ray actor: one fork-server worker on whichever node Ray places it."""

    def __init__(self, sandbox_kind: str, hidden: list[str], requirements: list[str] | None,
                 preload: list[str], scratch: str | None) -> None:
        from knowbench.execution.environments import ensure_env
        from knowbench.execution.forkserver import ForkServerEngine
        from knowbench.execution.sandbox import resolve_sandbox

        python = ensure_env(requirements).python if requirements else None
        self.engine = ForkServerEngine(resolve_sandbox(sandbox_kind, hidden=hidden), workers=1,
                                       python=python, preload=preload,
                                       scratch=Path(scratch) if scratch else None)

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
                 hidden: list[str] | None = None, scratch: str | None = None) -> None:
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
        self._actors = [actor.remote(sandbox_kind, hidden or [], requirements, preload or [], scratch)
                        for _ in range(self.workers)]
        self.nodes = sorted(set(ray.get([a.node.remote() for a in self._actors])))
        self._free: queue.Queue[Any] = queue.Queue()
        for executor in self._actors:
            self._free.put(executor)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "sandbox": self.sandbox_kind, "address": self.address,
                "nodes": self.nodes}

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
