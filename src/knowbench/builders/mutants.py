"""Simple AST mutants of a reference solution, to measure how much its tests check.

Each mutant changes one thing in the target's body: a comparison (`<` to `<=`, `==` to
`!=`, `in` to `not in`, ...), an arithmetic or bitwise operator, `and`/`or`, a dropped
`not`, an integer constant (n to n + 1), a boolean constant, a negated `if`/`while`
condition, a `return x` turned into `return None`, `break`/`continue` swapped. The
mutation sites are enumerated in a fixed order and `mutants(code, n)` picks `n` of them
spread evenly over the body, so the same reference always gives the same mutants. The
suite *kills* a mutant when at least one test does not pass on it; survivors include
equivalent mutants, so the share killed is a lower bound on the suite's strength.
"""

from __future__ import annotations

import ast
import copy
import textwrap
from collections.abc import Callable, Iterator

from knowbench.parsing import parse_python

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_BINARY_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.LShift: ast.RShift, ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd,
}

Mutation = Callable[[ast.AST], str]  # applies itself in place, returns a description


def mutants(code: str, count: int) -> list[tuple[str, str]]:
    """Up to `count` (description, mutated definition) pairs for the definition in `code`."""
    if count <= 0:
        return []
    tree = _parse(code)
    if tree is None:
        return []
    sites = list(_sites(tree))
    if not sites:
        return []
    step = max(1, len(sites) / count) if len(sites) > count else 1
    chosen = sorted({int(index * step) for index in range(min(count, len(sites)))})
    produced: list[tuple[str, str]] = []
    reference = ast.unparse(tree)
    for position in chosen:
        mutated = copy.deepcopy(tree)
        site_index, _ = sites[position]
        node = _node_at(mutated, site_index)
        description = sites[position][1](node)
        text = ast.unparse(ast.fix_missing_locations(mutated))
        if text != reference:
            produced.append((description, text))
    return produced


def _parse(code: str) -> ast.Module | None:
    try:
        tree = parse_python(textwrap.dedent(code))
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[0], _FunctionNode):
        return None
    return tree


def _body_nodes(tree: ast.Module) -> Iterator[tuple[int, ast.AST]]:
    """(index in ast.walk order, node) for nodes inside the function body, docstring excluded."""
    function = tree.body[0]
    assert isinstance(function, _FunctionNode)
    docstring = function.body[0] if ast.get_docstring(function) is not None else None
    inside: set[int] = set()
    for statement in function.body:
        if statement is docstring:
            continue
        inside |= {id(node) for node in ast.walk(statement)}
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in inside:
            yield index, node


def _node_at(tree: ast.Module, index: int) -> ast.AST:
    for position, node in enumerate(ast.walk(tree)):
        if position == index:
            return node
    raise IndexError(index)


def _sites(tree: ast.Module) -> Iterator[tuple[int, Mutation]]:
    for index, node in _body_nodes(tree):
        if isinstance(node, ast.Compare):
            for position, op in enumerate(node.ops):
                if type(op) in _COMPARE_SWAPS:
                    yield index, _swap_compare(position)
        elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BINARY_SWAPS:
            yield index, _swap_binary
        elif isinstance(node, ast.BoolOp):
            yield index, _swap_bool
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield index, _drop_not
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            yield index, _flip_bool
        elif isinstance(node, ast.Constant) and isinstance(node.value, int):
            yield index, _bump_int
        elif isinstance(node, ast.If | ast.While):
            yield index, _negate_condition
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            yield index, _return_none
        elif isinstance(node, ast.Break | ast.Continue):
            yield index, _swap_loop_control


def _swap_compare(position: int) -> Mutation:
    def apply(node: ast.AST) -> str:
        assert isinstance(node, ast.Compare)
        old = node.ops[position]
        node.ops[position] = _COMPARE_SWAPS[type(old)]()
        return f"line {node.lineno}: {type(old).__name__} -> {type(node.ops[position]).__name__}"
    return apply


def _swap_binary(node: ast.AST) -> str:
    assert isinstance(node, ast.BinOp | ast.AugAssign)
    old = node.op
    node.op = _BINARY_SWAPS[type(old)]()
    return f"line {node.lineno}: {type(old).__name__} -> {type(node.op).__name__}"


def _swap_bool(node: ast.AST) -> str:
    assert isinstance(node, ast.BoolOp)
    old = node.op
    node.op = ast.Or() if isinstance(old, ast.And) else ast.And()
    return f"line {node.lineno}: {type(old).__name__} -> {type(node.op).__name__}"


def _drop_not(node: ast.AST) -> str:
    assert isinstance(node, ast.UnaryOp)
    node.op = ast.UAdd()  # `+x` keeps the tree valid; it is `x` for bools and numbers
    node.operand = ast.Call(func=ast.Name("bool", ast.Load()), args=[node.operand], keywords=[])
    return f"line {node.lineno}: not removed"


def _flip_bool(node: ast.AST) -> str:
    assert isinstance(node, ast.Constant)
    node.value = not node.value
    return f"line {node.lineno}: {not node.value} -> {node.value}"


def _bump_int(node: ast.AST) -> str:
    assert isinstance(node, ast.Constant) and isinstance(node.value, int)
    node.value = node.value + 1
    return f"line {node.lineno}: {node.value - 1} -> {node.value}"


def _negate_condition(node: ast.AST) -> str:
    assert isinstance(node, ast.If | ast.While)
    node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    return f"line {node.lineno}: condition negated"


def _return_none(node: ast.AST) -> str:
    assert isinstance(node, ast.Return)
    node.value = ast.Constant(None)
    return f"line {node.lineno}: return None"


def _swap_loop_control(node: ast.AST) -> str:
    # A Break becomes a Continue and vice versa by changing its class in place.
    node.__class__ = ast.Continue if isinstance(node, ast.Break) else ast.Break
    return f"line {getattr(node, 'lineno', '?')}: {'break -> continue' if isinstance(node, ast.Continue) else 'continue -> break'}"
