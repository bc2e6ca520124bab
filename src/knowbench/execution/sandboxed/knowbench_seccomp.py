"""Seccomp filters for samples' processes: the candidate's in split execution, and a smaller
one for every other sample (tests judged in-process, a split judge); stdlib only.

Every sample is denied tracing and reading or writing other processes' memory and
descriptors: a fork server's samples share its sandbox, whose init runs as knowbench's uid
when knowbench is not root; code planted there would reach later samples. So are the
kernel's keyrings: they belong to a uid, not to a sandbox, and outlive it; a sample judged
in-process, which may read its tests, could leave their expected values there for a later
candidate of the same uid (the sandbox hides /proc/keys too). And every sample is denied a
user namespace of its own (`_NAMESPACE_CALLS`), where it would hold every capability.

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
# The calls that make namespaces, per machine: (clone, unshare, clone3). Every sample is denied
# a user namespace of its own: in one it holds every capability, and can mount a tmpfs or make
# a network or IPC namespace whose files, sockets and segments its budget never sees (the
# server counts its sandbox's own). `clone` and `unshare` are refused that flag; `clone3`,
# whose flags a filter cannot read (they are in memory), answers ENOSYS, and the C library
# then makes threads and processes with `clone`.
_NAMESPACE_CALLS = {"x86_64": (56, 272, 435), "aarch64": (220, 97, 435)}
_CLONE_NEWUSER = 0x10000000
_HARD_LINKS = frozenset({"link", "linkat"})
# What every sample's process is denied (a fork server's samples share its sandbox, and its
# init, with later samples): another process's memory and descriptors, and the uid's keyrings.
_SAMPLE_DENIED = frozenset({"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
                            "add_key", "request_key", "keyctl"})
_X32_SYSCALL_BIT = 0x40000000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO_EPERM, _RET_ERRNO_ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
_FIRST_ARGUMENT = 16  # seccomp_data: nr, arch, instruction_pointer, then args[0] (its low word)
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _Filter(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _program(arch, denied, namespace_calls):
    """BPF: a foreign architecture, an x32 call or a denied number gets EPERM; `clone` or
    `unshare` (`namespace_calls`: clone, unshare, clone3) asking for a user namespace gets
    EPERM, and `clone3` ENOSYS; else allow.

    A jump's target is its own index + 1 + its offset.
    """
    numbers = sorted(denied)
    clone, unshare, clone3 = namespace_calls
    flags = 5 + len(numbers) + 4       # where the first argument is read
    refuse, no_such_call = flags + 3, flags + 4

    def to(target, index):
        return target - index - 1

    code = [
        (_LD_W_ABS, 0, 0, 4),                                  # 0: the architecture
        (_JEQ_K, 1, 0, arch),                                  # 1: ours: on to 3
        (_RET_K, 0, 0, _RET_ERRNO_EPERM),                      # 2: foreign: refuse
        (_LD_W_ABS, 0, 0, 0),                                  # 3: the system call number
        (_JGE_K, to(refuse, 4), 0, _X32_SYSCALL_BIT),          # 4: the x32 ABI: refuse
    ]
    for number in numbers:
        code.append((_JEQ_K, to(refuse, len(code)), 0, number))
    code.append((_JEQ_K, to(no_such_call, len(code)), 0, clone3))
    for number in (clone, unshare):
        code.append((_JEQ_K, to(flags, len(code)), 0, number))
    code.append((_RET_K, 0, 0, _RET_ALLOW))
    assert len(code) == flags
    code += [
        (_LD_W_ABS, 0, 0, _FIRST_ARGUMENT),                    # clone's or unshare's flags
        (_JSET_K, to(refuse, flags + 1), 0, _CLONE_NEWUSER),   # a user namespace: refuse
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, _RET_ERRNO_EPERM),                      # refuse
        (_RET_K, 0, 0, _RET_ERRNO_ENOSYS),                     # no_such_call
    ]
    return code


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
    entry = _ARCHES.get(platform.machine())
    if entry is None:
        return False
    arch, denied = entry
    if role != "candidate":
        denied = {number: name for number, name in denied.items() if name in _SAMPLE_DENIED}
    elif kernel_protects_hard_links():
        denied = {number: name for number, name in denied.items() if name not in _HARD_LINKS}
    code = _program(arch, denied, _NAMESPACE_CALLS[platform.machine()])
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
