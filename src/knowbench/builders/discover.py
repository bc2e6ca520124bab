"""Finding tests in a repository and tracing each one to the library functions it calls.

A *test unit* is a pytest function (`def test*`), a `test*` method of a pytest-style class
(`class Test*`) or of a `unittest.TestCase` subclass, in a test file (`test_*.py`,
`*_test.py`, `tests.py`), that checks something: it holds an `assert`, a `self.assert*` /
`self.fail*` call, an `assert_*` helper call or `pytest.raises` / `pytest.warns` (directly or
in a test-module helper it calls).

Tracing follows every call in the unit (and in the test-module helpers it calls, two levels
deep) through the `Resolver`: names and attribute chains through imports and re-exports,
methods through the class of the object they are called on. Objects are typed from
constructor calls (`k = Key(...)`, `Key.from_pem(...)` for classmethods), from `setUp` /
`setup_method` / class-scoped fixtures (`self.k`, `request.cls.k`) and from pytest fixtures
that return a constructor call. Functions passed to `assertRaises` / `pytest.raises` /
`functools.partial` count as called. From what a test calls, tracing goes on into the
library's own code, two calls deep (`LibraryReach`): a subclass's `super().book(...)`, a
module function's call of a helper, `self.method()`, `self[key]`. A target a test reaches
only that way runs the candidate's code because every run grafts the target into the
installed library (`FunctionTask.installed_module`); a test that did not reach it after all
is pruned at run time (`does-not-call-target`). Only definitions in library (non-test)
modules are targets.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from knowbench.builders.repository import (
    Instance,
    Module,
    Repository,
    Resolver,
    Symbol,
    decorator_name,
    is_test_file_name,
    is_test_module,
)

UnitKind = Literal["function", "class", "unittest"]
_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_RAISES_HELPERS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "assertWarns",
                             "assertWarnsRegex", "raises", "warns", "partial", "deprecated_call"})
_SETUP_METHODS = ("setUp", "setup_method", "setup", "setUpClass", "setup_class", "setUpTestData")
_HELPER_DEPTH = 2
_LIBRARY_DEPTH = 2  # how deep calls are followed into the library's own code


@dataclass
class TestUnit:
    """One test found in a test module, and what it calls."""

    __test__ = False  # not a pytest test class

    module: Module
    function: str
    cls: str | None
    kind: UnitKind
    relpath: str
    targets: set[Symbol] = field(default_factory=set)
    # those of `targets` it reaches only through the library's own code (`LibraryReach`)
    through_library: set[Symbol] = field(default_factory=set)
    # a test method inherited from a base class of `cls` (a mixin, maybe in another test
    # module): the module and class that define it
    defined_in: tuple[Module, str] | None = None

    def reach(self, direct: set[Symbol], library: LibraryReach) -> None:
        """Record what the test calls itself and, beyond it, what the library calls for it."""
        self.through_library = library.beyond(direct) - direct
        self.targets = direct | self.through_library

    @property
    def id(self) -> str:
        parts = [self.relpath, self.cls, self.function]
        return "::".join(part for part in parts if part)

    @property
    def source_module(self) -> Module:
        """The module whose source holds the test's definition."""
        return self.defined_in[0] if self.defined_in is not None else self.module

    def node(self) -> _FunctionNode:
        module, cls = self.defined_in if self.defined_in is not None else (self.module, self.cls)
        body = module.tree.body
        if cls:
            owner = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls)
            body = owner.body
        return next(n for n in body if isinstance(n, _FunctionNode) and n.name == self.function)


def test_modules(repository: Repository) -> list[Module]:
    """Files holding tests: test-named files (in test directories or inside the package)."""
    return [m for m in repository.modules if is_test_file_name(m.path.name) and is_test_module(m)]


def discover_units(repository: Repository, resolver: Resolver) -> list[TestUnit]:
    """Every test unit of the repository that checks something, with its traced targets."""
    units: list[TestUnit] = []
    tracers: dict[int, _ModuleTracer] = {}
    reach = LibraryReach(resolver, repository)

    def tracer_of(module: Module) -> _ModuleTracer:
        if id(module) not in tracers:
            tracers[id(module)] = _ModuleTracer(module, resolver, repository, reach)
        return tracers[id(module)]

    for module in test_modules(repository):
        tracer = tracer_of(module)
        for unit in _units_of(module, resolver, repository):
            if unit.defined_in is None:
                if tracer.asserts(unit.node(), unit.cls):
                    unit.reach(tracer.targets(unit), reach)
                    units.append(unit)
                continue
            # inherited: names resolve in the base's module, `self.x` from the subclass
            base = tracer_of(unit.defined_in[0])
            if base.asserts(unit.node(), unit.defined_in[1]):
                unit.reach(base.trace(unit.node(), unit.defined_in[1], tracer.class_attributes(unit.cls)), reach)
                units.append(unit)
    return units


def _units_of(module: Module, resolver: Resolver, repository: Repository) -> Iterator[TestUnit]:
    relpath = repository.relpath(module)
    for node in last_definitions(module.tree.body):
        if isinstance(node, _FunctionNode) and node.name.startswith("test"):
            yield TestUnit(module, node.name, None, "function", relpath)
        elif isinstance(node, ast.ClassDef):
            kind: UnitKind | None = None
            if is_testcase_class(node, module, resolver):
                kind = "unittest"
            elif node.name.startswith("Test"):
                kind = "class"
            if kind is None:
                continue
            own = set()
            for member in node.body:
                if isinstance(member, _FunctionNode) and member.name.startswith("test"):
                    own.add(member.name)
                    yield TestUnit(module, member.name, node.name, kind, relpath)
            for name, (base_module, base) in inherited_tests(node, module, resolver).items():
                if name not in own:
                    yield TestUnit(module, name, node.name, kind, relpath, defined_in=(base_module, base.name))


def last_definitions(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body` less each function or class that a later one of the same name
    replaces: a module holds the last definition of a name, and the frameworks collect what
    it holds."""
    last = {node.name: node for node in body if isinstance(node, _FunctionNode | ast.ClassDef)}
    return [node for node in body
            if not isinstance(node, _FunctionNode | ast.ClassDef) or last[node.name] is node]


def inherited_tests(node: ast.ClassDef, module: Module, resolver: Resolver
                    ) -> dict[str, tuple[Module, ast.ClassDef]]:
    """`test*` methods a test class inherits from base classes defined in test modules of the
    repository (mixins), each with the module and class defining it; nearest base first."""
    found: dict[str, tuple[Module, ast.ClassDef]] = {}
    pending: list[tuple[Module, ast.ClassDef, int]] = [(module, node, 0)]
    seen: set[int] = {id(node)}
    while pending:
        current_module, current, depth = pending.pop(0)
        for base in current.bases:
            resolved = resolver.expression(current_module, base, {})
            if not (isinstance(resolved, Symbol) and resolved.kind == "class") or depth > 8:
                continue
            base_module = resolver.repo.module(resolved.module)
            base_node = resolver.class_node(resolved)
            if base_module is None or base_node is None or id(base_node) in seen or not is_test_module(base_module):
                continue
            seen.add(id(base_node))
            for member in base_node.body:
                if isinstance(member, _FunctionNode) and member.name.startswith("test"):
                    found.setdefault(member.name, (base_module, base_node))
            pending.append((base_module, base_node, depth + 1))
    return found


def is_testcase_class(node: ast.ClassDef, module: Module, resolver: Resolver, depth: int = 0) -> bool:
    """Whether a class derives from `unittest.TestCase`: through the repository's own bases,
    or a base from elsewhere named `*TestCase` (unittest's, a library's). A repository class
    merely named so (Pint's plain `QuantityTestCase`, with `setup_class`) is no TestCase: its
    subclasses are pytest-style test classes."""
    if depth > 8:
        return False
    for base in node.bases:
        resolved = resolver.expression(module, base, {})
        if isinstance(resolved, Symbol) and resolved.kind == "class":
            base_module = resolver.repo.module(resolved.module)
            base_node = resolver.class_node(resolved)
            if base_module is not None and base_node is not None:
                if is_testcase_class(base_node, base_module, resolver, depth + 1):
                    return True
                continue
        if decorator_name(base).endswith("TestCase"):
            return True
    return False


def fixture_functions(module: Module) -> dict[str, _FunctionNode]:
    """Module-level pytest fixtures by the name tests request them with."""
    found: dict[str, _FunctionNode] = {}
    for node in module.tree.body:
        if isinstance(node, _FunctionNode):
            name = fixture_name(node)
            if name is not None:
                found[name] = node
    return found


def fixture_name(node: _FunctionNode) -> str | None:
    """The name a `@pytest.fixture` function is requested by (its `name=` wins), else None."""
    for decorator in node.decorator_list:
        if decorator_name(decorator).split(".")[-1] in ("fixture", "yield_fixture"):
            if isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                        return str(keyword.value.value)
            return node.name
    return None


def conftest_chain(module: Module, repository: Repository) -> list[Module]:
    """The modules whose fixtures and hooks apply to `module`, outermost first: the
    distribution's own pytest plugins (`Repository.pytest_plugins`), then the conftest.py
    modules from the root down. A fixture of an inner one overrides an outer one's."""
    chain: list[Module] = []
    directory = module.path.parent
    while True:
        candidate = repository.module_of(directory / "conftest.py")
        if candidate is not None:
            chain.insert(0, candidate)
        if directory == repository.root or directory.parent == directory:
            break
        directory = directory.parent
    return [plugin for plugin in repository.pytest_plugins if plugin is not module] + chain


class _ModuleTracer:
    """Traces the units of one test module."""

    def __init__(self, module: Module, resolver: Resolver, repository: Repository, reach: LibraryReach) -> None:
        self.module = module
        self.resolver = resolver
        self.repo = repository
        self.reach = reach  # (which symbols are the library's)
        self.fixtures: dict[str, tuple[Module, _FunctionNode]] = {}
        for source in [*conftest_chain(module, repository), module]:
            for name, node in fixture_functions(source).items():
                self.fixtures[name] = (source, node)
        self.helpers = {n.name: n for n in module.tree.body
                        if isinstance(n, _FunctionNode) and not n.name.startswith("test")}
        self.foreign_helpers: set[int] = set()
        self._class_types: dict[str, dict[str, Symbol | Instance]] = {}

    # -- what a test checks

    def asserts(self, node: _FunctionNode, cls: str | None, depth: int = 0) -> bool:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assert):
                return True
            if isinstance(inner, ast.Call):
                name = decorator_name(inner.func).split(".")[-1]
                if name.startswith(("assert", "fail")) or name in ("raises", "warns", "approx"):
                    return True
                if depth < _HELPER_DEPTH:
                    helper = self._helper(inner.func, cls)
                    if helper is not None and self.asserts(helper, cls, depth + 1):
                        return True
        return False

    def _helper(self, func: ast.expr, cls: str | None) -> _FunctionNode | None:
        """A test helper the call goes to: a function of this test module or of a test-helper
        module it imports, or a non-test method of the test's class."""
        if isinstance(func, ast.Name):
            if func.id in self.helpers:
                return self.helpers[func.id]
            symbol = self.resolver.name(self.module, func.id)
            if isinstance(symbol, Symbol) and symbol.kind == "function":
                module = self.repo.module(symbol.module)
                if module is not None and is_test_module(module):
                    node = self.resolver.definition(symbol)
                    if isinstance(node, _FunctionNode):
                        self.foreign_helpers.add(id(node))  # its names belong to another module
                        return node
                    return None
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in ("self", "cls") and cls is not None:
            owner = self._class(cls)
            if owner is not None:
                return next((m for m in owner.body if isinstance(m, _FunctionNode)
                             and m.name == func.attr and not m.name.startswith("test")), None)
        return None

    def _class(self, name: str) -> ast.ClassDef | None:
        return next((n for n in self.module.tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)

    # -- what a test calls

    def targets(self, unit: TestUnit) -> set[Symbol]:
        return self.trace(unit.node(), unit.cls, self.class_attributes(unit.cls))

    def class_attributes(self, cls: str | None) -> dict[str, Symbol | Instance]:
        """What `self.<attr>` holds in test class `cls` of this module."""
        if cls and cls not in self._class_types:
            self._class_types[cls] = self._self_types(cls)
        return self._class_types.get(cls, {}) if cls else {}

    def trace(self, node: _FunctionNode, cls: str | None, attributes: dict[str, Symbol | Instance]) -> set[Symbol]:
        """The library functions a test (a function of this module) calls."""
        found: set[Symbol] = set()
        self._collect(node, cls, attributes, found, 0)
        return {symbol for symbol in found if self.reach.is_library(symbol)}

    def _collect(self, node: _FunctionNode, cls: str | None, attributes: dict[str, Symbol | Instance],
                 found: set[Symbol], depth: int) -> None:
        local_types = self._local_types(node, attributes)
        for inner in ast.walk(node):
            for operand, names, unless in _implicit_calls(inner):
                # a reflected method runs only when the left operand does not handle it
                if unless is None or not self._add_special(*unless, local_types, attributes, set()):
                    self._add_special(operand, names, local_types, attributes, found)
            if isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Load):
                self._add_property(inner, local_types, attributes, found)
            if not isinstance(inner, ast.Call):
                continue
            called = self._resolve(inner.func, local_types, attributes)
            if isinstance(called, Instance):  # calling an instance runs its __call__
                self._add_special(inner.func, ("__call__",), local_types, attributes, found)
            if isinstance(called, Symbol):
                found.add(called)
                if called.kind == "class":  # constructing: __init__ runs, record it as well
                    init = self.resolver.member(called, "__init__")
                    if init is not None:
                        found.add(init)
            helper = self._helper(inner.func, cls)
            if decorator_name(inner.func).split(".")[-1] in _RAISES_HELPERS or helper is not None:
                for argument in inner.args:  # a function handed to a checker is called by it
                    passed = self._resolve(argument, local_types, attributes)
                    if isinstance(passed, Symbol):
                        found.add(passed)
            if depth < _HELPER_DEPTH and helper is not None and helper is not node and \
                    id(helper) not in self.foreign_helpers:
                self._collect(helper, cls, attributes, found, depth + 1)

    def _add_special(self, operand: ast.expr, names: tuple[str, ...], local_types: dict[str, Symbol | Instance],
                     attributes: dict[str, Symbol | Instance], found: set[Symbol]) -> bool:
        """Add the first of `names` (a special method and its fallbacks) that the class of
        `operand` defines, when `operand` is known to be an instance; whether one was."""
        value = self._resolve(operand, local_types, attributes)
        if not isinstance(value, Instance):
            return False
        for name in names:
            member = self.resolver.member(value.cls, name)
            if member is not None and member.kind == "method":
                found.add(member)
                return True
        return False

    def _add_property(self, node: ast.Attribute, local_types: dict[str, Symbol | Instance],
                      attributes: dict[str, Symbol | Instance], found: set[Symbol]) -> None:
        """`obj.attr` read on a known instance runs the getter when `attr` is a plain
        `@property` (one definition: a getter sharing its name with a setter is ambiguous)."""
        owner = self._resolve(node.value, local_types, attributes)
        if not isinstance(owner, Instance):
            return
        member = self.resolver.member(owner.cls, node.attr)
        if member is None or member.kind != "method":
            return
        cls = self.resolver.class_node(Symbol(member.module, member.qualname.rpartition(".")[0], "class"))
        definitions = [m for m in cls.body if isinstance(m, _FunctionNode) and m.name == node.attr] if cls else []
        if len(definitions) == 1 and any(decorator_name(d) == "property" for d in definitions[0].decorator_list):
            found.add(member)

    def _resolve(self, expr: ast.expr, local_types: dict[str, Symbol | Instance],
                 attributes: dict[str, Symbol | Instance]) -> Symbol | Instance | None:
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Attribute) and \
                isinstance(expr.value.value, ast.Name) and expr.value.value.id in ("self", "cls"):
            owner = attributes.get(expr.value.attr)
            return self.resolver.attribute(owner, expr.attr) if owner is not None else None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
            return attributes.get(expr.attr)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                isinstance(expr.func.value, ast.Name) and expr.func.value.id in ("self", "cls"):
            held = attributes.get(expr.func.attr)  # `self.Cache(...)` with `Cache = LRUCache` in the class
            return Instance(held) if isinstance(held, Symbol) and held.kind == "class" else None
        return self.resolver.expression(self.module, expr, local_types)

    def _local_types(self, node: _FunctionNode, attributes: dict[str, Symbol | Instance]
                     ) -> dict[str, Symbol | Instance]:
        types: dict[str, Symbol | Instance] = {}
        for argument in node.args.args + node.args.kwonlyargs:
            fixture = self.fixtures.get(argument.arg)
            if fixture is not None:
                value = self._fixture_value(*fixture)
                if value is not None:
                    types[argument.arg] = value
        # Two passes so that `a = Cls(); b = a.method_returning_nothing_known()` still types `a`.
        for _ in range(2):
            for inner in ast.walk(node):
                pairs: list[tuple[ast.expr, ast.expr]] = []
                if isinstance(inner, ast.Assign) and len(inner.targets) == 1:
                    pairs.append((inner.targets[0], inner.value))
                elif isinstance(inner, ast.AnnAssign) and inner.value is not None:
                    pairs.append((inner.target, inner.value))
                elif isinstance(inner, ast.With | ast.AsyncWith):
                    pairs += [(item.optional_vars, item.context_expr) for item in inner.items
                              if item.optional_vars is not None]
                for target, value in pairs:
                    if isinstance(target, ast.Name):
                        resolved = self._resolve(value, types, attributes)
                        if isinstance(resolved, Instance) or (
                                isinstance(resolved, Symbol) and resolved.kind in ("class", "module")):
                            types[target.id] = resolved
        return types

    def _fixture_value(self, module: Module, node: _FunctionNode) -> Symbol | Instance | None:
        for inner in ast.walk(node):
            value = inner.value if isinstance(inner, ast.Return | ast.Yield) else None
            if value is not None:
                resolved = self.resolver.expression(module, value, self._local_types_plain(module, node))
                if resolved is not None:
                    return resolved
        return None

    def _local_types_plain(self, module: Module, node: _FunctionNode) -> dict[str, Symbol | Instance]:
        types: dict[str, Symbol | Instance] = {}
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and \
                    isinstance(inner.targets[0], ast.Name):
                resolved = self.resolver.expression(module, inner.value, types)
                if resolved is not None:
                    types[inner.targets[0].id] = resolved
        return types

    def _self_types(self, cls: str) -> dict[str, Symbol | Instance]:
        """What `self.<attr>` holds in a test class: from setUp-like methods, class attributes
        and class-scoped fixtures that set `request.cls.<attr>`."""
        owner = self._class(cls)
        types: dict[str, Symbol | Instance] = {}
        if owner is None:
            return types
        sources: list[tuple[Module, ast.AST]] = []
        for statement in owner.body:
            if isinstance(statement, ast.Assign | ast.AnnAssign) or (isinstance(statement, _FunctionNode) and (
                    statement.name in _SETUP_METHODS or fixture_name(statement) is not None)):
                sources.append((self.module, statement))
        for name in _used_fixtures(owner):
            fixture = self.fixtures.get(name)
            if fixture is not None:
                sources.append(fixture)
        for module, source in sources:
            for inner in ast.walk(source):
                if not (isinstance(inner, ast.Assign) and len(inner.targets) == 1):
                    continue
                target = inner.targets[0]
                attr = _self_attribute(target)
                if attr is None and isinstance(target, ast.Name) and source in owner.body:
                    attr = target.id
                if attr is None:
                    continue
                resolved = self.resolver.expression(module, inner.value, {})
                if resolved is not None:
                    types[attr] = resolved
        return types


_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.MatMult: "matmul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift",
           ast.RShift: "rshift", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor"}
_UNARY = {ast.USub: ("__neg__",), ast.UAdd: ("__pos__",), ast.Invert: ("__invert__",),
          ast.Not: ("__bool__", "__len__")}
_COMPARE = {ast.Eq: ("__eq__", "__eq__"), ast.NotEq: ("__ne__", "__ne__"), ast.Lt: ("__lt__", "__gt__"),
            ast.LtE: ("__le__", "__ge__"), ast.Gt: ("__gt__", "__lt__"), ast.GtE: ("__ge__", "__le__")}
_ITERATION = ("__iter__", "__getitem__")
# builtins that run a special method of their (first) argument
_BUILTINS: dict[str, tuple[str, ...]] = {
    "len": ("__len__",), "repr": ("__repr__",), "str": ("__str__", "__repr__"), "bool": ("__bool__", "__len__"),
    "hash": ("__hash__",), "abs": ("__abs__",), "int": ("__int__", "__index__"), "float": ("__float__",),
    "complex": ("__complex__",), "bytes": ("__bytes__",), "round": ("__round__",), "format": ("__format__",),
    "reversed": ("__reversed__", "__len__"), "next": ("__next__",), "divmod": ("__divmod__",),
    "iter": _ITERATION, "list": _ITERATION, "tuple": _ITERATION, "set": _ITERATION, "frozenset": _ITERATION,
    "sorted": _ITERATION, "enumerate": _ITERATION, "sum": _ITERATION, "min": _ITERATION, "max": _ITERATION,
    "any": _ITERATION, "all": _ITERATION, "dict": ("keys", "__iter__"),
}
_ASSERT_EQUAL = ("assertEqual", "assertEquals", "assertNotEqual", "assertListEqual", "assertTupleEqual",
                 "assertDictEqual", "assertSetEqual", "assertSequenceEqual")


_Implicit = tuple[ast.expr, tuple[str, ...], tuple[ast.expr, tuple[str, ...]] | None]


def _implicit_calls(node: ast.AST) -> Iterator[_Implicit]:
    """(operand, special methods it may run (the first defined wins), unless) for the special
    methods Python calls implicitly at `node`: operators, comparisons, membership, items,
    iteration, `with`, builtins such as `len` and `repr`, and unittest's equality checks.
    `unless` is the (operand, methods) whose presence means this one does not run: a
    reflected `__radd__` runs only when the left operand has no `__add__`."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        name = _BINARY[type(node.op)]
        yield node.left, (f"__{name}__",), None
        yield node.right, (f"__r{name}__",), (node.left, (f"__{name}__",))
    elif isinstance(node, ast.AugAssign) and type(node.op) in _BINARY:
        name = _BINARY[type(node.op)]
        yield node.target, (f"__i{name}__", f"__{name}__"), None
    elif isinstance(node, ast.UnaryOp):
        yield node.operand, _UNARY[type(node.op)], None
    elif isinstance(node, ast.Compare):
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if type(op) in _COMPARE:
                forward, reflected = _COMPARE[type(op)]
                yield left, (forward,), None
                yield right, (reflected,), (left, (forward,))
            elif isinstance(op, ast.In | ast.NotIn):
                yield right, ("__contains__", *_ITERATION), None
            left = right
    elif isinstance(node, ast.Subscript):
        special = {ast.Load: "__getitem__", ast.Store: "__setitem__", ast.Del: "__delitem__"}[type(node.ctx)]
        yield node.value, (special,), None
    elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        yield node.iter, _ITERATION, None
    elif isinstance(node, ast.With | ast.AsyncWith):
        for item in node.items:
            yield item.context_expr, ("__enter__",), None
            yield item.context_expr, ("__exit__",), None
    elif isinstance(node, ast.Call) and node.args:
        name = decorator_name(node.func)
        if name in _BUILTINS:
            yield node.args[0], _BUILTINS[name], None
        elif name.rsplit(".", 1)[-1] in _ASSERT_EQUAL and len(node.args) >= 2:
            yield node.args[0], ("__eq__",), None
            yield node.args[1], ("__eq__",), (node.args[0], ("__eq__",))


def _self_attribute(target: ast.expr) -> str | None:
    """'x' for `self.x`, `cls.x` and `request.cls.x` targets."""
    if not isinstance(target, ast.Attribute):
        return None
    value = target.value
    if isinstance(value, ast.Name) and value.id in ("self", "cls"):
        return target.attr
    if isinstance(value, ast.Attribute) and value.attr == "cls":
        return target.attr
    return None


def _used_fixtures(owner: ast.ClassDef) -> list[str]:
    names: list[str] = []
    for decorator in owner.decorator_list:
        if isinstance(decorator, ast.Call) and decorator_name(decorator).endswith("usefixtures"):
            names += [a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names


def _parameter_defaults(arguments: ast.arguments) -> dict[str, ast.expr]:
    """{parameter: its default expression} of a function's parameters that have one."""
    positional = [*arguments.posonlyargs, *arguments.args]
    found = {a.arg: d for a, d in zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults,
                                      strict=True)}
    found.update((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
                 if d is not None)
    return found


class LibraryReach:
    """What the library's own code calls, from a set of library functions, `_LIBRARY_DEPTH`
    calls deep: names and attribute chains the module resolves, `self.m()` / `cls.m()` through
    the method's class, `super().m()` through its bases, a parameter's default when the
    parameter is called (`getitem=Cache.__getitem__`), constructors (their `__init__`),
    and the special methods `self` runs implicitly (`self[key]`, `len(self)`). A call on an
    object the code got otherwise is unknown. Each function's calls are found once."""

    def __init__(self, resolver: Resolver, repository: Repository) -> None:
        self.resolver = resolver
        self.repo = repository
        self._calls: dict[Symbol, frozenset[Symbol]] = {}

    def is_library(self, symbol: Symbol) -> bool:
        """A function or method of a library module; not a name-mangled `__private` method,
        which no program can name as the library's class body does."""
        module = self.repo.module(symbol.module)
        last = symbol.qualname.rpartition(".")[2]
        return module is not None and module.library and not is_test_module(module) and \
            symbol.kind in ("function", "method") and not (last.startswith("__") and not last.endswith("__"))

    def beyond(self, start: set[Symbol]) -> set[Symbol]:
        """The library functions `start` calls, and what those call (not `start` itself)."""
        reached: set[Symbol] = set()
        frontier = set(start)
        for _ in range(_LIBRARY_DEPTH):
            frontier = {callee for caller in frontier for callee in self.calls(caller)} - reached - start
            reached |= frontier
        return reached

    def calls(self, symbol: Symbol) -> frozenset[Symbol]:
        if symbol not in self._calls:
            self._calls[symbol] = frozenset()  # a recursive function is being traced
            self._calls[symbol] = frozenset(s for s in self._find_calls(symbol) if self.is_library(s))
        return self._calls[symbol]

    def _find_calls(self, symbol: Symbol) -> Iterator[Symbol]:
        module = self.repo.module(symbol.module)
        node = self.resolver.definition(symbol)
        if module is None or not isinstance(node, _FunctionNode):
            return
        owner = Symbol(symbol.module, symbol.qualname.rpartition(".")[0], "class") \
            if symbol.kind == "method" else None
        local_types: dict[str, Symbol | Instance] = {}
        decorators = {decorator_name(d) for d in node.decorator_list}
        if owner is not None and node.args.args and "staticmethod" not in decorators:
            first = node.args.args[0].arg
            local_types[first] = owner if "classmethod" in decorators else Instance(owner)
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Name):
                value = self.resolver.expression(module, inner.value, local_types)
                if isinstance(value, Instance):
                    local_types.setdefault(inner.targets[0].id, value)
        # A parameter called by name runs its default when the caller gives none
        # (`def get(self, key, getitem=Cache.__getitem__)`), as the library's own calls do.
        defaults = _parameter_defaults(node.args)
        for inner in ast.walk(node):
            for operand, names, _ in _implicit_calls(inner):
                value = self.resolver.expression(module, operand, local_types)
                if isinstance(value, Instance):
                    member = next((m for m in (self.resolver.member(value.cls, n) for n in names)
                                   if m is not None), None)
                    if member is not None and member.kind == "method":
                        yield member
            if not isinstance(inner, ast.Call):
                continue
            func = inner.func
            if (owner is not None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                    and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"):
                yield from self._in_bases(owner, func.attr)
                continue
            if isinstance(func, ast.Name) and func.id in defaults:
                called = self.resolver.expression(module, defaults[func.id], {})
            else:
                called = self.resolver.expression(module, func, local_types)
            if isinstance(called, Symbol):
                if called.kind == "class":
                    init = self.resolver.member(called, "__init__")
                    if init is not None:
                        yield init
                else:
                    yield called

    def _in_bases(self, cls: Symbol, attr: str) -> Iterator[Symbol]:
        """`super().attr` in a method of `cls`: the first base that has it."""
        node = self.resolver.class_node(cls)
        module = self.repo.module(cls.module)
        if node is None or module is None:
            return
        for base in node.bases:
            resolved = self.resolver.expression(module, base, {})
            if isinstance(resolved, Symbol) and resolved.kind == "class":
                member = self.resolver.member(resolved, attr)
                if member is not None:
                    yield member
                    return
