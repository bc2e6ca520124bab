"""The in-sandbox test runner; stdlib only.

Started by an engine as `python -I -c BOOT DIR MODE` (see `engine.runner_command`): this
directory goes first on `sys.path` and `entry(MODE)` runs.

It is started by an engine with a JSON configuration on stdin and a result pipe on
file descriptor `result_fd`. It reads its configuration before any sample code exists,
sets resource limits, drops privileges, executes the program and then each test item,
and reports one record per item on the result pipe, each carrying the session nonce.

The engine trusts nothing else: not the exit code, not stdout. An item with no valid
record did not pass. After every item the runner checks that the testing machinery
(builtins, unittest, pytest, its own helpers) is unchanged; when it is not, the item and
all later ones are reported as errors and the run stops.

This file must not import knowbench: it runs in whatever environment the benchmark's
tests need.
"""

import _thread
import builtins
import json
import linecache
import operator
import os
import pathlib
import resource
import sys
import tempfile
import time
import traceback
import unittest

_MESSAGE_CAP = 4000
_HERE = os.path.dirname(os.path.abspath(__file__))
# Routes from a worker thread to the reporting thread's frames or to arbitrary objects.
_GUARDED_AUDIT_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                                   "sys._current_frames"})


class Tampering(Exception):
    """The sample changed the machinery the verdict depends on."""


class UnsupportedFixture(RuntimeError):
    """A test asks for a fixture this runner does not provide.

    Raised by the runner and by the harness that mining writes into test specs (it imports
    this class from the running runner), so the outcome's reason says so without anyone
    reading the message.
    """


def _vm_size_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _set_limits(limits, nproc_base):
    mb = 1024 * 1024
    address_space = _vm_size_bytes() + limits["memory_mb"] * mb
    pairs = [
        (resource.RLIMIT_AS, address_space, address_space),
        (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb, limits["file_size_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"]),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if nproc_base is not None:
        nproc = nproc_base + limits["processes"]
        pairs.append((resource.RLIMIT_NPROC, nproc, nproc))
    for kind, soft, hard in pairs:
        _, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
            soft = min(soft, hard)
        resource.setrlimit(kind, (soft, hard))


def _drop_privileges(uid, gid):
    if uid is None or os.geteuid() != 0:
        return
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


_WATCHED_MODULES = (
    "builtins", "unittest", "unittest.case", "unittest.result", "unittest.suite", "pytest",
    "_pytest.outcomes", "_pytest.python_api", "_pytest.approx", "_pytest.raises",
    "numpy.testing", "numpy.testing._private.utils", "pandas.testing", "pandas._testing",
    "pandas._testing.asserters",
)
_VOLATILE = frozenset({"__warningregistry__", "last_type", "last_value", "last_traceback",
                       "ps1", "ps2", "tracebacklimit", "exc_info", "_", "__loader__"})


def _snapshot():
    """Identity of everything a sample could patch to turn failures into passes.

    For each watched module that is loaded: its entry in sys.modules, every name in it, the
    code object of every function in it, and the same for every class it defines (so a
    patched `assertEqual.__code__` or `_AssertRaisesContext.__exit__` is caught too).
    """
    spaces = {}
    for name in _WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        spaces[name] = vars(module)
        for value in list(vars(module).values()):
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                spaces[f"{name}.{value.__qualname__}"] = vars(value)
    identities = {}
    for scope, space in spaces.items():
        for key, value in space.items():
            code = getattr(value, "__code__", None) if callable(value) else None
            if isinstance(value, (staticmethod, classmethod)):
                code = getattr(value.__func__, "__code__", None)
            identities[(scope, key)] = (id(value), id(code) if code is not None else None)
    modules = {name: id(sys.modules.get(name)) for name in _WATCHED_MODULES if name in sys.modules}
    return identities, spaces, modules


def _changed(snapshot, spaces, modules, modules_now):
    for name, ident in modules.items():
        if id(modules_now.get(name)) != ident:
            return f"sys.modules['{name}'] was replaced"
    for (scope, key), (ident, code_ident) in snapshot.items():
        if key in _VOLATILE:
            continue
        space = spaces[scope]
        if key not in space:
            return f"{scope}.{key} was deleted"
        value = space[key]
        if id(value) != ident:
            return f"{scope}.{key} was replaced"
        if code_ident is not None:
            function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if id(getattr(function, "__code__", None)) != code_ident:
                return f"the code of {scope}.{key} was replaced"
    return None


def _describe(error):
    # Leading frames belong to this runner: only noise to a reader.
    tb = error.__traceback__
    while (tb is not None and tb.tb_next is not None
           and os.path.dirname(tb.tb_frame.f_code.co_filename) == _HERE):
        tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(error), error, tb))
    except BaseException:  # a hostile __str__ must not take the runner down
        text = f"{type(error).__name__} (its message could not be formatted)"
    if len(text) > _MESSAGE_CAP:
        text = text[: _MESSAGE_CAP // 4] + "\n...\n" + text[-3 * _MESSAGE_CAP // 4:]
    return text


def _status_of(error, failure_types):
    """The status and reason (see knowbench.records.Reason) of a test's exception."""
    if isinstance(error, MemoryError):
        return "memory", "memory"
    if isinstance(error, UnsupportedFixture):
        return "error", "unsupported-fixture"
    if isinstance(error, _SpecFailed):  # an earlier item already reported the spec's own error
        return "error", "test-code-failed"
    if isinstance(error, failure_types):
        return "fail", "assertion"
    return "error", "exception"


class _MonkeyPatch:
    """The subset of pytest's `monkeypatch` fixture that benchmark tests use."""

    _missing = object()

    def __init__(self):
        self._undo = []

    def setattr(self, target, name, value=_missing, raising=True):
        if value is self._missing:  # monkeypatch.setattr("module.attr", value)
            module_name, _, attr = target.rpartition(".")
            value, target, name = name, __import__(module_name, fromlist=["_"]), attr
        old = getattr(target, name, self._missing)
        if old is self._missing and raising:
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        self._undo.append(lambda: setattr(target, name, old) if old is not self._missing
                          else delattr(target, name))
        setattr(target, name, value)

    def delattr(self, target, name, raising=True):
        if not hasattr(target, name):
            if raising:
                raise AttributeError(name)
            return
        old = getattr(target, name)
        self._undo.append(lambda: setattr(target, name, old))
        delattr(target, name)

    def setitem(self, mapping, key, value):
        old = mapping.get(key, self._missing)
        self._undo.append(lambda: mapping.__setitem__(key, old) if old is not self._missing
                          else mapping.pop(key, None))
        mapping[key] = value

    def delitem(self, mapping, key, raising=True):
        if key not in mapping:
            if raising:
                raise KeyError(key)
            return
        old = mapping[key]
        self._undo.append(lambda: mapping.__setitem__(key, old))
        del mapping[key]

    def setenv(self, name, value, prepend=None):
        value = str(value)
        if prepend and name in os.environ:
            value = value + prepend + os.environ[name]
        self.setitem(os.environ, name, value)

    def delenv(self, name, raising=True):
        self.delitem(os.environ, name, raising)

    def chdir(self, path):
        old = os.getcwd()
        self._undo.append(lambda: os.chdir(old))
        os.chdir(path)

    def syspath_prepend(self, path):
        self._undo.append(lambda: sys.path.remove(str(path)))
        sys.path.insert(0, str(path))

    def undo(self):
        while self._undo:
            self._undo.pop()()


class _CaptureResult(tuple):
    @property
    def out(self):
        return self[0]

    @property
    def err(self):
        return self[1]


class _Capsys:
    """The subset of pytest's `capsys` fixture: captures sys.stdout/sys.stderr."""

    def __init__(self):
        import io

        self._io = io
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()

    def readouterr(self):
        out, err = sys.stdout.getvalue(), sys.stderr.getvalue()
        sys.stdout, sys.stderr = self._io.StringIO(), self._io.StringIO()
        return _CaptureResult((out, err))

    def close(self):
        sys.stdout, sys.stderr = self._saved


def _target_codes(namespace, entry_point):
    """Code objects of the entry point, to record whether a test ran it."""
    if not entry_point:
        return frozenset()
    obj = namespace.get(entry_point.split(".")[0])
    for part in entry_point.split(".")[1:]:
        raw = vars(obj).get(part) if isinstance(obj, type) else None
        obj = raw if raw is not None else getattr(obj, part, None)
    codes = set()
    for candidate in (obj, getattr(obj, "__func__", None), getattr(obj, "fget", None)):
        while candidate is not None:
            code = getattr(candidate, "__code__", None)
            if code is not None:
                codes.add(code)
            candidate = getattr(candidate, "__wrapped__", None)
    return frozenset(codes)


class _SpecFailed(Exception):
    """The test code itself failed to run, so none of its items can pass."""


def _load_spec(name, tests, module, namespaces, spec_errors):
    """The namespace a test spec's code ran in; runs it on first use.

    A plain-block spec is its own test, so its failure propagates as the test's failure.
    """
    if name in spec_errors:
        raise _SpecFailed(spec_errors[name])
    if name not in namespaces:
        code = tests[name]
        filename = f"test:{name}"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        namespace = dict(module.__dict__)
        namespace["__name__"] = "knowbench_test"
        namespace["__builtins__"] = builtins  # never the program's own (it may rebind them)
        try:
            exec(compile(code, filename, "exec"), namespace)
        except BaseException as error:
            spec_errors[name] = "the test code failed to run:\n" + _describe(error)
            raise
        namespaces[name] = namespace
    return namespaces[name]


def _run_function(function, tmp_root, fixtures, skip_self=False):
    kwargs = {}
    code = function.__code__
    for parameter in code.co_varnames[int(skip_self): code.co_argcount + code.co_kwonlyargcount]:
        if parameter == "tmp_path":
            kwargs[parameter] = pathlib.Path(tempfile.mkdtemp(dir=tmp_root))
        elif parameter == "monkeypatch":
            kwargs[parameter] = _MonkeyPatch()
            fixtures.append(kwargs[parameter].undo)
        elif parameter == "capsys":
            kwargs[parameter] = _Capsys()
            fixtures.append(kwargs[parameter].close)
        else:
            raise UnsupportedFixture(f"fixture '{parameter}' is not supported by the knowbench runner")
    outcome = function(**kwargs)
    if hasattr(outcome, "__await__"):
        import asyncio

        asyncio.run(outcome)


def _run_test_class(cls, method, tmp_root, fixtures):
    """A pytest-style `class Test*`: a fresh instance per test, with xunit setup hooks."""
    instance = cls()
    setup, teardown = getattr(instance, "setup_method", None), getattr(instance, "teardown_method", None)
    bound = getattr(instance, method)
    if setup is not None:
        setup(bound)
    try:
        _run_function(bound, tmp_root, fixtures, skip_self=True)
    finally:
        if teardown is not None:
            teardown(bound)


def _run_unittest(cls, method, class_ready):
    if cls not in class_ready:
        class_ready[cls] = True
        cls.setUpClass()
    case = cls(method)
    try:
        case.setUp()
        try:
            getattr(case, method)()
        finally:
            case.tearDown()
    finally:
        case.doCleanups()


def _preload(modules):
    for module in modules:
        try:
            __import__(module)
        except Exception:  # a missing optional import is the tests' business, not the runner's
            pass


_STATUSES = frozenset({"pass", "fail", "error", "timeout", "memory", "infrastructure"})
# The reasons a worker may give for a non-pass outcome: a subset of knowbench.records.Reason
# (this file cannot import knowbench; a test checks that the two agree).
_REASONS = frozenset({"assertion", "exception", "skipped", "test-code-failed", "unsupported-fixture",
                      "program-failed-to-load", "memory"})


def _load_program(program, entry_point, box):
    """Worker-thread job: run the program as module `solution`. Sample code runs here."""
    module = type(sys)("solution")
    module.__file__ = "solution.py"
    sys.modules["solution"] = module
    linecache.cache["solution.py"] = (len(program), None, program.splitlines(True), "solution.py")
    try:
        exec(compile(program, "solution.py", "exec"), module.__dict__)
    except BaseException as error:
        memory = isinstance(error, MemoryError)
        box.append(("memory" if memory else "error", "the program failed to load:\n" + _describe(error),
                    None, "memory" if memory else "program-failed-to-load"))
        return
    box.append(("pass", "", (module, _target_codes(module.__dict__, entry_point)), None))


def _run_item(item, tests, module, target_codes, state, box):
    """Worker-thread job: run one test item and classify its outcome. Sample code runs here."""
    called = [False]

    def tracer(frame, event, arg):
        if frame.f_code in target_codes:
            called[0] = True

    namespaces, spec_errors, class_ready, tmp_root = state
    status, message, reason, fixtures = "pass", "", None, []
    failure_types = (AssertionError,)
    sys.settrace(tracer)
    try:
        namespace = _load_spec(item["spec"], tests, module, namespaces, spec_errors)
        if item["kind"] == "function":
            _run_function(namespace[item["function"]], tmp_root, fixtures)
        elif item["kind"] == "class":
            _run_test_class(namespace[item["cls"]], item["function"], tmp_root, fixtures)
        elif item["kind"] == "unittest":
            cls = namespace[item["cls"]]
            if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
                failure_types = (AssertionError, cls.failureException)
                _run_unittest(cls, item["function"], class_ready)
            else:  # a base merely named *TestCase: run it the way pytest runs a Test* class
                _run_test_class(cls, item["function"], tmp_root, fixtures)
        for undo in fixtures:
            undo()
    except BaseException as error:
        for undo in fixtures:
            try:
                undo()
            except BaseException:
                pass
        try:
            if isinstance(error, unittest.SkipTest):
                status, message, reason = "error", f"skipped: {error}", "skipped"
            else:
                (status, reason), message = _status_of(error, failure_types), _describe(error)
        except BaseException:
            status, message, reason = "error", "the test's exception could not be classified", "exception"
    finally:
        sys.settrace(None)
    box.append((status, message, called[0] if target_codes else None, reason))


def execute_sample(config, result_fd):
    """Run one sample's program and tests, report on `result_fd`, then end the process.

    Called in a process that exists for this sample only (a fresh interpreter, or a child
    forked from the fork server), so nothing the sample does survives it.

    Sample code runs only in worker threads. This thread keeps the per-execution key, the
    item list and the result pipe in frames that no worker's stack leads to, checks each
    outcome's shape and the testing machinery's integrity, and writes the records with
    functions bound before any sample code existed.
    """
    nonce = config["nonce"]
    items = [dict(item) for item in config["items"]]
    tests = dict(config["tests"])
    write, exit_now, monotonic = os.write, os._exit, time.monotonic
    start_thread, new_lock = _thread.start_new_thread, _thread.allocate_lock
    quote = json.encoder.encode_basestring_ascii
    float_text, int_text = float.__repr__, int.__repr__
    type_of, str_type, float_type, bool_type, tuple_type = type, str, float, bool, tuple
    none_type = type(None)
    length, statuses, reasons, changed = len, _STATUSES, _REASONS, _changed
    stdout, stderr = sys.stdout, sys.stderr
    runner_globals = globals()
    modules_now = sys.modules

    def encode(value):
        kind = type_of(value)
        if kind is str_type:
            return quote(value)
        if kind is float_type:
            return float_text(value)
        if value is True or value is False or value is None:
            return {True: "true", False: "false", None: "null"}[value]
        return int_text(value)

    def report(fields):
        parts = [quote(key) + ":" + encode(value) for key, value in fields.items()]
        data = ("{" + ",".join(parts) + "," + quote("nonce") + ":" + quote(nonce) + "}\n").encode()
        while data:
            data = data[write(result_fd, data):]

    def in_worker(job, *args):
        """Run `job(*args, box)` on a fresh thread; its one well-formed outcome, or None."""
        box, finished = [], new_lock()
        finished.acquire()

        def body():
            try:
                job(*args, box)
            finally:
                finished.release()

        start_thread(body, ())
        finished.acquire()
        if length(box) != 1 or type_of(box[0]) is not tuple_type or length(box[0]) != 4:
            return None
        return box[0]

    def audit(event, args):
        if event in _GUARDED_AUDIT_EVENTS:
            raise RuntimeError(f"{event} is not allowed inside the knowbench sandbox")

    snapshot, spaces, modules = _snapshot()
    runner_helpers = {name: (id(value), id(getattr(value, "__code__", None)))
                      for name, value in runner_globals.items()}
    get_code = operator.attrgetter("__code__")
    _set_limits(config["limits"], config.get("nproc_base"))
    _drop_privileges(config.get("uid"), config.get("gid"))
    sys.addaudithook(audit)
    tmp_root = tempfile.mkdtemp(prefix="tmp_path-", dir=os.getcwd())

    def integrity_problem():
        # The runner's own functions first, inline: `changed` itself could have been patched.
        for name, (ident, code_ident) in runner_helpers.items():
            value = runner_globals.get(name)
            if id(value) != ident:
                return f"the runner's {name} was replaced"
            if code_ident != id(None) and id(get_code(value)) != code_ident:
                return f"the code of the runner's {name} was replaced"
        return changed(snapshot, spaces, modules, modules_now)

    def fail_all(start, status, message, reason):
        for item in items[start:]:
            report({"item": item["id"], "status": status, "message": message, "duration_s": 0.0,
                    "reason": reason})

    def finish():
        report({"done": True})
        try:
            stdout.flush()
            stderr.flush()
        finally:
            exit_now(0)

    loaded = in_worker(_load_program, config["program"], config.get("entry_point"))
    problem = integrity_problem()
    if problem is not None:
        fail_all(0, "error", f"tampering detected while loading the program: {problem}", "tampering")
        finish()
    # Only exact built-in types are looked at here: a sample's object could run code on ==.
    if (loaded is None or type_of(loaded[0]) is not str_type or type_of(loaded[1]) is not str_type
            or loaded[0] not in statuses
            or (loaded[0] != "pass" and (type_of(loaded[3]) is not str_type or loaded[3] not in reasons))):
        fail_all(0, "error", "the program tampered with the runner while loading", "tampering")
        finish()
    if loaded[0] != "pass":
        fail_all(0, loaded[0], loaded[1], loaded[3])
        finish()
    if type_of(loaded[2]) is not tuple_type or length(loaded[2]) != 2:
        fail_all(0, "error", "the program tampered with the runner while loading", "tampering")
        finish()
    module, target_codes = loaded[2]
    state = ({}, {}, {}, tmp_root)
    for index, item in enumerate(items):
        report({"start": item["id"]})
        started = monotonic()
        outcome = in_worker(_run_item, dict(item), tests, module, target_codes, state)
        problem = integrity_problem()
        if problem is not None:
            report({"item": item["id"], "status": "error", "duration_s": monotonic() - started,
                    "message": f"tampering detected: {problem}", "reason": "tampering"})
            fail_all(index + 1, "error", "not run: an earlier test tampered with the runner", "not-run")
            break
        status, message, called, reason = outcome if outcome is not None else (None, None, None, None)
        # A pass carries no reason; anything else one of the worker's reasons.
        if (type_of(status) is not str_type or status not in statuses
                or type_of(message) is not str_type or type_of(called) not in (bool_type, none_type)
                or (reason is not None if status == "pass"
                    else type_of(reason) is not str_type or reason not in reasons)):
            status, message, called, reason = "error", "the test tampered with its own outcome", None, "tampering"
        report({"item": item["id"], "status": status, "message": message,
                "duration_s": monotonic() - started, "called": called, "reason": reason})
    finish()


def _redirect_stdin():
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def main():
    """One-shot mode: the configuration on stdin, results on config["result_fd"]."""
    config = json.loads(sys.stdin.buffer.read())
    _redirect_stdin()
    _preload(config.get("preload", []))
    execute_sample(config, config["result_fd"])


def _read_capped(path, cap):
    try:
        with open(path, "rb") as handle:
            return handle.read(cap).decode(errors="replace")
    except OSError:
        return ""


def _stragglers():
    """Processes in this sandbox other than its init and this server."""
    mine = {1, os.getpid()}
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in mine]


def _clean_tmp(keep):
    import shutil

    for name in os.listdir("/tmp"):
        path = os.path.join("/tmp", name)
        if path != keep:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def _serve_one(request, control_out, base, setup):
    """Fork a child for one sample, wait for it within the wall clock, report to the engine."""
    import select
    import shutil
    import signal

    # On bwrap's private tmpfs, creating and deleting the sample's files costs nothing.
    workdir = tempfile.mkdtemp(prefix="sample-", dir="/tmp" if setup.get("private_tmp") else base)
    if request.get("uid") is not None:
        os.chown(workdir, request["uid"], request["gid"])
    outputs = os.path.dirname(workdir)
    stdout_path, stderr_path = os.path.join(outputs, "stdout"), os.path.join(outputs, "stderr")
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: becomes the sample
        try:
            os.close(read_end)
            os.close(control_out)
            os.setsid()
            _redirect_stdin()
            for fd, path in ((1, stdout_path), (2, stderr_path)):
                handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                if request.get("uid") is not None:
                    os.fchown(handle, request["uid"], request["gid"])
                os.dup2(handle, fd)
                os.close(handle)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            os.chdir(workdir)
            os.environ["HOME"] = os.environ["TMPDIR"] = workdir
            tempfile.tempdir = None
            _preload(request.get("preload", []))
            execute_sample(request, write_end)
        finally:
            os._exit(70)
    os.close(write_end)
    deadline = started + request["limits"]["wall_s"]
    chunks, size, timed_out, status = [], 0, False, None
    # Wait for the sample process to end (end-of-file alone is not enough: a process it
    # started may hold the pipe open, or it may close the pipe and go on) or the wall clock
    # to run out. A pidfd becomes readable when the process ends: no polling.
    pidfd = os.pidfd_open(pid)
    watched = [read_end, pidfd]
    while status is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select(watched, [], [], remaining)
        if read_end in ready:
            chunk = os.read(read_end, 65536)
            if not chunk:
                watched.remove(read_end)
            elif size < 16 * 1024 * 1024:
                chunks.append(chunk)
                size += len(chunk)
        if pidfd in ready:
            _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    os.set_blocking(read_end, False)
    try:
        while True:  # what the sample wrote just before it ended
            chunk = os.read(read_end, 65536)
            if not chunk or size >= 16 * 1024 * 1024:
                break
            chunks.append(chunk)
            size += len(chunk)
    except BlockingIOError:
        pass
    os.close(read_end)
    if status is None:
        _, status = os.waitpid(pid, 0)
    exit_code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    cap = request["limits"]["output_bytes"]
    reply = {"results": b"".join(chunks).decode(errors="replace"), "exit_code": exit_code,
             "timed_out": timed_out, "stdout": _read_capped(stdout_path, cap),
             "stderr": _read_capped(stderr_path, cap), "duration_s": time.monotonic() - started}
    # Leave nothing for the next sample: its files, /tmp, and any process it left behind.
    for path in (workdir, stdout_path, stderr_path):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.unlink(path)
    if setup.get("private_tmp"):
        _clean_tmp(keep=base)
    leftover = _stragglers() if setup.get("pid_namespace") else []
    for straggler in leftover:
        try:
            os.kill(straggler, signal.SIGKILL)
        except OSError:
            pass
    reply["stragglers"] = len(leftover)
    data = (json.dumps(reply) + "\n").encode()
    while data:
        data = data[os.write(control_out, data):]


def serve():
    """Fork-server mode: preload once, then one JSON request per stdin line, one reply each.

    Requests arrive from the engine only; no sample code ever runs in this process, so its
    memory stays pristine and every child starts from the same state.
    """
    control_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    setup = json.loads(sys.stdin.buffer.readline())
    _preload(setup.get("preload", []))
    import gc

    # Children then leave the preloaded objects' pages alone (no copy-on-write by the GC).
    gc.collect()
    gc.freeze()
    base = os.getcwd()
    ready = (json.dumps({"ready": True, "pid": os.getpid()}) + "\n").encode()
    os.write(control_out, ready)
    for line in sys.stdin.buffer:
        if line.strip():
            _serve_one(json.loads(line), control_out, base, setup)


def entry(args):
    """Dispatch on the mode an engine asked for."""
    mode = args[0] if args else "once"
    if mode == "serve":
        serve()
    elif mode == "once":
        main()
    else:
        raise SystemExit(f"unknown runner mode {mode!r}")
