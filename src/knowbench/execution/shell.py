"""Shell commands in a sample's sandbox: what an agent framework's environment runs.

`SandboxedShell(engine, workspace, limits)` runs each `bash -c COMMAND` the way the engine
runs a sample: a fresh process in the engine's sandbox (under bubblewrap: the allow-listed
read-only view, the masks the run added with `Engine.hide`, no network, its own PID
namespace), with `workspace` as its only writable host directory (seen as the sandbox's work
directory), the sample's environment variables and, when the sandbox drops privileges, a
uid leased for the shell alone. Inside, `sandboxed/knowbench_shell.py` sets the rlimits of
`limits` (the test runner's: address space, CPU, file size, open files, processes and
threads) and execs bash; outside, the engine's collector kills the whole process group at
`limits.wall_s`, or when the command's processes pass the memory budget or the process
limit, and keeps at most `limits.output_bytes` of output. Nothing a command does ends the
shell: each limit it hits is reported in its `ShellResult`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from knowbench.errors import UserError
from knowbench.execution.engine import (
    _MEMORY,
    Engine,
    SandboxUids,
    _collect,
    killed_by,
    nproc_base,
    sample_env,
)
from knowbench.execution.sandbox import RUNNER_DIR, Sandbox
from knowbench.jsonl import valid_text
from knowbench.records import Limits

_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import knowbench_shell; knowbench_shell.main()"
_SIGNALS = {"SIGXCPU": ("cpu-time", "the CPU time limit ({cpu_s} s) was reached"),
            "SIGXFSZ": ("file-size", "a file passed the file size limit ({file_size_mb} MB)")}


@dataclass(frozen=True)
class ShellResult:
    """One command's outcome: its output (stdout and stderr together, capped), exit code
    (negative or above 128: a signal), and the limit that ended it, if one did."""

    output: str
    exit_code: int | None
    limit: str | None = None  # timeout, memory, process-limit, cpu-time, file-size, killed
    message: str = ""  # what happened, when a limit ended the command
    truncated: bool = False
    duration_s: float = 0.0


class SandboxedShell:
    """Runs commands in `workspace` inside `engine`'s sandbox under `limits` (see the
    module docstring). Close it (or use it as a context manager) to give back its uid."""

    def __init__(self, engine: Engine, workspace: Path, limits: Limits) -> None:
        sandbox, python = getattr(engine, "sandbox", None), getattr(engine, "python", None)
        if not isinstance(sandbox, Sandbox) or not isinstance(python, str):
            raise UserError(f"the {engine.name} engine runs samples elsewhere and cannot run "
                            "shell commands in a local sandbox; use --engine forkserver or "
                            "subprocess")
        self.sandbox, self.python, self.limits = sandbox, python, limits
        self.workspace = workspace
        self._uids = SandboxUids(sandbox, 1)
        self.uid = self._uids.judge[0]
        if self.uid is not None:
            os.chmod(workspace, 0o755)
            for root, dirs, files in os.walk(workspace):
                for name in dirs + files:
                    os.lchown(os.path.join(root, name), self.uid, self.uid)
            os.chown(workspace, self.uid, self.uid)
        # What the workspace holds as the episode begins: the memory budget bounds what all of
        # its commands together add to it (the files they write count against each command's).
        self._workspace_base = _MEMORY.directory_bytes(str(workspace))

    @property
    def workdir(self) -> str:
        """Where the workspace appears to the commands."""
        return self.sandbox.inner_workdir(self.workspace)

    def describe(self) -> dict[str, object]:
        return {**self.sandbox.describe(), "limits": self.limits.model_dump()}

    def _env(self) -> dict[str, str]:
        """The sample's environment, with the run's interpreter first on PATH (`python`
        and the tools its environment installs are the ones the tests see)."""
        env = sample_env(self.workdir)
        env["PATH"] = f"{os.path.dirname(self.python)}:{env['PATH']}"
        return env

    def run(self, command: str, timeout_s: float | None = None) -> ShellResult:
        """Run `bash -c command`; `timeout_s` shortens the wall-clock limit (never lengthens)."""
        limits = self.limits
        if timeout_s is not None and timeout_s < limits.wall_s:
            limits = limits.model_copy(update={"wall_s": max(timeout_s, 0.1)})
        # An agent framework may have decoded the command from a model's JSON, lone surrogates
        # and all: bash gets it as valid text, as the stored trajectory shows it.
        config = {"command": valid_text(command), "limits": limits.model_dump(), "uid": self.uid,
                  "gid": self.uid, "nproc_base": nproc_base(self.uid)}
        argv = self.sandbox.command([self.python, "-I", "-c", _BOOT, str(RUNNER_DIR)],
                                    self.workspace, self.python)
        started = time.monotonic()
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, cwd=self.workspace,
                                       env=self._env(), start_new_session=True)
        except OSError as error:
            return ShellResult(output="", exit_code=None, limit="infrastructure",
                               message=f"the sandbox could not start: {error}")
        collected = _collect(process, None, json.dumps(config).encode(), limits, self.sandbox.wrappers,
                             self.workspace, self._workspace_base)
        duration = round(time.monotonic() - started, 4)
        output = (collected.stdout + collected.stderr).decode(errors="replace")
        truncated = len(collected.stdout) >= limits.output_bytes
        limit, message = None, ""
        if collected.over_budget:
            limit, message = "memory", (f"the command's processes and the files it wrote passed the "
                                        f"memory budget ({limits.memory_mb} MB) and were killed")
        elif collected.left_over_budget:
            limit, message = "memory", (f"the files the command wrote passed the memory budget "
                                        f"({limits.memory_mb} MB) before it ended")
        elif collected.over_processes:
            limit, message = "process-limit", (f"the command started more than "
                                               f"{limits.processes} processes and was killed")
        elif collected.timed_out:
            limit, message = "timeout", f"the command was killed at the wall-clock limit ({limits.wall_s:g} s)"
        else:
            signal_name = killed_by(collected.exit_code)
            if signal_name in _SIGNALS:
                limit, template = _SIGNALS[signal_name]
                message = template.format(**limits.model_dump())
            elif signal_name == "SIGKILL":
                limit, message = "killed", "the command was killed (SIGKILL)"
        if truncated:
            output += f"\n[knowbench: output cut at {limits.output_bytes} bytes]"
        return ShellResult(output=output, exit_code=collected.exit_code, limit=limit,
                           message=message, truncated=truncated, duration_s=duration)

    def close(self) -> None:
        self._uids.close()

    def __enter__(self) -> SandboxedShell:
        return self

    def __exit__(self, *exc_info: object) -> None:
        with contextlib.suppress(Exception):
            self.close()
