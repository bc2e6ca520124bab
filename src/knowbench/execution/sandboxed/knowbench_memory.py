"""A memory budget per sample, not per process; stdlib only.

`RLIMIT_AS` bounds each process, but a sample may start many processes and may fill its
tmpfs /tmp, which counts against no process at all. A `Budget` sums what the sample
really holds: the memory private to each of its processes (pages it allocated or wrote;
pages still shared with the warm parent it was forked from are not its cost) plus the
bytes its files take on the tmpfs, and says when the sum passes the limit. The caller
polls it while the sample runs and kills the sample when it is over.

Used by the fork server (inside the sandbox, for the processes of its PID namespace) and
by the subprocess engine (outside, for the processes descending from the sandbox).
"""

import os

_PRIVATE_FIELDS = (b"Private_Clean:", b"Private_Dirty:", b"Private_Hugetlb:", b"Swap:")


def private_bytes(pid):
    """Memory private to one process (0 when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            total = 0
            for line in handle:
                if line.startswith(_PRIVATE_FIELDS):
                    total += int(line.split()[1]) * 1024
            return total
    except (OSError, ValueError, IndexError):
        return 0


def stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (state, parent pid, process group,
    ...), as bytes; None when the process is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields follow the last ')'.
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields if len(fields) > 2 else None


def descendants(root):
    """`root` and every process below it, from /proc (a snapshot)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = stat_fields(name)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def filesystem_used(path):
    """Bytes in use on the file system holding `path` (0 when it cannot be read)."""
    try:
        info = os.statvfs(path)
    except OSError:
        return 0
    return (info.f_blocks - info.f_bfree) * info.f_frsize


class Budget:
    """The memory one sample may hold: private memory of its processes + its tmpfs files."""

    def __init__(self, limit_bytes, tmpfs=None):
        self.limit = limit_bytes
        self.tmpfs = tmpfs
        self.tmpfs_base = filesystem_used(tmpfs) if tmpfs else 0
        self.peak = 0

    def used(self, pids):
        """What the sample holds now, given its processes' pids."""
        total = sum(private_bytes(pid) for pid in pids)
        if self.tmpfs:
            total += max(0, filesystem_used(self.tmpfs) - self.tmpfs_base)
        self.peak = max(self.peak, total)
        return total

    def exceeded(self, pids):
        return self.used(pids) > self.limit
