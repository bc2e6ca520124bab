"""Turning a repository's test module into a self-contained `TestSpec` for one target.

The spec keeps only the selected tests and what they need: the module's imports (relative
imports made absolute), its constants, helpers and base classes, the pytest fixtures they
request from the module or its `conftest.py` files, and definitions imported from test-helper
modules that are not installed (copied in; a helper imported as a module, `import tests.common
as cm` or `from . import common`, becomes a module object of the copied definitions the tests
reach through it). Then it is rewired so that the tests call the
*candidate*, which lives in the program's namespace:

- an import binding a name the program defines (the target, or a helper the context copied)
  is removed, and an alias (`from lib import f as g`) becomes `g = f`;
- an attribute chain that reaches such a name (`lib.mod.f(...)`) becomes the bare name;
- a star import becomes an explicit import of the names it would bring, minus those.

The knowbench runner supports only the `tmp_path`, `monkeypatch` and `capsys` fixtures, so
pytest-style tests are wrapped: the original becomes `_kb_<name>` and a wrapper of the same
name runs it through a small harness (`HARNESS`, emitted once per spec) that applies
`parametrize` cases, `skip`/`skipif`/`xfail`, `filterwarnings` and `usefixtures` marks (a
module's `pytestmark` has every test of the module wrapped), autouse fixtures,
generator fixtures with teardown, parametrized fixtures and a minimal `request`. The harness
is the "spec harness" section of the sandbox's pytest emulation (`knowbench_pytest`, beside
the runner), copied from its source so that a spec runs on its own. Execution,
not this module, decides whether a rewired test works: tests that fail on the reference or
never call the target are pruned later, with the reason recorded.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field

from knowbench.builders.context import TargetCode, free_names
from knowbench.builders.discover import (
    TestUnit,
    conftest_chain,
    fixture_name,
    is_testcase_class,
    last_definitions,
)
from knowbench.builders.repository import (
    Module,
    Repository,
    Resolver,
    Symbol,
    bound_names,
    decorator_name,
    resolve_relative,
    top_level_statements,
)
from knowbench.execution.sandbox import RUNNER_DIR
from knowbench.parsing import dotted_name, parse_python

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
RUNNER_FIXTURES = ("tmp_path", "monkeypatch", "capsys")  # knowbench_pytest.RUNNER_FIXTURES
# The module's xunit hooks the runner calls around its tests: a spec keeps the ones its module
# defines, though no test names them.
XUNIT_MODULE_HOOKS = ("setup_module", "teardown_module", "setUpModule", "tearDownModule",
                      "setup_function", "teardown_function")
# The conftests' hooks a spec carries, each into the harness's registry of its kind
# (knowbench_pytest.HOOK_REGISTRIES), and what the spec does with each after its definition
# (`pytest_configure` is called as the spec loads).
HOOK_REGISTRIES = {"pytest_generate_tests": "_kb_GENERATE_HOOKS",
                   "pytest_collection_modifyitems": "_kb_MODIFY_HOOKS",
                   "pytest_runtest_setup": "_kb_SETUP_HOOKS"}
CONFTEST_HOOKS = {**{hook: f"{registry}.append({{}})" for hook, registry in HOOK_REGISTRIES.items()},
                  "pytest_configure": "_kb_configure({})"}
# Those that may skip, mark or deselect any test: with one, every test runs through the harness.
PER_TEST_HOOKS = ("pytest_collection_modifyitems", "pytest_runtest_setup")
MAX_ROUNDS = 12
MAX_STATEMENTS = 400

EMULATION = RUNNER_DIR / "knowbench_pytest.py"
_HARNESS_BEGINS, _HARNESS_ENDS = "# --- spec harness begins", "# --- spec harness ends"


def spec_harness(emulation: str) -> str:
    """The spec harness: the section of the pytest emulation's source between its markers.

    Raises `ValueError` when the source lacks either marker.
    """
    lines = emulation.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(_HARNESS_BEGINS)]
    ends = [i for i, line in enumerate(lines) if line.startswith(_HARNESS_ENDS)]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"the pytest emulation must hold one '{_HARNESS_BEGINS}' line and, after it, "
                         f"one '{_HARNESS_ENDS}' line")
    return "".join(lines[starts[0] + 1:ends[0]])


HARNESS = spec_harness(EMULATION.read_text(encoding="utf-8"))


@dataclass
class BuiltSpec:
    """A test module turned into spec code for one target."""

    name: str
    code: str
    item_of_unit: dict[str, str] = field(default_factory=dict)  # unit id -> runner item id


@dataclass
class _Needed:
    """What one source module must contribute: names, and its statements chosen so far."""

    module: Module
    names: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    statements: dict[int, ast.stmt] = field(default_factory=dict)  # id(node) -> node


class SpecBuilder:
    """Builds the spec of one test module for one target."""

    def __init__(self, repository: Repository, resolver: Resolver, target: TargetCode) -> None:
        self.repo = repository
        self.resolver = resolver
        self.target = target
        self.program = {(target.symbol.module, name) for name in target.program_names}

    # -- entry point

    def build(self, module: Module, units: list[TestUnit]) -> BuiltSpec:
        spec_name = self.repo.relpath(module)
        chain = conftest_chain(module, self.repo)
        self.fixtures: dict[str, tuple[Module, _FunctionNode]] = {}
        # name -> the fixtures of that name an inner one overrides, outermost first
        self.overridden: dict[str, list[tuple[Module, _FunctionNode]]] = {}
        self.registered: set[str] = set()  # fixtures the spec has registered so far
        self.autouse: list[str] = []
        # A module-level `pytestmark` marks every test: each runs through the harness.
        self.module_marked = "pytestmark" in module.bindings
        # A conftest's `pytest_collection_modifyitems` may mark or deselect any test, and its
        # `pytest_runtest_setup` skip one: every test runs through the harness, which gives it
        # to the hooks.
        self.modified = any(hook in conftest.bindings for conftest in chain for hook in PER_TEST_HOOKS)
        for source in [*chain, module]:
            for node in source.tree.body:
                if isinstance(node, _FunctionNode):
                    name = fixture_name(node)
                    if name is not None:
                        if name in self.fixtures:
                            self.overridden.setdefault(name, []).append(self.fixtures[name])
                        self.fixtures[name] = (source, node)
                        if _fixture_keyword(node, "autouse") and name not in self.autouse:
                            self.autouse.append(name)
        self.sources: dict[str, _Needed] = {}
        self.aliases: list[ast.stmt] = []
        self.shadowed: set[str] = set()
        # per source module: a module import named like a program name -> its alias
        self.colliding: dict[str, dict[str, str]] = {}
        self.helper_aliases: list[ast.stmt] = []
        # Helpers imported as modules: the path the import binds (`("cm",)`, `("tests",
        # "common")`) -> the module, and the names the tests reach through it.
        self.module_objects: dict[tuple[str, ...], tuple[Module | None, set[str]]] = {}
        self.wrapped = False
        self.needs_unittest = False
        selected: dict[str | None, list[str]] = {}
        self.inherited: dict[tuple[str, str], TestUnit] = {}
        for unit in units:
            selected.setdefault(unit.cls, []).append(unit.function)
            if unit.cls and unit.defined_in is not None:
                self.inherited[(unit.cls, unit.function)] = unit
        own = self._need(module)
        units_code: list[ast.stmt] = []
        item_of_unit: dict[str, str] = {}
        for node in last_definitions(module.tree.body):
            if isinstance(node, _FunctionNode) and node.name in selected.get(None, []):
                units_code += self._function_unit(node)
                item_of_unit[f"{spec_name}::{node.name}"] = f"{spec_name}::{node.name}"
                own.statements[id(node)] = node
            elif isinstance(node, ast.ClassDef) and node.name in selected:
                units_code += self._class_unit(module, node, selected[node.name])
                own.statements[id(node)] = node
                for function in selected[node.name]:
                    item_of_unit[f"{spec_name}::{node.name}::{function}"] = f"{spec_name}::{node.name}::{function}"
        self.unit_nodes = {id(node) for node in own.statements.values()}
        self.called_tests: set[int] = set()  # tests of other targets the carried code calls
        self.replacements = {id(node): code for node, code in self._pair_units(module, units_code)}
        fixture_names = set(self.autouse)
        for code in units_code:
            fixture_names |= _requested_fixtures(code)
            own.names |= free_names(code)
        # (the module's marks, its collection hook and its xunit hooks: the harness applies them,
        # and the conftests' collection hooks, which it calls after the module's)
        own.names |= ({"pytestmark", "pytest_generate_tests"} | set(XUNIT_MODULE_HOOKS)) & set(module.bindings)
        for conftest in chain:
            for hook in set(CONFTEST_HOOKS) & set(conftest.bindings):
                self._need(conftest).names.add(hook)
                self.wrapped = True
        # The module's own marks travel with the spec (however they are made: under an `if`,
        # appended to): the fixtures their `usefixtures` names too, and the module's names their
        # `skipif`/`xfail` conditions read from a string.
        if self.module_marked:
            for node in module.tree.body:
                if not isinstance(node, _FunctionNode | ast.ClassDef):
                    fixture_names |= _marked_fixtures(node)
                    own.names |= _condition_names(node)
        for code in units_code:
            own.names |= _condition_names(code)
        self._close(fixture_names)
        code = self._emit(module, chain)
        return BuiltSpec(name=spec_name, code=code, item_of_unit=item_of_unit)

    def _pair_units(self, module: Module, units_code: list[ast.stmt]) -> list[tuple[ast.stmt, list[ast.stmt]]]:
        """Map each original unit statement to the statements that replace it."""
        pairs: list[tuple[ast.stmt, list[ast.stmt]]] = []
        by_origin: dict[str, list[ast.stmt]] = {}
        for code in units_code:
            by_origin.setdefault(getattr(code, "_kb_origin", ""), []).append(code)
        for node in module.tree.body:
            if isinstance(node, _FunctionNode | ast.ClassDef) and node.name in by_origin and \
                    id(node) in self.unit_nodes:
                pairs.append((node, by_origin[node.name]))
        return pairs

    # -- units

    def _function_unit(self, node: _FunctionNode) -> list[ast.stmt]:
        original = copy.deepcopy(node)
        if not self._needs_wrapping(node):
            _set_origin(original, node.name)
            return [original]
        self.wrapped = True
        original.name = f"_kb_{node.name}"
        wrapper = _wrapper_function(node.name, f"_kb_call({original.name}, **_kb_builtins)")
        named = _named_as_written(original.name, node.name)
        for statement in (original, named, wrapper):
            _set_origin(statement, node.name)
        return [original, named, wrapper]

    def _needs_wrapping(self, node: _FunctionNode) -> bool:
        arguments = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                     if a.arg not in ("self", "cls")]
        return bool(node.decorator_list) or bool(self.autouse) or self.module_marked or self.modified or \
            any(argument not in RUNNER_FIXTURES for argument in arguments)

    def _class_unit(self, module: Module, node: ast.ClassDef, selected: list[str]) -> list[ast.stmt]:
        cls = copy.deepcopy(node)
        cls.body = [member for member in cls.body if not (
            isinstance(member, _FunctionNode) and member.name.startswith("test") and member.name not in selected)]
        for name in selected:  # inherited from a mixin: copied into the class (the copied base has none)
            unit = self.inherited.get((node.name, name))
            if unit is None or unit.defined_in is None:
                continue
            base_module = unit.defined_in[0]
            method = self._rewire(base_module, unit.node())
            cls.body.append(method)
            if base_module is not module:
                self._need(base_module).names |= free_names(method) - {"self", "cls"}
        named_testcase = any(decorator_name(base).endswith("TestCase") for base in node.bases)
        if is_testcase_class(node, module, self.resolver):
            # The runner applies pytest's marks and autouse fixtures to a TestCase's methods
            # through the spec's harness (`_kb_call_unittest`), as pytest does.
            if self.autouse or self.module_marked or self.modified or _pytest_marked(module, cls):
                self.wrapped = True
            if not named_testcase:
                # A TestCase through a repository base (`class T(BaseTest)`): the runner finds
                # unittest classes by a base named *TestCase, so name one (the MRO is unchanged).
                cls.bases.append(ast.Attribute(ast.Name("_kb_unittest", ast.Load()), "TestCase", ast.Load()))
                self.needs_unittest = True
            _set_origin(cls, node.name)
            return [cls]
        fixtures, autouse, params, scopes, ids = _class_fixtures(cls)
        plain_bases = all(decorator_name(b) == "object" for b in cls.bases)
        marked = any(_assigns(member, "pytestmark") for member in cls.body)  # marks in its body
        needs = (not plain_bases or cls.decorator_list or fixtures or self.autouse or marked or
                 any(isinstance(m, _FunctionNode) and m.name in ("setup_class", "teardown_class", "setup",
                                                                 "teardown")
                     for m in cls.body) or
                 any(isinstance(m, _FunctionNode) and m.name in selected and self._needs_wrapping(m)
                     for m in cls.body))
        if not needs:
            cls.bases = []
            _set_origin(cls, node.name)
            return [cls]
        self.wrapped = True
        cls.name = f"_kb_{node.name}"
        if autouse:
            cls.body.append(parse_python(f"_kb_autouse = {autouse!r}").body[0])
        for attribute, given in (("_kb_fixture_scopes", scopes), ("_kb_fixture_params", params),
                                 ("_kb_fixture_ids", ids)):
            if given:
                cls.body.append(parse_python(f"{attribute} = {{" + ", ".join(
                    f"{name!r}: {ast.unparse(value)}" for name, value in given.items()) + "}").body[0])
        item = ast.ClassDef(name=node.name, bases=[], keywords=[], decorator_list=[], body=[
            _wrapper_function(name, f"_kb_call_method({cls.name}, {name!r}, **_kb_builtins)", method=True)
            for name in selected], type_params=[])
        named = _named_as_written(cls.name, node.name)
        for statement in (cls, named, item):
            _set_origin(statement, node.name)
        return [cls, named, item]

    # -- closure over the names the tests use

    def _need(self, module: Module) -> _Needed:
        key = str(module.path)
        if key not in self.sources:
            self.sources[key] = _Needed(module)
        return self.sources[key]

    def _close(self, fixture_names: set[str]) -> None:
        fixtures_done: set[str] = set()
        for _ in range(MAX_ROUNDS):
            progressed = False
            for name in sorted(fixture_names - fixtures_done):
                fixtures_done.add(name)
                for source, node in self._fixture_levels(name):
                    needed = self._need(source)
                    if id(node) not in needed.statements:
                        needed.statements[id(node)] = node
                        needed.names |= free_names(node)
                        fixture_names |= _fixture_arguments(node) | _requested_fixtures(node)
                        progressed = True
            for needed in list(self.sources.values()):
                for name in sorted(needed.names - needed.done):
                    needed.done.add(name)
                    progressed = True
                    self._add_name(needed, name)
            if not progressed:
                break
            if sum(len(n.statements) for n in self.sources.values()) > MAX_STATEMENTS:
                break

    def _fixture_levels(self, name: str) -> Iterator[tuple[Module, _FunctionNode]]:
        """The fixture `name` the tests get, then, while the last one requests its own name,
        the one it overrides."""
        levels = [*self.overridden.get(name, []), *([self.fixtures[name]] if name in self.fixtures else [])]
        while levels:
            source, node = levels.pop()
            yield source, node
            if name not in _fixture_arguments(node):
                break

    def _add_name(self, needed: _Needed, name: str) -> None:
        module = needed.module
        through = None if name in module.bindings else self.resolver.star_import(module, name)
        if through is not None and through[1].library:  # the spec names what the star import brings
            needed.statements[id(through[0])] = through[0]
        for statement in module.bindings.get(name, []):
            enclosing = _enclosing(module, statement)
            if id(enclosing) in needed.statements:
                if isinstance(enclosing, ast.ImportFrom):  # another name of an import already carried
                    self._follow_import(module, enclosing, {name})
                continue
            if isinstance(enclosing, _FunctionNode) and enclosing.name.startswith("test"):
                # another test, which a carried test calls as a helper: carried, but not collected
                self.called_tests.add(id(enclosing))
            if isinstance(enclosing, ast.ClassDef) and id(enclosing) in self.unit_nodes:
                continue
            needed.statements[id(enclosing)] = enclosing
            if not isinstance(enclosing, ast.Import | ast.ImportFrom):
                needed.names |= free_names(enclosing)
            else:
                self._follow_import(module, enclosing, {name})
        for statement in _mutations(module).get(name, []):
            enclosing = _enclosing(module, statement)
            if id(enclosing) not in needed.statements:
                needed.statements[id(enclosing)] = enclosing
                needed.names |= free_names(enclosing)

    def _follow_import(self, module: Module, statement: ast.Import | ast.ImportFrom, names: set[str]) -> None:
        """Imports from test helpers that are not installed pull in the helper's definitions."""
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if (alias.asname or alias.name.partition(".")[0]) in names:
                    self._helper_module(module, alias.name, (alias.asname,) if alias.asname else None)
            return
        source = resolve_relative(module, statement.level, statement.module)
        if source is None:
            return
        helper = self.repo.module(source, module)
        wanted: set[str] = set()
        for alias in statement.names:
            if (alias.asname or alias.name) not in names or alias.name == "*":
                continue
            if (helper is None or alias.name not in helper.bindings) and \
                    self._helper_module(module, f"{source}.{alias.name}", (alias.asname or alias.name,)):
                continue  # `from tests import common`: a helper module, not a name of the package
            wanted.add(alias.name)
        if helper is None or helper.library:
            return
        if any(alias.name == "*" for alias in statement.names):
            wanted = {n for n in helper.bindings if not n.startswith("_")}
        self._need(helper).names |= wanted

    def _helper_module(self, module: Module, name: str, bound: tuple[str, ...] | None) -> bool:
        """Whether `name`, imported by `module` as a module object, is a test helper that is not
        installed; if so, it (and, for `import a.b` binding `a`, each package on the way) is
        noted as a module object of the definitions `module` reaches through the name it binds
        (`bound`, or the dotted name itself), and those definitions are needed."""
        helper = self.repo.module(name, module)
        if helper is None or helper.library:
            return False
        parts = tuple(name.split("."))
        paths = [bound] if bound is not None else [parts[:i] for i in range(1, len(parts) + 1)]
        for path in paths:
            found = helper if path == paths[-1] else self.repo.module(".".join(path), module)
            if found is not None and found.library:
                return False  # `import lib.testing` binds the installed library `lib`
            self.module_objects.setdefault(path, (found, set()))
        for path, names in _reached_through(module.tree, paths[0][0], set(self.module_objects)).items():
            found, kept = self.module_objects.get(path, (None, set()))
            if found is None:
                continue
            if names is None:  # the module itself is passed around: all it defines
                names = {n for n in found.bindings if not n.startswith("_")}
            names = {n for n in names if n in found.bindings}
            kept |= names
            self._need(found).names |= names
        return True

    # -- emitting

    def _emit(self, module: Module, chain: list[Module]) -> str:
        helpers = [n for n in self.sources.values() if n.module is not module and n.module not in chain]
        order = helpers + [self.sources[str(c.path)] for c in chain if str(c.path) in self.sources]
        order.append(self.sources[str(module.path)])
        futures: list[ast.stmt] = []
        imports: list[ast.stmt] = []
        # `import wcwidth` where the target is `wcwidth.wcwidth` (or `from pkg import mod` for
        # `mod.mod`): the module would replace the program's function of its name, so it is
        # bound as `_kb_module_wcwidth`, and the names that read it read that.
        program_names = {name for _, name in self.program}
        for needed in order:
            for statement in needed.statements.values():
                if not isinstance(statement, ast.Import | ast.ImportFrom):
                    continue
                for alias in statement.names:
                    bound = alias.asname or alias.name
                    if bound not in program_names or (isinstance(statement, ast.Import) and not alias.asname
                                                      and "." in alias.name):
                        continue
                    # (`from lib import wc` of the target itself is no module: it goes)
                    if isinstance(statement, ast.Import) or \
                            self._program_name(self.resolver.name(needed.module, bound)) is None:
                        self.colliding.setdefault(str(needed.module.path), {})[bound] = f"_kb_module_{bound}"
        for needed in order:  # imports first: rewriting them decides the aliases
            for statement in _in_source_order(needed.module, needed.statements):
                if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                    futures.append(statement)
                elif isinstance(statement, ast.Import | ast.ImportFrom):
                    imports += self._rewrite_import(needed.module, statement)
        if self.needs_unittest:
            imports.append(parse_python("import unittest as _kb_unittest").body[0])
        imports = list({ast.dump(i): i for i in imports}.values())
        body: list[ast.stmt] = []
        for index, needed in enumerate(order):
            if index == len(helpers):
                body += self.helper_aliases  # `from helpers import f as g` needs f defined first
                body += self._module_objects()
            for statement in _in_source_order(needed.module, needed.statements):
                if isinstance(statement, ast.Import | ast.ImportFrom):
                    continue
                if id(statement) in self.replacements:
                    body += [self._rewire(needed.module, s) for s in self.replacements[id(statement)]]
                elif isinstance(statement, _FunctionNode) and fixture_name(statement) is not None:
                    body += self._fixture(needed.module, statement)
                elif needed.module in chain and isinstance(statement, _FunctionNode) and \
                        statement.name in CONFTEST_HOOKS:
                    # (a name of its own: the module's hook, or another conftest's, may be there)
                    hook = copy.copy(self._rewire(needed.module, statement))
                    hook.name = f"_kb_conftest_{chain.index(needed.module)}_{statement.name}"
                    body += [hook, parse_python(CONFTEST_HOOKS[statement.name].format(hook.name)).body[0]]
                else:
                    body.append(self._rewire(needed.module, self._strip_unselected(needed.module, statement)))
                    if id(statement) in self.called_tests:
                        body.append(parse_python(f"{statement.name}.__test__ = False").body[0])  # type: ignore[attr-defined]
        imports = self._drop_unused_library_imports(imports, [*self.aliases, *body])
        harness = parse_python(HARNESS).body if self.wrapped or self.fixtures_used(body) else []
        if harness:
            harness += [parse_python(f"_kb_AUTOUSE.extend({self.autouse!r})").body[0]] if self.autouse else []
            defaults, names = _added_options(chain)
            harness += parse_python(f"_kb_OPTIONS.update({defaults!r})\n_kb_SHORT_OPTIONS.update({names!r})\n"
                                    ).body if defaults else []
        shadow_aliases = [parse_python(f"_kb_{name} = {name}").body[0] for name in sorted(self.shadowed)]
        tree = ast.Module(body=_dedupe_futures(futures) + imports + self.aliases + shadow_aliases + harness + body,
                          type_ignores=[])
        return ast.unparse(ast.fix_missing_locations(tree))

    def _module_objects(self) -> list[ast.stmt]:
        """`cm = _kb_module('tests.common', ('one', ...))` for each helper imported as a module
        (packages on a dotted name's way hold their submodules), after the definitions."""
        if not self.module_objects:
            return []

        def made(path: tuple[str, ...]) -> str:
            found, names = self.module_objects[path]
            children = sorted(p for p in self.module_objects if len(p) == len(path) + 1 and p[:-1] == path)
            submodules = "".join(f", {child[-1]}={made(child)}" for child in children)
            return f"_kb_module({(found.name if found else '.'.join(path))!r}, {tuple(sorted(names))!r}{submodules})"

        roots = sorted(path for path in self.module_objects if len(path) == 1)
        return parse_python(_MODULE_OBJECT + "".join(f"{root[0]} = {made(root)}\n" for root in roots)).body

    def _drop_unused_library_imports(self, imports: list[ast.stmt], code: list[ast.stmt]) -> list[ast.stmt]:
        """Imports of the mined library that rewiring left unused (`import lib` once every
        `lib.f(...)` became `f(...)`) go: they are not needed, and may not even be importable."""
        used = {n.id for statement in code for n in ast.walk(statement) if isinstance(n, ast.Name)}
        kept: list[ast.stmt] = []
        for statement in imports:
            names = []
            for alias in statement.names:  # type: ignore[attr-defined]
                bound = alias.asname or alias.name.split(".")[0]
                source = alias.name if isinstance(statement, ast.Import) else (statement.module or "")
                module = self.repo.module(source.split(".")[0]) if source else None
                if bound not in used and alias.name != "*" and module is not None and module.library:
                    continue
                names.append(alias)
            if names:
                statement = copy.copy(statement)
                statement.names = names  # type: ignore[attr-defined]
                kept.append(statement)
        return kept

    def fixtures_used(self, body: list[ast.stmt]) -> bool:
        return any(isinstance(s, ast.FunctionDef) and s.name.startswith("_kb_fixture_") for s in body)

    def _strip_unselected(self, module: Module, statement: ast.stmt) -> ast.stmt:
        """A test class pulled in as a dependency (a base class) loses its own tests."""
        if isinstance(statement, ast.ClassDef) and id(statement) not in self.unit_nodes and \
                any(isinstance(m, _FunctionNode) and m.name.startswith("test") for m in statement.body):
            stripped = copy.deepcopy(statement)
            stripped.body = [m for m in stripped.body
                             if not (isinstance(m, _FunctionNode) and m.name.startswith("test"))] or [ast.Pass()]
            return stripped
        return statement

    def _fixture(self, module: Module, node: _FunctionNode) -> list[ast.stmt]:
        name = fixture_name(node) or node.name
        function = copy.deepcopy(node)
        function.decorator_list = [d for d in function.decorator_list
                                   if decorator_name(d).split(".")[-1] not in ("fixture", "yield_fixture")]
        function.name = f"_kb_fixture_{name}"
        params, scope, ids = (_fixture_keyword(node, keyword) for keyword in ("params", "scope", "ids"))
        # (function, params[, scope[, ids]]): the scope pytest's default, `function`, where only
        # ids are given (specs mined before give no ids, and earlier ones no scope)
        entry = [function.name, ast.unparse(params) if params is not None else "None"]
        if scope is not None or ids is not None:
            entry.append(ast.unparse(scope) if scope is not None else repr("function"))
        if ids is not None:
            entry.append(ast.unparse(ids))
        registry = parse_python(f"_kb_FIXTURES[{name!r}] = ({', '.join(entry)})").body
        if name in self.registered:  # it overrides the one registered before, which it may request
            registry = parse_python(f"_kb_OUTER_FIXTURES[{name!r}] = (*_kb_OUTER_FIXTURES.get({name!r}, ()), "
                                    f"_kb_FIXTURES[{name!r}])").body + registry
        self.registered.add(name)
        self.wrapped = True
        return [self._rewire(module, function), *registry]

    def _rewrite_import(self, module: Module, statement: ast.Import | ast.ImportFrom) -> list[ast.stmt]:
        """The import as the spec needs it: absolute, without program names, helpers copied."""
        colliding = self.colliding.get(str(module.path), {})
        if isinstance(statement, ast.Import):
            # A helper imported as a module is a module object of its copied definitions.
            kept_modules = [ast.alias(alias.name, colliding.get(alias.asname or alias.name, alias.asname))
                            for alias in statement.names
                            if ((alias.asname,) if alias.asname else tuple(alias.name.split(".")))
                            not in self.module_objects]
            if [(a.name, a.asname) for a in kept_modules] == [(a.name, a.asname) for a in statement.names]:
                return [statement]
            return [ast.Import(names=kept_modules)] if kept_modules else []
        source = resolve_relative(module, statement.level, statement.module)
        if source is None:
            return []
        names = [alias for alias in statement.names if (alias.asname or alias.name,) not in self.module_objects
                 or alias.name == "*"]
        if len(names) < len(statement.names):
            if not names:
                return []
            statement = ast.ImportFrom(module=statement.module, names=names, level=statement.level)
        target = self.repo.module(source, module)
        if target is not None and not target.library:
            for alias in statement.names:  # a test helper: its definitions were copied in instead
                if alias.asname and alias.asname != alias.name and alias.name != "*":
                    self.helper_aliases.append(ast.Assign(targets=[ast.Name(alias.asname, ast.Store())],
                                                          value=ast.Name(alias.name, ast.Load()), lineno=0))
            return []
        kept: list[ast.alias] = []
        for alias in statement.names:
            if alias.name == "*":
                kept += self._expand_star(target, source)
                continue
            bound = alias.asname or alias.name
            symbol = self.resolver.name(module, bound)
            program_name = self._program_name(symbol)
            if program_name is None:
                kept.append(ast.alias(alias.name, colliding.get(bound, alias.asname)))
            elif bound != program_name:
                self.aliases.append(ast.Assign(targets=[ast.Name(bound, ast.Store())],
                                               value=ast.Name(program_name, ast.Load()), lineno=0))
        if not kept:
            return []
        return [ast.ImportFrom(module=source, names=kept, level=0)]

    def _expand_star(self, target: Module | None, source: str) -> list[ast.alias]:
        if target is None:
            return [ast.alias(name="*")]
        return [ast.alias(name=name) for name in self._star_names(target, frozenset())
                if self._program_name(self.resolver.name(target, name)) is None]

    def _star_names(self, target: Module, seen: frozenset[str]) -> list[str]:
        """The names `from target import *` binds: its `__all__`, else its public names, those
        its own star imports bring included (toolz's `__init__` is `from .functoolz import *`
        and the like, so `from toolz import *` binds `curry`)."""
        if target.exports is not None:
            return list(target.exports)
        names = dict.fromkeys(n for n in target.bindings if not n.startswith("_"))
        for star in target.star_imports:
            source = resolve_relative(target, star.level, star.module)
            inner = self.repo.module(source, target) if source else None
            if inner is not None and inner.name not in seen:
                names.update(dict.fromkeys(self._star_names(inner, seen | {target.name})))
        return list(names)

    def _program_name(self, symbol: Symbol | None) -> str | None:
        if symbol is None or (symbol.module, symbol.qualname) not in self.program:
            return None
        return symbol.qualname

    def _rewire(self, module: Module, statement: ast.stmt) -> ast.stmt:
        """Attribute chains that reach a program name become the bare name (or, where a local
        variable of the same name hides it, a module-level alias `_kb_<name>`)."""
        builder = self
        scopes: list[set[str]] = []
        colliding = self.colliding.get(str(module.path), {})  # (this module's own imports only)

        class Rewire(ast.NodeTransformer):
            def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
                node.decorator_list = [self.visit(decorator) for decorator in node.decorator_list]
                node.args = self.visit(node.args)  # defaults are read where the def runs
                scopes.append(_local_names(node))
                node.body = [self.visit(s) for s in node.body]
                scopes.pop()
                return node

            visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

            def visit_Name(self, node: ast.Name) -> ast.AST:
                if isinstance(node.ctx, ast.Load) and node.id in colliding and \
                        not any(node.id in scope for scope in scopes):
                    return ast.copy_location(ast.Name(colliding[node.id], ast.Load()), node)
                return node

            def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
                if isinstance(node.ctx, ast.Load) and _is_dotted(node):
                    resolved = builder.resolver.expression(module, node, {})
                    name = builder._program_name(resolved) if isinstance(resolved, Symbol) else None
                    if name is not None:
                        if any(name in scope for scope in scopes):
                            builder.shadowed.add(name)
                            name = f"_kb_{name}"
                        return ast.copy_location(ast.Name(name, ast.Load()), node)
                self.generic_visit(node)
                return node

        return Rewire().visit(copy.deepcopy(statement))


# Emitted once where a spec rebuilds a helper imported as a module (`_module_objects`).
_MODULE_OBJECT = """\
def _kb_module(name, names, **submodules):
    module = __import__('types').ModuleType(name)
    module.__dict__.update({n: globals()[n] for n in names if n in globals()}, **submodules)
    return module
"""


def _reached_through(tree: ast.Module, root: str,
                     modules: set[tuple[str, ...]]) -> dict[tuple[str, ...], set[str] | None]:
    """The names `tree` reads through the module objects `modules` bound under `root`: for
    `cm.one()`, `{("cm",): {"one"}}`; `tests.common.two` reaches "two" of ("tests", "common").
    None where a module itself is used as a value (all its names)."""
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    reached: dict[tuple[str, ...], set[str] | None] = {}
    for node in ast.walk(tree):
        if id(node) in inner or not isinstance(node, ast.Attribute | ast.Name):
            continue
        chain = dotted_name(node).split(".")
        if chain[0] != root:
            continue
        path = (root,)
        while len(path) < len(chain) and (*path, chain[len(path)]) in modules:
            path = (*path, chain[len(path)])
        if path not in modules:
            continue
        names = reached.setdefault(path, set())
        if len(path) == len(chain):
            reached[path] = None
        elif names is not None:
            names.add(chain[len(path)])
    return reached


def _set_origin(node: ast.stmt, origin: str) -> None:
    node._kb_origin = origin  # type: ignore[attr-defined]


def _fixture_arguments(node: _FunctionNode) -> set[str]:
    """The fixtures a fixture function asks for by its parameters."""
    return {a.arg for a in node.args.args + node.args.kwonlyargs}


def _named_as_written(renamed: str, name: str) -> ast.stmt:
    """`_kb_x.__name__ = _kb_x.__qualname__ = 'x'`: what mining renamed to wrap it keeps the
    name the tests gave it, which they may read (`request.cls.__name__`: Faker's tests pick
    their locale from their class's name)."""
    return parse_python(f"{renamed}.__name__ = {renamed}.__qualname__ = {name!r}").body[0]


def _wrapper_function(name: str, call: str, method: bool = False) -> ast.FunctionDef:
    arguments = ", ".join(RUNNER_FIXTURES)
    builtins = ", ".join(f"{f!r}: {f}" for f in RUNNER_FIXTURES)
    source = (f"def {name}({'self, ' if method else ''}{arguments}):\n"
              f"    _kb_builtins = {{{builtins}}}\n"
              f"    {call}\n")
    node = parse_python(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def _fixture_keyword(node: _FunctionNode, keyword: str) -> ast.expr | None:
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and decorator_name(decorator).split(".")[-1] in ("fixture",
                                                                                          "yield_fixture"):
            for item in decorator.keywords:
                if item.arg == keyword:
                    if keyword == "autouse":
                        return item.value if isinstance(item.value, ast.Constant) and item.value.value else None
                    return item.value
    return None


def _class_fixtures(cls: ast.ClassDef) -> tuple[list[str], list[str], dict[str, ast.expr], dict[str, ast.expr],
                                                dict[str, ast.expr]]:
    """Rename the class's own fixtures to `_kb_fixture_<name>`; (names, autouse, params, scopes,
    ids)."""
    names, autouse, params, scopes, ids = [], [], {}, {}, {}
    for member in cls.body:
        if isinstance(member, _FunctionNode):
            name = fixture_name(member)
            if name is None:
                continue
            names.append(name)
            if _fixture_keyword(member, "autouse") is not None:
                autouse.append(name)
            for keyword, found in (("params", params), ("scope", scopes), ("ids", ids)):
                value = _fixture_keyword(member, keyword)
                if value is not None:
                    found[name] = value
            member.decorator_list = [d for d in member.decorator_list
                                     if decorator_name(d).split(".")[-1] not in ("fixture", "yield_fixture")]
            member.name = f"_kb_fixture_{name}"
    return names, autouse, params, scopes, ids


def _added_options(chain: list[Module]) -> tuple[dict[str, object], dict[str, str]]:
    """The command-line options the conftests' `pytest_addoption` hooks add, as a run that does
    not give them has them: ({dest: default}, {each option's name without its dashes: dest}),
    for the harness's `config.getoption`. Read from the hooks' `addoption` calls (the
    parser's or a group's) whose names and default are literals; the rest stay unknown, as
    before. Dest and default by pytest's and argparse's rules: `dest=`, else the first long
    name (dashes made underscores), else the first short one; `default=`, else False for
    `store_true`, True for `store_false`, None for any other action."""
    defaults: dict[str, object] = {}
    names: dict[str, str] = {}
    for conftest in chain:
        for node in conftest.tree.body:
            if not (isinstance(node, _FunctionNode) and node.name == "pytest_addoption"):
                continue
            for call in ast.walk(node):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "addoption"):
                    continue
                options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if len(options) != len(call.args) or not options:
                    continue
                keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
                try:
                    given = {key: ast.literal_eval(keywords[key]) for key in ("dest", "default", "action")
                             if key in keywords}
                except ValueError:
                    continue
                long_names = [o for o in options if o.startswith("--")]
                dest = given.get("dest") or (long_names[0][2:].replace("-", "_") if long_names else options[0][1:])
                if not isinstance(dest, str):
                    continue
                defaults[dest] = given["default"] if "default" in given else \
                    {"store_true": False, "store_false": True}.get(str(given.get("action")))
                names.update((option.lstrip("-"), dest) for option in options)
    return defaults, names


def _requested_fixtures(node: ast.AST) -> set[str]:
    """Fixture names a unit or fixture asks for: its parameters, `usefixtures`, getfixturevalue."""
    names = _marked_fixtures(node)
    for inner in ast.walk(node):
        if isinstance(inner, _FunctionNode):
            names |= {a.arg for a in inner.args.posonlyargs + inner.args.args + inner.args.kwonlyargs}
    return names - {"self", "cls"}


def _pytest_marked(module: Module, cls: ast.ClassDef) -> bool:
    """Whether the class or one of its methods carries a pytest mark: a `pytestmark` in its
    body, a decorator `pytest.mark.*` (`mark.*`), or a name the module binds to one
    (`needs_numpy = pytest.mark.skipif(...)`)."""
    def is_mark(expression: ast.expr) -> bool:
        return "mark" in decorator_name(expression).split(".")[:-1]

    decorators = [*cls.decorator_list, *(d for member in cls.body if isinstance(member, _FunctionNode)
                                         for d in member.decorator_list)]
    for decorator in decorators:
        if is_mark(decorator):
            return True
        for bound in module.bindings.get(decorator_name(decorator), []) if isinstance(decorator, ast.Name) else []:
            if isinstance(bound, ast.Assign) and any(
                    isinstance(inner, ast.Call | ast.Attribute) and is_mark(inner) for inner in ast.walk(bound.value)):
                return True
    return any(_assigns(member, "pytestmark") for member in cls.body)


def _assigns(statement: ast.stmt, name: str) -> bool:
    """Whether `statement` assigns `name` (`=`, `+=`, annotated)."""
    targets = (statement.targets if isinstance(statement, ast.Assign)
               else [statement.target] if isinstance(statement, ast.AugAssign | ast.AnnAssign) else [])
    return any(isinstance(target, ast.Name) and target.id == name for target in targets)


def _marked_fixtures(node: ast.AST) -> set[str]:
    """Fixture names the `usefixtures` marks and `getfixturevalue` calls in `node` spell out."""
    names: set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and decorator_name(inner.func).endswith(("usefixtures", "getfixturevalue")):
            names |= {a.value for a in inner.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return names


def _condition_names(node: ast.AST) -> set[str]:
    """Names the string conditions of the `skipif`/`xfail` marks in `node` read (pytest
    evaluates them in the module's globals)."""
    names: set[str] = set()
    for inner in ast.walk(node):
        if not (isinstance(inner, ast.Call) and decorator_name(inner.func).endswith(("skipif", "xfail"))):
            continue
        for condition in [*inner.args, *(k.value for k in inner.keywords if k.arg == "condition")]:
            if isinstance(condition, ast.Constant) and isinstance(condition.value, str):
                try:
                    names |= free_names(parse_python(condition.value, mode="eval").body)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue
    return names


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    arguments = function.args
    names = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    for inner in ast.walk(function):
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
            names.add(inner.id)
        elif isinstance(inner, _FunctionNode | ast.ClassDef) and inner is not function:
            names.add(inner.name)  # `@lib.command()` on a local `def command()`
        elif isinstance(inner, ast.Import | ast.ImportFrom):
            names.update(bound_names(inner))
    return names


def _is_dotted(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _enclosing(module: Module, statement: ast.stmt) -> ast.stmt:
    for top in module.tree.body:
        if top is statement or any(inner is statement for inner in ast.walk(top)):
            return top
    return statement


def _mutations(module: Module) -> dict[str, list[ast.stmt]]:
    """Module-level statements that change what a name holds without rebinding it, by name:
    `Foo.attr = ...`, `TABLE[key] = ...`, `x += ...` on an attribute or item, `del Foo.attr`,
    `setattr(Foo, ...)` and method calls on it (`REGISTRY.update(...)`, `Foo.register(f)`).
    A test using the name needs them too. Statements under `if __name__ == "__main__":` never
    run on import and are left out."""
    cached = getattr(module, "_kb_mutations", None)
    if cached is not None:
        return cached
    found: dict[str, list[ast.stmt]] = {}
    main_guarded = {id(inner) for top in module.tree.body if isinstance(top, ast.If) and _is_main_guard(top.test)
                    for inner in ast.walk(top)}
    for statement in top_level_statements(module.tree):
        if id(statement) in main_guarded:
            continue
        roots: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            roots = [t for t in statement.targets if isinstance(t, ast.Attribute | ast.Subscript)]
        elif isinstance(statement, ast.AugAssign | ast.AnnAssign) and \
                isinstance(statement.target, ast.Attribute | ast.Subscript):
            roots = [statement.target]
        elif isinstance(statement, ast.Delete):
            roots = [t for t in statement.targets if isinstance(t, ast.Attribute | ast.Subscript)]
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = statement.value.func
            if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and statement.value.args:
                roots = [statement.value.args[0]]
            elif isinstance(func, ast.Attribute):
                roots = [func.value]
        for root in roots:
            while isinstance(root, ast.Attribute | ast.Subscript | ast.Call):
                root = root.func if isinstance(root, ast.Call) else root.value
            if isinstance(root, ast.Name):
                found.setdefault(root.id, []).append(statement)
    module._kb_mutations = found  # type: ignore[attr-defined]
    return found


def _is_main_guard(test: ast.expr) -> bool:
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def _in_source_order(module: Module, statements: dict[int, ast.stmt]) -> list[ast.stmt]:
    return sorted(statements.values(), key=lambda s: (s.lineno, s.col_offset))


def _dedupe_futures(futures: list[ast.stmt]) -> list[ast.stmt]:
    names = sorted({alias.name for f in futures if isinstance(f, ast.ImportFrom) for alias in f.names})
    if not names:
        return []
    return [ast.ImportFrom(module="__future__", names=[ast.alias(name=n) for n in names], level=0)]

