"""Properties of extraction and splicing over real replies (DomainEval's released gpt-4o-mini
responses) and over seeded variants of them.

The variants wrap a real reply the way models do (prose around a fence, a reasoning block
with a draft, helpers in a separate fenced block, example usage after the code) or add what
real replies add (a module-level constant computed from a function the prompt defines after
the target). The properties hold for every row:

- the spliced program compiles;
- no module-level statement reads a name before it is bound, unless the prompt or the
  reply read it unbound on their own (checked by `unbound_reads`, written here apart from
  knowbench.program so the two do not share a mistake);
- the prompt's statements keep their order, and every statement comes from the prompt or
  from the reply (nothing is invented);
- the target that ends up bound is the reply's definition;
- splicing again changes nothing;
- a variant splices to the program its plain reply splices to (with what the variant adds).
"""

from __future__ import annotations

import ast
import builtins
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from knowbench.benchmark.schema import find_definition
from knowbench.program import SpliceError, extract_code, splice

SEED = 20240711
RESPONSES = "anchors/domaineval/gpt-4o-mini-pass1-responses"

# ------------------------------------------------------------------ the oracle

_ALWAYS_BOUND = frozenset(dir(builtins)) | {
    "__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
    "__path__", "__annotations__"}


class _ImportTimeReads(ast.NodeVisitor):
    """Names a module-level statement loads while the module runs (not in function bodies)."""

    def __init__(self, lazy_annotations: bool) -> None:
        self.loaded: list[str] = []
        self.lazy_annotations = lazy_annotations

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loaded.append(node.id)

    def _signature(self, args: ast.arguments, returns: ast.expr | None) -> None:
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                self.visit(default)
        if self.lazy_annotations:
            return
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None and arg.annotation is not None:
                self.visit(arg.annotation)
        if returns is not None:
            self.visit(returns)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._signature(node.args, node.returns)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._signature(node.args, None)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expression)
        self.loaded += [name for _, name in unbound_reads(node.body, self.lazy_annotations)]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        if not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        local = {name.id for generator in node.generators for name in ast.walk(generator.target)
                 if isinstance(name, ast.Name)}
        inner = _ImportTimeReads(self.lazy_annotations)
        inner.generic_visit(node)
        self.loaded += [name for name in inner.loaded if name not in local]

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension


def bound_names(node: ast.stmt) -> set[str]:
    """Names a module-level statement binds, in any of its branches."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    names: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            names |= bound_names(child)
        elif isinstance(child, ast.excepthandler):
            names |= ({child.name} if child.name else set()) | set().union(*map(bound_names, child.body))
        elif isinstance(child, ast.expr | ast.withitem | ast.comprehension) and not isinstance(
                child, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            names |= {name.id for name in ast.walk(child)
                      if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)}
            names |= {walrus.target.id for walrus in ast.walk(child) if isinstance(walrus, ast.NamedExpr)}
    return names


def unbound_reads(body: list[ast.stmt], lazy_annotations: bool | None = None) -> list[tuple[str, str]]:
    """(statement dump, name) for each name a statement of `body` reads while the module runs
    before any statement bound it. A name bound anywhere in a compound statement counts as
    bound for all of it; after a star import every name counts as bound."""
    if lazy_annotations is None:
        lazy_annotations = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                               and any(alias.name == "annotations" for alias in node.names) for node in body)
    known = set(_ALWAYS_BOUND)
    found: list[tuple[str, str]] = []
    for node in body:
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            break
        reads = _ImportTimeReads(lazy_annotations)
        reads.visit(node)
        own = bound_names(node) if isinstance(node, ast.If | ast.Try | ast.For | ast.While | ast.With) else set()
        found += [(ast.dump(node), name) for name in dict.fromkeys(reads.loaded)
                  if name not in known and name not in own]
        known |= bound_names(node)
    return found


def test_oracle_finds_a_name_read_before_it_is_bound() -> None:
    body = ast.parse("import os\nA = helper(3)\n\ndef helper(x):\n    return B\n\n"
                     "@helper\ndef g(y=os.sep, z=C):\n    pass\nclass K(Base):\n    x = D\n"
                     "E = [q for q in range(3)]").body
    assert [name for _, name in unbound_reads(body)] == ["helper", "C", "Base", "D"]


# ------------------------------------------------------------------ the rows


def _rows(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(root.glob("*/*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def _entry_point(tree: ast.Module, full_method_name: str) -> str | None:
    parts = full_method_name.split(".")
    for name in (full_method_name, parts[0], parts[-1]):
        if find_definition(tree, name) is not None:
            return name
    return None


@pytest.fixture(scope="module")
def subjects(shared_data: Callable[..., Path]) -> list[tuple[str, str, str]]:
    """(prompt, entry point, reply) for every released response whose prompt parses."""
    found = []
    for row in _rows(shared_data(RESPONSES)):
        prompt = re.sub(r"\[\s*MASK\s*\]", "...", row["method_code_mask"])
        try:
            tree = ast.parse(prompt)
        except SyntaxError:
            continue
        entry_point = _entry_point(tree, row["full_method_name"])
        if entry_point is not None:
            found.append((prompt, entry_point, row["response"]))
    assert len(found) > 200
    return found


# ------------------------------------------------------------------ the variants


def _fenced(code: str, rng: random.Random) -> str:
    tag = rng.choice(["python", "py", ""])
    return f"Here is the implementation:\n\n```{tag}\n{code}\n```\n\nIt handles the edge cases."


def _with_reasoning(code: str, rng: random.Random) -> str:
    draft = "def draft(x):\n    return x\n"
    closing = rng.choice(["```\n", ""])  # a draft fence the reasoning may leave open
    return (f"<think>\nLet me sketch it first:\n```python\n{draft}{closing}Now the real one.\n</think>\n\n"
            f"```python\n{code}\n```")


def _helpers_apart(code: str, entry_point: str, rng: random.Random) -> str | None:
    """The reply's top-level functions other than the target in a first fenced block (with
    the imports), the rest in a second one."""
    tree = ast.parse(code)
    name = entry_point.split(".")[0]
    helpers = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name != name]
    if not helpers or any(isinstance(node, ast.ClassDef) for node in tree.body):
        return None
    moved = rng.sample(helpers, k=rng.randint(1, len(helpers)))
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    first = ast.Module([*imports, *[node for node in tree.body if node in moved]], [])
    second = ast.Module([node for node in tree.body if node not in moved], [])
    return (f"Two helpers first:\n```python\n{ast.unparse(first)}\n```\n\nThen the function:\n"
            f"```python\n{ast.unparse(second)}\n```\n\nUsage:\n```python\nprint({name}())\n```")


def _with_usage(code: str, entry_point: str, rng: random.Random) -> str:
    name = entry_point.split(".")[0]
    usage = rng.choice([f"result = {name}()\nprint(result)", f"print({name}())",
                        f"if __name__ == '__main__':\n    print({name}())"])
    return f"{code}\n\n# Example usage\n{usage}\n"


def _with_constant(prompt: str, code: str, entry_point: str,
                   rng: random.Random) -> tuple[str, str, str] | None:
    """(prompt, reply, constant): the prompt with a function after the target, and the reply
    repeating that function (as whole-file replies do) and adding, after the target, a
    constant computed from it that the target reads. None when the reply has no target."""
    tree = ast.parse(code)
    definition = find_definition(tree, entry_point) or find_definition(tree, entry_point.split(".")[-1])
    if definition is None:
        return None
    later = f"_kb_later_{rng.randrange(1000)}"
    helper = f"def {later}(value=None):\n    return value\n"
    constant = later.upper()
    definition.body.insert(0, ast.parse(f"_kb_unused = {constant}").body[0])
    position = rng.randint(_index_holding(tree, definition) + 1, len(tree.body))
    tree.body[position:position] = ast.parse(f"{helper}\n\n{constant} = {later}(3)").body
    return f"{prompt}\n\n{helper}", ast.unparse(tree), constant


def _index_holding(tree: ast.Module, node: ast.AST) -> int:
    return next(index for index, top in enumerate(tree.body) if any(inner is node for inner in ast.walk(top)))


# ------------------------------------------------------------------ the properties


def _check(prompt: str, entry_point: str, code: str, where: str) -> str:
    """Splice and check every property; returns the program."""
    program = splice(prompt, entry_point, code)
    compile(program, where, "exec")
    tree, prompt_tree = ast.parse(program), ast.parse(prompt)
    candidate = ast.parse(code)
    excused = set(unbound_reads(prompt_tree.body)) | set(unbound_reads(candidate.body))
    late = [name for read in unbound_reads(tree.body) if read not in excused for name in [read[1]]]
    assert not late, f"{where}: read before bound: {late}\n{program}"

    dumps = [ast.dump(node) for node in tree.body]
    target_top = entry_point.split(".")[0]
    from_prompt = [ast.dump(node) for node in prompt_tree.body if target_top not in bound_names(node)]
    kept = [dump for dump in dumps if dump in set(from_prompt)]
    assert kept == [dump for dump in from_prompt if dump in set(kept)], f"{where}: prompt order changed"
    origins = {ast.dump(node) for node in [*prompt_tree.body, *candidate.body]}
    invented = [ast.unparse(node) for node, dump in zip(tree.body, dumps, strict=True)
                if dump not in origins and target_top not in bound_names(node)]
    assert not invented, f"{where}: statements from nowhere: {invented}"

    mine = find_definition(candidate, entry_point) or find_definition(candidate, entry_point.split(".")[-1])
    bound = find_definition(tree, entry_point)
    assert bound is not None, where
    if mine is not None:
        assert list(map(ast.dump, bound.body)) == list(map(ast.dump, mine.body)), \
            f"{where}: the reply's target is not the one bound"
        binders = [node for node in tree.body if target_top in bound_names(node)]
        assert any(bound is node or bound in ast.walk(node) for node in binders[-1:]), \
            f"{where}: a later statement rebinds the target"
    assert splice(program, entry_point, code) == program, f"{where}: splicing again changed the program"
    return program


def _spliced(prompt: str, entry_point: str, reply: str) -> tuple[str, str] | None:
    code = extract_code(reply, entry_point)
    try:
        return code, splice(prompt, entry_point, code)
    except SpliceError:
        return None


@pytest.mark.slow
def test_real_replies_splice_with_every_property(subjects: list[tuple[str, str, str]]) -> None:
    checked = 0
    for index, (prompt, entry_point, reply) in enumerate(subjects):
        found = _spliced(prompt, entry_point, reply)
        if found is None:
            continue
        _check(prompt, entry_point, found[0], f"row {index} ({entry_point})")
        checked += 1
    assert checked >= 0.95 * len(subjects)


@pytest.mark.slow
def test_wrapped_real_replies_splice_as_the_plain_reply(subjects: list[tuple[str, str, str]]) -> None:
    """Prose and a fence, a reasoning block with a draft, helpers in a separate block, example
    usage: none of them changes the program."""
    rng = random.Random(SEED)
    compared = 0
    for index, (prompt, entry_point, reply) in enumerate(subjects):
        plain = _spliced(prompt, entry_point, reply)
        if plain is None or not plain[0].strip():
            continue
        code, program = plain
        variants = {"fenced": _fenced(code, rng), "reasoning": _with_reasoning(code, rng),
                    "usage": _fenced(_with_usage(code, entry_point, rng), rng),
                    "helpers apart": _helpers_apart(code, entry_point, rng)}
        for kind, variant in variants.items():
            if variant is None:
                continue
            where = f"row {index} ({entry_point}), {kind}"
            spliced = _check(prompt, entry_point, extract_code(variant, entry_point), where)
            if kind == "helpers apart":  # helpers moved before the target; unused ones left out
                assert set(_statements(spliced)) <= set(_statements(program)), where
                read = {name.id for name in ast.walk(ast.parse(spliced)) if isinstance(name, ast.Name)}
                left_out = [node for node in ast.parse(program).body
                            if ast.dump(node) not in set(_statements(spliced))]
                assert all(isinstance(node, ast.FunctionDef) and node.name not in read for node in left_out), where
            else:
                assert spliced == program, where
            compared += 1
    assert compared > 3 * len(subjects)


def _statements(program: str) -> list[str]:
    return sorted(ast.dump(node) for node in ast.parse(program).body)


@pytest.mark.slow
def test_a_constant_from_a_later_prompt_function_lands_after_it(subjects: list[tuple[str, str, str]]) -> None:
    rng = random.Random(SEED)
    made = 0
    for index, (prompt, entry_point, reply) in enumerate(subjects):
        plain = _spliced(prompt, entry_point, reply)
        if plain is None or not plain[0].strip():
            continue
        changed = _with_constant(prompt, plain[0], entry_point, rng)
        if changed is None:
            continue
        longer_prompt, code, constant = changed
        program = _check(longer_prompt, entry_point, code, f"row {index} ({entry_point}), constant")
        assert re.search(rf"^{constant} = ", program, re.MULTILINE), f"row {index}: {constant} dropped"
        made += 1
    assert made > 0.9 * len(subjects)
