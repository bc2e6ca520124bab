"""The library APIs a task's reference calls: what knowledge of the library would help.

Builders record them as a task's `knowledge_apis`, and retrieval diagnostics (hit@k) ask
whether a retrieved chunk documents or defines one of them. The target itself is never one:
leakage control withholds it, so looking for it would only count its namesakes.

`called_apis` walks the body of the target's definition and resolves every callee rooted at a
name the function does not bind itself (a parameter or local variable is unknown, `self` and
`cls` are the target's class) with a resolver:

- `knowbench mine` resolves through the whole repository (`Resolver`): re-exports are followed
  to the module that defines the API, and only the mined library's functions, methods and
  classes count (`repository_resolver`);
- a single piece of code (a DomainEval subject's `method_code`) resolves through its own
  imports and top-level definitions (`ImportScope`): any non-standard-library module counts.

Builtins and the standard library never count. Calls through values whose type is unknown
(`engine.begin()` on a parameter, `TABLE.keys()` on an imported constant) cannot be resolved
statically and are not recorded.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Collection

from knowbench.builders.repository import (
    Instance,
    Module,
    Repository,
    Resolver,
    Symbol,
    is_test_module,
    top_level_statements,
)
from knowbench.parsing import parse_python

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_NOT_LIBRARY = frozenset(sys.stdlib_module_names) | {"__future__", "builtins"}
_SELF = ("self", "cls")

Resolve = Callable[[ast.expr], str | None]


def called_apis(target: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve, *,
                typed: Collection[str] = (), exclude: Collection[str] = ()) -> list[str]:
    """Qualified names of what the body of `target` calls, in order of first call, as
    `resolve` names them (None: not an API that counts). Callees rooted at a parameter or a
    local variable are skipped unless listed in `typed` (locals the resolver knows the type
    of); names in `exclude` (the target itself) are left out."""
    local = _local_names(target) - set(typed)
    found: list[str] = []
    for statement in target.body:
        for node in ast.walk(statement):
            if not isinstance(node, ast.Call):
                continue
            root = _root(node.func)
            if root is None or (root in local and root not in _SELF):
                continue
            name = resolve(node.func)
            if name and name not in exclude and name not in found:
                found.append(name)
    return found


def is_library_name(dotted: str) -> bool:
    """Not a builtin or a standard-library module's name."""
    return bool(dotted) and dotted.split(".")[0] not in _NOT_LIBRARY


# ------------------------------------------------------------------------------ mined tasks


def repository_apis(repository: Repository, resolver: Resolver, module: Module, target: Symbol,
                    node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The mined library's functions, methods and classes that `target` (defined by `node` in
    `module`) calls, named where they are defined."""
    local_types: dict[str, Symbol | Instance] = {}
    owner = target.qualname.rpartition(".")[0]
    if owner and resolver.class_node(Symbol(module.name, owner, "class")) is not None:
        cls = Symbol(module.name, owner, "class")
        local_types.update({"self": Instance(cls), "cls": cls})
    for statement in node.body:  # `x = Cls(...)` types `x` (one pass, in order)
        for inner in ast.walk(statement):
            if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and \
                    isinstance(inner.targets[0], ast.Name):
                value = resolver.expression(module, inner.value, local_types)
                if isinstance(value, Instance):
                    local_types[inner.targets[0].id] = value

    def resolve(expr: ast.expr) -> str | None:
        found = resolver.expression(module, expr, local_types)
        if not isinstance(found, Symbol) or found.kind not in ("function", "method", "class"):
            return None
        defining = repository.module(found.module)
        if defining is None or not defining.library or is_test_module(defining):
            return None
        return found.dotted

    return called_apis(node, resolve, typed=[name for name in local_types if name not in _SELF],
                       exclude={target.dotted})


# ----------------------------------------------------------------------- one piece of code


class ImportScope:
    """What the top-level names of one piece of code denote: its imports (relative ones
    against `module`) and its own definitions (`module.name`)."""

    def __init__(self, tree: ast.Module, module: str | None, is_package: bool = False) -> None:
        self.module = module or None
        self.names: dict[str, str] = {}
        package = (module or "") if is_package else (module or "").rpartition(".")[0]
        for statement in top_level_statements(tree):
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.asname:
                        self.names[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.names[top] = top
            elif isinstance(statement, ast.ImportFrom):
                base = _absolute(package, statement.level, statement.module)
                for alias in statement.names:
                    if base and alias.name != "*":
                        self.names[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(statement, _FunctionNode | ast.ClassDef) and self.module:
                self.names[statement.name] = f"{self.module}.{statement.name}"

    def resolver(self, owner: str | None = None) -> Resolve:
        """Resolve a callee to a qualified library name; `self.x` / `cls.x` inside a method
        of class `owner` (defined in this code) is `module.owner.x`."""

        def resolve(expr: ast.expr) -> str | None:
            chain = _chain(expr)
            if not chain:
                return None
            root, rest = chain[0], chain[1:]
            if root in _SELF:
                if not owner or not self.module or not rest:
                    return None
                dotted = ".".join([self.module, owner, *rest])
            elif root in self.names:
                dotted = ".".join([self.names[root], *rest])
            else:
                return None
            owners = dotted.split(".")[:-1]
            if any(_is_constant(part) for part in owners):  # `HASH_METHODS.keys()`: a value's method
                return None
            return dotted if is_library_name(dotted) else None

        return resolve


def code_apis(code: str, entry_point: str, module: str | None, is_package: bool = False,
              target: ast.FunctionDef | ast.AsyncFunctionDef | None = None) -> list[str]:
    """The non-standard-library APIs that the definition of `entry_point` in `code` calls,
    resolved through the imports and definitions of `code` (which lives in `module`)."""
    from knowbench.benchmark.schema import find_definition

    try:
        tree = parse_python(code)
    except SyntaxError:
        return []
    node = target or find_definition(tree, entry_point)
    if node is None:
        return []
    owner = entry_point.rpartition(".")[0] or None
    scope = ImportScope(tree, module, is_package)
    exclude = {f"{module}.{entry_point}"} if module else set()
    return called_apis(node, scope.resolver(owner), exclude=exclude)


def _is_constant(name: str) -> bool:
    """An UPPER_CASE name: a constant by convention, whose methods are its value's type's."""
    return len(name) > 1 and name.isupper()


def _absolute(package: str, level: int, name: str | None) -> str | None:
    if level == 0:
        return name
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or not parts:
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base) or None


def _chain(expr: ast.expr) -> list[str]:
    """['a', 'b', 'c'] for `a.b.c`; [] for anything else."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return []
    return [expr.id, *reversed(parts)]


def _root(expr: ast.expr) -> str | None:
    """The name an attribute chain, call or subscript starts from."""
    while isinstance(expr, ast.Attribute | ast.Call | ast.Subscript):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _local_names(target: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters and every name the function binds (assignments, loops, `with ... as`,
    nested definitions, imports inside it, exception names)."""
    arguments = target.args
    names = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    for statement in target.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.id)
            elif isinstance(node, _FunctionNode | ast.ClassDef | ast.ExceptHandler) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names
