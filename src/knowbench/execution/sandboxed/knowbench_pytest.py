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

import functools
import os
import pathlib
import sys

RUNNER_FIXTURES = ("tmp_path", "monkeypatch", "capsys")
# The conftest hooks a mined spec carries into a registry of the spec harness, each with its
# registry (`pytest_configure`, called once as the spec loads, has none), and every registry
# the spec fills as it loads: made afresh for each spec (`_install_harness`), watched by the
# runner while the tests run. Mining reads the hooks (`builders.harness.CONFTEST_HOOKS`).
HOOK_REGISTRIES = {"pytest_generate_tests": "_kb_GENERATE_HOOKS",
                   "pytest_collection_modifyitems": "_kb_MODIFY_HOOKS",
                   "pytest_runtest_setup": "_kb_SETUP_HOOKS"}
HARNESS_REGISTRIES = ("_kb_FIXTURES", "_kb_OUTER_FIXTURES", "_kb_AUTOUSE", *HOOK_REGISTRIES.values())


class UnsupportedFixture(RuntimeError):
    """A test asks for a fixture the runner or the spec harness does not provide.

    The runner classifies it (reason `unsupported-fixture`) without reading the message; the
    spec harness raises this same class when it runs under the runner.
    """


class MonkeyPatch:
    """The subset of pytest's `monkeypatch` fixture that benchmark tests use.

    `held` maps each instance holding changes to what it changed last (split: a call of the
    target made meanwhile cannot cross, see `knowbench_split.patches_held`). Changes of the
    environment and of the working directory are not held: they cross with each call
    (`knowbench_split.process_view`)."""

    _missing = object()
    held = {}  # noqa: RUF012 (shared by every instance on purpose)

    def __init__(self):
        self._undo = []

    def _hold(self, undo, what):
        self._undo.append(undo)
        if what is not None:
            MonkeyPatch.held[id(self)] = what

    def setattr(self, target, name, value=_missing, raising=True):
        if value is self._missing:  # monkeypatch.setattr("module.attr", value)
            module_name, _, attr = target.rpartition(".")
            value, target, name = name, __import__(module_name, fromlist=["_"]), attr
        old = getattr(target, name, self._missing)
        if old is self._missing and raising:
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        if isinstance(target, type):  # what the class itself holds: a staticmethod stays one
            old = target.__dict__.get(name, self._missing)
        self._hold(lambda: setattr(target, name, old) if old is not self._missing
                   else delattr(target, name), f"{_named(target)}.{name}")
        setattr(target, name, value)

    def delattr(self, target, name=_missing, raising=True):
        if name is self._missing:  # monkeypatch.delattr("module.attr")
            if not isinstance(target, str):
                raise TypeError("use delattr(target, name) or delattr(target) with target being a "
                                "dotted import string")
            module_name, _, name = target.rpartition(".")
            target = __import__(module_name, fromlist=["_"])
        if not hasattr(target, name):
            if raising:
                raise AttributeError(name)
            return
        old = getattr(target, name)
        if isinstance(target, type):  # what the class itself holds: a staticmethod stays one
            old = target.__dict__.get(name, old)
        self._hold(lambda: setattr(target, name, old), f"{_named(target)}.{name}")
        delattr(target, name)

    def setitem(self, mapping, key, value):
        old = mapping.get(key, self._missing)
        self._hold(lambda: mapping.__setitem__(key, old) if old is not self._missing
                   else mapping.pop(key, None), None if mapping is os.environ else f"{_named(mapping)}[{key!r}]")
        mapping[key] = value

    def delitem(self, mapping, key, raising=True):
        if key not in mapping:
            if raising:
                raise KeyError(key)
            return
        old = mapping[key]
        self._hold(lambda: mapping.__setitem__(key, old),
                   None if mapping is os.environ else f"{_named(mapping)}[{key!r}]")
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
        self._hold(lambda: os.chdir(old), None)
        os.chdir(path)

    def syspath_prepend(self, path):
        self._hold(lambda: sys.path.remove(str(path)), "sys.path")
        sys.path.insert(0, str(path))

    def undo(self):
        MonkeyPatch.held.pop(id(self), None)
        while self._undo:
            self._undo.pop()()

    @classmethod
    def context(cls):
        """A MonkeyPatch whose changes are undone when the `with` block ends."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            patch = cls()
            try:
                yield patch
            finally:
                patch.undo()

        return scope()


def _named(target):
    """How a patched object is named in a message: a module or class by its name."""
    if target is os.environ:
        return "os.environ"
    name = getattr(target, "__name__", None)
    return name if type(name) is str else type(target).__name__


def _runner_fixture(name, new_tmp_dir, fixtures):
    """A fixture the runner makes itself (`RUNNER_FIXTURES`; `capfd` is `capsys`): `tmp_path`
    from `new_tmp_dir()`, the undo of the others appended to `fixtures`."""
    if name == "tmp_path":
        return pathlib.Path(new_tmp_dir())
    if name == "monkeypatch":
        patch = MonkeyPatch()
        fixtures.append(patch.undo)
        return patch
    capture = Capsys()
    fixtures.append(capture.close)
    return capture


def run_function(function, new_tmp_dir, fixtures):
    """Call a test function (a bound method, a static method, a `functools.partial`) with the
    runner fixtures its signature names, as pytest reads it (`inspect.signature`: a bound
    method's `self` is not one; arguments `mock.patch` injects are not either).

    `new_tmp_dir()` makes the fresh directory behind `tmp_path`. The undo of each fixture set
    up is appended to `fixtures`, for the caller to run whatever the outcome. A parameter
    with a default value is left to it, as pytest leaves it; any other parameter the runner
    does not provide raises `UnsupportedFixture`. A generator function is refused, as pytest
    refuses it; a coroutine the test returns is run. A test of a spec that uses pytest's marks
    or defines fixtures runs through the spec harness instead (`spec_harness`).
    """
    _kb_refuse_generator(function)
    spec = getattr(_real_function(function), "__globals__", None)
    parameters = _kb_arguments(function)
    harness = spec_harness(spec, needed=any(name in _HARNESS_ONLY for name in parameters))
    if harness is not None:
        _CURRENT_TMP[0] = new_tmp_dir
        harness["_kb_call"](function, getattr(function, "__self__", None))
        return
    kwargs = {}
    for parameter in parameters:
        if parameter in RUNNER_FIXTURES or parameter == "capfd":
            kwargs[parameter] = _runner_fixture(parameter, new_tmp_dir, fixtures)
        elif parameter == "tmpdir":
            kwargs[parameter] = _runner_tmpdir(pathlib.Path(new_tmp_dir()))
        elif parameter == "recwarn":
            recording = _kb_recwarn()
            kwargs[parameter] = next(recording)
            fixtures.append(lambda recording=recording: next(recording, None))
        elif parameter in _kb_BUILTIN_FIXTURES:
            made, teardown = _kb_BUILTIN_FIXTURES[parameter]
            kwargs[parameter] = made()
            fixtures.append(getattr(kwargs[parameter], teardown))
        else:
            raise UnsupportedFixture(f"fixture '{parameter}' is not supported by the knowbench runner")
    outcome = function(**kwargs)
    if hasattr(outcome, "__await__"):
        import asyncio

        asyncio.run(outcome)


# What `spec_harness` found for each spec namespace (by id; each lives as long as the process):
# the namespace, with the harness installed, or None when the spec needs none.
_HARNESSED = {}
# The names each spec namespace holds from the program's module (copied into it before the
# spec's code ran, `spec_loaded`): never the spec's marks or fixtures.
_INHERITED = {}
_ABSENT = object()
_CURRENT_TMP = [None]  # the running item's `new_tmp_dir`, for the harness's `tmp_path`
# What a test module's own code defines for pytest and unittest, never a program's: a program's
# `setup_function` would run around every test (and could swap the test's code for a pass).
_NOT_INHERITED = frozenset(("pytestmark", "setup_module", "teardown_module", "setUpModule", "tearDownModule",
                            "setup_function", "teardown_function", "pytest_generate_tests"))


def spec_loaded(namespace, program):
    """The runner, once a spec's code has run in `namespace`, a copy of the program's globals
    (`program`, as they were copied): what the program put there is the program's, and (in
    process) the candidate's. A module-level `pytestmark` it holds is dropped: the harness
    would apply it to every test (`[pytest.mark.xfail]` would pass a wrong program)."""
    inherited = frozenset(name for name, value in program.items() if namespace.get(name, _ABSENT) is value)
    _INHERITED[id(namespace)] = inherited
    for name in inherited:  # nor are the harness's names (`_kb_*`) or a module's xunit hooks
        if name in _NOT_INHERITED or name.startswith(("_kb_", "_Kb")):
            del namespace[name]
    namespace["_kb_INHERITED"] = inherited  # (the harness evaluates skipif strings without them)


def forget_specs():
    """Forget every spec seen (the fork server's warm-up ran some of its own)."""
    _HARNESSED.clear()
    _INHERITED.clear()
    _CURRENT_TMP[0] = None


# Fixtures only the spec harness serves: a test asking for one runs through it.
_HARNESS_ONLY = frozenset(("request", "pytestconfig", "subtests"))


def spec_harness(namespace, needed=False):
    """For a spec knowbench did not mine that uses pytest's marks (`parametrize`, `skip`,
    `skipif`, `xfail`, `usefixtures`, a module's or class's `pytestmark`) or defines fixtures
    (`@pytest.fixture` in the module or in a test class): the spec harness made for it (the
    globals of its functions, `_install_harness`), its fixtures registered as mining registers
    them, so its tests run as pytest runs them. None for any other spec, and for a mined one
    (its tests call the harness themselves). `needed`: a test of the spec asks for a fixture
    only the harness serves (`request`), so it is made for any spec but a mined one."""
    if type(namespace) is not dict:
        return None
    key = id(namespace)
    if _HARNESSED.get(key) is None and (key not in _HARNESSED or needed):
        inherited = _INHERITED.get(key, frozenset())
        own = {name: value for name, value in list(namespace.items()) if name not in inherited}
        needed = "_kb_call" not in own and (needed or _uses_pytest(own))
        _HARNESSED[key] = _install_harness(namespace, own) if needed else None
    return _HARNESSED[key]


def _fixture_of(value):
    """(function, name or None, params, scope, autouse, ids) of a pytest fixture definition, or None:
    pytest 8.4 and later make a `FixtureFunctionDefinition`, earlier releases mark the
    function (`_pytestfixturefunction`) and wrap it."""
    if type(value).__name__ == "FixtureFunctionDefinition":
        marker = getattr(value, "_fixture_function_marker", None)
        function = getattr(value, "_fixture_function", None)
    elif type(value).__name__ == "function" and "_pytestfixturefunction" in value.__dict__:
        marker = value.__dict__["_pytestfixturefunction"]
        function = getattr(value.__dict__.get("__pytest_wrapped__"), "obj", value)
    else:
        return None
    if marker is None or not callable(function):
        return None
    scope = getattr(marker, "scope", "function")
    params = getattr(marker, "params", None)
    return (function, getattr(marker, "name", None), None if params is None else list(params),
            scope if isinstance(scope, str) else "function", bool(getattr(marker, "autouse", False)),
            getattr(marker, "ids", None))


def _spec_classes(namespace):
    name = namespace.get("__name__")
    return [value for value in list(namespace.values())
            if isinstance(value, type) and value.__dict__.get("__module__") == name]


def _uses_pytest(namespace):
    if "pytestmark" in namespace or "pytest_generate_tests" in namespace:
        return True
    for cls in _spec_classes(namespace):
        if _kb_owned(cls, "pytestmark", None, namespace.get("__name__")) is not None \
                or any(map(_pytest_object, list(cls.__dict__.values()))):
            return True
    return any(map(_pytest_object, list(namespace.values())))


def _pytest_object(value):
    """A fixture definition, or a function with marks (only functions are looked into)."""
    return _fixture_of(value) is not None or (type(value).__name__ == "function" and "pytestmark" in value.__dict__)


def _runner_tmp_path():
    return pathlib.Path(_CURRENT_TMP[0]())


def _runner_monkeypatch():
    patch = MonkeyPatch()
    yield patch
    patch.undo()


def _runner_capsys():
    capture = Capsys()
    yield capture
    capture.close()


def _runner_tmpdir(tmp_path):
    """pytest's `tmpdir`: `tmp_path` as a `py.path.local` (pytest's own class)."""
    try:
        from _pytest._py.path import LocalPath
    except ImportError:  # pytest before 7.2
        from py.path import local as LocalPath
    return LocalPath(tmp_path)


def _install_harness(namespace, own):
    """The spec harness for `namespace`, as if its source had run there: this module's own
    harness functions (every name `_kb_*`/`_Kb*` is the harness's) made again on globals of
    their own, with the real builtins and the spec's namespace as `_kb_SPEC` (which they read:
    `pytestmark`, `skipif` strings), and the harness's registries afresh, the spec's fixtures
    registered. Compiling the source again would cost each sample's process about 13 ms."""
    import builtins
    import types

    harness = {"__builtins__": builtins, "__name__": "knowbench_harness", "_kb_SPEC": namespace}
    for name, value in list(globals().items()):
        if name.startswith(("_kb_", "_Kb")):
            if type(value) is types.FunctionType:
                made = types.FunctionType(value.__code__, harness, value.__name__, value.__defaults__)
                made.__kwdefaults__, made.__doc__ = value.__kwdefaults__, value.__doc__
                value = made
            harness[name] = value
    harness.update({name: type(harness[name])() for name in HARNESS_REGISTRIES},
                   _kb_CLASSES_READY=set(), _kb_SCOPED={}, _kb_SCOPED_TEARDOWNS=[])
    fixtures, autouse = harness["_kb_FIXTURES"], harness["_kb_AUTOUSE"]
    for name, function in (("tmp_path", _runner_tmp_path), ("monkeypatch", _runner_monkeypatch),
                           ("capsys", _runner_capsys), ("capfd", _runner_capsys), ("tmpdir", _runner_tmpdir)):
        fixtures[name] = (function, None, "function")  # (`recwarn`: the harness's own, `_kb_recwarn`)
    for name, value in list(own.items()):  # the spec's own: never the program's (`spec_loaded`)
        found = _fixture_of(value)
        if found is not None:
            function, named, params, scope, auto, ids = found
            fixtures[named or name] = (function, params, scope, ids)
            if auto:
                autouse.append(named or name)
    for cls in _spec_classes(own):
        for name, value in list(cls.__dict__.items()):
            found = _fixture_of(value)
            if found is None:
                continue
            function, named, params, scope, auto, ids = found
            named = named or name
            setattr(cls, "_kb_fixture_" + named, function)
            for attribute, entry in (("_kb_fixture_params", params), ("_kb_fixture_scopes", scope),
                                     ("_kb_fixture_ids", ids)):
                if attribute not in cls.__dict__:
                    setattr(cls, attribute, dict(_kb_owned(cls, attribute, {}, own["__name__"])))
                cls.__dict__[attribute][named] = entry
            if auto:
                if "_kb_autouse" not in cls.__dict__:
                    cls._kb_autouse = list(_kb_owned(cls, "_kb_autouse", (), own["__name__"]))
                cls._kb_autouse.append(named)
    return harness


def run_test_function(namespace, name, new_tmp_dir, fixtures):
    """A module-level test function, between the module's `setup_function` and
    `teardown_function` when it has them (each given the function if it takes an argument)."""
    function = namespace[name]
    _run_between(_hook(namespace, ("setup_function",)), _hook(namespace, ("teardown_function",)),
                 function, new_tmp_dir, fixtures)


def run_test_class(cls, method, new_tmp_dir, fixtures):
    """A pytest-style `class Test*`: a fresh instance per test, between its `setup_method`
    and `teardown_method` (each given the test method if it takes an argument)."""
    instance = cls()
    _run_between(getattr(instance, "setup_method", None), getattr(instance, "teardown_method", None),
                 getattr(instance, method), new_tmp_dir, fixtures)


def _run_between(setup, teardown, function, new_tmp_dir, fixtures):
    """`run_function` between a set-up and a tear-down hook (None: none), each given the test
    if it takes an argument; the tear-down runs whatever the test did. With the spec harness,
    the test's `filterwarnings` marks hold around the hooks too, as pytest has them."""
    def run():
        if setup is not None:
            _kb_call_optional(setup, function)
        then_clean_up(lambda: run_function(function, new_tmp_dir, fixtures),
                      lambda: teardown is not None and _kb_call_optional(teardown, function))

    harness = spec_harness(getattr(_real_function(function), "__globals__", None))
    if harness is None or (setup is None and teardown is None):
        run()  # (the runner restores the warning filters after every test)
        return
    import warnings

    with warnings.catch_warnings():
        harness["_kb_warning_filters"](harness["_kb_marks"](function, getattr(function, "__self__", None)))
        run()


class _UnittestOutcome(__import__("unittest").TestResult):
    """What unittest's own `TestCase.run` found: the first problem, a skip, an unexpected
    success; passes and expected failures leave it empty."""

    def __init__(self):
        super().__init__()
        self.problem, self.skip, self.unexpected = None, None, False

    def _keep(self, err, subtest=None):
        kept = _kb_first_problem(self.problem, err[1])
        if kept is not self.problem:
            self.problem = kept
            if subtest is not None:
                _kb_note(kept, f"in sub-test {subtest._subDescription()}")

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

    def conclude(self):
        """Raise what made the case fail, `unittest.SkipTest` when it was skipped,
        AssertionError for an unexpected success."""
        __tracebackhide__ = True
        if self.problem is not None:
            raise self.problem
        if self.skip is not None:
            raise __import__("unittest").SkipTest(self.skip)
        if self.unexpected:
            raise AssertionError("unexpected success: the test is marked expectedFailure but passed")


class _RunnerFixtures(dict):
    """The runner's fixtures (`tmp_path`, `monkeypatch`, `capsys`) for the harness to hand a
    test's fixtures where no wrapper of the spec's own hands them over (a unittest method's
    autouse fixtures), each made on first use, its undo appended to `fixtures`."""

    def __init__(self, new_tmp_dir, fixtures):
        super().__init__()
        self._new_tmp_dir, self._fixtures = new_tmp_dir, fixtures

    def __contains__(self, name):
        return name in RUNNER_FIXTURES

    def __getitem__(self, name):
        if not dict.__contains__(self, name):
            if name not in RUNNER_FIXTURES:
                raise KeyError(name)
            dict.__setitem__(self, name, _runner_fixture(name, self._new_tmp_dir, self._fixtures))
        return dict.__getitem__(self, name)


def run_unittest(cls, method, namespace=None, new_tmp_dir=None, fixtures=None):
    """One method of a `unittest.TestCase`, run by unittest itself (`TestCase.run`): `setUp`,
    the test, `tearDown`, cleanups, skip decorators, `expectedFailure`, `subTest`; around it
    the class's `setup_method`/`teardown_method`, given the instance and the method, as pytest
    calls them on a TestCase. Raises what made it fail, `unittest.SkipTest` when it was
    skipped, AssertionError for an unexpected success. Class and module set-up are the
    caller's (see `enter_scopes`). In a spec (`namespace`) that uses pytest's marks or
    fixtures, pytest's marks and autouse fixtures apply around it (`_kb_call_unittest`), the
    runner's own (`tmp_path` from `new_tmp_dir()`, undos appended to `fixtures`) served to them."""

    outcome = _UnittestOutcome()
    case = cls(method)

    def run():
        __tracebackhide__ = True
        skipped = getattr(cls, "__unittest_skip__", False)
        setup = None if skipped else getattr(cls, "setup_method", None)
        teardown = None if skipped else getattr(cls, "teardown_method", None)
        if setup is not None:
            setup(case, getattr(case, method))

        def test():
            __tracebackhide__ = True
            case.run(outcome)
            outcome.conclude()

        then_clean_up(test, lambda: teardown is not None and teardown(case, getattr(case, method)))

    harness = _unittest_harness(namespace)
    if harness is None:
        run()
    elif new_tmp_dir is None:
        harness["_kb_call_unittest"](case, method, run)
    else:
        _CURRENT_TMP[0] = new_tmp_dir  # (the installed harness's `tmp_path` fixture)
        harness["_kb_call_unittest"](case, method, run,
                                     _RunnerFixtures(new_tmp_dir, fixtures if fixtures is not None else []))


def _unittest_harness(namespace):
    """The harness a spec's unittest methods run through: a mined spec's own copy (one mined
    before this function existed has none: its TestCases run as they always did), else the one
    installed for a spec that uses pytest (`spec_harness`), else None."""
    if type(namespace) is not dict:
        return None
    if _mined(namespace):
        return namespace if "_kb_call_unittest" in namespace else None
    return spec_harness(namespace)


def _mined(namespace):
    """Whether a spec's namespace holds the spec harness's own copy (mined), not one it
    inherited from another spec."""
    return "_kb_call" in namespace and "_kb_call" not in _INHERITED.get(id(namespace), ())


def run_direct(namespace, item):
    """Call the test the way a script that names it does: `test_x()` or `Cls().test_x()`;
    no fixtures, no set-up or tear-down, a returned coroutine left unawaited."""
    if item["kind"] == "function":
        namespace[item["function"]]()
    else:
        getattr(class_at(namespace, item["cls"])(), item["function"])()


def class_at(namespace, path):
    """The class an item's `cls` names: `Outer::Inner` for a class nested in another; None
    when there is none."""
    names = path.split("::")
    cls = namespace.get(names[0])
    for name in names[1:]:
        cls = getattr(cls, name, None) if isinstance(cls, type) else None
    return cls if isinstance(cls, type) else None


def collect(namespace):
    """The tests pytest would collect from a spec's namespace once its code has run, as
    (class path or None, name): functions and classes the spec's code made (their
    `__module__` is the spec's), by pytest's rules on the live objects (see `_class_tests`
    and `_is_test`). The runner compares them with the static items
    (`knowbench.benchmark.collect`) to find tests no reading of the syntax tree could."""
    import types

    module_name = namespace.get("__name__")
    found = []
    for name, value in list(namespace.items()):
        if isinstance(value, type):
            if value.__module__ == module_name:
                found += _class_tests(value, name)
        else:
            function = _real_function(value)
            if isinstance(function, types.FunctionType) and function.__module__ == module_name \
                    and _is_test(name, value):
                found.append((None, name))
    return found


def _real_function(value):
    """The function a test object calls: itself, or what a `functools.partial` wraps (pytest
    collects both)."""
    while isinstance(value, functools.partial):
        value = value.func
    return getattr(value, "__func__", value)


def _flag(value):
    """An object's `__test__`, None when it has none (or reading it fails)."""
    try:
        return getattr(value, "__test__", None)
    except Exception:
        return None


def _is_test(name, value):
    """pytest's rule for a function or method: its name starts with `test` or its `__test__`
    is True, and its `__test__` is not false."""
    if _fixture_of(value) is not None:  # a fixture named test_*: pytest collects no test of it
        return False
    flag = _flag(value)
    return (name.startswith("test") or flag is True) and (flag is None or bool(flag))


def _class_tests(cls, path):
    """pytest's rules for a class: none if its `__test__` is false or it is abstract; a
    `unittest.TestCase` by unittest's loader (its `test*` methods, sorted, or `runTest` when
    it has none); any other class named `Test*` (or whose `__test__` is True) unless it has an
    `__init__` or `__new__` other than object's: its test methods, inherited first, and the
    test classes nested in it."""
    flag = _flag(cls)
    if (flag is not None and not flag) or _kb_inspect.isabstract(cls):
        return []
    if issubclass(cls, _kb_unittest.TestCase):
        names = [name for name in _kb_unittest.TestLoader().getTestCaseNames(cls)
                 if _flag(getattr(cls, name, None)) is None or _flag(getattr(cls, name, None))]
        if not names and getattr(cls, "runTest", None) is not None:
            names = ["runTest"]
        return [(path, name) for name in names]
    if not (path.rpartition("::")[2].startswith("Test") or flag is True) or cls.__init__ is not object.__init__ \
            or cls.__new__ is not object.__new__:
        return []
    per_class, seen = [], set()
    for owner in cls.__mro__:
        found = []
        for name, value in list(vars(owner).items()):
            if name in seen:
                continue
            seen.add(name)
            if isinstance(value, type):
                found += _class_tests(value, path + "::" + name)
            elif callable(getattr(value, "__func__", value)) and _is_test(name, getattr(value, "__func__", value)):
                found.append((path, name))
        per_class.append(found)
    return [test for found in reversed(per_class) for test in found]


def run_collected(namespace, tests, new_tmp_dir, fixtures):
    """Run tests the runner found only once the spec ran (see `collect`), each as its item
    would run; the first failure is raised, naming the test."""
    for path, name in tests:
        try:
            cls = class_at(namespace, path) if path else None
            if cls is None:
                run_test_function(namespace, name, new_tmp_dir, fixtures)
            elif issubclass(cls, _kb_unittest.TestCase):
                run_unittest(cls, name)
            else:
                run_test_class(cls, name, new_tmp_dir, fixtures)
        except BaseException as error:
            test = "::".join(part for part in (path, name) if part)
            if hasattr(error, "add_note"):
                error.add_note(f"in the test {test}, which the spec's code made while it ran")
            raise


# Each scope's hooks, in the order they set up (tear-downs run the other way), each with how it
# is called: "unittest" with no argument, exactly as unittest calls it (so a `setUpClass`
# without @classmethod fails as it fails there), "pytest" with the module or class only when it
# takes one (a class hook also as a plain method: pytest's getimfunc). pytest looks for both
# spellings of the module's hooks; a TestCase gets unittest's class hooks and pytest's own
# (pytest calls `setup_class` on it too); `setUpClass` in a pytest class is no hook.
_MODULE_HOOKS = (((("setUpModule", "unittest"), ("setup_module", "pytest")),),
                 ((("tearDownModule", "unittest"), ("teardown_module", "pytest")),))
_UNITTEST_CLASS_HOOKS = (((("setUpClass", "unittest"),), (("setup_class", "pytest"),)),
                         ((("teardown_class", "pytest"),), (("tearDownClass", "unittest"),)))
_PYTEST_CLASS_HOOKS = (((("setup_class", "pytest"),),), ((("teardown_class", "pytest"),),))


def _hook(owner, names):
    """The first of `names` the module (a dict) or class holds as a callable."""
    for name in names:
        hook = owner.get(name) if isinstance(owner, dict) else getattr(owner, name, None)
        if callable(hook):
            return hook
    return None


def _scope_hooks(owner, choices):
    """(hook, how it is called) for each hook `choices` finds: one per group of spellings."""
    found = []
    for group in choices:
        for name, style in group:
            hook = _hook(owner, (name,))
            if hook is not None:
                found.append((hook, style))
                break
    return found


def _class_hooks(cls):
    return _UNITTEST_CLASS_HOOKS if issubclass(cls, _kb_unittest.TestCase) else _PYTEST_CLASS_HOOKS


def _class_of(namespace, item):
    cls = class_at(namespace, item["cls"]) if item.get("cls") else None
    if cls is None or getattr(cls, "__unittest_skip__", False):
        return None  # unittest never sets up a skipped class
    return cls


def _module_of(namespace):
    """The module object a spec's namespace belongs to (the runner registers it), for the
    module hooks that take it."""
    module = sys.modules.get(namespace.get("__name__"))
    return module if module is not None and getattr(module, "__dict__", None) is namespace else None


def _run_scope_hook(hook, style, owner, namespace):
    """A module or class hook: a unittest one with no argument, as unittest calls it; a
    pytest one as pytest calls it: a class hook given the class (pytest calls the function
    under a classmethod, or a plain method, with the class), a module hook the module, each
    only when it takes an argument."""
    if style == "unittest":
        hook()
    elif isinstance(owner, type):
        _kb_call_optional(getattr(hook, "__func__", hook), owner)
    else:
        _kb_call_optional(hook, _module_of(namespace))


def enter_scopes(namespace, item, ready):
    """Module then class set-up, once each, as unittest and pytest run them before the
    first test of a module or class. `ready` remembers each scope: None once set up, the
    error when its set-up failed (raised again for every later test of that scope)."""
    keys = [(("module", item["spec"]), namespace, _MODULE_HOOKS[0])]
    cls = _class_of(namespace, item)
    if cls is not None:
        keys.append((("class", item["spec"], item["cls"]), cls, _class_hooks(cls)[0]))
    for key, owner, choices in keys:
        if key in ready:
            if ready[key] is not None:
                raise ready[key]
            continue
        try:
            for hook, style in _scope_hooks(owner, choices):
                _run_scope_hook(hook, style, owner, namespace)
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
        scopes.append((("class", item["spec"], item["cls"]), cls, _class_hooks(cls)[1]))
    if last_of_spec:
        scopes.append((("module", item["spec"]), namespace, _MODULE_HOOKS[1]))
    first = None
    for key, owner, choices in scopes:
        if key not in ready:
            continue
        # A scope whose set-up failed gets no tear-down, but its cleanups run, as unittest
        # runs them when `setUpClass` or `setUpModule` fails; its pytest fixtures set up for
        # it are torn down first.
        hooks = _scope_hooks(owner, choices) if ready.pop(key) is None else []
        for hook, style in [(None, "fixtures"), *hooks, (None, "cleanups")]:
            try:
                if hook is not None:
                    _run_scope_hook(hook, style, owner, namespace)
                elif style == "fixtures":
                    _leave_fixtures(namespace, key[0], owner)
                else:
                    _scope_cleanups(owner, key[0])
            except BaseException as error:
                if first is None:
                    first = error
    if first is not None:
        raise first


def _leave_fixtures(namespace, scope, owner):
    """The spec harness's tear-down of the class's or module's fixtures (a spec mined before
    it existed has none: its wider fixtures stay set up, as they always did)."""
    if type(namespace) is not dict:
        return
    # a mined spec's own copy, else the one installed for it if its tests needed one
    harness = namespace if _mined(namespace) else _HARNESSED.get(id(namespace))
    leave = harness.get("_kb_leave") if harness is not None else None
    if callable(leave):
        leave(scope, owner if scope == "class" else None)


def _scope_cleanups(owner, scope):
    """unittest's cleanups of a class (`addClassCleanup`) or of the module
    (`addModuleCleanup`: unittest keeps one list for every module), as it runs them after
    the scope's tear-down; raises the first error."""
    if scope == "class" and hasattr(owner, "doClassCleanups"):
        owner.doClassCleanups()
        errors = getattr(owner, "tearDown_exceptions", None)
        if errors:
            raise errors[0][1]
    elif scope == "module" and hasattr(_kb_unittest, "doModuleCleanups"):
        _kb_unittest.doModuleCleanups()


# --- spec harness begins: copied into test specs; standard library only, names `_kb_*`
# A spec starts with this section, so it imports what it needs itself.
import inspect as _kb_inspect  # noqa: E402
import io as _kb_io  # noqa: E402
import itertools as _kb_itertools  # noqa: E402
import unittest as _kb_unittest  # noqa: E402

try:  # the running runner's class (it imports this module), so the outcome's reason says so
    from knowbench_pytest import UnsupportedFixture as _KbUnsupportedFixture
except ImportError:
    class _KbUnsupportedFixture(RuntimeError):
        pass



class _KbHarnessError(Exception):
    """What pytest reports as an error of the test's own making (a mark it cannot evaluate, a
    fixture that yields twice): the test fails, whatever the program."""


_kb_FIXTURES = {}
# Fixtures a fixture of the same name overrides (a plugin's or an outer conftest's, mined),
# name -> a tuple of their entries, the outermost first.
_kb_OUTER_FIXTURES = {}
_kb_AUTOUSE = []
# The conftests' `pytest_generate_tests`, `pytest_collection_modifyitems` and
# `pytest_runtest_setup` hooks a mined spec carries, the root's first.
_kb_GENERATE_HOOKS = []
_kb_MODIFY_HOOKS = []
_kb_SETUP_HOOKS = []
_kb_CLASSES_READY = set()
_kb_NO_PARAM = object()


def _kb_spec():
    """The spec's globals: the harness's own where a spec carries it (mined), else those of the
    spec the runner installed it for (`_kb_SPEC`, beside the harness's own globals, where a
    name the program defined, `getattr` say, cannot stand in for a builtin)."""
    return globals().get("_kb_SPEC") or globals()


# pytest's options as a run without any has them, its short options' names, its ini values.
_kb_OPTIONS = {"verbose": 0, "capture": "fd", "keyword": "", "markexpr": "", "maxfail": 0, "exitfirst": False,
               "runxfail": False, "strict_markers": None, "strict": False, "basetemp": None, "tbstyle": "auto",
               "color": "auto", "showlocals": False, "reportchars": "fE", "lf": False, "ff": False,
               "usepdb": False, "collectonly": False}
_kb_SHORT_OPTIONS = {"v": "verbose", "q": "verbose", "x": "exitfirst", "k": "keyword", "m": "markexpr",
                     "s": "capture", "l": "showlocals", "r": "reportchars"}
_kb_INI = {"markers": [], "testpaths": [], "addopts": [], "filterwarnings": [], "usefixtures": [],
           "python_files": ["test_*.py", "*_test.py"], "python_classes": ["Test"], "python_functions": ["test"],
           "xfail_strict": False, "norecursedirs": [], "empty_parameter_set_mark": "", "minversion": None}


class _KbConfig:
    """pytest's `config` (`request.config`, `pytestconfig`) as a run without command-line
    options or an ini file has it: `getoption` gives pytest's defaults (and, in a mined spec,
    those of the options its conftests' `pytest_addoption` add, which mining reads), the
    `default` given for any other name, and raises ValueError for an unknown one without a
    default, as pytest does."""

    def __init__(self):
        import pathlib
        import types

        self.option = types.SimpleNamespace(**_kb_OPTIONS)
        self._kb_ini = {name: list(value) if isinstance(value, list) else value for name, value in _kb_INI.items()}
        self.rootpath = pathlib.Path.cwd()
        self.args = []
        self.pluginmanager = _KbPluginManager()

    def getoption(self, name, default=_kb_NO_PARAM, skip=False):
        stripped = name.lstrip("-")
        dest = _kb_SHORT_OPTIONS.get(stripped, stripped.replace("-", "_")) if name.startswith("-") else name
        if hasattr(self.option, dest) and not (skip and getattr(self.option, dest) is None):
            return getattr(self.option, dest)
        if default is not _kb_NO_PARAM:
            return default
        if skip:
            raise _kb_unittest.SkipTest(f"no {name!r} option found")
        raise ValueError(f"no option named {name!r}")

    getvalue = getoption

    def getini(self, name):
        if name not in self._kb_ini:
            raise ValueError(f"unknown configuration value: {name!r}")
        value = self._kb_ini[name]
        return list(value) if isinstance(value, list) else value

    def addinivalue_line(self, name, line):
        if name not in self._kb_ini:
            raise ValueError(f"unknown configuration value: {name!r}")
        self._kb_ini[name].append(line)


class _KbPluginManager:
    """`config.pluginmanager`: no plugin is loaded in the sandbox."""

    def hasplugin(self, name):
        return False

    def getplugin(self, name):
        return None

    get_plugin = getplugin


_kb_CONFIG = []  # the one config (made on first use), as pytest's session has one


def _kb_config():
    if not _kb_CONFIG:
        _kb_CONFIG.append(_KbConfig())
    return _kb_CONFIG[0]


class _KbModuleView:
    """A spec's namespace seen as a module (`request.module`) where no module holds it."""

    def __init__(self, namespace):
        object.__setattr__(self, "_kb_namespace", namespace)

    def __getattr__(self, name):
        try:
            return self._kb_namespace[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self._kb_namespace[name] = value


class _KbCallSpec:
    """`request.node.callspec` of a parametrized test: its `params` and `id`."""

    def __init__(self, params, case_id):
        self.params, self.id = params, case_id

    def getparam(self, name):
        return self.params[name]


def _kb_as_written(name):
    """A test's or a class's name as the tests wrote it: mining renames what it wraps
    (`test_x` becomes `_kb_test_x`, called by a `test_x` of its own), and pytest would never
    collect a name that starts so."""
    return name[len("_kb_"):] if name.startswith("_kb_") else name


class _KbNode:
    """`request.node`: the test item (its name with the case's id, as pytest names it, its
    marks with those `add_marker` adds, `keywords`, `nodeid`, `callspec`)."""

    def __init__(self, spec, owner, function, marks, own, params, case_id, fixturenames=()):
        import sys

        self.instance = owner
        self.cls = type(owner) if owner is not None else None
        self.function = function
        self.originalname = _kb_as_written(getattr(function, "__name__", ""))
        self.name = self.originalname + (f"[{case_id}]" if params else "")
        module = sys.modules.get(spec.get("__name__"))
        self.module = module if module is not None and vars(module) is spec else _KbModuleView(spec)
        self.path = self.fspath = __import__("pathlib").Path(str(spec.get("__file__") or spec.get("__name__")))
        self.nodeid = "::".join([str(spec.get("__file__") or spec.get("__name__")),
                                 *(_kb_as_written(part) for part in (self.cls.__qualname__.split(".")
                                                                     if self.cls is not None else ())),
                                 self.name])
        self.config = _kb_config()
        self.fixturenames = ["request", *fixturenames]
        self._kb_marks, self._kb_own, self.added = list(marks), own, []
        self._kb_phase, self._kb_xfail_at_call = "setup", None
        if params:
            self.callspec = _KbCallSpec(dict(params), case_id)

    def _kb_call_ended(self):
        self._kb_phase = "teardown"
        self._kb_xfail_at_call = _kb_xfail(list(self.iter_markers()))

    @property
    def own_markers(self):
        return [*self._kb_marks[:self._kb_own], *self.added]

    @property
    def keywords(self):
        names = {self.name: True, self.originalname: True, str(self._kb_module_name()): True,
                 str(self.path.name): True}
        if self.cls is not None:
            names[_kb_as_written(self.cls.__name__)] = True
        names.update((mark.name, mark) for mark in self.iter_markers())
        return names

    def _kb_module_name(self):
        return getattr(self.module, "__name__", "")

    def add_marker(self, marker, append=True):
        """A mark made now (`pytest.mark.xfail(...)`, or its name), as pytest's: an xfail
        added before the test ends makes its failure expected."""
        if isinstance(marker, str):
            import pytest

            marker = getattr(pytest.mark, marker)
        mark = getattr(marker, "mark", marker)
        if append:
            self.added.append(mark)
        else:
            self.added.insert(0, mark)

    def iter_markers(self, name=None):
        """The test's marks (its own and those added, its class's, its module's), nearest first."""
        marks = [*self._kb_marks[:self._kb_own], *self.added, *self._kb_marks[self._kb_own:]]
        return iter([mark for mark in marks if name is None or mark.name == name])

    def get_closest_marker(self, name, default=None):
        return next(self.iter_markers(name), default)


class _KbRequest:
    """pytest's `request` fixture: the test's (`fixturename` None), or a fixture's."""

    def __init__(self, node, param, resolve, finalizers, fixturename=None, scope="function"):
        self.node, self.fixturename, self.scope = node, fixturename, scope
        self.instance, self.cls, self.function = node.instance, node.cls, node.function
        self.module, self.path, self.fspath, self.config = node.module, node.path, node.fspath, node.config
        if param is not _kb_NO_PARAM:  # as pytest's: only a parametrized fixture's request has one
            self.param = param
        self._resolve = resolve
        self._finalizers = finalizers

    @property
    def keywords(self):
        return self.node.keywords

    @property
    def fixturenames(self):
        return list(self.node.fixturenames)

    def getfixturevalue(self, name):
        return self._resolve(name)

    def applymarker(self, marker):
        self.node.add_marker(marker)

    def iter_markers(self, name=None):
        return self.node.iter_markers(name)

    def get_closest_marker(self, name, default=None):
        return self.node.get_closest_marker(name, default)

    def addfinalizer(self, finalizer):
        self._finalizers.append(finalizer)


def _kb_call_optional(function, argument):
    """Call an xunit hook as pytest does: with `argument` (the module, class, function or
    method it sets up) only when it takes an argument besides the one a bound method binds."""
    code = getattr(function, "__code__", None)
    count = code.co_argcount - int(_kb_inspect.ismethod(function)) if code is not None else 0
    if count:
        function(argument)
    else:
        function()


def _kb_refuse_generator(function):
    """pytest refuses a test that yields (yield tests were removed in pytest 4); it would
    otherwise pass without running its body."""
    if _kb_inspect.isgeneratorfunction(function):
        raise TypeError(f"'yield' keyword is allowed in fixtures, but not in tests "
                        f"({getattr(function, '__name__', function)})")


def _kb_arguments(function):
    """The parameters pytest would fill: no default value, not injected by mock.patch."""
    parameters = _kb_plain_arguments(function)
    if parameters is not None:
        return parameters
    parameters = [p.name for p in _kb_inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty]
    patchings = getattr(function, "patchings", ())
    injected = [p for p in patchings if not getattr(p, "attribute_name", None)
                and type(getattr(p, "new", None)).__name__ == "_SentinelObject"]
    return parameters[len(injected):]


def _kb_plain_arguments(function):
    """`_kb_arguments` of a plain function or a method bound to one, read from its code as
    `inspect.signature` would give it (None for anything else: wrapped, patched, a partial).
    Every item of every sample calls this: the signature's objects would cost each forked
    sample process pages of its own."""
    bound = type(function).__name__ == "method"
    plain = function.__func__ if bound else function
    if (type(plain).__name__ != "function" or "__wrapped__" in plain.__dict__
            or "__signature__" in plain.__dict__ or "patchings" in plain.__dict__):
        return None
    code = plain.__code__
    positional = code.co_varnames[:code.co_argcount]
    keyword_only = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    defaults = len(plain.__defaults__ or ())
    required = list(positional[int(bound):len(positional) - defaults])
    kw_defaults = plain.__kwdefaults__ or {}
    return required + [name for name in keyword_only if name not in kw_defaults]


def _kb_marks(function, owner):
    """The test's marks in pytest's order (`iter_markers`): its own, its class's and its bases'
    (the spec's own; the bases' first, as pytest merges them along the reversed MRO), the
    module's."""
    found = list(getattr(function, "pytestmark", []))
    if owner is not None:
        for cls in reversed(type(owner).__mro__):
            if cls.__dict__.get("__module__") != _kb_spec().get("__name__"):
                continue
            marks = cls.__dict__.get("pytestmark", [])
            found += list(marks) if isinstance(marks, (list, tuple)) else [marks]
    module_marks = _kb_spec().get("pytestmark", [])
    found += list(module_marks) if isinstance(module_marks, (list, tuple)) else [module_marks]
    return [getattr(mark, "mark", mark) for mark in found]


def _kb_own_marks(function):
    """How many marks the test function carries itself (first among its marks)."""
    return len(list(getattr(function, "pytestmark", [])))


def _kb_with_case(function, marks, case_marks):
    """`marks` with a parametrize case's marks where pytest puts them: after the test's own."""
    own = _kb_own_marks(function)
    return marks[:own] + case_marks + marks[own:]


def _kb_condition(mark, default):
    """Whether a skipif/xfail mark applies: any of its conditions holds (strings evaluated in
    the spec's globals, as pytest does), or `default` when it has none."""
    conditions = list(mark.args) or ([mark.kwargs["condition"]] if "condition" in mark.kwargs else [])
    if not conditions:
        return default
    for condition in conditions:
        if not isinstance(condition, str) and "reason" not in mark.kwargs:
            raise _KbHarnessError(f"Error evaluating {mark.name!r}: you need to specify reason=STRING "
                                   f"when using booleans as conditions.")
        if isinstance(condition, str):  # pytest evaluates it with os, sys and platform at hand
            import os as kb_os
            import platform as kb_platform
            import sys as kb_sys

            spec = _kb_spec()
            inherited = spec.get("_kb_INHERITED", ())  # the program's names are not the spec's
            names = {key: value for key, value in spec.items() if key not in inherited}
            condition = eval(condition, {"os": kb_os, "sys": kb_sys, "platform": kb_platform, **names})
        if condition:
            return True
    return False


def _kb_skip_reason(marks):
    for mark in marks:
        if mark.name == "skip":
            return mark.name
        if mark.name == "skipif" and _kb_condition(mark, True):  # (no condition: pytest skips)
            return "skipif"
        if mark.name == "xfail" and mark.kwargs.get("run", True) is False and _kb_condition(mark, True):
            return "xfail(run=False)"
    return None


def _kb_recwarn():
    """pytest's `recwarn`: its own `WarningsRecorder`, every warning recorded."""
    import warnings

    from _pytest.recwarn import WarningsRecorder

    try:
        recorder = WarningsRecorder(_ispytest=True)
    except TypeError:  # pytest before 6.2
        recorder = WarningsRecorder()
    with recorder:
        warnings.simplefilter("default")
        yield recorder


class _KbSubtests:
    """pytest's `subtests` (pytest 9's own fixture, pytest-subtests' before it): each `with
    subtests.test(msg, **kwargs):` block is a sub-test. An exception ends the block, not the
    test, as pytest has it (KeyboardInterrupt and `pytest.exit` end the test); a failure the
    test's xfail mark expects is the sub-test's expected failure. The first failure of a
    sub-test fails the test once its body has passed, as pytest fails a test that contains
    failed subtests. A skip or an xfail (`pytest.skip`, `pytest.xfail`) in a sub-test gives way
    to a later failure, and is what the test ends with when none follows, as a unittest
    `subTest`'s is: knowbench passes no skipped test, where pytest passes the test around a
    skipped sub-test."""

    def __init__(self, node):
        self._kb_node, self._kb_problem = node, None

    def test(self, msg=None, **kwargs):
        return _KbSubtest(self, msg, kwargs)


class _KbSubtest:
    """One `subtests.test(...)` block."""

    def __init__(self, subtests, msg, kwargs):
        self._kb_subtests, self._kb_msg, self._kb_kwargs = subtests, msg, kwargs

    def __enter__(self):
        return None

    def __exit__(self, kind, error, traceback):
        import sys

        if error is None or isinstance(error, KeyboardInterrupt) \
                or type(error) is getattr(sys.modules.get("_pytest.outcomes"), "Exit", None):
            return False
        subtests = self._kb_subtests
        if _kb_outcome(error) or not _kb_expected(_kb_xfail(list(subtests._kb_node.iter_markers())), error):
            kept = _kb_first_problem(subtests._kb_problem, error)
            if kept is not subtests._kb_problem:
                subtests._kb_problem = kept
                _kb_note(kept, f"in sub-test {self._kb_description()}")
        return True

    def _kb_description(self):
        """As pytest names the sub-test in its report: `[msg] (key=value, ...)`."""
        parts = [f"[{self._kb_msg}]"] if self._kb_msg is not None else []
        if self._kb_kwargs:
            parts.append(f"({', '.join(f'{key}={value!r}' for key, value in self._kb_kwargs.items())})")
        return " ".join(parts) or "(<subtest>)"


def _kb_subtests(request):
    """pytest's `subtests` fixture (`_KbSubtests`): what its sub-tests found fails the test
    after its body."""
    subtests = _KbSubtests(request.node)
    yield subtests
    if subtests._kb_problem is not None:
        raise subtests._kb_problem


def _kb_first_problem(kept, error):
    """What decides a test whose parts (sub-tests, unittest's or pytest's) ended in `kept`
    (None: none yet) and then in `error`: the first failure, as pytest has it; a skip or an
    xfail gives way to a later failure, and decides when no failure follows."""
    return error if kept is None or (_kb_outcome(kept) and not _kb_outcome(error)) else kept


def _kb_note(error, note):
    """`note` added to `error`'s report (Python 3.11 and later)."""
    if hasattr(error, "add_note"):
        error.add_note(note)


def _kb_warning_filters(marks):
    """The test's `filterwarnings` marks made warning filters, as pytest makes them: in the
    order its marks come (the test's own first), each put in front of the filters."""
    import warnings

    for mark in marks:
        if mark.name != "filterwarnings":
            continue
        from _pytest.config import parse_warning_filter

        for argument in mark.args:
            try:
                parsed = parse_warning_filter(argument, escape=False)
            except ImportError:  # a category of a test helper the spec carries (not importable)
                action, message, category, module, lineno = ([part.strip() for part in argument.split(":")] + [""] * 5)[:5]
                found = _kb_spec().get(category.rpartition(".")[2])
                if not (isinstance(found, type) and issubclass(found, Warning)):
                    raise
                parsed = parse_warning_filter(":".join((action, message, "", module, lineno)), escape=False)
                parsed = (parsed[0], parsed[1], found, *parsed[3:])
            warnings.filterwarnings(*parsed)


def _kb_xfail(marks):
    """The xfail mark that applies to a test, or None."""
    for mark in marks:
        if mark.name == "xfail" and _kb_condition(mark, True):
            return mark
    return None


def _kb_cases(marks):
    """Every combination of the test's parametrize cases, with the marks of the cases
    (one empty case without any)."""
    grids = []
    for mark in marks:
        if mark.name != "parametrize":
            continue
        names = mark.args[0] if mark.args else mark.kwargs["argnames"]
        values = mark.args[1] if len(mark.args) > 1 else mark.kwargs["argvalues"]
        single = isinstance(names, str) and "," not in names  # pytest's force_tuple
        if isinstance(names, str):
            names = [name.strip() for name in names.split(",") if name.strip()]
        cases = _kb_parameter_sets(names, values, mark.args[2] if len(mark.args) > 2 else mark.kwargs.get("ids"),
                                   single)
        indirect = mark.kwargs.get("indirect", False)
        indirect = set(names) if indirect is True else set(indirect or ())
        grids.append([({name: _KbIndirect(value) if name in indirect else value for name, value in part.items()},
                       part_marks, case_id) for part, part_marks, case_id in cases])
    return _kb_combinations(grids)


class _KbIndirect:
    """A case's value for the fixture of its name (`parametrize(..., indirect=...)`): its
    `request.param`, where pytest passes it, not the test's argument."""

    def __init__(self, value):
        self.value = value


def _kb_by_fixture(case):
    """A case's values split: (the test's arguments, the fixtures' `request.param`s)."""
    return ({name: value for name, value in case.items() if type(value) is not _KbIndirect},
            {name: value.value for name, value in case.items() if type(value) is _KbIndirect})


def _kb_combinations(grids):
    """Every combination of one case of each parametrization: (the values, the marks, the
    ids joined by "-"; None where there is no parametrization)."""
    for combination in _kb_itertools.product(*grids):
        merged, marks = {}, []
        for part, part_marks, _ in combination:
            merged.update(part)
            marks += part_marks
        yield merged, marks, "-".join(case_id for _, _, case_id in combination) if grids else None


def _kb_parameter_sets(names, values, ids, single):
    """The cases of one parametrization (a parametrize mark's, or a parametrized fixture's
    `params`), as pytest makes them: (the names' values, the case's marks, its id), the id
    a `pytest.param`'s own, else from `ids`, else from the values, made unique among all the
    cases before those marked skip are left out (pytest reports them skipped and runs
    nothing of them). `single`: one name, whose every value is one case's (a
    `pytest.param` of several values is then that tuple, as a fixture's `request.param`)."""
    cases = []
    for index, case in enumerate(values):
        case_marks, case_id = [], None
        if type(case).__name__ == "ParameterSet":
            case_marks = [getattr(m, "mark", m) for m in case.marks]
            case_id = case.id
            case = case.values if not single or len(case.values) == 1 else (case.values,)
        elif single:
            case = (case,)
        if case_id is None:
            case_id = _kb_case_id(names, case, ids, index)
        cases.append((dict(zip(names, case)), case_marks, case_id))  # noqa: B905 (specs may run on Python < 3.10)
    unique = _kb_unique_ids([case_id for _, _, case_id in cases])  # (of every case, as pytest's)
    return [(part, part_marks, case_id) for (part, part_marks, _), case_id in zip(cases, unique)  # noqa: B905
            if not _kb_skip_reason(part_marks)]


def _kb_unique_ids(ids):
    """The ids of one parametrize mark's cases made unique as pytest makes them: a repeated
    id gets a number (after "_" where it ends in a digit), counting its repeats."""
    import collections

    counts, suffixes, unique = collections.Counter(ids), collections.defaultdict(int), list(ids)
    for index, case_id in enumerate(ids):
        if counts[case_id] > 1:
            joint = "_" if case_id and case_id[-1].isdigit() else ""
            made = f"{case_id}{joint}{suffixes[case_id]}"
            while made in set(unique):
                suffixes[case_id] += 1
                made = f"{case_id}{joint}{suffixes[case_id]}"
            unique[index] = made
            suffixes[case_id] += 1
    return unique


def _kb_idval(value, argname, index):
    """pytest's id of one parameter value: a string (escaped to ASCII), a number, a bool,
    None, an enum member or a pattern as written, what has a `__name__` by its name, any
    other value by its argument's name and its index."""
    import enum
    import re

    if isinstance(value, (str, bytes)):
        text = value.decode("ascii", "backslashreplace") if isinstance(value, bytes) \
            else value.encode("unicode_escape").decode("ascii")
        return text
    if value is None or isinstance(value, (float, int, complex)):
        return str(value)
    if isinstance(value, re.Pattern):
        return _kb_idval(value.pattern, argname, index)
    if isinstance(value, enum.Enum) and type(value).__name__ != "NotSetType":
        return str(value)
    if isinstance(getattr(value, "__name__", None), str):
        return value.__name__
    return f"{argname}{index}"


def _kb_case_id(names, values, ids, index):
    """The id pytest gives a parametrize case: from `ids` (a list, or a function of each
    value) when it names one, else its values' ids joined by "-"."""
    if ids is not None and not callable(ids):
        ids = list(ids)
        if index < len(ids) and ids[index] is not None:
            return _kb_idval(ids[index], "", index)
        ids = None
    parts = []
    for name, value in zip(names, values):  # noqa: B905
        made = ids(value) if callable(ids) else None
        parts.append(_kb_idval(value, name, index) if made is None else str(made))
    return "-".join(parts)


def _kb_owned(cls, attribute, default=None, module=None):
    """`attribute` as the first of `cls` and its bases that the spec itself defined holds it
    (never a base class of the program's: in-process, the candidate's); `module`: the spec's
    name, where the caller is not a harness of the spec's."""
    module = module or _kb_spec().get("__name__")
    for base in cls.__mro__:
        if base.__dict__.get("__module__") == module and attribute in base.__dict__:
            return base.__dict__[attribute]
    return default


def _kb_lookup(name, owner, depth=0):
    """(fixture, params, scope, ids) of the fixture `name` a test of `owner` (or a function)
    sees; with `depth` n, the one n levels below it, which a fixture of the same name that
    requests `name` gets (its class's, then the module's or the nearest conftest's, then each
    outer conftest's or plugin's: `_kb_OUTER_FIXTURES`, as pytest overrides fixtures)."""
    if owner is not None:
        method = _kb_owned(type(owner), "_kb_fixture_" + name)
        if method is not None:
            if depth == 0:
                bound = method.__get__(owner, type(owner)) if hasattr(method, "__get__") else method
                return (bound, _kb_owned(type(owner), "_kb_fixture_params", {}).get(name),
                        _kb_owned(type(owner), "_kb_fixture_scopes", {}).get(name, "function"),
                        _kb_owned(type(owner), "_kb_fixture_ids", {}).get(name))
            depth -= 1
    levels = [_kb_FIXTURES[name]] if name in _kb_FIXTURES else []
    levels += reversed(_kb_OUTER_FIXTURES.get(name, ()))
    if depth >= len(levels):
        return None
    entry = levels[depth]
    # (specs mined before scopes, or ids, were recorded give two, or three)
    return (*entry, *("function", None)[len(entry) - 2:])


class _KbMockerPatch:
    """`mocker.patch`, `.object`, `.dict`, `.multiple`: unittest.mock's patchers, started now
    and stopped when the test ends."""

    def __init__(self, mocker):
        self._mocker = mocker

    def __call__(self, target, *args, **kwargs):
        return self._mocker._start(self._mocker._mock.patch(target, *args, **kwargs))

    def object(self, target, attribute, *args, **kwargs):
        return self._mocker._start(self._mocker._mock.patch.object(target, attribute, *args, **kwargs))

    def dict(self, in_dict, values=(), clear=False, **kwargs):
        return self._mocker._start(self._mocker._mock.patch.dict(in_dict, values, clear, **kwargs))

    def multiple(self, target, *args, **kwargs):
        return self._mocker._start(self._mocker._mock.patch.multiple(target, *args, **kwargs))


class _KbMocker:
    """pytest-mock's `mocker` fixture, built on unittest.mock as pytest-mock is."""

    def __init__(self):
        import unittest.mock as mock

        self._mock, self._patchers, self._mocks = mock, [], []
        for name in ("Mock", "MagicMock", "NonCallableMock", "NonCallableMagicMock", "PropertyMock",
                     "AsyncMock", "ANY", "DEFAULT", "call", "sentinel", "mock_open", "seal"):
            if hasattr(mock, name):
                setattr(self, name, getattr(mock, name))
        self.patch = _KbMockerPatch(self)

    def _start(self, patcher):
        value = patcher.start()
        patcher._kb_started = value
        self._patchers.append(patcher)
        if isinstance(value, self._mock.NonCallableMock):
            self._mocks.append(value)
        return value

    def spy(self, obj, name):
        """Patch `obj.name` with a mock that calls the original and records its result."""
        import functools

        method = getattr(obj, name)
        autospec = _kb_inspect.ismethod(method) or _kb_inspect.isfunction(method)

        def wrapper(*args, **kwargs):
            spy_obj.spy_return, spy_obj.spy_exception = None, None
            try:
                result = method(*args, **kwargs)
            except BaseException as error:
                spy_obj.spy_exception = error
                raise
            spy_obj.spy_return = result
            return result

        spy_obj = self.patch.object(obj, name, side_effect=functools.update_wrapper(wrapper, method),
                                    autospec=autospec)
        spy_obj.spy_return, spy_obj.spy_exception = None, None
        return spy_obj

    def stub(self, name=None):
        return self._mock.MagicMock(spec=lambda *args, **kwargs: None, name=name)

    def resetall(self, return_value=False, side_effect=False):
        for mock in self._mocks:
            mock.reset_mock(return_value=return_value, side_effect=side_effect)

    def stopall(self):
        while self._patchers:
            self._patchers.pop().stop()
        self._mocks.clear()

    def stop(self, mock):
        for patcher in list(self._patchers):
            if getattr(patcher, "_kb_started", None) is mock:
                patcher.stop()
                self._patchers.remove(patcher)
                return
        raise ValueError("This mock object is not registered")


class _KbCaplog:
    """pytest's `caplog` fixture: a handler on the root logger for the test's duration."""

    def __init__(self):
        import logging

        class Handler(logging.Handler):
            def __init__(self):
                super().__init__(0)
                self.records, self.texts = [], []
                self.setFormatter(logging.Formatter(
                    "%(levelname)-8s %(name)s:%(filename)s:%(lineno)d %(message)s"))

            def emit(self, record):  # formatted now, as pytest's handler writes its stream
                self.records.append(record)
                self.texts.append(self.format(record) + "\n")

        self._logging, self.handler, self._restore, self._setup = logging, Handler(), [], []
        logging.getLogger().addHandler(self.handler)

    def _kb_set_up(self):
        """The test's fixtures are set up: what they logged is the set-up phase's, and the
        call phase starts empty, as pytest keeps a phase's records apart."""
        self._setup = self.handler.records
        self.clear()

    @property
    def records(self):
        return self.handler.records

    @property
    def messages(self):
        return [record.getMessage() for record in self.records]

    @property
    def record_tuples(self):
        return [(record.name, record.levelno, record.getMessage()) for record in self.records]

    @property
    def text(self):
        return "".join(self.handler.texts)

    def get_records(self, when="call"):
        return list(self.records) if when == "call" else list(self._setup) if when == "setup" else []

    def clear(self):
        self.handler.records, self.handler.texts = [], []

    def set_level(self, level, logger=None):
        target = self._logging.getLogger(logger)
        self._restore.append((target, target.level, self.handler.level))
        target.setLevel(level)
        self.handler.setLevel(level)

    def at_level(self, level, logger=None):
        import contextlib

        @contextlib.contextmanager
        def scope():
            target = self._logging.getLogger(logger)
            saved = target.level, self.handler.level
            target.setLevel(level)
            self.handler.setLevel(level)
            try:
                yield
            finally:
                target.setLevel(saved[0])
                self.handler.setLevel(saved[1])

        return scope()

    def close(self):
        while self._restore:
            target, level, handler_level = self._restore.pop()
            target.setLevel(level)
            self.handler.setLevel(handler_level)
        self._logging.getLogger().removeHandler(self.handler)


class _KbRecorder:
    """pytest's `record_property` (`record_testsuite_property`, `record_xml_attribute`): what a
    test reports about itself for the JUnit XML report, kept here and never judged."""

    def __init__(self):
        self.recorded = []

    def __call__(self, *args):
        self.recorded.append(args)

    def close(self):
        pass


class _KbCaptureResult(tuple):
    @property
    def out(self):
        return self[0]

    @property
    def err(self):
        return self[1]


class _KbCaptureIO(_kb_io.TextIOWrapper):
    """Where `capsys` captures to, as pytest's: text over bytes, so that what writes bytes to
    `sys.stdout.buffer` is captured too."""

    def __init__(self):
        super().__init__(_kb_io.BytesIO(), encoding="UTF-8", newline="", write_through=True)

    def getvalue(self):
        return self.buffer.getvalue().decode("UTF-8")


class _KbCapture:
    """pytest's `capsys`: what is written to `sys.stdout` and `sys.stderr`; `capsysbinary`
    (`binary`) reads it as bytes. `disabled()` lets writes through while it holds."""

    binary = False

    def __init__(self):
        import sys

        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _KbCaptureIO(), _KbCaptureIO()

    def readouterr(self):
        import sys

        if self.binary:
            out, err = sys.stdout.buffer.getvalue(), sys.stderr.buffer.getvalue()
        else:
            out, err = sys.stdout.getvalue(), sys.stderr.getvalue()
        sys.stdout, sys.stderr = _KbCaptureIO(), _KbCaptureIO()
        return _KbCaptureResult((out, err))

    def disabled(self):
        import contextlib
        import sys

        @contextlib.contextmanager
        def disabled():
            capturing = (sys.stdout, sys.stderr)
            sys.stdout, sys.stderr = self._saved
            try:
                yield
            finally:
                sys.stdout, sys.stderr = capturing

        return disabled()

    def close(self):
        import sys

        sys.stdout, sys.stderr = self._saved


class _KbCaptureBinary(_KbCapture):
    binary = True


class _KbTmpPathFactory:
    """pytest's `tmp_path_factory`: fresh directories under a base of the test's own."""

    def __init__(self):
        self._base = None

    def getbasetemp(self):
        import pathlib
        import tempfile

        if self._base is None:
            self._base = pathlib.Path(tempfile.mkdtemp(prefix="pytest-of-knowbench-"))
        return self._base

    def mktemp(self, basename, numbered=True):
        import pathlib
        import tempfile

        if numbered:
            return pathlib.Path(tempfile.mkdtemp(prefix=basename, dir=self.getbasetemp()))
        path = self.getbasetemp() / basename
        path.mkdir()
        return path

    def close(self):
        pass


def _kb_local_path(path):
    """`path` as pytest's `py.path.local` (`tmpdir`), pytest 7.2's and later's own class: a
    spec carries this harness, and what it imports becomes the benchmark's requirements
    (no `py` package for older pytest, which `_runner_tmpdir` falls back to)."""
    from _pytest._py.path import LocalPath

    return LocalPath(path)


class _KbTmpdirFactory(_KbTmpPathFactory):
    """pytest's `tmpdir_factory`: `tmp_path_factory`'s directories as `py.path.local`."""

    def getbasetemp(self):
        return _kb_local_path(super().getbasetemp())

    def mktemp(self, basename, numbered=True):
        return _kb_local_path(super().mktemp(basename, numbered))


# Built-in fixtures the harness makes itself: name -> (class, its tear-down method). A
# `doctest_namespace` is a plain dict: knowbench runs no doctests, but conftest fixtures fill it.
_kb_BUILTIN_FIXTURES = {"mocker": (_KbMocker, "stopall"), "caplog": (_KbCaplog, "close"),
                        "doctest_namespace": (dict, "clear"), "record_property": (_KbRecorder, "close"),
                        "record_testsuite_property": (_KbRecorder, "close"),
                        "record_xml_attribute": (_KbRecorder, "close"),
                        "tmp_path_factory": (_KbTmpPathFactory, "close"),
                        "tmpdir_factory": (_KbTmpdirFactory, "close"),
                        "capsysbinary": (_KbCaptureBinary, "close"), "capfdbinary": (_KbCaptureBinary, "close")}
# Built-in fixtures the harness serves as fixture functions of its own.
_kb_FIXTURE_FUNCTIONS = {"recwarn": _kb_recwarn, "subtests": _kb_subtests}
# Fixtures wider than a function, set up once: (name, param) -> value.
_kb_SCOPED = {}
# The tear-downs of those that yielded: (their scope, class or None, key in _kb_SCOPED, tear-down).
_kb_SCOPED_TEARDOWNS = []


def _kb_leave(scope, cls=None):
    """Tear down the fixtures of a class (`scope` "class", the class ending) or of the module
    (`scope` "module") as its last test ends, last set up first, as pytest does: what they
    restore is restored for the tests after them. Raises the first error, once all ran."""
    __tracebackhide__ = True
    due = [entry for entry in _kb_SCOPED_TEARDOWNS if entry[0] == scope and (scope != "class" or entry[1] is cls)]
    for entry in due:
        _kb_SCOPED_TEARDOWNS.remove(entry)
        _kb_SCOPED.pop(entry[2], None)
    _kb_finalize([entry[3] for entry in due])


def _kb_autouse(owner):
    return [*_kb_AUTOUSE, *(_kb_owned(type(owner), "_kb_autouse", ()) if owner is not None else ())]


def _kb_closure(function, owner, used, case):
    """The fixtures the test needs, through the fixtures they request (pytest's
    `fixturenames`), with the (fixture, params, scope, ids) entry of each the harness defines."""
    seen, found, pending = set(case), [], [*_kb_autouse(owner), *used, *_kb_arguments(function)]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        entry = _kb_lookup(name, owner)
        found.append((name, entry))
        if entry is not None:
            pending += _kb_arguments(entry[0])
    return found


def _kb_fixture_cases(function, owner, used, case, indirect=()):
    """Every combination of the params of the parametrized fixtures the test needs: (each
    fixture's `request.param`, the marks of the params, their id), as pytest parametrizes
    the test by them (a `pytest.param`'s value, id and marks, the fixture's `ids=`). A
    fixture the test's own parametrize marks give its param (`indirect`) is not
    parametrized by its `params` again."""
    return _kb_combinations([_kb_parameter_sets([name], entry[1], entry[3], True)
                             for name, entry in _kb_closure(function, owner, used, case)
                             if entry is not None and entry[1] is not None and name not in indirect])


def _kb_run_case(function, owner, case, used, builtins, fixture_params, marks=(), node=None):
    __tracebackhide__ = True
    values, finalizers = dict(case), []
    if node is None:
        node = _KbNode(_kb_spec(), owner, function, marks, _kb_own_marks(function), {}, "")

    def request(param=_kb_NO_PARAM, fixturename=None, scope="function"):
        return _KbRequest(node, param, resolve, finalizers, fixturename, scope)

    def resolve(name, outer=False, depth=0):
        # `outer`: what a fixture requests that overrides a fixture of its name (a class's, a
        # conftest's) or that such a fixture requests, looked up outside the class, as pytest
        # does; `depth`: how many fixtures of that name a request looks past (`_kb_lookup`)
        # (a value is kept under the name the test sees it by, and under its fixture function,
        # so that each fixture is set up once for the test however it is reached)
        if not outer and name in values:
            return values[name]
        if name in builtins and (not outer or _kb_lookup(name, None, depth) is None):
            return builtins[name]
        if name == "request":
            return request()
        if name == "pytestconfig":
            return _kb_config()
        if name == "tmpdir" and "tmp_path" in builtins:
            values[name] = _kb_local_path(builtins["tmp_path"])
            return values[name]
        if name == "capfd" and "capsys" in builtins:
            return builtins["capsys"]
        entry = _kb_lookup(name, None if outer else owner, depth)
        if entry is None and depth and not (name in _kb_FIXTURE_FUNCTIONS or name in _kb_BUILTIN_FIXTURES):
            raise _KbUnsupportedFixture(f"fixture '{name}' requests the fixture '{name}' it overrides, "
                                        "which the knowbench harness does not have")
        if entry is None and name in _kb_FIXTURE_FUNCTIONS:
            entry = (_kb_FIXTURE_FUNCTIONS[name], None, "function", None)
        if entry is None and name in _kb_BUILTIN_FIXTURES:
            if name not in values:
                made, teardown = _kb_BUILTIN_FIXTURES[name]
                values[name] = made()
                finalizers.append(getattr(values[name], teardown))
            return values[name]
        if entry is None:
            raise _KbUnsupportedFixture(f"fixture '{name}' is not available in the knowbench harness")
        fixture, _, scope, _ = entry
        slot = ("fixture", name, getattr(fixture, "__func__", fixture))

        def kept(value):
            values[slot] = value
            if not outer:
                values[name] = value
            return value

        if slot in values:
            return kept(values[slot])
        # (a class-scoped fixture once per class, as pytest sets it up per class; a test
        # outside any class gets one of its own, as each such test is its own class scope)
        if scope == "class" and owner is None:
            scope = "function"
        key = (name, repr(fixture_params.get(name)), type(owner) if scope == "class" else None, slot[2])
        if scope != "function" and key in _kb_SCOPED:
            return kept(_kb_SCOPED[key])

        def below(argument):
            # (the fixture's own name: the one it overrides, outside the class, one level down)
            if argument != name:
                return outer, 0
            if not outer and owner is not None and _kb_owned(type(owner), "_kb_fixture_" + name) is not None:
                return True, 0
            return True, depth + 1

        arguments = {argument: request(fixture_params.get(name, _kb_NO_PARAM), name, entry[2])
                     if argument == "request" else resolve(argument, *below(argument))
                     for argument in _kb_arguments(fixture)}
        value = fixture(**arguments)
        if _kb_inspect.isgenerator(value):
            generator = value
            value = next(generator)
            if scope == "function":
                finalizers.append(lambda: _kb_tear_down(generator, name))
            elif scope in ("class", "module"):  # (wider ones end with the process, as with pytest)
                _kb_SCOPED_TEARDOWNS.append((scope, key[2], key, lambda: _kb_tear_down(generator, name)))
        if scope != "function":  # kept for the process, as pytest keeps it for its scope
            _kb_SCOPED[key] = value
        return kept(value)

    import warnings

    with warnings.catch_warnings():
        _kb_warning_filters(marks)
        def run():
            __tracebackhide__ = True
            for hook in reversed(_kb_SETUP_HOOKS):  # (pytest calls them before the fixtures)
                _kb_call_hook(hook, item=node)
            for name in [*_kb_autouse(owner), *used]:
                resolve(name)
            arguments = {name: resolve(name) for name in _kb_arguments(function)}
            if type(values.get("caplog")) is _KbCaplog:
                values["caplog"]._kb_set_up()
            node._kb_phase = "call"
            try:
                outcome = function(**arguments)
                if _kb_inspect.isawaitable(outcome):
                    import asyncio
                    asyncio.run(outcome)
            finally:  # (pytest evaluates the xfail marks again as the call ends)
                node._kb_call_ended()

        _kb_then(run, lambda: _kb_finalize(finalizers))


def _kb_outcome(error):
    """Whether `error` is no failure but an outcome: a skip (unittest's or pytest's) or
    pytest's xfail."""
    import sys

    xfailed = getattr(sys.modules.get("_pytest.outcomes"), "XFailed", None)
    return isinstance(error, _kb_unittest.SkipTest) or _kb_is_pytest_skip(error) \
        or (isinstance(xfailed, type) and isinstance(error, xfailed))


def _kb_then(run, clean_up):
    """`run()`, then `clean_up()` whatever it did, as pytest's phases have it: the first
    failure decides the test. A clean-up's error never takes the place of the run's failure
    (an xfail the clean-up calls least of all), but does that of a skip or an xfail of the
    run, as pytest reports the tear-down's error."""
    __tracebackhide__ = True
    try:
        run()
    except BaseException as error:
        try:
            clean_up()
        except BaseException as late:
            if _kb_outcome(error) and not _kb_outcome(late):
                raise
        raise
    clean_up()


def _kb_tear_down(generator, name):
    """The rest of a yield fixture, after its test; one that yields again is pytest's error."""
    __tracebackhide__ = True
    try:
        next(generator)
    except StopIteration:
        return
    raise _KbHarnessError(f"fixture function has more than one 'yield': {name}")


def _kb_finalize(finalizers):
    """Run every finalizer, the last registered first, as pytest does: one that raises does
    not keep the rest (other fixtures' teardowns, monkeypatch's undo, caplog's restore) from
    running; the first error is raised once all have run."""
    __tracebackhide__ = True
    error = None
    while finalizers:
        try:
            finalizers.pop()()
        except BaseException as raised:  # (raised again below, after the rest)
            error = error or raised
    if error is not None:
        raise error


def _kb_is_pytest_skip(error):
    """Whether `error` is pytest's own skip (`pytest.skip()`, `importorskip`)."""
    import sys

    skipped = getattr(sys.modules.get("_pytest.outcomes"), "Skipped", None)
    return isinstance(skipped, type) and isinstance(error, skipped)


def _kb_expecting(node, run):
    """`run()` under the xfail mark that applies, as pytest has it: a failure is expected
    (xfailed); a pass is XPASS, a failure only when strict; an exception other than the mark's
    `raises` is a real failure. Without an xfail mark when the test starts, one the test or
    its fixtures add (`request.node.add_marker`, `request.applymarker`) before its call ends
    applies to a failure of the call or the tear-down, as pytest evaluates the marks again as
    the call ends; a failure of the set-up has only the marks the test started with."""
    __tracebackhide__ = True  # (the harness's frames are left out of a failure's report, as pytest's)
    xfail = _kb_xfail(list(node.iter_markers()))
    try:
        run()
    except (_kb_unittest.SkipTest, KeyboardInterrupt):
        raise
    except BaseException as error:  # (pytest.fail's and SystemExit are failures too)
        # (a failure in the set-up: the marks it started with)
        if not _kb_expected(xfail or node._kb_xfail_at_call, error):
            raise
        return
    xfail = xfail or node._kb_xfail_at_call
    if xfail is not None and xfail.kwargs.get("strict", False):
        raise AssertionError("[XPASS(strict)] the test is marked xfail(strict=True) but passed")


def _kb_expected(xfail, error):
    """Whether the xfail mark `xfail` (None: none applies) expects the failure `error`: its
    `raises`, or any; never a skip, nor the harness's own error."""
    return xfail is not None and isinstance(error, xfail.kwargs.get("raises") or BaseException) \
        and not _kb_is_pytest_skip(error) and not isinstance(error, _KbHarnessError)


def _kb_call(function, owner=None, **builtins):
    """Run a pytest-style test as pytest would: each case, with fixtures set up and torn down."""
    __tracebackhide__ = True
    _kb_refuse_generator(function)
    marks = _kb_marks(function, owner)
    reason = _kb_skip_reason(marks)
    if reason:
        raise _kb_unittest.SkipTest(f"marked {reason}")
    used = [name for mark in marks if mark.name == "usefixtures" for name in mark.args]
    ran, left_out = False, None
    generated = _kb_generated(function, owner, used, marks)
    for (hook_case, hook_marks, hook_id), (mark_case, mark_marks, case_id) in _kb_itertools.product(
            generated, list(_kb_cases(marks))):
        case, indirect = _kb_by_fixture({**hook_case, **mark_case})
        fixturenames = [*case, *(name for name, _ in _kb_closure(function, owner, used, case))]
        for fixture_params, params_marks, params_id in _kb_fixture_cases(function, owner, used, case, indirect):
            # (pytest parametrizes by the hooks first, then by the fixtures' params, then by the
            # marks: the ids and the marks of the cases come in that order)
            own_case_marks = hook_marks + params_marks + mark_marks
            case_marks = _kb_with_case(function, marks, own_case_marks)
            own = _kb_own_marks(function) + len(own_case_marks)  # (marks `add_marker` follows)
            fixture_params = {**fixture_params, **indirect}
            node = _KbNode(_kb_spec(), owner, function, case_marks, own, {**case, **fixture_params},
                           "-".join(part for part in (hook_id, params_id, case_id) if part is not None),
                           fixturenames)
            reason = _kb_left_out(node)
            if reason:
                left_out = reason
                continue
            ran = True

            def run(case=case, fixture_params=fixture_params, case_marks=case_marks, node=node):
                __tracebackhide__ = True
                _kb_run_case(function, owner, case, used, builtins, fixture_params, case_marks, node)

            _kb_expecting(node, run)
    if not ran:  # pytest skips a test whose parameter sets are empty (or all skipped)
        raise _kb_unittest.SkipTest(left_out or "got empty parameter set")


class _KbMetafunc:
    """pytest's `metafunc`, given to a spec's `pytest_generate_tests` hook (a test class's,
    then the module's, as pytest calls them) for each test: `parametrize` works as the mark
    of that name does."""

    def __init__(self, function, owner, fixturenames, marks):
        self.function = function
        self.cls = type(owner) if owner is not None else None
        self.module = _KbModuleView(_kb_spec())
        self.config = _kb_config()
        self.fixturenames = list(fixturenames)
        self.definition = _KbNode(_kb_spec(), owner, function, marks, _kb_own_marks(function), {}, None)
        self._kb_marks = []

    def parametrize(self, argnames, argvalues, indirect=False, ids=None, scope=None):
        self._kb_marks.append(_KbMark("parametrize", (argnames, argvalues),
                                      {"indirect": indirect, "ids": ids, "scope": scope}))


class _KbMark:
    """A mark the harness makes (a `pytest_generate_tests` hook's `parametrize`)."""

    def __init__(self, name, args, kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs


def _kb_generated(function, owner, used, marks):
    """The cases the spec's `pytest_generate_tests` hooks give the test (as `_kb_cases`), called
    as pytest calls them: the test class's, the module's, then the conftests' from the test's
    directory up; one empty case without any. The program's hook is never the spec's
    (`spec_loaded`)."""
    own = _kb_owned(type(owner), "pytest_generate_tests") if owner is not None else None
    hooks = [own.__get__(owner, type(owner))] if own is not None else []
    if callable(_kb_spec().get("pytest_generate_tests")):
        hooks.append(_kb_spec()["pytest_generate_tests"])
    hooks += reversed(_kb_GENERATE_HOOKS)
    fixturenames = [name for name, _ in _kb_closure(function, owner, used, {})] if hooks else []
    generated = []
    for hook in hooks:
        metafunc = _KbMetafunc(function, owner, fixturenames, marks)
        hook(metafunc)
        generated += metafunc._kb_marks
    return list(_kb_cases(generated))


def _kb_call_hook(hook, **given):
    """A conftest hook called as pytest calls one: with those of the `given` arguments its
    signature names."""
    return hook(**{name: given[name] for name in _kb_arguments(hook) if name in given})


def _kb_configure(hook):
    """A conftest's `pytest_configure`, called as the spec loads: pytest calls it once, before
    it collects the tests."""
    _kb_call_hook(hook, config=_kb_config())


def _kb_left_out(node):
    """Why a test case does not run after the conftests' `pytest_collection_modifyitems`
    hooks, or None: each is given it (alone, as `items`; with the config, and a session
    holding both) as pytest gives it every test, the deepest conftest's first; one a hook
    takes out of `items` is deselected, and one it marks skip (or skipif, true) is skipped,
    as pytest leaves both unrun. The marks a hook adds are the test's."""
    import types

    for hook in reversed(_kb_MODIFY_HOOKS):
        items = [node]
        _kb_call_hook(hook, items=items, config=node.config,
                      session=types.SimpleNamespace(config=node.config, items=items))
        if not any(item is node for item in items):
            return "deselected by a conftest's pytest_collection_modifyitems"
    reason = _kb_skip_reason(list(node.iter_markers())) if _kb_MODIFY_HOOKS else None
    return f"marked {reason}" if reason else None


def _kb_call_unittest(case, name, run, builtins=None):
    """A `unittest.TestCase` method, which `run()` runs by unittest itself, as pytest runs one:
    the skip, skipif, xfail, filterwarnings and usefixtures marks of the method, its classes
    and the module apply, and the autouse and used fixtures are set up before `setUp` and torn
    down after `tearDown` (`request.instance` is the case). pytest passes a unittest method no
    fixture and ignores its parametrize marks; a case unittest skips runs no fixture.
    `builtins`: the runner's fixtures (`tmp_path`, `monkeypatch`, `capsys`)."""
    __tracebackhide__ = True
    if getattr(type(case), "__unittest_skip__", False) or getattr(getattr(type(case), name, None),
                                                                  "__unittest_skip__", False):
        run()
        return
    marks = [mark for mark in _kb_marks(getattr(case, name), case) if mark.name != "parametrize"]
    reason = _kb_skip_reason(marks)
    if reason:
        raise _kb_unittest.SkipTest(f"marked {reason}")
    used = [fixture for mark in marks if mark.name == "usefixtures" for fixture in mark.args]

    def test():
        __tracebackhide__ = True
        run()

    for fixture_params, params_marks, params_id in _kb_fixture_cases(test, case, used, {}):
        case_marks = _kb_with_case(getattr(case, name), marks, params_marks)
        node = _KbNode(_kb_spec(), case, getattr(case, name), case_marks,
                       _kb_own_marks(getattr(case, name)) + len(params_marks), fixture_params, params_id,
                       [name for name, _ in _kb_closure(test, case, used, {})])

        def run_case(fixture_params=fixture_params, case_marks=case_marks, node=node):
            __tracebackhide__ = True
            _kb_run_case(test, case, {}, used, builtins or {}, fixture_params, case_marks, node)

        left_out = _kb_left_out(node)
        if left_out:
            raise _kb_unittest.SkipTest(left_out)
        _kb_expecting(node, run_case)


def _kb_call_method(cls, name, **builtins):
    """Run the test method `name` of a pytest-style class on a fresh instance."""
    __tracebackhide__ = True
    if cls not in _kb_CLASSES_READY:
        _kb_CLASSES_READY.add(cls)
        if hasattr(cls, "setup_class"):  # given the class, also a plain method (pytest's getimfunc)
            _kb_call_optional(getattr(cls.setup_class, "__func__", cls.setup_class), cls)
    instance = cls()
    method = getattr(instance, name)
    import warnings

    with warnings.catch_warnings():  # the test's warning filters hold around its set-up too
        _kb_warning_filters(_kb_marks(method, instance))
        if hasattr(instance, "setup_method"):
            _kb_call_optional(instance.setup_method, method)

        def tear_down():
            __tracebackhide__ = True
            if hasattr(instance, "teardown_method"):
                _kb_call_optional(instance.teardown_method, method)

        _kb_then(lambda: _kb_call(method, instance, **builtins), tear_down)
# --- spec harness ends

# The runner's `capsys` is the harness's, and so is its order of a test and its clean-up.
Capsys, CapsysBinary, then_clean_up = _KbCapture, _KbCaptureBinary, _kb_then
