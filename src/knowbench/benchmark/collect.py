"""Which tests a spec's code holds, found statically by pytest's and unittest's own rules.

The item list of a task is the denominator of its scores, so it is found from the syntax tree,
never by running anything: every sample of a task faces the same list. This module reads the
tree the way the frameworks read the module object once it has run, and makes an item only
where the tree shows for certain that they collect it:

- the module's names are bound as Python binds them: a later `def test_x` replaces an earlier
  one (in the earlier one's place, as a module's `__dict__` keeps it), `del` removes one, an
  alias (`test_b = test_a`) binds the same test; only unconditional top-level statements
  count: what an `if`, `try`, `with` or loop binds depends on which branch runs, so a name
  bound there is no item;
- a top-level function whose name starts with `test`, or whose `__test__` is set True, is a
  test unless its `__test__` is set false (`name.__test__ = False` after the `def`);
- a class is read only when its whole base chain is known: classes of the spec, `object`,
  `unittest.TestCase` however spelled or a library's `*TestCase` (`absltest.TestCase`,
  `django.test.TestCase`: unittest's, so its loader's rules), `abc.ABC`/`ABCMeta`; a base from elsewhere (the
  program, an import, `NamedTuple`, `Enum`, `Protocol`), a metaclass other than `ABCMeta`, a
  value only known at run time or a decorator other than the frameworks' own may bring an
  `__init__`, abstract methods or `__test__`, so such a class makes no item (but a TestCase
  subclass, which unittest's loader takes whatever it mixes in);
- an abstract class (an `abstractmethod` its MRO leaves unimplemented, under `ABCMeta`) and a
  class whose `__test__` is false (in it, a base, or set after it) are not collected;
- a `unittest.TestCase` subclass: its tests are its `test*` methods and those it inherits, in
  sorted order, as `TestLoader.getTestCaseNames` gives them, or `runTest` when it has none;
- any other class whose name starts with `Test` (or whose `__test__` is True) is a pytest class
  unless its MRO defines `__init__` or `__new__` (or it is a `@dataclass`): its `test*`
  methods, inherited ones first, as pytest walks the MRO; `Test*` classes nested in it too.

What cannot be known here the runner looks for once the spec has run, by the same rules on the
live objects; see `knowbench_pytest.collect` and docs/format.md.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["function", "unittest", "class"]

# Outside classes whose every effect on collection is known.
_OBJECT = {"object", "builtins.object"}
_TESTCASE = {"unittest.TestCase", "unittest.case.TestCase", "unittest.IsolatedAsyncioTestCase",
             "unittest.async_case.IsolatedAsyncioTestCase"}
_ABC = {"abc.ABC"}
_ABCMETA = {"abc.ABCMeta"}
_ABSTRACT = {"abstractmethod", "abstractproperty", "abstractclassmethod", "abstractstaticmethod"}
# Class decorators that leave what collection reads alone (skips, marks, patches).
_HARMLESS_DECORATORS = ("unittest.", "pytest.mark.", "mock.patch", "unittest.mock.patch")


@dataclass(eq=False)
class _Function:
    """A `def` the namespace binds, and its `__test__` if one is set (None when not, or when
    set to something this reading cannot evaluate: then `flag_known` is false)."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    test_flag: bool | None = None
    flag_known: bool = True

    @property
    def abstract(self) -> bool:
        return any(decorator_name(decorator).rpartition(".")[2] in _ABSTRACT
                   for decorator in self.node.decorator_list)

    @property
    def fixture(self) -> bool:
        """A pytest fixture (`@pytest.fixture`, `@fixture(...)`): pytest collects no test of it."""
        return any(decorator_name(decorator).rpartition(".")[2] == "fixture"
                   for decorator in self.node.decorator_list)


@dataclass(eq=False)  # compared by identity, as classes are
class _Class:
    """A class the module defines, as much of it as collection needs."""

    name: str
    bases: list[_Class | str | None]  # a module class, an external dotted name, or unknown
    # name -> its def, a nested class, or None for any other value
    members: dict[str, _Function | _Class | None] = field(default_factory=dict)
    test_flag: bool | None = None  # `__test__ = <constant>` in its body, or set after it
    has_init: bool = False
    # every base, metaclass and decorator known, nothing set on it that could not be read
    known: bool = True
    abc_meta: bool = False  # `metaclass=ABCMeta` (or a base `ABC`)

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

    def fully_known(self) -> bool:
        """Whether every class of the base chain is the spec's and known, or an outside class
        whose effect is known (`object`, a TestCase, `abc.ABC`)."""
        return self.known and all(
            base.fully_known() if isinstance(base, _Class) else
            isinstance(base, str) and (base in _OBJECT | _ABC or _is_testcase(base))
            for base in self.bases)


def collect(tree: ast.Module) -> list[tuple[str | None, str, Kind]]:
    """The tests of a module: (class path or None, function name, kind), in the frameworks'
    order. A nested class's path is its names joined by `::`."""
    names = _Scope()
    for statement in tree.body:
        names.bind(statement)
    found: list[tuple[str | None, str, Kind]] = []
    for name, value in names.bindings.items():
        if isinstance(value, _Function):
            if _is_test(name, value, "test"):
                found.append((None, name, "function"))
        elif isinstance(value, _Class) and not name.startswith("_kb_"):
            # (a `_kb_` class is mining's original of a test class it wrapped, whose base may be
            # a library's class merely named *TestCase: the wrapper of the same name is the test)
            found += _class_tests(value, name)
    return found


def _is_testcase(name: str) -> bool:
    """`unittest.TestCase` however spelled, or a library's TestCase (`absltest.TestCase`,
    `parameterized.TestCase`, `django.test.TestCase`): subclasses of unittest's, collected by
    its loader. Tests such a base adds itself are found by the runner once the spec has run."""
    return name in _TESTCASE or name.rpartition(".")[2].endswith("TestCase")


def _is_test(name: str, function: _Function, prefix: str) -> bool:
    """pytest's rule for a function or method: its name has the prefix or its `__test__` is
    True, and its `__test__` is not false."""
    if not function.flag_known or function.fixture:
        return False
    if function.test_flag is not None:
        return function.test_flag
    return name.startswith(prefix)


def _class_tests(cls: _Class, path: str) -> list[tuple[str | None, str, Kind]]:
    mro = cls.mro()
    # unittest's loader takes any TestCase subclass, whatever else it mixes in: a mixin from
    # elsewhere (a `Protocol` a test mixin subclasses) only adds tests, found at run time
    testcase = any(isinstance(entry, str) and _is_testcase(entry) for entry in mro) and all(
        entry.known for entry in mro if isinstance(entry, _Class)) and None not in cls.bases
    if not (cls.fully_known() or testcase):
        return []
    flag = next((entry.test_flag for entry in mro if isinstance(entry, _Class) and entry.test_flag is not None),
                None)
    if flag is False or _abstract(cls, mro):
        return []
    if testcase:
        names = {name for entry in mro if isinstance(entry, _Class) for name in entry.members
                 if name.startswith("test")}
        # the nearest binding decides: a test method replaced by a plain attribute is no test
        nearest = {name: _nearest(mro, name) for name in names}
        if any(isinstance(value, _Function) and not value.flag_known for value in nearest.values()):
            return []
        tests = [name for name in sorted(names) if nearest[name] is not None]
        if not tests and isinstance(_nearest(mro, "runTest"), _Function):
            return [(path, "runTest", "unittest")]
        return [(path, name, "unittest") for name in tests
                if not (isinstance(nearest[name], _Function) and nearest[name].test_flag is False)]
    if not (path.rpartition("::")[2].startswith("Test") or flag is True) or \
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
            elif isinstance(member, _Function) and _is_test(name, member, "test"):
                found.append((path, name, "class"))
        per_class.append(found)
    # inherited tests before the class's own, as pytest orders them
    return [test for found in reversed(per_class) for test in found]


def _abstract(cls: _Class, mro: list[_Class | str]) -> bool:
    """`inspect.isabstract`: under ABCMeta, a name whose nearest definition is abstract."""
    if not any(isinstance(entry, _Class) and entry.abc_meta for entry in mro):
        return False
    names = {name for entry in mro if isinstance(entry, _Class) for name, member in entry.members.items()
             if isinstance(member, _Function) and member.abstract}
    # a name rebound to a value this reading does not know counts as still abstract: no item
    return any(not isinstance(nearest, _Function | _Class) or (isinstance(nearest, _Function) and nearest.abstract)
               for nearest in (_nearest(mro, name) for name in names))


def _nearest(mro: list[_Class | str], name: str) -> _Function | _Class | None:
    for entry in mro:
        if isinstance(entry, _Class) and name in entry.members:
            return entry.members[name]
    return None


_Binding = _Function | _Class | str | None


class _Scope:
    """A namespace's bindings as statements make them: name -> function, class, dotted name of
    an imported object, or None for any other value (or one this reading cannot know).
    Insertion order is the order of first binding, as in a module's `__dict__`."""

    def __init__(self) -> None:
        self.bindings: dict[str, _Binding] = {}

    def set(self, name: str, value: _Binding) -> None:
        self.bindings[name] = value

    def bind(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            self.set(statement.name, _Function(statement))
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
            value = self.value(statement.value) if isinstance(statement, ast.Assign) else None
            for target in targets:
                if isinstance(target, ast.Attribute):
                    self.set_attribute(target, statement.value if isinstance(statement, ast.Assign) else None)
                for name in _target_names(target):
                    self.set(name, value if isinstance(target, ast.Name) else None)
        elif isinstance(statement, ast.Delete):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    self.bindings.pop(target.id, None)
        elif isinstance(statement, ast.If | ast.Try | ast.With | ast.AsyncWith | ast.For | ast.AsyncFor |
                        ast.While) or type(statement).__name__ in ("TryStar", "Match"):
            self.bind_conditional(statement)

    def bind_conditional(self, statement: ast.stmt) -> None:
        """Which branch runs is not known here: a name any branch binds is bound to what
        every branch that binds it agrees on, when that is an import (a `try: import x`
        fallback), and to nothing known otherwise, so a test defined there is no item."""
        values: dict[str, set[str | None]] = {}
        for block in _blocks(statement):
            inner = _Scope()
            inner.bindings = dict(self.bindings)
            for child in block:
                inner.bind(child)
            for name in set(inner.bindings) | set(self.bindings):
                value = inner.bindings.get(name)
                if name not in inner.bindings or value is not self.bindings.get(name):
                    values.setdefault(name, set()).add(value if isinstance(value, str) else None)
        for name, found in values.items():
            self.set(name, next(iter(found)) if len(found) == 1 else None)

    def set_attribute(self, target: ast.Attribute, value: ast.expr | None) -> None:
        """`obj.attr = value` on a class or function of the spec: `__test__` set to a constant
        is read; anything else set on a class makes it unknown (it could be a test, a base's
        `__init__`, a flag)."""
        if not isinstance(target.value, ast.Name):
            return
        owner = self.bindings.get(target.value.id)
        constant = isinstance(value, ast.Constant)
        if isinstance(owner, _Function) and target.attr == "__test__":
            owner.test_flag, owner.flag_known = (bool(value.value), True) if constant else (None, False)
        elif isinstance(owner, _Class):
            if target.attr == "__test__" and constant:
                owner.test_flag = bool(value.value)
            elif target.attr.startswith("test") or target.attr.startswith("__"):
                owner.known = False

    def value(self, expression: ast.expr | None) -> _Binding:
        """What an assignment binds: the function or class a plain name holds (an alias of a
        test is a test), an imported object's dotted name, or None."""
        if isinstance(expression, ast.Name) and isinstance(self.bindings.get(expression.id), _Function):
            return self.bindings[expression.id]
        if isinstance(expression, ast.Call):
            # `needs_numpy = pytest.mark.skipif(...)`: a mark (a skip, a patch) made once and
            # used as a decorator, as harmless as the call written out where it decorates
            made = self.resolve(expression.func)
            return made if isinstance(made, str) and made.startswith(_HARMLESS_DECORATORS) else None
        return self.resolve(expression)

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
            if isinstance(owner, _Class):
                member = owner.members.get(expression.attr)
                return member if isinstance(member, _Class) else None
        return None

    def define(self, node: ast.ClassDef) -> _Class:
        cls = _Class(node.name, [self.resolve(base) for base in node.bases])
        for keyword in node.keywords:
            if keyword.arg == "metaclass" and self.resolve(keyword.value) in _ABCMETA:
                cls.abc_meta = True
            else:
                cls.known = False
        if any(isinstance(base, str) and base in _ABC for base in cls.bases):
            cls.abc_meta = True
        for decorator in node.decorator_list:
            called = self.resolve(decorator.func if isinstance(decorator, ast.Call) else decorator)
            if decorator_name(decorator) == "dataclass":
                cls.has_init = True
            elif not (isinstance(called, str) and called.startswith(_HARMLESS_DECORATORS)):
                cls.known = False
        body = _Scope()
        for statement in node.body:
            body.bind(statement)
            if isinstance(statement, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__test__" for t in statement.targets):
                if isinstance(statement.value, ast.Constant):
                    cls.test_flag = bool(statement.value.value)
                else:
                    cls.known = False
        for name, value in body.bindings.items():
            cls.members[name] = value if isinstance(value, _Function | _Class) else None
        cls.has_init = cls.has_init or "__init__" in body.bindings or "__new__" in body.bindings
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
    if isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
        return [statement.body, *(handler.body for handler in statement.handlers), statement.orelse,
                statement.finalbody]
    if isinstance(statement, ast.If | ast.For | ast.AsyncFor | ast.While):
        return [statement.body, statement.orelse]
    if isinstance(statement, ast.With | ast.AsyncWith):
        return [statement.body]
    if type(statement).__name__ == "Match":
        return [case.body for case in statement.cases]
    return []
