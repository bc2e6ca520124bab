"""Hostile samples: none may pass a single test item, and none may change the host.

One conformance table, run against every sandbox this machine has (bwrap, unshare). Each
case is written so that its tests pass only if the attack worked: a passing item means the
engine was fooled or the sandbox leaked. After each case the host is checked: canary files
unchanged, nothing written outside the work directory, no connection reached the test's
own servers, no process of a sandbox uid left behind.

Programs and tests are `string.Template`s: `$name` is replaced by a value of `Host.values()`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import socket
import stat
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import pytest

from helpers import make_request
from knowbench.errors import UserError
from knowbench.execution.engine import SANDBOX_UID_BASE, Engine, SubprocessEngine
from knowbench.execution.forkserver import ForkServerEngine
from knowbench.execution.sandbox import resolve_sandbox

REPO = Path(__file__).resolve().parents[1]
SANDBOX_UIDS = range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + 64)
SMALL_LIMITS: dict[str, Any] = {"wall_s": 3.0, "memory_mb": 256, "cpu_s": 5}
# Imported by the runner before it drops privileges, so that an attack does not fail merely
# because the sandbox uid cannot import a module (see test_sandbox_imports_without_preload).
PRELOAD = ("socket", "ctypes", "resource", "signal", "threading", "types", "gc", "json", "select",
           "errno", "builtins", "unittest")
NO_FS_ISOLATION = ("unshare gives the sample no mount isolation: the host file system is visible "
                   "and writable wherever its permissions allow")
NO_HIDING = "unshare cannot hide paths: the repository/benchmark is readable by any uid"


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@dataclass(frozen=True)
class Case:
    id: str
    program: str
    tests: dict[str, str]
    limits: dict[str, Any] = field(default_factory=dict)
    preload: tuple[str, ...] = ()
    unshare_gap: str = ""  # why this case cannot hold under unshare: expected to fail there
    linger_s: float = 0.0  # watch the host this long after the sample ended


HONEST_ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = "def add(a, b):\n    return a - b\n"
# Pass with an honest add: the sample must not pass them by exiting or crashing early.
T_TRUE = {"t": "def test_a():\n    assert add(1, 2) == 3\n\n\ndef test_b():\n    assert add(2, 2) == 4\n"}
# False for every add: only a forged verdict passes them.
T_FALSE = {"t": "def test_a():\n    assert add(1, 2) == 4\n\n\ndef test_b():\n    assert add(2, 2) == 5\n"}
T_UNITTEST_FALSE = {"t": dedent("""
    import unittest


    class TestAdd(unittest.TestCase):
        def test_a(self):
            self.assertEqual(add(1, 2), 4)

        def test_b(self):
            self.assertTrue(add(2, 2) == 5)
""")}
T_UNITTEST_RAISES = {"t": dedent("""
    import unittest


    class TestAdd(unittest.TestCase):
        def test_a(self):
            with self.assertRaises(TypeError):
                add(1, 2)

        def test_b(self):
            with self.assertRaises(ValueError):
                add(2, 2)
""")}
T_PYTEST_APPROX = {"t": dedent("""
    import pytest


    def test_a():
        assert add(0.1, 0.2) == pytest.approx(0.4)


    def test_b():
        assert add(2.0, 2.0) == pytest.approx(5.0)
""")}
T_PYTEST_RAISES = {"t": dedent("""
    import pytest


    def test_a():
        with pytest.raises(TypeError):
            add(1, 2)


    def test_b():
        with pytest.raises(ValueError):
            add(2, 2)
""")}

# Writes forged result records (for every item, with guessed nonces) to fds 1..20.
FORGE = dedent("""
    import json
    import os

    def _forge(nonces=("", "0" * 32, None)):
        records = [{"item": item, "status": "pass", "message": "", "duration_s": 0.0, "nonce": nonce}
                   for nonce in nonces for item in ("t::test_a", "t::test_b")]
        records += [{"done": True, "nonce": nonce} for nonce in nonces]
        data = "".join(json.dumps(record) + "\\n" for record in records).encode()
        for fd in range(1, 21):
            try:
                os.write(fd, data)
            except OSError:
                pass
""")

# Finds the runner's frame from inside the sample.
FRAME_WALK = dedent("""
    import sys

    def _runner_locals(name):
        frame = sys._getframe()
        while frame is not None and name not in frame.f_locals:
            frame = frame.f_back
        return frame.f_locals
""")

PARENT_GONE = dedent("""
    import os
    import signal
    import time

    def _parent_gone(kill):
        parent = os.getppid()
        kill(parent)
        time.sleep(0.3)
        if parent == 0:  # the parent is outside this pid namespace: nothing was proven
            return False
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            return True
        return False
""")


def write_case(case_id: str, path: str, marker: str, gap: str = "") -> Case:
    """Write `path`; `marker` is a file that exists there only on the host, so that a write
    into a private directory of the sandbox (bwrap's /tmp) proves nothing."""
    program = dedent(f"""
        import os


        def add(a, b):
            with open("{path}", "w") as handle:
                handle.write("written by a sample")
            return a + b
    """)
    tests = {"t": dedent(f"""
        import os


        def test_a():
            assert add(1, 2) == 3
            assert os.path.exists("{marker}")


        def test_b():
            assert os.path.exists("{path}") and os.path.exists("{marker}")
    """)}
    return Case(case_id, program, tests, unshare_gap=gap)


CASES = [
    # -- exiting and interrupting: an exit code of 0 proves nothing ------------------------------
    Case("os_exit_at_import", HONEST_ADD + "import os\nos._exit(0)\n", T_TRUE),
    Case("os_exit_in_target", "import os\n\n\ndef add(a, b):\n    os._exit(0)\n", T_TRUE),
    Case("sys_exit_before_tests", HONEST_ADD + "import sys\nsys.exit(0)\n", T_TRUE),
    Case("sys_exit_inside_test", HONEST_ADD, {"t": dedent("""
        import sys


        def test_a():
            assert add(1, 2) == 3
            sys.exit(0)


        def test_b():
            sys.exit(0)
    """)}),
    Case("system_exit_in_target", "def add(a, b):\n    raise SystemExit(0)\n", T_TRUE),
    Case("keyboard_interrupt_at_import", HONEST_ADD + "raise KeyboardInterrupt\n", T_TRUE),
    Case("keyboard_interrupt_in_target", "def add(a, b):\n    raise KeyboardInterrupt\n", T_TRUE),
    # -- tampering with the testing machinery -----------------------------------------------------
    Case("patch_testcase_asserts", dedent("""
        import unittest
        unittest.TestCase.assertEqual = lambda self, *args, **kwargs: None
        unittest.TestCase.assertTrue = lambda self, *args, **kwargs: None
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("patch_testcase_assert_code_objects", dedent("""
        import unittest
        unittest.TestCase.assertEqual.__code__ = (lambda self, first, second, msg=None: None).__code__
        unittest.TestCase.assertTrue.__code__ = (lambda self, expr, msg=None: None).__code__
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("replace_unittest_in_sys_modules", dedent("""
        import sys
        import types
        import unittest

        class _TestCase(unittest.TestCase):
            def assertEqual(self, *args, **kwargs):
                pass

            def assertTrue(self, *args, **kwargs):
                pass

        _fake = types.ModuleType("unittest")
        _fake.__dict__.update(vars(unittest))
        _fake.TestCase = _TestCase
        sys.modules["unittest"] = _fake
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("patch_assert_raises_context", dedent("""
        import unittest.case
        unittest.case._AssertRaisesContext.__exit__ = lambda self, *exc: True
    """) + HONEST_ADD, T_UNITTEST_RAISES),
    Case("rebind_program_builtins", dedent("""
        import builtins
        import types
        import unittest

        class _TestCase(unittest.TestCase):
            def assertEqual(self, *args, **kwargs):
                pass

            def assertTrue(self, *args, **kwargs):
                pass

        _fake = types.ModuleType("unittest")
        _fake.__dict__.update(vars(unittest))
        _fake.TestCase = _TestCase
        _real_import = builtins.__import__

        def _import(name, *args, **kwargs):
            return _fake if name == "unittest" else _real_import(name, *args, **kwargs)

        __builtins__ = {**vars(builtins), "__import__": _import}
    """) + WRONG_ADD, T_UNITTEST_FALSE),
    Case("patch_builtins_assertion_error", dedent("""
        import builtins
        builtins.AssertionError = type("AssertionError", (Exception,), {})
    """) + WRONG_ADD, T_FALSE),
    Case("patch_builtins_isinstance", dedent("""
        import builtins
        builtins.isinstance = lambda obj, kind: True
    """) + WRONG_ADD, {"t": "def test_a():\n    assert isinstance(add(1, 2), str)\n\n\n"
                            "def test_b():\n    assert isinstance(add(2, 2), bytes)\n"}),
    Case("patch_runner_globals_via_main", dedent("""
        import __main__
        __main__._status_of = lambda error, failure_types: "pass"
        __main__._describe = lambda error: ""
    """) + WRONG_ADD, T_FALSE),
    Case("patch_runner_code_objects_via_main", dedent("""
        import __main__
        __main__._status_of.__code__ = (lambda error, failure_types: "pass").__code__
    """) + WRONG_ADD, T_FALSE),
    Case("patch_pytest_approx", dedent("""
        import pytest

        class _Anything:
            def __eq__(self, other):
                return True

        pytest.approx = lambda *args, **kwargs: _Anything()
    """) + WRONG_ADD, T_PYTEST_APPROX, preload=("pytest",)),
    Case("patch_pytest_approx_class", dedent("""
        import pytest
        type(pytest.approx(1.0)).__eq__ = lambda self, other: True
    """) + WRONG_ADD, T_PYTEST_APPROX, preload=("pytest",)),
    Case("patch_pytest_raises_class", dedent("""
        import pytest
        type(pytest.raises(ValueError)).__exit__ = lambda self, *exc: True
    """) + HONEST_ADD, T_PYTEST_RAISES, preload=("pytest",)),
    Case("patch_numpy_testing", dedent("""
        import numpy.testing
        numpy.testing.assert_allclose = lambda *args, **kwargs: None
        numpy.testing.assert_array_equal = lambda *args, **kwargs: None
    """) + WRONG_ADD, {"t": dedent("""
        import numpy as np


        def test_a():
            np.testing.assert_allclose(add(1.0, 2.0), 4.0)


        def test_b():
            np.testing.assert_array_equal(add(np.arange(2), np.arange(2)), [1, 5])
    """)}, preload=("numpy", "numpy.testing")),
    # -- forging the result channel -------------------------------------------------------------
    Case("fake_results_on_fds_and_stdout",
         FORGE + "\n_forge()\n\n\ndef add(a, b):\n    _forge()\n    os._exit(0)\n", T_FALSE),
    Case("gc_get_objects_finds_the_nonce", FORGE + dedent("""
        import gc

        _nonces = [obj["nonce"] for obj in gc.get_objects()
                   if isinstance(obj, dict) and isinstance(obj.get("nonce"), str)]
        _forge(tuple(_nonces))


        def add(a, b):
            _forge(tuple(_nonces))
            os._exit(0)
    """), T_FALSE),
    Case("forge_records_with_the_runners_report", FRAME_WALK + dedent("""
        import os


        def add(a, b):
            scope = _runner_locals("report")
            for item in scope["items"]:
                scope["report"]({"item": item["id"], "status": "pass", "message": "",
                                 "duration_s": 0.0, "called": True})
            scope["report"]({"done": True})
            os._exit(0)
    """), T_FALSE),
    Case("mutate_the_runners_items", FRAME_WALK + dedent("""
        for _item in _runner_locals("items")["items"]:
            _item["kind"] = "block"
    """) + WRONG_ADD, T_FALSE),
    # -- resources -------------------------------------------------------------------------------
    Case("fork_bomb", dedent("""
        import os
        import time


        def add(a, b):
            leader = os.getpid()
            try:
                # `while True: os.fork()`, guarded: at most 2**10 processes even with no limit.
                for _ in range(10):
                    child = os.fork()
                    if child and child - leader > 300:
                        break
            finally:
                if os.getpid() != leader:
                    time.sleep(60)
                    os._exit(0)
            return a + b
    """), T_TRUE, limits={"processes": 16}),
    Case("memory_bomb_list", dedent("""
        def add(a, b):
            hoard = []
            while True:
                hoard.append(bytearray(10**7))
    """), T_TRUE),
    Case("memory_bomb_bytearray", "def add(a, b):\n    bytearray(10**11)\n    return a + b\n", T_TRUE),
    Case("infinite_loop", "def add(a, b):\n    while True:\n        pass\n", T_TRUE),
    Case("cpu_spin_ignoring_sigterm", dedent("""
        import signal

        for _signal in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
            signal.signal(_signal, signal.SIG_IGN)


        def add(a, b):
            while True:
                pass
    """), T_TRUE),
    Case("sleep_past_the_limit", "import time\n\n\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n",
         T_TRUE),
    Case("stdout_flood", dedent("""
        import os

        _line = b'{"item": "t::test_a", "status": "pass", "nonce": ""}\\n' * 20000


        def add(a, b):
            while True:  # about a GB per second, until the wall-clock limit
                os.write(1, _line)
                os.write(2, _line)
    """), T_TRUE),
    Case("recursion_overflow", "def add(a, b):\n    return add(a, b)\n", T_TRUE),
    Case("c_stack_overflow", dedent("""
        import sys


        def add(a, b):
            sys.setrecursionlimit(10**8)
            nested = []
            for _ in range(10**6):
                nested = [nested]
            repr(nested)
            return a + b
    """), T_TRUE),
    Case("segfault_through_ctypes", "import ctypes\n\n\ndef add(a, b):\n    ctypes.string_at(0)\n    return a + b\n",
         T_TRUE),
    Case("raise_rlimits", dedent("""
        import resource


        def raise_limit(name):
            kind = getattr(resource, name)
            resource.setrlimit(kind, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            return resource.getrlimit(kind) == (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    """) + HONEST_ADD, {"t": "\n\n".join(
        f"def test_{name.lower()}():\n    assert raise_limit(\"{name}\")\n"
        for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE"))}),
    # -- network ---------------------------------------------------------------------------------
    Case("connect_to_host_tcp_listener", dedent("""
        import socket


        def add(a, b):
            with socket.create_connection(("127.0.0.1", $port), timeout=1) as connection:
                connection.sendall(b"hello from the sandbox")
            return a + b
    """), T_TRUE),
    Case("connect_to_public_addresses", dedent("""
        import socket


        def reach(host, port):
            with socket.create_connection((host, port), timeout=1):
                return True
    """) + HONEST_ADD, {"t": "def test_a():\n    assert reach(\"1.1.1.1\", 80)\n\n\n"
                             "def test_b():\n    assert reach(\"8.8.8.8\", 53)\n"}),
    Case("dns_lookup", "import socket\n\n\ndef resolve(name):\n    return socket.getaddrinfo(name, 443)\n"
         + HONEST_ADD, {"t": "def test_a():\n    assert resolve(\"example.com\")\n\n\n"
                             "def test_b():\n    assert resolve(\"pypi.org\")\n"}),
    Case("connect_to_host_unix_socket", dedent("""
        import socket


        def add(a, b):
            with socket.socket(socket.AF_UNIX) as connection:
                connection.settimeout(1)
                connection.connect("$unix_path")
                connection.sendall(b"hello from the sandbox")
            return a + b
    """), T_TRUE, unshare_gap=NO_FS_ISOLATION),
    # -- the file system -------------------------------------------------------------------------
    write_case("write_to_host_temp_dir", "$host_dir/$pwn", "$canary", NO_FS_ISOLATION),
    write_case("write_to_tmp", "/tmp/$pwn", "$tmp_marker", NO_FS_ISOLATION),
    write_case("write_to_var_tmp", "/var/tmp/$pwn", "$host_dir", NO_FS_ISOLATION),
    write_case("write_to_dev_shm", "/dev/shm/$pwn", "$shm_marker", NO_FS_ISOLATION),
    write_case("write_to_etc", "/etc/$pwn", "/etc/passwd"),
    write_case("write_to_repository", "$repo/$pwn", "$repo/pyproject.toml"),
    write_case("write_to_home", "$home/$pwn", "$home_canary"),
    Case("modify_and_delete_canary", HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$canary", "a") as handle:
                handle.write("modified by a sample")
            assert add(1, 2) == 3


        def test_b():
            os.remove("$canary")
            assert not os.path.exists("$canary")
    """)}, unshare_gap=NO_FS_ISOLATION),
    Case("chdir_to_root_then_tests", "import os\nos.chdir(\"/\")\n" + HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$pwn", "w") as handle:
                handle.write("written by a sample")
            assert os.path.exists("/$pwn")


        def test_b():
            with open("etc/$pwn", "w") as handle:
                handle.write("written by a sample")
            assert add(1, 2) == 3
    """)}),
    Case("read_secret_environment", HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            assert os.environ.get("KNOWBENCH_TEST_SECRET") == "$secret"


        def test_b():
            found = False
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/environ", "rb") as handle:
                        found = found or b"$secret" in handle.read()
                except OSError:
                    pass
            assert found
    """)}),
    Case("read_home_canary", HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$home_canary") as handle:
                assert handle.read() == "$secret"


        def test_b():
            assert "$home_canary_name" in os.listdir("$home")
    """)}),
    Case("read_repository_and_benchmark", HONEST_ADD, {"t": dedent("""
        import os


        def test_a():
            with open("$repo/pyproject.toml") as handle:
                assert 'name = "knowbench"' in handle.read()


        def test_b():
            assert "pyproject.toml" in os.listdir("$repo")


        def test_c():
            with open("$repo/examples/basic/tasks.jsonl") as handle:
                assert "reference" in handle.read()
    """)}, unshare_gap=NO_HIDING),
    # -- processes -------------------------------------------------------------------------------
    Case("kill_parent", PARENT_GONE + HONEST_ADD, {"t": dedent("""
        import os
        import signal


        def test_a():
            assert _parent_gone(lambda parent: os.kill(parent, signal.SIGKILL))


        def test_b():
            assert _parent_gone(lambda parent: os.kill(parent, signal.SIGTERM))
    """)}),
    Case("killpg_own_and_parent_group", PARENT_GONE + HONEST_ADD, {"t": dedent("""
        import os
        import signal


        def test_a():
            assert _parent_gone(lambda parent: os.killpg(os.getpgid(parent), signal.SIGKILL))


        def test_b():
            assert _parent_gone(lambda parent: os.killpg(os.getpgid(0), signal.SIGKILL))
    """)}),
    Case("kill_minus_one", PARENT_GONE + HONEST_ADD, {"t": dedent("""
        import os
        import signal


        def test_a():
            assert _parent_gone(lambda parent: os.kill(-1, signal.SIGKILL))


        def test_b():
            assert _parent_gone(lambda parent: os.kill(-1, signal.SIGTERM))
    """)}),
    Case("children_outlive_the_sample", dedent("""
        import os
        import signal
        import threading
        import time


        def _late_write():
            time.sleep(1.0)
            with open("$host_dir/$pwn", "w") as handle:
                handle.write("written after the sample ended")


        def add(a, b):
            threading.Thread(target=_late_write).start()
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                        signal.signal(number, signal.SIG_IGN)
                    try:
                        _late_write()
                    finally:
                        os._exit(0)
                os._exit(0)
            return a + b
    """), T_FALSE, linger_s=2.0),
]


# -- the host side ---------------------------------------------------------------------------------


class Host:
    """Canaries, secrets and listening servers that samples must not reach."""

    def __init__(self) -> None:
        token = secrets.token_hex(6)
        self.secret = f"kb-secret-{token}"
        self.pwn = f"knowbench-pwn-{token}"
        base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
        self.dir = Path(tempfile.mkdtemp(prefix="knowbench-hostile-", dir=base))
        self.dir.chmod(0o777)  # as exposed as /tmp itself: only the sandbox may stop a write
        self.canary = self.dir / "canary.txt"
        self.canary_text = f"canary {token}\n"
        self.home = Path.home()
        self.home_canary = self.home / f".knowbench-canary-{token}"
        self.home_canary.write_text(self.secret)
        self.home_canary.chmod(0o644)
        self._write_canary()
        # Files that exist only on the host: seeing one proves a path is the host's, not a
        # private directory of the sandbox.
        self.tmp_marker = Path(tempfile.gettempdir()) / f"knowbench-host-marker-{token}"
        self.shm_marker = Path("/dev/shm") / f"knowbench-host-marker-{token}"
        for marker in (self.tmp_marker, self.shm_marker):
            with contextlib.suppress(OSError):
                marker.write_text("host")
        self.outside = [self.dir / self.pwn, Path("/tmp") / self.pwn, Path("/var/tmp") / self.pwn,
                        Path("/dev/shm") / self.pwn, Path("/etc") / self.pwn, REPO / self.pwn,
                        Path("/") / self.pwn, self.home / self.pwn]
        self.connections: list[str] = []
        self._stop = threading.Event()
        self._tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self._tcp.getsockname()[1]
        self.unix_path = self.dir / "host.sock"
        self._unix = socket.socket(socket.AF_UNIX)
        self._unix.bind(str(self.unix_path))
        self.unix_path.chmod(0o777)
        self._unix.listen()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _write_canary(self) -> None:
        self.canary.write_text(self.canary_text)
        self.canary.chmod(0o666)
        self._canary_stat = self.canary.stat()

    def _serve(self) -> None:
        servers = {self._tcp: "tcp 127.0.0.1", self._unix: "unix socket"}
        while not self._stop.is_set():
            ready, _, _ = select.select(list(servers), [], [], 0.01)
            for server in ready:
                with contextlib.suppress(OSError):
                    connection, _ = server.accept()
                    self.connections.append(f"{servers[server]} accepted a connection")
                    connection.settimeout(0.5)
                    with contextlib.suppress(OSError):
                        self.connections.append(f"{servers[server]} received {connection.recv(200)!r}")
                    connection.close()

    def values(self) -> dict[str, str]:
        return {"port": str(self.port), "unix_path": str(self.unix_path), "host_dir": str(self.dir),
                "canary": str(self.canary), "home": str(self.home),
                "home_canary": str(self.home_canary), "home_canary_name": self.home_canary.name,
                "secret": self.secret, "pwn": self.pwn, "repo": str(REPO),
                "tmp_marker": str(self.tmp_marker), "shm_marker": str(self.shm_marker)}

    def problems(self) -> list[str]:
        time.sleep(0.03)  # let the server thread accept what is pending
        found = [f"connection from the sandbox: {text}" for text in self.connections]
        if not self.canary.exists():
            found.append(f"canary {self.canary} was deleted")
        else:
            now = self.canary.stat()
            if self.canary.read_text() != self.canary_text or now.st_mtime_ns != self._canary_stat.st_mtime_ns:
                found.append(f"canary {self.canary} was modified")
        if self.home_canary.read_text() != self.secret:
            found.append(f"home canary {self.home_canary} was modified")
        found += [f"file written outside the work dir: {path}" for path in self.outside
                  if os.path.lexists(path)]
        extra = {entry.name for entry in self.dir.iterdir()} - {"canary.txt", "host.sock", self.pwn}
        found += [f"unexpected file in the host dir: {name}" for name in sorted(extra)]
        if os.environ.get("KNOWBENCH_TEST_SECRET") != self.secret:
            found.append("the test process's environment changed")
        return found

    def restore(self) -> None:
        self.connections.clear()
        for path in self.outside:
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
        for entry in self.dir.iterdir():
            if entry.name not in ("canary.txt", "host.sock"):
                with contextlib.suppress(OSError):
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        if not self.canary.exists() or self.canary.read_text() != self.canary_text:
            with contextlib.suppress(OSError):
                self.canary.unlink()
            self._write_canary()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._tcp.close()
        self._unix.close()
        self.restore()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.home_canary.unlink(missing_ok=True)
        self.tmp_marker.unlink(missing_ok=True)
        self.shm_marker.unlink(missing_ok=True)


# Other sessions may run sandboxed samples at the same time, with the same uids: a process
# counts as ours when it shows one of our engines' scratch directories (bwrap: in its mounts;
# unshare: as its working directory or HOME).
SCRATCH_ROOTS: list[str] = []


def _ours(pid: str) -> bool:
    views = []
    for name in ("mountinfo", "environ"):
        with contextlib.suppress(OSError):
            views.append(Path(f"/proc/{pid}/{name}").read_bytes().decode(errors="replace"))
    with contextlib.suppress(OSError):
        views.append(os.readlink(f"/proc/{pid}/cwd"))
    return any(root in view for root in SCRATCH_ROOTS for view in views)


def sandbox_processes(ours_only: bool = True) -> dict[int, str]:
    """pid -> description of every process running as a sandbox uid (by default: ours)."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")[:100]
        except OSError:
            continue
        uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
        if any(int(uid) in SANDBOX_UIDS for uid in uids) and (not ours_only or _ours(entry)):
            state = next((line for line in status.splitlines() if line.startswith("State:")), "")
            found[int(entry)] = f"pid {entry} uid {uids[0]} {state.split(None, 1)[-1]} {cmdline!r}"
    return found


def lingering(before: set[int], patience_s: float = 3.0) -> list[str]:
    """Our sandbox-uid processes not in `before` that are still there after `patience_s`."""
    deadline = time.monotonic() + patience_s
    while True:
        new = [text for pid, text in sorted(sandbox_processes().items()) if pid not in before]
        if not new or time.monotonic() > deadline:
            return new
        time.sleep(0.1)


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    previous = os.environ.get("KNOWBENCH_TEST_SECRET")
    the_host = Host()
    os.environ["KNOWBENCH_TEST_SECRET"] = the_host.secret
    try:
        yield the_host
    finally:
        the_host.close()
        if previous is None:
            os.environ.pop("KNOWBENCH_TEST_SECRET", None)
        else:
            os.environ["KNOWBENCH_TEST_SECRET"] = previous


@pytest.fixture(scope="module", autouse=True)
def no_stray_sandbox_processes_after_module() -> Iterator[None]:
    yield
    strays = lingering(set())
    assert not strays, f"processes of sandbox uids outlived the hostile module: {strays}"


ENGINES = [("subprocess", "bwrap"), ("subprocess", "unshare"), ("forkserver", "bwrap"),
           ("forkserver", "unshare"), ("ray", "bwrap")]


@pytest.fixture(scope="module", params=ENGINES, ids=[f"{e}-{s}" for e, s in ENGINES])
def hostile_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The same table against every engine and sandbox; one this machine lacks is skipped."""
    engine_name, sandbox_kind = request.param
    try:
        sandbox = resolve_sandbox(sandbox_kind, hidden=[REPO])
    except UserError as error:
        pytest.skip(f"sandbox {sandbox_kind} is not available here: {error}")
    scratch = Path(tempfile.mkdtemp(prefix="knowbench-hostile-scratch-"))
    scratch.chmod(0o755)
    SCRATCH_ROOTS.append(str(scratch))
    engine: Engine
    if engine_name == "subprocess":
        engine = SubprocessEngine(sandbox, workers=2, scratch=scratch)
    elif engine_name == "forkserver":
        engine = ForkServerEngine(sandbox, workers=2, scratch=scratch, preload=list(PRELOAD))
    else:
        pytest.importorskip("ray", reason="the ray engine needs the extra knowbench[ray]")
        from knowbench.execution.ray_engine import RayEngine

        engine = RayEngine(sandbox.kind, workers=2, preload=list(PRELOAD), scratch=str(scratch))
    engine.sandbox_kind = sandbox.kind  # type: ignore[attr-defined]
    yield engine
    engine.close()
    shutil.rmtree(scratch, ignore_errors=True)


def render(text: str, host: Host) -> str:
    return Template(text).substitute(host.values())


# -- the tests -------------------------------------------------------------------------------------


def test_sandbox_runs_an_honest_sample_with_the_preload(hostile_engine: Engine,
                                                        host: Host) -> None:
    """The control for the table: the attacks fail because of the sandbox, not by accident."""
    program = dedent("""
        import ctypes
        import resource
        import signal
        import socket
        import threading


        def add(a, b):
            return a + b
    """)
    execution = hostile_engine.execute(make_request(program, T_TRUE, "add", preload=PRELOAD,
                                                    **SMALL_LIMITS))
    assert [test.status for test in execution.tests] == ["pass", "pass"], execution.tests


def test_sandbox_imports_without_preload(hostile_engine: Engine, host: Host) -> None:
    """An honest sample may import any module of the interpreter's standard library."""
    program = "import decimal\nimport fractions\nimport socket\n\n\ndef add(a, b):\n    return a + b\n"
    execution = hostile_engine.execute(make_request(program, T_TRUE, "add", **SMALL_LIMITS))
    assert execution.status == "pass", execution.tests[0].message


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_sample(hostile_engine: Engine, host: Host, case: Case,
                        request: pytest.FixtureRequest) -> None:
    if hostile_engine.sandbox_kind == "unshare" and case.unshare_gap:  # type: ignore[attr-defined]
        request.applymarker(pytest.mark.xfail(reason=case.unshare_gap, strict=True))
    tests = {name: render(code, host) for name, code in case.tests.items()}
    execution_request = make_request(render(case.program, host), tests, "add",
                                     preload=PRELOAD + case.preload, **{**SMALL_LIMITS, **case.limits})
    before = set(sandbox_processes())
    execution = hostile_engine.execute(execution_request)
    time.sleep(case.linger_s)
    problems = host.problems()
    strays = lingering(before)
    host.restore()

    failures = [f"host harmed: {problem}" for problem in problems]
    failures += [f"process outlived the sample: {stray}" for stray in strays]
    failures += [f"item {test.id} passed" for test in execution.tests if test.status == "pass"]
    if execution.status == "pass":
        failures.append("Execution.status is 'pass'")
    if len(execution.tests) != len(execution_request.items()):
        failures.append(f"{len(execution.tests)} outcomes for {len(execution_request.items())} items")
    cap = execution_request.limits.output_bytes
    if len(execution.stdout) > cap or len(execution.stderr) > cap:
        failures.append("captured output exceeds limits.output_bytes")
    summary = [(test.id, test.status, test.message[-160:]) for test in execution.tests]
    assert not failures, f"{failures}\nnote={execution.note!r} outcomes={summary}"


def test_host_dir_is_as_exposed_as_intended(host: Host) -> None:
    """The canary dir must be writable by anyone, or the write cases would prove nothing."""
    mode = host.dir.stat().st_mode
    assert mode & stat.S_IWOTH and host.canary.stat().st_mode & stat.S_IWOTH
