"""What stage 2 reads out of one API's release: S, the examples' raw text, M and C.

- **S** (`signature`): the parameters from the signature (names, annotations, defaults), their
  descriptions and types from the docstring, parsed by griffe's `auto` parser (Google, NumPy
  or Sphinx style), and, failing that, from bullet lists (`* **name** - text`). A docstring
  that delegates (`See `pkg.other``) lends the descriptions of the API it names for the
  parameters it does not describe itself. The return type is the return annotation, else the
  docstring's.
- **E** candidates (`docstring_examples`, `docs_examples`, `test_examples`): doctest blocks
  (prompts stripped, expected output dropped) and fenced Python blocks of the docstring; code
  blocks of the distribution's documentation (Markdown, reStructuredText) that call the API;
  the new release's test functions (and example scripts) that call it.
- **M** (`docstring_mechanism`): the docstring's prose (not its parameter lists or examples)
  and what changed since the old release.
- **C** (`implementation`): the definition with every docstring removed (`ast.unparse`), then
  the same module's functions and classes it calls by name (and, for a method, the methods of
  its class it calls on `self`), one level deep, each after `# --- helper: <name> ---`, while
  the total stays under the size cap (the definition alone is cut at a line when longer).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import griffe

from knowbench.builders.novel.surface import ApiObject, Surface, object_source
from knowbench.parsing import parse_python
from knowbench.paths import skipped_dir

_BULLET = re.compile(r"^\s*[*-]\s+\**`?(?P<name>\w+)`?\**\s*(?:\([^)]*\))?\s*[-:–]\s*(?P<text>.+)$")
_REFERENCE = re.compile(r"(?:`|:(?:func|meth|class):`~?)(?P<path>[A-Za-z_][\w.]*)(?:\(\))?`")
_FENCE = re.compile(r"```(?:python|py|pycon|python3)?[ \t]*\n(?P<code>.*?)```", re.DOTALL)
_RST_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\. code-block::\s*(?:python|py|pycon)\s*\n(?:[ \t]*:\w+:.*\n)*\s*\n"
                        r"(?P<code>(?:(?P=indent)[ \t]+.*\n|[ \t]*\n)+)", re.MULTILINE)
_TYPED = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\[[\w., |\[\]]*\])?(?: \| [\w.\[\], ]+)*):\s+(?P<text>.+)$")
MAX_SOURCE_CHARS = 6000
MAX_DOC_FILES = 400


@dataclass
class Parsed:
    """A docstring's parts."""

    text: list[str]
    params: dict[str, dict[str, str]]
    returns: tuple[str, str] | None
    examples: list[str]


def parse_docstring(docstring: str) -> Parsed:
    """Sections of `docstring` (griffe's auto parser; bullet lists as a fallback)."""
    parsed = Parsed(text=[], params={}, returns=None, examples=[])
    if not docstring.strip():
        return parsed
    try:
        sections = griffe.Docstring(textwrap.dedent(docstring).strip()).parse(griffe.Parser.auto)
    except Exception:  # a docstring griffe cannot parse: keep it as plain text
        sections = []
        parsed.text.append(docstring)
    for section in sections:
        kind = section.kind.value
        if kind == "text":
            parsed.text.append(section.value)
        elif kind in ("parameters", "other parameters"):
            for item in section.value:
                parsed.params[item.name] = {"description": " ".join((item.description or "").split()),
                                            "type": str(item.annotation) if item.annotation else ""}
        elif kind == "returns" and section.value:
            item = section.value[0]
            annotation = str(item.annotation) if item.annotation else ""
            description = " ".join((item.description or "").split())
            typed = _TYPED.match(description)
            if not annotation and typed:  # Google's `type: text`, which griffe leaves whole without a parent
                annotation, description = typed["type"], typed["text"]
            parsed.returns = (annotation, description)
        elif kind == "examples":
            for sub_kind, value in section.value:
                if sub_kind.value == "examples":
                    parsed.examples.append(value)
                else:
                    parsed.text.append(value)
        elif kind in ("admonition",):
            with contextlib.suppress(AttributeError):
                parsed.text.append(f"{section.title}: {section.value.description}")
    for text in list(parsed.text):
        current: str | None = None
        for line in text.splitlines():
            match = _BULLET.match(line)
            if match and match["name"] not in parsed.params:
                current = match["name"]
                parsed.params[current] = {"description": match["text"].strip(), "type": ""}
            elif current and line.strip() and line[:1].isspace() and not _BULLET.match(line):
                parsed.params[current]["description"] += " " + line.strip()
            else:
                current = None
    return parsed


def doctest_code(block: str) -> str | None:
    """The source lines of a doctest block (`>>>`/`...` prompts removed, outputs dropped)."""
    lines = []
    for line in textwrap.dedent(block).splitlines():
        stripped = line.strip()
        if stripped.startswith(">>>"):
            lines.append(stripped[4:] if len(stripped) > 3 else "")
        elif stripped.startswith("...") and lines:
            lines.append(line.strip()[4:] if len(line.strip()) > 3 else "")
    code = "\n".join(lines).strip()
    if not code:
        return None
    try:
        parse_python(code)
    except SyntaxError:
        return None
    return code


def _doctest_blocks(text: str) -> list[str]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(">>>") or (current and stripped and not stripped.startswith(">>>")):
            current.append(line)
        elif not stripped and current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return ["\n".join(block) for block in blocks if any(line.strip().startswith(">>>") for line in block)]


def docstring_examples(parsed: Parsed) -> list[str]:
    """Runnable code of the docstring's examples: all its doctest blocks joined into one
    example, in order (doctest runs a docstring's blocks in one namespace, so a later block
    uses what an earlier one defined), then each fenced or plain code block."""
    doctests: list[str] = []
    found: list[str] = []
    for block in parsed.examples:
        code = doctest_code(block)
        if code:
            doctests.append(code)
        elif ">>>" not in block and (code := _parses(textwrap.dedent(block))):
            found.append(code)
    for text in parsed.text:
        doctests += [c for c in (doctest_code(b) for b in _doctest_blocks(text)) if c]
        found += [code for match in _FENCE.finditer(text) if (code := _parses(match["code"]))]
    joined = "\n".join(doctests)
    return _unique(([joined] if joined else []) + found)


def _parses(code: str) -> str | None:
    code = textwrap.dedent(code).strip()
    if not code:
        return None
    if ">>>" in code:
        return doctest_code(code)
    try:
        parse_python(code)
    except SyntaxError:
        return None
    return code


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [item for item in items if not (item in seen or seen.add(item))]  # type: ignore[func-returns-value]


def _calls(code: str, entry: ApiObject, api: str) -> bool:
    """Whether `code` calls the API and mentions its top package. A method counts when called
    on anything (`obj.leaf(`); a function or class when called bare (`from pkg import leaf`)
    or through its parent (`parent.leaf(`, or `alias.leaf(` after `import pkg as alias`)."""
    *parents, leaf = api.split(".")
    top = api.split(".")[0]
    if top not in code and entry.canonical.split(".")[0] not in code:
        return False
    if entry.kind == "method":
        return re.search(rf"\.{re.escape(leaf)}\s*\(", code) is not None
    if re.search(rf"(?<![\w.]){re.escape(leaf)}\s*\(", code):
        return True
    prefixes = {parents[-1]} | set(re.findall(rf"import\s+{re.escape(top)}\s+as\s+(\w+)", code))
    return any(re.search(rf"(?<![\w]){re.escape(p)}\.{re.escape(leaf)}\s*\(", code) for p in prefixes)


def docs_examples(root: Path, entry: ApiObject, api: str, files: list[Path] | None = None) -> list[tuple[str, str]]:
    """(code, where) for documentation code blocks under `root` that call the API."""
    found: list[tuple[str, str]] = []
    leaf = api.split(".")[-1]
    for path in files if files is not None else documentation_files(root):
        for code in _doc_blocks(path):
            if leaf in code and _calls(code, entry, api):
                found.append((code, path.relative_to(root).as_posix()))
    return found


@functools.lru_cache(maxsize=4096)
def _doc_blocks(path: Path) -> tuple[str, ...]:
    """The code blocks of one documentation file that parse, found once per process."""
    try:
        text = _read(path)
    except OSError:
        return ()
    blocks = [m["code"] for m in _FENCE.finditer(text)] + [m["code"] for m in _RST_BLOCK.finditer(text)]
    blocks += _doctest_blocks(text) if path.suffix in (".rst", ".txt") else []
    return tuple(code for block in blocks if (code := _parses(block)))


@functools.lru_cache(maxsize=4096)
def _read(path: Path) -> str:
    """A documentation or test file's text, read once per process (every API scans them all)."""
    return path.read_text(errors="replace")


def documentation_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for path in sorted(root.rglob("*")):
        if len(files) >= MAX_DOC_FILES:
            break
        parts = path.relative_to(root).parts
        if any(skipped_dir(part) for part in parts[:-1]):
            continue
        if path.suffix in (".md", ".rst") and path.is_file():
            files.append(path)
    return files


def test_files(root: Path) -> list[Path]:
    """The release's test and example scripts: `test_*.py` / `*_test.py` and files under
    `examples/`."""
    files = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(skipped_dir(part) for part in parts[:-1]):
            continue
        if path.name.startswith("test_") or path.stem.endswith("_test") or \
                any(part in ("examples", "example") for part in parts[:-1]):
            files.append(path)
    return files


@functools.lru_cache(maxsize=4096)
def _test_functions(path: Path) -> tuple[tuple[str, str, str, bool], ...]:
    """(name, imports, source, runnable) of one test file's undecorated top-level `test*`
    functions, found once per process."""
    try:
        text = _read(path)
        tree = parse_python(text)
    except (OSError, SyntaxError, ValueError):
        return ()
    lines = text.splitlines()

    def segment(node: ast.stmt) -> str:
        return "\n".join(lines[node.lineno - 1:node.end_lineno])

    imports = "\n".join(segment(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom))
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test") and not node.decorator_list:
            # decorated (parametrised, marked) tests need pytest to run: left out
            runnable = not (node.args.args or node.args.kwonlyargs or node.args.vararg)
            found.append((node.name, imports, textwrap.dedent(segment(node)), runnable))
    return tuple(found)


def test_examples(root: Path, entry: ApiObject, api: str, files: list[Path] | None = None,
                  limit: int = 3) -> list[tuple[str, str, bool]]:
    """(code, where, runnable) for test functions that call the API: the test module's
    imports, the function, and a call of it when it takes no fixtures. Example scripts under
    `examples/` come whole when short."""
    found: list[tuple[str, str, bool]] = []
    leaf = api.split(".")[-1]
    for path in files if files is not None else test_files(root):
        try:
            text = _read(path)
        except OSError:
            continue
        if leaf not in text:
            continue
        where = path.relative_to(root).as_posix()
        if "examples" in path.parts or "example" in path.parts:
            if text.count("\n") <= 80 and _calls(text, entry, api):
                found.append((text.strip(), where, True))
            continue
        for name, imports, body, runnable in _test_functions(path):
            if leaf not in body or not _calls(imports + "\n" + body, entry, api):
                continue
            code = "\n".join([imports, "", "", body])
            if runnable:
                code += f"\n\n\n{name}()"
            found.append((code.strip(), f"{where}::{name}", runnable))
            if len(found) >= limit * 3:
                return found
    found.sort(key=lambda item: (not item[2], len(item[0])))
    return found


_ALIASES = {"numpy": "np", "pandas": "pd", "scipy": "sp", "matplotlib": "mpl", "networkx": "nx",
            "polars": "pl", "seaborn": "sns", "tensorflow": "tf"}


def with_imports(code: str, entry: ApiObject, api: str, surface: Surface) -> str:
    """A docstring example made self-contained. Doctests run in the namespace of the module
    that defines them; an example shown on its own needs the imports that namespace gave it:
    names of the API's public parent (or defining module) used bare, and the package under its
    conventional alias when the example uses one (`np.` for numpy)."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return code
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            bound.add(node.name)
    used = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in bound]
    parent = api.rsplit(".", 1)[0]
    members: dict[str, str] = {}
    for obj in surface.objects.values():
        for path in obj.public_exposures:
            owner, name = path.rsplit(".", 1)
            if owner == parent or (owner == entry.module and name not in members):
                members[name] = owner  # the API's public parent wins over its defining module
    members[api.rsplit(".", 1)[1]] = parent
    lines = []
    top = api.split(".")[0]
    alias = _ALIASES.get(top)
    if alias and alias in used:
        lines.append(f"import {top} as {alias}")
    if top in used:
        lines.append(f"import {top}")
    imported: dict[str, list[str]] = {}
    for name in dict.fromkeys(used):
        if name in members:
            imported.setdefault(members[name], []).append(name)
    lines += [f"from {module} import {', '.join(names)}" for module, names in imported.items()]
    return "\n".join(lines) + ("\n\n" if lines else "") + code


# ------------------------------------------------------------------------------- S and M

def signature_parameters(entry: ApiObject, parsed: Parsed, lent: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    rows = []
    for parameter in entry.parameters:
        name = parameter["name"]
        doc = parsed.params.get(name) or parsed.params.get(f"*{name}") or parsed.params.get(f"**{name}") \
            or lent.get(name) or {}
        rows.append({"name": ("*" if parameter["kind"] == "variadic positional" else
                              "**" if parameter["kind"] == "variadic keyword" else "") + name,
                     "type": parameter["annotation"] or doc.get("type") or None,
                     "default": None if parameter["kind"].startswith("variadic")
                     else parameter.get("default_value") or parameter["default"],
                     "description": doc.get("description", "")})
    return rows


_PATHS: list[tuple[Surface, dict[str, ApiObject]]] = []  # the last surface asked about


def _paths(surface: Surface) -> dict[str, ApiObject]:
    """Every public and canonical path of `surface` (also without the top package), once."""
    if not _PATHS or _PATHS[0][0] is not surface:
        by_path: dict[str, ApiObject] = {}
        for obj in surface.objects.values():
            for path in obj.public_exposures | {obj.canonical}:
                by_path[path] = obj
                by_path.setdefault(path.split(".", 1)[-1], obj)
        _PATHS[:] = [(surface, by_path)]
    return _PATHS[0][1]


def referenced_apis(docstring: str, surface: Surface, entry: ApiObject) -> list[ApiObject]:
    """APIs of the same release a docstring points to (`pkg.other`, :func:`other`)."""
    by_path = _paths(surface)
    found = []
    for match in _REFERENCE.finditer(docstring):
        target = by_path.get(match["path"]) or by_path.get(f"{entry.module}.{match['path']}")
        if target is not None and target is not entry and target not in found:
            found.append(target)
    return found


def docstring_mechanism(entry: ApiObject, parsed: Parsed, record: dict[str, Any], limit: int = 1500) -> str:
    """M grounded in the docstring: its prose (doctest lines and fences removed), then what
    changed since the old release."""
    paragraphs: list[str] = []
    for text in parsed.text:
        text = _FENCE.sub("", text)
        kept = []
        in_bullet = in_doctest = False
        for line in text.splitlines():
            if _BULLET.match(line) or line.strip().startswith("**Parameters"):
                in_bullet = True  # a parameter list: S has it
                continue
            if in_bullet and line.strip() and line[:1].isspace():
                continue
            in_bullet = False
            if line.strip().startswith(">>>"):
                in_doctest = True  # the prompt, its continuations and its output: E has them
                continue
            if in_doctest and line.strip():
                continue
            in_doctest = False
            kept.append(line)
        for paragraph in "\n".join(kept).split("\n\n"):
            flat = " ".join(paragraph.split())
            if flat:
                paragraphs.append(flat)
    if parsed.returns and parsed.returns[1]:
        paragraphs.append(f"It returns {parsed.returns[1][0].lower() + parsed.returns[1][1:]}")
    text = "\n\n".join(paragraphs)
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + " …"
    change = change_note(record)
    return (text + ("\n\n" + change if change else "")).strip()


def change_note(record: dict[str, Any]) -> str:
    if record.get("change") == "added":
        return f"New in {record.get('library', '')} {record.get('new_version', '')}.".replace("  ", " ")
    notes = []
    for change in record.get("changes") or []:
        kind = change["change"]
        if kind == "added":
            notes.append(f"parameter `{change['parameter']}` added")
        elif kind == "removed":
            notes.append(f"parameter `{change['parameter']}` removed")
        elif kind == "renamed":
            notes.append(f"parameter `{change['old']}` renamed to `{change['new']}`")
        elif kind == "default":
            notes.append(f"default of `{change['parameter']}` changed from {change['old']} to {change['new']}")
        elif kind == "kind":
            notes.append(f"`{change['parameter']}` is now {change['new']}")
    if not notes:
        return ""
    return (f"Changed in {record.get('library', '')} {record.get('new_version', '')} (since "
            f"{record.get('old_version', '')}): " + "; ".join(notes) + ".")


# ------------------------------------------------------------------------------------ C

class _StripDocstrings(ast.NodeTransformer):
    def _strip(self, node: Any) -> Any:
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Module = _strip


def strip_docstrings(source: str) -> str | None:
    try:
        tree = parse_python(textwrap.dedent(source))
    except SyntaxError:
        return None
    return ast.unparse(_StripDocstrings().visit(tree))


def implementation(entry: ApiObject, surface: Surface, limit: int = MAX_SOURCE_CHARS) -> tuple[str, list[str]]:
    """C for `entry`, and the helpers it inlined (their names)."""
    source = object_source(entry)
    stripped = strip_docstrings(source) if source else None
    if not stripped:
        return "", []
    if len(stripped) > limit:
        cut = stripped[:limit].rsplit("\n", 1)[0]
        return cut + "\n# ... (cut at the size cap)", []
    try:
        tree = parse_python(stripped)
    except SyntaxError:
        return stripped, []
    called: list[str] = []
    methods: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id not in called:
                called.append(node.func.id)
            elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "self" and node.func.attr not in methods:
                methods.append(node.func.attr)
    helpers: list[ApiObject] = []
    for name in called:
        helper = surface.objects.get(f"{entry.module}.{name}")
        if helper is not None and helper is not entry and helper.kind in ("function", "class"):
            helpers.append(helper)
    if entry.kind == "method":
        owner = entry.canonical.rsplit(".", 1)[0]
        for name in methods:
            helper = surface.objects.get(f"{owner}.{name}")
            if helper is not None and helper is not entry:
                helpers.append(helper)
    text = stripped
    names = []
    for helper in helpers:
        helper_source = object_source(helper)
        helper_text = strip_docstrings(helper_source) if helper_source else None
        if not helper_text:
            continue
        block = f"\n\n# --- helper: {helper.public_path} ---\n{helper_text}"
        if len(text) + len(block) > limit:
            continue
        text += block
        names.append(helper.public_path)
    return text, names
