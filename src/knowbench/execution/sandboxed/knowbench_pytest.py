"""pytest, emulated for the tests knowbench runs in the sandbox; stdlib only.

Benchmark tests are written for pytest, but the sandbox runs them without it (pytest's
collection and plugins are neither needed nor trusted there). This module holds both parts
of the emulation:

- **runner fixtures**: what `knowbench_runner` gives every test item: the `tmp_path`,
  `monkeypatch` and `capsys` fixtures (`RUNNER_FIXTURES`), and calling a test function, a
  pytest-style `class Test*` method or a `unittest.TestCase` method the way pytest would;
- **the spec harness**: the code between the `spec harness` markers below. Mining
  (`knowbench.builders.harness`) copies that source into every test spec whose tests need
  more of pytest (`parametrize`, `skip`/`skipif`/`xfail`/`usefixtures` marks, the module's and
  conftest's fixtures, a minimal `request`): a spec must run on its own, so the harness
  travels with it. It therefore imports only the standard library, names everything it
  defines `_kb_*`/`_Kb*` (out of the tests' way), and reads the spec's globals (its
  `pytestmark`, the `skipif` conditions), which in this module are the module's own.

Like every module in this directory it must not import knowbench: it runs in whatever
environment the benchmark's tests need.
"""

import os
import pathlib
import sys

RUNNER_FIXTURES = ("tmp_path", "monkeypatch", "capsys")


class UnsupportedFixture(RuntimeError):
    """A test asks for a fixture the runner or the spec harness does not provide.

    The runner classifies it (reason `unsupported-fixture`) without reading the message; the
    spec harness raises this same class when it runs under the runner.
    """


class MonkeyPatch:
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


class CaptureResult(tuple):
    @property
    def out(self):
        return self[0]

    @property
    def err(self):
        return self[1]


class Capsys:
    """The subset of pytest's `capsys` fixture: captures sys.stdout/sys.stderr."""

    def __init__(self):
        import io

        self._io = io
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()

    def readouterr(self):
        out, err = sys.stdout.getvalue(), sys.stderr.getvalue()
        sys.stdout, sys.stderr = self._io.StringIO(), self._io.StringIO()
        return CaptureResult((out, err))

    def close(self):
        sys.stdout, sys.stderr = self._saved


def run_function(function, new_tmp_dir, fixtures, skip_self=False):
    """Call a test function (or bound method, `skip_self`) with the runner fixtures it names.

    `new_tmp_dir()` makes the fresh directory behind `tmp_path`. The undo of each fixture set
    up is appended to `fixtures`, for the caller to run whatever the outcome. Raises
    `UnsupportedFixture` for any other parameter; a coroutine the test returns is run.
    """
    kwargs = {}
    code = function.__code__
    for parameter in code.co_varnames[int(skip_self): code.co_argcount + code.co_kwonlyargcount]:
        if parameter == "tmp_path":
            kwargs[parameter] = pathlib.Path(new_tmp_dir())
        elif parameter == "monkeypatch":
            kwargs[parameter] = MonkeyPatch()
            fixtures.append(kwargs[parameter].undo)
        elif parameter == "capsys":
            kwargs[parameter] = Capsys()
            fixtures.append(kwargs[parameter].close)
        else:
            raise UnsupportedFixture(f"fixture '{parameter}' is not supported by the knowbench runner")
    outcome = function(**kwargs)
    if hasattr(outcome, "__await__"):
        import asyncio

        asyncio.run(outcome)


def run_test_class(cls, method, new_tmp_dir, fixtures):
    """A pytest-style `class Test*`: a fresh instance per test, with xunit setup hooks."""
    instance = cls()
    setup, teardown = getattr(instance, "setup_method", None), getattr(instance, "teardown_method", None)
    bound = getattr(instance, method)
    if setup is not None:
        setup(bound)
    try:
        run_function(bound, new_tmp_dir, fixtures, skip_self=True)
    finally:
        if teardown is not None:
            teardown(bound)


class _UnittestOutcome(__import__("unittest").TestResult):
    """What unittest's own `TestCase.run` found: the first problem, a skip, an unexpected
    success; passes and expected failures leave it empty."""

    def __init__(self):
        super().__init__()
        self.problem, self.skip, self.unexpected = None, None, False

    def _keep(self, err, subtest=None):
        if self.problem is None:
            self.problem = err[1]
            if subtest is not None and hasattr(self.problem, "add_note"):
                self.problem.add_note(f"in sub-test {subtest._subDescription()}")

    def addError(self, test, err):
        self._keep(err)

    def addFailure(self, test, err):
        self._keep(err)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._keep(err, subtest)

    def addSkip(self, test, reason):
        self.skip = reason

    def addUnexpectedSuccess(self, test):
        self.unexpected = True


def run_unittest(cls, method):
    """One method of a `unittest.TestCase`, run by unittest itself (`TestCase.run`): `setUp`,
    the test, `tearDown`, cleanups, skip decorators, `expectedFailure`, `subTest`. Raises
    what made it fail, `unittest.SkipTest` when it was skipped, AssertionError for an
    unexpected success. Class and module set-up are the caller's (see `enter_scopes`)."""
    import unittest

    outcome = _UnittestOutcome()
    cls(method).run(outcome)
    if outcome.problem is not None:
        raise outcome.problem
    if outcome.skip is not None:
        raise unittest.SkipTest(outcome.skip)
    if outcome.unexpected:
        raise AssertionError("unexpected success: the test is marked expectedFailure but passed")


def run_direct(namespace, item):
    """Call the test the way a script that names it does: `test_x()` or `Cls().test_x()`;
    no fixtures, no set-up or tear-down, a returned coroutine left unawaited."""
    if item["kind"] == "function":
        namespace[item["function"]]()
    else:
        getattr(namespace[item["cls"]](), item["function"])()


_MODULE_HOOKS = (("setUpModule", "setup_module"), ("tearDownModule", "teardown_module"))
_CLASS_HOOKS = (("setUpClass", "setup_class"), ("tearDownClass", "teardown_class"))


def _hook(owner, names):
    for name in names:
        hook = owner.get(name) if isinstance(owner, dict) else getattr(owner, name, None)
        if callable(hook):
            return hook
    return None


def _class_of(namespace, item):
    cls = namespace.get(item["cls"]) if item.get("cls") else None
    if not isinstance(cls, type) or getattr(cls, "__unittest_skip__", False):
        return None  # unittest never sets up a skipped class
    return cls


def enter_scopes(namespace, item, ready):
    """Module then class set-up, once each, as unittest and pytest run them before the
    first test of a module or class. `ready` remembers each scope: None once set up, the
    error when its set-up failed (raised again for every later test of that scope)."""
    keys = [(("module", item["spec"]), namespace, _MODULE_HOOKS[0])]
    cls = _class_of(namespace, item)
    if cls is not None:
        keys.append((("class", item["spec"], item["cls"]), cls, _CLASS_HOOKS[0]))
    for key, owner, names in keys:
        if key in ready:
            if ready[key] is not None:
                raise ready[key]
            continue
        hook = _hook(owner, names)
        try:
            if hook is not None:
                hook()
        except BaseException as error:
            ready[key] = error
            raise
        ready[key] = None


def leave_scopes(namespace, item, ready, last_of_class, last_of_spec):
    """Class then module tear-down after the last test of each scope that was set up.
    Raises the first tear-down error (pytest reports it on that last test)."""
    scopes = []
    cls = _class_of(namespace, item)
    if last_of_class and cls is not None:
        scopes.append((("class", item["spec"], item["cls"]), cls, _CLASS_HOOKS[1]))
    if last_of_spec:
        scopes.append((("module", item["spec"]), namespace, _MODULE_HOOKS[1]))
    first = None
    for key, owner, names in scopes:
        if key not in ready or ready.pop(key) is not None:
            continue
        hook = _hook(owner, names)
        try:
            if hook is not None:
                hook()
            if key[0] == "class" and hasattr(owner, "doClassCleanups"):
                owner.doClassCleanups()
                errors = getattr(owner, "tearDown_exceptions", None)
                if errors:
                    raise errors[0][1]
        except BaseException as error:
            if first is None:
                first = error
    if first is not None:
        raise first


# --- spec harness begins: copied into test specs; standard library only, names `_kb_*`
# A spec starts with this section, so it imports what it needs itself.
import inspect as _kb_inspect  # noqa: E402
import itertools as _kb_itertools  # noqa: E402
import unittest as _kb_unittest  # noqa: E402

try:  # the running runner's class (it imports this module), so the outcome's reason says so
    from knowbench_pytest import UnsupportedFixture as _KbUnsupportedFixture
except ImportError:
    class _KbUnsupportedFixture(RuntimeError):
        pass

_kb_FIXTURES = {}
_kb_AUTOUSE = []
_kb_CLASSES_READY = set()


class _KbRequest:
    """The parts of pytest's `request` fixture that tests use."""

    def __init__(self, owner, function, param, resolve, finalizers):
        self.instance = owner
        self.cls = type(owner) if owner is not None else None
        self.function = function
        self.param = param
        self.node = self
        self.name = getattr(function, "__name__", "")
        self._resolve = resolve
        self._finalizers = finalizers

    def getfixturevalue(self, name):
        return self._resolve(name)

    def addfinalizer(self, finalizer):
        self._finalizers.append(finalizer)


def _kb_arguments(function):
    """The parameters pytest would fill: no default value, not injected by mock.patch."""
    parameters = [p.name for p in _kb_inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty]
    patchings = getattr(function, "patchings", ())
    injected = [p for p in patchings if not getattr(p, "attribute_name", None)
                and type(getattr(p, "new", None)).__name__ == "_SentinelObject"]
    return parameters[len(injected):]


def _kb_marks(function, owner):
    found = list(getattr(function, "pytestmark", []))
    if owner is not None:
        found += list(getattr(type(owner), "pytestmark", []))
    module_marks = globals().get("pytestmark", [])
    found += list(module_marks) if isinstance(module_marks, (list, tuple)) else [module_marks]
    return [getattr(mark, "mark", mark) for mark in found]


def _kb_skip_reason(marks):
    for mark in marks:
        if mark.name in ("skip", "xfail"):
            return mark.name
        if mark.name == "skipif":
            for condition in list(mark.args) or [mark.kwargs.get("condition", False)]:
                if isinstance(condition, str):
                    condition = eval(condition, globals())
                if condition:
                    return "skipif"
    return None


def _kb_cases(marks):
    """Every combination of the test's parametrize cases (one empty case without any)."""
    grids = []
    for mark in marks:
        if mark.name != "parametrize":
            continue
        names = mark.args[0] if mark.args else mark.kwargs["argnames"]
        values = mark.args[1] if len(mark.args) > 1 else mark.kwargs["argvalues"]
        if mark.kwargs.get("indirect"):
            raise RuntimeError("indirect parametrization is not supported by the knowbench harness")
        single = isinstance(names, str) and "," not in names  # pytest's force_tuple
        if isinstance(names, str):
            names = [name.strip() for name in names.split(",") if name.strip()]
        cases = []
        for case in values:
            if type(case).__name__ == "ParameterSet":
                if _kb_skip_reason([getattr(m, "mark", m) for m in case.marks]):
                    continue
                case = case.values
            elif single:
                case = (case,)
            cases.append(dict(zip(names, case)))  # noqa: B905 (specs may run on Python < 3.10)
        grids.append(cases)
    for combination in _kb_itertools.product(*grids):
        merged = {}
        for part in combination:
            merged.update(part)
        yield merged


def _kb_lookup(name, owner):
    if owner is not None:
        method = getattr(owner, "_kb_fixture_" + name, None)
        if method is not None:
            return method, getattr(type(owner), "_kb_fixture_params", {}).get(name)
    return _kb_FIXTURES.get(name)


def _kb_autouse(owner):
    return [*_kb_AUTOUSE, *(getattr(type(owner), "_kb_autouse", ()) if owner is not None else ())]


def _kb_fixture_cases(function, owner, used, case):
    """Every combination of the params of the parametrized fixtures the test needs."""
    seen, parametrized, pending = set(case), [], [*_kb_autouse(owner), *used, *_kb_arguments(function)]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        entry = _kb_lookup(name, owner)
        if entry is None:
            continue
        fixture, params = entry
        if params is not None:
            parametrized.append((name, list(params)))
        pending += _kb_arguments(fixture)
    for values in _kb_itertools.product(*(params for _, params in parametrized)):
        yield {name: value for (name, _), value in zip(parametrized, values)}  # noqa: B905


def _kb_run_case(function, owner, case, used, builtins, fixture_params):
    values, finalizers = dict(case), []

    def request(param=None):
        return _KbRequest(owner, function, param, resolve, finalizers)

    def resolve(name):
        if name in values:
            return values[name]
        if name in builtins:
            return builtins[name]
        if name == "request":
            return request()
        if name == "tmpdir" and "tmp_path" in builtins:
            from _pytest._py.path import LocalPath
            values[name] = LocalPath(builtins["tmp_path"])
            return values[name]
        if name == "capfd" and "capsys" in builtins:
            return builtins["capsys"]
        entry = _kb_lookup(name, owner)
        if entry is None:
            raise _KbUnsupportedFixture(f"fixture '{name}' is not available in the knowbench harness")
        fixture = entry[0]
        arguments = {argument: request(fixture_params.get(name)) if argument == "request"
                     else resolve(argument) for argument in _kb_arguments(fixture)}
        value = fixture(**arguments)
        if _kb_inspect.isgenerator(value):
            generator = value
            value = next(generator)
            finalizers.append(lambda: next(generator, None))
        values[name] = value
        return value

    try:
        for name in [*_kb_autouse(owner), *used]:
            resolve(name)
        outcome = function(**{name: resolve(name) for name in _kb_arguments(function)})
        if _kb_inspect.isawaitable(outcome):
            import asyncio
            asyncio.run(outcome)
    finally:
        while finalizers:
            finalizers.pop()()


def _kb_call(function, owner=None, **builtins):
    """Run a pytest-style test as pytest would: each case, with fixtures set up and torn down."""
    marks = _kb_marks(function, owner)
    reason = _kb_skip_reason(marks)
    if reason:
        raise _kb_unittest.SkipTest(f"marked {reason}")
    used = [name for mark in marks if mark.name == "usefixtures" for name in mark.args]
    for case in _kb_cases(marks):
        for fixture_params in _kb_fixture_cases(function, owner, used, case):
            _kb_run_case(function, owner, case, used, builtins, fixture_params)


def _kb_call_method(cls, name, **builtins):
    """Run the test method `name` of a pytest-style class on a fresh instance."""
    if cls not in _kb_CLASSES_READY:
        _kb_CLASSES_READY.add(cls)
        if hasattr(cls, "setup_class"):
            cls.setup_class()
    instance = cls()
    method = getattr(instance, name)
    if hasattr(instance, "setup_method"):
        instance.setup_method(method)
    try:
        _kb_call(method, instance, **builtins)
    finally:
        if hasattr(instance, "teardown_method"):
            instance.teardown_method(method)
# --- spec harness ends
