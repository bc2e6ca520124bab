"""From a model reply to a runnable program.

A reply is prose, fenced code, a bare function body or a whole file. `extract_code` finds
the code in it; `splice` puts that code into the task's `prompt_code` in place of the
masked target, working on the syntax tree (never on line numbers or text replacement);
`assemble` does both and prepends the task's context, turning every failure into an
`Assembly` with `error` set so that scoring never sees an exception.
"""

from __future__ import annotations

import ast
import builtins
import functools
import io
import re
import symtable
import textwrap
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from knowbench.benchmark.schema import find_definition
from knowbench.parsing import dotted_name, parse_python
from knowbench.reasoning import after_reasoning

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_OPEN_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*\{?\.?(?P<tag>[\w+#.-]*)\}?[^`]*$")
# A fence opened at the end of a prose line (`Here is the code: ```python`), as small models
# write it: the prose starts at column 0 (an indented line is code's) and holds no backtick,
# the fence nothing after its tag.
_PROSE_THEN_FENCE = re.compile(r"^[^`\s][^`]*?[ \t]*(?P<fence>`{3,})(?P<tag>[\w+#.-]*)[ \t]*$")
_PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3", "ipython", "pycon"})
_MAX_PROSE_LINES = 40  # how many prose lines extract_code may drop at each end
# A method of a class too long for its prompt is posed in a subclass of the installed class,
# `class Cls(_kb_base_Cls)` (knowbench.builders.context.cut_target).
POSED_BASE_PREFIX = "_kb_base_"


class SpliceError(ValueError):
    """The candidate code cannot be put into the prompt; the message says why."""


@dataclass(frozen=True)
class Assembly:
    """A reply turned into a program.

    `code` is what `extract_code` found; `program` is context + the spliced prompt, or None
    when splicing failed, in which case `error` says why (the sample scores as 'error').
    """

    code: str
    program: str | None
    error: str | None


def assemble(context: str, prompt_code: str, entry_point: str, reply: str) -> Assembly:
    """Extract the code in `reply`, splice it into `prompt_code` and prepend `context`.

    Never raises for a bad reply: a reply that cannot be spliced gives `program=None` and
    an `error` message. `from __future__` imports are moved to the top of the program.
    """
    code = extract_code(reply, entry_point)
    try:
        program = _join(context, splice(prompt_code, entry_point, code,
                                        context_names=_context_names(context)))
    except SpliceError as error:
        return Assembly(code=code, program=None, error=str(error))
    return Assembly(code=code, program=program, error=None)


def stubbed_program(context: str, prompt_code: str, entry_point: str) -> str:
    """The benchmark's own program with the target's body a stub: what the trusted side of
    split execution runs (its target becomes a proxy to the candidate's process)."""
    program = assemble(context, prompt_code, entry_point, "raise NotImplementedError").program
    if program is None:
        raise SpliceError(f"the prompt code has no target {entry_point} to stub")
    return program


# ---------------------------------------------------------------------------- extraction


def extract_code(reply: str, entry_point: str) -> str:
    """The code in a model reply; "" when the reply holds none (empty, or prose only).

    A reasoning block that opens the reply (`<think>...</think>`, also `thinking`,
    `reasoning`, any case; see `knowbench.reasoning`) is not the answer: only what follows
    it counts, and a reply cut off inside one holds no code. The same tags elsewhere (in a
    string of the code, in prose about it) are text.
    Fenced blocks win: the last block that defines the entry point's last name component
    with a real body (not a stub: only a docstring, `...`, `pass`, `raise
    NotImplementedError`; nor an excerpt, real lines between `...` statements, where a whole
    one exists), else the last that defines it at all, else the largest block that
    parses, else the first block (a final fence cut off by a
    token limit still counts); a fence line inside a triple-quoted string does not end a
    block (a docstring with a fenced example) when the block then parses, and a reply that
    parses as Python as it is holds no fenced block (its fence lines are in its strings). The chosen block
    gets the other blocks that parse and define names it uses (helpers shown separately),
    in reply order. Without fences: the reply itself when it parses (dedented when it is an
    indented body), else the reply less its leading prose lines and the fewest trailing
    unindented lines that make it parse (indented lines are never dropped, so broken code
    is not cut into valid code), else the stripped reply. Text with no line that looks like
    Python (`Sure`, `I cannot do that.`) is prose: "". A block or reply that does not parse
    loses its last top-level statements where what remains parses and defines the entry point
    (a demo cut off by the token limit after the answer).
    """
    answer = _answer(reply)
    if not answer.strip():
        return ""
    blocks = _fenced_blocks(answer)
    # A reply that parses as Python has its fence lines inside its strings (a docstring's
    # fenced example): they are the code's, not the reply's.
    parsed = _parse_code(answer) if blocks else None
    if blocks and parsed is None:
        code = _choose_block(blocks, entry_point.rsplit(".", 1)[-1])
    else:
        parsed = parsed or _parse_code(answer) or _without_broken_tail(answer, entry_point.rsplit(".", 1)[-1])
        trimmed = parsed[0] if parsed is not None else _trim_prose(answer)
        code = trimmed if trimmed is not None else answer.strip()
    return code if _holds_code(code) else ""


def _answer(reply: str) -> str:
    """The reply after its leading reasoning block (`knowbench.reasoning`), or "" when the
    block never closes, less the end-of-turn tokens a server left at its end (`<|im_end|>`,
    `</s>`: a closing fence they follow still closes)."""
    answer = after_reasoning(reply)
    return "" if answer is None else _END_TOKENS.sub("", answer)


# Special tokens that end a model's turn, left in a reply by some servers.
_END_TOKENS = re.compile(r"(?:\s*(?:<\|(?:im_end|endoftext|eot_id|end|eos|end_of_turn)\|>|</s>|<eos>|<end_of_turn>))+\s*\Z")


def _holds_code(text: str) -> bool:
    """Whether `text` is code rather than prose: it parses to something more than bare
    names and constants, or (broken code) one of its lines looks like Python."""
    found = _parse_code(text)
    if found is not None:
        return any(not _is_bare_value(node) for node in found[1].body)
    return any(_looks_like_code(line) for line in text.splitlines())


def _is_bare_value(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Name | ast.Constant | ast.Attribute)


_STATEMENT_START = re.compile(
    r"(def|class|import|from|return|raise|assert|async|await|lambda|yield|elif|else|except|finally|"
    r"try|while|for|with|if|del|global|nonlocal)\b.*[(\[{:=]|@\w")


def _looks_like_code(line: str) -> bool:
    """A line that parses as a statement (or as a block header such as `def f(x):`), or
    starts like one and holds brackets or a colon (`def f(:`, broken but code)."""
    stripped = line.strip()
    if not stripped:
        return False
    for candidate in (stripped, stripped + "\n    pass"):
        try:
            tree = parse_python(candidate)
        except (SyntaxError, ValueError, RecursionError):
            continue
        return not all(_is_bare_value(node) for node in tree.body)
    return _STATEMENT_START.match(stripped) is not None


def _fenced_blocks(reply: str) -> list[str]:
    """The contents of the Python (or untagged) fenced blocks, or of all blocks if none."""
    python: list[str] = []
    other: list[str] = []
    for tag, content in _all_fenced_blocks(reply):
        (python if tag.lower() in _PYTHON_TAGS else other).append(content)
    return python or other


def _all_fenced_blocks(reply: str) -> Iterator[tuple[str, str]]:
    """(tag, content) for each fenced block; an unterminated last block runs to the end.

    In a Python (or untagged) block, a closing fence inside a triple-quoted string is
    content when the block so closed parses; otherwise the first closing fence ends it."""
    lines = reply.splitlines()
    index = 0
    while index < len(lines):
        opening = _OPEN_FENCE.match(lines[index])
        if opening is None:  # a fence after prose, unless a fence of its own follows
            after_prose = _PROSE_THEN_FENCE.match(lines[index])
            if after_prose and not _OPEN_FENCE.match(next((line for line in lines[index + 1:] if line.strip()), "")):
                opening = after_prose
        index += 1
        if opening is None:
            continue
        fence, tag = opening["fence"], opening["tag"]
        body, after = _block(lines, index, fence, skip_strings=False)
        if tag.lower() in _PYTHON_TAGS:
            aware, aware_after = _block(lines, index, fence, skip_strings=True)
            if aware_after != after and _parse_code("\n".join(aware)) is not None:
                body, after = aware, aware_after
        index = after
        yield tag, "\n".join(body)


def _block(lines: list[str], start: int, fence: str, skip_strings: bool) -> tuple[list[str], int]:
    """The lines of a block from `start` to its closing fence, and the index after that
    fence; with `skip_strings`, a fence inside a triple-quoted string does not close."""
    body: list[str] = []
    index = start
    while index < len(lines):
        line = lines[index]
        index += 1
        stripped = line.rstrip()
        closes = stripped.lstrip().startswith(fence[0] * 3) and set(stripped.strip()) == {fence[0]}
        inline = not closes and fence[0] == "`" and stripped.endswith(fence)  # code```  closes inline
        content = [*body, stripped[: -len(fence)]] if inline else body
        if (closes or inline) and not (skip_strings and _inside_string(content)):
            return content, index
        body.append(line)
    return body, index


def _inside_string(lines: list[str]) -> bool:
    """Whether code ending with `lines` is inside an unterminated triple-quoted string."""
    text = textwrap.dedent("\n".join(lines)) + "\n"
    try:
        for _ in tokenize.generate_tokens(io.StringIO(text).readline):
            pass
    except tokenize.TokenError as error:
        return "string" in str(error.args[0])
    except (SyntaxError, ValueError):
        return False
    return False


def _choose_block(blocks: list[str], name: str) -> str:
    parsed = [found for found in (_parse_code(block) or _without_broken_tail(block, name) for block in blocks)
              if found is not None]
    defining = [index for index, (_, tree) in enumerate(parsed) if _defines(tree, name)]
    real = [index for index in defining if _defines(parsed[index][1], name, with_body=True)]
    # an excerpt of the answer shown after it (`...` standing for the lines left out) is not it
    whole = [index for index in real if not _elided(parsed[index][1], name)]
    if real or defining:
        return _with_helper_blocks(parsed, (whole or real or defining)[-1])
    parsing = [index for index, (text, _) in enumerate(parsed) if text.strip()]
    if parsing:
        return _with_helper_blocks(parsed, max(parsing, key=lambda index: len(parsed[index][0])))
    return textwrap.dedent(blocks[0]).strip("\n")


def _with_helper_blocks(parsed: list[tuple[str, ast.Module]], chosen: int) -> str:
    """The chosen block and, in reply order, every other block that binds at top level a
    name the blocks taken so far read without binding."""
    taken = {chosen}
    growing = True
    while growing:
        growing = False
        wanted = set().union(*(_free_names(parsed[index][1]) for index in taken))
        for index, (_, tree) in enumerate(parsed):
            if index not in taken and _defined_names(tree.body) & wanted:
                taken.add(index)
                growing = True
    return "\n\n\n".join(parsed[index][0] for index in sorted(taken))


def _free_names(tree: ast.Module) -> set[str]:
    """Names `tree` reads and binds nowhere (roughly: any scope counts as binding)."""
    loaded = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    stored = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)}
    stored |= {node.name for node in ast.walk(tree) if isinstance(node, _DefinitionNode)}
    stored |= {arg.arg for node in ast.walk(tree) if isinstance(node, ast.arguments)
               for arg in [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg] if arg}
    return loaded - stored - _defined_names(tree.body)


def _defines(tree: ast.Module, name: str, with_body: bool = False) -> bool:
    """Whether `tree` defines a function `name` (with `with_body`, one that is no stub)."""
    return any(isinstance(node, _FunctionNode) and node.name == name
               and not (with_body and _is_stub(node)) for node in ast.walk(tree))


def _elided(tree: ast.Module, name: str) -> bool:
    """Whether every definition of `name` in `tree` leaves lines out: a `...` statement in
    its own body among real ones (`y += 1` between two `...`), an excerpt rather than the
    code. (A `...` deeper in, `except TypeError: ...`, is a no-op the code means.)"""
    definitions = [node for node in ast.walk(tree) if isinstance(node, _FunctionNode) and node.name == name]
    return bool(definitions) and all(
        any(isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and statement.value.value is ... for statement in definition.body) for definition in definitions)


def _is_stub(node: ast.stmt) -> bool:
    """A function whose body holds nothing but a docstring, `...`, `pass` or
    `raise NotImplementedError`: a signature shown, not an implementation."""
    if not isinstance(node, _FunctionNode):
        return False
    for statement in node.body:
        if isinstance(statement, ast.Pass):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
                and (statement.value.value is ... or isinstance(statement.value.value, str)):
            continue
        raised = statement.exc if isinstance(statement, ast.Raise) else None
        raised = raised.func if isinstance(raised, ast.Call) else raised
        if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
            continue
        return False
    return True


def _without_broken_tail(code: str, name: str) -> tuple[str, ast.Module] | None:
    """`code` that does not parse, less its last top-level statements (each from a line at
    column 0 to the end), when what remains parses and defines `name` with a real body: a
    reply cut off by the token limit in the demo after its answer (`if __name__ ==
    "__main__":` then `print(f(`), or ending in a broken usage line. The answer itself is
    never cut: what is dropped follows its complete definition, and a cut-off later version of
    it (`def name` again) is never dropped to let the earlier one run."""
    lines = textwrap.dedent(code).strip("\n").splitlines()
    starts = [index for index, line in enumerate(lines)
              if index and line.strip() and not line[0].isspace() and not line.startswith("#")]
    redefines = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\b")
    for start in reversed(starts[-8:]):
        if any(redefines.match(line) for line in lines[start:]):
            break  # a later version of the answer, cut off: it replaces the earlier one
        found = _parse_code("\n".join(lines[:start]))
        if found is not None and _defines(found[1], name, with_body=True):
            return found
    return None


def _trim_prose(reply: str) -> str | None:
    """The reply without the leading prose lines (those invalid from their first line on)
    and the fewest trailing ones that make it parse; only blank or unindented lines drop."""
    lines = reply.splitlines()
    max_head = min(_count_droppable(lines), _MAX_PROSE_LINES)
    max_tail = min(_count_droppable(lines[::-1]), _MAX_PROSE_LINES)
    for head in range(max_head + 1):
        rest = lines[head:]
        if _fails_on_first_line("\n".join(rest)):
            continue
        for tail in range(0 if head else 1, max_tail + 1):
            kept = "\n".join(rest[: len(rest) - tail])
            if not kept.strip():
                break
            found = _parse_code(kept)
            if found is not None:
                return found[0]
    return None


def _fails_on_first_line(text: str) -> bool:
    """Whether `text` is invalid already on its first line, whatever follows."""
    try:
        parse_python(text.strip("\n"))
    except SyntaxError as error:
        return error.lineno == 1 and not text.strip("\n")[:1].isspace()
    except (ValueError, RecursionError):
        return False
    return False


def _count_droppable(lines: list[str]) -> int:
    """How many leading lines look like prose: blank, or starting at column 0."""
    count = 0
    for line in lines:
        if line.strip() and line[0].isspace():
            break
        count += 1
    return count


def _parse_code(text: str) -> tuple[str, ast.Module] | None:
    """(normalised text, tree) for code that parses as it is, dedented, or as a body whose
    first line lost its indentation; None when none of these parses."""
    for candidate in _normalisations(text):
        try:
            return candidate, parse_python(candidate)
        except (SyntaxError, ValueError, RecursionError):
            continue
    return None


def _normalisations(text: str) -> Iterator[str]:
    stripped = text.strip("\n")
    yield stripped
    dedented = textwrap.dedent(stripped)
    if dedented != stripped:
        yield dedented
    first, _, rest = stripped.partition("\n")
    indents = [len(line) - len(line.lstrip()) for line in rest.splitlines() if line.strip()]
    if first and not first[0].isspace() and indents and min(indents) > 0:
        yield textwrap.dedent(" " * min(indents) + first + "\n" + rest)


# ------------------------------------------------------------------------------ splicing


def splice(prompt_code: str, entry_point: str, code: str,
           context_names: frozenset[str] = frozenset()) -> str:
    """`prompt_code` with the target `entry_point` completed by `code`, as `ast.unparse` text.

    When `code` defines the target (a top-level def of the name, `class Cls` holding the
    method, or a bare def of a method's name) its definition replaces the target (keeping
    the prompt's decorators if it has none), its top-level imports go to the module top
    once each, and the other top-level statements its program needs (`_kept_statements`)
    go in program order: those written before its definition just before the target's
    top-level statement, the others just after it, each then moved forward past the
    prompt's bindings of the names it reads while the module runs (`_settle`). Otherwise
    `code` is the target's body (the prompt's docstring is kept when `code` has none).
    `context_names` are the functions and classes the task's context defines: a stub of one
    of them in `code` (`def unit(): pass`, written to show what the code calls) is dropped,
    so that it does not shadow the context's real definition. A no-op that replaces a value
    or an import of the context (`log = None`) stays.
    Empty `code` returns `prompt_code` unchanged; splicing the result again with the same
    `code` returns it unchanged.
    Raises `SpliceError` when the target is missing or `code` does not parse.
    """
    if not code.strip():
        return prompt_code
    tree = _parse_prompt(prompt_code)
    target = find_definition(tree, entry_point)
    if target is None:
        raise SpliceError(f"the prompt defines no function '{entry_point}'")
    found = _parse_code(code)
    if found is None:
        raise SpliceError(f"the candidate code does not parse: {_syntax_message(code)}")
    candidate = found[1]
    definition = _candidate_definition(candidate, entry_point)
    if definition is None:
        _replace_body(target, candidate.body)
    else:
        _replace_definition(tree, entry_point, target, definition, candidate, context_names)
    _unpose_super(tree)
    return ast.unparse(ast.fix_missing_locations(tree))


def _unpose_super(tree: ast.Module) -> None:
    """In a posed class (`class Cls(_kb_base_Cls)`, `POSED_BASE_PREFIX`), `super()` and
    `super(Cls, x)` in its methods become `super(_kb_base_Cls, x)`: in the library they look
    past the class they were written in, so here they look past the installed class, not into
    it (where its own version of the method would run)."""
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and len(node.bases) == 1 and isinstance(node.bases[0], ast.Name)
                and node.bases[0].id == POSED_BASE_PREFIX + node.name):
            continue
        for method in node.body:
            if not isinstance(method, _FunctionNode):
                continue
            arguments = method.args.posonlyargs + method.args.args
            first = arguments[0].arg if arguments else None
            for call in _own_calls(method):
                if not (isinstance(call.func, ast.Name) and call.func.id == "super" and not call.keywords):
                    continue
                if not call.args and first is not None:
                    call.args = [ast.Name(node.bases[0].id, ast.Load()), ast.Name(first, ast.Load())]
                elif len(call.args) == 2 and isinstance(call.args[0], ast.Name) and call.args[0].id == node.name:
                    call.args[0] = ast.Name(node.bases[0].id, ast.Load())


def _own_calls(function: _FunctionNode) -> Iterator[ast.Call]:
    """The calls in `function`'s own body (and its lambdas and comprehensions), not in the
    functions or classes it defines: their `super()` is theirs."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            yield node
        if not isinstance(node, _FunctionNode | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def _parse_prompt(prompt_code: str) -> ast.Module:
    try:
        return parse_python(prompt_code)
    except SyntaxError as error:
        raise SpliceError(f"the prompt does not parse: {error.msg} (line {error.lineno})") from None
    except (ValueError, RecursionError) as error:
        raise SpliceError(f"the prompt does not parse: {error}") from None


def _syntax_message(code: str) -> str:
    try:
        parse_python(textwrap.dedent(code))
    except SyntaxError as error:
        return f"{error.msg} (line {error.lineno})"
    except ValueError as error:
        return str(error)
    return "unknown error"


def _candidate_definition(candidate: ast.Module, entry_point: str) -> _FunctionNode | None:
    """The candidate's own definition of the target, if it has one."""
    found = find_definition(candidate, entry_point)
    if found is not None or "." not in entry_point:
        return found
    return find_definition(candidate, entry_point.rsplit(".", 1)[-1])


def _replace_body(target: _FunctionNode, body: list[ast.stmt]) -> None:
    if _docstring(target.body) is not None and _docstring(body) is None:
        body = [target.body[0], *body]
    target.body = body or [ast.Expr(ast.Constant(...))]


def _docstring(body: list[ast.stmt]) -> ast.Expr | None:
    first = body[0] if body else None
    if not isinstance(first, ast.Expr) or not isinstance(first.value, ast.Constant):
        return None
    return first if isinstance(first.value.value, str) else None


def _replace_definition(tree: ast.Module, entry_point: str, target: _FunctionNode,
                        definition: _FunctionNode, candidate: ast.Module,
                        context_names: frozenset[str]) -> None:
    if not definition.decorator_list:
        definition.decorator_list = target.decorator_list
    container = _container(tree, entry_point)
    container[_index_of(container, target)] = definition
    carried_members = _carry_methods(tree, entry_point, definition, candidate) if "." in entry_point else []
    top = _top_statement(tree, entry_point)
    own_top = next(node for node in candidate.body if any(inner is definition for inner in ast.walk(node)))
    kept = _kept_statements(tree, candidate, entry_point, own_top, [definition, *carried_members],
                            context_names)
    before = [node for node in kept if _index_of(candidate.body, node) < _index_of(candidate.body, own_top)]
    after = [node for node in kept if not any(node is other for other in before)]
    index = _index_of(tree.body, top)
    tree.body[index:index + 1] = [*before, top, *after]
    if kept:
        _settle(tree.body, kept)
    _carry_imports(tree, candidate)


def _container(tree: ast.Module, entry_point: str) -> list[ast.stmt]:
    """The statement list that holds the target: the module body or its class's body."""
    body: list[ast.stmt] = tree.body
    for owner in entry_point.split(".")[:-1]:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == owner).body
    return body


def _index_of(body: list[ast.stmt], node: ast.stmt) -> int:
    return next(index for index, item in enumerate(body) if item is node)


def _top_statement(tree: ast.Module, entry_point: str) -> ast.stmt:
    """The target's top-level statement: its def, or the outermost class around it."""
    first = entry_point.split(".")[0]
    if "." in entry_point:
        return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == first)
    return next(n for n in reversed(tree.body) if isinstance(n, _FunctionNode) and n.name == first)


def _carry_methods(tree: ast.Module, entry_point: str, definition: _FunctionNode,
                   candidate: ast.Module) -> list[ast.stmt]:
    """Put the candidate class's new methods and attributes just before the target method;
    returns them."""
    owners = entry_point.split(".")[:-1]
    candidate_class = _find_class(candidate.body, owners)
    container = _container(tree, entry_point)
    known = _defined_names(container)
    if candidate_class is None:
        if not any(node is definition for node in candidate.body):
            return []
        # the method written as a bare def: so are the other methods it brings (a first
        # parameter `self`, or a `classmethod`/`staticmethod`/`property`), not module functions
        called = {node.id for node in ast.walk(candidate) if isinstance(node, ast.Name)}  # (`helper(self)`)
        extra = [node for node in candidate.body if node is not definition and _bare_method(node)
                 and node.name not in called and not (_bound_names(node) & known)]  # type: ignore[union-attr]
    else:
        extra = [node for node in candidate_class.body
                 if node is not definition and _is_member(node) and not (_bound_names(node) & known)]
    index = _index_of(container, definition)
    container[index:index] = extra
    return extra


def _bare_method(node: ast.stmt) -> bool:
    """A top-level def that is a method by its shape: its first parameter is `self`, or it
    is decorated `classmethod`, `staticmethod` or `property`."""
    if not isinstance(node, _FunctionNode):
        return False
    decorators = {(d.id if isinstance(d, ast.Name) else getattr(d, "attr", "")) for d in node.decorator_list}
    if decorators & {"classmethod", "staticmethod", "property"}:
        return True
    arguments = [*node.args.posonlyargs, *node.args.args]
    return bool(arguments) and arguments[0].arg == "self"


def _find_class(body: list[ast.stmt], owners: list[str]) -> ast.ClassDef | None:
    found: ast.ClassDef | None = None
    for owner in owners:
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        if found is None:
            return None
        body = found.body
    return found


def _is_member(node: ast.stmt) -> bool:
    """A class-body statement worth carrying: a method, nested class or attribute."""
    member_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    return isinstance(node, member_types) and bool(_bound_names(node))


def _kept_statements(tree: ast.Module, candidate: ast.Module, entry_point: str, own_top: ast.stmt,
                     roots: list[ast.stmt], context_names: frozenset[str]) -> list[ast.stmt]:
    """The candidate's other top-level statements that belong to its program, in its order.

    Imports are handled apart. Statements that rebind a name the prompt binds are dropped
    (the prompt's definitions stay), as are stubs of functions the context defines and the
    `__main__` block. New functions and classes
    are kept; any other statement is kept when kept code needs it: it binds a name kept code
    or the prompt reads (a constant, an import fallback), changes an object bound by kept statements
    (`REGISTRY[key] = f`, `REGISTRY.add(f)`), or passes a kept definition to a call
    (`atexit.register(f)`). What is left is example usage (`print(f(2))`, `out = f(2)`).
    """
    prompt_names = _defined_names(tree.body) | {entry_point.split(".")[0]}
    pool = [node for node in candidate.body
            if node is not own_top and not any(node is root for root in roots)  # (bare methods carried)
            and not isinstance(node, ast.Import | ast.ImportFrom)
            and not _is_main_guard(node) and _docstring([node]) is None
            and not (_bound_names(node) & prompt_names)
            and not (_is_stub(node) and _bound_names(node) & context_names)]
    kept = [node for node in pool if isinstance(node, _DefinitionNode) or _sets_the_interpreter(node)]
    if len(kept) == len(pool):  # nothing to decide (most replies): spare the scope analysis
        return kept
    lacking = _global_reads(tree) - prompt_names  # the prompt reads, never binds
    needed = set().union(lacking, *map(_global_reads, [*roots, *kept]))
    owned = _defined_names(kept) | {entry_point.split(".")[0]}
    growing = True
    while growing:
        growing = False
        for node in pool:
            if any(node is other for other in kept):
                continue
            bound = _bound_names(node)
            if bound & needed or (not bound and _acts_on(node, owned)):
                kept.append(node)
                needed |= _global_reads(node)
                owned |= bound
                growing = True
    return [node for node in pool if any(node is other for other in kept)]


_DefinitionNode = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Calls that set the interpreter up for the code rather than use it: kept where they stand.
_SETTINGS = frozenset({"sys.setrecursionlimit", "sys.set_int_max_str_digits", "threading.stack_size",
                       "setrecursionlimit", "set_int_max_str_digits", "decimal.setcontext", "setcontext"})


def _sets_the_interpreter(node: ast.stmt) -> bool:
    """`sys.setrecursionlimit(10**6)`, `threading.stack_size(...)`, `getcontext().prec = 50`:
    a module-level statement a program's code relies on, not example usage."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return dotted_name(node.value.func) in _SETTINGS
    if isinstance(node, ast.Assign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return all(isinstance(target, ast.Attribute) and isinstance(target.value, ast.Call)
                   and dotted_name(target.value.func) in ("getcontext", "decimal.getcontext") for target in targets)
    return False


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test)


def _acts_on(node: ast.stmt, owned: set[str]) -> bool:
    """Whether a statement that binds nothing uses a kept name other than by calling it:
    it changes a kept object (`REGISTRY[key] = f`, `REGISTRY.add(f)`) or hands a kept
    definition over (`atexit.register(f)`). Calling (`print(f(2))`) is example usage."""
    callees = {id(call.func) for call in ast.walk(node) if isinstance(call, ast.Call)}
    return any(isinstance(name, ast.Name) and name.id in owned and id(name) not in callees
               for name in ast.walk(node))


def _settle(body: list[ast.stmt], carried: list[ast.stmt]) -> None:
    """Move each carried statement just after the statements that bind what it reads while
    the module runs, when they came later; never past a statement that reads a name it binds.
    Only carried statements move, and only forward, so the prompt's order is kept."""
    binds = {id(node): _bound_names(node) for node in body}
    reads: dict[int, set[str]] = {}  # filled as needed: the scope analysis is the cost here

    def reads_of(node: ast.stmt) -> set[str]:
        if id(node) not in reads:
            reads[id(node)] = _import_time_reads(node)
        return reads[id(node)]

    moving = {id(node) for node in carried}
    for _ in range(len(body) * max(1, len(carried))):
        if not _move_one(body, moving, binds, reads_of):
            return


def _move_one(body: list[ast.stmt], moving: set[int], binds: dict[int, set[str]],
              reads_of: Callable[[ast.stmt], set[str]]) -> bool:
    """Move the first carried statement that reads a name bound only later; False if none."""
    bound = set(_BUILTIN_NAMES)
    for index, node in enumerate(body):
        if _is_star_import(node):
            return False
        names = binds[id(node)]
        missing = reads_of(node) - bound - names if id(node) in moving else set()
        firsts = [next((later for later in range(index + 1, len(body)) if name in binds[id(body[later])]), None)
                  for name in missing]
        last = max((later for later in firsts if later is not None), default=None)
        if last is not None and not any(reads_of(body[between]) & names for between in range(index + 1, last + 1)):
            body.insert(last, body.pop(index))
            return True
        bound |= names
    return False


def _is_star_import(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)


_BUILTIN_NAMES = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__loader__",
                                             "__package__", "__builtins__", "__path__", "__annotations__"}
_COMPREHENSIONS = frozenset({"listcomp", "setcomp", "dictcomp", "genexpr"})


def _symbols(node: ast.AST) -> symtable.SymbolTable | None:
    try:
        return symtable.symtable(ast.unparse(node), "<candidate>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None


def _bound_names(node: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds (empty for statements that bind none)."""
    if isinstance(node, _DefinitionNode):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*"}
    table = _symbols(node)
    if table is None:
        return set()
    return {symbol.get_name() for symbol in table.get_symbols()
            if symbol.is_assigned() or symbol.is_imported()}


def _global_reads(node: ast.stmt | ast.Module) -> set[str]:
    """The module-level names a statement (or module) reads, now or when its functions are called."""
    table = _symbols(node)
    if table is None:
        return {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}
    return _reads(table, lambda child: True)


def _import_time_reads(node: ast.stmt) -> set[str]:
    """The module-level names a statement reads while the module runs (decorators, default
    values, class bodies, comprehensions; not the bodies of functions and lambdas)."""
    table = _symbols(node)
    if table is None:
        return set()
    return _reads(table, lambda child: child.get_type() == "class"
                  or child.get_name().strip("<>") in _COMPREHENSIONS)


def _reads(table: symtable.SymbolTable, followed: Callable[[symtable.SymbolTable], bool]) -> set[str]:
    names: set[str] = set()
    pending = [table]
    while pending:
        scope = pending.pop()
        top = scope is table
        names |= {symbol.get_name() for symbol in scope.get_symbols()
                  if symbol.is_referenced() and (top or symbol.is_global())}
        pending += [child for child in scope.get_children() if followed(child)]
    return names


def _defined_names(body: list[ast.stmt]) -> set[str]:
    return {name for node in body for name in _bound_names(node)}


def _carry_imports(tree: ast.Module, candidate: ast.Module) -> None:
    """Add the candidate's top-level imports the prompt lacks at the module top."""
    present = {ast.dump(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)}
    imports = []
    for node in candidate.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and ast.dump(node) not in present:
            imports.append(node)
            present.add(ast.dump(node))
    futures = [node for node in imports if _is_future(node)]
    others = [node for node in imports if not _is_future(node)]
    start = 1 if _docstring(tree.body) is not None else 0
    tree.body[start:start] = futures
    after_futures = start + len(futures)
    while after_futures < len(tree.body) and _is_future(tree.body[after_futures]):
        after_futures += 1
    tree.body[after_futures:after_futures] = others


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


@functools.lru_cache(maxsize=16)  # the samples of a task share its context
def _context_names(context: str) -> frozenset[str]:
    """The functions and classes the context defines at top level; none when it does not
    parse. Names it binds otherwise (`log = None`, an import) are placeholders a reply may
    mean to replace, even with a no-op."""
    try:
        body = parse_python(context).body if context.strip() else []
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    return frozenset(node.name for node in body
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))


def _join(context: str, spliced: str) -> str:
    """context + spliced, with every `from __future__` import hoisted to the very top.

    Raises `SpliceError` when the hoisting needs to parse a context that does not parse.
    """
    if not context.strip():
        return spliced
    spliced_tree = parse_python(spliced)
    if not any(_is_future(node) for node in spliced_tree.body):
        return context + "\n\n" + spliced
    try:
        context_tree = parse_python(context)
    except (SyntaxError, ValueError) as error:
        raise SpliceError(f"the context does not parse: {error}") from None
    futures: list[ast.stmt] = []
    for node in [*context_tree.body, *spliced_tree.body]:
        if _is_future(node) and ast.dump(node) not in {ast.dump(f) for f in futures}:
            futures.append(node)
    rest = [ast.Module([n for n in t.body if not _is_future(n)], []) for t in (context_tree, spliced_tree)]
    return "\n\n".join(ast.unparse(part) for part in (ast.Module(futures, []), *rest))
