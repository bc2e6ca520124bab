"""Split files into chunks: Python by AST, Markdown and reStructuredText by section, notebooks
by code cell, example scripts whole (or in windows when long).

Every chunker takes the file's text and its corpus-relative path and returns `Chunk`s in file
order. Python that does not parse raises `SyntaxError`; the caller decides what to do.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from knowbench.jsonl import load_json
from knowbench.knowledge.corpus import Chunk
from knowbench.parsing import parse_python
from knowbench.paths import skipped_dir

MAX_SECTION_CHARS = 4000  # ~1000 tokens: longer documentation sections are split at blank lines
MAX_EXAMPLE_LINES = 150  # longer example scripts are split at top-level statements

TEST_DIRS = frozenset({"tests", "test", "testing"})
EXAMPLE_DIRS = frozenset({"examples", "example"})
SUFFIXES = frozenset({".py", ".md", ".markdown", ".rst", ".ipynb"})


def is_example_path(parts: tuple[str, ...]) -> bool:
    """True for files under examples/, example/ (also docs/examples/) or demo*/ folders."""
    return any(part.lower() in EXAMPLE_DIRS or part.lower().startswith("demo") for part in parts[:-1])


def is_test_path(parts: tuple[str, ...]) -> bool:
    name = parts[-1]
    return (any(part in TEST_DIRS for part in parts[:-1]) or name == "conftest.py"
            or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))))


def wanted_file(parts: tuple[str, ...], include_tests: bool) -> bool:
    """Whether a file at these relative path parts belongs in a corpus."""
    if Path(parts[-1]).suffix.lower() not in SUFFIXES:
        return False
    for part in parts[:-1]:
        if skipped_dir(part):
            return False
    return include_tests or not is_test_path(parts)


def chunk_file(text: str, path: str, module: str = "") -> list[Chunk]:
    """Chunks of one file, by suffix. `module` is the dotted module name of a Python file."""
    parts = tuple(path.split("/"))
    suffix = Path(path).suffix.lower()
    example = is_example_path(parts)
    if suffix == ".py":
        return chunk_example_script(text, path) if example else chunk_python(text, path, module)
    if suffix in (".md", ".markdown"):
        return chunk_markdown(text, path, kind="example" if example else "doc")
    if suffix == ".rst":
        return chunk_rst(text, path, kind="example" if example else "doc")
    if suffix == ".ipynb":
        return chunk_notebook(text, path)
    return []


# --- Python source -------------------------------------------------------------------------

def chunk_python(text: str, path: str, module: str) -> list[Chunk]:
    """A module-docstring chunk, one chunk per function and method (qualname 'Cls.meth'), and
    one per class holding its header, docstring, class attributes and method signatures."""
    tree = parse_python(text)
    lines = text.splitlines()
    chunks: list[Chunk] = []
    docstring = _docstring_node(tree.body)
    if docstring is not None:
        doc = ast.get_docstring(tree) or ""
        if doc.strip():
            chunks.append(Chunk.create("module", path, docstring.lineno, _end(docstring), doc,
                                       module=module, qualname=""))
    for node in _definitions(tree.body):
        _visit(node, [], lines, path, module, chunks)
    return chunks


def _definitions(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Function and class definitions in `body`, also inside module-level if/try blocks."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node
        elif isinstance(node, ast.If):
            yield from _definitions(node.body)
            yield from _definitions(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(handler.body for handler in node.handlers)):
                yield from _definitions(block)


def _visit(node: ast.stmt, owners: list[str], lines: list[str], path: str, module: str,
           chunks: list[Chunk]) -> None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        if _is_overload(node):
            return  # a typing stub: the implementation that follows is the knowledge
        qualname = ".".join([*owners, node.name])
        start = _start(node)
        source = textwrap.dedent("\n".join(lines[start - 1:_end(node)]))
        chunks.append(Chunk.create("function", path, start, _end(node), source, module=module,
                                   qualname=qualname))
    elif isinstance(node, ast.ClassDef):
        qualname = ".".join([*owners, node.name])
        chunks.append(Chunk.create("class", path, _start(node), _end(node),
                                   _class_outline(node, lines), module=module, qualname=qualname))
        for member in node.body:
            if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                _visit(member, [*owners, node.name], lines, path, module, chunks)


def _class_outline(node: ast.ClassDef, lines: list[str]) -> str:
    """Header (with decorators), docstring, class attributes and method signatures."""
    start = _start(node)
    first_body = node.body[0].lineno if node.body else node.lineno
    header_end = max(node.lineno, first_body - 1)
    if first_body == node.lineno:  # `class A: pass`
        return textwrap.dedent("\n".join(lines[start - 1:_end(node)]))
    out = [line for line in lines[start - 1:header_end]]
    while out and (not out[-1].strip() or out[-1].strip().startswith("#")):
        out.pop()
    body = node.body
    docstring = _docstring_node(body)
    if docstring is not None:
        out.extend(lines[docstring.lineno - 1:_end(docstring)])
        body = body[1:]
    indent = " " * (body[0].col_offset if body else node.col_offset + 4)
    for member in body:
        if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
            out.extend(indent + "@" + ast.unparse(decorator) for decorator in member.decorator_list)
            out.append(indent + signature(member))
        elif isinstance(member, ast.ClassDef):
            out.append(indent + _class_header(member))
        elif isinstance(member, ast.Assign | ast.AnnAssign) and _end(member) - member.lineno < 5:
            out.extend(lines[member.lineno - 1:_end(member)])
    return textwrap.dedent("\n".join(out))


def signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """'def name(args) -> ret: ...' on one line (normalised by ast.unparse)."""
    stub = copy.copy(node)
    stub.decorator_list = []
    stub.body = [ast.Expr(ast.Constant(...))]
    return ast.unparse(stub).replace(":\n    ...", ": ...", 1)


def _is_overload(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
        if name == "overload":
            return True
    return False


def _class_header(node: ast.ClassDef) -> str:
    bases = [ast.unparse(base) for base in node.bases]
    bases += [ast.unparse(keyword) for keyword in node.keywords]
    return f"class {node.name}({', '.join(bases)}): ..." if bases else f"class {node.name}: ..."


def _docstring_node(body: list[ast.stmt]) -> ast.Expr | None:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0]
    return None


def _start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(decorator.lineno for decorator in decorators)])


def _end(node: ast.stmt) -> int:
    return node.end_lineno or node.lineno


# --- Example scripts -----------------------------------------------------------------------

def chunk_example_script(text: str, path: str) -> list[Chunk]:
    """One chunk per example script; a long one is split into windows of top-level statements
    (or of lines when it does not parse)."""
    lines = text.splitlines()
    stem = Path(path).stem
    if not text.strip():
        return []
    if len(lines) <= MAX_EXAMPLE_LINES:
        return [Chunk.create("example", path, 1, len(lines), text.strip("\n"), qualname=stem)]
    try:
        starts = [_start(node) for node in parse_python(text).body]
    except SyntaxError:
        starts = list(range(1, len(lines) + 1))
    windows: list[tuple[int, int]] = []
    begin = 1
    for start in starts[1:]:
        if start - begin >= MAX_EXAMPLE_LINES:
            windows.append((begin, start - 1))
            begin = start
    windows.append((begin, len(lines)))
    chunks = []
    for part, (first, last) in enumerate(windows, 1):
        body = "\n".join(lines[first - 1:last]).strip("\n")
        if body.strip():
            name = stem if len(windows) == 1 else f"{stem} (part {part})"
            chunks.append(Chunk.create("example", path, first, last, body, qualname=name))
    return chunks


# --- Documentation -------------------------------------------------------------------------

@dataclass
class _Section:
    trail: list[str]
    start: int  # 0-based index of the heading's first line
    lines: list[str] = field(default_factory=list)
    heading_lines: int = 0


def _sections_to_chunks(sections: list[_Section], path: str, kind: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    for section in sections:
        body = section.lines
        # A heading with nothing under it (a title followed by a subtitle) is not a chunk.
        if not any(line.strip() for line in body[section.heading_lines:]):
            continue
        name = " > ".join(section.trail) or Path(path).stem
        pieces = _split_long(body)
        offset = section.start
        for part, piece in enumerate(pieces, 1):
            text = "\n".join(piece).strip("\n")
            first = offset + 1
            offset += len(piece)
            if not text.strip():
                continue
            label = name if len(pieces) == 1 else f"{name} (part {part})"
            chunks.append(Chunk.create(kind, path, first, offset, text, qualname=label))  # type: ignore[arg-type]
    return chunks


def _split_long(lines: list[str]) -> list[list[str]]:
    """Split at blank lines outside code fences so each piece stays under MAX_SECTION_CHARS."""
    if sum(len(line) + 1 for line in lines) <= MAX_SECTION_CHARS:
        return [lines]
    pieces: list[list[str]] = [[]]
    size, fenced = 0, False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        if not line.strip() and not fenced and size > MAX_SECTION_CHARS * 0.75:
            pieces[-1].append(line)
            pieces.append([])
            size = 0
            continue
        pieces[-1].append(line)
        size += len(line) + 1
    return [piece for piece in pieces if piece]


_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def chunk_markdown(text: str, path: str, kind: str = "doc") -> list[Chunk]:
    """One chunk per section (ATX '#' or setext headings, not inside code fences); the chunk's
    name is the heading trail. Front matter is skipped; text before the first heading is a
    section named after the file."""
    lines = text.splitlines()
    begin = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        closing = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if closing is not None:
            begin = closing + 1
    headings: list[tuple[int, int, str, int]] = []  # (line index, level, title, heading lines)
    fenced = False
    for index in range(begin, len(lines)):
        line = lines[index]
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        atx = _ATX.match(line)
        if atx:
            headings.append((index, len(atx.group(1)), atx.group(2).strip(), 1))
            continue
        setext = _SETEXT.match(line)
        previous = lines[index - 1] if index > begin else ""
        if setext and previous.strip() and not _ATX.match(previous) and not _FENCE.match(previous) \
                and not previous.lstrip().startswith(("-", "*", ">", "|")) \
                and not (headings and headings[-1][0] == index - 1):
            level = 1 if setext.group(1).startswith("=") else 2
            headings.append((index - 1, level, previous.strip(), 2))
    return _sections_to_chunks(_build_sections(lines, begin, headings), path, kind)


def _build_sections(lines: list[str], begin: int,
                    headings: list[tuple[int, int, str, int]]) -> list[_Section]:
    sections: list[_Section] = []
    first_heading = headings[0][0] if headings else len(lines)
    if any(line.strip() for line in lines[begin:first_heading]):
        sections.append(_Section([], begin, lines[begin:first_heading]))
    stack: list[tuple[int, str]] = []
    for position, (index, level, title, heading_lines) in enumerate(headings):
        end = headings[position + 1][0] if position + 1 < len(headings) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        sections.append(_Section([name for _, name in stack], index, lines[index:end],
                                 heading_lines))
    return sections


_ADORNMENT = re.compile(r"^([=\-`:'\"~^_*+#<>.!$%&(),/;?@\[\]\\{|}])\1{2,}[ \t]*$")


def chunk_rst(text: str, path: str, kind: str = "doc") -> list[Chunk]:
    """One chunk per reStructuredText section. A heading is a non-indented title line
    underlined (optionally also overlined) with a repeated punctuation character; levels follow
    the order in which adornment styles first appear, as in docutils."""
    lines = text.splitlines()
    styles: list[tuple[str, bool]] = []
    headings: list[tuple[int, int, str, int]] = []
    index = 0
    while index + 1 < len(lines):
        title, under = lines[index], lines[index + 1]
        match = _ADORNMENT.match(under)
        if (match and title.strip() and not title[0].isspace() and not _ADORNMENT.match(title)
                and len(under.rstrip()) >= min(len(title.rstrip()), 3)):
            over = index > 0 and lines[index - 1].rstrip() == under.rstrip()
            style = (match.group(1), over)
            if style not in styles:
                styles.append(style)
            start = index - 1 if over else index
            headings.append((start, styles.index(style) + 1, title.strip(), index + 2 - start))
            index += 2
            continue
        index += 1
    return _sections_to_chunks(_build_sections(lines, 0, headings), path, kind)


# --- Notebooks -----------------------------------------------------------------------------

def chunk_notebook(text: str, path: str) -> list[Chunk]:
    """One chunk per non-empty code cell (nbformat 4); lines are cell numbers, from 1."""
    try:
        notebook = load_json(text)
    except json.JSONDecodeError as error:
        raise SyntaxError(f"not a JSON notebook: {error}") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise SyntaxError("not an nbformat 4 notebook (no 'cells' list)")
    chunks = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        code = "".join(source) if isinstance(source, list) else str(source)
        if code.strip():
            chunks.append(Chunk.create("notebook", path, number, number, code.strip("\n"),
                                       qualname=f"cell {number}"))
    return chunks
