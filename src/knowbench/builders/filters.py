"""Static filters on mined targets and tests: size, significance and banned operations.

Each filter answers with a reason (a short slug that the build report counts) or None.
Execution-based filters (the reference runs, its suite passes and exercises it, stubs fail)
live in `knowbench.builders.certify`.
"""

from __future__ import annotations

import ast
import io
import tokenize

from knowbench.builders.repository import decorator_name
from knowbench.parsing import parse_python

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

MIN_LINES = 3
MAX_LINES = 100

# DomainEval's screening list (appendix, Table 2), kept as the starting point. Fixed: three
# entries were written with curly quotes (’kill’), which no Python code contains, so they
# could never match; they now use straight quotes. Added: process spawning and network
# access, which DomainEval relied on its (disabled) sandbox guard to stop.
DOMAINEVAL_BANNED = (
    "os.kill", "terminate", "subprocess.call(['kill',", "subprocess.call(['rm',",
    "subprocess.call(['rmdir',", 'subprocess.call(["kill",', 'subprocess.call(["rm",',
    'subprocess.call(["rmdir",', "sys.exit", "os.unlink", ".unlink", ".rmdir", "os.remove",
    "os.removedirs", "os.rmdir", "os.system", "rmtree", "send2trash", "open(", ".read(", ".write(",
    ".load(", ".dump(", "shutil.", "glob.", "os.path.", "os.remove(", "os.rename(", "os.rmdir(",
    "os.mkdir(", "os.makedirs(", "os.listdir(", ".readlines(", ".writelines(", ".seek(", ".tell(",
)
ADDED_BANNED = (
    "subprocess.", "os.popen", "os.fork", "os.exec", "os.spawn", "pty.", "socket.", "urlopen(",
    "urllib.request", "http.client", "requests.", "ftplib", "smtplib", "webbrowser", "ctypes.",
)
BANNED_KEYWORDS = DOMAINEVAL_BANNED + ADDED_BANNED

_CONSTRUCTORS = frozenset({"__init__", "__new__", "__post_init__", "__init_subclass__", "__del__"})
_GETTER_DECORATORS = ("property", "cached_property", "functools.cached_property", "abstractproperty")


def banned_keywords(code: str, keywords: tuple[str, ...] = BANNED_KEYWORDS) -> list[str]:
    """The banned keywords `code` really uses (comments, docstrings and strings do not count).

    DomainEval matched its list as substrings, so `empty.copy()` held `pty.` and
    `self.websocket.send` held `socket.`. Here each keyword is read as what it names and
    matched against the names, attribute chains and calls of the code's AST, with imports
    resolved (`from subprocess import run; run(...)` is `subprocess.run`, `import shutil as
    sh; sh.copy` is `shutil.copy`):

    - `mod.` (`shutil.`, `os.path.`, `socket.`): any use of something in that module;
    - `mod.name` (`os.kill`, `os.exec`, `sys.exit`): a dotted name starting so (`os.execv`);
    - `name(` / `mod.name(` (`open(`, `urlopen(`, `os.remove(`): a call of that function or
      of a method of that name (`io.open(`, `path.open(`);
    - `.name(` / `.name` (`.read(`, `.unlink`): a method call / attribute of that name;
    - `mod.f(['arg',` (`subprocess.call(['rm',`): that call with a list starting with 'arg';
    - a bare word (`terminate`, `rmtree`, `smtplib`): a name, attribute or module so named.

    Code that does not parse is matched as DomainEval did, as substrings, against the code
    without comments and docstrings and its normalised form.
    """
    try:
        uses = _Uses(parse_python(code))
    except (SyntaxError, ValueError, RecursionError):
        forms = {_without_comments(_without_docstrings(code)), _normalised(code)}
        return [keyword for keyword in keywords if any(keyword in form for form in forms)]
    return [keyword for keyword in keywords if uses.matches(keyword)]


class _Uses:
    """The dotted names (imports resolved), attribute names and calls of a module's code."""

    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        self.dotted: set[str] = set()  # every name and attribute chain, resolved, and every import
        self.called: set[str] = set()  # resolved dotted names of called chains
        self.attributes: set[str] = set()  # attribute names, on any object
        self.called_attributes: set[str] = set()
        self.words: set[str] = set()  # every identifier and dotted part
        self.list_calls: set[tuple[str, str]] = set()  # (called, first string of its list argument)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    full = alias.name if isinstance(node, ast.Import) or not node.module else \
                        f"{node.module}.{alias.name}"
                    self.dotted.add(full)
                    self.words |= set(full.split("."))
            elif isinstance(node, ast.Attribute):
                self.attributes.add(node.attr)
                self.words.add(node.attr)
            elif isinstance(node, ast.Name):
                self.words.add(node.id)
            if isinstance(node, ast.Attribute | ast.Name):
                chain = self._chain(node)
                if chain:
                    self.dotted.add(chain)
                    self.words |= set(chain.split("."))
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Attribute):
                    self.called_attributes.add(node.func.attr)
                chain = self._chain(node.func)
                if chain:
                    self.called.add(chain)
                    first = node.args[0] if node.args else None
                    if isinstance(first, ast.List | ast.Tuple) and first.elts and \
                            isinstance(first.elts[0], ast.Constant) and isinstance(first.elts[0].value, str):
                        self.list_calls.add((chain, first.elts[0].value))

    def _chain(self, node: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.insert(0, self.aliases.get(node.id, node.id))
        return ".".join(parts)

    def matches(self, keyword: str) -> bool:
        if "([" in keyword:  # subprocess.call(['rm',
            called, _, rest = keyword.partition("([")
            argument = rest.strip(" ,").strip("'\"")
            return (called, argument) in self.list_calls
        if keyword.endswith("("):
            name = keyword[:-1]
            if name.startswith("."):
                return name[1:] in self.called_attributes
            if "." in name:
                return name in self.called
            return any(chain.rsplit(".", 1)[-1] == name for chain in self.called)
        if keyword.startswith("."):
            return keyword[1:] in self.attributes
        if keyword.endswith("."):
            return any(chain.startswith(keyword) for chain in self.dotted)
        if "." in keyword:
            return any(chain.startswith(keyword) for chain in self.dotted)
        return keyword in self.words


def _without_docstrings(code: str) -> str:
    try:
        tree = parse_python(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, _FunctionNode | ast.ClassDef | ast.Module) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) and \
                isinstance(node.body[0].value.value, str):
            spans.append(node.body[0])
    for docstring in sorted(spans, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        assert docstring.end_lineno is not None and docstring.end_col_offset is not None
        start, end = docstring.lineno - 1, docstring.end_lineno - 1
        head = lines[start][: _char_offset(lines[start], docstring.col_offset)]
        tail = lines[end][_char_offset(lines[end], docstring.end_col_offset):]
        lines[start: end + 1] = [head + '""' + tail]
    return "".join(lines)


def _char_offset(line: str, byte_offset: int) -> int:
    """ast's column offsets count UTF-8 bytes; slicing needs characters."""
    return len(line.encode()[:byte_offset].decode(errors="ignore"))


def _without_comments(code: str) -> str:
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(tokens)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code


def _normalised(code: str) -> str:
    try:
        tree = parse_python(code)
    except SyntaxError:
        return code
    for node in ast.walk(tree):
        if isinstance(node, _FunctionNode | ast.ClassDef | ast.Module) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) and \
                isinstance(node.body[0].value.value, str):
            node.body[0] = ast.Pass()
    return ast.unparse(tree)


def size_reason(body_lines: int, minimum: int = MIN_LINES, maximum: int = MAX_LINES) -> str | None:
    """'too-short' / 'too-long' when the body (docstring, blanks and comments excluded) is
    outside [minimum, maximum] lines."""
    if body_lines < minimum:
        return "too-short"
    if body_lines > maximum:
        return "too-long"
    return None


def triviality_reason(node: _FunctionNode, context_names: set[str] | frozenset[str] = frozenset()) -> str | None:
    """Why a definition is not worth a task: a constructor, a property getter, a pure
    delegation to another callable, a body that only combines calls of names the context
    supplies (`context_names`: `return helper_a(x) or helper_b(x)`), or an abstract stub.
    None when it is significant."""
    if node.name in _CONSTRUCTORS:
        return "trivial-constructor"
    names = [decorator_name(d) for d in node.decorator_list]
    if any(name.endswith(("abstractmethod", "abstractproperty", "overload")) for name in names):
        return "trivial-abstract"
    body = node.body[1:] if _has_docstring(node) else node.body
    if any(name in _GETTER_DECORATORS or name.endswith(".getter") for name in names) and len(body) <= 1:
        return "trivial-property"  # a one-statement getter; one that computes is a method like others
    if not body or all(_is_stub_statement(s) for s in body):
        return "trivial-abstract"
    if len(body) == 1 and _is_delegation(body[0], node):
        return "trivial-delegation"
    if len(body) == 1 and context_names and isinstance(body[0], ast.Return | ast.Expr) and \
            body[0].value is not None and _only_delegates(body[0].value, _parameters(node), set(context_names)):
        return "trivial-context-delegation"
    return None


def _parameters(node: _FunctionNode) -> set[str]:
    names = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
    names |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
    return names


def _only_delegates(expr: ast.expr, parameters: set[str], supplied: set[str]) -> bool:
    """Whether `expr` is calls of supplied names (on parameters, literals or such calls),
    joined by `and` / `or` / `not`, with at least one call."""
    calls = 0

    def delegates(node: ast.expr) -> bool:
        nonlocal calls
        if isinstance(node, ast.BoolOp):
            return all(delegates(value) for value in node.values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return delegates(node.operand)
        if isinstance(node, ast.Call):
            root = node.func
            while isinstance(root, ast.Attribute):
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in supplied):
                return False
            calls += 1
            arguments = [*node.args, *(k.value for k in node.keywords)]
            return all(_is_passthrough(a, parameters) or delegates(a) or
                       (isinstance(a, ast.Name) and a.id in supplied) for a in arguments)
        return _is_passthrough(node, parameters)

    return delegates(expr) and calls > 0


def _has_docstring(node: _FunctionNode) -> bool:
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
        isinstance(first.value.value, str)


def _is_stub_statement(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    if isinstance(statement, ast.Raise) and statement.exc is not None:
        raised = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
        return decorator_name(raised).endswith("NotImplementedError")
    return False


def _is_delegation(statement: ast.stmt, node: _FunctionNode) -> bool:
    """`return other(a, b)` / `other(a, b)` passing on parameters, attributes of them or
    literals, and nothing else."""
    value = statement.value if isinstance(statement, ast.Return | ast.Expr) else None
    if not isinstance(value, ast.Call):
        return False
    parameters = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
    if node.args.vararg:
        parameters.add(node.args.vararg.arg)
    if node.args.kwarg:
        parameters.add(node.args.kwarg.arg)
    arguments = [*value.args, *(k.value for k in value.keywords)]
    return all(_is_passthrough(argument, parameters) for argument in arguments)


def _is_passthrough(expr: ast.expr, parameters: set[str]) -> bool:
    if isinstance(expr, ast.Starred):
        expr = expr.value
    if isinstance(expr, ast.Constant):
        return True
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in parameters
