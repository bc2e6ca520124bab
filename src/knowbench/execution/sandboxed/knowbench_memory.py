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
            line = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields follow the last ')'.
    fields = line[line.rfind(b")") + 2:].split()
    return fields if len(fields) > 2 else None


def process_table():
    """{parent pid: [child pids]} and {pid: start time, in clock ticks since boot}, from /proc
    (a snapshot)."""
    children, started = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = stat_fields(name)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
            if len(fields) > 19:
                started[int(name)] = int(fields[19])
    return children, started


def descendants(root, children=None):
    """`root` and every process below it, in `children` (a `process_table()`'s; by default a
    fresh one)."""
    if children is None:
        children = process_table()[0]
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def filesystem_used(path):
    """Bytes in use on the file system holding `path` (0 when it cannot be read): its used
    blocks, and `_ENTRY_BYTES` per inode in use (as a walk counts an entry: on a tmpfs a file
    that holds no block still takes kernel memory, and 600,000 empty ones took 0.4 GB)."""
    try:
        info = os.statvfs(path)
    except OSError:
        return 0
    return (info.f_blocks - info.f_bfree) * info.f_frsize + max(0, info.f_files - info.f_ffree) * _ENTRY_BYTES


# Every file or directory counts at least this much: a flood of empty files fills a disk's
# inodes, and takes a walk as long as a flood of full ones.
_ENTRY_BYTES = 4096
# A walk of the work directory takes at most this share of the time between polls (a project
# sample's copy may hold thousands of files; a split sample's shared directory is usually
# empty), and the next walk comes at most this many seconds after the last one ended.
_WALK_SHARE = 0.1
_WALK_GAP_MAX_S = 0.5
# A tree deeper than this counts as over the budget: each directory is opened from the top,
# so a walk down a chain of N directories opens N*N/2 (256 levels: 33,000, some 50 ms).
_MAX_DEPTH = 256
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def directory_bytes(path):
    """What the files and directories under `path` take on disk, down to `_MAX_DEPTH` levels:
    their allocated blocks, at least `_ENTRY_BYTES` each. Never raises.

    The sample may change the tree while it is walked. Each directory is opened from `path`'s
    descriptor one name at a time, never through a symbolic link (a directory swapped for a
    link is not followed; no path grows past PATH_MAX), and at most three descriptors are
    open at once, however wide the tree (a wide one cannot use up the caller's). Entries that
    vanish are skipped. The walk changes nothing of the sample's, permissions included (a
    test may depend on them): what a directory the walker may not read holds is not seen."""
    return _walk(path)[0]


def _walk(path, stop=None):
    """(what `directory_bytes` counts, whether the tree goes deeper than `_MAX_DEPTH`); the
    walk ends once the total passes `stop`."""
    total, too_deep = 0, False
    try:
        root = os.open(path, _DIRECTORY_FLAGS)
    except OSError:
        return 0, False
    try:
        pending = [()]  # directories still to list, as the names leading to them
        while pending:
            names = pending.pop()
            directory = _open_below(root, names)
            if directory is None:
                continue
            try:
                with os.scandir(directory) as entries:
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
                            if len(names) >= _MAX_DEPTH:
                                too_deep = True
                            else:
                                pending.append((*names, entry.name))
                        if stop is not None and total > stop:
                            return total, too_deep
            except OSError:
                pass
            finally:
                os.close(directory)
    except Exception:  # never let the sample's tree break the caller's poll
        pass
    finally:
        os.close(root)
    return total, too_deep


def _open_below(root, names):
    """A new descriptor of the directory `names` leads to from `root` (never through a link),
    or None."""
    directory = os.dup(root)
    for name in names:
        try:
            inner = os.open(name, _DIRECTORY_FLAGS, dir_fd=directory)
        except OSError:
            inner = None
        os.close(directory)
        if inner is None:
            return None
        directory = inner
    return directory


def open_deleted_sizes(pids, skip_devices=(), inherited=frozenset()):
    """{(device, inode): allocated bytes} of the removed files the processes `pids` keep
    open (removed after they were opened, or opened with `O_TMPFILE`; memfds and removed
    /dev/shm files too): no directory shows them, and no process's memory counts them. From
    /proc/PID/fd; files on `skip_devices` (tmpfs mounts, which count their own) and in `inherited`
    (`inherited_files()` of the warm parent the processes were forked from) are left out."""
    sizes = {}
    for pid in pids:
        for info in _open_files(pid):
            key = (info.st_dev, info.st_ino)
            if (stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev not in skip_devices
                    and key not in inherited):
                sizes[key] = info.st_blocks * 512
    return sizes


def mapped_deleted_sizes(pids, device, inherited=frozenset()):
    """{(device, inode): extent mapped} of the removed files on `device` (the work
    directory's file system) that the processes `pids` map, less those in `inherited`
    (libraries replaced on disk since the warm parent loaded them). A file a descriptor also
    holds is better counted by `open_deleted_sizes` (the extent of a sparse file overstates
    it); a memfd's or /dev/shm file's mapped pages are the process's memory."""
    sizes = {}
    for pid in pids:
        for key, extent, deleted in _mappings(pid):
            if deleted and key[0] == device and key not in inherited:
                sizes[key] = max(sizes.get(key, 0), extent)
    return sizes


def _mappings(pid):
    """(device, inode), offset + length, whether removed: for each file mapping of `pid`."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as handle:
            maps = handle.read()
    except OSError:
        return []
    found = []
    for line in maps.splitlines():
        try:
            span, _, offset, where, inode = line.split(None, 5)[:5]
            if inode == b"0":
                continue
            major, minor = where.split(b":")
            low, high = span.split(b"-")
            found.append(((os.makedev(int(major, 16), int(minor, 16)), int(inode)),
                          int(offset, 16) + int(high, 16) - int(low, 16), line.endswith(b" (deleted)")))
        except (ValueError, OverflowError):
            continue
    return found


def inherited_files(pid="self"):
    """Every file `pid` maps or holds open, as (device, inode): what a child forked from it
    starts with, never the child's doing."""
    held = {key for key, _, _ in _mappings(pid)}
    held.update((info.st_dev, info.st_ino) for info in _open_files(pid))
    return frozenset(held)


def _open_files(pid):
    """The `os.stat` of what each open descriptor of `pid` refers to (removed files too)."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return
    for fd in descriptors:
        try:
            yield os.stat(f"/proc/{pid}/fd/{fd}")
        except (OSError, ValueError):
            continue


def sysv_shm_bytes():
    """Bytes the System V shared memory segments of this process's IPC namespace hold in
    memory and swap (from /proc/sysvipc/shm; their sizes where the kernel lists no `rss`).
    No process needs to hold a segment: it lives until removed. 0 when unreadable."""
    try:
        with open("/proc/sysvipc/shm", "rb") as handle:
            header, *rows = handle.read().splitlines()
        columns = header.split()
        fields = [columns.index(b"rss"), columns.index(b"swap")] if b"rss" in columns else [
            columns.index(b"size")]
        return sum(int(row.split()[i]) for row in rows for i in fields)
    except (OSError, ValueError, IndexError):
        return 0


# The kernel's socket diagnostics (netlink, NETLINK_SOCK_DIAG): one dump per kind of socket,
# each listing the sockets of the caller's network namespace with their memory (`sk_meminfo`).
_SOCK_DIAG, _BY_FAMILY, _DUMP_REQUEST = 4, 20, 0x301  # NLM_F_REQUEST | NLM_F_DUMP
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_UNIX_MEMINFO, _INET_SKMEMINFO = 5, 7  # the attribute holding sk_meminfo, per family
_UNIX_RQLEN, _LISTENING = 4, 10  # a Unix socket's queue lengths (bytes, unless it listens)
# sk_meminfo: rmem_alloc, rcvbuf, wmem_alloc, sndbuf, fwd_alloc, wmem_queued, ...
_RMEM_ALLOC, _WMEM_ALLOC, _WMEM_QUEUED = 0, 2, 5


def _diag_requests():
    """(request, size of the reply's fixed part, attribute holding sk_meminfo) per dump: Unix
    sockets, and TCP and UDP over IPv4 and IPv6 (lo is up in the sandbox's namespace)."""
    import socket
    import struct

    # UDIAG_SHOW_MEMINFO | UDIAG_SHOW_RQLEN
    unix = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, 0x20 | 0x10, 0, 0)
    requests = [(unix, 16, _UNIX_MEMINFO)]
    for family in (socket.AF_INET, socket.AF_INET6):
        for protocol in (socket.IPPROTO_TCP, socket.IPPROTO_UDP):
            # inet_diag_req_v2: every state, the SKMEMINFO extension, any address
            request = struct.pack("=BBBBI", family, protocol, 1 << (_INET_SKMEMINFO - 1), 0, 0xFFFFFFFF) + bytes(48)
            requests.append((request, 72, _INET_SKMEMINFO))
    return requests


def socket_bytes(link=None):
    """Bytes the sockets of a network namespace hold in kernel buffers: what is queued to be
    read or sent on every Unix, TCP and UDP socket (from the kernel's socket diagnostics). A
    full Unix socket pair holds about 400 KB that no process's memory, file or limit counts;
    thousands of them, gigabytes. The namespace is `link`'s, a NETLINK_SOCK_DIAG socket made
    there (`diagnostics_socket`), else this process's. 0 for what cannot be read."""
    import struct

    own = link is None
    if own:
        link = diagnostics_socket()
        if link is None:
            return 0
    else:  # a kept socket: what an earlier count left unread (one cut short) is not this one's
        _drain(link)
    total = 0
    try:
        link.settimeout(1.0)
        for sequence, (request, fixed, attribute) in enumerate(_diag_requests(), 1):
            try:
                link.send(struct.pack("=IHHII", 16 + len(request), _BY_FAMILY, _DUMP_REQUEST, sequence, 0) + request)
                total += _dumped_bytes(link, sequence, fixed, attribute)
            except (OSError, struct.error):
                continue
    finally:
        if own:
            link.close()
    return total


def _drain(link):
    try:
        link.setblocking(False)
        while link.recv(65536):
            pass
    except OSError:  # (nothing left: BlockingIOError)
        pass


def diagnostics_socket():
    """A socket that asks the kernel about the sockets of this process's network namespace
    (and keeps asking about that namespace wherever it is passed); None where there is none.
    A bare `_socket.socket`, which has every method `socket_bytes` and the runner call on it:
    importing `socket` would cost every one-shot sample 1.5-3 ms."""
    import _socket

    try:
        return _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, _SOCK_DIAG)
    except (OSError, AttributeError):
        return None


def is_diagnostics_socket(sock):
    """Whether `sock` (received from elsewhere) is a NETLINK_SOCK_DIAG socket."""
    import socket

    try:
        return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN) == socket.AF_NETLINK
                and sock.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL) == _SOCK_DIAG)
    except OSError:
        return False


def _dumped_bytes(link, sequence, fixed, attribute):
    """The buffered bytes of every socket in one dump's replies, until its end."""
    import struct

    total = 0
    while True:
        data = link.recv(65536)
        offset = 0
        while offset + 16 <= len(data):
            length, kind, _, seq, _ = struct.unpack_from("=IHHII", data, offset)
            if length < 16:
                return total
            if seq == sequence:
                if kind in (_NLMSG_DONE, _NLMSG_ERROR):
                    return total
                # (a Unix socket's state is the third byte of its record)
                listening = attribute == _UNIX_MEMINFO and data[offset + 18] == _LISTENING
                total += _buffered(data[offset + 16 + fixed:offset + length], attribute, listening)
            offset += (length + 3) & ~3
        if not data:
            return total


def _buffered(attributes, wanted, listening):
    """What one socket holds queued, from its netlink attributes: what its sk_meminfo (`wanted`)
    charges it, and for a Unix socket that is not `listening` the bytes waiting in its receive
    queue too. Those are charged to the sender while it lives, and to nothing a dump shows
    once it has closed its end (so a live pair's queue counts twice: erring high)."""
    import struct

    total, offset = 0, 0
    while offset + 4 <= len(attributes):
        length, kind = struct.unpack_from("=HH", attributes, offset)
        if length < 4:
            break
        if kind == wanted and length >= 4 + 6 * 4:
            info = struct.unpack_from("=6I", attributes, offset + 4)
            total += info[_RMEM_ALLOC] + max(info[_WMEM_ALLOC], info[_WMEM_QUEUED])
        elif kind == _UNIX_RQLEN and wanted == _UNIX_MEMINFO and not listening and length >= 12:
            total += struct.unpack_from("=I", attributes, offset + 4)[0]
        offset += (length + 3) & ~3
    return total


def _device(path):
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


class Budget:
    """The memory one sample may hold: private memory of its processes + its files on the
    tmpfs mounts + the removed files its processes keep open + what its work directory grew
    by, where that is not on a tmpfs, and the removed files there its processes keep mapped
    + (`namespaces`: its IPC and network namespaces are the sample's alone) the System V
    segments made since, and while it runs what its sockets hold queued in the kernel."""

    def __init__(self, limit_bytes, tmpfs=(), workdir=None, workdir_base=None, inherited=frozenset(),
                 namespaces=False, link=None):
        self.limit = limit_bytes
        self.tmpfs = tuple(tmpfs)
        self.tmpfs_base = sum(filesystem_used(path) for path in self.tmpfs)
        self.tmpfs_devices = {_device(path) for path in self.tmpfs} - {None}
        self.sysv_base = sysv_shm_bytes() if namespaces else None
        # No base for sockets: counting them takes a dump of the kernel's socket tables (about
        # 0.5 ms), and the server's own sockets hold nothing queued while a sample runs. True:
        # this process's namespace, through a socket made for each count; a socket (`link`:
        # one this process made, before a seccomp filter that denies it more; or one made in
        # the sample's namespace and passed here): that socket's namespace; None: not counted.
        self.sockets = (True if link is None else link) if namespaces else None
        self.inherited = inherited
        self.workdir, self.workdir_device, self.workdir_base, self.workdir_grown = None, None, 0, 0
        self.workdir_start = 0
        self.deep_from_start, self.mapped, self.next_walk = False, {}, 0.0
        self.peak = 0
        if workdir:
            self.watch(workdir, workdir_base)

    def watch(self, workdir, base=None):
        """Count what `workdir` grows by from `base` bytes (None: what it holds now; 0 for a
        directory just made), while it holds more than it does now. A work directory on the
        tmpfs is counted with it; one elsewhere (a host directory: the subprocess engine's, a
        split or project sample's) is walked, and the removed files there that the sample
        keeps mapped are counted too."""
        device = _device(workdir)
        if device is None or device in self.tmpfs_devices:
            return
        self.workdir, self.workdir_device = workdir, device
        started = time.monotonic()
        # A tree already deeper than the walk goes (a project's) is counted as deep as it goes,
        # and its depth is never held against the sample.
        self.workdir_start, self.deep_from_start = _walk(workdir)
        self.workdir_base = self.workdir_start if base is None else base
        self._schedule(started)

    def _schedule(self, walk_started):
        ended = time.monotonic()
        gap = (ended - walk_started) * (1 - _WALK_SHARE) / _WALK_SHARE
        self.next_walk = ended + min(gap, _WALK_GAP_MAX_S)

    def used(self, pids, holders=None, running=True):
        """What the sample holds now, given the pids of its processes whose memory counts, and
        of those whose open files count (`holders`; default the same); its sockets only while
        it is `running` (they close with its processes)."""
        holders = pids if holders is None else holders
        total = sum(private_bytes(pid) for pid in pids)
        if self.tmpfs:
            total += max(0, sum(filesystem_used(path) for path in self.tmpfs) - self.tmpfs_base)
        if self.sysv_base is not None:
            total += max(0, sysv_shm_bytes() - self.sysv_base)
        if running and self.sockets is not None:
            total += socket_bytes(None if self.sockets is True else self.sockets)
        opened = open_deleted_sizes(holders, self.tmpfs_devices, self.inherited)
        total += sum(opened.values())
        if self.workdir:
            started = time.monotonic()
            if started >= self.next_walk:
                # Read at the walk's pace: a large process's maps take milliseconds.
                self.mapped = mapped_deleted_sizes(holders, self.workdir_device, self.inherited)
                # (A walk stops once the budget is passed: its length is bounded too.)
                grown, too_deep = _walk(self.workdir, self.workdir_base + self.limit - total)
                if too_deep and not self.deep_from_start:
                    grown = self.workdir_base + self.limit + 1
                # Held against it only while it adds to what it started with: given an earlier
                # `base` (an agent's episode), a command that cleans up is never stopped.
                self.workdir_grown = max(0, grown - self.workdir_base) if grown > self.workdir_start else 0
                self._schedule(started)
            total += self.workdir_grown + sum(size for key, size in self.mapped.items() if key not in opened)
        self.peak = max(self.peak, total)
        return total

    def exceeded(self, pids, holders=None, running=True):
        return self.used(pids, holders, running) > self.limit

    def exceeded_at_end(self):
        """Whether the files the sample left (on the tmpfs, in the work directory: its
        processes are gone) pass the budget; the work directory is walked now, whatever the
        walk's pace."""
        if not (self.tmpfs or self.workdir or self.sysv_base is not None):
            return False
        self.next_walk = 0.0
        return self.exceeded([], holders=[], running=False)
