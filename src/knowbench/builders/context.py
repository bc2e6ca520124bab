"""The code around a target: its masked prompt, its reference and the context it runs in.

For a target function `f` (or method `Cls.f`) of module `M`:

- `prompt_code` is `f`'s definition (for a method, its whole class) cut from the source,
  with the target's body after its docstring replaced by `...`;
- `reference` is the target's own definition, dedented;
- `context` is what must run before it, found by a bounded closure over the names the
  definition uses: `M`'s imports of those names (relative imports made absolute), copies of
  `M`'s helper functions and constants (and of what *they* use, round after round), and
  imports from the installed library for what must keep its identity (classes, exceptions,
  decorated functions, names bound conditionally). Copies call the candidate, so tests of a
  helper that uses the target still exercise it.

`repair_context` adds a name the closure missed (a NameError seen when running the
reference) by importing it from the installed module.
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from dataclasses import dataclass, field

from knowbench.builders.repository import (
    Module,
    Symbol,
    bound_names,
    decorator_name,
    find_node,
    resolve_relative,
    top_level_statements,
)
from knowbench.parsing import parse_python
from knowbench.program import POSED_BASE_PREFIX

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__package__",
                                        "__builtins__", "__loader__", "__path__"}
_COPYABLE_DECORATORS = frozenset({"staticmethod", "classmethod", "functools.wraps", "wraps", "lru_cache",
                                  "functools.lru_cache", "cache", "functools.cache", "overload",
                                  "typing.overload"})
MAX_CONTEXT_ROUNDS = 12
MAX_CONTEXT_STATEMENTS = 120


class ContextError(ValueError):
    """The target cannot be cut out of its module; the message says why."""


@dataclass
class TargetCode:
    """Everything cut from the source for one target."""

    symbol: Symbol
    entry_point: str
    prompt_code: str
    reference: str
    context: str
    body_lines: int
    docstring: str | None
    signature: str
    copied: list[str] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    subclassed: bool = False

    @property
    def program_names(self) -> set[str]:
        """Top-level names the program defines itself (copies and the prompt's own)."""
        return {self.symbol.top, *self.copied}


def cut_target(module: Module, symbol: Symbol, max_prompt_lines: int | None = None) -> TargetCode:
    """Cut `symbol` (a function or method of `module`) out of its source.

    A method's prompt is its whole class. When that class is longer than `max_prompt_lines`,
    the prompt becomes a subclass of the installed class that redefines only the target
    (`class Cls(_kb_base_Cls)`), so the other methods come from the library unchanged.
    Raises `ContextError` when the definition is missing, nested in a function, or its
    body cannot be masked.
    """
    node = find_node(module.tree, symbol.qualname)
    if not isinstance(node, _FunctionNode):
        raise ContextError(f"{symbol.dotted} is not a function definition")
    top = _top_statement(module, symbol)
    lines = module.lines()
    top_start = _start_line(top)
    assert top.end_lineno is not None and node.end_lineno is not None
    docstring_node = _docstring_node(node)
    body_start = node.body[1].lineno if docstring_node is not None and len(node.body) > 1 else node.body[0].lineno
    signature_end = (docstring_node.lineno if docstring_node is not None else node.body[0].lineno) - 1
    if signature_end < node.lineno or (docstring_node is not None and
                                       docstring_node.end_lineno is not None and
                                       docstring_node.end_lineno >= body_start):
        raise ContextError("the body starts on the line of the signature or of the docstring")
    keep_until = docstring_node.end_lineno if docstring_node is not None else signature_end
    assert keep_until is not None
    indent = " " * node.body[0].col_offset
    masked = [*lines[top_start - 1: keep_until], indent + "...", *lines[node.end_lineno: top.end_lineno]]
    prompt_code = textwrap.dedent("\n".join(masked))
    subclassed = (max_prompt_lines is not None and len(masked) > max_prompt_lines and isinstance(top, ast.ClassDef)
                  and symbol.qualname.count(".") == 1)
    if subclassed:
        assert isinstance(top, ast.ClassDef)
        prompt_code = _subclass_prompt(top, [*lines[_start_line(node) - 1: keep_until], indent + "..."], lines)
    reference = textwrap.dedent("\n".join(lines[_start_line(node) - 1: node.end_lineno]))
    for code in (prompt_code, reference):
        try:
            parse_python(code)
        except SyntaxError as error:
            raise ContextError(f"the cut code does not parse ({error.msg}, line {error.lineno})") from None
    body_code = "\n".join(lines[body_start - 1: node.end_lineno])
    body_lines = sum(1 for line in body_code.splitlines()
                     if line.strip() and not line.strip().startswith("#"))
    signature = textwrap.dedent("\n".join(lines[_start_line(node) - 1: signature_end])).strip()
    docstring = ast.get_docstring(node)
    target = TargetCode(symbol=symbol, entry_point=symbol.qualname, prompt_code=prompt_code,
                        reference=reference, context="", body_lines=body_lines, docstring=docstring,
                        signature=signature, subclassed=subclassed)
    build_context(module, node if subclassed else top, target)
    if subclassed:
        base = f"from {module.name} import {top.name} as {_BASE_PREFIX}{top.name}"
        target.context = repair_context(target.context, module.name, top.name, line=base) or target.context
        target.imported.append(top.name)
    return target


_BASE_PREFIX = POSED_BASE_PREFIX


def _subclass_prompt(cls: ast.ClassDef, masked_method: list[str], lines: list[str]) -> str:
    """`class Cls(_kb_base_Cls):` with the class docstring and the masked target method."""
    indent = " " * masked_method_indent(masked_method)
    parts = [f"class {cls.name}({_BASE_PREFIX}{cls.name}):"]
    docstring = cls.body[0] if cls.body and isinstance(cls.body[0], ast.Expr) and \
        isinstance(cls.body[0].value, ast.Constant) and isinstance(cls.body[0].value.value, str) else None
    if docstring is not None and docstring.end_lineno is not None:
        parts += [indent + line.strip() if index == 0 else line
                  for index, line in enumerate(lines[docstring.lineno - 1: docstring.end_lineno])]
        parts.append("")
    parts += [indent + "# Every other member is inherited from the installed class.", *masked_method]
    return "\n".join(parts)


def masked_method_indent(method_lines: list[str]) -> int:
    first = next((line for line in method_lines if line.strip()), "")
    return len(first) - len(first.lstrip())


def _top_statement(module: Module, symbol: Symbol) -> ast.stmt:
    """The target's top-level def or class; one inside a module-level `if`/`try` (a version
    switch) counts too: the prompt holds the definition that applies here."""
    top_name = symbol.top
    found = None
    for statement in top_level_statements(module.tree):
        if isinstance(statement, _FunctionNode | ast.ClassDef) and statement.name == top_name:
            found = statement
    if found is None:
        raise ContextError(f"{symbol.dotted} is not defined at the top level of its module")
    return found


def _start_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _docstring_node(node: _FunctionNode) -> ast.Expr | None:
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def free_names(node: ast.AST) -> set[str]:
    """Names a module-level statement reads from the module (builtins excluded).

    Scopes follow Python's rules: a function's parameters and the names it assigns are its
    own; a class body's names are invisible to its methods; decorators, defaults and bases
    are read where the statement runs. Comprehension variables count as locals of the
    enclosing scope (a harmless over-approximation). An assignment's own targets are not
    subtracted (`X = X + 1` needs an earlier X); a compound statement's are.
    """
    if isinstance(node, _SCOPE_NODES):
        names = _free_of_scope(node)
    else:
        loads, stores, nested, _ = _scan([node])
        names = loads | {name for scope in nested for name in _free_of_scope(scope)}
        if not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            names -= stores
    return {name for name in names if name not in _BUILTINS}


def _free_of_scope(node: ast.AST) -> set[str]:
    """What a def, lambda or class reads from the scope around it."""
    outer: list[ast.AST] = []
    if isinstance(node, _FunctionNode | ast.Lambda):
        arguments = node.args
        outer += [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
        if isinstance(node, _FunctionNode):
            outer += [*node.decorator_list, *(a.annotation for a in _all_args(arguments) if a.annotation)]
            if node.returns is not None:
                outer.append(node.returns)
    elif isinstance(node, ast.ClassDef):
        outer += [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
    read_outside: set[str] = set()
    for part in outer:
        loads, _, nested, _ = _scan([part])
        read_outside |= loads | {name for scope in nested for name in _free_of_scope(scope)}
    if isinstance(node, _FunctionNode | ast.Lambda):
        body = node.body if isinstance(node.body, list) else [node.body]
        loads, stores, nested, declared = _scan(body)
        local = ({a.arg for a in _all_args(node.args)} | stores) - declared
        inner = {name for scope in nested for name in _free_of_scope(scope)}
        return read_outside | ((loads | inner) - local)
    assert isinstance(node, ast.ClassDef)
    loads, stores, nested, _ = _scan(node.body)
    inner = {name for scope in nested for name in _free_of_scope(scope)}  # methods skip class names
    return read_outside | (loads - stores) | inner


def _all_args(arguments: ast.arguments) -> list[ast.arg]:
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return every + [a for a in (arguments.vararg, arguments.kwarg) if a is not None]


def _scan(nodes: list[ast.AST]) -> tuple[set[str], set[str], list[ast.AST], set[str]]:
    """(names loaded, names bound, nested scopes, names declared global/nonlocal) in the code
    of one scope, not entering nested defs, lambdas or classes (whose names are bound)."""
    loads: set[str] = set()
    stores: set[str] = set()
    nested: list[ast.AST] = []
    declared: set[str] = set()
    stack: list[ast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPE_NODES):
            nested.append(node)
            if not isinstance(node, ast.Lambda):
                stores.add(node.name)
            continue
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stores.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            stores.update(bound_names(node))
        elif isinstance(node, ast.Global | ast.Nonlocal):
            declared.update(node.names)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            stores.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return loads, stores, nested, declared


def _enclosing(module: Module, statement: ast.stmt) -> ast.stmt:
    """The module-body statement that holds `statement` (itself when it is one)."""
    for top in module.tree.body:
        if top is statement:
            return top
        if any(inner is statement for inner in ast.walk(top)):
            return top
    return statement


def _absolute_import(module: Module, statement: ast.Import | ast.ImportFrom, names: set[str]) -> str | None:
    """The import, restricted to the aliases binding `names`, with relative levels resolved."""
    if isinstance(statement, ast.Import):
        aliases = [a for a in statement.names if (a.asname or a.name.split(".")[0]) in names]
        return ast.unparse(ast.Import(names=aliases)) if aliases else None
    source = resolve_relative(module, statement.level, statement.module)
    if source is None:
        return None
    if statement.module == "__future__":
        return ast.unparse(statement)
    aliases = [a for a in statement.names if a.name != "*" and (a.asname or a.name) in names]
    if not aliases:
        return None
    return ast.unparse(ast.ImportFrom(module=source, names=aliases, level=0))


_IMMUTABLE_CALLS = frozenset({"re.compile", "compile", "frozenset", "tuple", "str", "int", "float", "bytes",
                              "complex", "range", "TypeVar", "typing.TypeVar", "NewType", "typing.NewType",
                              "Decimal", "decimal.Decimal", "Fraction", "timedelta", "datetime.timedelta",
                              "date", "datetime.date", "datetime", "datetime.datetime"})
# Not `object()`: a sentinel is compared by identity, and a target grafted into the installed
# module (knowbench_graft) is handed the library's own.


def _immutable_assignment(statement: ast.stmt) -> bool:
    """Whether copying the assignment is safe: it binds a value nothing can change later.

    Lists, dicts, sets and arbitrary objects are imported from the installed module instead:
    a module may fill them at import time (inflection adds rules to its lists by calling
    functions), and tests may change them to affect the library.
    """
    if not isinstance(statement, ast.Assign | ast.AnnAssign) or statement.value is None:
        return False
    return _immutable(statement.value)


def _immutable(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant | ast.Name | ast.Attribute | ast.Lambda | ast.Subscript):
        return True
    if isinstance(expr, ast.Tuple):
        return all(_immutable(e) for e in expr.elts)
    if isinstance(expr, ast.UnaryOp):
        return _immutable(expr.operand)
    if isinstance(expr, ast.BinOp):
        return _immutable(expr.left) and _immutable(expr.right)
    if isinstance(expr, ast.BoolOp):
        return all(_immutable(e) for e in expr.values)
    if isinstance(expr, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) or (isinstance(v, ast.FormattedValue) and _immutable(v.value))
                   for v in expr.values)
    if isinstance(expr, ast.Call):
        return decorator_name(expr.func) in _IMMUTABLE_CALLS and all(
            _immutable(a) for a in [*expr.args, *(k.value for k in expr.keywords)])
    return False


_BLOCK_STATEMENTS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Pass, ast.Expr, ast.If, ast.Try,
                     ast.ExceptHandler)
MAX_BLOCK_STATEMENTS = 15


def _copyable_block(statement: ast.stmt) -> bool:
    """A module-level `if`/`try` made only of imports and simple assignments, small enough
    to copy whole (an optional dependency's fallback, a version switch)."""
    if not isinstance(statement, ast.If | ast.Try):
        return False
    inner = [n for n in ast.walk(statement) if isinstance(n, ast.stmt | ast.ExceptHandler)]
    return len(inner) <= MAX_BLOCK_STATEMENTS and all(isinstance(n, _BLOCK_STATEMENTS) for n in inner)


def _copyable_function(statement: ast.stmt) -> bool:
    return isinstance(statement, _FunctionNode) and all(
        decorator_name(d) in _COPYABLE_DECORATORS for d in statement.decorator_list)


def build_context(module: Module, top: ast.stmt, target: TargetCode) -> None:
    """Fill `target.context` (and what was copied, imported, left unresolved)."""
    top_name = target.symbol.top
    imports: dict[int, str] = {}  # line -> import statement, in source order
    copies: dict[int, str] = {}
    copied: list[ast.stmt] = []  # the statements behind `copies`
    library_imports: list[str] = []
    futures = [s for s in module.tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    wanted = free_names(top)
    done: set[str] = {top_name}
    unresolved: set[str] = set()
    lines = module.lines()
    for _ in range(MAX_CONTEXT_ROUNDS):
        pending = sorted(wanted - done)
        if not pending:
            break
        for name in pending:
            done.add(name)
            statements = module.bindings.get(name)
            if not statements:
                if module.star_imports:
                    for star in module.star_imports:
                        source = resolve_relative(module, star.level, star.module)
                        if source:
                            imports.setdefault(star.lineno, f"from {source} import *")
                else:
                    unresolved.add(name)
                continue
            statement = statements[0] if isinstance(statements[0], ast.Import | ast.ImportFrom) else statements[-1]
            enclosing = _enclosing(module, statement)
            if isinstance(statement, ast.Import | ast.ImportFrom) and enclosing is statement:
                text = _absolute_import(module, statement, {name})
                if text is not None:
                    imports[statement.lineno * 1000 + len(imports)] = text
                continue
            copy_ok = enclosing is statement and statement is not top and all(
                _enclosing(module, binding) is binding for binding in statements) and (
                _copyable_function(statement) or all(
                    _immutable_assignment(binding) and top_name not in free_names(binding)
                    for binding in statements))
            if enclosing is not statement and _copyable_block(enclosing):
                # `try: from gmpy2 import mpz / except ImportError: ...`: the name may not even
                # exist in the installed module, so the block itself comes along
                assert enclosing.end_lineno is not None
                if _start_line(enclosing) not in copies:
                    copies[_start_line(enclosing)] = "\n".join(lines[_start_line(enclosing) - 1: enclosing.end_lineno])
                    copied.append(enclosing)
                    wanted |= free_names(enclosing)
                    bound = {n for inner in ast.walk(enclosing) if isinstance(inner, ast.stmt)
                             for n in bound_names(inner)}
                    target.copied.extend(sorted(bound - {top_name}))
                    done.update(bound)
                continue
            if copy_ok:
                assert statement.end_lineno is not None
                for binding in statements:
                    if _enclosing(module, binding) is binding and binding is not top and \
                            binding.end_lineno is not None:
                        copies[_start_line(binding)] = "\n".join(lines[_start_line(binding) - 1: binding.end_lineno])
                        copied.append(binding)
                        wanted |= free_names(binding)
                target.copied.append(name)
            else:
                library_imports.append(f"from {module.name} import {name}")
                target.imported.append(name)
        if len(copies) + len(imports) + len(library_imports) > MAX_CONTEXT_STATEMENTS:
            raise ContextError(f"the context needs more than {MAX_CONTEXT_STATEMENTS} statements")
    target.unresolved = sorted(unresolved)
    parts = [ast.unparse(f) for f in futures]
    parts += [imports[key] for key in sorted(imports)]
    parts += library_imports
    if _reads_its_location([top, *copied]):
        parts.append(_LOCATION.format(module=module.name))
    parts += [textwrap.dedent(copies[key]) for key in sorted(copies)]
    target.context = "\n".join(_dedupe(parts))
    try:
        parse_python(target.context)
    except SyntaxError as error:
        raise ContextError(f"the context does not parse ({error.msg}, line {error.lineno})") from None


# Where the cut code finds its module's files (`os.path.dirname(__file__)`,
# `pkgutil.get_data(__name__, ...)`) or imports relative to its package inside a function
# (`from ._impl import helper`), the program, module `solution`, stands in for the installed
# module: its location, loader and package are that module's.
_LOCATION = """\
import importlib.util as _kb_importlib_util
__spec__ = _kb_importlib_util.find_spec({module!r})
if __spec__ is not None:
    __file__, __loader__, __package__ = __spec__.origin, __spec__.loader, __spec__.parent"""


def _reads_its_location(nodes: list[ast.AST]) -> bool:
    """Whether the code reads its module's location (`__file__`, `__spec__`, `__loader__`,
    `__package__`), hands its module's name to a call (`pkgutil.get_data(__name__, ...)`), or
    imports relative to its package (module-level imports are made absolute; these are the
    ones in function bodies)."""
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.level:
                return True
            if isinstance(inner, ast.Name) and inner.id in ("__file__", "__spec__", "__loader__", "__package__"):
                return True
            if isinstance(inner, ast.Call) and any(isinstance(argument, ast.Name) and argument.id == "__name__"
                                                   for argument in [*inner.args, *(k.value for k in inner.keywords)]):
                return True
    return False


def _dedupe(parts: list[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for part in parts:
        if part not in seen:
            seen.add(part)
            kept.append(part)
    return kept


def repair_context(context: str, module_name: str, name: str, line: str | None = None) -> str | None:
    """`context` plus an import of `name` from the installed module (or the given `line`);
    None if it is already there."""
    line = line or f"from {module_name} import {name}"
    if line in context.splitlines():
        return None
    tree = parse_python(context) if context.strip() else ast.Module(body=[], type_ignores=[])
    futures = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    insert_at = max((f.end_lineno or 0 for f in futures), default=0)
    lines = context.splitlines()
    lines.insert(insert_at, line)
    return "\n".join(lines)
