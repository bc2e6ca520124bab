"""Which tests a spec's code holds, found statically by pytest's and unittest's own rules.

The item list of a task is the denominator of its scores, so it is found from the syntax tree,
never by running anything: every sample of a task faces the same list. This module reads the
tree the way the frameworks read the module object once it has run:

- the module's names are bound as Python binds them: a later `def test_x` replaces an earlier
  one (in the earlier one's place, as a module's `__dict__` keeps it), `del` removes one;
- a top-level function whose name starts with `test` is a test;
- a class that is a `unittest.TestCase` (a base that resolves, through the module's imports,
  its aliases and its own classes, to a class named `*TestCase`) is a unittest class: its
  tests are its `test*` methods and those it inherits from the module's classes, in sorted
  order, as `TestLoader.getTestCaseNames` gives them;
- any other class whose name starts with `Test` is a pytest class unless it (or a base of the
  module's) defines `__init__` or `__new__`: its `test*` methods, inherited ones first, as
  pytest walks the MRO; `Test*` classes nested in it are collected too;
- a class whose `__test__` is false (set in it or in a base of the module's) is not collected.

What cannot be known here (tests made while the module runs, bases imported from elsewhere
that define `__init__` or tests) the runner looks for once the spec has run; see
`knowbench_pytest.collect` and docs/format.md.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["function", "unittest", "class"]


@dataclass
class _Class:
    """A class the module defines, as much of it as collection needs."""

    name: str
    bases: list[_Class | str | None]  # a module class, an external dotted name, or unknown
    # name -> its def, a nested class, or None for any other value
    members: dict[str, ast.stmt | _Class | None] = field(default_factory=dict)
    test_flag: bool | None = None  # `__test__ = <constant>` in its body
    has_init: bool = False

    def mro(self) -> list[_Class | str]:
        """C3 linearisation over the module's classes (external bases are leaves), falling back
        to depth-first order where C3 fails (Python would have refused the class)."""
        sequences = [base.mro() if isinstance(base, _Class) else [base]
                     for base in self.bases if base is not None]
        sequences.append([base for base in self.bases if base is not None])
        result: list[_Class | str] = [self]
        while any(sequences):
            for sequence in sequences:
                if not sequence:
                    continue
                head = sequence[0]
                if not any(head in other[1:] for other in sequences):
                    break
            else:  # inconsistent: keep depth-first order
                for sequence in sequences:
                    result += [entry for entry in sequence if entry not in result]
                return result
            result.append(head)
            sequences = [sequence[1:] if sequence and sequence[0] is head else sequence
                         for sequence in sequences]
        return result


def collect(tree: ast.Module) -> list[tuple[str | None, str, Kind]]:
    """The tests of a module: (class path or None, function name, kind), in the frameworks'
    order. A nested class's path is its names joined by `::`."""
    names = _Scope()
    for statement in tree.body:
        names.bind(statement)
    found: list[tuple[str | None, str, Kind]] = []
    for name, value in names.bindings.items():
        if isinstance(value, ast.FunctionDef | ast.AsyncFunctionDef):
            if name.startswith("test"):
                found.append((None, name, "function"))
        elif isinstance(value, _Class):
            found += _class_tests(value, name)
    return found


def _class_tests(cls: _Class, path: str) -> list[tuple[str | None, str, Kind]]:
    mro = cls.mro()
    flag = next((entry.test_flag for entry in mro if isinstance(entry, _Class) and entry.test_flag is not None),
                True)
    if not flag:
        return []
    if any(isinstance(entry, str) and entry.rpartition(".")[2].endswith("TestCase") for entry in mro):
        names = {name for entry in mro if isinstance(entry, _Class) for name in entry.members
                 if name.startswith("test")}
        # the nearest binding decides: a test method replaced by a plain attribute is no test
        return [(path, name, "unittest") for name in sorted(names) if _nearest(mro, name) is not None]
    if not path.rpartition("::")[2].startswith("Test") or \
            any(isinstance(entry, _Class) and entry.has_init for entry in mro):
        return []
    per_class: list[list[tuple[str | None, str, Kind]]] = []
    seen: set[str] = set()
    for entry in mro:
        if not isinstance(entry, _Class):
            continue
        found: list[tuple[str | None, str, Kind]] = []
        for name, member in entry.members.items():
            if name in seen:
                continue
            seen.add(name)
            if isinstance(member, _Class):
                found += _class_tests(member, f"{path}::{name}")
            elif member is not None and name.startswith("test"):
                found.append((path, name, "class"))
        per_class.append(found)
    # inherited tests before the class's own, as pytest orders them
    return [test for found in reversed(per_class) for test in found]


def _nearest(mro: list[_Class | str], name: str) -> ast.stmt | _Class | None:
    for entry in mro:
        if isinstance(entry, _Class) and name in entry.members:
            return entry.members[name]
    return None


class _Scope:
    """A namespace's bindings as statements make them: name -> function node, class, dotted
    name of an imported object, or None for any other value. Insertion order is the order of
    first binding, as in a module's `__dict__`."""

    def __init__(self) -> None:
        self.bindings: dict[str, ast.stmt | _Class | str | None] = {}

    def set(self, name: str, value: ast.stmt | _Class | str | None) -> None:
        self.bindings[name] = value

    def bind(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            self.set(statement.name, statement)
        elif isinstance(statement, ast.ClassDef):
            self.set(statement.name, self.define(statement))
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    self.set(alias.asname, alias.name)
                else:
                    top = alias.name.partition(".")[0]
                    self.set(top, top)
        elif isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                if alias.name != "*":
                    self.set(alias.asname or alias.name, f"{statement.module or ''}.{alias.name}")
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            value = self.resolve(statement.value) if isinstance(statement, ast.Assign) else None
            for target in targets:
                for name in _target_names(target):
                    self.set(name, value if isinstance(target, ast.Name) else None)
        elif isinstance(statement, ast.Delete):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    self.bindings.pop(target.id, None)
        elif isinstance(statement, ast.If | ast.Try | ast.With | ast.For | ast.While):
            # Which branch runs is not known: names bound in any of them count as bound
            # (a `try: import x` fallback, a guarded definition).
            for block in _blocks(statement):
                for inner in block:
                    self.bind(inner)

    def resolve(self, expression: ast.expr | None) -> _Class | str | None:
        """A class of the module, the dotted name of an imported object, or None."""
        if isinstance(expression, ast.Name):
            if expression.id not in self.bindings:  # a builtin, or a name the program binds
                return expression.id
            value = self.bindings[expression.id]
            return value if isinstance(value, _Class | str) else None
        if isinstance(expression, ast.Attribute):
            owner = self.resolve(expression.value)
            if isinstance(owner, str):
                return f"{owner}.{expression.attr}"
        return None

    def define(self, node: ast.ClassDef) -> _Class:
        cls = _Class(node.name, [self.resolve(base) for base in node.bases])
        body = _Scope()
        for statement in node.body:
            body.bind(statement)
            if isinstance(statement, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__test__" for t in statement.targets) and \
                    isinstance(statement.value, ast.Constant):
                cls.test_flag = bool(statement.value.value)
        for name, value in body.bindings.items():
            cls.members[name] = value if isinstance(value, ast.FunctionDef | ast.AsyncFunctionDef | _Class) else None
        cls.has_init = "__init__" in body.bindings or "__new__" in body.bindings or any(
            decorator_name(decorator) == "dataclass" for decorator in node.decorator_list)
        return cls


def decorator_name(node: ast.expr) -> str:
    """The last name of a decorator or base expression: `dataclass` for `@dataclasses.dataclass()`."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _target_names(element)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(statement, ast.Try):
        return [statement.body, *(handler.body for handler in statement.handlers), statement.orelse,
                statement.finalbody]
    if isinstance(statement, ast.If | ast.For | ast.While):
        return [statement.body, statement.orelse]
    if isinstance(statement, ast.With):
        return [statement.body]
    return []
