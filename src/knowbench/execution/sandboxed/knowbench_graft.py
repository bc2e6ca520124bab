"""Graft a program's target into the installed module it was cut from.

A mined task's program is a cut of one module of an installed library, run as module
`solution` beside it. Alone, it leaves the library's own calls of the target on the installed
original: a subclass the library defines, a module function that calls it, an object the
library makes (`parser.parse()` through the module's `DEFAULTPARSER`) never run the candidate.
Once the program has loaded, `graft` puts the program's target in the original's place:

- a module-level function in every module of the library's package that binds the original
  (`from .core import target` in a sibling included);
- a method, property, static or class method on the installed class, rehomed there: a
  zero-argument `super()` in it looks past the installed class, as the library's does.

What holds the original elsewhere keeps it: a default argument (`def get(self, key,
getitem=Cache.__getitem__)`), a registry filled at import time, a closure.

Stdlib only; runs inside the sandbox, in the sample's process (in-process), and in both
processes of a split sample: the judge grafts its proxy, the candidate its code.
"""

import importlib
import sys
import types

# entry point -> the function the installed class now runs for it, in this process (split, the
# candidate's side answers the judge's calls of the installed class's target with it).
GRAFTED = {}
# Values of these types may be one object under unrelated names (`None`, small ints, interned
# strings): a default that is one of them is no sign it was taken from the class body.
_SHARED_VALUES = frozenset({type(None), bool, int, float, complex, str, bytes, tuple, frozenset,
                            type(Ellipsis), type(NotImplemented)})


def graft(namespace, entry_point, installed, wrap=None):
    """Put the target `entry_point` of the program (its globals `namespace`) in its place in
    module `installed`; return how many bindings now hold it (0: the installed module has no
    such target, and the program stands alone).

    `wrap(function)` makes what an installed class runs from the program's target function
    (default: the function, rehomed); the installed binding keeps the program's kind (a
    staticmethod, classmethod or property around it)."""
    module = importlib.import_module(installed)
    parts = entry_point.split(".")
    if len(parts) == 1:
        return _graft_function(module, installed, parts[0], namespace.get(parts[0]))
    program_owner, installed_owner = namespace.get(parts[0]), vars(module).get(parts[0])
    for part in parts[1:-1]:
        program_owner = vars(program_owner).get(part) if isinstance(program_owner, type) else None
        installed_owner = vars(installed_owner).get(part) if isinstance(installed_owner, type) else None
    if (not isinstance(program_owner, type) or not isinstance(installed_owner, type)
            or program_owner is installed_owner or parts[-1] not in vars(installed_owner)):
        return 0
    raw = vars(program_owner).get(parts[-1])
    if raw is None:
        return 0
    grafted = _rehomed(raw, program_owner, installed_owner, wrap)
    setattr(installed_owner, parts[-1], grafted)
    GRAFTED[entry_point] = _function_of(grafted)
    return 1


def _graft_function(module, installed, name, new):
    original = vars(module).get(name)
    if original is None or new is None or original is new:
        return 0
    top = installed.partition(".")[0]
    count = 0
    for module_name, held in list(sys.modules.items()):
        if held is None or (module_name != top and not module_name.startswith(top + ".")):
            continue
        space = getattr(held, "__dict__", None)
        if type(space) is not dict:
            continue
        for key, value in list(space.items()):
            if value is original:
                space[key] = new
                count += 1
    GRAFTED[name] = new
    return count


def _function_of(raw):
    if isinstance(raw, (staticmethod, classmethod)):
        return raw.__func__
    if isinstance(raw, property):
        return raw.fget
    return raw


def _rehomed(raw, program_owner, owner, wrap):
    """`raw` (an attribute of the program's class `program_owner`) as an attribute of `owner`."""
    if isinstance(raw, (staticmethod, classmethod)):
        return type(raw)(_rehomed(raw.__func__, program_owner, owner, wrap))
    if isinstance(raw, property):
        parts = (None if part is None else _rehomed(part, program_owner, owner, None) for part in (raw.fset, raw.fdel))
        return property(_rehomed(raw.fget, program_owner, owner, wrap), *parts, raw.__doc__)
    if wrap is not None:
        return wrap(raw)
    return rehome(raw, program_owner, owner)


def rehome(function, program_owner, owner):
    """`function`, defined in the class body of `program_owner`, as a method of `owner`: its
    `__class__` cell (a zero-argument `super()`, `__class__`) names `owner`, and a default
    taken from the class body (`def pop(self, key, default=__marker)`) is `owner`'s value of
    that name, which its instances hold; itself when neither applies."""
    code = getattr(function, "__code__", None)
    if type(function) is not types.FunctionType:
        return function
    ours, theirs = vars(program_owner), vars(owner)
    same = {id(value): theirs[name] for name, value in list(ours.items())
            if name in theirs and type(value) not in _SHARED_VALUES
            and not isinstance(value, (types.FunctionType, staticmethod, classmethod, property))}
    moved_any = [False]

    def theirs_for(value):
        found = same.get(id(value), value)
        moved_any[0] = moved_any[0] or found is not value
        return found

    defaults = function.__defaults__ and tuple(map(theirs_for, function.__defaults__))
    kwdefaults = function.__kwdefaults__ and {name: theirs_for(value)
                                              for name, value in function.__kwdefaults__.items()}
    cells = function.__closure__
    if "__class__" in code.co_freevars:
        cells = list(cells)
        cells[code.co_freevars.index("__class__")] = types.CellType(owner)
        cells = tuple(cells)
    elif not moved_any[0]:
        return function
    moved = types.FunctionType(code, function.__globals__, function.__name__, defaults, cells)
    moved.__kwdefaults__ = kwdefaults
    moved.__qualname__ = function.__qualname__
    moved.__annotations__ = function.__annotations__
    moved.__dict__.update(function.__dict__)
    return moved
