"""knowbench run by a user without root: every process of a fork server's sandbox then has
that user's uid (no sandbox uid to drop to), so what keeps samples apart is the kernel's
dumpable flag (`knowbench_limits.set_dumpable`), not ownership.

The engine runs in a child process as an unprivileged uid. Skipped where this suite does not
run as root or that uid cannot reach the interpreter and the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534

# Runs as NOBODY: one fork server (bwrap), an in-process sample that tries to open the memory
# of every other process of its sandbox for writing (the server, and the process the server
# prepared for the next sample), then a sample over its memory budget.
ENGINE = r'''
import json, sys
from textwrap import dedent
sys.path.insert(0, sys.argv[1])
from helpers import make_request
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import resolve_sandbox

PROBE = dedent("""
    import os

    def add(a, b):
        me, server = os.getpid(), os.getppid()
        others = [server]
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != me:
                try:
                    with open("/proc/%s/stat" % name) as handle:
                        if int(handle.read().rsplit(")", 1)[1].split()[1]) == server:
                            others.append(int(name))
                except OSError:
                    pass
        opened = []
        for pid in others:
            try:
                with open("/proc/%d/mem" % pid, "r+b", buffering=0):
                    opened.append(pid)
            except OSError:
                pass
        with open("/proc/%d/mem" % me, "r+b", buffering=0):
            pass  # (its own: always)
        # The sandbox's init runs under the same uid and guards nothing: hidden, untraceable
        try:
            channels = sorted(os.readlink("/proc/1/fd/" + fd).split(":")[0] for fd in os.listdir("/proc/1/fd")
                              if os.readlink("/proc/1/fd/" + fd).startswith(("pipe:", "socket:")))
        except OSError:
            channels = "hidden"
        import ctypes
        attached = ctypes.CDLL(None).ptrace(16, 1, 0, 0)  # PTRACE_ATTACH to the init
        if attached == 0:
            ctypes.CDLL(None).ptrace(17, 1, 0, 0)  # (PTRACE_DETACH: the run goes on to fail)
        raise AssertionError("uid %d saw %d other processes, opened %r; init holds %r, attached %r"
                             % (os.getuid(), len(others), opened, channels, attached))
""")
HOG = dedent("""
    def add(a, b):
        hoard = bytearray(400 * 1024 * 1024)
        for i in range(0, len(hoard), 4096):
            hoard[i] = 1
        return a + b
""")
POISON = dedent("""
    import os
    import resource

    def add(a, b):
        server = os.getppid()
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open("/proc/%s/stat" % name) as handle:
                        parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                    if int(name) == server or (parent == server and int(name) != os.getpid()):
                        resource.prlimit(int(name), resource.RLIMIT_FSIZE, (0, 0))
                except OSError:
                    pass
        return a + b
""")
WRITER = dedent("""
    def add(a, b):
        with open("written", "w") as handle:
            handle.write("x" * 100)
        return a + b
""")
# Beside an interpreter under the host's /tmp: the directory bwrap made on the sandbox's /tmp
# to hold it, this uid's, like every sample.
PUT = dedent("""
    import os, sys

    def add(a, b):
        beside = os.path.dirname(sys.prefix)
        open(os.path.join(beside, "planted"), "w").close()
        os.mkdir(os.path.join(beside, "planted-dir"))
        return a + b
""")
LOOK = dedent("""
    import os, sys

    def add(a, b):
        beside = os.path.dirname(sys.prefix)
        assert os.listdir(beside) == ["venv"], os.listdir(beside)
        return a + b
""")
TESTS = "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
venv_python = sys.argv[2]
engine = ForkServerEngine(resolve_sandbox("bwrap", python=venv_python), workers=1, python=venv_python)
try:
    beside = [engine.execute(make_request(code, TESTS, "add", wall_s=20.0)) for code in (PUT, LOOK, PUT, LOOK)]
finally:
    engine.close()
engine = ForkServerEngine(resolve_sandbox("bwrap"), workers=1)
try:
    probe = engine.execute(make_request(PROBE, TESTS, "add", wall_s=20.0))
    hog = engine.execute(make_request(HOG, TESTS, "add", wall_s=20.0, memory_mb=128))
    poison = engine.execute(make_request(POISON, TESTS, "add", wall_s=20.0))
    after = [engine.execute(make_request(WRITER, TESTS, "add", wall_s=20.0)) for _ in range(2)]
finally:
    engine.close()
print(json.dumps({"probe": probe.tests[0].message, "hog": [probe.status, hog.status,
                  [t.reason for t in hog.tests]],
                  "poisoned": [poison.status, *(e.status for e in after), *(e.tests[0].message[-300:] for e in after)],
                  "beside": [e.status for e in beside] + [e.tests[0].message[-300:] for e in beside]}))
'''


def _as_nobody(*command: str, cwd: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cwd, "TMPDIR": cwd,
           "PYTHONPATH": str(REPO / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(command, cwd=cwd, env=env, user=NOBODY, group=NOBODY, extra_groups=[],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def unprivileged_dir() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the engine as another, unprivileged uid")
    base = tempfile.mkdtemp(prefix="knowbench-nobody-")
    os.chmod(base, 0o777)
    try:
        reach = _as_nobody(sys.executable, "-c", "import knowbench, pydantic", cwd=base)
        problem = reach.stderr.strip()[-200:] if reach.returncode != 0 else None
    except OSError as error:
        problem = str(error)
    if problem is not None:
        subprocess.run(["rm", "-rf", base], check=False)
        pytest.skip(f"uid {NOBODY} cannot run this interpreter or import the checkout: {problem}")
    yield base
    subprocess.run(["rm", "-rf", base], check=False)


@pytest.fixture(scope="module")
def seen(unprivileged_dir: str) -> Iterator[dict[str, Any]]:
    """What `ENGINE` saw, run once as the unprivileged uid; given a venv under /tmp too."""
    root = tempfile.mkdtemp(prefix="knowbench-nobody-venv-", dir="/tmp")
    try:
        os.chmod(root, 0o755)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.path.join(root, "venv")], check=True)
        done = _as_nobody(sys.executable, "-c", ENGINE, str(REPO / "tests"), os.path.join(root, "venv", "bin", "python"),
                          cwd=unprivileged_dir)
        assert done.returncode == 0, done.stderr[-2000:]
        yield json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["rm", "-rf", root], check=False)


@pytest.mark.slow
def test_a_sample_cannot_write_into_the_server_or_the_next_samples_process(seen: dict[str, Any]) -> None:
    """Not the server, nor the process prepared for the next sample (same uid, same PID
    namespace): code written there would judge the next sample, with its nonce; nor the
    server's requests and replies through the sandbox's init (reopened from /proc/1/fd, they
    would hand it the next request). The memory budget still reads the sample's own
    processes."""
    assert f"uid {NOBODY} saw 2 other processes, opened []; init holds 'hidden', attached -1" in seen["probe"], seen
    assert seen["hog"] == ["fail", "memory", ["memory"]], seen


@pytest.mark.slow
def test_limits_a_sample_lowers_for_later_samples_get_the_server_replaced(seen: dict[str, Any]) -> None:
    """`prlimit` on another process needs only its uid (not dumpable): a sample that lowers the
    server's and the prepared process's file size limit would fail every later sample that
    writes a file. The server compares what later samples inherit after each sample and is
    replaced when it changed."""
    assert seen["poisoned"][:3] == ["pass", "pass", "pass"], seen["poisoned"]


@pytest.mark.slow
def test_what_a_sample_puts_beside_an_interpreter_under_tmp_is_gone_for_the_next(seen: dict[str, Any]) -> None:
    """bwrap makes the directories that lead to an interpreter under the host's /tmp on the
    sandbox's private /tmp; run by this uid, they are the samples' uid too, so a sample can
    write there (the first and third samples do), and the walk that empties /tmp after each
    sample must empty them too, though it cannot remove them (they hold the mount)."""
    assert seen["beside"][:4] == ["pass"] * 4, seen["beside"]
