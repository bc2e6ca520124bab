"""Resource limits for a process in the sandbox; stdlib only.

Used by the test runner (`knowbench_runner`) before it runs a sample and by the shell
wrapper (`knowbench_shell`) before it execs a command: the same rlimits from the same
`Limits` record, then the sample's uid when the sandbox drops privileges.
"""

import os
import resource


def vm_size_bytes():
    """This process's address space now (its interpreter's baseline): the first field of
    /proc/self/statm, in pages (VmSize of /proc/self/status, which costs the kernel far more
    to write out: this runs in every sample's process)."""
    return _statm_bytes(0)


def resident_bytes():
    """This process's resident memory now (the second field of /proc/self/statm)."""
    return _statm_bytes(1)


def _statm_bytes(field):
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        try:
            return int(os.read(fd, 128).split()[field]) * resource.getpagesize()
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        return 0


def set_limits(limits, nproc_base):
    """Set the rlimits of `limits` (a `Limits` record as a dict) on this process: address
    space over its present size, CPU, file size, open files, no core files and, when
    `nproc_base` is not None, processes and threads of the uid."""
    mb = 1024 * 1024
    address_space = vm_size_bytes() + limits["memory_mb"] * mb
    pairs = [
        (resource.RLIMIT_AS, address_space, address_space),
        (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb, limits["file_size_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"]),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    # RLIMIT_NPROC counts threads too: it bounds both together, at the thread limit, so
    # that threads are not held to the process limit; the engine counts processes apart.
    if nproc_base is not None:
        nproc = nproc_base + limits["threads"]
        pairs.append((resource.RLIMIT_NPROC, nproc, nproc))
    for kind, soft, hard in pairs:
        _, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
            soft = min(soft, hard)
        resource.setrlimit(kind, (soft, hard))
    # The first the kernel kills when memory runs out, in the server's memory cgroup (never
    # the server first) and on the machine. Any process may raise its own. (A descriptor, not
    # a text stream: this runs in every sample's process, and `open` builds three objects and
    # looks up the locale's encoding to write four bytes.)
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, b"1000")
        finally:
            os.close(fd)
    except OSError:
        pass


_PR_SET_DUMPABLE = 4
_UNDUMPABLE = [False]  # turned off in this process (or the server it was forked from)


def fresh_signals(python=True):
    """Give this process the signal state of a program started from a terminal: nothing
    blocked, nothing ignored, but what Python sets as it starts (`python`): SIGINT raises
    KeyboardInterrupt, SIGPIPE and SIGXFSZ are ignored. Both the mask and ignored signals
    survive fork and exec: Ray's workers block SIGINT, and a shell ignores SIGINT and SIGQUIT
    in what it starts in the background, so a test that interrupts a child passed on one
    engine and not on another. (The two real-time signals the C library keeps for itself are
    out of reach, and no program uses them.) Main thread only."""
    import signal

    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    kept = (signal.SIGPIPE, signal.SIGXFSZ) if python else ()
    for number in signal.valid_signals():
        if number in kept:
            continue
        try:
            if signal.getsignal(number) == signal.SIG_IGN:
                default = signal.default_int_handler if python and number == signal.SIGINT else signal.SIG_DFL
                signal.signal(number, default)
        except (OSError, ValueError, RuntimeError):
            continue


_LIBC = []


def libc():
    """This process's C library through `ctypes` (errno kept), opened once: a fork server
    calls it after every sample, and a once-mode sample's process never imports `ctypes`."""
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def set_dumpable(on):
    """Whether processes of this uid may open this process's memory (`/proc/PID/mem`,
    `ptrace`, `process_vm_writev`, `pidfd_getfd`). Inherited by `fork`, reset by `exec`.

    A fork server turns it off for itself, and so for the next sample's process it prepares
    while a sample runs: when knowbench is not root, that sample has their uid, and could
    otherwise write code into the process that will judge the next sample (or into the
    server). A sample's process turns it back on once it is the sample and has dropped
    privileges (`drop_privileges`): the server, with no capabilities, reads its memory use in
    `/proc/PID/smaps_rollup` only then, and nothing but the sample itself runs under its uid
    by that time. False when the kernel refused."""
    done = libc().prctl(_PR_SET_DUMPABLE, int(on), 0, 0, 0) == 0
    _UNDUMPABLE[0] = not on and done
    return done


def drop_privileges(uid, gid):
    """Become `uid`/`gid` (no supplementary groups) when running as root (the kernel then
    makes the process undumpable: the root server still reads it). Else stay, dumpable (see
    `set_dumpable`)."""
    if uid is None or os.geteuid() != 0:
        if _UNDUMPABLE[0]:
            set_dumpable(True)
        return
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
