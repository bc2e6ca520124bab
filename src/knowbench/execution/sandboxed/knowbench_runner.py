"""The in-sandbox test runner; stdlib only.

Started by an engine as `python -I -c BOOT DIR MODE` (see `engine.runner_command`): this
directory goes first on `sys.path` and `entry(MODE)` runs. BOOT pauses the garbage collector;
both modes freeze what the runner and the preload built and turn it on before sample code runs.

It is started by an engine with a JSON configuration on stdin and a result pipe on
file descriptor `result_fd`. It reads its configuration before any sample code exists,
sets resource limits, drops privileges, executes the program and then each test item,
and reports one record per item on the result pipe, each carrying the session nonce.

The engine trusts nothing else: not the exit code, not stdout. An item with no valid
record did not pass. After every item the runner checks that the testing machinery
(builtins, unittest, pytest, its own helpers) is unchanged since the tests' own imports
(done before any sample code runs); when it is not, the item and all later ones are
reported as errors and the run stops. Under direct invocation (`config["invocation"]`)
each item runs in its own fork of the process that loaded the program, so a tampered item
ends with its process and the later items start from the untouched parent.

This file must not import knowbench: it runs in whatever environment the benchmark's
tests need.
"""

import _frozen_importlib_external  # (importlib's, loaded in every interpreter as it starts)
import _thread
import binascii
import builtins
import contextvars
import gc
import itertools
import json
import linecache
import marshal
import opcode
import operator
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
import types
import unittest
import warnings

import knowbench_graft
import knowbench_memory
import knowbench_project
import knowbench_seccomp
import knowbench_split
import knowbench_spy
import knowbench_warm
import knowbench_wire
from knowbench_limits import drop_privileges as _drop_privileges
from knowbench_limits import fresh_signals as _fresh_signals
from knowbench_limits import libc as _libc
from knowbench_limits import resident_bytes as _resident_bytes
from knowbench_limits import set_dumpable as _set_dumpable
from knowbench_limits import set_limits as _set_limits
from knowbench_pytest import (
    HARNESS_REGISTRIES,
    UnsupportedFixture,
    class_at,
    collect,
    enter_scopes,
    forget_specs,
    leave_scopes,
    run_collected,
    run_direct,
    run_test_class,
    run_test_function,
    run_unittest,
    spec_harness,
    spec_loaded,
    then_clean_up,
)

_MESSAGE_CAP = 4000
_HERE = os.path.dirname(os.path.abspath(__file__))
# Routes from a worker thread to the reporting thread's frames or to arbitrary objects.
_GUARDED_AUDIT_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                                   "sys._current_frames"})


class Tampering(Exception):
    """The sample changed the machinery the verdict depends on."""


def _cpu_used():
    """CPU seconds this process and its finished children have used."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _limit_cpu(seconds):
    """In a process forked for one item: what is left of the sample's CPU time. A profiling
    timer ends it at the exact budget; RLIMIT_CPU (whole seconds) holds if the item disarms it."""
    seconds = max(seconds, 0.001)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    whole = -(-int(seconds * 1000) // 1000) + 1
    if hard == resource.RLIM_INFINITY or whole < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (whole, hard))
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _exit_code(wait_status):
    """A waitpid status as an exit code: negative for a signal."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def _ending(code):
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


_WATCHED_MODULES = (
    "builtins", "knowbench_pytest", "unittest", "unittest.case", "unittest.result", "unittest.suite",
    "unittest.async_case", "unittest.mock",
    "pytest",
    "_pytest.outcomes", "_pytest.python_api", "_pytest.approx", "_pytest.raises",
    "numpy.testing", "numpy.testing._private.utils", "pandas.testing", "pandas._testing",
    "pandas._testing.asserters",
)
_VOLATILE = frozenset({"__warningregistry__", "last_type", "last_value", "last_traceback",
                       "ps1", "ps2", "tracebacklimit", "exc_info", "_", "__loader__"})
_STORE, _DELETE = opcode.opmap["STORE_GLOBAL"], opcode.opmap["DELETE_GLOBAL"]


_OWN_STATE = {}  # {module name: (module, its `_own_state`)}: a fork server's serves its children


def _own_state(module):
    """The names a module's own functions rebind (`global name; name = ...`): state it keeps as
    it runs (`unittest.mock.mock_open` sets `file_spec` and `open_spec` on first use), which
    an honest test changes by calling it, not machinery a sample could patch to a pass."""
    name = getattr(module, "__name__", None)
    known = _OWN_STATE.get(name)
    if known is not None and known[0] is module:
        return known[1]
    values = []
    for value in list(vars(module).values()):
        if isinstance(value, type) and getattr(value, "__module__", None) == name:
            values.extend(vars(value).values())
        else:
            values.append(value)
    codes = []
    for value in values:
        value = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if type(value) is types.FunctionType and value.__module__ == name:
            codes.append(value.__code__)
    found = set()
    for code in _codes_in(codes):
        raw = code.co_code
        operations = raw[::2]
        if _STORE in operations or _DELETE in operations:
            extended = 0
            for index in range(0, len(raw), 2):
                operation, argument = raw[index], raw[index + 1] | extended
                extended = argument << 8 if operation == opcode.EXTENDED_ARG else 0
                if operation in (_STORE, _DELETE):
                    found.add(code.co_names[argument])
    _OWN_STATE[name] = (module, frozenset(found))
    return _OWN_STATE[name][1]


def _codes_in(codes):
    """Each of `codes` and every code object defined in them (their functions, classes,
    comprehensions, at any depth), each once."""
    pending, seen = list(codes), set()
    while pending:
        code = pending.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        yield code
        pending.extend(constant for constant in code.co_consts if type(constant) is types.CodeType)


def _snapshot():
    """Identity of everything a sample could patch to turn failures into passes.

    For each watched module that is loaded: its entry in sys.modules, every name in it, and
    the same for every class it defines (so a patched `_AssertRaisesContext.__exit__` is
    caught too). Kept as a tuple of the values per namespace, so that a check compares them by
    identity at C speed (`_changed`: `operator.is_`; `id()` would raise an audit event per
    object, and so run the runner's audit hook); only a namespace found changed is looked at
    name by name. The functions among them are returned too, {function: "scope.name"}:
    setting one's `__code__` raises an audit
    event, which the runner's audit hook watches (reading `__code__` raises one as well, so
    comparing code objects after every test would run the hook a thousand times).
    Callables that only answer `__code__` through their own attribute lookup are compared.
    """
    spaces, only = {}, {}
    for name in _WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        spaces[name] = vars(module)
        for value in list(vars(module).values()):
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                spaces[f"{name}.{value.__qualname__}"] = vars(value)
    # A package that is not watched itself still hands out its watched submodules (`np.testing`
    # is numpy's attribute): those entries of it are watched.
    for name in _watched_names():
        parent, _, child = name.rpartition(".")
        if parent and parent not in spaces and vars(sys.modules[parent]).get(child) is sys.modules[name]:
            only.setdefault(parent, set()).add(child)
    for parent in only:
        spaces[parent] = vars(sys.modules[parent])
    scopes, functions, data = [], {}, []
    state = {name: _own_state(sys.modules[name]) for name in _WATCHED_MODULES if name in spaces}
    for scope, space in spaces.items():
        # Volatile names (the warnings registry that a warning attributed to a runner frame
        # fills in) are caches the interpreter itself rebinds, not machinery; so is the data a
        # module's own functions keep in its globals, while it stays plain data (`_plain_data`,
        # checked with the rest): not what they bind there to be called, or a module (a lazily
        # imported class stays watched).
        own = {key for key in state.get(scope, ()) if key in space and _plain_data(space[key])}
        data.extend((scope, space, key) for key in own)
        keys = tuple(key for key in space if key not in _VOLATILE and key not in own
                     and (scope not in only or key in only[scope]))
        others = []
        for key in keys:
            value = space[key]
            owner = _code_owner(value)
            if owner is not None:
                functions.setdefault(owner, f"{scope}.{key}")
            elif callable(value) and getattr(value, "__code__", None) is not None:
                code = value.__code__
                if code is value.__code__:  # not an object that makes up its attributes (mock.call)
                    others.append((key, code))
        scopes.append((scope, space, keys, tuple(map(space.get, keys)), tuple(others)))
    # Each module by identity and by class: a module given another class (`__class__` may be
    # set to any ModuleType subclass) answers attribute lookups with the sample's code.
    modules = tuple((name, sys.modules[name], type(sys.modules[name])) for name in _watched_names())
    # Every (namespace, name, value) in parallel tuples, one set per kind of namespace (a
    # module's dict, a class's mappingproxy): one C loop over each checks them all.
    kinds = {}
    for _, space, keys, values, _ in scopes:
        spaces_, keys_, values_ = kinds.setdefault(type(space), ([], [], []))
        spaces_.extend(itertools.repeat(space, len(keys)))
        keys_.extend(keys)
        values_.extend(values)
    flat = tuple((kind.get, tuple(spaces_), tuple(keys_), tuple(values_))
                 for kind, (spaces_, keys_, values_) in kinds.items())
    others = tuple((scope, space, key, code) for scope, space, _, _, codes in scopes for key, code in codes)
    # A name added to a watched class hides what it inherits (`TestCase.__getattribute__`, a
    # base class's method); one added to a watched module matters where it hides a builtin
    # its functions use (`unittest.case.isinstance`): other new names are a module's own lazy
    # attributes (`unittest.IsolatedAsyncioTestCase`) or fill a gap. Their sizes are compared.
    # (Not `builtins`, nor a package watched for one entry.)
    grown = tuple((scope, space, frozenset(keys), type(space) is dict) for scope, space, keys, _, _ in scopes
                  if scope not in only and scope != "builtins")
    sizes = _dict_fields([space for _, space, _, _ in grown], 16) or (
        len, tuple(space for _, space, _, _ in grown), tuple(len(space) for _, space, _, _ in grown))
    # What a watched function's closure holds (a decorator's wrapped function, a deprecated
    # alias's target): setting a cell's contents raises no audit event.
    cells = []
    for function, name in functions.items():
        for cell in function.__closure__ or ():
            try:
                cells.append((name, cell, cell.cell_contents))
            except ValueError:  # an empty cell
                continue
    names = tuple(name for name, _, _ in cells)
    cells = (_cell_fields([cell for _, cell, _ in cells]) or (
        _CELL_CONTENTS, tuple(cell for _, cell, _ in cells), tuple(value for _, _, value in cells), _IS)) + (names,)
    return (modules, tuple(scopes), functions, flat, others,
            _versions(space for _, space, *_ in scopes), (grown, sizes), cells, tuple(data))


# `_snapshot`'s shape with nothing in it (split: no candidate code runs in the judge's process).
_NOTHING_WATCHED = ((), (), {}, (), (), None, ((), (len, (), ())), (len, (), (), operator.is_, ()), ())
_PLAIN_ITEMS = frozenset((str, int, bool, type(None)))


def _plain_data(value):
    """Whether `value` is data no code hangs on: None, a str, int, float, bool or bytes, or a
    list, tuple, set or frozenset of str, int, bool or None (`mock_open`'s `file_spec` and
    `open_spec`: the names a file has). Exact types only: reading them runs no code."""
    kind = type(value)
    if kind in _PLAIN_ITEMS or kind is float or kind is bytes:
        return True
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return all(type(item) in _PLAIN_ITEMS for item in value)
    return False


def _confine(role="sample"):
    """`role`'s seccomp filter (`knowbench_seccomp`) in this process, unless the fork server it
    was forked from installed it in itself already."""
    if _SERVER_FILTERED[0] != role:
        knowbench_seccomp.install(role)


def _watched_names():
    """The watched modules that are loaded and every package above them (through which tests
    reach them: `import numpy as np; np.testing`), packages first."""
    names = {}
    for name in _WATCHED_MODULES:
        if name in sys.modules:
            parts = name.split(".")
            for end in range(1, len(parts) + 1):
                names[".".join(parts[:end])] = None
    return tuple(name for name in names if name in sys.modules)


def _code_owner(value):
    """The plain function whose `__code__` a patch of `value` would replace, if any."""
    if isinstance(value, (staticmethod, classmethod, types.MethodType)):
        value = value.__func__
    return value if type(value) is types.FunctionType else None


_MISSING = object()
_IS = operator.is_
_CELL_CONTENTS = operator.attrgetter("cell_contents")
_BUILTIN_NAMES = frozenset(vars(builtins))
# What setting a function's attribute replaces (each raises an audit event): its behaviour.
_FUNCTION_PARTS = {"__code__": "code", "__defaults__": "default arguments",
                   "__kwdefaults__": "default keyword arguments"}


def _changed(snapshot, modules_now):
    """What changed since `snapshot` (`_snapshot`), or None; code set on its functions is
    the audit hook's to see (`execute_sample`)."""
    modules, scopes, _, flat, others, versions, (grown, sizes), cells, data = snapshot
    for name, module, kind in modules:
        if modules_now.get(name) is not module:
            return f"sys.modules['{name}'] was replaced"
        if type(module) is not kind:
            return f"the class of module {name} was replaced"
    # No watched dict changed at all (their version tags, `_versions`): nothing to compare.
    tags_same = versions is not None and tuple(map(versions[0], versions[1])) == versions[2]
    if not tags_same and tuple(map(sizes[0], sizes[1])) != sizes[2]:
        for scope, space, keys, module in grown:
            for key in list(space):
                if type(key) is not str:  # (hashing it could run the sample's code)
                    return f"a name that is not a str was added to {scope}"
                if key in keys or key in _VOLATILE or (module and key not in _BUILTIN_NAMES):
                    continue
                return f"{scope}.{key} was added"
    read, views, held, same, names = cells
    try:
        unchanged = all(map(same, map(read, views), held))
    except ValueError:  # a cell emptied
        unchanged = False
    if not unchanged:
        for name, view, value in zip(names, views, held):  # noqa: B905
            try:
                if same(read(view), value):
                    continue
            except ValueError:
                pass
            return f"what {name} wraps (its closure) was replaced"
    for scope, space, key in () if tags_same else data:
        if not _plain_data(space.get(key)):  # (a module's own state, not compared: still data)
            return f"{scope}.{key} was replaced"
    unchanged = tags_same
    for get, spaces, keys, values in () if unchanged else flat:
        unchanged = all(map(_IS, map(get, spaces, keys, itertools.repeat(_MISSING)), values))
        if not unchanged:
            break
    for scope, space, keys, values, _ in () if unchanged else scopes:
        if not all(map(_IS, map(space.get, keys, itertools.repeat(_MISSING)), values)):
            for key, value in zip(keys, values):  # noqa: B905 (the runner may run on Python < 3.10)
                now = space.get(key, _MISSING)
                if now is _MISSING:
                    return f"{scope}.{key} was deleted"
                if now is not value:
                    return f"{scope}.{key} was replaced"
    for scope, space, key, code in others:
        if getattr(space[key], "__code__", None) is not code:
            return f"the code of {scope}.{key} was replaced"
    return None


# The version tag CPython 3.6 to 3.13 keeps in every dict (PEP 509): a new value, unique in
# the process, whenever an entry is added, removed or rebound. Where it works (`_versions`
# probes it once), a check reads one 8-byte field per watched namespace instead of touching
# every value in it, and so writes no reference count: after a fork, no page the checks read
# is copied, and there is nothing to warm up.
_PROBED = [None]  # the probe's answer, once per process


def _probe_versions():
    """Whether dict version tags can be read here and change as PEP 509 says (on a probe)."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return False
    try:
        import ctypes
        import gc
    except ImportError:
        return False
    value = ctypes._SimpleCData.__dict__["value"].__get__  # not a patchable class's attribute

    class Probe:
        pass

    probe = {}
    space = gc.get_referents(vars(Probe))[0]
    if type(space) is not dict:
        return False
    steps = ((probe, lambda: probe.__setitem__("a", 1)), (probe, lambda: probe.__setitem__("a", 2)),
             (probe, lambda: probe.setdefault("b", 3)), (probe, lambda: probe.pop("a")),
             (probe, lambda: probe.update(c=4)), (probe, lambda: probe.__delitem__("b")),
             (space, lambda: setattr(Probe, "x", 1)), (space, lambda: delattr(Probe, "x")))
    for mapping, step in steps:
        tag = ctypes.c_uint64.from_address(id(mapping) + 24)
        used = ctypes.c_ssize_t.from_address(id(mapping) + 16)
        before = value(tag)
        step()
        if value(tag) == before or value(used) != len(mapping):
            return False
    return True


def _versions(spaces):
    """(a reader, views of the version tags of these namespaces' dicts, their values now), or
    None where tags cannot be read (`_probe_versions`). Taken before any sample code runs
    (`id()` raises an audit event); the reader is the C getter itself, so that a sample that
    gives the view's class another `value` changes nothing."""
    return _dict_fields(spaces, 24)


def _field_views(objects, offset):
    """(reader, views, values now) of the 8-byte field at `offset` in each of these objects,
    read without touching them (no reference count written), or None where the interpreter's
    layout was not confirmed (`_probe_versions`)."""
    if _PROBED[0] is None:
        _PROBED[0] = _probe_versions()
    if not _PROBED[0]:
        return None
    import ctypes

    views = tuple(ctypes.c_uint64.from_address(id(obj) + offset) for obj in objects)
    value = ctypes._SimpleCData.__dict__["value"].__get__
    return value, views, tuple(map(value, views))


def _dict_fields(spaces, offset):
    """`_field_views` of these namespaces' dicts (24: the version tag, 16: the number of
    entries), or None (`_versions`)."""
    import gc

    dicts = []
    for space in spaces:
        if type(space) is types.MappingProxyType:  # a class's namespace: the dict behind it
            space = gc.get_referents(space)[0]
        if type(space) is not dict:
            return None
        dicts.append(space)
    return _field_views(dicts, offset)


def _cell_fields(cells):
    """(reader, views, values now, comparison) of the object pointer of these closure cells
    (`_field_views`), or None where that cannot be done."""
    fields = _field_views(cells, 16)
    if fields is None or fields[2] != tuple(id(cell.cell_contents) for cell in cells):
        return None  # not this interpreter's layout
    return (*fields, operator.eq)


def _hidden(frame):
    """Whether unittest and pytest leave this frame out of a failure's report: unittest's own
    code (`__unittest` in its globals; pytest prunes those too) and frames marked
    `__tracebackhide__ = True` (pytest; numpy.testing's assertions are)."""
    try:
        return ("__unittest" in frame.f_globals or frame.f_globals.get("__tracebackhide__") is True
                or frame.f_locals.get("__tracebackhide__") is True)
    except Exception:  # a hostile namespace: show the frame
        return False


def _without_hidden(tb):
    """`tb` rebuilt without the frames `_hidden` names, so that no position or source of theirs
    is ever looked up; `tb` itself when none is hidden, or every one is."""
    links = []
    while tb is not None:
        links.append(tb)
        tb = tb.tb_next
    kept = [link for link in links if not _hidden(link.tb_frame)]
    if not kept or len(kept) == len(links):
        return links[0] if links else None
    rebuilt = None
    for link in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, link.tb_frame, link.tb_lasti, link.tb_lineno)
    return rebuilt


def _hide_frames(report, error):
    """Drop the hidden frames (`_hidden`) from the exceptions chained to a TracebackException
    made without looking up lines (its own traceback was given without them: `_without_hidden`),
    so their sources are never read; a traceback whose every frame is hidden is left whole."""
    seen = set()
    while report is not None and id(report) not in seen:
        seen.add(id(report))
        # the link format() prints next: the cause, else the context it was raised in
        if report.__cause__ is not None and error.__cause__ is not None:
            report, error = report.__cause__, error.__cause__
        elif report.__context__ is not None and error.__context__ is not None:
            report, error = report.__context__, error.__context__
        else:
            return
        frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
        if len(frames) == len(report.stack):
            kept = [summary for summary, frame in zip(report.stack, frames) if not _hidden(frame)]  # noqa: B905
            if kept:
                report.stack = traceback.StackSummary.from_list(kept)


def _describe(error):
    # Leading frames belong to this runner: only noise to a reader.
    tb = error.__traceback__
    while (tb is not None and tb.tb_next is not None
           and os.path.dirname(tb.tb_frame.f_code.co_filename) == _HERE):
        tb = tb.tb_next
    try:
        report = traceback.TracebackException(type(error), error, _without_hidden(tb),
                                              lookup_lines=False)
        _hide_frames(report, error)
        text = "".join(report.format())
        remote = knowbench_split.remote_frames(error)
        if remote:  # split: the candidate's frames, where an in-process traceback has them
            here = [frame for frame in report.stack if os.path.dirname(frame.filename) != _HERE]
            text = ("Traceback (most recent call last):\n" + "".join(traceback.format_list(here))
                    + remote + "".join(traceback.format_exception_only(type(error), error)))
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


def _is_pytest_skip(error):
    """`pytest.skip()` (and `importorskip`) raise pytest's own Skipped, not unittest's."""
    outcomes = sys.modules.get("_pytest.outcomes")
    skipped = getattr(outcomes, "Skipped", None)
    return isinstance(skipped, type) and isinstance(error, skipped)


class _TargetCodes(frozenset):
    """The target's code objects, and `spaces`: the globals of the functions they were read
    from (None where one had no globals to read), on which alone a frame can run them."""

    __slots__ = ("spaces",)


def _target_codes(namespace, entry_point):
    """Code objects of the entry point, to record whether a test ran it."""
    if not entry_point:
        return _targets(())
    obj = namespace.get(entry_point.split(".")[0])
    for part in entry_point.split(".")[1:]:
        raw = vars(obj).get(part) if isinstance(obj, type) else None
        obj = raw if raw is not None else getattr(obj, part, None)
    return _targets((obj, getattr(obj, "__func__", None), getattr(obj, "fget", None)))


def _targets(functions, unwrap=True):
    """The code objects of `functions` and (`unwrap`) of what they wrap (`_TargetCodes`)."""
    codes, spaces = set(), []
    for candidate in functions:
        for _ in range(16 if unwrap else 1):  # through decorators: `__wrapped__`, or `func` (functools.partial, toolz's curry)
            if candidate is None:
                break
            code = getattr(candidate, "__code__", None)
            if code is not None:
                codes.add(code)
                space = getattr(candidate, "__globals__", None)
                if type(space) is dict and spaces is not None:
                    if not any(space is seen for seen in spaces):
                        spaces.append(space)
                else:
                    spaces = None
            wrapped = getattr(candidate, "__wrapped__", None)
            candidate = wrapped if wrapped is not None else getattr(candidate, "func", None)
    targets = _TargetCodes(codes)
    targets.spaces = None if spaces is None else tuple(spaces)
    return targets


# The name of every spec's module, as registered in sys.modules while its tests run.
_SPEC_MODULE = knowbench_wire.TESTS_MODULE
warnings_caught, add_filter = warnings.catch_warnings, warnings.filterwarnings


class _SpecFailed(Exception):
    """The test code itself failed to run, so none of its items can pass."""


def _load_spec(name, tests, module, modules, spec_errors, as_script=False):
    """The namespace a test spec's code ran in; runs it on first use.

    Each spec is a module of its own, a copy of the program's globals, registered in
    sys.modules as `knowbench_test` while it loads and while its tests run, as pytest
    imports a test module: pickling a class it defines, `typing.get_type_hints` and
    `multiprocessing` find it by name. (Several specs share the name; the one whose test runs
    holds it.)

    A plain-block spec is its own test, so its failure propagates as the test's failure.
    `as_script` (direct invocation) runs it the way DomainEval ran a test: appended to the
    program as one script, in the program's own globals, its lines numbered after the
    program's in one file (`solution.py`), so warnings and frames of the program and of the
    test name the same file and module. Only for a process that runs one item: the spec
    changes the program's globals.
    """
    if name in spec_errors:
        raise _SpecFailed(spec_errors[name])
    if name in modules:
        spec_module = modules[name]
        if not as_script:
            sys.modules[_SPEC_MODULE] = spec_module
        return spec_module.__dict__
    code, precompiled = tests[name]
    if as_script:
        import ast

        filename, spec_module = "solution.py", module
        program = "".join(linecache.cache[filename][2])
        if program and not program.endswith("\n"):
            program += "\n"
        tree = ast.parse(code, filename)
        ast.increment_lineno(tree, program.count("\n"))
        script = program + code
        linecache.cache[filename] = (len(script), None, script.splitlines(True), filename)
        compiled = compile(tree, filename, "exec")
    else:
        filename, spec_module = f"test:{name}", types.ModuleType(_SPEC_MODULE)
        program_names = dict(module.__dict__)
        spec_module.__dict__.update(program_names)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        spec_module.__name__ = _SPEC_MODULE
        spec_module.__file__ = filename  # the test's own, as pytest's module has (warnings point here)
        compiled = _compile(code, filename, precompiled)
        _SPEC_CODE[filename] = (compiled, code, spec_module.__dict__)
        sys.modules[_SPEC_MODULE] = spec_module
    namespace = spec_module.__dict__
    namespace["__builtins__"] = builtins  # never the program's own (it may rebind them)
    try:
        exec(compiled, namespace)
    except BaseException as error:
        spec_errors[name] = "the test code failed to run:\n" + _describe(error)
        raise
    if not as_script:
        spec_loaded(namespace, program_names)
        if not _SPLIT[0]:
            _watch_surface(namespace, program_names, module.__dict__)
    if _SPLIT[0]:
        knowbench_split.rebinds_settled()  # what the spec's top level set is its set-up
    modules[name] = spec_module
    return namespace


# In-process, what a spec defines for the runner and the harness to run, as the spec's code left
# it (`_watch_surface`), compared after every test (`_surface_changed`): (what, namespace, name,
# value) looked up by name; (what, class, its bases, its class) of its test classes; (what,
# list or dict, its items) of mark lists and a mined harness's registries; (what, function,
# its attributes' dict); (what, cell, its contents) of closures. And the functions the runner
# runs, whose code, defaults or keyword defaults the audit hook sees set.
_SPEC_SURFACE = []
_SPEC_CLASSES = []
_SPEC_ITEMS = []
_SPEC_DICTS = []
_SPEC_CELLS = []
_SPEC_FUNCTIONS = {}
_HOOK_NAMES = frozenset(("setup_module", "teardown_module", "setUpModule", "tearDownModule", "setup_function",
                         "teardown_function", "setup", "teardown", "pytest_generate_tests"))
_CLASS_HOOK_NAMES = frozenset(("setUp", "tearDown", "setUpClass", "tearDownClass", "asyncSetUp", "asyncTearDown",
                               "setup_method", "teardown_method", "setup_class", "teardown_class", "setup",
                               "teardown", "pytest_generate_tests", "run", "debug", "__call__", "__init__",
                               "__new__", "__getattribute__", "__getattr__", "__init_subclass__", "__set_name__"))


def _function_of(value):
    """The plain function behind a function, a static or class method, or a pytest fixture
    definition (8.4 and later), or None."""
    if type(value).__name__ == "FixtureFunctionDefinition":
        value = getattr(value, "_fixture_function", None)
    value = getattr(value, "__func__", value)
    return value if type(value) is types.FunctionType else None


def _runs(name, value, program):
    """Whether the runner or the harness runs `value`, a function of the spec's (never one of
    the program's, `program` its (globals, ids of its objects): a mined spec may bind the
    target to a name of its own): a test, an xunit hook, a fixture, the harness's own."""
    function = _function_of(value)
    if function is None or function.__globals__ is program[0] or id(value) in program[1] \
            or id(function) in program[1]:
        return False
    return (type(value).__name__ == "FixtureFunctionDefinition" or name.startswith(("test", "_kb_"))
            or name in _HOOK_NAMES or name in _CLASS_HOOK_NAMES or "_pytestfixturefunction" in vars(function))


def _own_cells(code):
    """The names of the closure cells `code` (and the functions it defines) write: its own
    state (`nonlocal`: a retry decorator's count), which is no part of what it runs."""
    import dis

    return {instruction.argval for found in _codes_in((code,)) for instruction in dis.get_instructions(found)
            if instruction.opname in ("STORE_DEREF", "DELETE_DEREF")}


def _watch_function(what, value):
    function = _function_of(value)
    if function is None:
        return
    _SPEC_FUNCTIONS[function] = f"the tests' {what}"
    _SPEC_DICTS.append((what, function, vars(function)))
    _watch_marks(f"{what}.pytestmark", vars(function))
    if function.__closure__:
        state = _own_cells(function.__code__)
        for name, cell in zip(function.__code__.co_freevars, function.__closure__):  # noqa: B905
            if name in state:
                continue
            try:
                _SPEC_CELLS.append((what, cell, cell.cell_contents))
            except ValueError:  # an empty cell
                _SPEC_CELLS.append((what, cell, _MISSING))


def _watch_marks(what, space):
    marks = space.get("pytestmark", _MISSING)
    _SPEC_SURFACE.append((what, space, "pytestmark", marks))
    _watch_items(what, marks)
    if marks is not _MISSING:
        for mark in marks if type(marks) is list else (marks,):
            _watch_mark(what, mark)


def _watch_mark(what, mark):
    """A mark's arguments as the spec's code gave them: pytest takes a parametrize mark's cases
    as it collects, before any test runs, and the harness reads them as the test runs. So its
    `args` and `kwargs`, the lists and dicts they hold (the cases, their ids) and the marks of
    each `pytest.param` case. A `MarkDecorator` (a mark not called) holds its `Mark`."""
    try:
        attributes = vars(mark)
    except Exception:  # (no attributes of its own: nothing of it to change)
        return
    if type(attributes) is not dict:
        return
    _SPEC_DICTS.append((what, mark, attributes))
    for key in ("args", "kwargs", "mark"):
        value = attributes.get(key, _MISSING)
        _SPEC_SURFACE.append((f"{what} {key}", attributes, key, value))
        if key == "mark" and value is not _MISSING:
            _watch_mark(what, value)
        elif type(value) is tuple or type(value) is dict:
            _watch_items(f"{what} {key}", value)
            for held in value.values() if type(value) is dict else value:
                _watch_items(f"{what} {key}", held)
                for case in held if type(held) is list or type(held) is tuple else ():
                    if type(case).__name__ == "ParameterSet":
                        _watch_items(f"{what} {key}", getattr(case, "marks", None))


def _watch_items(what, container):
    """Watch what a list holds, or a dict (its keys and values), by identity."""
    if type(container) is list or type(container) is dict:
        _SPEC_ITEMS.append((what, container, _held(container)))


def _held(container):
    """A list's items, or a dict's keys and values in turn (neither runs code of theirs)."""
    return tuple(itertools.chain.from_iterable(container.items()) if type(container) is dict else container)


def _watch_surface(namespace, program, program_globals):
    """Watch what a spec's own code defined for the runner to run: its tests, xunit hooks,
    fixtures and the harness a mined spec carries (with its registry of fixtures), each with
    its marks, attributes and what its closure holds (but the cells its own code writes); its
    test classes (a `unittest.TestCase`, or one with a test function of the spec's in its MRO),
    with their bases, their class, their `pytestmark`, the fixtures the harness gave them, and
    every name the runner looks up on them that holds a function (their tests, inherited ones
    included, hooks, the special methods that decide how an instance is made and read),
    present or not. A candidate that rebinds or shadows a later test (to one that passes),
    marks it xfail, or gives it new code, would otherwise pass tests it never passed. Other
    names (a module's helpers and helper classes, a test class's other methods and its data,
    `test_dir` say) are the tests' to change (a cache, a fake) and are not watched."""
    module = namespace.get("__name__")
    # The harness: a mined spec's own copy, or the one the runner installs for a spec that uses
    # pytest (made now, not at its first test), with its registries of fixtures.
    harness = spec_harness(namespace)
    program = (program_globals, frozenset(map(id, program.values())))
    classes = []
    for key, value in list(namespace.items()):
        if id(value) in program[1]:
            continue
        if isinstance(value, type) and vars(value).get("__module__") == module:
            if issubclass(value, unittest.TestCase) or any(
                    name.startswith("test") and _runs(name, member, program)
                    for base in value.__mro__ for name, member in list(vars(base).items())):
                classes.append((key, value))
                _SPEC_SURFACE.append((key, namespace, key, value))
        elif _runs(key, value, program):
            _SPEC_SURFACE.append((key, namespace, key, value))
            _watch_function(key, value)
    for space in (namespace,) if harness is None else (namespace, harness):
        for registry in HARNESS_REGISTRIES:
            if id(space.get(registry)) not in program[1]:
                _SPEC_SURFACE.append((registry, space, registry, space.get(registry, _MISSING)))
                _watch_items(registry, space.get(registry))
    for key, value in list(harness.items()) if harness is not None else ():
        if _runs(key, value, program):
            _SPEC_SURFACE.append((f"harness's {key}", harness, key, value))
            _watch_function(f"harness's {key}", value)
    for key, cls in classes:
        space = vars(cls)
        _SPEC_CLASSES.append((key, cls, cls.__bases__, type(cls)))
        _watch_marks(f"{key}.pytestmark", space)
        looked_up = set(_CLASS_HOOK_NAMES)
        for base in cls.__mro__:
            if base is object or str(vars(base).get("__module__")).startswith("unittest."):
                continue  # (unittest's own classes hold nothing of the spec's: a hundred names)
            for name, member in list(vars(base).items()):
                if name.startswith("_kb_"):  # (the fixtures the harness gave the class)
                    _SPEC_SURFACE.append((f"{key}.{name}", space, name, space.get(name, _MISSING)))
                    _watch_items(f"{key}.{name}", space.get(name))
                if name.startswith("test") and _runs(name, member, program):
                    looked_up.add(name)
        for name in sorted(looked_up):
            member = space.get(name, _MISSING)
            if member is _MISSING or _function_of(member) is not None:
                _SPEC_SURFACE.append((f"{key}.{name}", space, name, member))
            if member is not _MISSING and _runs(name, member, program):
                _watch_function(f"{key}.{name}", member)
    _watch_marks("pytestmark", namespace)
    if "pytest_generate_tests" not in namespace:  # (one added later would parametrize the tests)
        _SPEC_SURFACE.append(("pytest_generate_tests", namespace, "pytest_generate_tests", _MISSING))


def _surface_changed():
    """What of a spec's own definitions (`_watch_surface`) was rebound, added, removed or
    changed in place, or None."""
    for what, cls, bases, kind in _SPEC_CLASSES:
        if type(cls) is not kind:
            return f"the class of the tests' own {what} was replaced"
        if cls.__bases__ is not bases:
            return f"the bases of the tests' own {what} were replaced"
    for what, space, key, value in _SPEC_SURFACE:
        if space.get(key, _MISSING) is not value:
            return f"the tests' own {what} was replaced"
    for what, function, attributes in _SPEC_DICTS:
        if vars(function) is not attributes:
            return f"the attributes of the tests' own {what} were replaced"
    for what, container, held in _SPEC_ITEMS:
        now = _held(container)
        if len(now) != len(held) or not all(map(_IS, now, held)):
            return f"the tests' own {what} was changed"
    for what, cell, value in _SPEC_CELLS:
        try:
            now = cell.cell_contents
        except ValueError:  # emptied
            now = _MISSING
        if now is not value:
            return f"what the tests' own {what} wraps (its closure) was replaced"
    return None


# Each spec's module code and source, by its file name (`test:NAME`), as the runner compiled
# it: who called `pytest.xfail` (the source is read here, never from `linecache`); and where
# that source calls `xfail` (`_xfail_calls`).
_SPEC_CODE = {}
_XFAIL_CALLS = {}


def _xfailed_by_the_tests(error, target_codes):
    """Whether `error` is `pytest.xfail()` called by the tests' own code, which pytest counts as
    an expected failure (the test passes). pytest's `xfail` must have raised it, called from a
    function the spec compiled, running on the spec's own globals, at a call in the spec's
    source of a function named `xfail` (on Python 3.11 and later, that very call expression;
    before, a call on that line); no frame on the way may be the program's or the target's,
    nor the spec's module code (an xfail while the spec loads is pytest's collection error).
    So the candidate raising the exception, calling `xfail` from code of its own, being it,
    making it a special method of an object the tests use, or running the spec's code on
    globals of its own never makes an xfail. In-process, a candidate that makes the tests'
    own code reach their `xfail` call (on their globals, from no frame of its own) still can,
    as before Python 3.11 can a line that both calls `xfail` and uses an object of the
    candidate's."""
    outcomes = sys.modules.get("_pytest.outcomes")
    xfail = getattr(outcomes, "xfail", None)
    # (a function in older releases of pytest, an instance of `_XFail` in newer ones)
    raiser = xfail.__code__ if type(xfail) is types.FunctionType \
        else getattr(vars(type(xfail)).get("__call__"), "__code__", None)
    if type(error) is not getattr(outcomes, "XFailed", None) or raiser is None or raiser in target_codes:
        return False
    frames, tb = [], error.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    if len(frames) < 2 or frames[-1][0].f_code is not raiser:
        return False
    frame, lasti, lineno = frames[-2]
    code = frame.f_code
    found = _SPEC_CODE.get(code.co_filename)
    if found is None or code is found[0] or not any(inner is code for inner in _codes_in((found[0],))) \
            or frame.f_globals is not found[2]:
        return False
    if any(seen.f_code.co_filename == "solution.py" or seen.f_code in target_codes or seen.f_code is found[0]
           for seen, _, _ in frames):
        return False
    calls = _xfail_calls(code.co_filename, found[1])
    positions = getattr(code, "co_positions", None)
    if positions is None:  # (Python before 3.11: by line)
        return any(start <= lineno <= end for start, end, _, _ in calls)
    return next(itertools.islice(positions(), lasti // 2, None), None) in calls


def _xfail_calls(filename, source):
    """Where the spec's source calls a function named `xfail`: (line, end line, column, end
    column) of each call, parsed once per spec."""
    calls = _XFAIL_CALLS.get(filename)
    if calls is None:
        import ast

        calls = _XFAIL_CALLS[filename] = tuple(
            (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) == "xfail" or getattr(node.func, "id", None) == "xfail"))
    return calls


def _shared_dir(parent, prefix="tmp"):
    """A fresh directory (mode 0700, made by this call); in split mode the candidate's uid may
    add files to it (not remove or change the tests' own: sticky, and their files keep the
    default mode).

    Named after this process and a counter: `tempfile`'s random names would cost every
    freshly forked sample process a new random generator. A name already taken (made by
    another process first) falls back to a random one.
    """
    try:
        path = os.path.join(parent, f"{prefix}{os.getpid()}-{next(_DIR_NUMBERS)}")
        os.mkdir(path, 0o700)
    except FileExistsError:
        path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    if _SPLIT[0]:
        os.chmod(path, 0o1777)
    return path


_SPLIT = [False]
_DIR_NUMBERS = itertools.count()


def _guard_writes(candidate_uid):
    """Split, in the judge: the tests never write into a file the candidate's uid owns, or
    into a directory it owns. In a shared directory (the work directory, `tmp_path`,
    `tempfile`'s) the candidate may make a file or a directory under the name the tests will
    give theirs before they do; their `open(path, "w")` would reuse it, and the candidate could
    then change or swap what the tests take for their own (a reference to compare with). Such
    an open raises PermissionError instead: checked before it (an audit hook: every open for
    writing, `os.open` and `io.FileIO` included, and `sqlite3.connect` with its journals) and,
    for `open` and `io.open` (what pathlib, pandas and numpy write through), after it too, on
    what was opened, so a file made in between is caught."""
    if candidate_uid is None:  # (one uid for both: knowbench is not root, nothing to tell apart)
        return
    import builtins
    import errno
    import functools
    import io

    opened = io.open

    @functools.wraps(opened)
    def open(file, mode="r", *args, **kwargs):
        stream = opened(file, mode, *args, **kwargs)
        if not (type(mode) is str and "r" in mode and "+" not in mode):
            try:
                owner = os.fstat(stream.fileno()).st_uid
            except (OSError, ValueError, AttributeError):
                owner = None
            if owner == candidate_uid:
                stream.close()
                raise PermissionError(errno.EACCES, "the tests would write into a file the candidate's "
                                      "process made (in a shared directory it may make a name before the "
                                      "tests do), which knowbench does not allow", file)
        return stream

    builtins.open = io.open = open
    write = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def candidates(path):
        """Whether `path`, or a directory above it, is the candidate's uid's (a directory it
        made first, under the name the tests give theirs, lets it rename their files in it)."""
        try:
            if os.lstat(path).st_uid == candidate_uid:
                return True
        except (OSError, ValueError):
            pass  # (not there yet: the tests make it)
        try:
            directory = os.path.dirname(os.path.abspath(path))
            while True:
                if os.stat(directory).st_uid == candidate_uid:
                    return True
                above = os.path.dirname(directory)
                if above == directory:
                    return False
                directory = above
        except (OSError, ValueError):
            return False

    def hook(event, args):
        # Every open for writing, whatever opens it (`os.open`, `io.FileIO`, a module that bound
        # `open` before it was wrapped: tarfile), and sqlite's databases with their journals.
        if event == "open" and len(args) > 2 and type(args[2]) is int and args[2] & write:
            paths = [args[0]]
        elif event == "sqlite3.connect" and args:
            paths = [args[0]]
            if type(args[0]) is str and args[0] not in (":memory:", ""):
                paths += [args[0] + suffix for suffix in ("-journal", "-wal", "-shm")]
        else:
            return
        for path in paths:
            if hasattr(type(path), "__fspath__"):  # (the tests' own objects: this is their process)
                path = os.fspath(path)
            if type(path) in (str, bytes) and candidates(path):
                raise PermissionError(errno.EACCES, "the tests would write into a file or directory "
                                      "the candidate's process made, which knowbench does not allow", path)

    sys.addaudithook(hook)


def _share_tempfile():
    """Split, in the judge: what the tests make with `tempfile` is shared with the candidate's
    uid as `tmp_path` is. A directory (`mkdtemp`, `TemporaryDirectory`) is sticky and open to
    all, so the candidate may add files there but not remove or change the tests' own; a file
    (`mkstemp`, `NamedTemporaryFile`) is readable, not writable. A `TemporaryDirectory` the
    candidate made subdirectories in is removed as far as the tests' uid may (what is left is
    the work directory's, removed with it), instead of failing the test with PermissionError."""
    import functools

    make_dir, make_file = tempfile.mkdtemp, tempfile._mkstemp_inner

    @functools.wraps(make_dir)
    def mkdtemp(*args, **kwargs):
        path = make_dir(*args, **kwargs)
        os.chmod(path, 0o1777)
        return path

    @functools.wraps(make_file)
    def _mkstemp_inner(*args, **kwargs):
        fd, name = make_file(*args, **kwargs)
        os.fchmod(fd, 0o644)
        return fd, name

    remove = tempfile.TemporaryDirectory._rmtree.__func__

    def _rmtree(cls, name, *args, **kwargs):
        try:
            remove(cls, name, *args, **kwargs)
        except PermissionError:
            import shutil

            shutil.rmtree(name, ignore_errors=True)

    tempfile.mkdtemp, tempfile._mkstemp_inner = mkdtemp, _mkstemp_inner
    tempfile.TemporaryDirectory._rmtree = classmethod(functools.wraps(remove)(_rmtree))


def _preload(modules, role=None):
    """Import `modules`, dotted names as `preload_modules` lists them: for a.b.c, a.b, then
    a.b.c only where a.b has no attribute c, as `from a.b import c` would.

    For a split candidate's process (`role` "candidate"), none of the testing frameworks'
    modules, only the package above one where that is not a testing framework's (numpy for
    `numpy.testing`): the tests run in the judge's process, and no value of a testing
    framework crosses the wire, so the candidate never needs one to rebuild a value (one of a
    module it lacks, it imports: `knowbench_wire.Resolver`); without them (pytest alone is a
    few hundred modules, and brings `threading`, whose handler runs in every forked child)
    its processes cost less to fork and to end. A program that imports one imports it."""
    for module in modules:
        if role == "candidate" and knowbench_wire.testing_module(module):
            module = module.partition(".")[0]
            if knowbench_wire.testing_module(module):
                continue
        parent, _, leaf = module.rpartition(".")
        try:
            if parent:
                __import__(parent)
                if hasattr(sys.modules[parent], leaf):
                    continue
            __import__(module)
        except Exception:  # a missing optional import is the tests' business, not the runner's
            pass


def _import_test_modules(wanted):
    """Import what the test code imports (`wanted`: [module, names from it], found by the
    engine), before any sample code runs.

    The integrity baseline is taken after this, so a library whose test utilities patch
    `unittest` or `pytest` on import (psutil.tests replaces `unittest.TestCase`) is part of
    the baseline rather than an attack, and a testing module the tests use is watched even
    when nothing loaded it before the sample did. A module that fails to import is left to
    fail where the test imports it. Returns True when anything new was imported.
    """
    before = len(sys.modules)
    for module, names in wanted:
        try:
            __import__(module, fromlist=names)
        except BaseException:  # the test's own import reports it, under its limits
            pass
    return len(sys.modules) != before


def _library_roots():
    """The directories the environment's modules live under (its prefixes: the standard
    library and site-packages), each ending in a separator."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return tuple(os.path.join(os.path.realpath(root), "") for root in roots if root)


def _in_library():
    """A function telling whether a module's file lies under one of the environment's
    prefixes (`_library_roots`) and not under the work directory: a module of the
    environment, never one of the sample's or a project's. It keeps each folder's answer."""
    roots = _library_roots()
    work = os.path.join(os.path.realpath(os.getcwd()), "")
    folders = {}

    def inside(path):
        if type(path) is not str:
            return False
        folder = os.path.dirname(path)
        if folder not in folders:
            real = os.path.join(os.path.realpath(folder), "")
            folders[folder] = real.startswith(roots) and not real.startswith(work)
        return folders[folder]

    return inside


def _library_imports(arrived):
    """The modules of the environment's libraries loaded since `arrived` (module names), in
    the order they were loaded: what a reference imported as it ran (lazily, inside a
    library or a test), which every later sample would import again. Best effort."""
    try:
        inside = _in_library()
        return [name for name, module in list(sys.modules.items())
                if name not in arrived and type(name) is str and " " not in name
                and inside(getattr(module, "__file__", None))]
    except BaseException:
        return []


def _import_library_modules(names, role=None):
    """Import `names` (`_library_imports` of a run's references, sent by the engine:
    `Engine.warm`) where this process has not, in order, each only if it is found in the
    environment's libraries (`_in_library`) and its package is loaded already: a name whose
    package is not is tried again after the others, as long as they load more (lists joined
    from several runs may name a module before its package). In a split candidate's server
    (`role` "candidate"), no testing framework's module, as `_preload` leaves out. Whether any
    module's code ran (one that failed to import may have changed what is watched before it
    failed: the samples import it again, and fail as it did)."""
    if type(names) is not list or not names:
        return False
    import importlib.util

    inside, ran = _in_library(), False
    waiting = [name for name in names if type(name) is str and not (
        role == "candidate" and knowbench_wire.testing_module(name))]
    while waiting:
        later = []
        for name in waiting:
            if name in sys.modules:
                continue
            parent = name.rpartition(".")[0]
            if parent and parent not in sys.modules:
                later.append(name)
                continue
            try:  # (with its package loaded, finding the module runs none of its code)
                if not inside(getattr(importlib.util.find_spec(name), "origin", None)):
                    continue
                ran = True
                __import__(name)
            except BaseException:
                pass
        # (Again while the package of one of them is loaded now: that one is tried, not put
        # off, in the next pass, so each pass tries fewer.)
        waiting = later if any(name.rpartition(".")[0] in sys.modules for name in later) else []
    return ran


_STATUSES = frozenset({"pass", "fail", "error", "timeout", "memory", "infrastructure"})
# The reasons a worker may give for a non-pass outcome: a subset of knowbench.records.Reason
# (this file cannot import knowbench; a test checks that the two agree).
_REASONS = frozenset({"assertion", "exception", "skipped", "test-code-failed", "unsupported-fixture",
                      "program-failed-to-load", "memory", "cannot-cross", "candidate-died", "interrupted"})


# Taken once by a fork server after its imports; a child checks against it (fork keeps ids).
_SERVER_SNAPSHOT = [None]
_SERVER_IDENTITY = [None]  # the same for the runner's own globals (`_runner_identity`)
# From both: the modules the snapshot watched, and every watched function ({function: name}).
_SERVER_WATCHED = [None]
# The seccomp filter (`knowbench_seccomp` role) a fork server installed in itself, once, before
# forking any sample's process, or None: every child inherits it (attaching it in each cost the
# child 0.15-0.2 ms, most of it its first `ctypes` call). And the socket with which the
# server's memory budget asks the kernel about its sandbox's sockets, made before the filter,
# which denies netlink sockets (each child closes it at once).
_SERVER_FILTERED = [None]
_SERVER_LINK = [None]


def _new_solution_module(program):
    module = type(sys)("solution")
    module.__file__ = "solution.py"
    sys.modules["solution"] = module
    linecache.cache["solution.py"] = (len(program), None, program.splitlines(True), "solution.py")
    return module


def _precompiled(compiled):
    """The code the engine compiled for this sample ({spec name: code}, the program's code or
    None), from the request's `compiled`; nothing where this interpreter makes other bytecode.
    Loaded before any sample code runs."""
    if not compiled or compiled.get("magic") != _frozen_importlib_external.MAGIC_NUMBER.hex():
        return {}, None

    def load(text):
        return marshal.loads(binascii.a2b_base64(text)) if text else None
    return {name: load(text) for name, text in compiled.get("tests", {}).items()}, load(compiled.get("program"))


def _compile(source, filename, precompiled=None):
    """`source`'s code as `filename`: the engine's compile of it where there is one (made as
    this does, for the same bytecode), else compiled here."""
    if type(precompiled) is types.CodeType and precompiled.co_filename == filename:
        return precompiled
    return compile(source, filename, "exec")


def _load_program(program, entry_point, channel, installed, precompiled, box):
    """Worker-thread job: run the program as module `solution`.

    In-process, `program` is the candidate's and sample code runs here. Split, it is the
    benchmark's own program; the candidate's process loads the candidate's meanwhile, and
    the target here becomes a proxy that calls it. `installed`: the installed module the
    target was cut from, where the target (or its proxy) then takes the original's place
    (`knowbench_graft`). `precompiled`: the program's code as the engine compiled it, or None.
    """
    module = _new_solution_module(program)
    if channel is not None:  # before the program binds `from time import tzset`
        knowbench_split.watch_tzset()
    try:
        exec(_compile(program, "solution.py", precompiled), module.__dict__)
        if channel is None and installed and knowbench_graft.graft(module.__dict__, entry_point, installed):
            knowbench_graft.follow_writes(module.__dict__, installed)
    except BaseException as error:
        memory = isinstance(error, MemoryError)
        if channel is not None:
            box.append(("error", "the benchmark's own program failed to load in the trusted "
                        "process:\n" + _describe(error), None, "test-code-failed"))
            return
        box.append(("memory" if memory else "error", "the program failed to load:\n" + _describe(error),
                    None, "memory" if memory else "program-failed-to-load"))
        return
    if channel is None:
        box.append(("pass", "", (module, _target_codes(module.__dict__, entry_point)), None))
        return
    failure = channel.handshake()
    if failure is not None:
        box.append((failure[0], "the program failed to load:\n" + failure[1], None, failure[2]))
        return
    try:
        # (the proxy's own code: what it wraps is the benchmark's stub, which it never calls)
        codes = _targets((knowbench_split.install_proxy(module.__dict__, entry_point, channel, installed),),
                         unwrap=False)
    except knowbench_graft.GraftFailed as error:
        box.append(("error", str(error), None, "test-code-failed"))
        return
    except Exception as error:
        box.append(("error", f"the target {entry_point} is not in the benchmark's program: "
                    f"{_describe(error)}", None, "test-code-failed"))
        return
    box.append(("pass", "", (module, codes), None))


def _run_item(item, tests, module, target_codes, state, box):
    """Worker-thread job: run one test item and classify its outcome. Sample code runs here."""
    called = [False]
    settrace = sys.settrace
    spaces = getattr(target_codes, "spaces", None)

    def tracer(frame, event, arg):
        # Called for every Python call until the target's first: then tracing stops, so the
        # target's own work (a library's thousands of calls) runs at full speed. Reading
        # `f_code` raises an audit event (a call of every audit hook, the runner's included)
        # and reading `f_globals` none: only a frame on the globals of the target's functions
        # can run their code, so no other frame's code is read (the runner's own calls
        # before the test's, and the test's own).
        if spaces is not None:
            here = frame.f_globals
            for space in spaces:
                if here is space:
                    break
            else:
                return
        if frame.f_code in target_codes:
            called[0] = True
            settrace(None)

    modules, spec_errors, scopes, tmp_root, channel, invocation, known = state

    def new_tmp_dir():
        return _shared_dir(tmp_root)

    status, message, reason, fixtures = "pass", "", None, []
    failure_types = (AssertionError,)
    framework = invocation != "direct"
    # pytest's warning filters around each test (its set-up, call and tear-down, and the
    # collection that loads the spec): DeprecationWarning and PendingDeprecationWarning shown
    # always, what is shown recorded rather than printed, the registries afresh per test.
    caught = warnings_caught(record=True) if framework else None
    sys.settrace(tracer)
    try:
        if caught is not None:
            caught.__enter__()
            add_filter("always", category=DeprecationWarning)
            add_filter("always", category=PendingDeprecationWarning)
        namespace = _load_spec(item["spec"], tests, module, modules, spec_errors, not framework)
        cls = class_at(namespace, item["cls"]) if item["kind"] in ("class", "unittest") else None
        if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
            failure_types = (AssertionError, cls.failureException)
        # A block ran when its spec loaded.
        if item["kind"] != "block" and not framework:
            run_direct(namespace, item)
        elif framework:
            # Tests the spec's code made while it ran (no reading of its syntax tree finds
            # them) run with its last item, so that a spec whose tests are all made so never
            # passes as a block that only loaded them.
            made = [test for test in collect(namespace) if test not in known.get(item["spec"], ())] \
                if item["last_of_spec"] else []
            if item["kind"] != "block" or made:
                def run():
                    enter_scopes(namespace, item, scopes)
                    if item["kind"] == "function":
                        run_test_function(namespace, item["function"], new_tmp_dir, fixtures)
                    elif isinstance(cls, type) and issubclass(cls, unittest.TestCase):
                        run_unittest(cls, item["function"], namespace, new_tmp_dir, fixtures)
                    elif item["kind"] != "block":  # a `class Test*`, or a base merely named *TestCase
                        run_test_class(cls, item["function"], new_tmp_dir, fixtures)
                    run_collected(namespace, made, new_tmp_dir, fixtures)

                then_clean_up(run, lambda: leave_scopes(namespace, item, scopes, item["last_of_class"],
                                                        item["last_of_spec"]))
        for undo in fixtures:
            undo()
    except BaseException as error:
        for undo in fixtures:
            try:
                undo()
            except BaseException:
                pass
        try:
            if isinstance(error, unittest.SkipTest) or _is_pytest_skip(error):
                status, message, reason = "error", f"skipped: {error}", "skipped"
            elif framework and _xfailed_by_the_tests(error, target_codes):
                status, message, reason = "pass", f"xfailed: {error}", None
            else:
                (status, reason), message = _status_of(error, failure_types), _describe(error)
        except BaseException:
            status, message, reason = "error", "the test's exception could not be classified", "exception"
    finally:
        sys.settrace(None)
        if caught is not None:
            try:
                caught.__exit__(None, None, None)
            except BaseException:
                pass
    problem = channel.take_problem() if channel is not None else None
    if problem is not None:  # even when the test caught it: that call was never checked
        status, reason, message = "error", problem[0], problem[1]
    box.append((status, message, called[0] if target_codes else None, reason))


def _runner_identity(runner_globals):
    """This runner's globals by identity, and its functions ({id: "the runner's NAME"}), as
    `_snapshot`: the integrity checks' first look, since a patched check could vouch for
    anything."""
    names = tuple(name for name in runner_globals if name not in _VOLATILE)
    functions = {owner: f"the runner's {name}" for name in names
                 if (owner := _code_owner(runner_globals[name])) is not None}
    return names, tuple(map(runner_globals.get, names)), functions, _versions((runner_globals,))


def execute_sample(config, result_fd):
    """Run one sample's program and tests, report on `result_fd`, then end the process.

    Called in a process that exists for this sample only (a fresh interpreter, or a child
    forked from the fork server), so nothing the sample does survives it.

    Sample code runs only in worker threads. This thread keeps the per-execution key, the
    item list and the result pipe in frames that no worker's stack leads to, checks each
    outcome's shape and the testing machinery's integrity, and writes the records with
    functions bound before any sample code existed.
    """
    project = config.get("project")
    if project is not None and project["tests"]:  # a project's own tests, run by its pytest
        knowbench_project.run(config, result_fd, _set_limits, _drop_privileges, _confine)
    if project is not None:  # a program run in a project's copy (no project tests)
        knowbench_project.enter(project)
    nonce = config["nonce"]
    items = [dict(item) for item in config["items"]]
    compiled, program_code = _precompiled(config.get("compiled"))
    tests = {name: (source, compiled.get(name)) for name, source in config["tests"].items()}
    write, exit_now, monotonic, getpid = os.write, os._exit, time.monotonic, os.getpid
    copy_context = contextvars.copy_context
    end_code = _end_code
    start_thread, new_lock = _thread.start_new_thread, _thread.allocate_lock
    quote = json.encoder.encode_basestring_ascii
    float_text, int_text = float.__repr__, int.__repr__
    type_of, str_type, float_type, bool_type, tuple_type = type, str, float, bool, tuple
    none_type = type(None)
    length, statuses, reasons, changed = len, _STATUSES, _REASONS, _changed
    stdout, stderr = sys.stdout, sys.stderr
    runner_globals = globals()
    modules_now = sys.modules
    # A reference's run (`report_imports`): the modules there were before it, to tell the
    # engine which library modules it imported (`_library_imports`).
    arrived = frozenset(modules_now) if config.get("report_imports") else None

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

    jobs, worker = [], [None, None]  # the job handed over; (the process, the worker's go)
    # The worker's context after its last job: a process forked for one item (`direct`) starts
    # its own worker in a copy, so what the program's loading set there (the `decimal`
    # context, numpy's error state) holds in the item, as in one script.
    after_jobs = [None]
    forks_items = config.get("invocation") == "direct"

    def run_job(job, args, box):
        try:
            job(*args, box)
        except BaseException:  # no outcome in the box: the caller sees None
            pass

    def serve_jobs(go):
        """The worker thread: runs each job handed over, in turn, until the process ends."""
        while True:
            go.acquire()
            if not jobs:  # woken by sample code, not by a hand-over
                continue
            job, args, box, finished = jobs.pop()
            run_job(job, args, box)
            if forks_items:
                after_jobs[0] = copy_context()
            try:
                finished.release()
            except RuntimeError:  # sample code that found the lock released it already
                pass

    def in_worker(job, *args):
        """Run `job(*args, box)` on the sample's worker thread; its one well-formed outcome,
        or None. One worker per process (started on first use, and again in a process forked
        for one item), so that the program and every test run on one thread, as under
        unittest and pytest: what they keep per thread or per context (the `decimal`
        context, `threading.local`, numpy's error state) holds from the program's loading
        and a set-up hook into later tests. Sample code never runs on this thread's stack.
        Split, no code of the candidate's runs in this process at all: the jobs run here, on
        the main thread, where unittest and pytest run tests (`signal.signal` works)."""
        box = []
        if split:
            run_job(job, args, box)
        else:
            if worker[0] != getpid():
                go = new_lock()
                go.acquire()
                if after_jobs[0] is None:
                    start_thread(serve_jobs, (go,))
                else:
                    start_thread(after_jobs[0].run, (serve_jobs, go))
                worker[:] = [getpid(), go]
            finished = new_lock()
            finished.acquire()
            jobs[:] = [(job, args, box, finished)]
            try:
                worker[1].release()
            except RuntimeError:  # sample code released it already: the worker is awake
                pass
            finished.acquire()
        if length(box) != 1 or type_of(box[0]) is not tuple_type or length(box[0]) != 4:
            return None
        return box[0]

    replaced_code = []  # what the audit hook saw get new code or defaults, of what is watched
    spec_function, surface_changed = _SPEC_FUNCTIONS.get, _surface_changed

    def audit(event, args):
        if event in _GUARDED_AUDIT_EVENTS:
            raise RuntimeError(f"{event} is not allowed inside the knowbench sandbox")
        # (A function hashes by identity: looking one up runs no code of the sample's.)
        if (event == "object.__setattr__" and args[1] in _FUNCTION_PARTS
                and type_of(args[0]) is function_type):
            name = watched_function(args[0]) or spec_function(args[0])
            if name is not None:
                replaced_code.append(f"the {_FUNCTION_PARTS[args[1]]} of {name}")

    fork, wait_for, exit_code_of, cpu_used, limit_cpu = os.fork, os.waitpid, _exit_code, _cpu_used, _limit_cpu
    SIGXCPU, SIGPROF = signal.SIGXCPU, signal.SIGPROF
    split = _SPLIT[0] = config.get("channel_fd") is not None
    spy, spy_error = _prepare_spy(config.get("spy"), split)
    # read now: sample code could later give the Spy class properties that answer otherwise
    spy_api, spy_required, take_calls = (spy.api, spy.required, spy.take) if spy is not None else (None, False, None)
    spy_targets, spy_install = ((spy.original, spy.replacement, spy.owner, spy.leaf), knowbench_spy.install) \
        if spy is not None and spy.rebind else ((), None)
    # Split, no candidate code runs in this process: there is nothing to watch. In-process,
    # a fork server took the snapshot before forking (same objects, same ids in the child).
    imported = _import_test_modules(config.get("test_imports", ()))
    if split:
        _share_tempfile()  # (before the patches the tests make are watched: these are not theirs)
        _guard_writes(config.get("candidate_uid"))
        knowbench_split.watch_patches(imports=True)  # before any test: patches they make are seen
    taken, helper_names, helper_values, helper_functions, helper_versions = _SERVER_SNAPSHOT[0], *(
        _SERVER_IDENTITY[0] or _runner_identity(runner_globals))
    if split:
        snapshot = _NOTHING_WATCHED
    elif imported or taken is None or _SERVER_WATCHED[0][0] != frozenset(_watched_names()):
        snapshot = _snapshot()  # none taken, or the tests' imports or the sample's preload changed what to watch
    else:
        snapshot = taken
    every, in_turn, same, missing, again = all, map, _IS, _MISSING, itertools.repeat
    function_type = types.FunctionType
    watched_function = (_SERVER_WATCHED[0][1] if snapshot is taken and _SERVER_IDENTITY[0] is not None
                        else {**snapshot[2], **helper_functions}).get
    _set_limits(config["limits"], config.get("nproc_base"))
    _drop_privileges(config.get("uid"), config.get("gid"))
    # No tracing of the server's init (`serve`), no keyrings, no user namespace of its own.
    _confine()
    sys.addaudithook(audit)
    tmp_root = _shared_dir(os.getcwd(), prefix="tmp_path-")


    def integrity_problem():
        if split:
            return None
        # The runner's own functions first, inline: `changed` itself could have been patched.
        # (Their dict's version tag unchanged: no name in it was rebound, nothing to compare.)
        if ((helper_versions is None or tuple_type(in_turn(*helper_versions[:2])) != helper_versions[2])
                and not every(in_turn(same, in_turn(runner_globals.get, helper_names, again(missing)),
                                      helper_values))):
            for name, value in zip(helper_names, helper_values):  # noqa: B905
                if runner_globals.get(name, missing) is not value:
                    return f"the runner's {name} was replaced"
        if replaced_code:
            return f"{replaced_code[0]} was replaced"
        return changed(snapshot, modules_now) or surface_changed()

    def fail_all(start, status, message, reason):
        for item in items[start:]:
            report({"item": item["id"], "status": status, "message": message, "duration_s": 0.0,
                    "reason": reason})

    def finish():
        # `done` is the last word: a fork server replies as soon as it arrives. Split, the
        # candidate's process is told first that no call will follow, so that it ends now
        # and not once this process is gone.
        try:
            try:
                if hang_up[0] is not None:
                    hang_up[0]()
                stdout.flush()
                stderr.flush()
                if arrived is not None:
                    report({"imported": " ".join(_library_imports(arrived))})
            finally:
                report({"done": True})
        finally:
            exit_now(end_code(config))

    hang_up = [None]
    if spy_error is not None:
        fail_all(0, "error", spy_error, "test-code-failed")
        finish()
    channel = None
    if split:
        known = config.get("program_packages")  # the engine parsed the program once
        resolver = knowbench_wire.Resolver(allowed_modules=frozenset(known) if type(known) is list
                                           else _program_packages(config["program"], config.get("graft")),
                                           functions=False)
        channel = knowbench_split.Channel(config["channel_fd"], resolver)
        hang_up[0] = channel.hang_up
    loaded = in_worker(_load_program, config["program"], config.get("entry_point"), channel, config.get("graft"),
                       program_code)
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
    if channel is not None:
        knowbench_split.watch_rebinds(config.get("rebinds"), module.__dict__, config.get("entry_point"))
    if spy_install is not None:
        in_worker(spy_install, *spy_targets, module.__dict__)
    known = {}  # spec -> the (class, function) of each of its items: what the runner was sent
    for item in items:
        known.setdefault(item["spec"], set()).add((item["cls"], item["function"]))
    state = ({}, {}, {}, tmp_root, channel, config.get("invocation", "framework"), known)

    def run_here(index, item):
        """Run one item in this process and report it; False when it tampered (the run stops)."""
        report({"start": item["id"]})
        started = monotonic()
        if take_calls is not None:
            take_calls()  # calls made outside a test (another test's leftovers) do not count
        outcome = in_worker(_run_item, dict(item), tests, module, target_codes, state)
        api_calls = take_calls() if take_calls is not None else None
        problem = integrity_problem()
        if problem is not None:
            report({"item": item["id"], "status": "error", "duration_s": monotonic() - started,
                    "message": f"tampering detected: {problem}", "reason": "tampering"})
            return False
        status, message, called, reason = outcome if outcome is not None else (None, None, None, None)
        # A pass carries no reason; anything else one of the worker's reasons.
        if (type_of(status) is not str_type or status not in statuses
                or type_of(message) is not str_type or type_of(called) not in (bool_type, none_type)
                or (reason is not None if status == "pass"
                    else type_of(reason) is not str_type or reason not in reasons)):
            status, message, called, reason = "error", "the test tampered with its own outcome", None, "tampering"
        fields = {"item": item["id"], "status": status, "message": message,
                  "duration_s": monotonic() - started, "called": called, "reason": reason}
        if api_calls is not None:
            fields["api_calls"], fields["api_bound"] = api_calls
            if spy_required and status == "pass" and api_calls[0] == 0:
                fields["status"], fields["reason"] = "fail", "assertion"
                fields["message"] = f"the target API {spy_api} was not called during this test"
        report(fields)
        return True

    def run_alone(index, item):
        """Run one item in a fresh copy of this process (forked: the program stays loaded),
        within what is left of the sample's CPU time. False when the run must stop."""
        started = monotonic()
        cpu_left = config["limits"]["cpu_s"] - cpu_used()
        try:
            pid = fork()
        except OSError as error:  # the sample's process budget is spent (it left processes behind)
            report({"item": item["id"], "status": "error", "duration_s": monotonic() - started,
                    "reason": "exited-early", "message": f"no process could be started for this test ({error})"})
            return True
        if pid == 0:
            try:
                limit_cpu(cpu_left)
                if channel is not None:
                    channel.fork_candidate()
                run_here(index, item)
                left_busy = channel is not None and channel.stale
                if channel is not None and not left_busy:
                    channel.end_candidate()
                stdout.flush()
                stderr.flush()
                exit_now(_LEFT_BUSY_EXIT if left_busy else 0)  # reported
            finally:
                exit_now(70)  # could not run or report it (no thread could be started, ...)
        code = exit_code_of(wait_for(pid, 0)[1])
        if code == 0:
            return True
        if split and code == _LEFT_BUSY_EXIT:  # (no code of the candidate's runs in this process)
            # Its copy of the candidate is still answering an interrupted call, and only the
            # judge's end of the channel is ours: that copy cannot be ended from here.
            fail_all(index + 1, "error", "not run: a call of an earlier test was interrupted before the "
                     "candidate's process answered it, so that process cannot answer another test", "interrupted")
            return False
        out_of_cpu = code in (-SIGXCPU, -SIGPROF)
        report({"item": item["id"], "status": "timeout" if out_of_cpu else "error",
                "duration_s": monotonic() - started, "reason": "cpu-time" if out_of_cpu else "exited-early",
                "message": "the sample's CPU time ran out during this test" if out_of_cpu
                else f"the test's process ended during this test ({_ending(code)})"})
        if split:  # it may have left a reply of the candidate unread on the channel
            fail_all(index + 1, "error", "not run: an earlier test's process ended while the "
                     "candidate may have been answering it", "not-run")
            return False
        return True

    for index, item in enumerate(items):
        following = items[index + 1] if index + 1 < length(items) else {}
        item["last_of_spec"] = following.get("spec") != item["spec"]
        item["last_of_class"] = item["last_of_spec"] or following.get("cls") != item["cls"]
        if state[5] == "direct":
            if not run_alone(index, item):
                break
        elif not run_here(index, item):
            fail_all(index + 1, "error", "not run: an earlier test tampered with the runner", "not-run")
            break
    finish()


def _prepare_spy(wanted, split):
    """(the sample's target-API spy or None, why it could not be made or None); runs before
    any sample code, and installs the spy's audit hook. Split, the target is called in the
    candidate's process, which cannot report calls: no spy."""
    if not wanted or split:
        return None, None
    try:
        spy = knowbench_spy.Spy(wanted["api"], bool(wanted.get("required")))
    except Exception as error:
        return None, f"the target API {wanted['api']} could not be found for its spy:\n{_describe(error)}"
    sys.addaudithook(spy.hook)
    return spy, None


def _program_packages(program, graft=None):
    """Top-level packages the benchmark's own program imports, and the one its target is
    grafted into: the libraries whose classes may be rebuilt from the candidate's replies
    (see knowbench_wire.Resolver)."""
    import ast

    names = {graft.partition(".")[0]} if type(graft) is str and graft else set()
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return frozenset(names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return frozenset(names)


def run_candidate(config, channel_fd):
    """The candidate's process (split): load its program, then answer the judge's calls.

    It gets no nonce, no tests and no result pipe: only the program and the channel.
    """
    _CANDIDATE_CONFIG[0] = config
    # A reference's run (`report_imports`): the modules there were before its program, to
    # tell the engine with its end which library modules it imported (`_candidate_end`).
    _CANDIDATE_ARRIVED[0] = frozenset(sys.modules) if config.get("report_imports") else None
    _set_limits(config["limits"], config.get("nproc_base"))
    _drop_privileges(config.get("uid"), config.get("gid"))
    _confine("candidate")  # no links or FIFOs in the work dir the judge reads
    program = config["program"]
    module = _new_solution_module(program)
    try:
        exec(compile(program, "solution.py", "exec"), module.__dict__)
        if config.get("graft"):
            knowbench_graft.graft(module.__dict__, config.get("entry_point") or "", config["graft"])
    except BaseException as error:
        status = "memory" if isinstance(error, MemoryError) else "error"
        try:
            knowbench_split.send_frame(channel_fd, knowbench_wire.dumps(
                ("failed", status, _describe(error))))
        finally:
            _flush_and_exit()
    knowbench_split.send_frame(channel_fd, knowbench_wire.dumps(("loaded", knowbench_split.logging_state())))
    cpu_s = config["limits"]["cpu_s"]
    knowbench_split.serve_calls(module, channel_fd, config["limits"]["output_bytes"],
                                fork_limits=(lambda: cpu_s - _cpu_used(), _limit_cpu))
    _flush_and_exit()


# A fork server's candidate: (the result pipe, the process that may write `done` on it). The
# candidate reports nothing there but its end, so that the server need not wait for its exit.
_CANDIDATE_DONE = [None]
_CANDIDATE_CONFIG = [{}]
_CANDIDATE_ARRIVED = [None]  # the modules loaded as a reference's program began (`run_candidate`)
# Split, direct invocation: how a test's process ends when a call it made was interrupted.
_LEFT_BUSY_EXIT = 77
PROCESS_LIMIT_EXIT = 76  # once mode: more processes than the limit were alive as the sample ended


def _end_code(config):
    """The exit code of a one-shot runner whose sample has ended: PROCESS_LIMIT_EXIT when more
    processes than the limit are alive besides this one, else 0.

    The engine counts them every 50 ms while the sample runs; this count closes the gap after
    its last one, so that a sample that passes the limit and ends between two counts gets the
    verdict of a slower one. (A fork server counts them itself, at `done`; its requests carry
    no `processes_at_end`.) In a PID namespace every other process but its init is the
    sample's; without one, the processes below this one are.
    """
    where = config.get("processes_at_end")
    if where is None:
        return 0
    try:
        alive = _stragglers() if where == "namespace" else knowbench_memory.descendants(os.getpid())
        return PROCESS_LIMIT_EXIT if _too_many(alive, os.getpid(), config["limits"]["processes"]) else 0
    except Exception:
        return 0


def _flush_and_exit():
    try:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            if _CANDIDATE_DONE[0] is not None and _CANDIDATE_DONE[0][1] == os.getpid():
                _write_all(_CANDIDATE_DONE[0][0], _candidate_end())
    finally:
        os._exit(_end_code(_CANDIDATE_CONFIG[0]))


def _candidate_end():
    """A fork server's candidate's last records on its result pipe: the library modules it
    imported since its program began (a reference's run: `_library_imports`), then `done`."""
    end = b'{"done":true,"role":"candidate"}\n'
    if _CANDIDATE_ARRIVED[0] is None:
        return [end]
    return [(json.dumps({"imported": " ".join(_library_imports(_CANDIDATE_ARRIVED[0]))}) + "\n").encode(), end]


def _redirect_stdin():
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


_HOME_FILE_CAP = 4 * 1024 * 1024  # larger files the preload left in HOME are not kept


def _new_home(path):
    """Make `path` an empty directory only root can enter, and the process's HOME."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)  # never follows links
    os.mkdir(path, 0o700)
    os.environ["HOME"] = path


def _home_template(home):
    """What the preload left in `home` (directories, and files up to a size), as
    [(relative path, None for a directory or the file's bytes)], parents first."""
    template, total = [], 0
    for root, dirs, files in os.walk(home):
        relative = os.path.relpath(root, home)
        for name in sorted(dirs):
            template.append((os.path.normpath(os.path.join(relative, name)), None))
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > _HOME_FILE_CAP - total:
                    continue
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            total += len(data)
            template.append((os.path.normpath(os.path.join(relative, name)), data))
    return template


def _lay_out_home(home, template):
    """A fresh `home` holding what the server's preload left there (`_home_template`)."""
    _new_home(home)
    for relative, data in template:
        path = os.path.join(home, relative)
        if data is None:
            os.makedirs(path, exist_ok=True)
        else:
            with open(path, "wb") as handle:
                handle.write(data)


def _hand_over_home(home, uid, gid):
    """Give the sample's uid its home: everything in it, made as root while preloading."""
    if uid is None or os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)
    os.chown(home, uid, gid)


def main():
    """One-shot mode: the configuration on stdin, results on config["result_fd"].

    The process gets a HOME of its own in the work directory before the preload, which may
    create configuration and cache directories there, then hands it to the sample's uid.
    """
    config = json.loads(sys.stdin.buffer.read())
    _redirect_stdin()
    if config.get("diagnostics_fd") is not None:
        _hand_diagnostics(config.pop("diagnostics_fd"))
    # A fresh name, made at once (mode 0700): in split mode the work directory is shared with
    # the other process.
    home = os.environ["HOME"] = tempfile.mkdtemp(prefix=".home-", dir=os.getcwd())
    _preload(config.get("preload", []), config.get("role"))
    _hand_over_home(home, config.get("uid"), config.get("gid"))
    # Paused by the engine's boot line for the imports above. Frozen, what they built is left
    # out of the sample's collections, as in a fork server's children; on for sample code.
    gc.freeze()
    gc.enable()
    if config.get("role") == "candidate":
        run_candidate(config, config["channel_fd"])
    execute_sample(config, config["result_fd"])


def _hand_diagnostics(fd):
    """Give the engine, outside the sandbox, a socket that asks the kernel about the sockets of
    this sandbox's network namespace, on the Unix socket `fd`, and close both: its memory budget
    counts what they hold queued, and the engine cannot enter the namespace to ask. Done before
    any sample code runs, so no sample ever holds either. (The C module `_socket`, not
    `socket`: this runs once per one-shot sample, and `socket`'s enums cost 1.5-3 ms to import.)"""
    import _socket

    channel = _socket.socket(fileno=fd)
    try:
        link = knowbench_memory.diagnostics_socket()
        if link is not None:
            try:
                channel.sendmsg([b"d"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                          link.fileno().to_bytes(4, sys.byteorder))])
            finally:
                link.close()
    except OSError:
        pass
    finally:
        channel.close()


_BUDGET_POLL_S = 0.05
_RECEIPT_S = 0.005
UNSETTLED_EXIT = 75  # a fork server ends with this when a process outlived its sample's clean-up
_STDERR_TAIL_BYTES = 2048  # as engine.STDERR_TAIL_BYTES


def _last_words(error):
    """Say on stderr (fd 2, whatever the sample made of sys.stderr) why this process is about
    to end without finishing: the engine keeps the last lines for the outcome's message."""
    try:
        text = "knowbench runner: " + "".join(
            traceback.format_exception(type(error), error, error.__traceback__))
    except BaseException:
        text = f"knowbench runner: {type(error).__name__} (its message could not be formatted)\n"
    try:
        os.write(2, text[-_STDERR_TAIL_BYTES:].encode(errors="replace"))
    except OSError:
        pass


def _stragglers():
    """Processes in this sandbox other than its init, this server and its prepared children."""
    mine = {1, os.getpid(), *_SPARES, *_DYING}
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in mine]


def _too_many(processes, sample, limit):
    """Whether `processes` (live ones in the sandbox, from `_stragglers`) hold more than
    `limit` besides the sample's own process `sample`."""
    return sum(1 for other in processes if other != sample) > limit


def _clean_tmp(keep, root="/tmp"):
    """Empty `root` (the sandbox's private /tmp) except the path `keep`, on its own device only.

    Entries on another device are mount points (the work directory, an interpreter that lives
    under /tmp on the host): they are never entered, so cleaning does not try, and fail, to
    unlink every file of a read-only tree. Symlinks are removed, never followed; directories
    are entered through descriptors opened with O_NOFOLLOW and checked to be the entry that
    was inspected, so a process the sample left behind cannot redirect the walk elsewhere.
    Walks iteratively: a deeply nested tree cannot exhaust the stack.
    """
    import stat

    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    device = os.fstat(root_fd).st_dev
    # Each frame: (directory fd, its names not yet handled, its name in the parent frame).
    stack = [(root_fd, _listdir(root_fd, skip=os.path.relpath(keep, root)), None)]
    while stack:
        dir_fd, names, name_in_parent = stack[-1]
        if not names:
            stack.pop()
            os.close(dir_fd)
            if stack and name_in_parent is not None:
                try:
                    os.rmdir(name_in_parent, dir_fd=stack[-1][0])
                except OSError:
                    pass  # holds a mount point (bwrap made it as a mount's parent)
            continue
        name = names.pop()
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if info.st_dev != device:
            continue  # a mount point: not ours to empty
        if not stat.S_ISDIR(info.st_mode):
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass
            continue
        try:
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        except OSError:
            continue
        opened = os.fstat(child)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            os.close(child)  # replaced since it was inspected
            continue
        stack.append((child, _listdir(child), name))


def _listdir(dir_fd, skip=None):
    """The names in directory `dir_fd` (a descriptor or a path) except `skip`; none when it
    cannot be read."""
    try:
        return [name for name in os.listdir(dir_fd) if name != skip]
    except OSError:
        return []


class _Prepared:
    """A child forked ahead of its sample (`_prepare`), waiting for the request on `requests`;
    `workdir` is the directory the server made for its sample at the hand-over (None when the
    engine made it)."""

    __slots__ = ("err_read", "out_read", "pid", "requests", "result_read", "workdir")

    def __init__(self, pid, requests, result_read, out_read, err_read):
        self.pid, self.workdir, self.requests = pid, None, requests
        self.result_read, self.out_read, self.err_read = result_read, out_read, err_read

    def descriptors(self):
        """The server's ends of this child's pipes and socket that are still open."""
        fds = (self.result_read, self.out_read, self.err_read, self.requests.fileno())
        return tuple(fd for fd in fds if fd >= 0)


# Prepared children not yet handed a sample, and ended samples' processes not yet reaped (the
# exit of a large address space takes milliseconds; nobody waits for it): the server's own,
# never counted as a sample's.
_SPARES = set()
_DYING = set()


def _prepare(control_out, setup, busy=None):
    """Fork the next sample's process before its request exists.

    The server forks it while the previous sample (`busy`, whose descriptors it closes) runs,
    from a server that no longer holds that sample's request. Everything that does not
    depend on the request happens here, off the sample's clock: the fork, the pipes, and,
    where the checks cannot read dict version tags (`_versions`), the first touch of the
    pages they read (after a fork every object whose reference count they move is copied). The child then waits for its request
    (and the work directory the server made, or, split, the channel's descriptor) on a
    socket of its own, lays out its HOME (the previous sample's is gone by then), and
    becomes the sample.
    """
    import socket

    requests, theirs = socket.socketpair()
    result_read, result_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    _flush_streams()  # (to /dev/null): what the server's imports printed is not the sample's
    pid = os.fork()
    if pid == 0:  # the child: becomes the sample
        try:
            requests.close()
            link = _SERVER_LINK[0]
            for fd in (result_read, out_read, err_read, control_out, setup.get("fd_socket"),
                       link.detach() if link is not None else None,
                       *(busy.descriptors() if busy is not None else ())):
                if fd is not None:
                    os.close(fd)
            os.setsid()
            _redirect_stdin()
            os.dup2(out_write, 1)
            os.dup2(err_write, 2)
            os.close(out_write)
            os.close(err_write)
            _own_streams()
            if setup.get("role") != "candidate":
                _warm_up()
            request, workdir, channel_fd = _receive_request(theirs)
            try:
                theirs.send(b"\0")  # the server forks the next process once this one runs
            except OSError:
                pass  # it stopped waiting for this one
            theirs.close()
            # At the path the server's preload saw as HOME: what it worked out from HOME
            # (a library's config and cache directories) is this sample's, writable.
            _lay_out_home(setup["home"], setup["home_template"])
            if request.get("workdir") is None:
                if request.get("uid") is not None:
                    os.chown(workdir, request["uid"], request["gid"])
            else:
                workdir = request["workdir"]
            os.chdir(workdir)
            os.environ["TMPDIR"] = workdir
            tempfile.tempdir = None
            _preload(request.get("preload", []), setup.get("role"))
            _hand_over_home(setup["home"], request.get("uid"), request.get("gid"))
            if setup.get("role") == "candidate":
                _CANDIDATE_DONE[0] = (result_write, os.getpid())
                run_candidate(request, channel_fd)
            else:
                request["channel_fd"] = channel_fd
                execute_sample(request, result_write)
        except BaseException as error:
            _last_words(error)
        finally:
            os._exit(70)
    for fd in (result_write, out_write, err_write):
        os.close(fd)
    theirs.close()
    _SPARES.add(pid)
    return _Prepared(pid, requests, result_read, out_read, err_read)


def _flush_streams():
    """Flush every stream a sample's process may write through: `sys.stdout` and
    `sys.stderr`, and the interpreter's own (`_own_streams`), which a preloaded library may
    have printed to before replacing `sys.stdout`."""
    seen = []
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if any(stream is other for other in seen):
            continue
        seen.append(stream)
        try:
            stream.flush()
        except BaseException:  # (a library's replacement, or None)
            pass


def _own_streams():
    """Make the sample's `sys.stdout` and `sys.stderr` the interpreter's own streams (now on
    the sample's pipes, fds 1 and 2), as in any Python process: `sys.__stdout__` itself, with
    the error handlers and buffering the interpreter chose (stderr line-buffered, writing
    what it cannot encode as backslash escapes). New ones only where those are not on fd 1
    and 2. Reusing them also spares the child building two streams on copied pages."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        own = getattr(sys, f"__{name}__")
        try:
            reusable = own is not None and own.fileno() == fd
        except (AttributeError, OSError, ValueError):
            reusable = False
        setattr(sys, name, own if reusable else open(fd, "w", closefd=False))


def _warm_up():
    """Do once, in a prepared child, what a sample's first integrity check does to memory
    where the checks compare every value (`_versions`: without version tags)."""
    taken = _SERVER_SNAPSHOT[0]
    if taken is not None and taken[5] is None:
        _changed(taken, sys.modules)
    names, values, _, versions = _SERVER_IDENTITY[0]
    if versions is None:
        all(map(_IS, map(globals().get, names, itertools.repeat(_MISSING)), values))


def _send_request(sock, data, workdir, channel_fd):
    """Hand a prepared child its request: a length, the work directory the server made (empty
    when the engine made one), a NUL, the JSON as the engine sent it (`data`, sent from the
    buffer it was read into: no copy of it is made here), and the channel's descriptor."""
    import socket

    prefix = (workdir or "").encode() + b"\0"
    header = (len(prefix) + len(data)).to_bytes(8, "big") + prefix
    if channel_fd is None:
        sock.sendall(header)
    else:
        socket.send_fds(sock, [header], [channel_fd])
    sock.sendall(data)


def _receive_request(sock):
    """The prepared child's side of `_send_request`; ends the process when the server is gone."""
    import socket

    header, fds = b"", []
    while len(header) < 8:
        chunk, new_fds, _, _ = socket.recv_fds(sock, 8 - len(header), 1)
        if not chunk:
            os._exit(0)  # the server went away before it had a sample for this process
        header += chunk
        fds.extend(new_fds)
    size = int.from_bytes(header, "big")
    parts, received = [], 0
    while received < size:
        chunk = sock.recv(min(size - received, 1 << 20))
        if not chunk:
            os._exit(0)
        parts.append(chunk)
        received += len(chunk)
    workdir, _, data = b"".join(parts).partition(b"\0")
    return json.loads(data), (workdir.decode() or None), (fds[0] if fds else None)


def _read_frame(fd):
    """The next message from the engine on `fd` (None, None at its end): what the server reads
    of it (a dict) and, for a sample, the request as the sample's process gets it, in a buffer
    of its own (a bytearray) that the server zeroes once the process has it.

    A message is a length (8 bytes), that much JSON, and as many more bytes as its
    `payload_bytes` says. The request's bytes never pass through a buffered reader, a parser or
    a copy here: every process the server forks later starts from its memory, and what the
    server freed of a request (an earlier sample's program, its tests) would still be there to
    read with `ctypes`.
    """
    head = _read_exact(fd, 8)
    body = _read_exact(fd, int.from_bytes(head, "big")) if head is not None else None
    if body is None:
        return None, None
    message = json.loads(bytes(body))
    payload = _read_exact(fd, message.pop("payload_bytes", 0))
    return (message, payload) if payload is not None else (None, None)


def _read_exact(fd, size):
    """`size` bytes from `fd`, read straight into a new bytearray; None at the end of input."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    done = 0
    while done < size:
        got = os.readv(fd, [view[done:]])
        if not got:
            return None
        done += got
    view.release()
    return buffer


def _finished(chunk, size):
    """Whether a chunk of the result pipe (its first `size` bytes) ends with the runner's last
    record (`done`)."""
    if not chunk.endswith(b"}\n", 0, size):
        return False
    start = chunk.rfind(b"\n", 0, size - 1) + 1
    return chunk.startswith(b'{"done":true,', start, size)


# Where the server reads what a sample's processes write (allocated once: `_serve_one`).
_SCRATCH = [None]
_READ_BYTES = 65536


def _write_all(fd, buffers):
    """Write `buffers` (bytes-like) to `fd` in order, whatever the pipe takes at a time."""
    views = [memoryview(buffer) for buffer in buffers if len(buffer)]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]


def _zero(buffers):
    """Overwrite bytearrays the server no longer needs: what they held would otherwise stay in
    memory the next sample's process starts from."""
    for buffer in buffers:
        buffer[:] = bytes(len(buffer))


def _keep(store, data, limit=None):
    """Append `data` (bytes-like) to `store`, [a bytearray, how much of it is used]; with
    `limit`, keep only its last `limit` bytes. A bytearray outgrown is copied into a larger one
    and zeroed, never left to the allocator with what it held (as growing it in place would)."""
    buffer, used = store
    need = used + len(data)
    if limit is not None and need > limit:
        older = max(0, limit - len(data))
        bigger = bytearray(limit)
        bigger[:older] = memoryview(buffer)[used - older:used]
        bigger[older:] = memoryview(data)[len(data) - (limit - older):]
        _zero([buffer])
        store[:] = [bigger, limit]
    elif need > len(buffer):
        bigger = bytearray(max(need, 2 * len(buffer), 4096))
        bigger[:used] = memoryview(buffer)[:used]
        bigger[used:need] = data
        _zero([buffer])
        store[:] = [bigger, need]
    else:
        buffer[used:need] = data
        store[1] = need


def _hand_over(payload, request, prepared, control_out, base, setup, channel_fd=None):
    """Give the prepared child its request (`payload`; `request` is what the server reads of
    it) and the sample's work directory; returns (the
    child that has it, when it got it). A prepared child that died (a process of the previous
    sample with the same uid could kill it) is replaced by a fresh one; one that was stopped
    is woken."""
    import select
    import signal

    if request.get("workdir") is None:
        # On bwrap's private tmpfs, creating and deleting the sample's files costs nothing.
        # A split sample's directory is made by the engine, shared by judge and candidate.
        prepared.workdir = _shared_dir("/tmp" if setup.get("private_tmp") else base, prefix="sample-")
    for last_try in (False, True):
        _SPARES.discard(prepared.pid)
        started = time.monotonic()
        try:
            os.kill(prepared.pid, signal.SIGCONT)
            _send_request(prepared.requests, payload, prepared.workdir, channel_fd)
            # Until the child says it has the request (at most a few ms): a fork by the
            # server right after waking it could keep it waiting for this core. An end of
            # file instead: it died before it got it.
            if (select.select([prepared.requests], [], [], _RECEIPT_S)[0]
                    and not prepared.requests.recv(1)):
                raise OSError("the prepared process died")
            break
        except OSError:
            if last_try:
                break  # this one died too: its exit is seen while it is supervised
            _discard(prepared)
            workdir, prepared = prepared.workdir, _prepare(control_out, setup)
            prepared.workdir = workdir
    prepared.requests.close()
    if channel_fd is not None:
        os.close(channel_fd)
    return prepared, started


def _reap():
    """Reap the ended samples' processes that have finished exiting, without waiting."""
    for pid in list(_DYING):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        _DYING.discard(pid)


def _discard(prepared):
    """End a prepared child that will never get a sample, and close the server's ends."""
    import signal

    try:
        os.kill(prepared.pid, signal.SIGKILL)
        os.waitpid(prepared.pid, 0)
    except OSError:
        pass
    prepared.requests.close()
    for fd in (prepared.result_read, prepared.out_read, prepared.err_read):
        os.close(fd)


def _serve_one(limits, budget, prepared, started, control_out, base, setup):
    """Run one sample in the prepared child, within its wall clock, and report to the engine.

    The child's output comes back through pipes, never through files in a directory the
    sample can write (it could replace them with a symlink to a root-only file, or a FIFO).
    The child got its request at `started` (`_hand_over`); `limits` are the request's,
    `budget` its memory budget (`knowbench_memory.Budget`, taken before the hand-over).
    The reply leaves as soon as the runner's last record (`done`) has arrived: the sample's
    processes are killed and counted first, and what is left to clean (its files, /tmp, the
    exit of its process) happens after the reply, before the next request is taken.
    Returns (whether nothing outlived the sample, its pid when that is still to be reaped).
    """
    import select
    import signal

    pid = prepared.pid
    result_read, out_read, err_read = prepared.result_read, prepared.out_read, prepared.err_read
    deadline = started + limits["wall_s"]
    cap = limits["output_bytes"]
    caps = {result_read: 16 * 1024 * 1024, out_read: cap, err_read: cap}
    # What the sample's processes wrote is read into one buffer of the server's and kept in
    # bytearrays of its own (`_keep`), never in bytes, strings or JSON: each is zeroed once the
    # reply is out, so that none of it is left in memory a later sample's process starts from.
    if _SCRATCH[0] is None:
        _SCRATCH[0] = bytearray(_READ_BYTES)
    scratch = memoryview(_SCRATCH[0])
    kept = {result_read: [bytearray(), 0], out_read: [bytearray(), 0], err_read: [bytearray(), 0]}
    tail = [bytearray(), 0]  # stderr's end, past the cap too: what a process that ends early said last
    done = [False]

    def drain(fd):
        """Read what is there; False at end of file or, non-blocking, when nothing is left."""
        try:
            got = os.readv(fd, [scratch])
        except BlockingIOError:
            return False
        if not got:
            return False
        if fd == result_read and _finished(_SCRATCH[0], got):
            done[0] = True
        room = caps[fd] - kept[fd][1]
        if room > 0:
            _keep(kept[fd], scratch[:min(got, room)])
        if fd == err_read:
            _keep(tail, scratch[:got], _STDERR_TAIL_BYTES)
        scratch[:got] = bytes(got)
        return True

    timed_out, over_budget, over_processes, status = False, False, False, None
    left_over_budget = False
    watch_budget = setup.get("namespaces")
    next_poll = started + _BUDGET_POLL_S
    # Wait for the runner's last record, the sample process to end (end-of-file alone is not
    # enough: a process it started may hold the pipes open, or it may close them and go on)
    # or the wall clock to run out. A pidfd becomes readable when the process ends.
    pidfd = os.pidfd_open(pid)
    watched = [result_read, out_read, err_read, pidfd]
    while status is None and not done[0]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        # Polled every 50 ms from the start on: a sample that ends sooner pays nothing for it.
        if watch_budget and time.monotonic() >= next_poll:
            next_poll = time.monotonic() + _BUDGET_POLL_S
            processes = _stragglers()  # the sample's process and every one it started
            if _too_many(processes, pid, limits["processes"]):
                over_processes = True
                break
            if budget.exceeded(processes):
                over_budget = True
                break
        ready, _, _ = select.select(watched, [], [], min(remaining, _BUDGET_POLL_S))
        for fd in ready:
            if fd == pidfd:
                _, status = os.waitpid(pid, 0)
            elif not drain(fd):
                watched.remove(fd)
    os.close(pidfd)
    # Counted once more as it ends: a sample that passed the limit and finished between two
    # counts gets the same verdict as a slower one.
    if watch_budget and not (timed_out or over_budget or over_processes):
        over_processes = _too_many(_stragglers(), pid, limits["processes"])
        # and what it left in files (its tmpfs, a host work directory), written since the
        # last count: a burst that ended before a poll is held against it too
        left_over_budget = not over_processes and budget.exceeded_at_end()
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for fd in (result_read, out_read, err_read):  # what the sample wrote just before it ended
        os.set_blocking(fd, False)
        while fd in watched and kept[fd][1] < caps[fd] and drain(fd):
            pass
        os.close(fd)
    # After `done` the runner only exits 0; otherwise its group was just killed.
    exit_code = _exit_code(status) if status is not None else (0 if done[0] else -signal.SIGKILL)

    # Its process group is dead (or dying): what else still runs escaped it.
    escaped = _escaped(pid) if setup.get("namespaces") else []
    described = [_described(straggler) for straggler in escaped[:_STRAGGLERS_DESCRIBED]]
    for straggler in escaped:
        try:
            os.kill(straggler, signal.SIGKILL)
        except OSError:
            pass
    # A JSON line of what the server found, then the bytes the sample's processes wrote, as
    # they wrote them: the engine reads and decodes them (`forkserver._Server._receive`).
    parts = (("results", kept[result_read]), ("stdout", kept[out_read]), ("stderr", kept[err_read]),
             ("stderr_tail", tail))
    reply = {"exit_code": exit_code, "timed_out": timed_out,
             "over_budget": over_budget, "over_processes": over_processes,
             "left_over_budget": left_over_budget, "memory_peak": budget.peak,
             "duration_s": time.monotonic() - started, "stragglers": len(escaped),
             "straggler_notes": described, "server_grew": _GREW[0],
             "payload_bytes": [[name, used] for name, (_, used) in parts]}
    _GREW[0] = 0
    _write_all(control_out, [(json.dumps(reply) + "\n").encode(),
                             *(memoryview(buffer)[:used] for _, (buffer, used) in parts)])
    _zero(buffer for _, (buffer, _) in parts)
    _clean_up(prepared.workdir, setup, base)
    # A server that had to kill a process outside the sample's group is replaced by the
    # engine; here, anything alive outside the killed group now is a process nothing
    # accounted for. The group itself is dying (its teardown runs on another core meanwhile):
    # the caller reaps the sample's process once the next one is forked.
    return not escaped, (pid if status is None else None)


# The sandbox's own tmpfs mounts (bwrap): emptied after every sample, counted in its budget.
_PRIVATE_TMPFS = ("/tmp", "/dev/shm")


def _clean_up(workdir, setup, base):
    """Leave nothing for the next sample: its files, /tmp, /dev/shm, its HOME and the POSIX
    message queues and System V objects of the sandbox's IPC namespace. (rmtree removes links
    and FIFOs without following or opening them.)"""
    import shutil

    if not setup.get("private_tmp"):
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(setup["home"], ignore_errors=True)
    else:
        # The work directory the server made and HOME are on the private /tmp: emptied with
        # it, by the walk that no symlink or depth can mislead (two `rmtree`s first cost
        # about 0.2 ms per sample, then found nothing left to do).
        for root in _PRIVATE_TMPFS:
            _clean_tmp(keep=base, root=root)
        for name in _listdir("/dev/mqueue"):  # (bwrap's mount of the namespace's queues)
            try:
                os.unlink("/dev/mqueue/" + name)
            except OSError:
                pass
    if setup.get("namespaces"):
        _remove_sysv_objects()


# A /proc/sysvipc file, the libc call that removes one of its objects by id, and the
# arguments after the id (IPC_RMID is 0; semctl's semaphore number comes before it).
_SYSV = (("shm", "shmctl", (0, None)), ("msg", "msgctl", (0, None)), ("sem", "semctl", (0, 0)))


def _remove_sysv_objects():
    """Remove every System V shared memory segment, message queue and semaphore set of this
    IPC namespace (the sandbox's own: only its samples made them). Each outlives the process
    that made it, holding memory no process counts, and could hand the next sample what an
    earlier one wrote."""
    libc = _libc()
    for kind, remove, after in _SYSV:
        try:
            with open("/proc/sysvipc/" + kind, "rb") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            try:
                ident = int(row.split()[1])
            except (ValueError, IndexError):
                continue
            getattr(libc, remove)(ident, *after)


def _escaped(pid):
    """Live processes in this sandbox outside the sample's process group (`pid`): ones it
    started in a session or group of their own. The group's own, killed, are dying."""
    escaped = []
    for other in _stragglers():
        fields = knowbench_memory.stat_fields(other)
        if fields is not None and fields[0] != b"Z" and int(fields[2]) != pid:
            escaped.append(other)
    return escaped


_STRAGGLERS_DESCRIBED = 5


def _described(pid):
    """A process that outlived its sample, as the engine's note names it: pid, state, process
    group, parent and command line (the sample's own text: shortened, printable only)."""
    fields = knowbench_memory.stat_fields(pid)
    if fields is None:
        return f"pid {pid} (gone)"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read(400)
    except OSError:
        command = b""
    command = "".join(c if c.isprintable() else " " for c in command.decode(errors="replace")).strip()
    if len(command) > 80:
        command = command[:77] + "..."
    return (f"pid {pid} (state {fields[0].decode()}, group {fields[2].decode()}, "
            f"parent {fields[1].decode()}): {command or '?'}")


_WARM_UP_PROGRAM = """\
def double(x):
    return [2 * v for v in x]
"""
_WARM_UP_TESTS = """\
import unittest


def test_function():
    assert double([1, 2]) == [2, 4]


class TestCases(unittest.TestCase):
    def test_method(self):
        self.assertEqual({"a": double([1]), "b": 3.5}, {"a": [2], "b": 3.5})
"""


def _warm_tests():
    """In a fork server, before its snapshot: run the path of a sample's tests (the program
    loaded, a spec loaded, collected and watched, a test function and a `unittest` method
    run, passing and failing, their exceptions described) a few times on a program and
    tests of the runner's own, so that every child forked later finds that code warm
    (quickened, caches filled) instead of writing to those pages itself: a child's first
    failure description cost about 400 copy-on-write faults cold and 235 warm. Everything it
    registers is removed again (`_forget_warm_up`); what it leaves (its classes, held by
    cycles) is garbage: the caller collects it before the snapshot."""
    name = "<knowbench warm-up>"
    items = [{"id": f"{name}::{function}", "spec": name, "cls": cls, "function": function, "kind": kind,
              "last_of_spec": last, "last_of_class": True}
             for cls, function, kind, last in ((None, "test_function", "function", False),
                                               ("TestCases", "test_method", "unittest", True))]
    # The second round loads code as the engine sends it compiled (`_precompiled`).
    sent = {"magic": _frozen_importlib_external.MAGIC_NUMBER.hex(),
            "tests": {name: binascii.b2a_base64(marshal.dumps(compile(_WARM_UP_TESTS, "test:" + name, "exec")))}}
    try:
        for program, compiled in ((_WARM_UP_PROGRAM, None), (_WARM_UP_PROGRAM.replace("2 * v", "v + v + 1"), sent)):
            codes, program_code = _precompiled(compiled)
            box = []
            _load_program(program, "double", None, None, program_code, box)
            module, target_codes = box[0][2]
            for _ in range(4):
                state = ({}, {}, {}, None, None, "framework",
                         {name: {(item["cls"], item["function"]) for item in items}})
                for item in items:
                    _run_item(item, {name: (_WARM_UP_TESTS, codes.get(name))}, module, target_codes, state, [])
                    _surface_changed()
                _forget_warm_up(name)
    finally:
        _forget_warm_up(name)


def _forget_warm_up(name):
    for registry in (_SPEC_SURFACE, _SPEC_CLASSES, _SPEC_ITEMS, _SPEC_DICTS, _SPEC_CELLS):
        registry.clear()
    _SPEC_FUNCTIONS.clear()
    _SPEC_CODE.clear()
    _XFAIL_CALLS.clear()
    forget_specs()
    for filename in (f"test:{name}", "solution.py"):
        linecache.cache.pop(filename, None)
    for module in (_SPEC_MODULE, "solution"):
        sys.modules.pop(module, None)


_RLIMITS = tuple(getattr(resource, name) for name in sorted(dir(resource)) if name.startswith("RLIMIT_"))
# The IPC namespace's limits (System V, POSIX message queues): the sandbox's own.
_IPC_LIMITS = tuple("/proc/sys/kernel/" + name for name in ("shmmax", "shmall", "shmmni", "msgmax", "msgmnb",
                                                            "msgmni", "sem")) + tuple(
    "/proc/sys/fs/mqueue/" + name for name in ("msg_max", "msgsize_max", "queues_max", "msg_default",
                                               "msgsize_default"))


_UNPRIVILEGED = [False]  # a fork server run by a user without root (`serve`)


def _inherited_state(spare):
    """What every later sample of this server inherits and a sample of knowbench's own uid (when
    it is not root) could change from outside: the resource limits of this server and of the
    process prepared for the next sample (`prlimit` needs no more than the uid), and the IPC
    namespace's limits. Compared with what it was as the server started, after each sample."""
    limits = []
    for pid in (0, spare):
        for kind in _RLIMITS:
            try:
                limits.append(resource.prlimit(pid, kind))
            except OSError:  # (a spare already gone: replaced at the hand-over)
                limits.append(None)
    values = []
    for path in _IPC_LIMITS:
        try:
            with open(path, "rb") as handle:
                values.append(handle.read())
        except OSError:
            values.append(None)
    return limits, values


def serve():
    """Fork-server mode: preload once, then one request per message on stdin (`_read_frame`),
    one JSON reply line each.

    Requests arrive from the engine only; no sample code ever runs in this process, so its
    memory stays pristine and every child starts from the same state. A request marked
    `with_fd` is followed by a file descriptor (the split channel) on the `fd_socket`.
    A server in the `candidate` role is never sent tests: its memory holds none for a
    candidate to find.
    """
    import socket

    # Run by a user without root, every process of the sandbox has that user's uid: the
    # server and the processes it prepares are made undumpable before anything (they
    # inherit it: `set_dumpable`), its samples may trace nothing, and what later samples
    # inherit is checked after each sample (`_inherited_state`). As root, samples run under
    # uids of their own, and none of this is needed.
    _UNPRIVILEGED[0] = os.geteuid() != 0
    if _UNPRIVILEGED[0]:
        _set_dumpable(False)
    # Requests and replies come on descriptors of their own (the engine's `SERVER_FDS_ENV`),
    # which the sandbox's init does not keep: they become this process's stdin and stdout.
    requests_fd, replies_fd = (int(fd) for fd in os.environ.pop("KNOWBENCH_SERVER_FDS").split(","))
    os.dup2(requests_fd, 0)
    os.dup2(replies_fd, 1)
    os.close(requests_fd)
    os.close(replies_fd)
    control_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    setup, _ = _read_frame(0)
    fd_socket = None
    if setup.get("fd_socket") is not None:
        fd_socket = socket.socket(fileno=setup["fd_socket"])
    base = os.getcwd()
    # One per server, where samples cannot make it first: on the private, size-capped /tmp
    # (emptied after every sample), else in the server's work directory, which the judge's
    # and the candidate's servers share.
    setup["home"] = ("/tmp/.home" if setup.get("private_tmp")
                     else os.path.join(base, f".home-{setup.get('role', 'judge')}"))
    _new_home(setup["home"])
    _preload(setup.get("preload", []), setup.get("role"))
    _import_library_modules(setup.get("warm"), setup.get("role"))  # (what the engine learned before this start)
    # What the runner's and the preload's imports built goes to the permanent generation now,
    # with the little garbage they left (about 900 objects, 0.2 MB, with numpy and pandas: the
    # pure-Python classes their C versions replace, import-time closures), so that the one
    # collection below walks only what the warm-ups made: over pandas's 110,000 objects it
    # cost every server start 35-43 ms. (A Python process with the collector on keeps such
    # garbage too until a full collection, which a short run seldom reaches.)
    gc.freeze()
    # The warm-ups are best effort: a speed-up, never a reason for a server not to start.
    # The libraries' first (`knowbench_warm`) before HOME's template is taken: what a library
    # caches there on first use is kept too.
    try:
        warmed = knowbench_warm.warm_up()
    except BaseException:
        warmed = []
    setup["home_template"] = _home_template(setup["home"])
    try:
        knowbench_split.warm_up()
    except BaseException:  # (the channel's CrossingFailed and CandidateGone included)
        pass
    if setup.get("role") != "candidate":
        try:
            _warm_tests()  # (it forgets what it ran, whatever happened)
        except BaseException:
            pass
        # The one collection (of what the warm-ups made, above): their class and tracebacks
        # are gone before the snapshot, and their garbage is not frozen below.
        gc.collect()
        _SERVER_SNAPSHOT[0] = _snapshot()
    else:
        knowbench_seccomp.prepare()
        gc.collect()
    knowbench_seccomp.prepare("sample")
    _SERVER_IDENTITY[0] = _runner_identity(globals())
    _note_watched()
    # Children then leave the preloaded objects' pages alone (no copy-on-write by the GC).
    gc.freeze()
    # Paused by the engine's boot line while the runner and the preload were imported (one
    # freeze and one collection above instead of passes over a growing heap): on for every
    # sample.
    gc.enable()
    # What every child starts with (the preloaded libraries' files, some of which may be
    # replaced on disk while this server lives): never a sample's to pay for.
    inherited = knowbench_memory.inherited_files()
    # The samples' filter (the candidate's, in a candidates' server), now that nothing the
    # server does needs what it denies: HOME's template holds no links, and the budget's
    # netlink socket is made first. Where that socket cannot be made now, each sample's
    # process installs the filter itself, and the budget tries again at every count.
    if setup.get("namespaces"):
        _SERVER_LINK[0] = knowbench_memory.diagnostics_socket()
    role = "candidate" if setup.get("role") == "candidate" else "sample"
    if (_SERVER_LINK[0] is not None or not setup.get("namespaces")) and knowbench_seccomp.install(role):
        _SERVER_FILTERED[0] = role
    ready = (json.dumps({"ready": True, "pid": os.getpid(), "warmed": warmed}) + "\n").encode()
    os.write(control_out, ready)
    prepared = _prepare(control_out, setup)
    inherited_state = _inherited_state(prepared.pid) if _UNPRIVILEGED[0] else None
    while True:
        request, payload = _read_frame(0)
        if request is None:
            break
        channel_fd = None
        if request.get("with_fd") and fd_socket is not None:
            _, fds, _, _ = socket.recv_fds(fd_socket, 1, 1)
            channel_fd = fds[0] if fds else None
        limits = request["limits"]
        # Before the sample starts: what it holds is measured from here. The budget covers
        # every process of the sample (in this PID namespace, all but its init and this server),
        # what it keeps on the private tmpfs mounts and in System V segments, the removed files
        # it keeps open, and what a work directory elsewhere (the engine's, on the host: a split
        # or project sample's) grows by.
        budget = knowbench_memory.Budget(limits["memory_mb"] * 1024 * 1024,
                                         _PRIVATE_TMPFS if setup.get("private_tmp") else (),
                                         request.get("workdir"), inherited=inherited,
                                         namespaces=bool(setup.get("namespaces")), link=_SERVER_LINK[0])
        prepared, started = _hand_over(payload, request, prepared, control_out, base, setup, channel_fd)
        if budget.workdir is None and prepared.workdir is not None:
            budget.watch(prepared.workdir, 0)  # made for it by `_hand_over`
        # The next sample's process is forked while this one runs, from a server that no
        # longer holds this request, nor its bytes in memory it freed: it can find no earlier
        # sample's program or tests.
        graft = request.get("graft")  # (the benchmark's: the module the task was cut from)
        warm = request.get("warm")  # (library modules the run's references imported: `_warmed`)
        _zero([payload])
        del payload, request
        spare = _prepare(control_out, setup, busy=prepared)
        settled, unreaped = _serve_one(limits, budget, prepared, started, control_out, base, setup)
        # After the reply; the next sample's process is then forked anew, and inherits the
        # files of what was imported.
        warmed = settled and _warmed(warm, setup.get("role"))
        if warm is not None:  # the engine sends no request before this line (imports take seconds)
            os.write(control_out, (json.dumps({"warmed": warmed, "server_grew": _GREW[0]}) + "\n").encode())
            _GREW[0] = 0
        if settled and (_indexed(graft) or warmed):
            spare = _prepared_again(spare, control_out, setup)
            inherited = knowbench_memory.inherited_files() if warmed else inherited
        if not settled or (inherited_state is not None and _inherited_state(spare.pid) != inherited_state):
            # Something outlived its sample, or changed what the next one inherits: end this
            # sandbox before taking another request (the engine starts a fresh one, and sends
            # that request again).
            raise SystemExit(UNSETTLED_EXIT)
        prepared = spare
        if unreaped is not None:
            _DYING.add(unreaped)
        _reap()  # the earlier samples' processes: after the reply, off the next one's path


def _warmed(names, role=None):
    """Import `names` (`Engine.warm`: library modules the run's references imported as they
    ran) where this server has not (`_import_library_modules`): every later sample finds them
    loaded, as a test finds what an earlier test imported in one pytest session (`role`: the
    server's). What to watch is then noted again (a judge's `_snapshot`), packages are indexed
    anew (`knowbench_graft.index`), and the memory this server grew by is counted
    (`_keep_growth`). Whether any module's code ran."""
    before = _resident_bytes()
    if not _import_library_modules(names, role):
        return False
    knowbench_graft.forget_indexes()
    if _SERVER_SNAPSHOT[0] is not None:
        _SERVER_SNAPSHOT[0] = _snapshot()
        _note_watched()
    _keep_growth(before)
    return True


def _note_watched():
    """What a sample's check reads of the server's snapshot and identity: the modules the
    snapshot watched, and every watched function. Read-only: this list is a module global a
    sample can reach; the dict behind the view is referenced by nothing else."""
    if _SERVER_SNAPSHOT[0] is not None:
        _SERVER_WATCHED[0] = (frozenset(name for name, *_ in _SERVER_SNAPSHOT[0][0]), types.MappingProxyType(
            {**_SERVER_SNAPSHOT[0][2], **_SERVER_IDENTITY[0][2]}))


def _indexed(graft):
    """Index the package of `graft` (a sample's installed module) where this server has loaded
    it (`knowbench_graft.index`): later samples' grafts then look the original up instead of
    walking the package. Whether an index was made now. Best effort: a library whose objects
    the walk cannot read leaves its samples walking."""
    if type(graft) is not str or not graft:
        return False
    before = _resident_bytes()
    try:
        made = knowbench_graft.index(graft.partition(".")[0])
    except BaseException:
        made = False
    if not made:
        return False
    _keep_growth(before)  # (the index: 1.7 MB for pandas, 3.3 MB for scipy)
    return True


def _keep_growth(before):
    """After the server itself built something (`_indexed`, `_warmed`): collect what that left,
    then leave the rest's pages alone, as the preload's (`gc.freeze`); and count what its
    memory grew by since `before` (resident bytes) in `_GREW`. That is the server's own
    memory, not its samples': the engine moves its cgroup's baseline by as much, told with
    the next line the server writes."""
    gc.collect()
    gc.freeze()
    after = _resident_bytes()
    if before and after > before:
        _GREW[0] += after - before


# What the server's own memory grew by since its last reply or line (`_keep_growth`).
_GREW = [0]


def _prepared_again(spare, control_out, setup):
    """A child prepared now instead of `spare`, which was forked before the server last
    changed (`_indexed`)."""
    try:
        os.kill(spare.pid, signal.SIGKILL)
    except OSError:
        pass
    for fd in (spare.result_read, spare.out_read, spare.err_read):
        os.close(fd)
    spare.requests.close()
    _SPARES.discard(spare.pid)
    _DYING.add(spare.pid)
    return _prepare(control_out, setup)


def entry(args):
    """Dispatch on the mode an engine asked for."""
    _fresh_signals()  # before any thread or process: samples inherit it
    mode = args[0] if args else "once"
    if mode == "serve":
        serve()
    elif mode == "once":
        main()
    else:
        raise SystemExit(f"unknown runner mode {mode!r}")
