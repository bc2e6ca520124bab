"""A memory cgroup around each fork server: the kernel's own count of what a sample holds.

The memory budget (`knowbench_memory.Budget`) sums what it can list: the private memory of
the sample's processes, its tmpfs files, System V segments and socket buffers. The kernel
also keeps memory for a process that nothing lists: pipe buffers, message queues, io_uring
rings, memory files in flight over a socket, its own tables. A memory cgroup is charged for
all of it, and the kernel enforces its limit by killing a process inside it.

Where knowbench may make one (the cgroup v1 memory controller, with the directory of this
process's own memory cgroup writable: root on most machines and containers), every fork
server starts in a cgroup of its own. Once the server is ready, the limit is set to what the
cgroup holds then (the server, its preloaded libraries, the page cache they were read from)
plus the sample's memory budget plus `SLACK_BYTES` for the kernel's own bookkeeping of the
sample's processes (page tables, stacks) and for the spare process the server forks for the
next sample while this one runs (about 5 MB with pandas preloaded). Each start of a server
gets a fresh cgroup, so nothing an earlier server left charged there raises the baseline. A
sample runs alone in its server's cgroup, so a process the kernel killed there for memory
while the sample ran is the sample's doing: the sample gets `memory`, whichever process
died, the server included.

The cgroup v2 controller is not used: this machine has none to test it on (its v2 hierarchy
has no memory controller), and a v2 cgroup that holds processes cannot give its children
the controller unless it was delegated so. Where no cgroup can be made, the budget alone
applies, as before; `describe()` says which.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

SLACK_BYTES = 16 * 1024 * 1024
_PREFIX = "knowbench-"


def _own_memory_cgroup() -> Path | None:
    """The directory of this process's cgroup v1 memory controller, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    own = next((line.split(":", 2)[2] for line in lines
                if line.count(":") >= 2 and "memory" in line.split(":", 2)[1].split(",")), None)
    if own is None:
        return None
    for mount in mounts:
        fields = mount.split()
        if " - cgroup " not in mount or "memory" not in fields[-1].split(","):
            continue
        root, point = fields[3], fields[4]
        if own == root or own.startswith(root.rstrip("/") + "/"):
            return Path(point) / own[len(root):].lstrip("/")
    return None


def _writable_parent() -> Path | None:
    """This process's own memory cgroup when it may make cgroups below it, else None."""
    parent = _own_memory_cgroup()
    if parent is None or not (parent / "cgroup.procs").is_file() or not os.access(parent, os.W_OK):
        return None
    return parent


def memory_cgroups_available() -> bool:
    """Whether this process may make memory cgroups below its own."""
    return _writable_parent() is not None


class MemoryCgroup:
    """One cgroup v1 memory controller directory that knowbench made and removes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.limit: int | None = None
        self._oom_control = str(path / "memory.oom_control")  # read twice per sample

    @classmethod
    def make(cls, name: str) -> MemoryCgroup | None:
        """A fresh cgroup `knowbench-<pid>-<name>` below this process's own, or None where
        none can be made (no v1 memory controller, or its directory is not writable)."""
        parent = _writable_parent()
        if parent is None:
            return None
        sweep(parent)
        path = parent / f"{_PREFIX}{os.getpid()}-{name}"
        try:
            path.mkdir()
        except FileExistsError:
            pass
        except OSError:
            return None
        cgroup = cls(path)
        if cgroup.oom_kills() is None:
            cgroup.remove()
            return None
        return cgroup

    def command(self, argv: list[str]) -> list[str]:
        """`argv`, started inside this cgroup: a shell moves itself in, then becomes `argv`, so
        every process it starts is inside from its first instruction."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def usage(self) -> int:
        return int((self.path / "memory.usage_in_bytes").read_text())

    def set_limit(self, limit: int) -> None:
        """Limit the cgroup to `limit` bytes (a write only when it changes)."""
        if limit != self.limit:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            self.limit = limit

    def oom_kills(self) -> int | None:
        """How many processes the kernel has killed in this cgroup for memory; None when it
        cannot be read (the cgroup is gone, or the kernel does not count them)."""
        try:
            fd = os.open(self._oom_control, os.O_RDONLY)
            try:
                text = os.read(fd, 4096)  # (a few short lines)
            finally:
                os.close(fd)
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                return int(value)
        return None

    def remove(self, wait_s: float = 2.0) -> None:
        """Remove the cgroup once its processes are gone (the kernel refuses it before; those
        of a sandbox just killed may take a moment to end). One left is swept later."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.01)


def sweep(parent: Path) -> None:
    """Remove the cgroups an earlier knowbench process left in `parent` (killed before it
    could): those named for a process that no longer runs, and empty (the kernel refuses
    the others)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            owner = entry.name[len(_PREFIX):].split("-", 1)[0]
            if not entry.name.startswith(_PREFIX) or not owner.isdigit() or int(owner) == os.getpid():
                continue
            if not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()
