"""The target-API spy of the in-sandbox runner; stdlib only.

A task that names a target API (`spy` in the runner's configuration) has that API replaced,
after the program loaded and before its first test, by a spy in every loaded module that binds
it (`from lib import f as g`, `import lib.mod as m` then `m.f`, `g = lib.f` at module level,
re-exports): a function by a wrapper. A class keeps its identity (isinstance and the library's
own `super(Cls, self)` calls must keep working): its `__init__` (or, when it has none, its
`__new__`) is wrapped in place, so constructing it or a subclass counts; a class that cannot be
patched (a C type) is replaced by a counting subclass instead. Each call is counted, with
whether its arguments bind to the target's signature.

How a call is recorded, and why a sample cannot simply claim one. The count is not kept where
sample code can reach it. The spy's code, once the real target returned or raised, raises an
audit event; an audit hook installed by the runner before any sample code ran (hooks cannot be
listed or removed from Python) accepts it only when the frame raising it runs the spy's own
code object with the real target (resolved and held before any sample code existed) as its
`original` (and, for a class, the real constructor it wraps as `init` / `new`). So the only way to add a call is to run the spy's code, which calls the real
target. The hook keeps the counts in its closure; the runner's reporting thread reads them
with `take()` and writes them into the test's result record, which carries the execution's
key. Whether the arguments bind is decided in the hook from the number of positional
arguments and the exact-`str` keyword names only (no value of the sample is touched), against
parameters read from the real target's signature before any sample code ran.

Not covered: a sample that writes the process's memory (ctypes) can forge this, as it can forge
any in-process verdict (docs/execution.md). Calls made while the program loads are not counted
(the spy is installed after), nor calls through a reference the spy did not replace (one held
in a container, a closure or a default argument).
"""

import sys

EVENT = "knowbench.target_api.call"

# Parameter kinds, as inspect numbers them.
_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD, _VAR_POSITIONAL, _KEYWORD_ONLY, _VAR_KEYWORD = range(5)


def resolve(api):
    """The object `api` ('pkg.mod.name' or 'pkg.Cls.method') names, importing what it needs.
    Raises ImportError / AttributeError when it does not exist."""
    import importlib

    parts = api.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for name in parts[cut:]:
            owner = getattr(owner, name)
        return owner
    raise ImportError(api)


def parameters(target):
    """(name, kind, has_default) for each parameter of `target`'s signature; None when it has
    none that inspect can read (some builtins)."""
    import inspect

    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    return tuple((p.name, int(p.kind), p.default is not p.empty) for p in signature.parameters.values())


def recorder(params):
    """(hook, take, accepted): the audit hook that counts the spy's calls, a function returning
    (calls, bound calls or None when the signature is unknown) since the last take, and the
    list of (spy code object, ((local name, object it must be), ...)) the hook accepts (filled
    in by `make_spy`): a frame counts only when it runs one of those codes with each named
    local (closure variable) bound to exactly that object."""
    counts = [0, 0]
    accepted = []
    getframe, length, type_of, str_type, tuple_type, dict_type = \
        sys._getframe, len, type, str, tuple, dict
    positional_slots = tuple(p for p in params or () if p[1] in (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD))
    var_positional = any(p[1] == _VAR_POSITIONAL for p in params or ())
    var_keyword = any(p[1] == _VAR_KEYWORD for p in params or ())
    by_name = {p[0]: p for p in params or ()}
    required = tuple(p[0] for p in params or ()
                     if p[1] in (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD, _KEYWORD_ONLY) and not p[2])

    def binds(count, names):
        # inspect.Signature.bind on placeholders, written out so no patched module decides it
        if count > length(positional_slots) and not var_positional:
            return False
        filled = {slot[0] for slot in positional_slots[:count]}
        for name in names:
            param = by_name.get(name)
            if param is None or param[1] == _POSITIONAL_ONLY or param[1] in (_VAR_POSITIONAL, _VAR_KEYWORD):
                if not var_keyword:
                    return False
                continue
            if name in filled:
                return False
            filled.add(name)
        for name in required:  # noqa: SIM110 (no builtin looked up: a sample could shadow it)
            if name not in filled:
                return False
        return True

    def hook(event, args):
        if event != EVENT:
            return
        frame = getframe(1)
        code = frame.f_code
        expected = None
        for accepted_code, bindings in accepted:
            if accepted_code is code:
                expected = bindings
                break
        if expected is None:
            return
        local = frame.f_locals
        for name, value in expected:
            if local.get(name) is not value:
                return
        counts[0] += 1
        if params is None:
            return
        call_args, call_kwargs = local.get("args"), local.get("kwargs")
        if type_of(call_args) is not tuple_type or type_of(call_kwargs) is not dict_type:
            return
        names = []
        for key in call_kwargs:
            if type_of(key) is not str_type:
                return
            names.append(key)
        if binds(length(call_args), names):
            counts[1] += 1

    def take():
        calls, bound = counts[0], counts[1]
        counts[0] = counts[1] = 0
        return calls, (None if params is None else bound)

    return hook, take, accepted


def make_spy(original, accepted):
    """The spy of `original` and whether it must be bound in place of it (False: a class, whose
    construction is patched in place); adds what the hook accepts to `accepted`."""
    audit, event = sys.audit, EVENT
    if not isinstance(original, type):
        def spy(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                audit(event)
        accepted.append((spy.__code__, (("original", original),)))
        for name in ("__name__", "__qualname__", "__module__", "__doc__"):
            try:
                setattr(spy, name, getattr(original, name))
            except (AttributeError, TypeError):
                pass
        spy.__wrapped__ = original
        return spy, True
    # A class: its own construction is wrapped in place, so identity, isinstance and
    # `super(Cls, self)` inside the library stay as they were; constructing a subclass counts too.
    if original.__init__ is not object.__init__ or original.__new__ is object.__new__:
        init = original.__init__

        def __init__(self, *args, **kwargs):
            try:
                return init(self, *args, **kwargs)
            finally:
                original  # noqa: B018 (a closure variable the hook checks)
                audit(event)
        __init__.__qualname__ = f"{original.__qualname__}.__init__"
        try:
            original.__init__ = __init__
        except (AttributeError, TypeError):
            return _subclass_spy(original, accepted), True
        accepted.append((__init__.__code__, (("original", original), ("init", init))))
        return original, False
    new = original.__new__

    def __new__(cls, *args, **kwargs):
        try:
            return new(cls, *args, **kwargs)
        finally:
            original  # noqa: B018 (a closure variable the hook checks)
            audit(event)
    try:
        original.__new__ = staticmethod(__new__)
    except (AttributeError, TypeError):
        return _subclass_spy(original, accepted), True
    accepted.append((__new__.__code__, (("original", original), ("new", new))))
    return original, False


def _subclass_spy(original, accepted):
    """A class whose construction cannot be patched (a C type): a subclass that counts, bound
    in its place (the library's own code keeps constructing the original uncounted)."""
    audit, event = sys.audit, EVENT

    def __init__(self, *args, **kwargs):
        try:
            return original.__init__(self, *args, **kwargs)
        finally:
            audit(event)
    spy = type(original)(original.__name__, (original,), {"__init__": __init__})
    spy.__qualname__, spy.__module__ = original.__qualname__, original.__module__
    accepted.append((__init__.__code__, (("original", original),)))
    return spy


class Spy:
    """What the runner holds for one sample's target API, made before any sample code runs."""

    def __init__(self, api, required):
        self.api, self.required = api, required
        owner_path, _, self.leaf = api.rpartition(".")
        self.original = resolve(api)
        owner = resolve(owner_path) if owner_path else None
        self.owner = owner if isinstance(owner, type) else None  # a method: rebound on its class too
        self.hook, self.take, accepted = recorder(parameters(self.original))
        self.replacement, self.rebind = make_spy(self.original, accepted)


def install(original, spy, owner, leaf, program, box):
    """Worker-thread job: bind `spy` wherever a loaded module (or the program's namespace)
    binds `original`, and on `owner` (the class of a method target). Sample code may run here
    (a module's __setattr__); the count is only for people."""
    replaced = 0
    if owner is not None:
        try:
            setattr(owner, leaf, spy)
            replaced += 1
        except (AttributeError, TypeError):
            pass
    spaces = [program]
    for module in list(sys.modules.values()):
        try:
            spaces.append(vars(module))
        except TypeError:
            continue
    for space in spaces:
        try:
            keys = [key for key, value in list(space.items()) if value is original]
        except Exception:
            continue
        for key in keys:
            try:
                space[key] = spy
                replaced += 1
            except Exception:
                continue
    box.append(("pass", "", replaced, None))
