"""Value codec for split execution; stdlib only at import time.

Calls from the trusted tests into the untrusted candidate cross a process boundary BY VALUE:
arguments, return values, raised exceptions and mutated arguments are encoded with `dumps` on
one side and rebuilt with `loads` on the other. No pickle, no marshal: the decoder only calls the
constructors of the value types listed below, `object.__new__`, `cls._make` (namedtuples), a
builtin struct sequence's own constructor (`time.struct_time`, `os.stat_result`),
numpy / pandas constructors, the fixed constructors and lookups of the curated library types
(gmpy2, ipaddress, pytz, dateutil.tz) and the caller's `handles` hook, and it hands out classes
and functions only through a `Resolver`, which decides which names the other side may mention.

Wire format: ASCII (hence UTF-8) JSON `["knowbench-wire", 1, ROOT]`. A node is JSON null, a
bool, a string, an int with |n| < 2**53, a finite float, or an array `[TAG, ...]`. Containers
get sequential memo ids so shared references and cycles survive: mutable ones (list, dict, set,
objects, ...) take their id before their children, immutable ones (tuple, frozenset, namedtuple,
pandas objects) after them; `["ref", id]` names an earlier one. When an immutable container is
met again while its own children are being encoded (a tuple reached through a list it contains),
its outer occurrence becomes `["cyc", id, *children]` (as pickle does): the children are decoded
for their definitions and the inner copy is the value.

Nesting is limited to MAX_DEPTH container levels in both directions (recursion, and the C JSON
parser, share the interpreter's recursion limit).

numpy and pandas are never imported by this module's encoder: their values are recognised
through `sys.modules`. The same holds for the curated library value types (gmpy2 numbers,
ipaddress objects, pytz and dateutil time zones): each has its own handler that sends a canonical
scalar form and rebuilds it with one fixed constructor or lookup of that library, never a general
`__reduce__` (calling whatever a document names, with arguments it chooses, could start e.g. a
`subprocess.Popen` on the receiving side).

Handles: callables that cannot cross by name (closures, lambdas, bound methods, partials, callable
objects that cannot cross by value) can cross as `["handle", id]` when both sides pass a `handles`
hook (`dumps(..., handles=...)` gives the id, `loads(..., handles=...)` gives the object). What a
handle stands for, and what calling it does, is the caller's policy; a decoder given no hook
refuses handle nodes, so a document cannot smuggle one in. A handle node takes the next memo id,
like a mutable container, so the same callable met again is `["ref", id]`. The hook may give
`(id, "view OP ...")` for an object that is not a function: the node is `["handle", id, "view
OP ..."]`, and the receiver's hook is called as `handles(id, view="view OP ...")` (split: a view
of the tests' object that does those operations there, see knowbench_split.RemoteView).

A handle goes back as the object it stands for: the sender's `returned(obj)` hook gives the
number the other side exported a stand-in under, and the value crosses as `["yours", id]`,
which the receiver's `own(id)` hook turns back into the object it exported (a test's object
passed to the target and returned is the test's object again, `is` included). A decoder given
no `own` hook refuses such nodes; `own` can give only what its side handed out itself.
"""

from __future__ import annotations

import array
import base64
import builtins
import collections
import datetime
import decimal
import enum
import fractions
import functools
import importlib
import io
import json
import math
import pathlib
import re
import sys
import types
import uuid
import weakref
from collections.abc import Callable, Collection

MAX_DEPTH = 300
_MAGIC, _VERSION = "knowbench-wire", 1
_SAFE_INT = 2**53  # beyond this, ints travel as hex strings (no str-digits limit, any JSON reader)
MAX_HANDLE = _SAFE_INT - 1  # the largest number a handle may have
_RE_FLAGS = re.IGNORECASE | re.LOCALE | re.MULTILINE | re.DOTALL | re.UNICODE | re.VERBOSE | re.ASCII
_HEX_INT = re.compile(r"-?[0-9a-f]+")
# mpfr values travel as base-16 text, exact whatever the rounding mode (see _mpfr_text)
_MPFR_TEXT = re.compile(r"-?(?:0\.[0-9a-f]+@-?[0-9]+|0\.0|inf|nan)")
# mpfr precisions that cross, in bits: gmpy2.mpfr(text, 1) means "as precise as the input", not
# one bit, and a huge precision in a tiny document would exhaust the receiver's memory
_MPFR_PRECISIONS = range(2, (1 << 24) + 1)
# An IANA zone key: relative, no dots, so it cannot leave the time zone directories
_TZ_KEY = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")
_IP_KINDS = frozenset({"IPv4Address", "IPv6Address", "IPv4Network", "IPv6Network",
                       "IPv4Interface", "IPv6Interface"})

# Testing frameworks and mocks are never resolvable, even when a benchmark allows their package:
# rebuilding e.g. `unittest.mock.ANY` (its `__eq__` is always True), a MagicMock, or a
# `pytest.approx` with a huge tolerance would make `assert result == expected` pass for a wrong
# answer. knowbench's own modules hold the runner's verdict machinery.
_FORBIDDEN_TOP = frozenset({"unittest", "pytest", "_pytest", "doctest", "hypothesis", "mock",
                            "pytest_mock", "pluggy"})
_FORBIDDEN_PREFIXES = ("numpy.testing", "numpy.ma.testutils", "pandas.testing", "pandas._testing",
                       "pandas.util._tester")
# Builtins that a trusted test calling a returned "function" must never end up running.
_UNSAFE_BUILTINS = frozenset({"eval", "exec", "compile", "open", "breakpoint", "input", "exit",
                              "quit", "help", "globals", "locals", "vars", "setattr", "delattr"})


class WireError(Exception):
    """Malformed or forbidden data while decoding (the only exception `loads` raises)."""


class Unencodable(Exception):
    """A value cannot cross; the message names where, e.g. 'argument 1 -> [3]: ...'."""


class _Refused(Exception):
    """Internal: an encoding refusal; containers append their step while it propagates."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason, self.steps = reason, []


# The name the runner registers each test spec's module under (see knowbench_runner). What a
# spec defines never crosses by name: the other process has no such module.
TESTS_MODULE = "knowbench_test"


def testing_module(module: str) -> bool:
    """Whether `module` belongs to a testing or mock framework (or to knowbench): no class or
    function of it ever crosses the wire."""
    top = module.partition(".")[0]
    return (top in _FORBIDDEN_TOP or top.startswith(("knowbench", "pytest_"))
            or any(module == p or module.startswith(p + ".") for p in _FORBIDDEN_PREFIXES))


def _plain_name(part: object) -> bool:
    """An identifier that is not a dunder (so no `<locals>`, `<lambda>`, `__class__`...)."""
    return (type(part) is str and part.isidentifier()
            and not (part.startswith("__") and part.endswith("__")))


def _walk(module: object, parts: list[str]) -> object:
    """Follow a qualname: module globals first (no module `__getattr__`, hence no lazy imports),
    then plain attribute lookup on classes only. Raises LookupError."""
    if not isinstance(module, types.ModuleType) or not all(_plain_name(p) for p in parts):
        raise LookupError("not a plain module-level name")
    obj = vars(module).get(parts[0], _walk)
    for part in parts[1:]:
        if not isinstance(obj, type):
            raise LookupError("the path goes through something that is not a class")
        obj = getattr(obj, part, _walk)
    if obj is _walk:
        raise LookupError("no such name")
    return obj


def _is_routine(obj: object) -> bool:
    if isinstance(obj, types.BuiltinFunctionType):  # len, math.sqrt; not [].append
        return obj.__self__ is None or isinstance(obj.__self__, types.ModuleType)
    if isinstance(obj, (types.FunctionType, types.MethodDescriptorType,
                        types.WrapperDescriptorType, types.ClassMethodDescriptorType)):
        return True
    t = type(obj)
    return t.__module__.startswith("numpy") and t.__name__ in ("ufunc", "_ArrayFunctionDispatcher")


def _owner_module(obj: object) -> object:
    owner = getattr(obj, "__objclass__", None) if not isinstance(obj, type) else None
    return getattr(owner if owner is not None else obj, "__module__", None)


class Resolver:
    """Which named classes / functions a decoder may hand out.

    A name resolves when its module (and the module the object itself declares) is `builtins`,
    `program_module`, or under a top-level package in `allowed_modules`, never a testing or mock
    framework, and the module is already in `sys.modules` (or `import_missing`). Only classes and
    functions come out, never other module-level objects. `allowed_modules` None allows every
    module but the testing frameworks' (a split candidate's side: it rebuilds the judge's
    values, which name only modules the judge's process holds, and guards nothing of the
    judge's; with `import_missing` it imports a module its own process has not, as one the
    tests alone import).
    """

    def __init__(self, allowed_modules: frozenset[str] | set[str] | None = frozenset(),
                 program_module: str = "solution", import_missing: bool = False,
                 functions: bool = True) -> None:
        self.allowed_modules = None if allowed_modules is None else frozenset(allowed_modules)
        self.program_module = program_module
        self.import_missing = import_missing
        # False (the judge's): the other side names classes only; its functions come as
        # handles, called back there (a function named here would run here, on a test's call).
        self.functions = functions

    def permitted(self, module: object) -> bool:
        if type(module) is not str or testing_module(module):
            return False
        if module in ("builtins", self.program_module):
            return True
        return self.allowed_modules is None or module.partition(".")[0] in self.allowed_modules

    def module(self, name: str) -> types.ModuleType:
        """`sys.modules[name]`, imported only when `import_missing`; raises WireError."""
        mod = sys.modules.get(name)
        if mod is None and self.import_missing:
            try:
                mod = importlib.import_module(name)
            except Exception as error:
                raise WireError(f"cannot import {name}: {type(error).__name__}") from None
        if not isinstance(mod, types.ModuleType):
            raise WireError(f"module {name} is not loaded")
        return mod

    def lookup(self, module: str, qualname: str, functions: bool | None = None,
               known: dict[int, type] | None = None) -> object:
        """The class or function `module.qualname`; raises WireError when it is not allowed.
        `functions` overrides the resolver's own rule for functions (see `_dec_global`); a
        class in `known` (by id: the classes this side sent) is allowed from any loaded
        module but a testing framework's."""
        where = f"{module!r}.{qualname!r}"[:200]
        if type(qualname) is not str:
            raise WireError(f"{where}: module not allowed")
        if not self.permitted(module):
            if known is not None and type(module) is str and not testing_module(module):
                try:
                    found = _walk(sys.modules.get(module), qualname.split("."))
                except LookupError:
                    found = None
                if isinstance(found, type) and known.get(id(found)) is found:
                    return found
            raise WireError(f"{where}: module not allowed")
        try:
            obj = _walk(self.module(module), qualname.split("."))
        except LookupError as error:
            raise WireError(f"{where}: {error}") from None
        if not (isinstance(obj, type) or _is_routine(obj)):
            raise WireError(f"{where}: only classes and functions can be named")
        if not (self.functions if functions is None else functions) and not isinstance(obj, type):
            raise WireError(f"{where}: a function of the other process crosses as a handle, not by name")
        if not self.permitted(_owner_module(obj)):
            raise WireError(f"{where}: defined in a module that is not allowed")
        if module == "builtins" and qualname in _UNSAFE_BUILTINS:
            raise WireError(f"{where}: refused builtin")
        return obj


def _global_name(obj: object) -> tuple[str, str]:
    """(module, qualname) that finds exactly `obj` again; raises _Refused."""
    module, qual = _owner_module(obj), getattr(obj, "__qualname__", None)
    if not isinstance(qual, str):
        qual = getattr(obj, "__name__", None)
    if type(module) is not str or type(qual) is not str:
        raise _Refused(f"{type(obj).__name__} {qual!r} has no importable name")
    if "<locals>" in qual or "<lambda>" in qual:
        raise _Refused(f"{qual} is defined inside a function (or is a lambda) and cannot cross")
    if module == TESTS_MODULE:
        raise _Refused(f"{qual} is defined by the tests and cannot cross by name")
    try:
        found = _walk(sys.modules.get(module), qual.split("."))
    except LookupError as error:
        raise _Refused(f"{module}.{qual} cannot be found by name: {error}") from None
    if found is not obj:
        raise _Refused(f"{module}.{qual} names a different object")
    return module, qual


# Py_TPFLAGS_HEAPTYPE is set for classes defined in Python (and some C types, which then
# usually also carry Py_TPFLAGS_DISALLOW_INSTANTIATION, e.g. _thread.lock).
_HEAPTYPE, _NO_INSTANCES = 1 << 9, 1 << 7
# Py_TPFLAGS_IMMUTABLETYPE (3.10+): set on C types, static or made by a C module at run time
# (`_ssl._SSLSocket`), never on a class a `class` statement makes.
_IMMUTABLE = 1 << 8
_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # class -> _layout(class)


def _sets_fields(setstate: object) -> bool:
    """Whether `__setstate__` is one that only sets the fields of the state it is given, as
    rebuilding an object here does: dataclasses' (frozen, slotted) and attrs' (slotted)."""
    qualname, module = getattr(setstate, "__qualname__", ""), getattr(setstate, "__module__", "")
    return (qualname == "_dataclass_setstate" and module == "dataclasses") or \
        (qualname.endswith("_make_getstate_setstate.<locals>.slots_setstate") and module == "attr._make")


def _caches_its_hash(cls: type) -> bool:
    """Whether `cls`'s `__hash__` is attrs' with `cache_hash` (slotted or not: it keeps the hash
    in `_attrs_cached_hash`)."""
    for klass in cls.__mro__:
        if "__hash__" in vars(klass):
            code = getattr(vars(klass)["__hash__"], "__code__", None)
            return type(code) is types.CodeType and "_attrs_cached_hash" in code.co_names
    return False


def _layout(cls: type) -> tuple[str | None, bool, dict[str, object]]:
    """(problem or None, instances have __dict__, slot name -> member descriptor) for classes
    rebuilt with `object.__new__` + state."""
    if cls in _LAYOUTS:
        return _LAYOUTS[cls]
    problem, slots = None, {}
    setstate = getattr(cls, "__setstate__", None)
    if (not cls.__flags__ & _HEAPTYPE or cls.__flags__ & _NO_INSTANCES) and cls is not object:
        problem = "builtin"
    elif cls.__new__ is not object.__new__:
        problem = "it has its own __new__"
    elif any(klass.__flags__ & _IMMUTABLE for klass in cls.__mro__[:-1]):
        # A C type among its bases: `object.__new__` leaves its C fields unset, and reading
        # one can crash the process (`_ssl._SSLSocket().context`).
        problem = "a C type is among its bases"
    elif (getattr(cls, "__reduce_ex__", None) is not object.__reduce_ex__
          or getattr(cls, "__reduce__", None) is not object.__reduce__):
        problem = "it customises pickling (__reduce__)"
    elif setstate is not None and not _sets_fields(setstate):
        problem = "it has a custom __setstate__"
    elif any("__dict__" in vars(klass) and type(vars(klass)["__dict__"]) is not types.GetSetDescriptorType
             for klass in cls.__mro__[:-1]):
        problem = "it defines __dict__ itself"  # (read to fill its state: it would run)
    elif any("__class__" in vars(klass) for klass in cls.__mro__[:-1]):
        problem = "it answers __class__ itself"  # (`isinstance` reads it: a test's type check)
    elif any("__del__" in vars(klass) for klass in cls.__mro__[:-1]):
        # Its finalizer would act on the sender's state with no test asking: tempfile's
        # _TemporaryFileCloser unlinks the `name` it is given.
        problem = "it has a finalizer (__del__)"
    if problem is None and _caches_its_hash(cls):
        # attrs' `cache_hash`: a hash made in the sender's process (`str` hashes are salted
        # per process) would be wrong in the receiver's.
        problem = "it caches its hash"
    for klass in cls.__mro__:
        names = vars(klass).get("__slots__", ())
        for name in [names] if isinstance(names, str) else names:
            if name in ("__dict__", "__weakref__"):
                continue
            private = name.startswith("__") and not name.endswith("__")
            mangled = f"_{klass.__name__.lstrip('_')}{name}" if private else name
            descriptor = vars(klass).get(mangled)
            if type(descriptor) is not types.MemberDescriptorType:
                problem = problem or f"slot {name} is shadowed"
            slots.setdefault(mangled, descriptor)
    _LAYOUTS[cls] = result = (problem, bool(cls.__dictoffset__), slots)
    return result


def _short(key: object) -> str:
    if type(key) in (str, int, float, bool, bytes, type(None)):
        return repr(key)[:60]
    return f"<{type(key).__name__}>"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _simple_dtype_problem(dtype: object, sized: bool = True) -> str | None:
    """Why values of this numpy dtype cannot travel as raw bytes (None when they can)."""
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biufcmMSU":
        return f"numpy dtype {dtype} is not a simple dtype"
    return None if dtype.itemsize or not sized else f"numpy dtype {dtype} has no size"


class _Encoder:
    def __init__(self, handles: Callable[[object], int | None] | None = None, functions: bool = True,
                 returned: Callable[[object], int | None] | None = None,
                 sent: dict[tuple[str, str, str], dict[int, object]] | None = None,
                 named: dict[int, object] | None = None,
                 classes: dict[int, type] | None = None,
                 values: dict[int, type] | None = None) -> None:
        self.values = values  # see `dumps`
        self.memo: dict[int, int] = {}  # id(obj) -> memo id
        self.keep: list[object] = []  # keeps memoised objects alive so their ids are not reused
        self.depth = 0
        self.handles = handles
        self.functions = functions
        self.returned = returned
        self.sent = sent  # see `dumps`
        self.named = named
        self.classes = classes
        self.place: tuple[str, str, str] | None = None  # (module, class, attribute) being encoded
        self.journal: list[tuple[dict, object]] = []  # (record, key) of each note and class added

    def record(self, table: dict, key: object, value: object) -> None:
        if key not in table:
            self.journal.append((table, key))
            table[key] = value

    def note(self, v: object, place: tuple[str, str, str] | None) -> None:
        """Remember a callable sent in an object's state, at its place (`sent`): itself, and,
        for an object (not a class or function), its class (what is rebuilt there is a copy).
        `place` is None where `_holds_code` would not look: nothing is noted there."""
        if self.sent is not None and place is not None and callable(v):
            known = self.sent.setdefault(place, {})
            self.record(known, id(v), v)
            if not (isinstance(v, type) or _is_routine(v)):
                self.record(known, ("of", id(type(v))), type(v))

    def new_id(self, value: object) -> int:
        self.memo[id(value)] = len(self.keep)
        self.keep.append(value)
        return len(self.keep) - 1

    def enc(self, v: object) -> object:
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return v if -_SAFE_INT < v < _SAFE_INT else ["int", format(v, "x")]
        if t is float:
            return v if math.isfinite(v) else ["float", repr(v)]
        place = self.place
        if id(v) in self.memo:
            if place is not None:
                self.note(v, place)
            return ["ref", self.memo[id(v)]]
        self.depth += 1
        if place is not None and not _looked_into(v):
            self.place = None  # (an object's own attributes are places of their own: `other`)
        try:
            if self.depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
            handler = _ENCODERS.get(t)
            if handler is not None:
                node = handler(self, v)
            elif (self.handles is not None or self.returned is not None) and not isinstance(v, type):
                node = self.other_or_handle(v)
            else:
                node = self.other(v)
        finally:
            self.depth -= 1
            self.place = place
        if place is not None:  # (`note` notes nothing without a place: no call per node)
            self.note(v, place)
        return node

    def child(self, v: object, step: str) -> object:
        try:
            return self.enc(v)
        except _Refused as refusal:
            refusal.steps.append(step)
            raise

    # Loops are inlined (no helper per item): recursion is bounded by the interpreter's limit,
    # so each nesting level should cost as few Python frames as possible.
    def seq(self, v: object, tag: str | None = None, head: tuple = (), values: object = None,
            step: str = "[{}]") -> list[object]:
        """Sequence node; mutable ones take their memo id before their items, frozen ones
        (tuple, frozenset, namedtuple) after them."""
        tag = tag or _SEQ_TAGS[type(v)]
        frozen = tag in ("tuple", "frozenset", "nt", "ss")
        out = [tag, None if frozen else self.new_id(v), *head]
        for i, item in enumerate(v if values is None else values):
            t = type(item)
            if t is str or t is bool or item is None or (t is int and -_SAFE_INT < item < _SAFE_INT):
                out.append(item)  # (as `enc` would send it, without a call per item)
                continue
            try:
                out.append(self.enc(item))
            except _Refused as refusal:
                refusal.steps.append(step.format(i))
                raise
        return self.settled(v, out, len(head)) if frozen else out

    def frozen(self, tag: str, v: object, children: list[object], *head: object) -> list[object]:
        """Node of an immutable value whose children are already encoded (id comes last)."""
        return self.settled(v, [tag, None, *head, *children], len(head))

    def settled(self, v: object, out: list[object], heads: int) -> list[object]:
        """`out` ([tag, None, *head, *children]), the node of an immutable value, given its id
        now; a "cyc" node of its children where the value was met again while they were
        encoded (one of them refers back to it)."""
        if id(v) in self.memo:
            return ["cyc", self.memo[id(v)], *out[2 + heads:]]
        out[1] = self.new_id(v)
        return out

    def mapping(self, v: dict, *head: object) -> list[object]:
        out = [_SEQ_TAGS[type(v)], self.new_id(v), *head]
        for key, value in v.items():
            try:
                out.append(key if type(key) is str else self.enc(key))
                t = type(value)
                out.append(value if t is str or t is bool or value is None
                           or (t is int and -_SAFE_INT < value < _SAFE_INT) else self.enc(value))
            except _Refused as refusal:
                side = "<key {}>" if len(out) % 2 == len(head) % 2 else "[{}]"
                refusal.steps.append(side.format(_short(key)))
                raise
        return out

    def other_or_handle(self, v: object) -> object:
        """A value (not a class) whose type is not in _ENCODERS: the other side's own object
        when it is a stand-in for one (`returned`), by value or name when it can be, else as a
        handle when the `handles` hook gives one (the hook decides which values it hands out:
        callables, or opaque objects the other side can only pass back)."""
        if self.returned is not None:
            theirs = self.returned(v)
            if theirs is not None:
                if type(theirs) is not int or not 0 <= theirs < _SAFE_INT:
                    raise TypeError(f"the returned hook gave {theirs!r}, not an int in [0, 2**53)")
                self.new_id(v)
                return ["yours", theirs]
        mark, noted = len(self.keep), len(self.journal)
        try:
            return self.other(v)
        except _Refused:
            # The partial node is dropped, and with it the memo ids its parts took: the decoder
            # never sees them, and ids must stay sequential. So are the code and classes it
            # noted: they were never sent.
            for dropped in self.keep[mark:]:
                del self.memo[id(dropped)]
            del self.keep[mark:]
            for table, key in reversed(self.journal[noted:]):
                del table[key]
            del self.journal[noted:]
            handle = self.handles(v) if self.handles is not None else None
            if handle is None:
                raise
        view = None
        if type(handle) is tuple and len(handle) == 2 and type(handle[1]) is str and _is_view(handle[1]):
            handle, view = handle
        if type(handle) is not int or not 0 <= handle < _SAFE_INT:
            raise TypeError(f"the handles hook returned {handle!r}, not an int in [0, 2**53)")
        self.new_id(v)  # met again in this document, it is ["ref", id]: the hook is not asked
        return ["handle", handle] if view is None else ["handle", handle, view]

    def other(self, v: object) -> object:
        """Values whose exact type is not in _ENCODERS, by value or by name."""
        t = type(v)
        module = t.__module__ if type(t.__module__) is str else ""
        # gmpy2 before 2.2 names its types' module "builtins"; they are still its own types.
        top = "gmpy2" if module == "builtins" and t.__name__ in _GMPY2_TYPES else module.partition(".")[0]
        library = _LIBRARY_ENCODERS.get(top)
        if library is not None:
            node = library(self, v)
            if node is not None:
                return node
        np, pd, zi = (sys.modules.get(m) for m in ("numpy", "pandas", "zoneinfo"))
        if np is not None and isinstance(v, (np.ndarray, np.generic, np.dtype)):
            return self.numpy(np, v)
        if pd is not None and t.__module__.startswith("pandas"):
            return _enc_pandas(self, pd, v)
        if zi is not None and t is zi.ZoneInfo:
            if v.key is None:
                raise _Refused("a ZoneInfo without a key cannot cross")
            return ["zoneinfo", v.key]
        if isinstance(v, enum.Enum):
            return ["enum", *_global_name(t), self.child(v.value, ".value")]
        if isinstance(v, tuple) and hasattr(t, "_fields") and hasattr(t, "_make"):
            return self.seq(v, "nt", _global_name(t))
        if isinstance(v, tuple) and _is_struct_sequence(t):
            # (its visible fields, then the others by name: struct_time's tm_zone, tm_gmtoff)
            extra = t.__reduce__(v)[1][1]
            names = sorted(name for name in extra if type(name) is str)
            return self.seq(v, "ss", (*_global_name(t), names), values=[*v, *(extra[name] for name in names)])
        if isinstance(v, type) or _is_routine(v):
            if not (self.functions or isinstance(v, type)
                    or (self.named is not None and self.named.get(id(v)) is v)):
                raise _Refused(f"{getattr(v, '__qualname__', 'a function')} crosses as a handle, not by name")
            node = ["global", *_global_name(v)]
            if self.values is not None and isinstance(v, type):
                self.record(self.values, id(v), v)
            return node
        problem, has_dict, slots = _layout(t)
        if problem:
            detail = "" if problem == "builtin" else f" ({problem})"
            raise _Refused(f"a {t.__qualname__} cannot cross{detail}")
        head = _global_name(t)
        nid = self.new_id(v)
        if self.classes is not None:
            self.record(self.classes, id(t), t)
        state = dict(object.__getattribute__(v, "__dict__")) if has_dict else {}
        out = ["obj", nid, *head, len(state)]
        for name, descriptor in slots.items():
            try:
                state.setdefault(name, descriptor.__get__(v, t))
            except AttributeError:
                pass  # unset slot
        outer = self.place
        try:
            for name, value in state.items():
                if not _plain_name(name):
                    raise _Refused(f"attribute {name!r} of a {t.__qualname__} cannot cross")
                out.append(name)
                self.place = (*head, name)
                try:
                    out.append(self.enc(value))
                except _Refused as refusal:
                    refusal.steps.append(f".{name}")
                    raise
        finally:
            self.place = outer
        return out

    def numpy(self, np: types.ModuleType, v: object) -> object:
        if isinstance(v, np.dtype):
            if v != np.dtype(object) and _simple_dtype_problem(v, sized=False):
                raise _Refused(f"numpy dtype {v} cannot cross")
            return ["npdtype", v.str]
        problem = _simple_dtype_problem(v.dtype)
        if isinstance(v, np.generic):
            if problem:
                raise _Refused(problem)
            return ["npscalar", v.dtype.str, _b64(v.tobytes())]
        if type(v) is not np.ndarray:
            raise _Refused(f"a {type(v).__qualname__} (ndarray subclass) cannot cross")
        if v.dtype == np.dtype(object):
            return self.seq(v, "ndo", (list(v.shape),), values=v.flat, step="[flat {}]")
        if problem:
            raise _Refused(problem)
        node = ["nd", self.new_id(v), v.dtype.str, list(v.shape), _b64(v.tobytes(order="C"))]
        # read-only stays read-only: writing to it raises on the other side as it would here
        return node if v.flags.writeable else [*node, "read-only"]


def _enc_writeable(e: _Encoder, array: object) -> object:
    """An array pandas holds: pandas lends read-only views of its data (copy-on-write) while
    the object itself stays writeable, so the read-only flag does not cross."""
    node = e.enc(array)
    return node[:-1] if type(node) is list and node[:1] == ["nd"] and node[-1] == "read-only" else node


def _enc_pd_values(e: _Encoder, pd: types.ModuleType, obj: object) -> object:
    """Node for the values of a Series, Index or column, keeping its exact dtype."""
    np = sys.modules["numpy"]
    dtype = obj.dtype
    if isinstance(dtype, np.dtype):
        return _enc_writeable(e, obj.to_numpy(copy=False))
    arr = obj.array
    if isinstance(dtype, pd.CategoricalDtype):
        return ["pdcat", _enc_writeable(e, np.asarray(arr.codes)), _enc_pandas(e, pd, dtype.categories),
                bool(dtype.ordered)]
    if isinstance(dtype, pd.DatetimeTZDtype):
        return ["pddtz", _enc_writeable(e, np.asarray(arr.tz_convert(None))), e.enc(dtype.tz)]
    values = e.child(arr.to_numpy(dtype=object), ".values")
    if isinstance(dtype, pd.StringDtype):
        return ["pdstr", dtype.storage, dtype.na_value is not pd.NA, values]
    if pd.api.types.pandas_dtype(str(dtype)) != dtype:
        raise _Refused(f"pandas dtype {dtype!r} cannot be named")
    return ["pdext", str(dtype), values]


def _enc_column(e: _Encoder, pd: types.ModuleType, frame: object, i: int) -> object:
    try:
        return _enc_pd_values(e, pd, frame.iloc[:, i])
    except _Refused as refusal:
        refusal.steps.append(f"[column {_short(frame.columns[i])}]")
        raise


def _enc_pandas(e: _Encoder, pd: types.ModuleType, v: object) -> object:
    t = type(v)
    if t is pd.Series:
        children = [_enc_pd_values(e, pd, v), e.child(v.index, ".index"), e.child(v.name, ".name")]
        return e.frozen("pdseries", v, children)
    if t is pd.DataFrame:
        # children are encoded in node order: the decoder registers memo ids in that order
        children = [e.child(v.index, ".index"), e.child(v.columns, ".columns")]
        children += [_enc_column(e, pd, v, i) for i in range(v.shape[1])]
        return e.frozen("pdframe", v, children)
    if t is pd.RangeIndex:
        return ["pdrange", e.enc(v.start), e.enc(v.stop), e.enc(v.step), e.child(v.name, ".name")]
    if t is pd.MultiIndex:
        out = ["pdmulti", e.child(list(v.names), ".names")]
        out += [_enc_pandas(e, pd, level) for level in v.levels]
        return out + [e.enc(sys.modules["numpy"].asarray(c)) for c in v.codes]
    if t in (pd.Index, pd.DatetimeIndex, pd.TimedeltaIndex, pd.CategoricalIndex):
        freq = getattr(v, "freqstr", None)
        return ["pdindex", _enc_pd_values(e, pd, v), e.child(v.name, ".name"), freq]
    if t is pd.Timestamp:
        return ["pdts", e.enc(int(v.asm8.view("i8"))), v.unit, e.enc(v.tz)]
    if t is pd.Timedelta:
        return ["pdtd", e.enc(int(v.asm8.view("i8"))), v.unit]
    if v is pd.NaT:
        return ["pdnat"]
    if v is pd.NA:
        return ["pdna"]
    raise _Refused(f"a {t.__qualname__} cannot cross")


def _enc_tz(e: _Encoder, tz: datetime.timezone) -> object:
    offset, *name = tz.__getinitargs__()
    return ["timezone", e.enc(offset), name[0] if name else None]


_SEQ_TAGS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset", dict: "dict",
             collections.deque: "deque", collections.OrderedDict: "odict",
             collections.Counter: "counter", collections.defaultdict: "ddict"}
_SEQ_KINDS = {tag: kind for kind, tag in _SEQ_TAGS.items()}


def _enc_factory(e: _Encoder, factory: object) -> object:
    """A defaultdict's default_factory: None, or a class that crosses by name (a builtin type,
    or one of a module the other side may name: `ErrorTree`'s `defaultdict(ErrorTree)`)."""
    if factory is not None and not isinstance(factory, type):
        raise _Refused("a defaultdict whose default_factory is not None or a class")
    return None if factory is None else e.child(factory, ".default_factory")


# Dict views cross as the same kind of view over a copy of what they show, as a dict crosses
# as a copy (their items are read by the dict's own C code, whatever class the dict is of); an
# array and a SimpleNamespace as copies. Not a `MappingProxyType`: it reads its mapping through
# that mapping's own methods, which may be a library's (a `shelve.Shelf` unpickles).
_DICT_VIEWS = {type(getattr(kind(), view)()): prefix + view
               for kind, prefix in ((dict, "d"), (collections.OrderedDict, "o"))
               for view in ("keys", "values", "items")}


def _enc_view(e: _Encoder, v: object) -> object:
    tag, children = _DICT_VIEWS[type(v)], []
    if not tag.endswith("items"):
        method = tag[1:]
        children = [e.child(item, f".{method}()[{i}]") for i, item in enumerate(v)]  # type: ignore[call-overload]
    else:
        for i, (key, value) in enumerate(v):  # type: ignore[call-overload]
            children.append(e.child(key, f".items()[{i}][0]"))
            children.append(e.child(value, f".items()[{i}][1]"))
    return e.frozen(tag, v, children)


def _enc_namespace(e: _Encoder, v: types.SimpleNamespace) -> object:
    out = ["ns", e.new_id(v)]
    for name, value in vars(v).items():
        if not _plain_name(name):
            raise _Refused(f"attribute {name!r} of a SimpleNamespace cannot cross")
        out += [name, e.child(value, f".{name}")]
    return out


_ENCODERS = {
    **dict.fromkeys(_DICT_VIEWS, _enc_view),
    types.SimpleNamespace: _enc_namespace,
    array.array: lambda e, v: ["array", e.new_id(v), v.typecode, _b64(v.tobytes())],
    complex: lambda e, v: ["complex", e.enc(v.real), e.enc(v.imag)],
    bytes: lambda e, v: ["bytes", _b64(v)],
    bytearray: lambda e, v: ["bytearray", e.new_id(v), _b64(v)],
    list: _Encoder.seq,  # the methods themselves: one frame per level, see _Encoder.seq
    tuple: _Encoder.seq,
    dict: _Encoder.mapping,
    set: _Encoder.seq,
    frozenset: _Encoder.seq,
    range: lambda e, v: ["range", e.enc(v.start), e.enc(v.stop), e.enc(v.step)],
    slice: lambda e, v: ["slice", e.enc(v.start), e.enc(v.stop), e.enc(v.step)],
    type(...): lambda e, v: ["ellipsis"],
    type(NotImplemented): lambda e, v: ["notimpl"],  # what a binary special method returns to decline
    datetime.date: lambda e, v: ["date", v.year, v.month, v.day],
    datetime.time: lambda e, v: ["time", v.hour, v.minute, v.second, v.microsecond, v.fold,
                                 e.enc(v.tzinfo)],
    datetime.datetime: lambda e, v: ["datetime", v.year, v.month, v.day, v.hour, v.minute,
                                     v.second, v.microsecond, v.fold, e.enc(v.tzinfo)],
    datetime.timedelta: lambda e, v: ["timedelta", v.days, v.seconds, v.microseconds],
    datetime.timezone: _enc_tz,
    decimal.Decimal: lambda e, v: ["decimal", str(v)],
    fractions.Fraction: lambda e, v: ["fraction", e.enc(v.numerator), e.enc(v.denominator)],
    uuid.UUID: lambda e, v: ["uuid", v.hex],
    pathlib.PurePosixPath: lambda e, v: ["path", "pure", str(v)],
    pathlib.PosixPath: lambda e, v: ["path", "posix", str(v)],
    collections.OrderedDict: _Encoder.mapping,
    collections.Counter: _Encoder.mapping,
    collections.defaultdict: lambda e, v: e.mapping(v, _enc_factory(e, v.default_factory)),
    collections.deque: lambda e, v: e.seq(v, head=(v.maxlen,)),
    re.Pattern: lambda e, v: ["pattern", e.enc(v.pattern), v.flags],
    io.StringIO: lambda e, v: ["stringio", e.new_id(v), *_stream_state(v)],
    io.BytesIO: lambda e, v: ["bytesio", e.new_id(v), *_stream_state(v)],
}


# In-memory streams cross as copies of their state, as numbers and text do: what pickling
# would keep (their text or bytes, newline setting and position). A copy runs no code of
# anyone's. (Locks do not cross: an object that holds one, a logging handler or a queue, is
# one a candidate must not have the judge rebuild from a state it chose.)

def _stream_state(stream: io.StringIO | io.BytesIO) -> list[object]:
    try:
        state = stream.__getstate__()  # type: ignore[union-attr]
    except ValueError:  # closed
        raise _Refused(f"a closed {type(stream).__name__} cannot cross") from None
    if state[-1]:
        raise _Refused(f"a {type(stream).__name__} with attributes of its own cannot cross")
    if type(stream) is io.BytesIO:
        return [_b64(state[0]), state[1]]
    return [state[0], state[1], state[2]]


# ---- curated library value types ----
# Each encoder below is given a value whose type's top-level module names its library and
# returns the value's node, or None when the value is none of the library's known types (then
# the general rules apply). Types are compared by identity with the loaded library's own, so a
# class that merely claims such a __module__ is not recognised. The decoders rebuild each value
# from scalars with one fixed constructor or lookup: a document can make them build nothing else.

def _enc_gmpy2(e: _Encoder, v: object) -> object:
    gmpy2, t = sys.modules.get("gmpy2"), type(v)
    if gmpy2 is None:
        return None
    if t is gmpy2.mpz:
        return ["mpz", e.enc(int(v))]
    if t is gmpy2.xmpz:  # mutable: takes a memo id, so sharing survives
        return ["xmpz", e.new_id(v), e.enc(int(v))]
    if t is gmpy2.mpq:
        return ["mpq", e.enc(int(v.numerator)), e.enc(int(v.denominator))]
    if t is gmpy2.mpfr:
        if v.precision not in _MPFR_PRECISIONS:
            raise _Refused(f"an mpfr with a precision of {v.precision} bits cannot cross")
        return ["mpfr", _mpfr_text(v), v.precision]
    return None


def _mpfr_text(v: object) -> str:
    """Base-16 text of an mpfr ("-0.18@1" is -0x0.18 * 16**1): with at most `precision`
    significant bits it is exactly representable, so parsing it back does not depend on the
    receiving context's rounding mode (decimal text would)."""
    if not v.is_finite() or v.is_zero():
        return str(v)  # nan, inf, -inf, 0.0, -0.0
    digits, exponent, _ = v.digits(16)
    sign, digits = ("-", digits[1:]) if digits.startswith("-") else ("", digits)
    return f"{sign}0.{digits}@{exponent}"


def _enc_ipaddress(e: _Encoder, v: object) -> object:
    ipaddress, name = sys.modules.get("ipaddress"), type(v).__name__
    if ipaddress is None or name not in _IP_KINDS or type(v) is not getattr(ipaddress, name):
        return None
    return ["ip", name, str(v)]  # str() is canonical, and each constructor parses it back


def _enc_pytz(e: _Encoder, v: object) -> object:
    """pytz zones are cached singletons: a zone name (plus, for the per-period instances a
    `localize` returns, their (utcoffset, dst, tzname) key) finds the very same object again,
    which is checked here so that only what decodes exactly is sent."""
    pytz, t = sys.modules.get("pytz"), type(v)
    if pytz is None or not isinstance(v, pytz.BaseTzInfo):
        return None
    key = None
    try:
        if t is pytz._FixedOffset:  # what pytz.FixedOffset(minutes) returns
            minutes = v.utcoffset(None) // datetime.timedelta(minutes=1)
            rebuilt = pytz.FixedOffset(minutes)
        elif isinstance(v, pytz.tzinfo.DstTzInfo):
            key = (v._utcoffset, v._dst, v._tzname)
            rebuilt = _pytz_zone(pytz, v.zone, key)
        else:  # pytz.utc and StaticTzInfo zones
            rebuilt = _pytz_zone(pytz, v.zone, None)
    except (WireError, LookupError, ValueError, TypeError, AttributeError):
        rebuilt = None
    # checked before anything is encoded: an impostor's attributes are never looked at further
    if rebuilt is not v:
        raise _Refused(f"a {t.__qualname__} that pytz cannot find again by name cannot cross")
    if t is pytz._FixedOffset:
        return ["pytzfixed", minutes]
    return ["pytz", v.zone] + ([] if key is None else [e.enc(key[0]), e.enc(key[1]), key[2]])


def _enc_dateutil(e: _Encoder, v: object) -> object:
    tz, t = sys.modules.get("dateutil.tz"), type(v)
    if tz is None:
        return None
    if t is tz.tzutc:
        return ["dtzutc"]
    if t is tz.tzoffset:
        name = v.tzname(None)
        if name is not None and type(name) is not str:
            raise _Refused("a dateutil tzoffset whose name is not a str cannot cross")
        return ["dtzoffset", name, e.enc(v.utcoffset(None))]
    if t is tz.tzlocal:
        raise _Refused("a dateutil tzlocal cannot cross: it is whatever zone each process's "
                       "machine and environment say")
    if t is tz.tzfile:
        filename = getattr(v, "_filename", None)
        keys = [getattr(v, "_key", None), filename]  # _key: dateutil >= 4
        if type(filename) is str and "/zoneinfo/" in filename:  # /usr/share/zoneinfo/Europe/Paris
            keys.append(filename.rpartition("/zoneinfo/")[2])
        for key in keys:
            try:
                if _dateutil_zone(tz, key) == v:  # same transitions: gettz(key) rebuilds it
                    return ["dtzfile", key]
            except WireError:
                continue
        raise _Refused(f"a dateutil tzfile ({filename!r:.100}) that gettz cannot find by a zone "
                       f"key cannot cross")
    return None


_GMPY2_TYPES = frozenset({"mpz", "xmpz", "mpq", "mpfr"})
_LIBRARY_ENCODERS = {"gmpy2": _enc_gmpy2, "ipaddress": _enc_ipaddress, "pytz": _enc_pytz,
                     "dateutil": _enc_dateutil}  # keyed by the top-level module of the type


def dumps(value: object, path: str = "value",
          handles: Callable[[object], int | None] | None = None, functions: bool = True,
          returned: Callable[[object], int | None] | None = None,
          sent: dict[tuple[str, str, str], dict[int, object]] | None = None,
          named: dict[int, object] | None = None,
          classes: dict[int, type] | None = None,
          values: dict[int, type] | None = None) -> bytes:
    """Encode `value` as UTF-8 JSON; raises Unencodable naming where the value cannot cross.

    `handles(obj)`, when given, is asked about each callable (not a class) that cannot cross by
    name or by value: an int in [0, 2**53) sends it as `["handle", that int]` (the object met
    again in the document is a reference to that node), None keeps the refusal. Errors of the
    hook, and results of another kind, come out as Unencodable. `functions` False: no function
    crosses by name (the hook is asked about each: a split candidate's side). `returned(obj)`,
    when given, is asked first about each such value: the number the other side exported the
    object under when `obj` is this side's stand-in for it (sent as `["yours", number]`), else
    None. `sent`, when given, is filled with the callables (functions, classes, handles) sent in
    objects' state, by (module, class, attribute), then id (and `("of", id(its class))` for a
    callable object): what the other side may send back there (see `loads`' `code`). `named`:
    functions that cross by name even where `functions` is False (those the other side named,
    by id: they go back as they came). `classes`, when
    given, is filled with the classes of the objects sent by value (by id): what the other side
    may name back (see `loads`); a class sent only as a value (a factory) is not one. `values`,
    when given, is filled with the classes sent as values (by id: see `loads`)."""
    encoder = _Encoder(handles, functions, returned, sent, named, classes, values)
    try:
        try:
            root = encoder.enc(value)
        except BaseException:  # nothing was sent: nothing it noted holds
            for table, key in reversed(encoder.journal):
                del table[key]
            raise
    except _Refused as refusal:
        where = " -> ".join([path, *reversed(refusal.steps)])
        raise Unencodable(f"{where}: {refusal.reason}") from None
    except RecursionError:
        raise Unencodable(f"{path}: nested too deeply") from None
    except Exception as error:  # e.g. a property of the value raising
        raise Unencodable(f"{path}: cannot encode: {type(error).__name__}: {error}") from None
    return _JSON_OUT.encode([_MAGIC, _VERSION, root]).encode("ascii")


def _fields(node: list, n: int, at_least: bool = False) -> list:
    """The fields after the tag; WireError unless there are exactly (or at least) `n`."""
    if len(node) - 1 != n and not (at_least and len(node) - 1 > n):
        raise WireError(f"{node[0]}: wrong number of fields")
    return node[1:]


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise WireError(what)


def _ints(*values: object) -> tuple:
    _need(all(type(v) is int for v in values), "expected integers")
    return values


# `_Decoder.unreached` walks at most this many objects per document, and so many more per node
# decoded: each part once, and again only what reaches an object still being filled.
_WALK_FLOOR = 1_000_000
_WALKS_PER_NODE = 4


# What JSON gives as a value of its own, decoded as itself (`_Decoder.dec`; the loops over a
# node's items take these without a call each). None, a key or an item of a set included: none
# of them reaches another object (`_Decoder.unreached`).
_LEAVES = frozenset((type(None), bool, str, int, float))


class _Decoder:
    def __init__(self, resolver: Resolver,
                 handles: Callable[[int], object] | None = None,
                 own: Callable[[int], object] | None = None,
                 code: Callable[[tuple[str, str, str], object, bool], bool] | None = None,
                 named: dict[int, object] | None = None,
                 classes: dict[int, type] | None = None,
                 values: dict[int, type] | None = None,
                 made: list | None = None) -> None:
        self.resolver = resolver
        self.values = values  # see `loads`
        self.made = made  # see `loads`
        self.handles = handles
        self.own = own
        self.code = code  # see `loads`
        self.named = named  # filled with the functions and classes named here, by id
        self.classes = classes  # see `loads`
        self.place: tuple[str, str, str] | None = None  # (module, class, attribute) being decoded
        self.values_node: object = None  # the node `pd_values` is decoding
        # `obj`: id(rebuilt object) -> (module, class name, the state given), checked again at the end
        self.rebuilt: dict[int, tuple[str, str, dict]] = {}
        self.pending: set[int] = set()  # rebuilt objects whose state is not checked yet
        self.relaxed: dict[int, object] = {}  # functions named in an object's state (`_dec_global`)
        self.memo: list[object] = []
        self.depth = 0
        # What `unreached` needs to walk each part of a value once: the objects registered
        # whose node is still being decoded (they may still grow), as (id, depth) and by id,
        # and those already walked while reaching none of them (id -> object, kept alive so
        # that no id is reused), which can no longer change. With the nodes decoded, the walk
        # is bounded (`_WALKS_PER_NODE`).
        self.filling: list[tuple[int, int]] = []
        self.filling_ids: set[int] = set()
        self.settled: dict[int, object] = {}
        self.nodes = 0
        self.walked = [0]

    def walk_bound(self) -> int:
        return _WALK_FLOOR + _WALKS_PER_NODE * self.nodes

    def dec(self, node: object) -> object:
        t = type(node)
        if t in _LEAVES:
            return node
        # (tests spelled out, not `_need`: the message would be formatted for every node)
        if not (t is list and node and type(node[0]) is str):
            raise WireError(f"malformed {t.__name__}")
        handler = _DECODERS.get(node[0])
        if handler is None:
            raise WireError(f"unknown tag {node[0][:40]!r}")
        self.depth += 1
        self.nodes += 1
        place = self.place
        if place is not None and node[0] not in _PLACE_TAGS:
            self.place = None  # as the encoder: see `_looked_into`
        try:
            if self.depth > MAX_DEPTH:
                raise WireError(f"nested deeper than {MAX_DEPTH} levels")
            return handler(self, node)
        finally:
            filling = self.filling
            while filling and filling[-1][1] >= self.depth:  # this node's object is complete
                self.filling_ids.discard(filling.pop()[0])
            self.depth -= 1
            self.place = place

    def typed(self, node: object, kinds: type | tuple[type, ...], what: str) -> object:
        value = self.dec(node)
        # (never a rebuilt object: `isinstance` reads its `__class__`, its class's code, maybe
        # before its state is checked; no value taken here is ever one)
        if id(value) in self.rebuilt or not isinstance(value, kinds):
            raise WireError(f"{what} has the wrong type")
        return value

    def codes(self, node: object) -> object:
        """Integer codes (a MultiIndex's, a Categorical's): numpy casts other values with
        their class's `__int__`/`__index__`, maybe before their state is checked."""
        codes = self.typed(node, self.resolver.module("numpy").ndarray, "codes")
        _need(codes.dtype.kind in "iu", "codes: not integers")
        return codes

    def register(self, nid: object, value: object) -> object:
        if type(nid) is not int or nid != len(self.memo):
            raise WireError(f"memo id {nid!r} out of sequence"[:80])
        self.memo.append(value)
        self.filling.append((id(value), self.depth))
        self.filling_ids.add(id(value))
        return value

    def ref(self, nid: object) -> object:
        if type(nid) is not int or not 0 <= nid < len(self.memo):
            raise WireError(f"unknown memo id {nid!r}"[:80])
        value = self.memo[nid]
        if self.relaxed:
            # A function named in an object's state is that place's only: met again (itself,
            # or inside a container met again), it must be where it may be too.
            code, place = self.code, self.place
            where = _holds_code(value, rebuilt=self.rebuilt, allowed=lambda found, rebuilt: (
                rebuilt or self.relaxed.get(id(found)) is not found
                or (place is not None and code is not None and code(place, found, False))))
            _need(where is None, "a function named in an object's state is used elsewhere")
        return value

    def key(self, node: object) -> object:
        """A value that is about to be hashed (a dict key, a set item): never an object whose
        state is still being decoded and checked (its class's `__hash__` would read it)."""
        value = self.dec(node)
        self.unreached(value)
        return value

    def unreached(self, value: object) -> None:
        """Refuse `value` when code may run on it now (hashing, pandas) while it reaches an
        object whose state is not checked yet, or no longer holds (a list in it, met earlier
        through a reference, may have grown since): through containers, slices, and the state
        of rebuilt objects (whose own methods, run on it, read their attributes), each of
        which is checked again here. A part that reaches nothing still being decoded cannot
        change any more: it is walked once per document (else a reply whose many keys share
        one large tuple costs the square of its size)."""
        if not self.rebuilt:
            return
        stack, seen, reaches_filling = [value], {}, False
        settled, filling, walked = self.settled, self.filling_ids, self.walked
        while stack:
            item = stack.pop()
            if id(item) in seen or id(item) in settled:
                continue
            seen[id(item)] = item
            walked[0] += 1
            _need(walked[0] <= self.walk_bound(), "a value shares too much of itself to be checked")
            _need(id(item) not in self.pending, "an object is hashed or read before its state is checked")
            reaches_filling = reaches_filling or id(item) in filling
            kind = type(item)
            if id(item) in self.rebuilt:  # (first: `isinstance` would read its __class__)
                self.check_state(*self.rebuilt[id(item)], walked)  # (held to the bound there)
                _, has_dict, slots = _layout(kind)
                if has_dict:
                    stack.extend(object.__getattribute__(item, "__dict__").values())
                for descriptor in slots.values():
                    try:
                        stack.append(descriptor.__get__(item, kind))
                    except AttributeError:
                        pass
            elif isinstance(item, (tuple, list, set, frozenset, collections.deque)):
                stack.extend(list(tuple.__iter__(item) if isinstance(item, tuple) else
                                  list.__iter__(item) if isinstance(item, list) else
                                  collections.deque.__iter__(item) if isinstance(item, collections.deque) else
                                  set.__iter__(item) if isinstance(item, set) else frozenset.__iter__(item)))
            elif isinstance(item, dict):
                for k, v in dict.items(item):
                    stack += [k, v]
            elif kind is slice:
                stack += [item.start, item.stop, item.step]
            elif kind.__name__ == "ndarray" and kind.__module__ == "numpy" and item.dtype == object:
                stack.extend(item.flat)
        if not reaches_filling:
            settled.update(seen)

    def seq(self, node: list) -> object:
        nid, *items = _fields(node, 1, at_least=True)
        kind = _SEQ_KINDS[node[0]]
        item_of = self.key if kind in (set, frozenset) else self.dec
        if kind in (tuple, frozenset):  # immutable: registered once its items exist
            values = []
            for item in items:
                values.append(item if type(item) in _LEAVES else item_of(item))
            return self.register(nid, kind(values))
        target = self.register(nid, kind())
        put = target.append if kind is list else target.add
        for item in items:  # one by one, so that items referring back to `target` find it
            put(item if type(item) in _LEAVES else item_of(item))
        return target

    def mapping(self, node: list) -> object:
        nid, *pairs = _fields(node, 1, at_least=True)
        return self.fill(self.register(nid, _SEQ_KINDS[node[0]]()), pairs)

    def fill(self, target: object, pairs: list, add: bool = False) -> object:
        if add:  # one by one, so that items referring back to `target` find it
            put = target.append if hasattr(target, "append") else target.add
            item_of = self.dec if hasattr(target, "append") else self.key
            for item in pairs:
                put(item_of(item))
            return target
        _need(len(pairs) % 2 == 0, "odd number of mapping fields")
        for i in range(0, len(pairs), 2):
            # The key first (`target[k] = v` evaluates v first): its nodes were numbered first.
            key, value = pairs[i], pairs[i + 1]
            key = key if type(key) in _LEAVES else self.key(key)
            target[key] = value if type(value) in _LEAVES else self.dec(value)
        return target

    def tz(self, node: object) -> datetime.tzinfo | None:
        return None if node is None else self.typed(node, datetime.tzinfo, "tzinfo")

    def lookup_class(self, module: object, qualname: object) -> type:
        cls = self.resolver.lookup(module, qualname, known=self.classes)
        _need(isinstance(cls, type), f"{qualname!r} is not a class"[:80])
        return cls

    def obj(self, node: list) -> object:
        nid, module, qualname, ndict, *pairs = _fields(node, 4, at_least=True)
        cls = self.lookup_class(module, qualname)
        # pandas' values cross only through their own nodes, as they are sent (`_enc_pandas`
        # refuses every other pandas class): rebuilt from state, its internals (a bare
        # `IntegerArray`, an `IndexCol` whose `__eq__` compares absent attributes) equal anything.
        # (each message formatted only when it is raised: `_need` would format it per object)
        if str(getattr(cls, "__module__", "")).startswith("pandas"):
            raise WireError(f"{qualname!r}: pandas objects cross only as pandas values"[:120])
        problem, has_dict, slots = _layout(cls)
        if problem is not None:
            raise WireError(f"{qualname}: cannot rebuild: {problem}")
        _need(type(ndict) is int and 0 <= 2 * ndict <= len(pairs) and len(pairs) % 2 == 0,
              "obj: bad state size")
        value = self.register(nid, object.__new__(cls))
        if self.made is not None:
            self.made.append(value)
        self.pending.add(id(value))
        namespace = object.__getattribute__(value, "__dict__") if has_dict else None
        state: dict = {}
        self.rebuilt[id(value)] = (module, qualname, state)
        outer = self.place
        try:
            for i in range(0, len(pairs), 2):
                name = pairs[i]
                if not _plain_name(name):
                    raise WireError(f"obj: bad attribute name {name!r}"[:80])
                # Once each, and a `__dict__` entry never under a slot's name: only one value
                # of a name is checked, and the slot's would hide the other.
                if name in state or (i < 2 * ndict and name in slots):
                    raise WireError(f"obj: attribute {name!r} given twice"[:80])
                self.place = (module, qualname, name)
                item = self.dec(pairs[i + 1])
                if i < 2 * ndict:
                    if namespace is None:
                        raise WireError(f"{qualname}: instances have no __dict__")
                    namespace[name] = item  # not setattr: no property setters run
                else:
                    if name not in slots:
                        raise WireError(f"{qualname}: no slot {name}")
                    slots[name].__set__(value, item)
                state[name] = item
        finally:
            self.place = outer
        # Checked now, before the object can be hashed, compared or handed to a constructor
        # further up (an enum's lookup, a dict key): its class's methods would call the code.
        self.check_state(module, qualname, state)
        self.pending.discard(id(value))
        if _answering(cls):
            # Its own code runs to ask: never while its state reaches an object still pending.
            self.unreached(value)
            _need(not _array_interface(value), f"{qualname}: it answers numpy's array interface from its state"[:120])
        return value

    # numpy and pandas: used only when the other side sent such values
    def np_dtype(self, text: object, objects: bool = False, sized: bool = True) -> object:
        np = self.resolver.module("numpy")
        _need(type(text) is str and len(text) < 40, "bad dtype")
        dtype = np.dtype(text)
        ok = (objects and dtype == np.dtype(object)) or not _simple_dtype_problem(dtype, sized)
        _need(ok, f"dtype {text!r} not allowed")
        return dtype

    def nd(self, node: list) -> object:
        np = self.resolver.module("numpy")
        nid, text, shape, data, *flags = _fields(node, 4, at_least=True)
        _need(flags in ([], ["read-only"]), "nd: bad flags")
        dtype = self.np_dtype(text)
        _need(type(shape) is list and len(shape) <= 32 and all(
            type(n) is int and n >= 0 for n in shape), "bad shape")
        raw = _b64decode(data)
        _need(math.prod(shape) * dtype.itemsize == len(raw), "array data does not match its shape")
        array = np.empty(shape, dtype=dtype)
        if raw:
            array.reshape(-1).view(np.uint8)[:] = np.frombuffer(raw, dtype=np.uint8)
        if flags:
            array.flags.writeable = False
        return self.register(nid, array)

    def ndo(self, node: list) -> object:
        np = self.resolver.module("numpy")
        nid, shape, *items = _fields(node, 2, at_least=True)
        _need(type(shape) is list and len(shape) <= 32 and all(
            type(n) is int and n >= 0 for n in shape) and math.prod(shape) == len(items),
              "bad shape")
        flat = np.empty(len(items), dtype=object)
        array = self.register(nid, flat.reshape(shape))
        for i, item in enumerate(items):
            flat[i] = self.dec(item)
        return array

    def pd_values(self, node: object) -> object:
        np, pd = self.resolver.module("numpy"), self.resolver.module("pandas")
        self.values_node = node
        values = self.typed(node, (np.ndarray, pd.api.extensions.ExtensionArray), "pandas values")
        self.unreached(values)  # pandas hashes, compares and str()s what it is given
        return values

    def check_rebuilt(self) -> None:
        """Objects rebuilt from state (`obj`) hold no code: their class's own methods read that
        state, so a callable in it (a function or class by name, a handle on the sender's code,
        a callable object) would be called by them and decide what they answer (`__eq__`
        included), and one under the name of a method would stand in for it. Unless the `code`
        hook accepts it at that place (the judge's: what it sent there itself). Checked once
        the whole value is decoded, so that a reference filled in later is seen too."""
        for module, qualname, state in self.rebuilt.values():
            self.check_state(module, qualname, state)

    def check_state(self, module: str, qualname: str, state: dict, walked: list | None = None) -> None:
        """The values a rebuilt object was given (never read back through its class: a property
        of the same name would run) hold no code (see `check_rebuilt`). `walked`: the count
        of objects looked at, held to `unreached`'s bound."""
        code = self.code
        for name, item in state.items():
            allowed = None if code is None else functools.partial(code, (module, qualname, name))
            limit = 1_000_000 if walked is None else max(1, self.walk_bound() - walked[0])
            where = _holds_code(item, limit, rebuilt=self.rebuilt, allowed=allowed, spent=walked)
            _need(walked is None or walked[0] < self.walk_bound(), "a value shares too much of itself to be checked")
            _need(where is None, f"{qualname}.{name}{where or ''}: the state of a rebuilt "
                  "object cannot hold functions, classes or handles"[:200])

    def pd_index(self, node: object) -> object:
        return self.typed(node, self.resolver.module("pandas").Index, "pandas index")

    def pd(self, node: list) -> object:
        np, pd = self.resolver.module("numpy"), self.resolver.module("pandas")
        tag = node[0]
        if tag == "pdseries":
            nid, values, index, name = _fields(node, 4)
            values, index, name = self.pd_values(values), self.pd_index(index), self.dec(name)
            self.unreached(name)
            return self.register(nid, pd.Series(values, index=index, name=name,
                                                dtype=values.dtype, copy=False))
        if tag == "pdframe":
            nid, index, columns, *arrays = _fields(node, 3, at_least=True)
            index, columns = self.pd_index(index), self.pd_index(columns)
            arrays = [self.pd_values(a) for a in arrays]
            _need(len(arrays) == len(columns) and all(len(a) == len(index) for a in arrays),
                  "pdframe: sizes do not match")
            frame = pd.DataFrame({i: pd.Series(a, dtype=a.dtype, copy=False)
                                  for i, a in enumerate(arrays)}) if arrays else pd.DataFrame(
                index=index, columns=columns)
            frame.index, frame.columns = index, columns
            return self.register(nid, frame)
        if tag == "pdindex":
            values, name, freq = _fields(node, 3)
            values = self.pd_values(values)
            # its dtype as sent: pd.Index would infer another for some values (object strings
            # as `str`, object timestamps as datetime64)
            name = self.dec(name)
            self.unreached(name)
            index = pd.Index(values, dtype=values.dtype, name=name, copy=False)
            if freq is not None:
                _need(type(freq) is str and type(index) in (pd.DatetimeIndex, pd.TimedeltaIndex),
                      "pdindex: bad freq")
                index = type(index)(index, freq=freq)
            return index
        if tag == "pdrange":
            start, stop, step, name = _fields(node, 4)
            bounds, name = _ints(self.dec(start), self.dec(stop), self.dec(step)), self.dec(name)
            self.unreached(name)
            return pd.RangeIndex(*bounds, name=name)
        if tag == "pdmulti":
            names, *rest = _fields(node, 1, at_least=True)
            _need(len(rest) % 2 == 0, "pdmulti: levels and codes do not pair")
            names = self.typed(names, list, "names")
            self.unreached(names)
            levels = [self.pd_index(n) for n in rest[: len(rest) // 2]]
            codes = [self.codes(n) for n in rest[len(rest) // 2:]]
            return pd.MultiIndex(levels=levels, codes=codes, names=names, verify_integrity=True)
        if tag in ("pdcat", "pddtz", "pdstr", "pdext"):
            # Only as a Series', an Index's or a column's values, as they are sent: a bare
            # extension array compares otherwise (`IntegerArray == 3` is a BooleanArray, true
            # whatever it holds).
            _need(node is self.values_node, f"{tag}: only as the values of a pandas object")
        if tag == "pdcat":
            codes, categories, ordered = _fields(node, 3)
            _need(type(ordered) is bool, "pdcat: bad ordered")
            codes = self.codes(codes)  # node order: memo ids follow it
            dtype = pd.CategoricalDtype(self.pd_index(categories), ordered=ordered)
            return pd.Categorical.from_codes(codes, dtype=dtype)
        if tag == "pddtz":
            values, tz = _fields(node, 2)
            values = self.typed(values, np.ndarray, "datetimes")
            _need(values.dtype.kind == "M", "pddtz: not datetimes")
            return pd.DatetimeIndex(values).tz_localize("UTC").tz_convert(self.tz(tz)).array
        if tag == "pdstr":
            storage, na_nan, values = _fields(node, 3)
            _need(storage in ("python", "pyarrow") and type(na_nan) is bool, "pdstr: bad dtype")
            dtype = pd.StringDtype(storage, na_value=np.nan if na_nan else pd.NA)
            values = self.typed(values, np.ndarray, "values")
            self.unreached(values)
            return pd.array(values, dtype=dtype)
        if tag == "pdext":
            name, values = _fields(node, 2)
            _need(type(name) is str and len(name) < 100, "pdext: bad dtype")
            dtype = pd.api.types.pandas_dtype(name)
            _need(isinstance(dtype, pd.api.extensions.ExtensionDtype), "pdext: not an extension")
            values = self.typed(values, np.ndarray, "values")
            self.unreached(values)
            return pd.array(values, dtype=dtype)
        if tag in ("pdts", "pdtd"):
            value, unit, *tz = _fields(node, 3 if tag == "pdts" else 2)
            _need(unit in ("s", "ms", "us", "ns"), f"{tag}: bad unit")
            (value,) = _ints(self.dec(value))
            if tag == "pdtd":
                return pd.Timedelta(np.timedelta64(value, unit))
            stamp, zone = pd.Timestamp(np.datetime64(value, unit)), self.tz(tz[0])
            return stamp if zone is None else stamp.tz_localize("UTC").tz_convert(zone)
        _fields(node, 0)
        return pd.NaT if tag == "pdnat" else pd.NA


# numpy reads these on the instance (`np.asarray`, `==` with an array, `assert_array_equal`):
# a dict there with a `data` address, or a buffer and an offset past its end, is an array over
# any memory of the process that reads it.
_ARRAY_INTERFACES = ("__array_interface__", "__array_struct__")
_ANSWERING = ("__getattr__", "__getattribute__", *_ARRAY_INTERFACES)


def _answering(cls: type) -> bool:
    """Whether objects of `cls` may answer numpy's array interface: only a class whose own
    code answers attributes (`__getattr__`, `__getattribute__`: numpy's `BagObj` hands out any
    key of a dict in its state) or that defines the interface itself can (a rebuilt object's
    state holds no dunder names)."""
    return any(name in vars(klass) for klass in cls.__mro__[:-1] for name in _ANSWERING)


def _array_interface(value: object) -> bool:
    """Whether an object rebuilt from state answers numpy's array interface (asked once its
    state is checked; what its code raises is a no)."""
    for name in _ARRAY_INTERFACES:
        try:
            getattr(value, name)
        except Exception:
            continue
        return True
    return False


def _looked_into(item: object) -> bool:
    """Whether `_holds_code` looks inside `item` (a list, tuple, set, dict or deque, their
    subclasses, a numpy object array). The encoder notes code only where this holds all the
    way down from an object's attribute, and the decoder lets code be named back only there:
    a callable inside anything else (a slice, a pandas object) is never checked, so it must
    never be noted either."""
    kind = type(item)
    return isinstance(item, (list, tuple, set, frozenset, collections.deque, dict)) or (
        kind.__name__ == "ndarray" and kind.__module__ == "numpy" and item.dtype == object)


# The decoder's counterpart of `_looked_into`: the nodes inside which an attribute's place
# holds (the containers, and the leaves that are checked there); below any other, none does.
_PLACE_TAGS = frozenset({"list", "tuple", "set", "frozenset", "dict", "odict", "counter", "ddict",
                         "deque", "nt", "ss", "ndo", "cyc", "ref", "global", "handle", "yours", "obj"})


def _holds_code(value: object, limit: int = 1_000_000, rebuilt: Collection[int] = frozenset(),
                allowed: Callable[[object, bool], bool] | None = None, spent: list | None = None) -> str | None:
    """Where in `value` (through lists, tuples, sets and dicts, numpy object arrays) a callable
    is: "" for `value` itself, "[i]" and so on, or None where there is none. Rebuilt objects
    inside (ids in `rebuilt`) were checked on their own: one is code only when it is callable.
    A callable `allowed(it, whether it was rebuilt)` accepts is passed over. Past `limit`
    items, a place is not looked at: refused. `spent[0]` is counted up by the items looked at."""
    stack, seen = [(value, "")], set()
    try:
        return _holds_code_walk(stack, seen, limit, rebuilt, allowed)
    finally:
        if spent is not None:
            spent[0] += len(seen)


def _holds_code_walk(stack: list, seen: set, limit: int, rebuilt: Collection[int],
                     allowed: Callable[[object, bool], bool] | None) -> str | None:
    while stack:
        if len(seen) >= limit:
            return f" (more than {limit} items to look through)"
        item, path = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        kind = type(item)
        if kind in (str, int, float, bool, bytes, complex) or item is None:
            continue
        if callable(item):
            if allowed is not None and allowed(item, id(item) in rebuilt):
                continue
            return path
        if id(item) in rebuilt:
            continue
        # The containers' own iterators, not a subclass's (a namedtuple's fields are looked at).
        if isinstance(item, list):
            stack.extend((entry, f"{path}[{i}]") for i, entry in enumerate(list.__iter__(item)))
        elif isinstance(item, tuple):
            stack.extend((entry, f"{path}[{i}]") for i, entry in enumerate(tuple.__iter__(item)))
        elif kind.__name__ == "ndarray" and kind.__module__ == "numpy" and item.dtype == object:
            stack.extend((entry, f"{path}[{i}]") for i, entry in enumerate(item.flat))
        elif isinstance(item, set):
            stack.extend((entry, f"{path}[...]") for entry in set.__iter__(item))
        elif isinstance(item, frozenset):
            stack.extend((entry, f"{path}[...]") for entry in frozenset.__iter__(item))
        elif isinstance(item, collections.deque):
            stack.extend((entry, f"{path}[{i}]") for i, entry in enumerate(collections.deque.__iter__(item)))
        elif isinstance(item, dict):
            for key, entry in dict.items(item):
                stack.extend(((key, f"{path}[key]"), (entry, f"{path}[{_short(key)}]")))
    return None


def _dec_global(d: _Decoder, node: list) -> object:
    module, qualname = _fields(node, 2)
    if d.place is not None and d.code is not None and not d.resolver.functions:
        # In an object's state, a function the `code` hook accepts at this place (what this
        # side sent there itself) is named back; anywhere else the resolver's rule holds.
        found = d.resolver.lookup(module, qualname, functions=True)
        _need(isinstance(found, type) or d.code(d.place, found, False),
              f"{module!r}.{qualname!r}: a function of the other process crosses as a handle, not by name"[:200])
        if not isinstance(found, type):
            d.relaxed[id(found)] = found
    else:
        found = d.resolver.lookup(module, qualname, known=d.classes)
        # A class as a value (not an object's class) is something the tests may call: named by
        # the other process, only a plain builtin or one this side sent as a value.
        _need(not isinstance(found, type) or _may_take_class(d, found),
              f"{module!r}.{qualname!r}: a class this process never sent cannot cross as a value"[:200])
    if d.named is not None:
        d.named[id(found)] = found
    return found


def _may_take_class(d: _Decoder, cls: type) -> bool:
    """Whether the other process may hand this one `cls` as a value (something the tests may
    call): a plain builtin, or a class this side sent as a value (always, without `values`)."""
    return d.values is None or _builtin_class(cls) or d.values.get(id(cls)) is cls


def _builtin_class(cls: type) -> bool:
    """A class of the builtins namespace itself (`int`, `dict`, `ValueError`), not one that
    only says so (`types.CodeType`, `types.FunctionType`), and not `type` (it makes classes)."""
    return (cls is not type and type.__dict__["__module__"].__get__(cls) == "builtins"
            and getattr(builtins, str(type.__dict__["__qualname__"].__get__(cls)), None) is cls)


def _dec_enum(d: _Decoder, node: list) -> object:
    module, qualname, value = _fields(node, 3)
    cls = d.lookup_class(module, qualname)
    _need(isinstance(cls, enum.EnumMeta), f"{qualname} is not an enum")
    value = d.dec(value)
    # The lookup compares the value with every member's (`==`, and a hash): a plain value only.
    _need(_plain_value(value), f"{qualname}: an enum is named by a plain value")
    return cls(value)


def _plain_value(value: object, depth: int = 0) -> bool:
    """None, a bool, int, float, complex, str or bytes, or a tuple of those (nested a little)."""
    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        return True
    return type(value) is tuple and depth < 8 and all(_plain_value(item, depth + 1) for item in value)


def _is_struct_sequence(cls: type) -> bool:
    """A struct sequence type of a C module (`time.struct_time`, `os.stat_result`, ...): a
    tuple whose constructor is C code, no one's Python."""
    return (cls.__bases__ == (tuple,) and type(cls.__dict__.get("__new__")) is types.BuiltinFunctionType
            and "__init__" not in cls.__dict__ and type(cls.__dict__.get("n_sequence_fields")) is int
            and type(cls.__dict__.get("n_fields")) is int)


def _dec_structseq(d: _Decoder, node: list) -> object:
    nid, module, qualname, names, *items = _fields(node, 4, at_least=True)
    cls = d.lookup_class(module, qualname)
    _need(isinstance(cls, type) and _is_struct_sequence(cls) and type(names) is list
          and all(type(name) is str for name in names) and len(names) <= cls.n_fields
          and len(items) == cls.n_sequence_fields + len(names), f"{qualname} is not a matching struct sequence")
    values = [d.dec(item) for item in items]
    visible = cls.n_sequence_fields
    # its other fields (tm_zone, st_atime_ns...) are plain values: `_holds_code` sees only the visible ones
    _need(all(_plain_value(value) for value in values[visible:]), f"{qualname}: a hidden field that is not a plain value")
    try:
        made = cls(values[:visible], dict(zip(names, values[visible:])))  # noqa: B905 (3.8 and 3.9: no strict; lengths checked)
    except (TypeError, ValueError) as error:
        raise WireError(f"{qualname}: {error}") from None
    return d.register(nid, made)


def _dec_namedtuple(d: _Decoder, node: list) -> object:
    nid, module, qualname, *items = _fields(node, 3, at_least=True)
    cls = d.lookup_class(module, qualname)
    names = getattr(cls, "_fields", None)
    _need(issubclass(cls, tuple) and type(names) is tuple and len(names) == len(items),
          f"{qualname} is not a matching namedtuple")
    return d.register(nid, cls._make([d.dec(item) for item in items]))


def _dec_ddict(d: _Decoder, node: list) -> object:
    nid, factory, *pairs = _fields(node, 2, at_least=True)
    factory = d.dec(factory)
    _need(factory is None or isinstance(factory, type), "defaultdict: bad default_factory")
    # The tests call it on a missing key: a class as a value, wherever the defaultdict lies (an
    # object's state too, where `_dec_global` lets classes through as objects' own).
    _need(factory is None or _may_take_class(d, factory),
          "defaultdict: a default_factory this process never sent cannot cross")
    return d.fill(d.register(nid, collections.defaultdict(factory)), pairs)


def _dec_view(d: _Decoder, node: list) -> object:
    """A dict view over a fresh dict of what the other side's showed."""
    tag, (nid, *items) = node[0], _fields(node, 1, at_least=True)
    kind = collections.OrderedDict if tag[0] == "o" else dict
    if tag.endswith("values"):
        made: object = kind(enumerate(d.dec(item) for item in items)).values()
    elif tag.endswith("keys"):
        made = kind.fromkeys(d.key(item) for item in items).keys()
    else:
        _need(len(items) % 2 == 0, f"{tag}: odd number of fields")
        shown = kind()
        for i in range(0, len(items), 2):
            key = d.key(items[i])
            shown[key] = d.dec(items[i + 1])
        made = shown.items()
    return d.register(nid, made)


def _dec_namespace(d: _Decoder, node: list) -> object:
    nid, *fields = _fields(node, 1, at_least=True)
    _need(len(fields) % 2 == 0, "ns: odd number of fields")
    made = d.register(nid, types.SimpleNamespace())
    for i in range(0, len(fields), 2):
        _need(type(fields[i]) is str and _plain_name(fields[i]), "ns: bad attribute name")
        setattr(made, fields[i], d.dec(fields[i + 1]))
    return made


def _dec_array(d: _Decoder, node: list) -> object:
    nid, typecode, data = _fields(node, 3)
    _need(type(typecode) is str and len(typecode) == 1 and typecode in array.typecodes, "array: bad typecode")
    made = array.array(typecode)
    raw = _b64decode(data)
    _need(len(raw) % made.itemsize == 0, "array: bad length")
    made.frombytes(raw)
    return d.register(nid, made)


def _dec_deque(d: _Decoder, node: list) -> object:
    nid, maxlen, *items = _fields(node, 2, at_least=True)
    _need(maxlen is None or (type(maxlen) is int and maxlen >= 0), "deque: bad maxlen")
    return d.fill(d.register(nid, collections.deque(maxlen=maxlen)), items, add=True)


def _dec_cyc(d: _Decoder, node: list) -> object:
    nid, *children = _fields(node, 1, at_least=True)
    for child in children:
        d.dec(child)
    return d.ref(nid)


def _dec_datetime(d: _Decoder, node: list) -> object:
    *parts, fold, tz = _fields(node, 9)
    return datetime.datetime(*_ints(*parts), tzinfo=d.tz(tz), fold=_ints(fold)[0])


def _dec_time(d: _Decoder, node: list) -> object:
    *parts, fold, tz = _fields(node, 6)
    return datetime.time(*_ints(*parts), tzinfo=d.tz(tz), fold=_ints(fold)[0])


def _dec_timezone(d: _Decoder, node: list) -> object:
    offset, name = _fields(node, 2)
    offset = d.typed(offset, datetime.timedelta, "offset")
    _need(name is None or type(name) is str, "timezone: bad name")
    return datetime.timezone(offset) if name is None else datetime.timezone(offset, name)


def _dec_str_field(kind: object, check: object = None) -> object:
    def decode(d: _Decoder, node: list) -> object:
        (text,) = _fields(node, 1)
        if type(text) is not str or not (check is None or check(text)):
            raise WireError(f"{node[0]}: bad field")
        return kind(text)
    return decode


def _zoneinfo(key: str) -> object:
    import zoneinfo  # stdlib; loaded only when a ZoneInfo arrives

    return zoneinfo.ZoneInfo(key)


def _dec_pattern(d: _Decoder, node: list) -> object:
    pattern, flags = _fields(node, 2)
    pattern = d.typed(pattern, (str, bytes), "pattern")
    _need(type(flags) is int and not flags & ~_RE_FLAGS, "pattern: bad flags")
    return re.compile(pattern, flags)


def _dec_path(d: _Decoder, node: list) -> object:
    kind, text = _fields(node, 2)
    _need(kind in ("pure", "posix") and type(text) is str, "path: bad fields")
    return (pathlib.PurePosixPath if kind == "pure" else pathlib.PosixPath)(text)


_NEWLINES = (None, "", "\n", "\r", "\r\n")


def _dec_stream(d: _Decoder, node: list, kind: type) -> object:
    if kind is io.StringIO:
        nid, text, newline, position = _fields(node, 4)
        _need(type(text) is str and newline in _NEWLINES and (newline is None or type(newline) is str),
              "stringio: bad fields")
        state: tuple = (text, newline, position, None)
    else:
        nid, data, position = _fields(node, 3)
        state = (_b64decode(data), position, None)
    _need(type(position) is int and 0 <= position < _SAFE_INT, f"{node[0]}: bad position")
    stream = kind()
    stream.__setstate__(state)  # type: ignore[attr-defined]
    return d.register(nid, stream)


def _dec_handle(d: _Decoder, node: list) -> object:
    handle, *kind = _fields(node, 1, at_least=True)
    _need(d.handles is not None, "handle: this decoder was given no handles")
    _need(type(handle) is int and 0 <= handle < _SAFE_INT, "handle: bad id")
    _need(not kind or (len(kind) == 1 and type(kind[0]) is str and _is_view(kind[0])), "handle: bad kind")
    # takes the next memo id, see dumps
    return d.register(len(d.memo), d.handles(handle, view=kind[0]) if kind else d.handles(handle))


def _is_view(kind: str) -> bool:
    """`view` and the names of what the view does, space-separated (see `loads`)."""
    words = kind.split(" ")
    return words[0] == "view" and len(kind) <= 400 and all(word.isidentifier() for word in words)


def _dec_yours(d: _Decoder, node: list) -> object:
    (number,) = _fields(node, 1)
    _need(d.own is not None, "yours: this decoder was given no objects of its own")
    _need(type(number) is int and 0 <= number < _SAFE_INT, "yours: bad id")
    return d.register(len(d.memo), d.own(number))  # takes the next memo id, as a handle


# Curated library values; see _enc_gmpy2 and the encoders after it. The library modules come
# through the resolver, as numpy's do: loaded already, or imported only when it may import.
def _dec_gmpy2(d: _Decoder, node: list) -> object:
    gmpy2, tag = d.resolver.module("gmpy2"), node[0]
    if tag == "mpfr":
        text, precision = _fields(node, 2)
        _need(type(text) is str and _MPFR_TEXT.fullmatch(text) is not None
              and type(precision) is int and precision in _MPFR_PRECISIONS,
              "mpfr: bad fields")
        return gmpy2.mpfr(text, precision, 16)
    if tag == "xmpz":
        nid, value = _fields(node, 2)
        return d.register(nid, gmpy2.xmpz(*_ints(d.dec(value))))
    if tag == "mpq":
        numerator, denominator = _ints(*(d.dec(x) for x in _fields(node, 2)))
        _need(denominator > 0, "mpq: bad denominator")
        return gmpy2.mpq(numerator, denominator)
    return gmpy2.mpz(*_ints(d.dec(_fields(node, 1)[0])))


def _dec_ip(d: _Decoder, node: list) -> object:
    kind, text = _fields(node, 2)
    _need(kind in _IP_KINDS and type(text) is str and len(text) < 100, "ip: bad fields")
    import ipaddress  # stdlib; loaded only when an address arrives

    return getattr(ipaddress, kind)(text)


def _pytz_zone(pytz: types.ModuleType, zone: object,
               key: tuple[datetime.timedelta, datetime.timedelta, str] | None) -> object:
    """pytz's own instance for `zone` (a name pytz lists): the zone itself when `key` is None
    (UTC, zones without DST such as Etc/GMT+5), else the per-period instance of a DST zone with that
    (utcoffset, dst, tzname) key. Raises WireError."""
    _need(type(zone) is str and zone in pytz.all_timezones_set, "pytz: unknown zone")
    tz = pytz.timezone(zone)
    is_dst_zone = isinstance(tz, pytz.tzinfo.DstTzInfo)
    if key is None:
        _need(not is_dst_zone, "pytz: a DST zone needs its period")
        return tz
    _need(is_dst_zone and key in tz._tzinfos, "pytz: no such period in the zone")
    return tz._tzinfos[key]


def _dec_pytz(d: _Decoder, node: list) -> object:
    pytz = d.resolver.module("pytz")
    if node[0] == "pytzfixed":
        (minutes,) = _ints(*_fields(node, 1))
        _need(-1440 < minutes < 1440, "pytzfixed: offset out of range")
        return pytz.FixedOffset(minutes)
    zone, *key = _fields(node, 1, at_least=True)
    if not key:
        return _pytz_zone(pytz, zone, None)
    _need(len(key) == 3 and type(key[2]) is str, "pytz: bad period")
    offset = d.typed(key[0], datetime.timedelta, "utcoffset")
    return _pytz_zone(pytz, zone, (offset, d.typed(key[1], datetime.timedelta, "dst"), key[2]))


def _dateutil_zone(tz: types.ModuleType, key: object) -> object:
    """`dateutil.tz.gettz(key)` for a relative IANA key, when that is a tzfile (never a local
    zone, an absolute path, or a file outside the zone directories). Raises WireError."""
    _need(type(key) is str and len(key) <= 100 and _TZ_KEY.fullmatch(key) is not None,
          "dtzfile: bad key")
    zone = tz.gettz(key)
    _need(type(zone) is tz.tzfile, "dtzfile: not a zone file")
    return zone


def _dec_dateutil(d: _Decoder, node: list) -> object:
    tz, tag = d.resolver.module("dateutil.tz"), node[0]
    if tag == "dtzutc":
        _fields(node, 0)
        return tz.tzutc()
    if tag == "dtzoffset":
        name, offset = _fields(node, 2)
        _need(name is None or type(name) is str, "dtzoffset: bad name")
        return tz.tzoffset(name, d.typed(offset, datetime.timedelta, "offset"))
    return _dateutil_zone(tz, _fields(node, 1)[0])


_DECODERS = {
    "int": _dec_str_field(lambda s: int(s, 16), _HEX_INT.fullmatch),
    "float": _dec_str_field(float, {"nan", "inf", "-inf"}.__contains__),
    "complex": lambda d, n: complex(*(d.typed(x, float, "complex part") for x in _fields(n, 2))),
    "bytes": lambda d, n: _b64decode(_fields(n, 1)[0]),
    "bytearray": lambda d, n: d.register(_fields(n, 2)[0], bytearray(_b64decode(n[2]))),
    **dict.fromkeys(("list", "tuple", "frozenset", "set"), _Decoder.seq),
    **dict.fromkeys(("dict", "odict", "counter"), _Decoder.mapping),
    "ddict": _dec_ddict,
    "deque": _dec_deque,
    **dict.fromkeys(_DICT_VIEWS.values(), _dec_view),
    "ns": _dec_namespace,
    "array": _dec_array,
    "ref": lambda d, n: d.ref(_fields(n, 1)[0]),
    "cyc": _dec_cyc,
    "range": lambda d, n: range(*_ints(*(d.dec(x) for x in _fields(n, 3)))),
    "slice": lambda d, n: slice(*(d.dec(x) for x in _fields(n, 3))),
    "ellipsis": lambda d, n: [_fields(n, 0), ...][1],
    "notimpl": lambda d, n: [_fields(n, 0), NotImplemented][1],
    "date": lambda d, n: datetime.date(*_ints(*_fields(n, 3))),
    "time": _dec_time,
    "datetime": _dec_datetime,
    "timedelta": lambda d, n: datetime.timedelta(*_ints(*_fields(n, 3))),
    "timezone": _dec_timezone,
    "zoneinfo": _dec_str_field(_zoneinfo),
    "decimal": _dec_str_field(decimal.Decimal),
    "fraction": lambda d, n: fractions.Fraction(*_ints(*(d.dec(x) for x in _fields(n, 2)))),
    "uuid": _dec_str_field(lambda s: uuid.UUID(hex=s), lambda s: len(s) == 32),
    "path": _dec_path,
    "pattern": _dec_pattern,
    "stringio": lambda d, n: _dec_stream(d, n, io.StringIO),
    "bytesio": lambda d, n: _dec_stream(d, n, io.BytesIO),
    "global": _dec_global,
    "enum": _dec_enum,
    "nt": _dec_namedtuple,
    "ss": _dec_structseq,
    "obj": _Decoder.obj,
    "nd": _Decoder.nd,
    "ndo": _Decoder.ndo,
    "npscalar": lambda d, n: _npscalar(d, *_fields(n, 2)),
    "npdtype": lambda d, n: d.np_dtype(_fields(n, 1)[0], objects=True, sized=False),
    **dict.fromkeys(("pdseries", "pdframe", "pdindex", "pdrange", "pdmulti", "pdcat", "pddtz",
                     "pdstr", "pdext", "pdts", "pdtd", "pdnat", "pdna"), _Decoder.pd),
    "handle": _dec_handle,
    "yours": _dec_yours,
    **dict.fromkeys(("mpz", "xmpz", "mpq", "mpfr"), _dec_gmpy2),
    "ip": _dec_ip,
    **dict.fromkeys(("pytz", "pytzfixed"), _dec_pytz),
    **dict.fromkeys(("dtzutc", "dtzoffset", "dtzfile"), _dec_dateutil),
}


def _b64decode(text: object) -> bytes:
    _need(type(text) is str, "bad base64 field")
    return base64.b64decode(text, validate=True)


def _npscalar(d: _Decoder, text: object, data: object) -> object:
    dtype = d.np_dtype(text)
    raw = _b64decode(data)
    _need(len(raw) == dtype.itemsize, "npscalar: data does not match its dtype")
    return d.resolver.module("numpy").frombuffer(raw, dtype=dtype)[0]


def _decode_tree(node: object, resolver: Resolver,
                 handles: Callable[[int], object] | None = None,
                 own: Callable[[int], object] | None = None,
                 code: Callable[[tuple[str, str, str], object, bool], bool] | None = None,
                 named: dict[int, object] | None = None,
                 classes: dict[int, type] | None = None,
                 values: dict[int, type] | None = None,
                 made: list | None = None) -> object:
    try:
        decoder = _Decoder(resolver, handles, own, code, named, classes, values, made)
        value = decoder.dec(node)
        decoder.check_rebuilt()
        return value
    except WireError:
        raise
    except Exception as error:  # a constructor refused the data (RecursionError included)
        raise WireError(f"cannot rebuild value: {type(error).__name__}: {error}"[:300]) from None


def _reject_constant(name: str) -> object:
    raise WireError(f"non-standard JSON constant {name}")


# One of each, made once: `json.dumps` and `json.loads` given options make a new encoder or
# decoder on every call (a split call crosses the wire about four times).
_JSON_OUT = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))
_JSON_IN = json.JSONDecoder(parse_constant=_reject_constant)


def loads(data: bytes, resolver: Resolver,
          handles: Callable[[int], object] | None = None,
          own: Callable[[int], object] | None = None,
          code: Callable[[tuple[str, str, str], object, bool], bool] | None = None,
          named: dict[int, object] | None = None,
          classes: dict[int, type] | None = None,
          values: dict[int, type] | None = None,
          made: list | None = None) -> object:
    """Rebuild a value from `dumps` output; raises WireError (only) on anything malformed or
    forbidden. Calls nothing but value constructors, what `resolver` allows, `handles`, `own`
    and `code`.

    `handles(id)` gives the object a `["handle", id]` node stands for, `own(id)` this side's
    object a `["yours", id]` node names (an error either raises becomes a WireError); without
    the hook, such a node is a WireError. `code((module, class, attribute), callable, rebuilt)`
    says whether a rebuilt object of that class may hold that callable (a function, a class, a
    handle, or, `rebuilt` True, a callable object rebuilt from state) in that attribute,
    however deep (without the hook, none may; with it, a function may be named there even
    where the resolver names none). `named`, when given, is filled with the functions and
    classes the document named, by id. `classes` (by id: the classes this side sent, `dumps`'
    `classes`) may be named from any loaded module but a testing framework's, not only from
    those `resolver` allows. `values`, when given (the classes this side sent as values,
    `dumps`' `values`), limits the classes named as values (not as an object's class) to those
    and the plain builtins (not `type`): a test may call a class it is handed, and one the other
    process chose (`subprocess.Popen`, `ctypes.CDLL`) would run with its arguments here. `made`,
    when given, is filled with the objects rebuilt from state (an `obj` node: an object of a
    library's or the program's class, with the state the other process chose)."""
    _need(isinstance(data, (bytes, bytearray, memoryview)), "data must be bytes")
    try:
        tree = _JSON_IN.decode(bytes(data).decode("utf-8"))
    except WireError:
        raise
    except Exception as error:  # not UTF-8, not JSON, too deep, int too long...
        raise WireError(f"not a wire document: {type(error).__name__}") from None
    _need(type(tree) is list and len(tree) == 3 and tree[:2] == [_MAGIC, _VERSION],
          "not a knowbench-wire document")
    return _decode_tree(tree[2], resolver, handles, own, code, named, classes, values, made)


def _tree(value: object) -> object:
    try:
        return json.loads(dumps(value))[2]
    except RecursionError:
        raise Unencodable("nested too deeply") from None


def _safe_str(value: object, limit: int = 10_000) -> str:
    try:
        text = str(value)
    except Exception as error:
        text = f"<unprintable {type(value).__name__}: {type(error).__name__}>"
    return str.__str__(text)[:limit] if isinstance(text, str) else "<not a string>"


_GROUP_DEPTH = 32
_GROUP_SIZE = 10_000
"""Exception groups nested deeper, or holding more exceptions, cannot cross."""


def _exception_group() -> type | None:
    """BaseExceptionGroup (Python 3.11+), else None."""
    return getattr(builtins, "BaseExceptionGroup", None)


def encode_exception(error: BaseException, _depth: int = 0) -> dict:
    """A JSON-able record of `error`: its type's MRO as [module, qualname] pairs, its args (each
    ["v", tree] when encodable, else ["s", its str]; an exception group's exceptions as
    ["g", [their records]]), plain instance attributes that encode, and str(error) (capped at
    10,000 characters)."""
    types_ = []
    for cls in type(error).__mro__[:-1]:  # without object
        module = cls.__module__
        types_.append([module if type(module) is str else "?", cls.__qualname__])
    args, state = [], {}
    for arg in error.args if type(error.args) is tuple else ():
        try:
            args.append(["v", _tree(arg)])
        except Unencodable:
            args.append(["s", _safe_str(arg)])
    group = _exception_group()
    if group is not None and isinstance(error, group):
        # (message, exceptions): the exceptions as records of their own, ["g", [...]]
        inner = error.exceptions
        if _depth >= _GROUP_DEPTH or len(inner) > _GROUP_SIZE:
            raise Unencodable(f"an exception group nested more than {_GROUP_DEPTH} deep or holding "
                              f"more than {_GROUP_SIZE} exceptions cannot cross")
        args[1:] = [["g", [encode_exception(exception, _depth + 1) for exception in inner]]]
    for name, value in getattr(error, "__dict__", {}).items():
        if _plain_name(name) and not name.startswith("knowbench"):
            try:
                state[name] = _tree(value)
            except Unencodable:
                pass
    notes = getattr(error, "__dict__", {}).get("__notes__")
    if _are_notes(notes):  # (add_note: pytest's match reads them)
        state["__notes__"] = _tree(notes)
    for name in _exception_fields(error):  # what its str() or its tests read, which its args are not
        try:
            value = getattr(error, name, None)
            if value is not None:  # (unset: a None set would show in its str(), `-> None`)
                state[name] = _tree(value)
        except Exception:  # Unencodable, or a class's own __getattr__ raising
            pass
    return {"types": types_, "args": args, "state": state, "str": _safe_str(error)}


# Builtin exceptions' own fields that their args do not set (C-level: set as attributes, never
# in the instance's __dict__): an OSError's message is made of its errno, strerror and file
# names; an ImportError's and a NameError's names are read by tests.
_EXCEPTION_FIELDS = ((OSError, ("errno", "strerror", "filename", "filename2")), (ImportError, ("name", "path")),
                     (NameError, ("name",)), (AttributeError, ("name",)),
                     (BlockingIOError, ("characters_written",)))


def _builtin_base(cls):
    """The first builtin class along `cls`'s MRO (an exception's: BaseException at worst)."""
    return next(base for base in cls.__mro__ if base.__module__ == "builtins")


def _safe_to_init(cls, args):
    """Whether the builtin base's __init__ may take `args` as the other process sent them:
    CPython's `UnicodeDecodeError.__str__` reads `object[start]` unchecked (out of bounds: a
    read of this process's memory, or a crash), and a SyntaxError's offsets size what
    `traceback` draws under its text."""
    if issubclass(cls, UnicodeError) and len(args) in (4, 5):
        # (object, start, end) before the reason: a decode or encode error has its encoding
        # first, a translate error does not
        text, start, end = args[-4:-1]
        return (isinstance(text, (str, bytes, bytearray)) and type(start) is int and type(end) is int
                and 0 <= start <= end <= len(text))
    if issubclass(cls, SyntaxError) and len(args) == 2:
        where = args[1]
        if type(where) is not tuple:  # (its __init__ takes any sequence: only a tuple is looked at)
            return False
        text = where[3] if len(where) > 3 and type(where[3]) is str else ""
        return all(number is None or (type(number) is int and 0 <= number <= max(len(text) + 1, 1 << 20))
                   for number in where[1:3] + where[4:6])
    return True


def _are_notes(value):
    """Whether `value` is what `add_note` makes: a list of strings."""
    return type(value) is list and all(type(note) is str for note in value)


def _exception_fields(error):
    return [name for kind, names in _EXCEPTION_FIELDS if isinstance(error, kind) for name in names]


def decode_exception(data: dict, resolver: Resolver, _depth: int = 0, values: dict[int, type] | None = None,
                     classes: dict[int, type] | None = None, made: list | None = None) -> BaseException:
    """Rebuild the first resolvable class of the recorded MRO (so a candidate's
    `class MyError(ValueError)` arrives as ValueError) without calling its __init__ (but a
    builtin's, which sets the fields its args give); falls back to the next base when one
    cannot be instantiated. The rebuilt exception carries
    `knowbench_type` (the original "module.qualname") and `knowbench_str` (the original str).
    Raises WireError (only) when `data` is malformed. `values`, `classes` and `made`: as
    `loads`' (its arguments and attributes name classes as values only under the same rule,
    and what they rebuild from state is listed)."""
    _need(type(data) is dict and set(data) == {"types", "args", "state", "str"},
          "exception: bad record")
    names, raw_args, raw_state, text = data["types"], data["args"], data["state"], data["str"]
    _need(type(names) is list and 0 < len(names) <= 200 and all(
        type(p) is list and len(p) == 2 and all(type(s) is str for s in p) for p in names),
          "exception: bad types")
    _need(type(raw_args) is list and all(type(a) is list and len(a) == 2 and a[0] in ("v", "s", "g")
                                         for a in raw_args), "exception: bad args")
    _need(type(raw_state) is dict and all(name == "__notes__" or _plain_name(name) for name in raw_state) and type(text) is str,
          "exception: bad state")
    args = []
    inner = None  # an exception group's exceptions
    for kind, payload in raw_args:
        if kind == "g":
            _need(inner is None and type(payload) is list and 0 < len(payload) <= _GROUP_SIZE
                  and _depth < _GROUP_DEPTH, "exception: bad group")
            inner = tuple(decode_exception(record, resolver, _depth + 1, values, classes, made) for record in payload)
            args.append(list(inner))
            continue
        try:
            args.append(_decode_tree(payload, resolver, classes=classes, values=values, made=made) if kind == "v"
                        else str(payload))
        except WireError as error:  # keep the exception: its message matters more than an arg
            args.append(f"<undecodable argument: {error}>")
    group = _exception_group()
    for module, qualname in names:
        try:
            cls = resolver.lookup(module, qualname)
        except WireError:
            continue
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            continue
        base = _builtin_base(cls)
        try:
            if group is not None and issubclass(cls, group):
                # its __new__ takes (message, exceptions); an ExceptionGroup only Exceptions
                if inner is None or len(args) != 2 or type(args[0]) is not str:
                    continue
                exc = cls.__new__(cls, args[0], inner)
            else:
                exc = BaseException.__new__(cls)
        except TypeError:  # OSError and the like (a library's subclasses too) need their base's __new__
            if group is not None and issubclass(cls, group):
                continue
            try:
                exc = base.__new__(cls)
            except Exception:
                continue
        if (cls.__init__ is base.__init__ and not (group is not None and issubclass(cls, group))
                and _safe_to_init(cls, args)):
            # Its builtin base's own __init__ (C code, no one's else), where the class keeps it,
            # sets the fields the args give: SystemExit.code, StopIteration.value, a UnicodeError's
            # and a SyntaxError's parts (a library's subclass of one too, such as ElementTree's
            # ParseError).
            try:
                base.__init__(exc, *args)
            except Exception:
                pass
        exc.args = tuple(args)
        fields = _exception_fields(exc)
        for name, node in raw_state.items():
            if name != "args" and not name.startswith("knowbench"):
                try:
                    value = _decode_tree(node, resolver, classes=classes, values=values, made=made)
                except WireError:
                    continue
                if name in fields:
                    try:
                        setattr(exc, name, value)
                    except Exception:  # (a value the field refuses: an int too large, say)
                        pass
                elif name == "__notes__":
                    if _are_notes(value):
                        vars(exc)[name] = value
                elif not any(name in vars(klass) for klass in type(exc).__mro__) and _holds_code(value) is None:
                    # Never in place of a method of its class (`with_traceback`, which
                    # assertRaises calls; an exception group's `derive`), nor holding code.
                    vars(exc)[name] = value
        first = names[0]
        exc.knowbench_type = first[1] if first[0] == "builtins" else ".".join(first)
        exc.knowbench_str = text
        return exc
    raise WireError("exception: no resolvable type")


def _reshaped_like(np: types.ModuleType, original: object, new: object) -> bool:
    """Make `original` (an ndarray) ready to take `new`'s values in place, as the other process
    could have changed it: its shape (`x.shape = ...`, same size) and its writeable flag (set
    back on by the array's owner); False when it cannot be (another dtype or size: the array
    was replaced, or reinterpreted)."""
    if original.dtype != new.dtype or original.size != new.size:
        return False
    saved_shape, saved_flag = original.shape, original.flags.writeable
    try:
        if original.shape != new.shape:
            original.shape = new.shape
        if not original.flags.writeable:
            original.flags.writeable = True
    except (AttributeError, ValueError):
        try:
            original.shape = saved_shape
            original.flags.writeable = saved_flag
        except (AttributeError, ValueError):
            pass
        return False
    return True


def mirrors(original: object, new: object) -> bool:
    """Whether `original` now holds what `new` holds: the same structure and values, with a
    callable or handle the same object on both sides. Sets and dicts compare by their items,
    whatever their order of iteration; a structure too deep to compare counts as the same."""
    try:
        return _Mirrors().same(original, new)
    except RecursionError:
        return True


class _Mirrors:
    def __init__(self) -> None:
        self.seen: set[tuple[int, int]] = set()
        # The copies compared (an object's state as a dict): kept alive, so that no later copy
        # takes an address `seen` holds and passes as compared already.
        self.copies: list[object] = []

    def copy(self, state: object) -> dict:
        made = dict(state)  # type: ignore[call-overload]
        self.copies.append(made)
        return made

    def same(self, a: object, b: object) -> bool:
        if a is b:
            return True
        t = type(a)
        if t is not type(b):
            return False
        if (id(a), id(b)) in self.seen:
            return True
        if t in (int, str, bytes, bool, type(None), complex, decimal.Decimal, fractions.Fraction):
            return a == b
        if t is float:
            return a == b or (a != a and b != b)
        np, pd = sys.modules.get("numpy"), sys.modules.get("pandas")
        if np is not None and t is np.ndarray:
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if a.dtype == np.dtype(object):
                self.seen.add((id(a), id(b)))
                return all(self.same(x, y) for x, y in zip(a.flat, b.flat))  # noqa: B905 (shapes equal)
            return a.tobytes() == b.tobytes()
        if t in (set, frozenset):  # hashable items: equality, whatever the order
            return bool(a == b)
        if (pd is not None and t in (pd.DataFrame, pd.Series)) or (np is not None and isinstance(a, np.generic)):
            try:
                return bool(dumps(a) == dumps(b))
            except Unencodable:
                return True
        self.seen.add((id(a), id(b)))
        if t in (list, tuple, collections.deque) or (issubclass(t, tuple) and hasattr(t, "_fields")):
            return len(a) == len(b) and all(self.same(x, y) for x, y in zip(a, b))  # noqa: B905 (lengths equal)
        if t in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
            return (len(a) == len(b) and all(key in b for key in a)
                    and all(self.same(a[key], b[key]) for key in a))
        if t is bytearray:
            return a == b
        if t is array.array:
            return a.typecode == b.typecode and a.tobytes() == b.tobytes()
        if t is types.SimpleNamespace:
            return self.same(self.copy(vars(a)), self.copy(vars(b)))
        if t in STREAMS:
            return bool(a.__getstate__()[:-1] == b.__getstate__()[:-1])
        if callable(a) or isinstance(a, type):
            return True  # a handle's stand-in on one side, the callable on the other: not compared
        _, has_dict, slots = _layout(t)
        if has_dict:
            state_a, state_b = object.__getattribute__(a, "__dict__"), object.__getattribute__(b, "__dict__")
            if not self.same(self.copy(state_a), self.copy(state_b)):
                return False
        for descriptor in slots.values():
            try:
                x = descriptor.__get__(a, t)
            except AttributeError:
                x = _MISSING_SLOT
            try:
                y = descriptor.__get__(b, t)
            except AttributeError:
                y = _MISSING_SLOT
            if not self.same(x, y):
                return False
        if not has_dict and not slots:
            try:
                return bool(dumps(a) == dumps(b))
            except Unencodable:
                return True
        return True


_MISSING_SLOT = object()
STREAMS = (io.StringIO, io.BytesIO)  # in-memory streams: values that cross, see _stream_state


def assign_in_place(original: object, new: object, kept: Callable[[object], bool] | None = None) -> bool:
    """Make `original` equal `new` in place, keeping the identity of nested mutable objects
    where the structures match; False (and `original` untouched) when it is immutable or of a
    different type, or when `kept(original)` says it must not change. An object nested in it
    that must not change keeps its place, unchanged: where `new` holds something else there,
    `original` then does not mirror `new` (the caller's check, `mirrors`, says so)."""
    return _Assigner(kept).assign(original, new)


class _Assigner:
    def __init__(self, kept: Callable[[object], bool] | None = None) -> None:
        self.kept = kept
        self.mirror: dict[int, object] = {}  # id(new object) -> the original now mirroring it
        self.paired: dict[int, int] = {}  # id(original) -> id(new object) it was given
        self.keep: list[object] = []

    def merged(self, old: object, new: object) -> object:
        """What to store where `old` was and `new` is now: `old` updated when possible."""
        if id(new) in self.mirror:
            return self.mirror[id(new)]
        return old if self.assign(old, new) or self.holds_kept(old) else new

    def holds_kept(self, value: object) -> bool:
        """Whether `value` is, or is a tuple that holds (however deep), an object `kept` says
        must not change: it keeps its place (a tuple cannot change in place)."""
        if self.kept is None:
            return False
        if isinstance(value, tuple):
            return any(self.holds_kept(item) for item in tuple.__iter__(value))
        return self.mutable(value) and self.kept(value)

    def assign(self, original: object, new: object) -> bool:
        if original is new:
            return True
        if id(original) in self.paired:
            return self.paired[id(original)] == id(new)
        t = type(original)
        if issubclass(t, tuple) and t is type(new) and len(original) == len(new):
            # a tuple cannot change, what it holds can: each item in place, where it can be
            merged = [self.assign(old, item) for old, item in zip(original, new)]  # noqa: B905 (lengths checked)
            return all(merged)
        if t is not type(new) or not self.mutable(original) or (self.kept is not None and self.kept(original)):
            return False
        np, pd = sys.modules.get("numpy"), sys.modules.get("pandas")
        if np is not None and t is np.ndarray:
            if not _reshaped_like(np, original, new):
                return False
        elif (t is collections.deque and original.maxlen != new.maxlen) or (
                t is array.array and original.typecode != new.typecode):
            return False
        self.paired[id(original)], self.mirror[id(new)] = id(new), original
        self.keep += [original, new]
        if t in (list, collections.deque):
            items = [self.merged(original[i], item) if i < len(original) else item
                     for i, item in enumerate(new)]
            original.clear()
            original.extend(items)
        elif t in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
            items = [(k, self.merged(original[k], v) if k in original else v)
                     for k, v in new.items()]
            if t is collections.defaultdict:
                original.default_factory = new.default_factory
            original.clear()
            for key, value in items:
                original[key] = value
        elif t is set:
            original.clear()
            for item in new:  # one by one, as `new` was built: the same order of iteration
                original.add(item)
        elif t in (bytearray, array.array):
            original[:] = new
        elif t is types.SimpleNamespace:
            items = [(k, self.merged(vars(original)[k], v) if k in vars(original) else v)
                     for k, v in vars(new).items()]
            vars(original).clear()
            vars(original).update(items)
        elif t in STREAMS:
            original.__setstate__((*new.__getstate__()[:-1], None))
        elif np is not None and t is np.ndarray:
            original[...] = new
            original.flags.writeable = bool(new.flags.writeable)
        elif pd is not None and t in (pd.DataFrame, pd.Series):
            original._update_inplace(new)
            if t is pd.Series:
                original.name = new.name
        else:
            self.assign_state(original, new)
        return True

    @staticmethod
    def mutable(value: object) -> bool:
        t = type(value)
        if t in (list, dict, set, bytearray, array.array, types.SimpleNamespace, collections.deque,
                 collections.OrderedDict, collections.defaultdict, collections.Counter, *STREAMS):
            return not (t in STREAMS and value.closed)
        np, pd = sys.modules.get("numpy"), sys.modules.get("pandas")
        if np is not None and t is np.ndarray:
            return True
        if pd is not None and t in (pd.DataFrame, pd.Series):
            return hasattr(value, "_update_inplace")
        return not isinstance(value, (type, enum.Enum, tuple)) and _layout(t)[0] is None

    def assign_state(self, original: object, new: object) -> None:
        _, has_dict, slots = _layout(type(original))
        if has_dict:
            old_state = object.__getattribute__(original, "__dict__")
            new_state = object.__getattribute__(new, "__dict__")
            items = [(k, self.merged(old_state[k], v) if k in old_state else v)
                     for k, v in new_state.items()]
            old_state.clear()  # direct: frozen dataclasses and __setattr__ hooks are bypassed
            old_state.update(items)
        for descriptor in slots.values():
            try:
                value = descriptor.__get__(new, type(new))
            except AttributeError:
                try:
                    descriptor.__delete__(original)
                except AttributeError:
                    pass
                continue
            try:
                old = descriptor.__get__(original, type(original))
            except AttributeError:
                descriptor.__set__(original, value)
            else:
                descriptor.__set__(original, self.merged(old, value))
