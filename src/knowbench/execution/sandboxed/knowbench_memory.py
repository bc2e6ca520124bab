"""A memory budget per sample, not per process; stdlib only.

`RLIMIT_AS` bounds each process, but a sample may start many processes and may fill its
tmpfs /tmp, which counts against no process at all, or a work directory on the host's disk
(`RLIMIT_FSIZE` bounds each file, not how many). A `Budget` sums what the sample really
holds: the memory private to each of its processes (pages it allocated or wrote; pages
still shared with the warm parent it was forked from are not its cost) plus the bytes its
files take on the tmpfs and what its work directory grew by when that lies elsewhere, and
says when the sum passes the limit. The caller polls it while the sample runs and kills the
sample when it is over.

Used by the fork server (inside the sandbox, for the processes of its PID namespace) and
by the subprocess engine (outside, for the processes descending from the sandbox).
"""

import os
import stat
import time

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


# Every file or directory counts at least this much: a flood of empty files fills a disk's
# inodes, and takes a walk as long as a flood of full ones.
_ENTRY_BYTES = 4096
# A walk of the work directory takes at most this share of the time between polls (a project
# sample's copy may hold thousands of files; a split sample's shared directory is usually empty).
_WALK_SHARE = 0.1
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def directory_bytes(path, stop=None):
    """What the files and directories under `path` take on disk: their allocated blocks, at
    least `_ENTRY_BYTES` each; the walk ends early once the total passes `stop`. Never raises.

    The sample may change the tree while it is walked: every directory is opened relative to
    its parent's descriptor and never through a symbolic link (a directory swapped for a link
    during the walk is not followed; no path grows past PATH_MAX), and entries that vanish are
    skipped. What a directory the walker may not read holds is not counted: the walk never
    changes the sample's files, permissions included (a test may depend on them)."""
    total = 0
    try:
        root = os.open(path, _DIRECTORY_FLAGS)
    except OSError:
        return 0
    stack = [root]
    try:
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as entries:
                    names = []
                    for entry in entries:
                        try:
                            info = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:  # gone since it was listed
                            continue
                        except OSError:
                            total += _ENTRY_BYTES  # there, of a size it may not tell
                            continue
                        total += max(info.st_blocks * 512, _ENTRY_BYTES)
                        if stat.S_ISDIR(info.st_mode):
                            names.append(entry.name)
                for name in names:
                    if stop is not None and total > stop:
                        return total
                    try:
                        stack.append(os.open(name, _DIRECTORY_FLAGS, dir_fd=directory))
                    except OSError:
                        pass
            except OSError:
                pass
            finally:
                os.close(directory)
    except Exception:  # never let the sample's tree break the caller's poll
        pass
    finally:
        for directory in stack:
            os.close(directory)
    return total


def deleted_open_bytes(pids, skip_device=None):
    """What the regular files the processes `pids` hold open after their last link was
    removed (or opened with `O_TMPFILE`) take on disk: no directory shows them. Files on
    `skip_device` (the tmpfs, which counts them itself) are left out."""
    total, seen = 0, set()
    for pid in pids:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                info = os.stat(f"/proc/{pid}/fd/{fd}")
            except (OSError, ValueError):
                continue
            if (stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev != skip_device
                    and (info.st_dev, info.st_ino) not in seen):
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def _device(path):
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


class Budget:
    """The memory one sample may hold: private memory of its processes + its tmpfs files
    + what its work directory grew by, where that is not on the tmpfs."""

    def __init__(self, limit_bytes, tmpfs=None, workdir=None, workdir_base=None):
        self.limit = limit_bytes
        self.tmpfs = tmpfs
        self.tmpfs_base = filesystem_used(tmpfs) if tmpfs else 0
        self.tmpfs_device = _device(tmpfs) if tmpfs else None
        self.workdir, self.workdir_base, self.workdir_grown, self.next_walk = None, 0, 0, 0.0
        self.peak = 0
        if workdir:
            self.watch(workdir, workdir_base)

    def watch(self, workdir, base=None):
        """Count what `workdir` grows by from `base` bytes (None: what it holds now; 0 for a
        directory just made).
        A work directory on the tmpfs is counted with it; one elsewhere (a host directory:
        the subprocess engine's, a split or project sample's) is walked."""
        if self.tmpfs and _device(workdir) == self.tmpfs_device:
            return
        self.workdir = workdir
        self.workdir_base = directory_bytes(workdir) if base is None else base

    def used(self, pids, holders=None):
        """What the sample holds now, given the pids of its processes whose memory counts, and
        of those whose open files count (`holders`; default the same)."""
        total = sum(private_bytes(pid) for pid in pids)
        if self.tmpfs:
            total += max(0, filesystem_used(self.tmpfs) - self.tmpfs_base)
        if self.workdir:
            total += deleted_open_bytes(pids if holders is None else holders, self.tmpfs_device)
            started = time.monotonic()
            if started >= self.next_walk:
                # (A walk stops once the budget is passed: its length is bounded too.)
                grown = directory_bytes(self.workdir, self.workdir_base + self.limit - total)
                self.workdir_grown = max(0, grown - self.workdir_base)
                ended = time.monotonic()
                self.next_walk = ended + (ended - started) * (1 - _WALK_SHARE) / _WALK_SHARE
            total += self.workdir_grown
        self.peak = max(self.peak, total)
        return total

    def exceeded(self, pids, holders=None):
        return self.used(pids, holders) > self.limit
