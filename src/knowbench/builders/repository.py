"""A static index of a Python repository: its modules, what each top-level name is bound to,
and a resolver that follows imports the way Python would.

Nothing here imports or runs repository code. A module is named the way Python would import
it: files under a package (directories with `__init__.py`) get dotted names from the first
directory up that is not a package, which is the `sys.path` entry (`root`) they import from.
Test directories without `__init__.py` therefore give bare names (`test_parse`), as pytest's
default import mode does.

`Resolver.name(module, name)` follows absolute and relative imports, aliases, `__init__`
re-exports, star imports and simple assignments (`load = loads`) to the `Symbol` that
defines the name; `Resolver.attribute` continues through modules, submodules and classes
(methods are found on the class or its bases, in MRO order).
"""

from __future__ import annotations

import ast
import configparser
import functools
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from knowbench.parsing import dotted_name, parse_python
from knowbench.paths import skipped_dir

SymbolKind = Literal["module", "function", "class", "method", "variable"]
_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
TEST_DIR_NAMES = frozenset({"test", "tests", "testing", "unittests", "unit_tests", "test_suite"})
_NON_LIBRARY_DIRS = TEST_DIR_NAMES | {"docs", "doc", "examples", "example", "benchmarks", "bench",
                                      "scripts", "tools", "ci", "demo", "demos", "samples", "tasks"}
_NON_LIBRARY_FILES = frozenset({"setup", "conftest", "noxfile", "fabfile", "tasks", "tox", "runtests",
                                "versioneer", "conf", "run_tests", "manage", "dodo", "hatch_build"})
_MAX_DEPTH = 24  # import chains longer than this are treated as unresolvable (cycles, madness)


@dataclass(frozen=True)
class Symbol:
    """Something a name can refer to: a module, or a definition inside one.

    `qualname` is "" for a module, `f` / `Cls` for top-level definitions and `Cls.f` for
    methods (nested classes give longer chains).
    """

    module: str
    qualname: str
    kind: SymbolKind

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.qualname}" if self.qualname else self.module

    @property
    def top(self) -> str:
        """The top-level name in its module that holds it ('Cls' for 'Cls.f')."""
        return self.qualname.split(".")[0]


@dataclass(frozen=True)
class Instance:
    """A value known to be an instance of a class (for method tracing)."""

    cls: Symbol


@dataclass
class Module:
    """One Python file of the repository."""

    name: str
    path: Path
    root: Path
    is_package: bool
    library: bool = False  # part of the distribution being mined (importable once installed)
    _tree: ast.Module | None = field(default=None, repr=False)
    _source: str | None = field(default=None, repr=False)

    @property
    def source(self) -> str:
        if self._source is None:
            self._source = read_source(self.path)
        return self._source

    @property
    def tree(self) -> ast.Module:
        if self._tree is None:
            try:
                self._tree = parse_python(self.source, filename=str(self.path))
            except (SyntaxError, ValueError, RecursionError):
                self._tree = ast.Module(body=[], type_ignores=[])
        return self._tree

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @functools.cached_property
    def bindings(self) -> dict[str, list[ast.stmt]]:
        """Top-level statements binding each name, in source order (into if/try blocks)."""
        found: dict[str, list[ast.stmt]] = {}
        for statement in top_level_statements(self.tree):
            for name in bound_names(statement):
                found.setdefault(name, []).append(statement)
        return found

    @functools.cached_property
    def star_imports(self) -> list[ast.ImportFrom]:
        return [s for s in top_level_statements(self.tree)
                if isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names)]

    @functools.cached_property
    def exports(self) -> list[str] | None:
        """`__all__` when it is a literal list or tuple of strings, else None."""
        for statement in self.bindings.get("__all__", []):
            value = getattr(statement, "value", None)
            if isinstance(value, ast.List | ast.Tuple):
                names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(names) == len(value.elts):
                    return names
        return None

    def lines(self) -> list[str]:
        return self.source.splitlines()


def read_source(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def top_level_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module-level statements, descending into `if`, `try` and `with` blocks (not defs); of an
    `if` whose test this interpreter decides without running code (`static_truth`), only the
    branch that runs."""
    stack: list[ast.stmt] = list(reversed(tree.body))
    names: dict[str, object] | None = None  # (`static_names`, made when a test needs them)
    while stack:
        statement = stack.pop()
        if isinstance(statement, ast.If | ast.Try | ast.TryStar | ast.With):
            parts: list[ast.stmt] = list(statement.body)
            if isinstance(statement, ast.Try | ast.TryStar):
                for handler in statement.handlers:
                    parts.extend(handler.body)
                parts += statement.orelse + statement.finalbody
            elif isinstance(statement, ast.If):
                # names only a type checker sees do not exist; a version or platform switch
                # has one branch here: the one that runs
                holds = False if _is_type_checking(statement.test) else static_truth(statement.test)
                if holds is None and any(isinstance(node, ast.Name) for node in ast.walk(statement.test)):
                    if names is None:
                        names = static_names(tree)
                    holds = static_truth(statement.test, names)
                if holds is not None:
                    parts = list(statement.body if holds else statement.orelse)
                else:
                    parts += statement.orelse
            stack.extend(reversed(parts))
        else:
            yield statement


_UNKNOWN = object()


# Standard-library modules that act when imported (open a browser, print, start a GUI).
_UNIMPORTED = frozenset({"antigravity", "this", "idlelib", "turtle", "turtledemo", "tkinter", "__hello__",
                         "__phello__", "pydoc", "webbrowser"})


@dataclass(frozen=True)
class _Stdlib:
    """A standard-library module or module attribute a module imports (`datetime.datetime`):
    what `hasattr` is asked of, imported only then."""

    dotted: str

    def resolve(self) -> object:
        import importlib

        parts = self.dotted.split(".")
        if parts[0] in _UNIMPORTED:
            return _UNKNOWN
        for cut in range(len(parts), 0, -1):
            try:
                found: object = importlib.import_module(".".join(parts[:cut]))
            except Exception:  # (ImportError; a module that fails to import here)
                continue
            for attribute in parts[cut:]:
                found = getattr(found, attribute, _UNKNOWN)
            return found
        return _UNKNOWN


def static_names(tree: ast.Module) -> dict[str, object]:
    """Module-level names assigned exactly once to a test this interpreter can decide
    (`PY3 = sys.version_info[0] == 3`), with their values, and the standard-library modules
    and objects the module imports by name (for `hasattr(datetime, "fold")`)."""
    counts: dict[str, int] = {}
    values: dict[str, object] = {}
    for node in ast.walk(tree):  # every binding of a name, anywhere (`try: import yaml` too)
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound = [node.id]
        elif isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound = bound_names(node)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound = [node.name]
        elif isinstance(node, ast.Global):
            bound = list(node.names)
        else:
            continue
        for name in bound:
            counts[name] = counts.get(name, 0) + 1
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            for alias in node.names:
                if isinstance(node, ast.Import):
                    dotted = alias.name if alias.asname else alias.name.split(".")[0]
                elif alias.name != "*":
                    dotted = f"{node.module}.{alias.name}"
                else:
                    continue
                bound = alias.asname or alias.name.split(".")[0]
                if dotted.split(".")[0] in sys.stdlib_module_names and counts.get(bound) == 1:
                    values[bound] = _Stdlib(dotted)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _static_value(node.value, values)
            if value is not _UNKNOWN and counts.get(node.targets[0].id) == 1:
                values[node.targets[0].id] = value
    return values


def static_truth(test: ast.expr, names: dict[str, object] | None = None) -> bool | None:
    """The truth of `test` on this interpreter when it can be known without running code
    (constants, `TYPE_CHECKING`, `sys.version_info`, `sys.platform`, `os.name`), else None."""
    try:
        value = _static_value(test, names or {})
        return None if value is _UNKNOWN else bool(value)
    except Exception:  # odd code (`sys.version_info[::0]`): not known
        return None


# What `_static_value` knows of this interpreter by name, and the comparisons it makes.
_KNOWN: dict[str, object] = {"TYPE_CHECKING": False, "typing.TYPE_CHECKING": False,
                             "sys.version_info": tuple(sys.version_info), "sys.platform": sys.platform,
                             "os.name": os.name, "sys.maxsize": sys.maxsize,
                             "sys.version_info.major": sys.version_info[0],
                             "sys.version_info.minor": sys.version_info[1]}
_COMPARISONS = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
                ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
                ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _static_value(node: ast.expr, names: dict[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        items = [_static_value(e, names) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
    dotted = dotted_name(node) if isinstance(node, ast.Name | ast.Attribute) else ""
    if dotted in _KNOWN:
        return _KNOWN[dotted]
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    flag = re.fullmatch(r"(?:IS_)?PY(?:THON)?_?([23])K?", dotted.rsplit(".", 1)[-1]) if dotted else None
    if flag:  # the compat modules' convention (six.PY2, psutil._compat.PY3, PY3K …)
        return sys.version_info[0] == int(flag.group(1))
    if isinstance(node, ast.Subscript):
        base, index = _static_value(node.value, names), node.slice
        if isinstance(base, tuple | str):
            if isinstance(index, ast.Slice):
                bounds = [_static_value(b, names) if b is not None else None
                          for b in (index.lower, index.upper, index.step)]
                if all(b is None or isinstance(b, int) for b in bounds):
                    return base[slice(*bounds)]  # type: ignore[misc]
                return _UNKNOWN
            position = _static_value(index, names)
            if isinstance(position, int) and -len(base) <= position < len(base):
                return base[position]
        return _UNKNOWN
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _static_value(node.operand, names)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(node, ast.BoolOp):
        values = [_static_value(v, names) for v in node.values]
        if isinstance(node.op, ast.And):
            if any(v is not _UNKNOWN and not v for v in values):
                return False
            return _UNKNOWN if any(v is _UNKNOWN for v in values) else values[-1]
        if any(v is not _UNKNOWN and v for v in values):
            return True
        return _UNKNOWN if any(v is _UNKNOWN for v in values) else values[-1]
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _static_value(node.left, names), _static_value(node.comparators[0], names)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        operation = _COMPARISONS.get(type(node.ops[0]))
        try:
            return operation(left, right) if operation else _UNKNOWN
        except TypeError:
            return _UNKNOWN
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr" and \
            len(node.args) == 2 and not node.keywords:
        owner, attribute = _static_value(node.args[0], names), _static_value(node.args[1], names)
        if isinstance(owner, _Stdlib) and isinstance(attribute, str):
            found = owner.resolve()
            return _UNKNOWN if found is _UNKNOWN else hasattr(found, attribute)
        return _UNKNOWN
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("startswith", "endswith") and len(node.args) == 1:
        base, argument = _static_value(node.func.value, names), _static_value(node.args[0], names)
        if isinstance(base, str) and isinstance(argument, str | tuple):
            return getattr(base, node.func.attr)(argument)
    return _UNKNOWN


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def bound_names(statement: ast.stmt) -> list[str]:
    """Names a simple statement binds in its scope."""
    if isinstance(statement, _FunctionNode | ast.ClassDef):
        return [statement.name]
    if isinstance(statement, ast.Import):
        return [(alias.asname or alias.name.split(".")[0]) for alias in statement.names]
    if isinstance(statement, ast.ImportFrom):
        return [(alias.asname or alias.name) for alias in statement.names if alias.name != "*"]
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
        targets = [statement.target]
    return [node.id for target in targets for node in ast.walk(target)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)]


def resolve_relative(module: Module, level: int, name: str | None) -> str | None:
    """The absolute module named by `from <.'s><name> import ...` inside `module`."""
    if level == 0:
        return name
    parts = module.package.split(".") if module.package else []
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    if name:
        base.append(name)
    return ".".join(base) or None


class Repository:
    """Every Python file under `root`, indexed by the name Python would import it by."""

    def __init__(self, root: Path, library_tops: set[str] | None = None) -> None:
        self.root = root.resolve()
        self.modules: list[Module] = []
        self._by_root: dict[Path, dict[str, Module]] = {}
        for path in sorted(self._python_files()):
            module = self._make_module(path)
            self.modules.append(module)
            self._by_root.setdefault(module.root, {}).setdefault(module.name, module)
        self.library_tops = library_tops if library_tops is not None else self._guess_library_tops()
        self.library_roots = sorted({m.root for m in self.modules if m.name.split(".")[0] in self.library_tops})
        for module in self.modules:
            module.library = (module.root in self.library_roots
                              and module.name.split(".")[0] in self.library_tops)

    def _python_files(self) -> Iterator[Path]:
        for directory, subdirs, files in os.walk(self.root):
            subdirs[:] = sorted(d for d in subdirs if not skipped_dir(d))
            for name in files:
                if name.endswith(".py"):
                    yield Path(directory) / name

    def _make_module(self, path: Path) -> Module:
        directory = path.parent
        parts = [] if path.name == "__init__.py" else [path.stem]
        while (directory / "__init__.py").is_file() and directory != self.root.parent:
            parts.insert(0, directory.name)
            if directory == self.root:
                directory = directory.parent
                break
            directory = directory.parent
        name = ".".join(parts) or path.parent.name
        return Module(name=name, path=path, root=directory, is_package=path.name == "__init__.py")

    def _guess_library_tops(self) -> set[str]:
        """Top-level packages and modules at the repository root or under `src/` that are not
        tests, docs, examples or build scripts."""
        tops: set[str] = set()
        roots = [self.root / "src", self.root / "lib"]
        roots = [r for r in roots if any(m.root == r and m.is_package for m in self.modules)] or [self.root]
        for module in self.modules:
            if module.root not in roots or not module.name.split(".")[0].isidentifier():
                continue
            top = module.name.split(".")[0]
            if module.name == top and not module.is_package and (
                    top in _NON_LIBRARY_FILES or is_test_file_name(module.path.name)):
                continue
            if top in _NON_LIBRARY_DIRS or top.startswith("_"):
                continue
            if module.name == top and not module.is_package and module.root == self.root and \
                    any(m.is_package and m.root == self.root and m.name not in _NON_LIBRARY_DIRS
                        and not m.name.startswith("_") for m in self.modules):
                continue  # a loose script next to the real package (a `tests` package is not one)
            tops.add(top)
        return tops

    def module(self, name: str, near: Module | None = None) -> Module | None:
        """The module `name` as imported from `near` (its own sys.path entry first)."""
        if near is not None:
            found = self._by_root.get(near.root, {}).get(name)
            if found is not None:
                return found
        for root in self.library_roots:
            found = self._by_root[root].get(name)
            if found is not None:
                return found
        for table in self._by_root.values():
            found = table.get(name)
            if found is not None and (near is None or not found.library):
                return found
        return None

    def module_of(self, path: Path) -> Module | None:
        resolved = path.resolve()
        return next((m for m in self.modules if m.path.resolve() == resolved), None)

    @functools.cached_property
    def pytest_plugins(self) -> list[Module]:
        """The pytest plugins of the distribution's own that are in the repository: the modules
        its `pytest11` entry points name (pytest loads them wherever the distribution is
        installed, before any conftest), from the sdist's `*.egg-info/entry_points.txt`,
        `setup.cfg` or `pyproject.toml`."""
        names: list[str] = []
        for path in [*sorted(self.root.glob("*.egg-info/entry_points.txt")),
                     *sorted(self.root.glob("src/*.egg-info/entry_points.txt"))]:
            parser = configparser.ConfigParser(delimiters=("=",))
            try:
                parser.read_string(path.read_text(errors="replace"))
            except configparser.Error:
                continue
            if parser.has_section("pytest11"):
                names += [value for _, value in parser.items("pytest11")]
        setup_cfg = self.root / "setup.cfg"
        if setup_cfg.is_file():
            parser = configparser.ConfigParser()
            try:
                parser.read_string(setup_cfg.read_text(errors="replace"))
                lines = parser.get("options.entry_points", "pytest11", fallback="")
            except configparser.Error:
                lines = ""
            names += [line.partition("=")[2] for line in lines.splitlines() if "=" in line]
        pyproject = self.root / "pyproject.toml"
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text(errors="replace"))
            except tomllib.TOMLDecodeError:
                data = {}
            tables = [data.get("project", {}).get("entry-points", {}).get("pytest11", {}),
                      data.get("tool", {}).get("poetry", {}).get("plugins", {}).get("pytest11", {})]
            names += [value for table in tables if isinstance(table, dict)
                      for value in table.values() if isinstance(value, str)]
        found: list[Module] = []
        for name in names:
            module = self.module(name.strip().partition(":")[0].strip())
            if module is not None and all(m is not module for m in found):
                found.append(module)
        return found

    def library_modules(self) -> list[Module]:
        return [m for m in self.modules if m.library and not is_test_module(m)]

    def relpath(self, module: Module) -> str:
        return module.path.relative_to(self.root).as_posix()


def is_test_file_name(name: str) -> bool:
    stem = name.removesuffix(".py")
    return stem.startswith("test_") or stem.endswith("_test") or stem in ("tests", "test")


def is_test_module(module: Module) -> bool:
    """Test files and everything under a test directory (helpers and conftest included)."""
    if is_test_file_name(module.path.name) or module.path.name == "conftest.py":
        return True
    return any(part in TEST_DIR_NAMES for part in module.name.split(".")[:-1]) or \
        any(part in TEST_DIR_NAMES for part in module.path.parent.parts[-3:])


class Resolver:
    """Follows names and attributes to the definitions they denote, statically."""

    def __init__(self, repository: Repository) -> None:
        self.repo = repository
        self._names: dict[tuple[int, str], Symbol | None] = {}

    def name(self, module: Module, name: str, depth: int = 0) -> Symbol | None:
        """What `name` refers to at the top level of `module`, or None when unknown."""
        if depth > _MAX_DEPTH:
            return None
        key = (id(module), name)
        if key not in self._names:
            self._names[key] = None  # a cycle resolves to unknown
            self._names[key] = self._name(module, name, depth)
        return self._names[key]

    def _name(self, module: Module, name: str, depth: int) -> Symbol | None:
        statements = module.bindings.get(name)
        if statements:
            return self._from_statement(module, name, _primary(statements), depth)
        through = self.star_import(module, name, depth)
        if through is not None:
            return through[2]
        if module.is_package:
            sub = self.repo.module(f"{module.name}.{name}", module)
            if sub is not None:
                return Symbol(sub.name, "", "module")
        return None

    def star_import(self, module: Module, name: str, depth: int = 0
                    ) -> tuple[ast.ImportFrom, Module, Symbol] | None:
        """The star import of `module` (of a module in the repository) that binds `name`, that
        module, and what the name is there; None when none does."""
        for star in module.star_imports:
            source = resolve_relative(module, star.level, star.module)
            target = self.repo.module(source, module) if source else None
            if target is not None and (target.exports is None or name in target.exports) and \
                    (target.exports is not None or not name.startswith("_")):
                found = self.name(target, name, depth + 1)
                if found is not None:
                    return star, target, found
        return None

    def _from_statement(self, module: Module, name: str, statement: ast.stmt, depth: int) -> Symbol | None:
        if isinstance(statement, _FunctionNode):
            return Symbol(module.name, name, "function")
        if isinstance(statement, ast.ClassDef):
            return Symbol(module.name, name, "class")
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname == name:
                    return self._module_symbol(alias.name, module)
                if alias.asname is None and alias.name.split(".")[0] == name:
                    return self._module_symbol(name, module)
            return None
        if isinstance(statement, ast.ImportFrom):
            source = resolve_relative(module, statement.level, statement.module)
            if source is None:
                return None
            for alias in statement.names:
                if (alias.asname or alias.name) != name:
                    continue
                submodule = self.repo.module(f"{source}.{alias.name}", module)
                target = self.repo.module(source, module)
                if target is not None and target is not module:
                    found = self.name(target, alias.name, depth + 1)
                    if found is not None:
                        return found
                if submodule is not None:
                    return Symbol(submodule.name, "", "module")
                if target is None:  # outside the repository: keep the dotted name for the record
                    return Symbol(source, alias.name, "variable")
            return None
        value = getattr(statement, "value", None)
        if isinstance(statement, ast.Assign | ast.AnnAssign) and isinstance(value, ast.Name | ast.Attribute):
            found = self.expression(module, value, {}, depth + 1)
            if isinstance(found, Symbol) and found.kind != "variable":
                return found
        return Symbol(module.name, name, "variable")

    def _module_symbol(self, name: str, near: Module) -> Symbol:
        found = self.repo.module(name, near)
        return Symbol(found.name if found else name, "", "module")

    def attribute(self, owner: Symbol | Instance, attr: str, depth: int = 0) -> Symbol | Instance | None:
        """`owner.attr`: a module member or submodule, or a class (or instance) member."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(owner, Instance):
            member = self.member(owner.cls, attr)
            return member
        if owner.kind == "module":
            module = self.repo.module(owner.module)
            if module is None:
                return None
            found = self.name(module, attr, depth + 1)
            if found is not None:
                return found
            sub = self.repo.module(f"{owner.module}.{attr}", module)
            return Symbol(sub.name, "", "module") if sub is not None else None
        if owner.kind == "class":
            return self.member(owner, attr)
        return None

    def member(self, cls: Symbol, attr: str, seen: frozenset[Symbol] = frozenset()) -> Symbol | None:
        """The method or class attribute `attr` of class `cls`, searching its bases in order."""
        if cls in seen or len(seen) > _MAX_DEPTH:
            return None
        node = self.class_node(cls)
        if node is None:
            return None
        for statement in node.body:
            if isinstance(statement, _FunctionNode) and statement.name == attr:
                return Symbol(cls.module, f"{cls.qualname}.{attr}", "method")
            if isinstance(statement, ast.ClassDef) and statement.name == attr:
                return Symbol(cls.module, f"{cls.qualname}.{attr}", "class")
            if attr in bound_names(statement):
                return Symbol(cls.module, f"{cls.qualname}.{attr}", "variable")
        module = self.repo.module(cls.module)
        for base in node.bases:
            if module is None:
                break
            resolved = self.expression(module, base, {})
            if isinstance(resolved, Symbol) and resolved.kind == "class":
                found = self.member(resolved, attr, seen | {cls})
                if found is not None:
                    return found
        return None

    def class_node(self, cls: Symbol) -> ast.ClassDef | None:
        module = self.repo.module(cls.module)
        if module is None:
            return None
        node = find_node(module.tree, cls.qualname)
        return node if isinstance(node, ast.ClassDef) else None

    def expression(self, module: Module, expr: ast.expr, local_types: dict[str, Symbol | Instance],
                   depth: int = 0) -> Symbol | Instance | None:
        """What a name, attribute chain or constructor call denotes in `module`'s scope.

        `local_types` holds what local variables are known to be (from `x = Cls(...)`).
        A call of a class gives an `Instance`; a call of a classmethod gives an instance of
        its class (the usual alternative constructor); other calls are unknown.
        """
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, ast.Name):
            if expr.id in local_types:
                return local_types[expr.id]
            return self.name(module, expr.id, depth + 1)
        if isinstance(expr, ast.Attribute):
            owner = self.expression(module, expr.value, local_types, depth + 1)
            return self.attribute(owner, expr.attr, depth + 1) if owner is not None else None
        if isinstance(expr, ast.Subscript):  # `Cache[int, str]`: a generic alias is its class
            owner = self.expression(module, expr.value, local_types, depth + 1)
            return owner if isinstance(owner, Symbol) and owner.kind == "class" else None
        if isinstance(expr, ast.Call):
            called = self.expression(module, expr.func, local_types, depth + 1)
            if isinstance(called, Symbol) and called.kind == "class":
                return Instance(called)
            if isinstance(called, Symbol) and called.kind == "method" and self.is_classmethod(called):
                owner = Symbol(called.module, called.qualname.rpartition(".")[0], "class")
                return Instance(owner)
        return None

    def is_classmethod(self, method: Symbol) -> bool:
        node = self.definition(method)
        return isinstance(node, _FunctionNode) and any(
            decorator_name(d) == "classmethod" for d in node.decorator_list)

    def definition(self, symbol: Symbol) -> ast.AST | None:
        module = self.repo.module(symbol.module)
        if module is None or not symbol.qualname:
            return None
        return find_node(module.tree, symbol.qualname)


def _primary(statements: list[ast.stmt]) -> ast.stmt:
    """The binding that wins: a def or class over a fallback import, else the last one."""
    definitions = [s for s in statements if isinstance(s, _FunctionNode | ast.ClassDef)]
    return definitions[-1] if definitions else statements[0] if isinstance(
        statements[0], ast.Import | ast.ImportFrom) else statements[-1]


def find_node(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The top-level (or class-nested) def/class named `qualname`; the last one wins."""
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in qualname.split("."):
        found = None
        for statement in _flatten(body):
            if isinstance(statement, _FunctionNode | ast.ClassDef) and statement.name == part:
                found = statement
        if found is None:
            return None
        node = found
        body = found.body if isinstance(found, ast.ClassDef) else []
    return node


def _flatten(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    yield from top_level_statements(ast.Module(body=body, type_ignores=[]))


def decorator_name(decorator: ast.expr) -> str:
    """'classmethod', 'pytest.fixture', 'pytest.mark.parametrize', ... ('' when not a name)."""
    return dotted_name(decorator.func if isinstance(decorator, ast.Call) else decorator)


