"""Split execution: the tests in a trusted process, the candidate's code in another.

The trusted side (the judge) loads the benchmark's own program, in which the target is
replaced by a proxy. Every call of the proxy goes to the candidate's process over a
socket: the arguments go over by value, and the return value, the exception raised, what
the call printed and any change to the arguments (and so to `self`) come back by value
(`knowbench_wire`). The judge never runs code the candidate defined, and the candidate
never sees the tests, the expected values or the judge's verdict channel.

Stdlib only (plus `knowbench_wire`, which lives beside it): runs inside the sandbox.
"""

import builtins
import collections.abc
import copy
import errno
import functools
import gc
import importlib
import inspect
import io
import operator
import os
import re
import signal
import struct
import sys
import time
import traceback
import types
import warnings
import weakref

import knowbench_graft
import knowbench_wire as wire

_HEADER = struct.Struct(">I")
FRAME_CAP = 64 * 1024 * 1024
ITEMS_CAP = 100_000  # an iterator the target returns is drained up to this many items
# ... and while it is drained, the tests' objects are used through views at most this often
VIEW_DRAIN_CAP = 1_000
_VIEW_USES = [0]  # the candidate's: uses of views so far
WARNINGS_CAP = 1000  # runs of different warnings one call may raise
WARNINGS_TOTAL = 100_000  # warnings one call may raise
LOG_RECORDS_CAP = 100_000  # log records one call may make
CANDIDATE_FILE = "solution.py"  # the name the candidate's program is compiled under
_HERE = os.path.dirname(os.path.abspath(__file__))


class CrossingFailed(BaseException):
    """A value could not cross between the two processes.

    A BaseException, not an Exception: a test's `pytest.raises(Exception)` must not turn a
    reply that could not be checked into a pass. The channel also remembers it (see
    `Channel.problem`), so a test that catches it anyway still does not pass.
    """

    reason = "cannot-cross"


class CandidateGone(BaseException):
    """The candidate's process ended or broke the protocol."""

    reason = "candidate-died"


class CallInterrupted(CandidateGone):
    """An earlier call was interrupted (a test's signal handler raised while it crossed)
    before the candidate answered it: its answer is still to come, so no call may cross."""

    reason = "interrupted"


class CalledFromAnotherProcess(RuntimeError):
    """The target was called in a process the tests started, which split cannot serve."""


class FrameTooLarge(ValueError):
    """A frame over the cap: the other side broke the protocol."""


# What the channel's own reads and writes fail with when the other side is gone (an exception
# a signal handler raises while a call crosses is none of these: see `Channel._across`).
_CHANNEL_ERRNOS = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ECONNABORTED, errno.ENOTCONN,
                             errno.ESHUTDOWN, errno.EBADF, errno.EIO, errno.ENOBUFS, errno.ENOMEM})


def send_frame(fd, data):
    """One length-prefixed frame."""
    data = _HEADER.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the other process closed the channel")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def recv_frame(fd, cap=FRAME_CAP):
    """The next frame; EOFError when the peer is gone, ValueError when it is too large."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > cap:
        raise FrameTooLarge(f"a frame of {size} bytes is over the {cap}-byte cap")
    return _read_exact(fd, size)


# ------------------------------------------------------------------------------ both sides


class Peer:
    """One end of the channel. Either side may call the other while a call is under way:
    the judge calls the candidate's entry point and the callables it returned; the candidate
    calls back the callables a test passed in. Callables cross as numbered handles (only the
    ones this side exported can be called by the other); everything else crosses by value.
    A stand-in for the other side's object goes back as that object (`["yours", number]`).
    """

    def __init__(self, fd, resolver, capture_output=False, output_cap=65536):
        self.fd = fd
        self.resolver = resolver
        self.capture_output = capture_output
        self.output_cap = output_cap
        self.exported = []  # local callables the other side holds handles to
        self.exported_ids = {}  # id -> number in `exported` (which keeps each object alive)
        # The judge's, while it serves a request of the candidate's (a view's operation, a
        # callback's call, and whatever that calls back): it lends only `_lent` callables, in
        # its reply and in any call it makes meanwhile, and notes no class sent as a value.
        self.lending = False
        self.stand_ins = {}  # the number the other side exported an object under -> this side's stand-in
        self.stand_in_numbers = {}  # id(stand-in) -> (the stand-in, that number)
        # The judge's: the callables it sent in objects' state, {(module, class, attribute):
        # {id: callable}}: what an object of that class may hold there when it comes back.
        self.sent_code = {}
        self.sent_classes = {}  # the judge's: the classes it sent, by id (they may come back)
        self.sent_values = {}  # the judge's: the classes it sent as values (they may come back as values)
        self.owned = []  # the judge's: its own objects the message it last read named (`own`)
        self.made = []  # the judge's: the objects the message it last read rebuilt from state
        self.rebuilt_ids = {}  # the judge's: every object a message of the candidate rebuilt, by id
        self.rebuilt_library = {}  # the judge's: those of them of a library's class, by id
        self.lent_numbers = set()  # the judge's: what it handed out while serving (through a view)
        # The judge's, while it serves a view's operation or a builtin container's code: no
        # object rebuilt from the candidate's state may reach it, in any message (`loads`).
        self.guarding = 0
        # The candidate's: the functions and classes the judge named, by id: they go back by
        # name (a function of its own crosses as a handle).
        self.named = {}
        self.entry = None  # candidate side: the module whose entry point the judge calls
        self.gone = None  # judge side: why the channel can carry no more calls

    def export(self, obj):
        """The handle of a local value that cannot cross by value (the wire's hook).

        The candidate hands out callables, and iterators (a generator, a `zip` it passes a
        callback of the tests), which the judge advances by calling back. The judge hands out
        any object of the tests: a function as a callable, anything else as a view
        (`RemoteView`) with the protocol the object has; it decides each operation
        (`_operation`).
        """
        lazy = self.entry is not None and _is_lazy(obj)
        if self.entry is not None and not callable(obj) and not lazy:
            return None
        if self.entry is None and self.rebuilt_ids.get(id(obj)) is obj:
            # Sent back by value, it is the candidate's state again; as a handle it would be
            # the judge's own object, which the candidate could hand to what a view lends.
            raise TypeError(f"an object the candidate rebuilt ({_kind_name(type(obj))}) crosses back by value "
                            "or not at all")
        if self.lending and isinstance(obj, _CALLABLE_KINDS) and not _lent(obj):
            raise TypeError(f"{getattr(obj, '__qualname__', 'a callable')!s:.80} is a library's: an object "
                            "of the tests lends the candidate only the methods the tests wrote (and those "
                            "a builtin container gives it)")
        index = self.exported_ids.get(id(obj))
        if index is None:
            self.exported.append(obj)
            index = self.exported_ids[id(obj)] = len(self.exported) - 1
            if self.lending:
                self.lent_numbers.add(index)
        if lazy:
            return index, "view iter next"
        if self.entry is not None or isinstance(obj, _CALLABLE_KINDS):
            return index
        return index, " ".join(("view", *_protocol(obj)))

    def dumps(self, value, path="the value"):
        # The candidate's functions never cross by name: named, the judge would hold the real
        # function (`os.popen`) and a test's call of it would run in the judge.
        if self.entry is None:
            # (Classes are noted as sent only in the tests' own calls: one the judge sends back
            # while serving the candidate, `type(x)` of the candidate's object, is the
            # candidate's choice, not the tests'.)
            return wire.dumps(value, path, handles=self.export, returned=self.theirs, sent=self.sent_code,
                              classes=self.sent_classes, values=None if self.lending else self.sent_values)
        return wire.dumps(value, path, handles=self.export, functions=False, returned=self.theirs,
                          named=self.named)

    def fingerprint(self, value):
        """`value` encoded to be compared, never sent: what it holds that would be handed out
        is not (the judge's `exported` table holds only what it sent), and nothing is noted."""
        fresh = {}

        def peek(obj):
            known = self.exported_ids.get(id(obj))
            return known if known is not None else fresh.setdefault(id(obj), wire.MAX_HANDLE - len(fresh))

        if self.entry is None:
            return wire.dumps(value, handles=peek, returned=self.theirs)
        return wire.dumps(value, handles=peek, functions=False, returned=self.theirs, named=self.named)

    def loads(self, frame):
        if self.entry is None:
            self.owned, self.made = [], []
            message = wire.loads(frame, self.resolver, handles=self.stand_in, own=self.own, code=self.sent_here,
                                 classes=self.sent_classes, values=self.sent_values, made=self.made)
            self.note_rebuilt(self.made)
            if self.guarding:
                # (an item of the candidate's iterator, what its key returns: each reaches the
                # code being served as the request's arguments would)
                self.check_owned(self.owned)
            return message
        # The judge's values hold what the tests and the library gave them: nothing to refuse.
        return wire.loads(frame, self.resolver, handles=self.stand_in, own=self.own,
                          code=lambda place, found, rebuilt: True, named=self.named)

    def note_rebuilt(self, made):
        """The judge's: remember the objects a message of the candidate's rebuilt from state
        (they never go back as handles: `export`), and refuse them while it serves a view's
        operation, a lent callable or a builtin container's method: an item of the
        candidate's iterator, what its key returned, an exception it raised, a change it made
        to an argument would each reach the code being served."""
        for obj in made:
            self.rebuilt_ids[id(obj)] = obj
            if _module_of(type(obj)) != "solution":
                self.rebuilt_library[id(obj)] = obj
        if self.guarding and made:
            raise wire.WireError(f"an object the candidate rebuilt ({_kind_name(type(made[0]))}) "
                                 "cannot reach what a view of the tests' lends: its library's code would run here")

    def check_owned(self, owned, guarded=True):
        """The judge's: refuse its own objects the candidate passed back where what it serves
        would use them. What the judge calls with the candidate's arguments may call them: its
        own objects among them only when it would lend them (`list.sort(key=...)` with a test's
        mock, or a library's bound method the tests passed in, would run them). While it serves
        a view's code, a library's object (or a builtin wrapper of one) would have its own
        code run (`keys()`, `__getitem__`, `__setitem__` under a lent `dict.update`)."""
        for mine in owned:
            if callable(mine) and not _lent(mine):
                raise wire.WireError(f"an object of the tests ({_kind_name(type(mine))}) passed back "
                                     "cannot be called by what the judge runs")
            if guarded and not callable(mine) and not _servable(mine):
                raise wire.WireError(f"an object of the tests ({_kind_name(type(mine))}) passed back cannot be "
                                     "handed to what a view of the tests' lends: it is a library's")

    def holds_rebuilt(self, root):
        """The judge's: whether the tests' object `root` holds (through builtin containers, dict
        views and objects' own state) an object of a library's class the candidate rebuilt from
        its state: a result the tests kept. Container code served on `root` would run that
        library's code on the candidate's state (a `traceback.FrameSummary`'s `__eq__` reads the
        file it names). True past `HOLDS_WALK_CAP` objects, when any such object exists."""
        if not self.rebuilt_library:
            return False
        return any(item is _TOO_MANY or item is _OPAQUE or self.rebuilt_library.get(id(item)) is item
                   for item in _reachable(root, HOLDS_WALK_CAP))

    def sent_here(self, place, found, rebuilt):
        """The judge's: whether it sent `found` (a function, class or handle; `rebuilt`: a
        callable object of that class) in the state of an object at `place` (module, class,
        attribute) itself: an object of the tests' or the library's held it there, so one
        coming back may hold it there too."""
        known = self.sent_code.get(place)
        if known is None:
            return False
        if rebuilt:
            return known.get(("of", id(type(found)))) is type(found)
        return known.get(id(found)) is found

    def stand_in(self, number, view=None):
        """This side's stand-in for the other side's object `number` (one per object): a
        function that calls it there, or, on the candidate's side, for an object of the
        judge's that is not a function (`view`: "view" and the operations it has), a
        `RemoteView` of it. The candidate exports only callables: the judge makes no view."""
        made = self.stand_ins.get(number)
        if made is None:
            if view and self.entry is not None:
                made = _view_class(view)(self, number)
            elif view and "next" in view.split(" "):
                # The candidate's iterator, advanced there one item per call (a StopIteration
                # raised there ends it).
                made = _CandidateIterator(remote_callable(self, number))
            else:
                made = remote_callable(self, number)
            self.stand_ins[number] = made
            self.stand_in_numbers[id(made)] = (made, number)
        return made

    def theirs(self, value):
        """The number the other side exported the object under when `value` is this side's
        stand-in for it, else None."""
        known = self.stand_in_numbers.get(id(value))
        return known[1] if known is not None and known[0] is value else None

    def own(self, number):
        """The object this side exported as `number` (the other side sends its stand-in back)."""
        if type(number) is not int or not 0 <= number < len(self.exported):
            raise ValueError(f"no object of this process has the number {number!r}")
        if self.entry is None:
            self.owned.append(self.exported[number])
        return self.exported[number]

    def exchange(self, payload):
        """Send a request and serve the other side's requests until its reply arrives.

        Raises EOFError/OSError/ValueError when the channel breaks, WireError when a message
        cannot be rebuilt here.
        """
        send_frame(self.fd, payload)
        while True:
            message = self.loads(recv_frame(self.fd))
            if type(message) is tuple and len(message) == 7 and message[0] == "request":
                send_frame(self.fd, self.answer(*message[1:]))
                if self.gone is not None:  # a call made while answering broke the channel
                    return None
                continue
            return message

    def answer(self, kind, target, args, kwargs, view=None, state=None):
        """Reply to one request from the other side (never raises for what the call does).
        `view`: what the tests changed in the judge's logging, `state` in its environment and
        working directory, each when it changed (see `logging_view`, `process_view`)."""
        if self.entry is not None:
            _take_view(view)
            _take_process_state(state)
        try:
            if type(args) is not tuple or type(kwargs) is not dict:
                raise TypeError("malformed call")
            guarded = self.entry is None and (kind == "op" or (
                kind == "handle" and type(target) is int and 0 <= target < len(self.exported)
                and (target in self.lent_numbers or _container_code(self.exported[target]))))
            if guarded and self.made:
                # What a view lends (`dict.update`, a method of the tests'), and a builtin
                # container's method the tests passed (`sink=results.update`), would run the
                # library's code of an object rebuilt from the candidate's state (a Maildir's
                # `keys()` reading the judge's files) and hand back what it gives.
                raise TypeError(f"an object the candidate rebuilt ({_kind_name(type(self.made[0]))}) cannot be "
                                "handed to what a view of the tests' lends: its library's code would run here")
            if self.entry is None:
                self.check_owned(self.owned, guarded)
            if (kind == "call" and self.entry is not None and type(target) is tuple
                    and len(target) == 2 and type(target[0]) is str):
                function = (_target(self.entry, target[0]), target[1] is True)
            elif kind == "handle" and type(target) is int and 0 <= target < len(self.exported):
                function = self.exported[target]
                if not isinstance(function, _CALLABLE_KINDS) and self.entry is None:
                    raise TypeError("an object of the tests can be passed back, not called")
                if self.entry is not None and _is_lazy(function):  # the judge advances an iterator
                    if args or kwargs:
                        raise TypeError("an iterator is advanced with no arguments")
                    function = functools.partial(next, function)
            elif (kind == "op" and self.entry is None and type(target) is tuple and len(target) == 3
                    and type(target[0]) is int and 0 <= target[0] < len(self.exported)):
                function = _operation(self.exported[target[0]], target[1], target[2], len(args), kwargs)
            else:
                raise TypeError(f"this side does not answer {kind!r} requests")
            if guarded:
                # (a partial's bound method, and what the partial holds, too)
                served = _unwrapped(function) if kind != "op" else None
                subjects = [self.exported[target[0]]] if kind == "op" else [function]
                if type(served) in (types.MethodType, types.BuiltinMethodType):
                    subjects.append(getattr(served, "__self__", None))
                for subject in subjects:
                    if not isinstance(subject, (types.ModuleType, type(None))) and self.holds_rebuilt(subject):
                        raise TypeError(f"an object of the tests ({_kind_name(type(subject))}) holds an object "
                                        "the candidate rebuilt from its state: its library's code would run here")
        except Exception as error:
            message = f"the call could not be rebuilt: {error}"
            if isinstance(self, Channel) and self.problem is None:
                # The test fails as one the judge could not serve, whatever the candidate
                # does with the refusal.
                self.problem = (CrossingFailed.reason, message)
            return wire.dumps(("cannot-cross", message))
        if self.entry is not None:
            return _answer(self, function, args, kwargs, drain=kind != "op")
        lending, self.lending = self.lending, True
        self.guarding += guarded
        try:
            return _answer(self, function, args, kwargs, drain=kind != "op")
        finally:
            self.lending = lending
            self.guarding -= guarded

    def call(self, kind, target, args, kwargs):
        """Call across; return the reply as a message (see _answer)."""
        return self.exchange(self.dumps(("request", kind, target, args, kwargs, None, None), "the arguments"))


class _CandidateIterator:
    """The judge's stand-in for an iterator of the candidate's: each item is one call there
    (no item is compared with anything: a StopIteration raised there ends it)."""

    __slots__ = ("_next",)

    def __init__(self, advance):
        self._next = advance

    def __iter__(self):
        return self

    def __next__(self):
        return self._next()


# What the judge lets the candidate call back: functions and methods, not objects that merely
# define __call__ (a test case's __call__ runs the test; a mock records whatever it is given).
_CALLABLE_KINDS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                   types.BuiltinMethodType, functools.partial)


class RemoteView:
    """The candidate's stand-in for an object of the judge's that is not a function (an
    object of a class the tests define, an iterator they pass): each use of it is one
    operation done there, on the tests' object, by value both ways (`_operation` says which
    the judge does). Handed back, it is the tests' object again. Its class has the protocol
    the object's has (`_protocol`: items, length, iteration...), no more, so that code that
    asks `hasattr(x, "__len__")` is told what it would be told in-process. No dunder attribute
    is read across: Python asks objects for those (`__deepcopy__`, `__array__`) as probes."""

    __slots__ = ("__weakref__", "_knowbench_number", "_knowbench_peer")

    def __init__(self, peer, number):
        object.__setattr__(self, "_knowbench_peer", peer)
        object.__setattr__(self, "_knowbench_number", number)

    def _knowbench_do(self, op, name=None, args=(), kwargs=None):
        peer = object.__getattribute__(self, "_knowbench_peer")
        number = object.__getattribute__(self, "_knowbench_number")
        kwargs = {} if kwargs is None else kwargs
        _VIEW_USES[0] += 1
        try:
            reply = peer.call("op", (number, op, name), args, kwargs)
        except wire.Unencodable as error:
            raise TypeError(f"the operation cannot cross: {error}") from None
        return settle(peer, reply, args, kwargs, None)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._knowbench_do("getattr", name)

    def __setattr__(self, name, value):
        raise AttributeError(f"an object of the tests cannot be given attributes by the candidate ({name})")

    def __delattr__(self, name):
        raise AttributeError(f"an object of the tests cannot lose attributes to the candidate ({name})")

    def __copy__(self):  # (a copy is the tests' object's, made there: a view of a new object)
        return self._knowbench_do("copy")

    def __deepcopy__(self, memo):
        return self._knowbench_do("deepcopy")

    def __repr__(self):
        return f"<object #{object.__getattribute__(self, '_knowbench_number')} of the tests' process>"


_HASH_KEY = []  # the judge's: a key of its own, made at its first hash a view asks for


def _keyed_hash(value):
    """`value` (a hash made in the judge) as the candidate's view gets it: a digest under a key
    only the judge's process has. Equal objects still hash alike, but nothing the hash was made
    of can be worked out (a tuple's hash can be undone item by item, and an item that hashes by
    identity, a function or `None`, would give its address)."""
    import hashlib  # stdlib; loaded only when a view is hashed

    if not _HASH_KEY:
        _HASH_KEY.append(os.urandom(16))
    digest = hashlib.blake2b(value.to_bytes(8, "little", signed=True), key=_HASH_KEY[0], digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _swapped(forward):
    """`forward` with its operands swapped: what a reflected operator (`__radd__`) does."""
    return lambda obj, other: forward(other, obj)


# What a view does there: {operation: (the special method that gives it, its argument count,
# what does it, whether an iterator's)}. A view's class has those its object's class defines
# below `object` (comparison, hash and text included: a view of a class that keeps `object`'s
# compares and hashes by identity, as the object does).
_OPERATIONS = {
    "getitem": ("__getitem__", 1, operator.getitem, False), "setitem": ("__setitem__", 2, operator.setitem, False),
    "delitem": ("__delitem__", 1, operator.delitem, False), "len": ("__len__", 0, len, False),
    "contains": ("__contains__", 1, operator.contains, False), "bool": ("__bool__", 0, bool, False),
    "iter": ("__iter__", 0, iter, True), "next": ("__next__", 0, next, True),
    "eq": ("__eq__", 1, operator.eq, False), "ne": ("__ne__", 1, operator.ne, False),
    "hash": ("__hash__", 0, lambda obj: _keyed_hash(hash(obj)), False), "repr": ("__repr__", 0, repr, False),
    "str": ("__str__", 0, str, False),
    "call": ("__call__", None, None, False), "reversed": ("__reversed__", 0, reversed, False),
    "lt": ("__lt__", 1, operator.lt, False), "le": ("__le__", 1, operator.le, False),
    "gt": ("__gt__", 1, operator.gt, False), "ge": ("__ge__", 1, operator.ge, False),
    # Arithmetic and set operators, in each direction and in place (`v += [4]` changes the
    # tests' object, as it does in-process).
    **{f"{prefix}{name}": (f"__{prefix}{name}__", 1, does, False) for name, forward, inplace in (
        ("add", operator.add, operator.iadd), ("sub", operator.sub, operator.isub),
        ("mul", operator.mul, operator.imul), ("or", operator.or_, operator.ior),
        ("and", operator.and_, operator.iand), ("xor", operator.xor, operator.ixor))
       for prefix, does in (("", forward), ("r", _swapped(forward)), ("i", inplace))},
}
# What a view of a dict's keys, values or items (the tests' object's `keys()`) does: it only
# reads the dict, as iterating it in the tests' process would.
_CONTAINER_VIEWS = frozenset({type({}.keys()), type({}.values()), type({}.items()),
                              collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView})
_CONTAINER_OPS = ("len", "contains", "iter")
_COPIES = {"copy": copy.copy, "deepcopy": copy.deepcopy}  # what any object of the tests' classes does


def _view_method(op):
    special, count, _, _ = _OPERATIONS[op]

    if count is None:  # a call: any arguments
        def method(self, *args, **kwargs):
            return self._knowbench_do(op, None, args, kwargs)
    else:
        def method(self, *args):
            if len(args) != count:
                raise TypeError(f"{special} takes {count} argument(s)")
            return self._knowbench_do(op, None, args)

    method.__name__ = special
    return method


_VIEW_CLASSES = {}


def _view_class(view):
    """The candidate's class of views that do the operations `view` names ("view OP ...")."""
    made = _VIEW_CLASSES.get(view)
    if made is None:
        ops = view.split(" ")[1:]
        # (A class that defines __eq__ and no __hash__ is unhashable, the view's as the object's.)
        made = _VIEW_CLASSES[view] = type("RemoteView", (RemoteView,), {
            "__slots__": (), **({"__hash__": None} if "unhashable" in ops else {}),
            # (one view per object: hashed by the view's identity, it hashes as the object does)
            **({"__hash__": object.__hash__} if "identityhash" in ops else {}),
            **{_OPERATIONS[op][0]: _view_method(op) for op in ops if op in _OPERATIONS}})
        # `isinstance(x, Mapping)` answers as for the object (toolz's `merge` asks it).
        for op in ops:
            abc = _ABCS.get(op[3:]) if op.startswith("is_") else None
            if abc is not None:
                abc.register(made)
    return made


# The abstract classes a view is registered with when its object is an instance of them.
_ABCS = {name: getattr(collections.abc, name) for name in (
    "MutableMapping", "Mapping", "MutableSequence", "Sequence", "MutableSet", "Set")}


def _protocol(obj):
    """The operations a view of the tests' object `obj` offers: those of `_OPERATIONS` its
    class has (an iterator's two, or those of a class the tests define), and the abstract
    collections it is one of (`is_Mapping`)."""
    kind = type(obj)
    if not _tests_class(kind):
        return ("iter", "next") if _is_iterator(kind) else _CONTAINER_OPS if kind in _CONTAINER_VIEWS else ()
    found = {op: _special(kind, special) for op, (special, _, _, _) in _OPERATIONS.items()}
    ops = tuple(op for op, there in found.items() if there not in (None, _UNHASHABLE))
    ops += tuple(f"is_{name}" for name, abc in _ABCS.items() if _is_instance(obj, abc))
    if found["hash"] is _UNHASHABLE:
        return (*ops, "unhashable")
    return (*ops, "identityhash") if found["hash"] is None and _identity_hash(kind) else ops


def _is_instance(obj, abc):
    try:
        return isinstance(obj, abc)
    except Exception:
        return False


_UNHASHABLE = object()


def _identity_hash(kind):
    """Whether a class of the tests' names `object.__hash__` as its hash (an identity hash
    with an `__eq__` of its own): its view hashes by identity where it is, the candidate's
    process, since the judge's hash is the object's address."""
    try:
        for base in type.__dict__["__mro__"].__get__(kind)[:-1]:
            space = type.__dict__["__dict__"].__get__(base)
            if "__hash__" in space:
                return space["__hash__"] is object.__hash__
    except Exception:
        return False
    return False


def _special(kind, special):
    """The special method `kind` has below `object`, when the tests wrote it or a builtin
    container or `collections` gives it to a class whose bases are all the tests', builtins'
    and `collections`' (`_plain_bases`). None when it is `object`'s, a library's, one a class
    of the tests names but did not write (`__call__ = staticmethod(open)`,
    `__hash__ = object.__hash__`), or none: a library's would run that library's code on the
    candidate's values (`shelve.Shelf.__setitem__`, a ctypes pointer's indexing), and so would
    a mixin of `collections.abc` on a class with a library base (`Mapping.get` calling the
    library's `__getitem__`). `_UNHASHABLE` for a `__hash__` set to None."""
    try:
        for base in type.__dict__["__mro__"].__get__(kind)[:-1]:
            space = type.__dict__["__dict__"].__get__(base)
            if special in space:
                found = space[special]
                if found is None:
                    return _UNHASHABLE
                module = str(type.__dict__["__module__"].__get__(base))
                if module == wire.TESTS_MODULE:
                    return found if _tests_code(found) else None
                return found if module in _CONTAINER_MODULES and _plain_bases(kind) else None
    except Exception:
        return None
    return None


def _tests_code(value):
    """Whether `value`, found in a class of the tests, is code the tests wrote: a function of
    theirs, or a static or class method of one."""
    if type(value) in (staticmethod, classmethod):
        value = value.__func__
    return type(value) is types.FunctionType and _tests_function(value)


# Modules whose classes may sit under a class of the tests without making its container code a
# library's: builtins and `collections` (`_CONTAINER_MODULES`), and the abstract bases of `abc`
# and `typing` (`Generic`), which add no methods that do anything.
_PLAIN_BASE_MODULES = frozenset({"abc", "typing"})


def _plain_bases(kind):
    """Whether every class `kind` derives from is the tests', or one of builtins',
    `collections`', `abc`'s or `typing`'s: then the code of a builtin container or
    `collections` that an object of it runs calls only the tests' or those classes' code."""
    try:
        for base in type.__dict__["__mro__"].__get__(kind):
            module = str(type.__dict__["__module__"].__get__(base))
            if module != wire.TESTS_MODULE and module not in _CONTAINER_MODULES and module not in _PLAIN_BASE_MODULES:
                return False
        return True
    except Exception:
        return False


def _forwards_safely(obj, depth=0):
    """Whether what `collections`' code of the tests' object `obj` hands its work to is the
    tests' or a builtin container's: a `ChainMap`'s maps, a `UserDict`'s, `UserList`'s or
    `UserString`'s data, a `defaultdict`'s factory. A `ChainMap` of the tests layered over
    `os.environ` would otherwise set the judge's environment for the candidate (its
    `parents` is a `ChainMap` of the tests' class whose first map is `os.environ`)."""
    if depth > 8:
        return False
    try:
        if isinstance(obj, collections.defaultdict):
            factory = obj.default_factory
            if not (factory is None or (type(factory) is type and factory.__module__ == "builtins"
                                        and factory is not type) or _lent(factory)):
                return False
        if isinstance(obj, collections.ChainMap):
            held = _instance_state(obj).get("maps")
            if type(held) is not list:
                return False
        elif isinstance(obj, (collections.UserDict, collections.UserList, collections.UserString)):
            held = [_instance_state(obj).get("data")]
        else:
            return True
        return all(_plain_container(item, depth + 1) for item in held)
    except Exception:
        return False


def _instance_state(obj):
    """The object's own `__dict__`, read past its class's `__getattribute__` ({} without one)."""
    try:
        state = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return state if type(state) is dict else {}


def _plain_container(obj, depth):
    """Whether `obj` is a builtin container (or `collections`'), or an object of the tests'
    whose container code is safe to run (`_plain_bases`, `_forwards_safely`)."""
    kind = type(obj)
    if kind in (dict, list, str, bytes, tuple, set, frozenset, collections.OrderedDict, collections.Counter,
                collections.deque, collections.defaultdict):
        return kind is not collections.defaultdict or _forwards_safely(obj, depth)
    return _tests_class(kind) and _plain_bases(kind) and _forwards_safely(obj, depth)


def _operation(obj, op, name, count, kwargs):
    """The judge's: what a view's operation `op` on the tests' object `obj` does, as a
    function of the operation's arguments; TypeError when the judge does not do it.

    - An object of a class the tests define (not a testing framework's subclass) answers
      attribute reads (no dunder: `__dict__`, `__class__`, `__globals__` would reach the
      tests' module), items, length, membership, truth and iteration: its own code runs, on
      what the candidate sends by value, as a callback of the tests' would. A method read is
      a function the candidate can call; nothing else it reaches answers more than this.
    - An iterator (a generator, `iter(...)` of a list) is advanced, one item per request, so
      that the tests see exactly what the candidate consumed.
    - A view of a dict's keys, values or items is iterated, measured and searched.
    - Nothing is ever set as an attribute: a test case's assertion or a method replaced
      would answer for the candidate.
    - Anything else (a library's object, a module, a class, a frame) is only passed back."""
    if (op not in _COPIES and op != "getattr" and op not in _OPERATIONS) or type(kwargs) is not dict or (
            kwargs and op != "call"):
        raise TypeError(f"no such operation: {str(op)[:40]!r}")
    _, arity, does, iterating = _OPERATIONS.get(op, (None, 0, _COPIES.get(op), False))
    if arity is not None and count != arity:
        raise TypeError(f"{op} takes {arity} argument(s)")
    kind = type(obj)
    if not _tests_class(kind):
        if iterating and _is_iterator(kind):
            return (lambda: next(obj)) if op == "next" else (lambda: obj)
        if kind in _CONTAINER_VIEWS and op in _CONTAINER_OPS:
            return lambda *args: does(obj, *args)
        raise TypeError(f"an object of the tests ({_kind_name(kind)}) can be passed back, not used")
    if op == "getattr":
        if type(name) is not str or (name.startswith("__") and name.endswith("__")):
            raise TypeError("no dunder attribute of the tests' objects crosses")
        if not _plain_bases(kind) and not _tests_attribute(obj, kind, name):
            # (a library base's property or `__getattr__` would run its code here)
            raise TypeError(f"{name[:40]!r} of an object of {_kind_name(kind)} is its library base's")
        return lambda: getattr(obj, name)
    if op in _COPIES:  # (the tests' own class, copied as `copy` copies it in their process)
        if not _copyable(obj, kind, deep=op == "deepcopy"):
            raise TypeError(f"a copy of an object of {_kind_name(kind)} would run a library's code "
                            "(its base's or what it holds)")
        return lambda: does(obj)
    # Only what the object's class defines below `object` (the view's class has the same):
    # `object`'s own hash and repr would tell the candidate the judge's addresses.
    found = _special(kind, _OPERATIONS[op][0])
    if found in (None, _UNHASHABLE):
        raise TypeError(f"an object of {_kind_name(kind)} has no {_OPERATIONS[op][0]}")
    if not _tests_code(found) and not _forwards_safely(obj):
        raise TypeError(f"an object of {_kind_name(kind)} holds what its {_OPERATIONS[op][0]} would hand "
                        "the candidate's values to: only a builtin container or an object of the tests may")
    if op in ("repr", "str"):
        return lambda: _without_addresses(does(obj))
    return obj if op == "call" else lambda *args: does(obj, *args)


# What `copy` and `deepcopy` ask an object's class for.
_COPY_PROTOCOL = ("__copy__", "__deepcopy__", "__reduce_ex__", "__reduce__", "__getstate__", "__setstate__",
                  "__getnewargs_ex__", "__getnewargs__")
_PLAIN_VALUES = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice)
_BUILTIN_CONTAINERS = (dict, list, tuple, set, frozenset, collections.OrderedDict, collections.Counter,
                       collections.deque, collections.defaultdict)
COPY_WALK_CAP = 10_000  # objects a deep copy's check looks through


def _copyable(obj, kind, deep):
    """Whether copying the tests' object runs only the tests' and builtins' code: its class has
    no library base, names no copy hook the tests did not write (`__deepcopy__ =
    staticmethod(print)`), and, for a deep copy, holds only plain values, builtin containers
    and such objects of the tests (a library's object would run its own `__reduce_ex__`)."""
    if not _plain_bases(kind):
        return False
    for name in _COPY_PROTOCOL:
        module, found = _first_naming(kind, name)
        if module == wire.TESTS_MODULE and found is not None and not _tests_code(found):
            return False
    if not deep:
        return True
    for item in _reachable(obj, COPY_WALK_CAP):
        if item is _TOO_MANY:
            return False
        if type(item) in _BUILTIN_CONTAINERS:
            if type(item) is collections.defaultdict and not _forwards_safely(item):
                return False
        elif item is not obj and not (_tests_class(type(item)) and _plain_bases(type(item))
                                      and _copyable(item, type(item), deep=False)):
            return False
    return True


_TOO_MANY = object()


def _reachable(root, cap):
    """Each object `root` holds, itself included, at any depth (`_held`), once; plain values
    left out; `_TOO_MANY` once more than `cap` were met. The caller sees each object before
    what it holds is read."""
    seen, todo = {}, [root]  # (id -> object: held, so that no id is taken again meanwhile)
    while todo:
        item = todo.pop()
        if type(item) in _PLAIN_VALUES or id(item) in seen:
            continue
        seen[id(item)] = item
        if len(seen) > cap:
            yield _TOO_MANY
            return
        yield item
        todo.extend(_held(item))


def _slot_values(obj):
    """The values in the slots the classes of the tests' object declare (set ones only)."""
    values = []
    for base in type.__dict__["__mro__"].__get__(type(obj)):
        space = type.__dict__["__dict__"].__get__(base)
        slots = space.get("__slots__", ())
        for name in (slots,) if type(slots) is str else slots if type(slots) in (tuple, list) else ():
            descriptor = space.get(name) if type(name) is str else None
            if type(descriptor) is types.MemberDescriptorType:
                try:
                    values.append(descriptor.__get__(obj, base))
                except AttributeError:
                    pass
    return values


def _first_naming(kind, name):
    """(module, value) of the first class in `kind`'s bases that names `name`, else (None, None)."""
    try:
        for base in type.__dict__["__mro__"].__get__(kind):
            space = type.__dict__["__dict__"].__get__(base)
            if name in space:
                return str(type.__dict__["__module__"].__get__(base)), space[name]
    except Exception:
        return wire.TESTS_MODULE, _first_naming  # (unreadable: taken as not the tests' code)
    return None, None


def _tests_attribute(obj, kind, name):
    """Whether attribute `name` of the tests' object is in its own `__dict__` or a class of
    the tests' names it: nothing of a library base answers it."""
    try:
        for base in type.__dict__["__mro__"].__get__(kind):
            if name in type.__dict__["__dict__"].__get__(base):
                return str(type.__dict__["__module__"].__get__(base)) == wire.TESTS_MODULE
        state = object.__getattribute__(obj, "__dict__")
        return type(state) is dict and name in state
    except Exception:
        return False


def _is_iterator(kind):
    try:
        return callable(inspect.getattr_static(kind, "__next__", None))
    except Exception:
        return False


def _tests_class(kind):
    """Whether `kind` is a class the tests define, none of whose bases is a testing framework's
    or knowbench's (a test case, a mock, a fixture's object), and no test class: one with
    test methods (pytest's `class TestX:` has no base to tell it by; its instance holds what a
    set-up method prepared, and its methods are the tests)."""
    try:
        mro = type.__dict__["__mro__"].__get__(kind)
        if type.__dict__["__module__"].__get__(kind) != wire.TESTS_MODULE:
            return False
        for base in mro:
            module = str(type.__dict__["__module__"].__get__(base))
            if module != wire.TESTS_MODULE and wire.testing_module(module):
                return False
            if module == wire.TESTS_MODULE and any(
                    type(name) is str and name.startswith("test") and callable(value)
                    for name, value in type.__dict__["__dict__"].__get__(base).items()):
                return False
        return True
    except Exception:
        return False


def _unwrapped(function):
    """`function` with the `functools.partial`s around it taken off (at most 8)."""
    for _ in range(8):
        if type(function) is not functools.partial:
            break
        function = function.func
    return function


def _container_code(function):
    """Whether calling `function` runs a builtin container's or `collections`' code (a bound
    `dict.update`, `set.add`, `Counter.update`, or a partial of one), which calls protocol
    methods of its arguments."""
    function = _unwrapped(function)
    if type(function) is functools.partial:
        return True  # (more than 8 deep: taken as container code)
    if type(function) is types.BuiltinMethodType:
        return not isinstance(getattr(function, "__self__", None), types.ModuleType)
    if type(function) is types.MethodType and type(function.__func__) is types.FunctionType:
        return _container_function(function.__func__)
    return False


def _tests_function(function):
    """Whether the tests wrote `function`: its globals are the tests' module's (`__module__`
    is whatever `functools.wraps` copied: a library's wrapper of a test's function)."""
    try:
        space = types.FunctionType.__dict__["__globals__"].__get__(function)
        return type(space) is dict and space.get("__name__") == wire.TESTS_MODULE
    except Exception:
        return False


# Where the code of a method a builtin container gives an object is (`dict.update` of a dict
# subclass the tests define): it only reads and changes the object.
_CONTAINER_MODULES = frozenset({"builtins", "collections", "collections.abc", "_collections_abc"})


def _lent(value, depth=0):
    """Whether a callable the judge encodes while it serves the candidate (`Peer.lending`) may
    be lent to it (called back with its arguments, in the judge): a function the tests wrote, a method of one or a partial of
    one, or a method that a builtin container or `collections` gives an object of a class the
    tests define. A library's method (a `pathlib.Path` subclass's `write_text`, a wrapper's
    `__getattr__` handing out `sqlite3.Connection.execute`) would do what the candidate asks
    with the judge's rights."""
    kind = type(value)
    if kind is types.FunctionType:
        return _tests_function(value)
    if _tests_class(kind):  # an object of the tests' own class: its __call__ (`_operation`)
        return _special(kind, "__call__") not in (None, _UNHASHABLE)
    if kind is functools.partial:
        return depth < 8 and _lent(value.func, depth + 1)
    if kind is types.MethodType:
        function, owner = value.__func__, value.__self__
        if type(function) is not types.FunctionType:
            return False
        return _tests_function(function) or (_container_function(function) and _container_owner(owner))
    if kind is types.BuiltinMethodType:
        owner = getattr(value, "__self__", None)
        if owner is None or not _container_owner(owner):
            return False
        for base in type.__dict__["__mro__"].__get__(type(owner)):
            if value.__name__ in type.__dict__["__dict__"].__get__(base):
                return str(type.__dict__["__module__"].__get__(base)) in _CONTAINER_MODULES
    return False


def _container_function(function):
    """Whether `collections` (or `collections.abc`) wrote `function`: by its globals, as
    `_tests_function` tells the tests' (`__module__` can be anything)."""
    try:
        space = types.FunctionType.__dict__["__globals__"].__get__(function)
        return type(space) is dict and space.get("__name__") in _CONTAINER_MODULES
    except Exception:
        return False


def _container_owner(owner):
    """Whether a builtin container's or `collections`' method of `owner` may be lent: it is an
    object of the tests' class with no library base, whose container code hands its work only
    to builtin containers or the tests' objects (`_plain_bases`, `_forwards_safely`)."""
    kind = type(owner)
    return _tests_class(kind) and _plain_bases(kind) and _forwards_safely(owner)


def _servable(obj):
    """Whether an object of the judge's may be handed to what it serves the candidate: a plain
    value, or a builtin container, one of `collections` or of the tests' whose code calls only
    what it holds (`_plain_container`); not a library's object (nor one of the tests' classes
    with a library base, nor a builtin wrapper of one, a `MappingProxyType` or a weak proxy),
    whose own code would run on the request."""
    return type(obj) in _PLAIN_VALUES or _plain_container(obj, 0)


HOLDS_WALK_CAP = 10_000  # objects `Peer.holds_rebuilt` looks through


_OPAQUE = object()  # what `_held` gives for an object whose contents it cannot read


def _held(obj):
    """What `obj` holds, read without running any code of its: a builtin container's items (a
    subclass's too, through the builtin's own methods), a dict view's, a weak reference's
    object, a function's defaults and closure, a partial's or bound method's parts, an object
    array's items, an object's own `__dict__` and slots. `[_OPAQUE]` for a builtin holder it
    cannot read (a `MappingProxyType`); nothing for an object the garbage collector does not
    track, which holds no object that could hold another."""
    if isinstance(obj, (types.ModuleType, type, types.CodeType)) or not gc.is_tracked(obj):
        return []  # (the process's namespaces: no one's data is kept only there)
    held = []
    kind = type(obj)
    if isinstance(obj, dict):
        held.extend(item for pair in dict.items(obj) for item in pair)
    elif isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
        base = next(kind for kind in (list, tuple, set, frozenset, collections.deque) if isinstance(obj, kind))
        held.extend(base.__iter__(obj))
    elif kind in (type({}.keys()), type({}.values()), type({}.items())):
        held.extend(obj)
    elif isinstance(obj, weakref.ref):
        held.append(weakref.ref.__call__(obj))
    elif kind is types.FunctionType:
        held += [obj.__defaults__, obj.__kwdefaults__, *_cell_contents(obj.__closure__)]
    elif kind is functools.partial:
        held += [obj.func, obj.args, obj.keywords]
    elif kind in (types.MethodType, types.BuiltinMethodType):
        held += [obj.__self__, getattr(obj, "__func__", None)]
    elif _module_of(kind) == "numpy" and kind.__name__ == "ndarray":
        held.extend(obj.flat if obj.dtype == object else ())
    elif not type.__dict__["__flags__"].__get__(kind) & _HEAP_TYPE:
        return [_OPAQUE]  # a builtin holder it has no reader for
    held.extend(_instance_state(obj).values())
    held.extend(_slot_values(obj))
    return held


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (its data is in __dict__ and slots)


def _cell_contents(cells):
    """What the cells of a closure hold (an empty one holds nothing)."""
    contents = []
    for cell in cells or ():
        try:
            contents.append(cell.cell_contents)
        except ValueError:
            pass
    return contents


def _module_of(kind):
    try:
        return str(type.__dict__["__module__"].__get__(kind))
    except Exception:
        return ""


def _kind_name(kind):
    try:
        return str(type.__dict__["__qualname__"].__get__(kind))[:80]
    except Exception:
        return "an object"


def remote_callable(peer, number):
    """A function standing for a callable of the other process: calling it calls that one
    there, by value. A plain function (not an object with `__call__`), so that it binds as a
    method when it ends up in a class body, and compares by identity only."""
    def remote(*args, **kwargs):
        if isinstance(peer, Channel):
            return peer.call_handle(number, args, kwargs)
        try:
            reply = peer.call("handle", number, args, kwargs)
        except wire.Unencodable as error:
            raise TypeError(f"the call cannot cross: {error}") from None
        return settle(peer, reply, args, kwargs, None)

    remote.__name__ = remote.__qualname__ = f"callable_{number}_of_the_other_process"
    return remote


def settle(peer, reply, args, kwargs, fail):
    """Make a reply happen here: its effects, then its value or its exception.

    `fail(kind, message)` reports a broken or uncrossable reply (the judge remembers it for
    the verdict); None raises it plainly.
    """
    def broken(kind, message):
        if fail is not None:
            fail(kind, message)
        raise kind(message)

    if type(reply) is not tuple or not reply or type(reply[0]) is not str:
        broken(CandidateGone, "the other process broke the protocol")
    if reply[0] == "cannot-cross" and len(reply) == 2 and type(reply[1]) is str:
        broken(CrossingFailed, reply[1])
    if reply[0] not in ("return", "iterate", "raise") or len(reply) != 4:
        broken(CandidateGone, "the other process broke the protocol")
    _, value, extra, effects = reply
    _replay(peer, effects, args, kwargs, broken)
    if reply[0] == "return":
        return value
    if reply[0] == "iterate":
        if type(value) is not list:
            broken(CandidateGone, "the other process broke the protocol")
        return _iterate(value, None if extra is None else _rebuild(peer, extra, "", broken))
    raise _rebuild(peer, value, extra, broken)


def _exception(peer, data):
    """An exception (or warning) the other process recorded, rebuilt here: on the judge's
    side, its arguments and attributes name classes as values only as any value of the
    candidate's may (`wire.loads`' `values`)."""
    if peer.entry is None:
        made = []
        error = wire.decode_exception(data, peer.resolver, values=peer.sent_values, classes=peer.sent_classes,
                                      made=made)
        peer.note_rebuilt(made)
        return error
    return wire.decode_exception(data, peer.resolver)


def _rebuild(peer, data, frames, broken):
    """An exception raised in the other process, as the nearest class known here."""
    try:
        error = _exception(peer, data)
    except Exception as problem:  # WireError, or a class that refused to be made here
        broken(CrossingFailed, f"the other process's exception cannot be rebuilt here: {problem}")
    if type(frames) is str and frames:
        try:
            error.knowbench_remote_frames = frames
        except Exception:
            pass
    return error


def _write(stream, output):
    """Write what the candidate's call printed to `stream` (this process's `sys.stdout` or
    `sys.stderr`): bytes as they are into the harness's capture (`capsys`: pytest's
    `capsysbinary` reads them back), else as text, through the stream's own encoding. None:
    nothing was printed."""
    if type(output) is bytes and output:
        # (the harness's class: the runner's, or the copy a mined spec carries)
        if type(stream).__name__ == "_KbCaptureIO" and isinstance(stream, io.TextIOWrapper) \
                and type(stream.buffer) is io.BytesIO:
            stream.flush()
            stream.buffer.write(output)
            return
        output = output.decode("utf-8", "replace")
    if type(output) is str and output:
        stream.write(output)


def _replay(peer, effects, args, kwargs, broken):
    """What the call printed, warned and logged, and what it changed in its arguments, happen
    here too."""
    if effects is None:  # (what a call that did none of these sends)
        return
    if type(effects) is not tuple or len(effects) != 5:
        broken(CandidateGone, "the other process broke the protocol")
    mutated, out, err, warned, logged = effects
    _write(sys.stdout, out)
    _write(sys.stderr, err)
    if type(warned) is list:
        for warning in warned:
            _warn(peer, warning, broken)
    if type(logged) is list and logged:
        _log(peer, logged, broken)
    if mutated is None:
        return
    if (type(mutated) is not tuple or len(mutated) != 2 or type(mutated[0]) is not tuple
            or type(mutated[1]) is not dict or len(mutated[0]) != len(args)
            or set(mutated[1]) != set(kwargs)):
        broken(CrossingFailed, "the changes to the arguments do not match the call")
    pairs = [(f"argument {number}", original, new)
             for number, (original, new) in enumerate(zip(args, mutated[0]), 1)]  # noqa: B905 (Python 3.8 and 3.9 have no strict; lengths checked above)
    pairs += [(f"argument {name!r}", original, mutated[1][name]) for name, original in kwargs.items()]
    _note_module_globals()
    for what, original, new in pairs:
        # A change that could not be made here too (another dtype for an array passed in)
        # fails the call: dropped, it would pass a test that checks the argument was left alone.
        # So does one that raises while it is made or compared (an array over memory numpy
        # cannot flag writable, a signalling NaN the candidate put in its reply): never an
        # exception a test could take for the target's own.
        try:
            wire.assign_in_place(original, new, kept=_process_state)
            made = wire.mirrors(original, new)
        except Exception as error:
            made, what = False, f"{what} ({type(error).__name__} when the change was made here)"
        if not made:
            broken(CrossingFailed, f"the candidate changed {what} in a way that cannot be made "
                                   "in the tests' process too")


_MODULE_STATE = {}  # id -> object: what modules of the judge's process hold as globals
_MODULES_SEEN = set()  # the names of the modules whose globals are in it
# What decides the programs, libraries and modules the judge's process and its subprocesses run.
_RUNS_WHAT = (("os", ("environ", "environb")), ("posix", ("environ",)),
              ("sys", ("path", "meta_path", "path_hooks", "path_importer_cache", "modules",
                       # (what the candidate printed is written there first: a copy of the
                       # stream put back over it would erase it, `render(sys.stdout)` under capsys)
                       "stdout", "stderr", "__stdout__", "__stderr__")),
              ("warnings", ("filters",)))


def _process_state(obj):
    """Whether `obj` is held as a global by a module of the judge's process other than the
    tests' and the program's (`os.environ`, `sys.path`, `sys.modules`, `warnings.filters`, a
    library's registry): process state a change the candidate made to an argument is never
    replayed into. In `os.environ` it would choose the programs and libraries the tests'
    subprocesses run, in `sys.path` what the tests import. The table is taken the first time
    a change is replayed, and extended on every later one with the globals of each module
    imported since (a test's `importlib.import_module`, a library's lazy import,
    `_note_module_globals`); what decides which programs
    and modules the judge's process runs is looked up again on every replay, since a test
    may rebind it (`_RUNS_WHAT`). An array or pandas object over memory such a global holds
    is one too. A global a module rebinds after its table was taken is not in it."""
    for module_name, names in _RUNS_WHAT:
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            if getattr(module, name, None) is obj:
                return True
    if _MODULE_STATE.get(id(obj)) is obj:
        return True
    # An array, or a pandas object, over memory such a global holds (`TABLE[:5]`,
    # `np.frombuffer(BUFFER)`, `pd.DataFrame(TABLE, copy=False)`): a change made there would be
    # made in the global too, and one made by replacing the pandas object's data would not.
    arrays = _arrays_of(obj)
    if not arrays or not _MODULE_BUFFERS:
        return False
    others = [other for held in _MODULE_BUFFERS for other in _arrays_of(held) or (held,)]
    try:
        return any(sys.modules["numpy"].may_share_memory(array, other) for other in others for array in arrays)
    except Exception:  # (what numpy cannot compare counts as shared)
        return True


_BUFFER_TYPES = {("builtins", "bytearray"), ("builtins", "memoryview"), ("array", "array"), ("mmap", "mmap")}
_MODULE_BUFFERS = []  # what in `_MODULE_STATE` holds memory an array can be made over


def _arrays_of(obj):
    """The numpy arrays holding `obj`'s data: itself (an ndarray), or those under a pandas
    DataFrame's or Series' blocks (through their extension arrays' `_ndarray`, `_data`,
    `_mask`); () for anything else."""
    np, kind = sys.modules.get("numpy"), type(obj)
    if np is None:
        return ()
    if kind is np.ndarray:
        return (obj,)
    pd = sys.modules.get("pandas")
    if pd is None or kind not in (pd.DataFrame, pd.Series):
        return ()
    arrays = []
    for block in obj._mgr.blocks:
        values = block.values
        for candidate in (values, *(getattr(values, name, None) for name in ("_ndarray", "_data", "_mask"))):
            if type(candidate) is np.ndarray:
                arrays.append(candidate)
    return tuple(arrays)


def _note_module_globals():
    """Add to `_process_state`'s table the globals of the modules imported since it was last
    taken (all of them, the first time): once per replayed call."""
    if _MODULES_SEEN.issuperset(sys.modules):
        return
    _MODULE_STATE[id(_MODULE_STATE)] = _MODULE_STATE
    for name, module in list(sys.modules.items()):
        if name in _MODULES_SEEN:
            continue
        _MODULES_SEEN.add(name)
        if name in (wire.TESTS_MODULE, "solution") or type(module) is not types.ModuleType:
            continue
        try:
            space = object.__getattribute__(module, "__dict__")
        except Exception:
            continue
        for value in list(space.values()) if type(space) is dict else ():
            if not isinstance(value, (types.ModuleType, types.FunctionType, type, int, str, float,
                                      bool, bytes, tuple, frozenset, type(None))):
                _MODULE_STATE[id(value)] = value
                if _arrays_of(value) or (type(value).__module__, type(value).__name__) in _BUFFER_TYPES:
                    _MODULE_BUFFERS.append(value)


def _warn(peer, warning, broken):
    """Raise here a run of warnings the call raised there (see `_warning_runs`)."""
    if type(warning) is not tuple or len(warning) != 4:
        broken(CandidateGone, "the other process broke the protocol")
    data, filename, lineno, count = warning
    if type(filename) is not str or type(lineno) is not int or type(count) is not int:
        return
    try:
        message = _exception(peer, data)
    except Exception:  # (as `_rebuild`)
        return
    if isinstance(message, Warning):
        if os.path.basename(filename) == os.path.basename(__file__):
            # `stacklevel` pointed past the target, at its caller: there, this module's frame
            # that made the call; here, the tests' frame that called the proxy
            filename, lineno = _caller_outside_this_module()
        elif filename != CANDIDATE_FILE:
            # A path of the candidate's choosing would be opened here, with the judge's rights,
            # when the warning is shown (`linecache`): `<...>` names are never opened.
            filename = f"<candidate>/{os.path.basename(filename)}"
        for _ in range(max(0, min(count, WARNINGS_TOTAL))):
            warnings.warn_explicit(message, type(message), filename, lineno)


def _caller_outside_this_module():
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _HERE:
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("sys", 1)


# Logging. The loggers, handlers and filters the candidate's program sets up are in its own
# process, and the ones the tests add (caplog's, assertLogs', a test's own handler) are in the
# judge's. As the candidate's program loads, it reports its loggers' levels, `propagate` and
# `disabled` (`logging_state`), and the judge gives its own loggers those (`adopt_logging`):
# what the tests save and put back is then the candidate's, as in-process. From then on, a
# logger the tests change (`setLevel`, `addHandler`, `removeHandler`, `addFilter`,
# `removeFilter`, which the judge wraps) is sent with each call while it differs from that
# start: its level, `propagate` and `disabled`, whether its handler list was replaced
# (assertLogs does), and each handler the tests added, by number and level (`logging_view`).
# The candidate's process gives its own logger those values, stands a `ToJudge` handler in for
# each handler added (`_apply_view`), and puts its own values back once the logger is no longer
# sent. Its records go through its own loggers as in-process; what reaches a stand-in is sent
# with the next reply and handled by that handler in the judge, after the filters the tests
# added to the logger that made it (`_log`).

LOGGERS_CAP = 10_000  # loggers whose state the candidate's process reports as its program loads


def _loggers(logging):
    """This process's loggers as (name, logger), the root first as "" (placeholders left out);
    None when `logging` is not loaded."""
    root = getattr(logging, "root", None)
    if getattr(root, "manager", None) is None:
        return None
    return [("", root), *((name, logger) for name, logger in list(root.manager.loggerDict.items())
                          if isinstance(logger, logging.Logger) and type(name) is str)]


def logging_state():
    """The candidate's side, once its program has loaded: `(logging.disable's level,
    ((name, level, propagate, disabled), ...))` of its loggers ("" the root), None without
    logging loaded."""
    logging = sys.modules.get("logging")
    loggers = _loggers(logging)
    if loggers is None:
        return None
    manager = logging.root.manager
    return (manager.disable if type(manager.disable) is int else 0,
            tuple((name, logger.level if type(logger.level) is int else 0, bool(logger.propagate),
                   bool(logger.disabled)) for name, logger in loggers[:LOGGERS_CAP]))


def adopt_logging(state):
    """The judge's side, as the candidate's program has loaded (before the proxy and any test):
    its loggers get the candidate's levels, `propagate` and `disabled` (those the candidate's
    process does not have get the defaults), as if its program were the one loaded here."""
    logging = sys.modules.get("logging")
    if logging is None and state is not None:
        import logging  # stdlib, in the tests' process: the candidate's program set some up
    found = _loggers(logging)
    if found is None:
        return
    disable, given = state if state is not None else (0, ())
    values = {}
    for entry in given[:LOGGERS_CAP]:
        if (type(entry) is tuple and len(entry) == 4 and type(entry[0]) is str and type(entry[1]) is int
                and type(entry[2]) is bool and type(entry[3]) is bool):
            values[entry[0]] = entry[1:]
    values.setdefault("", (logging.WARNING, True, False))
    loggers = dict(found)
    for name in set(loggers) | set(values):
        logger = loggers.get(name) or logging.getLogger(name)
        level, propagate, disabled = values.get(name, (logging.NOTSET, True, False))
        if logger.level != level:
            logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled
    if logging.root.manager.disable != disable and type(disable) is int:
        logging.disable(disable)


# The judge's side: every logger as it was once the program loaded (after `adopt_logging`), the
# loggers the tests changed since, and whether one of the wrapped calls ran since the last view.
_LOG_BASE = [0, {}]  # [logging.disable's level, {name: (level, propagate, disabled, handlers list, its items, filters)}]
_LOG_TOUCHED = {}  # logger name -> a logger the tests changed
_LOG_LISTS = {}  # logger name -> the handler list a logger made after the program loaded began with
_LOG_DIRTY = [True]
_NO_VIEW = (None, ())


def logging_loaded():
    """The judge's side, once the benchmark's program has loaded and the candidate's loggers
    were adopted: the start every change of the tests is measured from."""
    _LOG_TOUCHED.clear()
    _LOG_DIRTY[0] = True
    logging = sys.modules.get("logging")
    loggers = _loggers(logging)
    if loggers is None:  # not loaded yet: the defaults
        _LOG_BASE[:] = [0, {}]
        return
    _LOG_BASE[:] = [logging.root.manager.disable,
                    {name: (logger.level, logger.propagate, logger.disabled, logger.handlers,
                            list(logger.handlers), list(logger.filters)) for name, logger in loggers}]


def logging_view(channel):
    """What the tests hold of the judge's logging now, as `(logging.disable's level or None,
    ((name, level, propagate, disabled, replaced, ((number, level), ...)), ...))`; the handlers
    they added are numbered in `channel.log_handlers` (number -> handler). Made again only after
    one of the wrapped calls ran (`channel.log_view` keeps the last)."""
    logging = sys.modules.get("logging")
    disable = getattr(getattr(getattr(logging, "root", None), "manager", None), "disable", None)
    disable = None if disable == _LOG_BASE[0] or type(disable) is not int else disable
    if not _LOG_DIRTY[0] and channel.log_view is not None and channel.log_view[0] == disable:
        return channel.log_view
    _LOG_DIRTY[0] = False
    numbers = {id(handler): number for number, handler in channel.log_handlers.items()}
    handlers, changed = {}, []
    for name, logger in list(_LOG_TOUCHED.items()):
        default = (logging.WARNING if name == "" else 0, True, False, _LOG_LISTS.get(name), (), ())
        level, propagate, disabled, attached, before, filters = _LOG_BASE[1].get(name, default)
        if (logger.level == level and logger.propagate == propagate and logger.disabled == disabled
                and logger.handlers is attached and logger.handlers == before and logger.filters == filters):
            del _LOG_TOUCHED[name]  # back as it started: the candidate's own again
            continue
        added = []
        for handler in list(logger.handlers):
            if handler in before:
                continue
            number = numbers.get(id(handler))
            if number is None or channel.log_handlers.get(number) is not handler:
                channel.log_numbers += 1
                number = channel.log_numbers
            handlers[number] = handler
            added.append((number, handler.level if type(handler.level) is int else 0))
        changed.append((name, logger.level if type(logger.level) is int else 0, bool(logger.propagate),
                        bool(logger.disabled), attached is not None and logger.handlers is not attached,
                        tuple(added)))
    channel.log_handlers = handlers
    channel.log_view = (disable, tuple(changed)) if changed or disable is not None else _NO_VIEW
    return channel.log_view


def _watch_logging(logging):
    """Note the loggers a test changes (see `_LOG_TOUCHED`)."""
    cls = getattr(logging, "Logger", None)
    if not isinstance(cls, type):
        return
    root = getattr(logging, "root", None)
    for method in ("setLevel", "addHandler", "removeHandler", "addFilter", "removeFilter"):
        change = getattr(cls, method, None)
        if callable(change):
            setattr(cls, method, _noting_logger(change, root))
    made = cls.__init__

    @functools.wraps(made)
    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        if type(getattr(self, "name", None)) is str:  # whether the tests later replace its handlers
            _LOG_LISTS[self.name] = self.handlers

    cls.__init__ = init


def _noting_logger(change, root):
    @functools.wraps(change)
    def changed(self, *args, **kwargs):
        name = "" if self is root else getattr(self, "name", None)
        if type(name) is str:
            _LOG_TOUCHED[name] = self
            _LOG_DIRTY[0] = True
        return change(self, *args, **kwargs)

    return changed


# The candidate's side.
_LOG_PENDING = []  # (handler number, entry) of the records its stand-ins took, not yet sent
_LOG_STATE = {"wanted": None, "applied": None, "over": None, "disable": None}
_LOG_HELD = {}  # logger name -> its own values while the tests' are applied, and the stand-ins
_TO_JUDGE = []  # the stand-in handler class, made once logging is loaded


def _take_view(view):
    if type(view) is tuple and len(view) == 2 and type(view[1]) is tuple and (view[0] is None or type(view[0]) is int):
        _LOG_STATE["wanted"] = view


def _stand_in_class(logging):
    if not _TO_JUDGE:
        class ToJudge(logging.Handler):
            """Stands in for a handler the tests added: keeps the record for the judge."""

            def __init__(self, number, level):
                super().__init__(level)
                self.number = number

            def handle(self, record):
                if len(_LOG_PENDING) >= LOG_RECORDS_CAP:
                    _LOG_STATE["over"] = f"more than {LOG_RECORDS_CAP} log records were made"
                else:
                    _LOG_PENDING.append((self.number, _log_entry(record)))
                return True

            def emit(self, record):
                pass

        _TO_JUDGE.append(ToJudge)
    return _TO_JUDGE[0]


def _apply_view():
    """Make the judge's latest view this process's (see the section's comment)."""
    wanted = _LOG_STATE["wanted"]
    logging = sys.modules.get("logging")
    if wanted is None or wanted is _LOG_STATE["applied"] or logging is None:
        return
    _LOG_STATE["applied"] = wanted
    stand_in = _stand_in_class(logging)
    disable, changed = wanted
    named = {}
    for entry in changed:
        if (type(entry) is tuple and len(entry) == 6 and type(entry[0]) is str and type(entry[1]) is int
                and type(entry[2]) is bool and type(entry[3]) is bool and type(entry[4]) is bool
                and type(entry[5]) is tuple):
            named[entry[0]] = entry
    for name in set(_LOG_HELD) | set(named):
        logger = logging.getLogger(name) if name else logging.root
        held = _LOG_HELD.get(name)
        if held is None:
            held = _LOG_HELD[name] = {"level": logger.level, "propagate": logger.propagate,
                                      "disabled": logger.disabled, "stand_ins": [], "own": None}
        for handler in held["stand_ins"]:
            logger.removeHandler(handler)
        entry = named.get(name)
        replaced = entry is not None and entry[4]
        if replaced and held["own"] is None:  # the tests replaced the handlers: the candidate's are off
            held["own"] = list(logger.handlers)
            for handler in held["own"]:
                logger.removeHandler(handler)
        elif not replaced and held["own"] is not None:
            for handler in held["own"]:
                logger.addHandler(handler)
            held["own"] = None
        if entry is None:  # no longer sent (the tests put it back): the candidate's own values again
            del _LOG_HELD[name]
            logger.setLevel(held["level"])
            logger.propagate, logger.disabled = held["propagate"], held["disabled"]
            continue
        logger.setLevel(entry[1])
        logger.propagate, logger.disabled = entry[2], entry[3]
        held["stand_ins"] = [stand_in(number, level) for number, level in entry[5]
                             if type(number) is int and type(level) is int]
        for handler in held["stand_ins"]:
            logger.addHandler(handler)
    if disable is not None:
        if _LOG_STATE["disable"] is None:
            _LOG_STATE["disable"] = logging.root.manager.disable
        logging.disable(disable)
    elif _LOG_STATE["disable"] is not None:
        logging.disable(_LOG_STATE["disable"])
        _LOG_STATE["disable"] = None


_PLAIN = (str, int, float, bool, type(None))
_OWN_ATTRIBUTES = frozenset(("msg", "args", "exc_info", "message"))


def _log_entry(record):
    """A record as it is when a stand-in takes it: `(attributes, extras, frozen, message,
    exception)`: its attributes of plain types; the others (a structured `extra`) encoded now,
    each on its own (those that cannot cross left out); `(msg, args)` encoded now; the formatted message, only
    where the judge could not format it alike (args that are not plain values, or that cannot
    cross); the exception of `exc_info` (its traceback's text in `exc_text`)."""
    attributes, extras = {}, {}
    for key, value in list(vars(record).items()):
        if type(key) is str and key not in _OWN_ATTRIBUTES:
            if type(value) in _PLAIN:
                attributes[key] = value
            else:
                extras[key] = value
    # each on its own: one the tests' process cannot rebuild leaves the others
    extras = {key: frozen for key, frozen in ((key, _frozen(value)) for key, value in extras.items())
              if frozen is not None} or None
    msg, args = record.msg, record.args
    values = args.values() if type(args) is dict else args if type(args) is tuple else (args,)
    plain = type(msg) is str and all(type(value) in _PLAIN for value in values)
    message = None
    if not plain:
        try:
            message = str(record.getMessage())
        except Exception:
            message = str(msg)
    frozen = _frozen((msg, args))
    error = None
    exc_info = record.exc_info
    if type(exc_info) is tuple and len(exc_info) == 3 and isinstance(exc_info[1], BaseException):
        try:
            error = wire.encode_exception(exc_info[1])
        except Exception:
            error = None
        if not attributes.get("exc_text"):
            import logging  # loaded: the record was made by it

            attributes["exc_text"] = logging.Formatter().formatException(exc_info)
    return attributes, extras, frozen, message, error


def _frozen(value):
    """`value` encoded (bytes), or None when it cannot cross."""
    try:
        return wire.dumps(value)
    except Exception:
        return None


def _take_logged():
    """The candidate's side, as a reply is made: the records its stand-ins took since the
    last reply (a thread's made between calls too)."""
    over, _LOG_STATE["over"] = _LOG_STATE["over"], None
    logged = _LOG_PENDING[:]
    del _LOG_PENDING[:len(logged)]
    if over:
        raise wire.Unencodable(over)
    return logged


def _log(peer, logged, broken):
    """The judge's side: hand each record the candidate's stand-ins took to the handler of the
    tests it stood in for."""
    import logging  # stdlib, in the tests' process: no candidate code runs here

    if len(logged) > LOG_RECORDS_CAP:
        broken(CrossingFailed, f"the call made more than {LOG_RECORDS_CAP} log records")
    handlers = getattr(peer, "log_handlers", {})
    for entry in logged:
        if (type(entry) is not tuple or len(entry) != 2 or type(entry[0]) is not int
                or type(entry[1]) is not tuple or len(entry[1]) != 5 or type(entry[1][0]) is not dict
                or not (entry[1][1] is None or type(entry[1][1]) is dict)
                or not (entry[1][2] is None or type(entry[1][2]) is bytes)
                or not (entry[1][3] is None or type(entry[1][3]) is str)):
            broken(CandidateGone, "the other process broke the protocol")
        handler = handlers.get(entry[0])
        if handler is None:  # no longer the tests' (a thread's record after its test)
            continue
        try:
            record = _rebuilt_record(logging, peer, *entry[1])
            if record is not None and record.levelno >= handler.level:
                handler.handle(record)
        except Exception as problem:
            # Never an exception a test could take for the target's (a record the candidate
            # made up, whose level is not a number): the call fails instead.
            broken(CrossingFailed, f"a log record of the call could not be handled in the tests' "
                                   f"process ({type(problem).__name__})")


_RECORD_MADE_HERE = frozenset(("exc_info", "exc_text", "stack_info", "msg", "args", "message"))


def _record_attribute(logging, key):
    """Whether a log record of the candidate's may carry attribute `key`: not one of the
    record's own (`LogRecord`'s class attributes, what the judge makes itself) or a private."""
    return (type(key) is str and not key.startswith("_") and key not in _RECORD_MADE_HERE
            and not hasattr(logging.LogRecord, key))


def _candidates_value(peer, frozen):
    """A value of the candidate's (bytes) decoded as any message of its is on the judge's side:
    classes as values only where the tests sent them, objects rebuilt from its state remembered
    (and refused while the judge serves a view)."""
    if peer.entry is not None:
        return wire.loads(frozen, peer.resolver)
    made = []
    value = wire.loads(frozen, peer.resolver, values=peer.sent_values, classes=peer.sent_classes, made=made)
    peer.note_rebuilt(made)
    return value


def _rebuilt_record(logging, peer, attributes, extras, frozen, message, error):
    """The record as the candidate's stand-in took it, after the filters the tests added to the
    logger that made it (None when they drop it)."""
    # Only what the candidate's side sends (`_log_entry`): plain values under names that are
    # not the record's own. A made-up `exc_info` (a traceback rebuilt from state whose file
    # name the formatter's `linecache` opens) or `exc_text` never reaches the tests' handlers.
    record = logging.makeLogRecord({key: value for key, value in attributes.items()
                                    if _record_attribute(logging, key) and type(value) in _PLAIN})
    for key, frozen_value in (extras or {}).items():
        if _record_attribute(logging, key) and type(frozen_value) is bytes:
            try:
                setattr(record, key, _candidates_value(peer, frozen_value))
            except Exception:  # a class the tests' process does not have: left out
                pass
    record.msg, record.args = ("" if message is None else message), ()
    if frozen is not None:
        try:
            msg, args = _candidates_value(peer, frozen)
            record.msg, record.args = msg, args
            if message is not None and record.getMessage() != message:  # values that print otherwise here
                raise ValueError
        except Exception:
            record.msg, record.args = ("" if message is None else message), ()
    if error is not None:
        try:
            rebuilt = _exception(peer, error)
            record.exc_info = (type(rebuilt), rebuilt, None)
        except Exception:  # its text (`exc_text`) still shows
            record.exc_info = None
    name = record.name if type(record.name) is str else ""
    # (looked up, never made: a record's name must not add a logger to this process)
    logger = logging.root if name in ("", logging.root.name) else logging.root.manager.loggerDict.get(name)
    if not isinstance(logger, logging.Logger):
        return record
    own = _LOG_BASE[1].get("" if logger is logging.root else name, (0, True, False, None, (), ()))[5]
    added = [found for found in logger.filters if found not in own]
    if added:
        screen = logging.Filterer()
        screen.filters = added
        result = screen.filter(record)
        if not result:
            return None
        if isinstance(result, logging.LogRecord):  # (Python 3.12: a filter may replace it)
            record = result
    return record


# ------------------------------------------------------------------------------ process state
# In-process, the environment and the working directory are one process's: what the tests set
# (by hand, `monkeypatch.setenv`/`delenv`/`chdir`, `mock.patch.dict(os.environ)`, the spec's top
# level) is what the target reads. Split, with each call the judge sends what it changed of its
# own since its program loaded (the environment's changes, its working directory) whenever that
# is not what it last sent (`process_view`), and the candidate's process makes those changes in
# its own before the call, keeping its own values of the names to put them back once the tests
# do (`_apply_process_state`). Nothing goes the other way: what the candidate sets in its
# environment stays in its process (in the tests' process it would be the candidate's say in
# what the tests' subprocesses load, `LD_PRELOAD`, or where their temporary files go). So the
# changes are measured from the judge's start: where the two programs set the environment
# differently as they load, a change that makes no difference in the judge does not cross.
_NO_STATE = ((), None, None)  # no change of the environment, the start's directory, no tzset()
# The candidate's side: its own working directory and TZ, the values the tests' changes
# replaced, the last state sent, the last one applied, the directory last entered for the
# tests, the TZ of the tests' last `time.tzset()` made here, and why the last state could not be
# applied.
_STATE = {"cwd": None, "tz": None, "held": {}, "wanted": _NO_STATE, "applied": _NO_STATE, "entered": None,
          "tzset": None, "failed": None}
# The judge's side: how many `time.tzset()` calls its tests made since the program loaded, and
# the TZ the last one read, as `(count, value or None)`; None when they made none
# (`watch_tzset`). The candidate's side calls the real one, whatever its program put there.
_TZSET = [None]
_REAL_TZSET = getattr(time, "tzset", None)
_WATCHED_TZSET = [None]


def _environ_mark():
    """A cheap copy of the environment, to tell later whether it changed (os.environ's own
    mapping where it has one: decoding every variable would cost each call about 25 µs)."""
    data = getattr(os.environ, "_data", None)
    return dict(data) if type(data) is dict else dict(os.environ)


def _decoded(mark):
    data = getattr(os.environ, "_data", None)
    if type(data) is not dict:
        return mark
    return {os.environ.decodekey(name): os.environ.decodevalue(value) for name, value in mark.items()}


def _environ_changes(before, after):
    """`((name, value or None), ...)`, sorted: what differs in the environment `after` from
    `before` (two `_environ_mark`s; None: removed)."""
    if before == after:
        return ()
    before, after = _decoded(before), _decoded(after)
    changes = [(name, value) for name, value in after.items() if before.get(name) != value]
    changes += [(name, None) for name in before if name not in after]
    return tuple(sorted(changes))


def _cwd():
    try:
        return os.getcwd()
    except OSError:  # removed under it
        return None


def _where(start=None):
    """The working directory as (path, device, inode), so that one removed and made again at
    the same path is another (the start's path, `start`, is taken as it: no `stat` for the
    common case); () when it was removed."""
    try:
        path = os.getcwd()
        if start is not None and path == start[0]:
            return start
        found = os.stat(".")
    except OSError:
        return ()
    return (path, found.st_dev, found.st_ino)


def watch_tzset():
    """The judge's side, before the benchmark's program loads (which may bind the name): count
    the tests' `time.tzset()` calls and note the TZ each one reads (in-process, their call sets
    the time zone the target's `time.localtime` uses; setting TZ alone does not). The stand-in
    is a Python function named as the builtin (a test can tell it is not one)."""
    tzset = _REAL_TZSET
    if tzset is None or _WATCHED_TZSET[0] is not None:
        return

    def watched():
        tzset()
        _TZSET[0] = (_TZSET[0][0] + 1 if _TZSET[0] is not None else 1, os.environ.get("TZ"))

    watched.__name__ = watched.__qualname__ = "tzset"
    watched.__module__, watched.__doc__ = "time", tzset.__doc__
    _WATCHED_TZSET[0] = watched
    time.tzset = watched


def process_loaded(channel):
    """The judge's side, once the benchmark's program has loaded: the start every change of
    the tests is measured from."""
    _TZSET[0] = None
    channel.process_start = (_environ_mark(), _where(), None)
    channel.process_seen = channel.process_start
    channel.process_sent = _NO_STATE


def process_view(channel):
    """What the tests changed of their environment, working directory and time zone since the
    start, when it is not what the candidate's process was last sent, else None; and what was
    looked at (for `channel.process_seen`, once the request holding the view is on its way).
    The directory is None where it is the start's, else `_where()`'s."""
    start = channel.process_start
    seen = (_environ_mark(), _where(start[1]), _TZSET[0])
    if seen == channel.process_seen:
        return None, seen
    view = (_environ_changes(start[0], seen[0]), None if seen[1] == start[1] else seen[1], seen[2])
    return (None if view == channel.process_sent else view), seen


def process_unsent(channel):
    """The candidate's process refused a request: it may not have taken the views it held, so
    the next call sends them again."""
    channel.log_view_sent = None
    channel.process_seen = channel.process_sent = None


def _set_variable(name, value):
    """Set an environment variable, or remove it (`value` None)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _take_process_state(state):
    if type(state) is not tuple or len(state) != 3:
        return
    where, tz = state[1], state[2]
    if (type(state[0]) is tuple and all(
            type(change) is tuple and len(change) == 2 and type(change[0]) is str
            and (change[1] is None or type(change[1]) is str) for change in state[0])
            and (where is None or where == () or (type(where) is tuple and len(where) == 3
                                                 and type(where[0]) is str and type(where[1]) is int
                                                 and type(where[2]) is int))
            and (tz is None or (type(tz) is tuple and len(tz) == 2 and type(tz[0]) is int
                                and (tz[1] is None or type(tz[1]) is str)))):
        _STATE["wanted"] = state


def _apply_process_state():
    """The candidate's side, before a call: the tests' changes of the environment made in its
    own (the names they no longer change get back the values they had here before), in the
    tests' working directory (or its own again); why it cannot, else None (each later call
    fails too, until the tests change it again)."""
    wanted, applied, held = _STATE["wanted"], _STATE["applied"], _STATE["held"]
    if wanted is applied:
        return _STATE["failed"]
    changed = dict(wanted[0])
    changes = [(name, held.pop(name)) for name in list(held) if name not in changed]
    for name, value in wanted[0]:
        if name not in held:
            held[name] = os.environ.get(name)
        changes.append((name, value))
    failed = None
    try:
        for name, value in changes:
            _set_variable(name, value)
    except (ValueError, TypeError, OSError) as error:
        failed = f"the tests set an environment variable the candidate's process cannot set ({error})"
    if failed is None and wanted[2] != _STATE["tzset"] and _REAL_TZSET is not None:
        # The time zone the tests' last `time.tzset()` set (its own again when they made none):
        # TZ as it was then, tzset(), and TZ as it is now, as in their process.
        now = os.environ.get("TZ")
        try:
            _set_variable("TZ", wanted[2][1] if wanted[2] is not None else _STATE["tz"])
            _REAL_TZSET()
            _set_variable("TZ", now)
            _STATE["tzset"] = wanted[2]
        except Exception as error:  # (TZ as the tests set it: a name or value the C library refuses)
            failed = f"the tests' time zone cannot be set in the candidate's process ({error})"
    where = wanted[1]
    if where == ():
        failed = "the tests' working directory was removed: the candidate's process cannot be in it"
    elif where != _STATE["entered"]:  # (tried again after a failure, whatever else changed)
        path = _STATE["cwd"] if where is None else where[0]
        try:
            os.chdir(path)
            _STATE["entered"] = where
        except (OSError, TypeError) as error:
            failed = (f"the tests' working directory {path!r} cannot be entered in the candidate's "
                      f"process ({getattr(error, 'strerror', None) or error})")
    _STATE["applied"], _STATE["failed"] = wanted, failed
    return failed


# --------------------------------------------------------------------------- trusted side


class Channel(Peer):
    """The judge's end of the connection to the candidate's process."""

    def __init__(self, fd, resolver):
        super().__init__(fd, resolver)
        self.problem = None  # (reason, message) of the first failure since the last take_problem()
        self.stale = False  # a call was interrupted: the candidate's answer to it is still to come
        self.pid = os.getpid()  # calls come from this process only (not a pool the tests fork)
        self.numpy_state = None  # numpy's error state once the program loaded (`install_proxy`)
        self.log_handlers = {}  # number -> a handler the tests added (`logging_view`)
        self.log_numbers = 0  # the last number given to one
        self.log_view = None  # the last view made
        self.log_view_sent = None  # what the candidate's process was last told of the logging
        self.process_start = ({}, None)  # see `process_loaded`
        self.process_seen, self.process_sent = None, _NO_STATE

    def take_problem(self):
        """The crossing failure seen during the current test, and forget it."""
        problem, self.problem = self.problem, None
        _LOG_DIRTY[0] = True  # (as each test item ends: what the tests assigned is looked at again)
        return problem

    def _fail(self, kind, message):
        if self.problem is None:
            self.problem = (kind.reason, message)
        raise kind(message)

    def hang_up(self):
        """Tell the candidate's process that no call will follow: it sees the end of the
        channel and ends, as it would once this process is gone."""
        import socket

        try:
            end = socket.socket(fileno=self.fd)
            try:
                end.shutdown(socket.SHUT_RDWR)
            finally:
                end.detach()
        except OSError:
            pass

    def handshake(self):
        """Wait for the candidate's program to load: None, or (status, message, reason) on
        failure; the reason is `candidate-died` when its process ended, so that the engine
        can tell the limit that ended it (memory, time, ...), as for a call."""
        try:
            reply = wire.loads(recv_frame(self.fd), self.resolver)
        except (OSError, EOFError, ValueError, wire.WireError) as error:
            self.gone = f"the candidate's process ended while loading the program ({error})"
            return "error", self.gone, "candidate-died"
        if type(reply) is tuple and len(reply) == 2 and reply[0] == "loaded" and (
                reply[1] is None or (type(reply[1]) is tuple and len(reply[1]) == 2
                and type(reply[1][0]) is int and type(reply[1][1]) is tuple)):
            adopt_logging(reply[1])
            return None
        if (type(reply) is tuple and len(reply) == 3 and reply[0] == "failed"
                and type(reply[1]) is str and reply[1] in ("error", "memory") and type(reply[2]) is str):
            return reply[1], reply[2], "memory" if reply[1] == "memory" else "program-failed-to-load"
        self.gone = "the candidate's process broke the protocol while loading"
        return "error", self.gone, "program-failed-to-load"

    def fork_candidate(self):
        """Ask the candidate's process for a fresh copy of itself to answer this test item's
        calls (direct invocation); a report that an earlier copy died is passed over. Called
        in the judge's own fresh copy for the item, which then owns the channel."""
        self.pid = os.getpid()
        if self.gone is not None:
            return
        try:
            send_frame(self.fd, wire.dumps(("fork",)))
            while True:
                reply = wire.loads(recv_frame(self.fd), self.resolver)
                if type(reply) is tuple and len(reply) == 1 and reply[0] == "forked":
                    return
                if type(reply) is tuple and len(reply) == 2 and reply[0] == "unforked" and type(reply[1]) is str:
                    self.gone = f"the candidate's process could not answer this test: {reply[1]}"
                    return
                if not (type(reply) is tuple and len(reply) == 2 and reply[0] == "died"):
                    self.gone = "the candidate's process broke the protocol"
                    return
        except (OSError, EOFError, ValueError, wire.WireError) as error:
            self.gone = f"the candidate's process ended ({error})"

    def end_candidate(self):
        """This item is done: its copy of the candidate's process may end."""
        if self.gone is None:
            try:
                send_frame(self.fd, wire.dumps(("end",)))
            except OSError:
                pass

    def call_entry(self, target, args, kwargs, awaited=False, installed=False):
        """Call the entry point in the candidate's process; return or raise what it did there.
        `installed`: a method grafted into the installed class, whose `self` (the first
        argument) must cross by value: an object of a class the tests define cannot (the
        candidate's process never sees the tests)."""
        if installed and args and type(args[0]).__module__ == wire.TESTS_MODULE:
            self._fail(CrossingFailed, f"{target} was called on an object of {type(args[0]).__qualname__}, "
                       "a class the tests define: it cannot cross to the candidate's process, which never "
                       "sees the tests (such a task is judged in-process)")
        return self._across("call", (target, awaited), args, kwargs, target)

    def call_handle(self, number, args, kwargs):
        """Call a callable the candidate handed over."""
        return self._across("handle", number, args, kwargs, f"a callable it returned (#{number})")

    def _fail_gone(self):
        """Refuse a call on a channel that can carry no more, with the reason it ended."""
        self._fail(CallInterrupted if self.stale else CandidateGone, self.gone)

    def _across(self, kind, target, args, kwargs, what):
        if self.gone is not None:
            self._fail_gone()
        if os.getpid() != self.pid:
            # A process the tests started (a multiprocessing pool) holds a copy of the channel:
            # its calls would cross answers with this process's. An Exception, so that the pool
            # hands it back to the test instead of losing its worker.
            raise CalledFromAnotherProcess(
                f"{what} was called from a process the tests started (a multiprocessing pool); "
                "split serves calls of the tests' own process only (the task is judged in-process)")
        held = patches_held() or _judge_state_changed(self.numpy_state) or _rebound()
        if held:
            self._fail(CrossingFailed, f"the tests patch {held} while they call {what}: the patch is "
                       "in the tests' process and the candidate's code runs without it, so a call "
                       "made under it cannot be judged split (the task is judged in-process)")
        view = logging_view(self)
        state, seen = process_view(self)
        try:
            payload = self.dumps(("request", kind, target, args, kwargs,
                                  None if view == self.log_view_sent else view, state), "the arguments")
            self.log_view_sent = view
            self.process_seen = seen
            if state is not None:
                self.process_sent = state
        except wire.Unencodable as error:
            self._fail(CrossingFailed, f"the call cannot cross to the candidate's process: {error}")
        try:
            reply = self.exchange(payload)
            if type(reply) is tuple and reply[:1] == ("cannot-cross",):
                process_unsent(self)
        except wire.WireError as error:
            self._fail(CrossingFailed, f"the candidate's reply cannot be rebuilt here: {error}")
        except BaseException as error:
            # The channel's own failures: its end closed, a frame over the cap, an error of
            # the socket itself.
            if (isinstance(error, (EOFError, FrameTooLarge))
                    or (isinstance(error, OSError) and error.errno in _CHANNEL_ERRNOS)):
                self.gone = f"the candidate's process ended during a call of {what} ({error})"
                self._fail(CandidateGone, self.gone)
            # Anything else was raised here while the call crossed (a signal handler's
            # exception): the test sees it, and since the candidate's answer to this call is
            # still on its way, no later call may read it as its own.
            self.gone = (f"an earlier call of {what} was interrupted ({type(error).__name__}) "
                         "before the candidate's process answered it")
            self.stale = True
            raise
        if self.gone is not None:  # a call made while this one crossed was interrupted
            self._fail_gone()
        if type(reply) is tuple and len(reply) == 2 and reply[0] == "died" and type(reply[1]) is str:
            self.gone = f"the candidate's process for this test ended during a call of {what} ({reply[1]})"
            self._fail(CandidateGone, self.gone)
        return settle(self, reply, args, kwargs, self._fail)


# What the tests patch in this process while they call the target: the candidate's process
# never sees it. Watched: the runner's monkeypatch (`knowbench_pytest.MonkeyPatch.held`),
# pytest's own `MonkeyPatch` (`pytest.MonkeyPatch.context()`), and unittest.mock's patchers (the
# `mock` backport's too; pytest-mock's `mocker` is built on them). Their methods are wrapped
# before any test runs, or, for a module a test imports itself, the moment it is imported
# (`_WatchImports`). A name a test rebinds by hand (`os.remove = fake`) is watched from what
# its code assigns (`watch_rebinds`).
_MOCK_MODULES = ("unittest.mock", "mock.mock")
_PYTEST_MONKEYPATCH = "_pytest.monkeypatch"
# (and logging, whose changes by the tests cross with each call: see `logging_view`)
_PATCH_MODULES = frozenset((*_MOCK_MODULES, _PYTEST_MONKEYPATCH, "logging"))
_MONKEYPATCH_CHANGES = ("setattr", "delattr", "setitem", "delitem", "setenv", "delenv",
                        "syspath_prepend", "chdir")
_ENTERED = {}  # id(patcher) -> patcher, for the unittest.mock patchers now entered
_MONKEYPATCHES = {}  # id -> a pytest MonkeyPatch that changed something (held until undone)
_WATCHED = set()


def watch_patches(imports=False):
    """Watch the patch modules loaded in this process (idempotent), and with `imports` those
    imported later too (the judge, before any test runs: never a server, whose children
    include the candidate's processes). logging is watched in the judge only (the first call
    with `imports` says this is one): a server's warm-up makes calls too."""
    if imports:
        _WATCHED.add("judge")
    for name in _PATCH_MODULES:
        module = sys.modules.get(name)
        if module is None or name in _WATCHED or (name == "logging" and "judge" not in _WATCHED):
            continue
        _WATCHED.add(name)
        if name == "logging":
            _watch_logging(module)
            continue
        if name == _PYTEST_MONKEYPATCH:
            cls = getattr(module, "MonkeyPatch", None)
            if isinstance(cls, type):
                for method in _MONKEYPATCH_CHANGES:
                    if callable(getattr(cls, method, None)):
                        _wrap_change(cls, method)
            continue
        for cls, on, off in ((getattr(module, "_patch", None), "__enter__", "__exit__"),
                             (getattr(module, "_patch_dict", None), "_patch_dict", "_unpatch_dict")):
            if isinstance(cls, type) and callable(getattr(cls, on, None)) and callable(getattr(cls, off, None)):
                _wrap_patcher(cls, on, off)
    if imports and not _PATCH_MODULES <= _WATCHED and not any(
            type(f) is _WatchImports for f in sys.meta_path):
        sys.meta_path.insert(0, _WatchImports())


class _WatchImports:
    """Finds nothing itself: when a patch module is imported, it has the module loaded as it
    would be, then watched before any code can use it."""

    def find_spec(self, name, path=None, target=None):
        if name not in _PATCH_MODULES or name in _WATCHED:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not callable(getattr(spec.loader, "exec_module", None)):
            return spec
        spec.loader = _WatchedLoader(spec.loader)
        return spec


class _WatchedLoader:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self.loader.exec_module(module)
        watch_patches()

    def __getattr__(self, name):  # get_source, is_package, ...: the real loader's
        return getattr(self.loader, name)


def _wrap_patcher(cls, on, off):
    enter, leave = getattr(cls, on), getattr(cls, off)

    @functools.wraps(enter)
    def entered(self, *args, **kwargs):
        result = enter(self, *args, **kwargs)
        _ENTERED[id(self)] = self
        return result

    @functools.wraps(leave)
    def left(self, *args, **kwargs):
        _ENTERED.pop(id(self), None)
        return leave(self, *args, **kwargs)

    setattr(cls, on, entered)
    setattr(cls, off, left)


def _wrap_change(cls, method):
    change = getattr(cls, method)

    @functools.wraps(change)
    def changed(self, *args, **kwargs):
        result = change(self, *args, **kwargs)
        _MONKEYPATCHES[id(self)] = self
        return result

    setattr(cls, method, changed)


def _monkeypatch_held(patch):
    """What a pytest MonkeyPatch holds now ("" when it undid everything, or holds only changes
    of the environment and the working directory, which cross with each call)."""
    changes = getattr(patch, "_setattr", None) or []
    if changes:
        target, name = changes[-1][0], changes[-1][1]
        return f"{getattr(target, '__name__', type(target).__name__)}.{name}"
    if any(type(entry) is not tuple or not entry or entry[0] is not os.environ
           for entry in getattr(patch, "_setitem", None) or ()):
        return "a mapping (monkeypatch.setitem)"
    if getattr(patch, "_savesyspath", None) is not None:
        return "sys.path"
    return ""


def patches_held():
    """What the tests have patched in this process now ("" when nothing), in a few words."""
    watch_patches()
    held = []
    pytest_emulation = sys.modules.get("knowbench_pytest")
    if pytest_emulation is not None:
        held += list(pytest_emulation.MonkeyPatch.held.values())
    held += [what for what in map(_monkeypatch_held, list(_MONKEYPATCHES.values())) if what]
    patchers = list(_ENTERED.values())
    for name in _MOCK_MODULES:
        module = sys.modules.get(name)
        started = getattr(getattr(module, "_patch", None), "_active_patches", None)
        if type(started) is list:
            patchers += [patcher for patcher in started if id(patcher) not in _ENTERED]
    held += [_patched(patcher) for patcher in patchers if getattr(patcher, "in_dict", None) is not os.environ]
    if not held:
        return ""
    return ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")


_NUMPY_DEFAULT = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


def _numpy_state():
    """numpy's error state (`np.seterr`), when numpy is loaded: None otherwise."""
    numpy = sys.modules.get("numpy")
    geterr = getattr(numpy, "geterr", None)
    try:
        return geterr() if callable(geterr) else None
    except Exception:
        return None


def _judge_state_changed(numpy_state):
    """State of the tests' process that changes what the target does, set by the tests and
    not seen by the candidate's process ("" when none): warnings made errors
    (`simplefilter("error")`), numpy's error state (`np.seterr`, `np.errstate`)."""
    changed = []
    if any(type(entry) is tuple and entry[:1] == ("error",) for entry in warnings.filters):
        changed.append("the warning filters (warnings made errors)")
    now = _numpy_state()
    if now is not None and now != (numpy_state or _NUMPY_DEFAULT):
        changed.append("numpy's error state")
    return " and ".join(changed)


def _patched(patcher):
    """What a unittest.mock patcher patches: `module.attribute`, or the patched dict."""
    attribute = getattr(patcher, "attribute", None)
    if attribute is not None:
        target = getattr(patcher, "target", None)
        name = getattr(target, "__name__", None) or getattr(patcher.getter, "__name__", "")
        return f"{name}.{attribute}" if type(name) is str and name else str(attribute)
    in_dict = getattr(patcher, "in_dict", None)
    if in_dict is os.environ:
        return "os.environ"
    return in_dict if type(in_dict) is str else "a dict (mock.patch.dict)"


def _iterate(items, error):
    """What an iterator the target returned produced: its items, then its exception."""
    yield from items
    if error is not None:
        raise error


def install_proxy(namespace, entry_point, channel, installed=None):
    """Replace the target in the judge's program by a proxy, and return the proxy.

    Methods, static and class methods and properties keep their kind, so `self` or the
    class travel as the first argument. The proxy wraps the original stub, so
    `inspect.signature` still shows the benchmark's signature. `installed`: the installed
    module the target was cut from, where a proxy then takes the original's place too
    (`knowbench_graft`); a method's proxy there checks that its `self` can cross.
    """
    if installed:  # imported before the baselines below: what its import changes is no test's doing
        importlib.import_module(installed)
    channel.numpy_state = _numpy_state()  # as the benchmark's program left it, loaded
    logging_loaded()
    watch_tzset()  # (normally done already, before the program loaded)
    process_loaded(channel)
    parts = entry_point.split(".")
    if len(parts) == 1:
        original = namespace.get(parts[0])
        proxy = _proxy(channel, entry_point, original)
        namespace[parts[0]] = proxy
    else:
        proxy = _method_proxy(namespace, parts, channel, entry_point)
    if installed:
        knowbench_graft.graft(namespace, entry_point, installed,
                              wrap=lambda function: _proxy(channel, entry_point, function, installed=True))
    return proxy


def _method_proxy(namespace, parts, channel, entry_point):
    """The proxy of method `parts` of the program's class, set there in the method's kind."""
    owner = namespace[parts[0]]
    for part in parts[1:-1]:
        owner = getattr(owner, part)
    raw = vars(owner).get(parts[-1])
    if isinstance(raw, staticmethod):
        proxy = _proxy(channel, entry_point, raw.__func__)
        setattr(owner, parts[-1], staticmethod(proxy))
    elif isinstance(raw, classmethod):
        proxy = _proxy(channel, entry_point, raw.__func__)
        setattr(owner, parts[-1], classmethod(proxy))
    elif isinstance(raw, property):
        proxy = _proxy(channel, entry_point, raw.fget)
        setattr(owner, parts[-1], property(proxy, raw.fset, raw.fdel, raw.__doc__))
    else:
        proxy = _proxy(channel, entry_point, raw)
        setattr(owner, parts[-1], proxy)
    return proxy


# Names a test may rebind that only the tests' process uses: what the candidate prints is
# written to the tests' own `sys.stdout`/`sys.stderr`, and `sys.path` and
# `sys.dont_write_bytecode` are about importing the tests. (A testing framework's own settings,
# `unittest.util._MAX_LENGTH`, are the tests' too: `knowbench_wire.testing_module`.)
_TESTS_OWN = frozenset(("stdout", "stderr", "path", "dont_write_bytecode"))


def watch_rebinds(rebinds, namespace, entry_point):
    """Once the program has loaded: the names the tests rebind by hand (`os.remove = fake`,
    `setattr(np.random, "seed", fake)`, `solution.helper = fake`; found in their code when the
    benchmark loaded, `TestSpec.rebinds`), with what holds each (a module's or the program's
    globals, a class), and what each is bound to now. The candidate's process never sees such a
    rebinding, so a call made while one holds fails (`_rebound`). Left out: the target itself
    (a test that wraps it wraps the proxy, whose calls still cross) and what only the tests'
    process uses (`_TESTS_OWN`, a testing framework's settings)."""
    exempt = {(id(vars(sys)), name) for name in _TESTS_OWN}
    parts = entry_point.split(".") if type(entry_point) is str and entry_point else []
    if parts:
        holder = _resolved(namespace, parts[:-1])
        if holder is not None:
            exempt.add((id(holder), parts[-1]))
    watched = []
    for entry in rebinds if type(rebinds) is list else ():
        if (type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str
                or type(entry[1]) is not list or not entry[1] or not all(type(p) is str for p in entry[1])):
            continue
        module_name, path = entry
        holder = _resolved(namespace if module_name == "" else sys.modules.get(module_name), path[:-1])
        if holder is None or (id(holder), path[-1]) in exempt:
            continue
        owner_module = holder.get("__name__") if type(holder) is dict else getattr(holder, "__module__", None)
        if type(owner_module) is str and wire.testing_module(owner_module):
            continue
        watched.append((holder, ".".join(([module_name] if module_name else ["solution"]) + path[:-1]), path[-1]))
    _REBINDS[:] = watched
    _BOUND[:] = [_binding(holder, name) for holder, _, name in watched]


def _resolved(start, path):
    """What `path` reaches from `start` (the program's globals, or an object), when what it
    reaches has a dict of its own to watch: a module as its dict (the same object for as long as
    the module lives), a class as itself; None otherwise."""
    try:
        found = start
        for part in path:
            found = found[part] if type(found) is dict else getattr(found, part)
        if isinstance(found, types.ModuleType):
            return vars(found)
        if type(found) is not dict:
            vars(found)
        return found
    except Exception:  # not loaded, not there, no __dict__
        return None


def _own(holder):
    return holder if type(holder) is dict else vars(holder)


def _binding(holder, name):
    """What `name` of `holder` is bound to now (for "*", the callables and modules it holds)."""
    if name != "*":
        return _own(holder).get(name, _UNBOUND)
    return {key: value for key, value in list(_own(holder).items())
            if callable(value) or isinstance(value, types.ModuleType)}


_REBINDS = []  # (holder, label, name) the tests rebind by hand ("*": any name of the holder)
_BOUND = []  # what each was bound to once the program loaded
_UNBOUND = object()


def rebinds_settled():
    """Once a spec's code has run: a name its top level bound that was not bound when the
    program loaded (`np.float = float` for an old library) is set-up the candidate could not
    miss; what it rebound that the program had stays watched (a spy it set for all its
    tests)."""
    for index, (holder, _, name) in enumerate(_REBINDS):
        if name != "*" and _BOUND[index] is _UNBOUND:
            _BOUND[index] = _binding(holder, name)


def _rebound():
    """The first name of `watch_rebinds` that a test has rebound by hand ("" when none). A name
    that was not bound when the program loaded is not one the candidate could use; for "*", the
    callables and modules it held then."""
    for (holder, label, name), value in zip(_REBINDS, _BOUND):  # noqa: B905 (same length)
        own = _own(holder)
        if name == "*":
            if any(own.get(key, _UNBOUND) is not item for key, item in value.items()):
                return f"an attribute of {label} (rebound by hand)"
        elif value is not _UNBOUND and own.get(name, _UNBOUND) is not value:
            return f"{label}.{name} (rebound by hand)"
    return ""


def _proxy(channel, entry_point, original, installed=False):
    if inspect.iscoroutinefunction(original):
        async def proxy(*args, **kwargs):
            return channel.call_entry(entry_point, args, kwargs, True, installed)
    else:
        def proxy(*args, **kwargs):
            return channel.call_entry(entry_point, args, kwargs, False, installed)
    if callable(original):
        functools.update_wrapper(proxy, original)
    return proxy


def remote_frames(error):
    """The candidate-side frames of an exception that crossed, as traceback text ('' if none)."""
    frames = getattr(error, "knowbench_remote_frames", "")
    return frames if type(frames) is str else ""


# ------------------------------------------------------------------------- candidate side


def serve_calls(module, fd, output_cap, fork_limits=None):
    """Answer the judge's calls until it closes the channel. Runs in the candidate's process.

    A `("fork",)` from the judge (direct invocation: one fresh process per test item) makes a
    copy of this process that answers that item's calls until `("end",)`; this process waits
    for it and, when it ended any other way, tells the judge `("died", how)`. `fork_limits`
    is (seconds of CPU time left, the function that limits a copy to them).
    """
    peer = Peer(fd, wire.Resolver(allowed_modules=None, import_missing=True),
                capture_output=True, output_cap=output_cap)
    peer.entry = module
    _STATE["cwd"], _STATE["tz"] = _cwd(), os.environ.get("TZ")
    copy = False
    while True:
        try:
            message = peer.loads(recv_frame(fd))
        except (EOFError, OSError, ValueError):
            return
        except wire.WireError as error:
            send_frame(fd, wire.dumps(("cannot-cross", f"the call could not be rebuilt: {error}")))
            continue
        if type(message) is tuple and len(message) == 7 and message[0] == "request":
            send_frame(fd, peer.answer(*message[1:]))
        elif type(message) is tuple and message == ("end",):
            if copy:
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                os._exit(_COPY_ENDED)
        elif type(message) is tuple and message == ("fork",) and not copy:
            copy = _fork_for_item(fd, fork_limits)
        else:
            send_frame(fd, wire.dumps(("cannot-cross", "not a request")))


def _fork_for_item(fd, fork_limits):
    """In the copy: acknowledge and return True. Here: wait for it, report how it ended."""
    cpu_left = fork_limits[0]() if fork_limits is not None else None
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        pid = os.fork()
    except OSError as error:  # its process budget is spent: this item gets no copy
        send_frame(fd, wire.dumps(("unforked", f"no process could be started for it ({error})")))
        return False
    if pid == 0:
        if cpu_left is not None:
            fork_limits[1](cpu_left)
        send_frame(fd, wire.dumps(("forked",)))
        return True
    status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            how = signal.Signals(number).name
        except ValueError:
            how = f"signal {number}"
    elif os.WEXITSTATUS(status) == _COPY_ENDED:
        return False
    else:  # even 0: a copy that exits by itself may leave a call of the judge unanswered
        how = f"exit code {os.WEXITSTATUS(status)}"
    send_frame(fd, wire.dumps(("died", how)))
    return False


# How a copy of the candidate's process ends when the judge says its item is done.
_COPY_ENDED = 86


_PLAIN_LEAVES = frozenset((type(None), bool, int, float, complex, str, bytes))
_PLAIN_ITEMS = {list: list, set: list, dict: lambda d: [part for pair in d.items() for part in pair]}


def _plain_state(value):
    """`value`'s builtin containers that a call could change in place, each with its items as
    they are now (`_plain_unchanged`), when `value` is plain data: exact builtin containers
    and scalars. None for anything else (an object, a handle, a view: the call's effect on
    those is read from their encoding). `value` came off the wire, so it is not nested
    deeper than the wire allows.

    A container holding the same objects, in the same order, encodes the same, so this tells
    every change the encoding would (and a few it would not: an item swapped for an equal one),
    without encoding the arguments twice per call."""
    state, seen, stack = [], set(), [value]
    leaves, items_of = _PLAIN_LEAVES, _PLAIN_ITEMS
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in leaves or id(item) in seen:
            continue
        seen.add(id(item))
        if kind is tuple or kind is frozenset:
            stack.extend(item)
            continue
        take = items_of.get(kind)
        if take is None:
            return None
        items = take(item)
        state.append((item, items))
        stack.extend(items)
    return state


def _plain_unchanged(state):
    """Whether every container `_plain_state` noted holds the very objects it held then."""
    for container, items in state:
        now = _PLAIN_ITEMS[type(container)](container)
        if len(now) != len(items) or any(map(operator.is_not, now, items)):
            return False
    return True


def _answer(peer, function, args, kwargs, drain=True):
    """Run one call here and encode what it did: a reply message (see `settle`). `drain`
    False (a view's operation): an iterator comes back as a view, advanced on request."""
    awaited = False
    if type(function) is tuple:  # the entry point: (function, awaited)
        function, awaited = function
    if peer.entry is not None:
        failed = _apply_process_state()
        if failed is not None:
            return wire.dumps(("cannot-cross", failed))
    # What the call may change in place: plain data is compared item by item, anything else
    # by its encoding before and after.
    plain, before = _plain_state((args, kwargs)), None
    if plain is None:
        try:
            before = peer.fingerprint((args, kwargs))  # (as `after` below: callables as handles)
        except wire.Unencodable:
            pass
    saved = sys.stdout, sys.stderr
    if peer.capture_output:
        sys.stdout, sys.stderr = _capture_stream(), _capture_stream()
    if peer.entry is not None:
        _apply_view()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = function(*args, **kwargs)
            if awaited and inspect.iscoroutine(result):
                import asyncio  # here only: importing it costs every server 30 ms at start

                result = asyncio.run(result)
            outcome = ("return", result)
            if drain and _is_lazy(result):
                # Iterators and generators cannot cross alive: drained here (bounded), while
                # the call's output, warnings and log records are still taken, and the other
                # side replays the items and then the exception they ended with.
                try:
                    outcome = ("iterate", _drain(result))
                except wire.Unencodable as error:
                    outcome = ("cannot-cross", error)
        except BaseException as error:
            outcome = ("raise", error)
        finally:
            out, err = "", ""
            if peer.capture_output:
                out = _captured(sys.stdout, peer.output_cap)
                err = _captured(sys.stderr, peer.output_cap)
                sys.stdout, sys.stderr = saved
    try:
        # What the call printed or warned crosses whole or not at all: a test that checks
        # something was not printed or warned must not pass because it was cut off.
        if out is None or err is None:
            raise wire.Unencodable(f"the call printed more than {peer.output_cap} characters "
                                   "(the run's output limit)")
        warned = _warning_runs(caught)
        logged = _take_logged() if peer.entry is not None else []
        mutated = None
        if (not _plain_unchanged(plain) if plain is not None
                else peer.fingerprint((args, kwargs)) != before):
            mutated = (tuple(args), dict(kwargs))
        # (nothing printed crosses as None: no bytes to encode here and decode there)
        effects = ((mutated, out or None, err or None, warned, logged)
                   if mutated is not None or out or err or warned or logged else None)
        if outcome[0] == "cannot-cross":
            raise outcome[1]
        if outcome[0] == "iterate":
            items, stop = outcome[1]
            data = None if stop is None else wire.encode_exception(stop)
            return _framed(peer.dumps(("iterate", items, data, effects), "the returned iterator"))
        if outcome[0] == "return":
            return _framed(peer.dumps(("return", outcome[1], None, effects), "the return value"))
        error = outcome[1]
        # The candidate's frames go to the judge (a failure shows them); the judge's, from a
        # callback of the tests, would show the candidate the tests' source lines.
        frames = _frames(error) if peer.entry is not None else ""
        data = wire.encode_exception(error)
        if peer.entry is None and _may_name_expected_values(error):
            data = {**data, "args": [], "state": {}, "str": ""}
        elif peer.entry is None:  # (an argument that cannot cross goes as its str: `<... at 0x7f...>`)
            data = {**data, "str": _without_addresses(data["str"]),
                    "args": [[kind, _without_addresses(arg) if kind == "s" else arg] for kind, arg in data["args"]]}
        return _framed(peer.dumps(("raise", data, frames, effects)))
    except wire.Unencodable as error:
        if isinstance(peer, Channel) and peer.problem is None:
            # A reply the judge does not send fails the test, whatever the candidate does.
            peer.problem = (CrossingFailed.reason, f"the reply cannot cross: {error}")
        return wire.dumps(("cannot-cross", str(error)))
    except BaseException as error:  # a hostile __repr__/__reduce__ while encoding
        if isinstance(peer, Channel) and peer.problem is None:
            peer.problem = (CrossingFailed.reason, f"a reply could not be encoded ({type(error).__name__})")
        return wire.dumps(("cannot-cross", f"the reply could not be encoded ({type(error).__name__})"))


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def _without_addresses(text):
    """`text` without the judge's memory addresses (a default repr's `at 0x7f...`)."""
    return _ADDRESS.sub("0x…", text) if type(text) is str else text


def _may_name_expected_values(error, depth=0):
    """Whether an exception a callback of the tests raised may carry what the tests expect,
    so that the candidate gets only its class: an assertion failing (`assert`, `assertEqual`),
    a testing framework's or the tests' own exception (`pytest.fail(...)`), anything that is
    not an `Exception`, or a group holding one of those."""
    if isinstance(error, AssertionError) or not isinstance(error, Exception):
        return True
    if any(wire.testing_module(str(getattr(klass, "__module__", ""))) for klass in type(error).__mro__):
        return True
    members = getattr(error, "exceptions", None) if isinstance(error, _GROUPS) else None
    return type(members) is tuple and (depth >= 32 or any(
        _may_name_expected_values(member, depth + 1) for member in members if isinstance(member, BaseException)))


_GROUPS = tuple(group for group in (getattr(builtins, "BaseExceptionGroup", None),) if group is not None)  # 3.11+


def _framed(reply):
    """A reply the other side can read: over the frame cap it would end the channel for every
    later call (the other side takes such a frame for a broken protocol), so it cannot cross."""
    if len(reply) > FRAME_CAP:
        raise wire.Unencodable(f"the call's reply ({len(reply)} bytes: its value, output, warnings and "
                               f"log records) is over the {FRAME_CAP}-byte cap")
    return reply


def _is_lazy(value):
    """An iterator (generator, map, zip, ...): not a value, and not something that crosses."""
    return (hasattr(type(value), "__next__") and hasattr(type(value), "__iter__")
            and not isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset, RemoteView))
            and type(value) not in wire.STREAMS)  # a stream is read as a file is: a value


def _drain(iterator):
    items, start = [], _VIEW_USES[0]
    try:
        for item in iterator:
            items.append(item)
            if len(items) > ITEMS_CAP:
                raise wire.Unencodable(f"the returned iterator gave more than {ITEMS_CAP} items")
            if _VIEW_USES[0] - start > VIEW_DRAIN_CAP:
                # (each use is a round trip: an iterator over the tests' endless one would take
                # the wall clock, where in-process it is lazy)
                raise wire.Unencodable(f"the returned iterator used the tests' objects more than {VIEW_DRAIN_CAP} "
                                       "times while it was drained: one that reads them lazily cannot cross")
    except wire.Unencodable:
        raise
    except BaseException as error:
        return items, error
    return items, None


def _warning_runs(caught):
    """The warnings a call raised, in order, a run of the same warning from the same line (a
    loop's) as one entry with its count: [(record, filename, lineno, count)]. More than
    WARNINGS_CAP runs, or WARNINGS_TOTAL warnings, cannot cross."""
    runs, last, total = [], None, 0
    for w in caught:
        if not isinstance(w.message, Warning):
            continue
        total += 1
        key = (type(w.message), str(w.message), str(w.filename), int(w.lineno))
        if key == last:
            runs[-1][3] += 1
            continue
        if len(runs) == WARNINGS_CAP:
            raise wire.Unencodable(f"the call raised more than {WARNINGS_CAP} different warnings "
                                   "in a row (more cannot cross)")
        runs.append([wire.encode_exception(w.message), key[2], key[3], 1])
        last = key
    if total > WARNINGS_TOTAL:
        raise wire.Unencodable(f"the call raised {total} warnings (more than {WARNINGS_TOTAL} cannot cross)")
    return [tuple(run) for run in runs]


def _capture_stream():
    """Where a call's output goes: a text stream over bytes, as pytest captures a test's (and
    as a process's stdout is), so what writes bytes to `sys.stdout.buffer` works too."""
    return io.TextIOWrapper(io.BytesIO(), encoding="UTF-8", newline="", write_through=True)


def _captured(stream, cap):
    """What `stream` holds (the bytes written to it, as they were written, where it is the
    stream `_capture_stream` made), or None when it is more than `cap` characters or bytes."""
    try:
        if type(stream) is io.TextIOWrapper and type(stream.buffer) is io.BytesIO:
            stream.flush()
            text = stream.buffer.getvalue()
        else:
            text = stream.getvalue()
    except Exception:
        return ""
    if type(text) is not str and type(text) is not bytes:
        return ""
    if len(text) > cap and (type(text) is str or len(text.decode("utf-8", "replace")) > cap):
        return None
    return text


def _frames(error):
    """The traceback frames of a candidate-side exception, minus this module's own."""
    tb = error.__traceback__
    while tb is not None and os.path.dirname(tb.tb_frame.f_code.co_filename) == _HERE:
        tb = tb.tb_next
    try:
        return "".join(traceback.format_tb(tb))[-8000:]
    except BaseException:
        return ""


def _target(module, entry_point):
    parts = entry_point.split(".")
    obj = vars(module)[parts[0]]
    for part in parts[1:]:
        raw = vars(obj).get(part) if isinstance(obj, type) else None
        obj = raw if raw is not None else getattr(obj, part)
    if isinstance(obj, (staticmethod, classmethod)):
        return obj.__func__
    if isinstance(obj, property):
        return obj.fget
    return obj


# ------------------------------------------------------------------------------ warm-up


_WARM_UP_TARGETS = """\
def echo(*args, **kwargs):
    print("echo")
    return args, kwargs


def fail(*args):
    raise ValueError("knowbench warm-up")
"""

# Values of the kinds tests most often pass and targets most often return.
_WARM_UP_ARGS = ((1, 2.5, "text", None, True), ([1, 2, 3], {"key": (4, "five")}, {6, 7}),
                 ([[1.5, -2], [3, 4]], "x" * 40, b"raw", 10 ** 30))


def warm_up():
    """In a fork server, before it forks any sample's process: make the calls every split
    sample makes — requests, the candidate's answers (a return and a raise) and their
    settling on the judge's side — through this module's own loops, on a socket pair and a
    target of the runner's own, so that each child finds these paths warm (quickened code,
    filled caches) instead of writing to those pages itself on its first call. No sample's
    code or value is involved, no module is imported; what it leaves is garbage for the
    caller's collection. Returns the kinds of the candidate's replies ("return", "raise")."""
    import socket

    module = types.ModuleType("knowbench_warm_up")
    exec(compile(_WARM_UP_TARGETS, "<knowbench warm-up>", "exec"), module.__dict__)
    resolver = wire.Resolver(allowed_modules=None, functions=False)
    values = list(_WARM_UP_ARGS)
    np, pd = sys.modules.get("numpy"), sys.modules.get("pandas")  # preloaded, never imported here
    if np is not None:
        values.append((np.array([1.5, -2.0]), np.arange(4).reshape(2, 2), np.int64(3), np.float64(0.5)))
    if pd is not None:  # no strings, not even as labels: pandas 3 imports pyarrow's pandas_compat for them
        values.append((pd.DataFrame({0: [1, 2], 1: [0.5, 1.5]}), pd.Series([1.0, 2.0])))
    calls = [(name, args) for args in values for name in ("echo", "fail")]
    saved = sys.stdout, sys.stderr
    try:
        sys.stdout = sys.stderr = io.StringIO()  # what the target prints, replayed by the judge
        # The candidate's side: its loop answers requests written ahead, until the channel ends.
        judge_end, candidate_end = socket.socketpair()
        with judge_end, candidate_end:
            for name, args in calls:
                send_frame(judge_end.fileno(), wire.dumps(("request", "call", (name, False), args, {}, None, None)))
            judge_end.shutdown(socket.SHUT_WR)
            serve_calls(module, candidate_end.fileno(), 1024)
            replies = [recv_frame(judge_end.fileno()) for _ in calls]
        # The judge's side: its calls read the replies written ahead.
        judge_end, candidate_end = socket.socketpair()
        with judge_end, candidate_end:
            for reply in replies:
                send_frame(candidate_end.fileno(), reply)
            channel = Channel(judge_end.fileno(), resolver)
            process_loaded(channel)
            for name, args in calls:
                try:
                    channel.call_entry(name, args, {})
                except (ValueError, CrossingFailed, CandidateGone):  # `fail`; a value that did not cross
                    pass
    finally:
        sys.stdout, sys.stderr = saved
    return [wire.loads(reply, resolver)[0] for reply in replies]
