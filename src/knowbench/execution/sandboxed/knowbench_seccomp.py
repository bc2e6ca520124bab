"""Seccomp filters for samples' processes: the candidate's in split execution, and a smaller
one for every other sample (tests judged in-process, a split judge); stdlib only.

Every sample is denied tracing and reading or writing other processes' memory and
descriptors: a fork server's samples share its sandbox, whose init runs as knowbench's uid
when knowbench is not root; code planted there would reach later samples. So are the
kernel's keyrings: they belong to a uid, not to a sandbox, and outlive it; a sample judged
in-process, which may read its tests, could leave their expected values there for a later
candidate of the same uid (the sandbox hides /proc/keys too). And every sample is denied a
user namespace of its own, sockets of the families and protocols the memory budget cannot
count, `vmsplice` and extended attributes (`_GUARDED`).

The candidate shares its work directory with the judge, which opens the files the
candidate writes there. Denying the system calls that make links and special files
(symlinks, hard links, FIFOs, device nodes) means every name the candidate leaves there is
a plain file or directory it made itself, so a test never reads through a link into the
judge's own files and never blocks on a FIFO. Tracing and reading other processes' memory
are denied as well (a second layer: the judge already runs under another uid, in another
PID namespace).

Hard links are allowed where the kernel already restricts them (`fs.protected_hardlinks`
= 1: a uid may link only files it owns or may read and write). A link to such a file gives
nothing a plain file would not: the judge's files, under the judge's uid, cannot be linked.
glibc's `sem_open`, and so every `multiprocessing` lock, queue and pool, makes a named
semaphore by linking a file into /dev/shm; with the kernel unprotected they do not work in
the candidate's process.
"""

import ctypes
import platform
import struct

from knowbench_limits import libc

_ARCHES = {
    # machine: (AUDIT_ARCH, {syscall numbers to deny})
    "x86_64": (0xC000003E, {88: "symlink", 266: "symlinkat", 86: "link", 265: "linkat",
                            133: "mknod", 259: "mknodat", 101: "ptrace",
                            310: "process_vm_readv", 311: "process_vm_writev", 438: "pidfd_getfd",
                            248: "add_key", 249: "request_key", 250: "keyctl"}),
    "aarch64": (0xC00000B7, {36: "symlinkat", 37: "linkat", 33: "mknodat", 117: "ptrace",
                             270: "process_vm_readv", 271: "process_vm_writev", 438: "pidfd_getfd",
                             217: "add_key", 218: "request_key", 219: "keyctl"}),
}
# The calls whose arguments the filter reads, or whose refusal is not EPERM, per machine.
# - Every sample is denied a user namespace of its own: in one it holds every capability, and
#   can mount a tmpfs or make a network or IPC namespace whose files, sockets and segments its
#   budget never sees (the server counts its sandbox's own). `clone` and `unshare` are refused
#   that flag; `clone3`, whose flags a filter cannot read (they are in memory), answers ENOSYS,
#   and the C library then makes threads and processes with `clone`.
# - Kernel memory the memory budget cannot count: sockets other than Unix, TCP and UDP ones (the
#   budget asks the kernel about those: a netlink, UDP-Lite or MPTCP socket held a gigabyte
#   unseen), a user page a pipe keeps after `vmsplice` (a huge page per 4 KB pipe slot), and
#   extended attributes (a tmpfs keeps them outside the blocks its usage counts). `socket` is
#   refused other families (EAFNOSUPPORT) and other protocols (EPROTONOSUPPORT); `vmsplice`
#   EPERM; setting an extended attribute ENOTSUP, as on a file system without them (what
#   `shutil.copy2` expects).
# - io_uring (setup, enter, register: ENOSYS, as on a kernel without it, so libraries fall back
#   to plain calls): its operations make links, sockets and extended attributes with no system
#   call this filter sees.
# - The candidate's: a lease or a directory notification (`fcntl` F_SETLEASE, F_NOTIFY), with
#   which it could hold the judge's next open of a file it made, or learn the moment the tests
#   write one, and act between two of the tests' steps.
_GUARDED = {
    "x86_64": {"clone": 56, "unshare": 272, "clone3": 435, "socket": 41, "vmsplice": 278,
               "xattrs": (188, 189, 190, 463), "fcntl": 72, "io_uring": (425, 426, 427)},
    "aarch64": {"clone": 220, "unshare": 97, "clone3": 435, "socket": 198, "vmsplice": 75,
                "xattrs": (5, 6, 7, 463), "fcntl": 25, "io_uring": (425, 426, 427)},
}
_F_SETLEASE, _F_NOTIFY = 1024, 1026
_CLONE_NEWUSER = 0x10000000
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_PROTOCOLS = (0, 6, 17)  # the family's default, TCP, UDP
_HARD_LINKS = frozenset({"link", "linkat"})
# What every sample's process is denied (a fork server's samples share its sandbox, and its
# init, with later samples): another process's memory and descriptors, and the uid's keyrings.
_SAMPLE_DENIED = frozenset({"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
                            "add_key", "request_key", "keyctl"})
_X32_SYSCALL_BIT = 0x40000000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS, _EPROTONOSUPPORT, _ENOTSUP, _EAFNOSUPPORT = 1, 38, 93, 95, 97
_ARGUMENT = 16  # seccomp_data: nr, arch, instruction_pointer, then args[] (8 bytes each, low word first)
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _Filter(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _program(arch, denied, guarded, leases=True):
    """BPF: a foreign architecture, an x32 call or a denied number gets EPERM, and the
    `guarded` calls (`_GUARDED`) what their comment says (`leases` False: `fcntl`'s leases and
    notifications too); anything else is allowed.

    Written with labels: a jump names the instruction it goes to, and its offset (the target's
    index less its own, less 1) is filled in at the end.
    """
    code, labels = [], {}

    def op(code_, k, yes=None, no=None):
        code.append((code_, yes, no, k))

    def label(name):
        labels[name] = len(code)

    def refuse(errno):
        return f"errno {errno}"

    op(_LD_W_ABS, 4)                                     # the architecture
    op(_JEQ_K, arch, no=refuse(_EPERM))                  # foreign: refuse
    op(_LD_W_ABS, 0)                                     # the system call number
    op(_JGE_K, _X32_SYSCALL_BIT, yes=refuse(_EPERM))     # the x32 ABI: refuse
    for number in [*sorted(denied), guarded["vmsplice"]]:
        op(_JEQ_K, number, yes=refuse(_EPERM))
    for number in guarded["xattrs"]:
        op(_JEQ_K, number, yes=refuse(_ENOTSUP))
    for number in (guarded["clone3"], *guarded["io_uring"]):
        op(_JEQ_K, number, yes=refuse(_ENOSYS))
    op(_JEQ_K, guarded["clone"], yes="flags")
    op(_JEQ_K, guarded["unshare"], yes="flags")
    op(_JEQ_K, guarded["socket"], yes="family")
    if not leases:
        op(_JEQ_K, guarded["fcntl"], yes="fcntl")
    op(_RET_K, _RET_ALLOW)
    label("flags")                                       # clone's or unshare's flags
    op(_LD_W_ABS, _ARGUMENT)
    op(_JSET_K, _CLONE_NEWUSER, yes=refuse(_EPERM))
    op(_RET_K, _RET_ALLOW)
    label("family")                                      # socket(family, type, protocol)
    op(_LD_W_ABS, _ARGUMENT)
    op(_JEQ_K, _AF_UNIX, yes="allow")
    op(_JEQ_K, _AF_INET, yes="protocol")
    op(_JEQ_K, _AF_INET6, yes="protocol", no=refuse(_EAFNOSUPPORT))
    label("protocol")
    op(_LD_W_ABS, _ARGUMENT + 16)
    for protocol in _PROTOCOLS:
        op(_JEQ_K, protocol, yes="allow")
    op(_RET_K, _RET_ERRNO | _EPROTONOSUPPORT)
    if not leases:
        label("fcntl")                                   # fcntl(fd, command, ...)
        op(_LD_W_ABS, _ARGUMENT + 8)
        op(_JEQ_K, _F_SETLEASE, yes=refuse(_EPERM))
        op(_JEQ_K, _F_NOTIFY, yes=refuse(_EPERM), no="allow")
    label("allow")
    op(_RET_K, _RET_ALLOW)
    for errno in (_EPERM, _ENOSYS, _ENOTSUP, _EAFNOSUPPORT):
        label(refuse(errno))
        op(_RET_K, _RET_ERRNO | errno)

    def offset(target, index):
        if target is None:
            return 0
        jump = labels[target] - index - 1
        assert 0 <= jump <= 255, (target, jump)
        return jump

    return [(code_, offset(yes, index), offset(no, index), k)
            for index, (code_, yes, no, k) in enumerate(code)]


def kernel_protects_hard_links():
    """Whether fs.protected_hardlinks is on (read as the filter is built: by the candidates'
    server, before any candidate exists)."""
    try:
        with open("/proc/sys/fs/protected_hardlinks") as handle:
            return handle.read().strip() == "1"
    except (OSError, ValueError):
        return False


_PREPARED = {}  # role -> (prctl, the filter, the buffer it points to), made once per process


def prepare(role="candidate"):
    """Build the filter for `role` and bind `prctl` now (a fork server, before any sample
    exists), so that `install` in each sample's process only makes the two calls: reading the
    machine, the sysctl and loading libc cost about 0.5 ms in a freshly forked process. A
    candidate's filter denies all of `_ARCHES`' calls, any other sample's `_SAMPLE_DENIED`.
    False where there is no filter for this machine."""
    if role in _PREPARED:
        return True
    machine = platform.machine()
    entry = _ARCHES.get(machine)
    if entry is None:
        return False
    arch, denied = entry
    if role != "candidate":
        denied = {number: name for number, name in denied.items() if name in _SAMPLE_DENIED}
    elif kernel_protects_hard_links():
        denied = {number: name for number, name in denied.items() if name not in _HARD_LINKS}
    code = _program(arch, denied, _GUARDED[machine], leases=role != "candidate")
    raw = b"".join(struct.pack("HBBI", *instruction) for instruction in code)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    program = _Filter(len(code), ctypes.cast(buffer, ctypes.c_void_p))
    try:
        prctl = libc().prctl
    except (OSError, AttributeError):
        return False
    _PREPARED[role] = (prctl, program, buffer)
    return True


def install(role="candidate"):
    """Install `role`'s filter in this process and its future children. True when installed."""
    if not prepare(role):
        return False
    prctl, program, _ = _PREPARED[role]
    try:
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) == 0
    except (OSError, AttributeError):
        return False
