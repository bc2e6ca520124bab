"""Graft a program's target into the installed module it was cut from.

A mined task's program is a cut of one module of an installed library, run as module
`solution` beside it. Alone, it leaves the library's own calls of the target on the installed
original: a subclass the library defines, a module function that calls it, an object the
library makes (`parser.parse()` through the module's `DEFAULTPARSER`) never run the candidate.
Once the program has loaded, `graft` puts the program's target in the original's place:

- a module-level function: in every module of the library's package that binds the original
  (`from .core import target` in a sibling included);
- a method: the program's class *becomes* the installed class. Every function, property,
  static and class method of the program's class body (the target, the methods the context
  copied, a helper method the candidate added) is set on the installed class, as is a name the
  installed class lacks; its other attributes (class-level state, registries, slots) stay the
  installed class's. A name in the installed class bound to the same function as the replaced
  one (`__radd__ = __add__`) follows it. The program's name for the class is then bound to the
  installed class, so `Cls(...)`, `isinstance(x, Cls)` and `super(Cls, self)` in the program
  and the tests mean the installed class, and the methods' `__class__` cell (zero-argument
  `super()`, decorated methods included) names it too. A default a method took from the class
  body (`def pop(self, key, default=__marker)`) is the installed class's value of that name,
  which the library's objects hold.

What else in the library's package holds the original gets the program's target too, as it
would had the source been edited: a default argument (`def get(self, key,
getitem=Cache.__getitem__)`) of a function or method of the package, a cell of a closure the
package made (a decorator's wrapped function), an entry of a dict or list the package keeps at
module or class level (a registry filled at import time). Not what only a `functools.partial`,
a bound method or an object of the library holds. A method reads the program's globals:
module-level names stay the program's, but what is later set on the installed module (a
test's `monkeypatch.setattr(module, "name", fake)`) is set on the program's too
(`follow_writes`), in the process that runs the candidate's code with the tests.

Stdlib only; runs inside the sandbox, in the sample's process (in-process), and in both
processes of a split sample: the judge grafts its proxy (and the benchmark's own methods), the
candidate's process the candidate's code. Each process then finds the target where the
program's names lead, as before: the program's name for the class is the installed class.
"""

import importlib
import sys
import types

# Values of these types may be one object under unrelated names (`None`, small ints, interned
# strings): a default that is one of them is no sign it was taken from the class body.
_SHARED_VALUES = frozenset({type(None), bool, int, float, complex, str, bytes, tuple, frozenset,
                            type(Ellipsis), type(NotImplemented)})
_METHOD_KINDS = (types.FunctionType, staticmethod, classmethod, property)
_SWEEP_CAP = 200_000  # objects one sweep of a package looks at
_MISSING = object()


class GraftFailed(Exception):
    """The target could not be put in its place in the installed module."""


def graft(namespace, entry_point, installed, wrap=None):
    """Put the target `entry_point` of the program (its globals `namespace`) in its place in
    module `installed`; return how many bindings now hold it (0: the installed module has no
    such target, and the program stands alone). Raises GraftFailed.

    `wrap(function)` makes what an installed class runs for the target from the program's
    function (default: the function itself); the installed binding keeps the program's kind (a
    staticmethod, classmethod or property around it)."""
    try:
        module = importlib.import_module(installed)
        parts = entry_point.split(".")
        if len(parts) == 1:
            return _graft_function(module, installed, parts[0], namespace.get(parts[0]))
        return _graft_class(namespace, module, parts, wrap)
    except GraftFailed:
        raise
    except Exception as error:
        raise GraftFailed(f"the target {entry_point} could not be grafted into the installed module "
                          f"{installed}: {type(error).__name__}: {error}") from error


def follow_writes(namespace, installed):
    """Make what is set on the installed module `installed` once the program has loaded (a
    test's `cli.open = fake`, `monkeypatch.setattr(module, name, value)`, `mock.patch(
    "package.module.name")`, and their undoing) the program's module-level name too, as it
    would be had the program's source been the module's: the program's functions read their
    own globals (`namespace`), whose names the module's are copies of. A name set back to what
    the module held before the first such write (or deleted, where it held none) is the
    program's own again. Writes straight into the module's `__dict__`, and dunder names, are
    not followed. Returns whether the module now follows (one whose class cannot be changed
    does not)."""
    module = sys.modules.get(installed)
    if not isinstance(module, types.ModuleType) or vars(module) is namespace:
        return False
    base = type(module)
    before = {}  # name -> (the module's value, the program's) when the first write came

    def noted(name):
        if name.startswith("__") and name.endswith("__"):
            return False
        if name not in before:
            before[name] = (vars(module).get(name, _MISSING), namespace.get(name, _MISSING))
        return True

    def follow(name):
        now = vars(module).get(name, _MISSING)
        if now is before[name][0]:
            now = before.pop(name)[1]
        if now is _MISSING:
            namespace.pop(name, None)
        else:
            namespace[name] = now

    class Following(base):
        def __setattr__(self, name, value):
            following = self is module and noted(name)
            base.__setattr__(self, name, value)
            if following:
                follow(name)

        def __delattr__(self, name):
            following = self is module and noted(name)
            base.__delattr__(self, name)
            if following:
                follow(name)

    Following.__name__, Following.__qualname__ = base.__name__, base.__qualname__
    Following.__module__ = base.__module__
    try:
        module.__class__ = Following
    except TypeError:
        return False
    return True


def _graft_function(module, installed, name, new):
    original = vars(module).get(name)
    if original is None or new is None or original is new:
        return 0
    count = _put(installed.partition(".")[0], {id(original): (original, new)}, bindings=True)
    if vars(module).get(name) is original:  # (rebound since the package was indexed)
        vars(module)[name] = new
        count += 1
    return count


# Where a package held each value when a warm server loaded it (`index`), made before the
# samples that use it were forked: {top: (the package's modules then, {id(value): ((kind,
# holder, key, owner), ...)})}; None for a package tried and not indexed.
_INDEXES = {}


def index(top):
    """Note where package `top`, as loaded now, holds each value a graft may replace (the
    places `_places` walks to), once: a warm server does it before it forks the samples that
    graft into the package, whose grafts then look their original up instead of walking
    the whole package (in each sample's process, 74 ms for pandas, 112 for sympy). It holds
    while the package's loaded modules are the same ones; a sample that imported another
    walks. Returns whether an index was made now (none for a package not loaded)."""
    if top in _INDEXES:
        return False
    _INDEXES[top] = None  # (once, whatever happens, until the server loads more: `forget_indexes`)
    modules = _package_modules(top)
    if not modules:
        return False
    places = {}
    for kind, holder, key, value, owner in _places(top, _indexable):
        places.setdefault(id(value), []).append((kind, holder, key, owner))
    _INDEXES[top] = (modules, {found: tuple(where) for found, where in places.items()})
    return True


def forget_indexes():
    """Drop every index (`index`): the server loaded more modules, and the next graft into
    each package indexes it again."""
    _INDEXES.clear()


def _indexable(value):
    """Whether a value may be an original (`_SHARED_VALUES` are not; nor is a module)."""
    return type(value) not in _SHARED_VALUES and not isinstance(value, types.ModuleType)


def _package_modules(top):
    """(name, module) of package `top`'s loaded modules, as `sys.modules` orders them."""
    return tuple((name, held) for name, held in list(sys.modules.items())
                 if held is not None and _in_package(name, top))


def _in_package(name, top):
    """Whether module `name` is package `top` or one of its modules."""
    return name == top or name.startswith(top + ".")


def _indexed_places(top, replacements):
    """The places `index` noted for the originals in `replacements` (kind, holder, key), but
    an original's own (`_places`' `skip`); None where package `top` has no index, or has
    loaded other modules since."""
    indexed = _INDEXES.get(top)
    if indexed is None or not _same_modules(top, indexed[0]):
        return None
    return [place for found in replacements for place in indexed[1].get(found, ())
            if place[3] is None or not _original(replacements, place[3])]


def _same_modules(top, modules):
    """Whether package `top`'s loaded modules are `modules` ((name, module) pairs): as many,
    each name the same module. (Counted by name, and only the package's modules compared:
    each module object read is a page copied from the server, 2 ms of pandas' 600.)"""
    count = sum(1 for name in list(sys.modules) if _in_package(name, top))
    get = sys.modules.get
    return count == len(modules) and all(get(name) is held for name, held in modules)


def _put(top, replacements, bindings):
    """Put each function's replacement (`replacements`: {id(original): (original, new)})
    where package `top` holds the original: in the places `_places` walks to (or that
    `index` noted), module-level names only where `bindings`. Returns how many places
    changed."""
    if not replacements:
        return 0

    def original(value):
        return _original(replacements, value)

    places = _indexed_places(top, replacements)
    count = 0
    # (What a place holds is read as it is reached: one the index lists twice, or a dict
    # two modules bind, holds the replacement by the second time.)
    for kind, holder, key, *_ in _places(top, original, replacements) if places is None else places:
        value = _held(kind, holder, key)
        if (bindings or kind != "binding") and original(value):
            _hold(kind, holder, key, replacements[id(value)][1])
            count += 1
    return count


def _original(replacements, value):
    pair = replacements.get(id(value))
    return pair is not None and pair[0] is value


def _held(kind, holder, key):
    """What a place holds now (`_MISSING`: no longer there)."""
    try:
        if kind == "default":
            return holder.__defaults__[key]
        if kind == "cell":
            return holder.cell_contents
        return holder[key]
    except (LookupError, TypeError, ValueError):
        return _MISSING


def _hold(kind, holder, key, value):
    if kind == "default":
        defaults = holder.__defaults__
        holder.__defaults__ = (*defaults[:key], value, *defaults[key + 1:])
    elif kind == "cell":
        holder.cell_contents = value
    else:
        holder[key] = value


def _package_spaces(top):
    """The namespaces of the loaded modules of package `top`."""
    for _, held in _package_modules(top):
        space = getattr(held, "__dict__", None)
        if type(space) is dict:
            yield space


def _places(top, wanted, skip=None):
    """Where package `top` holds a value `wanted` is true of, as (kind, holder, key, value,
    owner): a name of one of its loaded modules ("binding": the module's dict and the name);
    beyond those, a default of a function or method of the package ("default": the function
    and the index; a keyword-only one is an "item" of its `__kwdefaults__`), a closure cell
    of one ("cell") and of the functions it wraps (a decorator's), each with that function as
    its `owner`, and an entry of a dict or list a module or class of the package keeps
    ("item": a registry filled at import time). An original of `skip` ({id(original):
    (original, new)}) is never looked into: it keeps its own defaults and cells (a wrapper
    that finds itself through one, a recursive closure), for what still holds it."""
    spaces = list(_package_spaces(top))
    pending = []
    for space in spaces:
        for key, value in list(space.items()):
            pending.append(value)
            if wanted(value):
                yield "binding", space, key, value, None
    seen = set()
    while pending and len(seen) < _SWEEP_CAP:
        value = pending.pop()
        key = id(value)
        if key in seen or (skip is not None and key in skip and skip[key][0] is value):
            continue
        seen.add(key)
        if type(value) is types.FunctionType:
            if _of_package(value, top):
                yield from _function_places(value, wanted, pending)
        elif isinstance(value, type):
            if _of_package(value, top):
                spaces.append(vars(value))
                pending.extend(vars(value).values())
        elif isinstance(value, (staticmethod, classmethod)):
            pending.append(value.__func__)
        elif isinstance(value, property):
            pending.extend(part for part in (value.fget, value.fset, value.fdel) if part is not None)
    registries = set()  # a dict or list a module or class keeps; each once (every module's
    for space in spaces:  # `__builtins__` is the one dict)
        for value in list(space.values()):
            if type(value) not in (dict, list) or id(value) in registries:
                continue
            registries.add(id(value))
            if type(value) is dict:
                for key, entry in list(value.items()):
                    if wanted(entry):
                        yield "item", value, key, entry, None
            elif type(value) is list:
                for index, entry in enumerate(list(value)):
                    if wanted(entry):
                        yield "item", value, index, entry, None


def _of_package(value, top):
    module = getattr(value, "__module__", None)
    return type(module) is str and _in_package(module, top)


def _function_places(function, wanted, pending):
    """`_places` in `function`'s defaults and closure cells; queues the functions it wraps."""
    for index, value in enumerate(function.__defaults__ or ()):
        if wanted(value):
            yield "default", function, index, value, function
    kwdefaults = function.__kwdefaults__
    for name, value in list((kwdefaults or {}).items()):
        if wanted(value):
            yield "item", kwdefaults, name, value, function
    for cell in function.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if wanted(contents):
            yield "cell", cell, None, contents, function
        if type(contents) is types.FunctionType:  # a decorator's wrapped function
            pending.append(contents)
    wrapped = vars(function).get("__wrapped__")
    if wrapped is not None:
        pending.append(wrapped)


def _graft_class(namespace, module, parts, wrap):
    """Make each program class on the way to the method `parts` (`A`, `A.B` for `A.B.m`) the
    installed class of the same name, and bind the program's name `A` to the installed `A`;
    1, or 0 (nothing changed) when a class or the target is missing on either side."""
    pairs = []
    program_owner, installed_owner = namespace.get(parts[0]), vars(module).get(parts[0])
    for index in range(1, len(parts)):
        if (not isinstance(program_owner, type) or not isinstance(installed_owner, type)
                or program_owner is installed_owner):
            return 0
        pairs.append((program_owner, installed_owner))
        if index < len(parts) - 1:
            program_owner = vars(program_owner).get(parts[index])
            installed_owner = vars(installed_owner).get(parts[index])
    name = parts[-1]
    if (name not in vars(pairs[-1][1]) or name not in vars(pairs[-1][0])
            or _held_by_the_metaclass(pairs[-1][1], name)):
        return 0
    replacements = {}
    for depth, (program_cls, installed_cls) in enumerate(pairs):
        _point_class_cell(program_cls, installed_cls)
        target = name if depth == len(pairs) - 1 else None
        for key, raw in list(vars(program_cls).items()):
            if key == target:
                grafted = _rehomed(raw, program_cls, installed_cls, wrap)
            elif _held_by_the_metaclass(installed_cls, key):
                continue
            elif isinstance(raw, _METHOD_KINDS):
                grafted = _rehomed(raw, program_cls, installed_cls, None)
            elif key not in vars(installed_cls) and not (key.startswith("__") and key.endswith("__")):
                grafted = raw  # a class-level name the candidate added
            else:
                continue
            original = vars(installed_cls).get(key)
            setattr(installed_cls, key, grafted)
            if isinstance(original, _METHOD_KINDS):
                for alias, value in list(vars(installed_cls).items()):
                    if value is original and alias != key:  # `__radd__ = __add__`
                        setattr(installed_cls, alias, grafted)
                replacements.update(_functions_replaced(original, grafted))
    namespace[parts[0]] = pairs[0][1]
    _put(module.__name__.partition(".")[0], replacements, bindings=False)
    return 1


def _functions_replaced(original, grafted):
    """{id(function): (function, its replacement)} for the function inside a replaced class
    attribute (a plain function, or a static or class method's), which the package may hold
    elsewhere (`getitem=Cache.__getitem__`); empty for a property."""
    def unwrap(raw):
        return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw

    old, new = unwrap(original), unwrap(grafted)
    if type(old) is not types.FunctionType or old is new or not callable(new):
        return {}
    return {id(old): (old, new)}


def _held_by_the_metaclass(cls, name):
    """Whether setting `name` on `cls` sets something of the class itself (`__name__`,
    `__qualname__`: the metaclass's data descriptors), not an entry of its dict."""
    for klass in type(cls).__mro__:
        if name in vars(klass):
            return hasattr(type(vars(klass)[name]), "__set__")
    return False


def _rehomed(raw, program_owner, owner, wrap):
    """`raw` (an attribute of the program's class `program_owner`) as an attribute of `owner`."""
    if isinstance(raw, (staticmethod, classmethod)):
        return type(raw)(_rehomed(raw.__func__, program_owner, owner, wrap))
    if isinstance(raw, property):
        parts = (None if part is None else _rehomed(part, program_owner, owner, None) for part in (raw.fset, raw.fdel))
        parts = (_rehomed(raw.fget, program_owner, owner, wrap), *parts, raw.__doc__)
        try:
            return type(raw)(*parts)
        except TypeError:  # a property subclass made otherwise
            return property(*parts)
    if wrap is not None:
        return wrap(raw)
    return _with_installed_defaults(raw, program_owner, owner)


def _point_class_cell(program_cls, installed_cls):
    """Make the `__class__` cell of `program_cls`'s body (one cell, shared by every method
    that uses zero-argument `super()` or `__class__`, decorated ones too) hold `installed_cls`."""
    seen = set()
    pending = list(vars(program_cls).values())
    while pending and len(seen) < 10000:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, (staticmethod, classmethod)):
            pending.append(value.__func__)
        elif isinstance(value, property):
            pending.extend(part for part in (value.fget, value.fset, value.fdel) if part is not None)
        elif type(value) is types.FunctionType:
            code = value.__code__
            for cell_name, cell in zip(code.co_freevars, value.__closure__ or ()):  # noqa: B905 (Python 3.8)
                try:
                    contents = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                if cell_name == "__class__" and contents is program_cls:
                    cell.cell_contents = installed_cls
                    return
                if type(contents) is types.FunctionType:  # a decorator's wrapped function
                    pending.append(contents)
            wrapped = vars(value).get("__wrapped__")
            if wrapped is not None:
                pending.append(wrapped)


def _with_installed_defaults(function, program_owner, owner):
    """`function`, defined in the class body of `program_owner`, with a default it took from
    the class body (`def pop(self, key, default=__marker)`) replaced by `owner`'s value of that
    name; itself when it took none."""
    if type(function) is not types.FunctionType or not (function.__defaults__ or function.__kwdefaults__):
        return function
    theirs = vars(owner)
    same = {id(value): theirs[name] for name, value in list(vars(program_owner).items())
            if name in theirs and type(value) not in _SHARED_VALUES and not isinstance(value, _METHOD_KINDS)}
    moved = [False]

    def installed_value(value):
        found = same.get(id(value), value)
        moved[0] = moved[0] or found is not value
        return found

    defaults = function.__defaults__ and tuple(map(installed_value, function.__defaults__))
    kwdefaults = function.__kwdefaults__ and {name: installed_value(value)
                                              for name, value in function.__kwdefaults__.items()}
    if not moved[0]:
        return function
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__, defaults,
                              function.__closure__)
    copy.__kwdefaults__ = kwdefaults
    copy.__qualname__ = function.__qualname__
    copy.__annotations__ = function.__annotations__
    copy.__dict__.update(function.__dict__)
    return copy
