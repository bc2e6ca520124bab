"""Task instructions in DomainEval's shape: Functionality / Inputs / Outputs.

Without a model, `docstring_instruction` writes them deterministically from the target's
signature and docstring (Sphinx `:param:`, Google `Args:` and NumPy `Parameters` sections
are understood; doctest examples are left out). With a model, `llm_instructions` asks it with
DomainEval's instruction prompt (its Figure 4) through any `ModelBackend`, cached like every
other generation. Neither ever sees the tests, so neither can reveal them.
"""

from __future__ import annotations

import ast
import asyncio
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from knowbench.benchmark.schema import FunctionTask
from knowbench.models.base import Message, ModelBackend
from knowbench.parsing import parse_python
from knowbench.records import SamplingParams

DOMAINEVAL_SYSTEM = (
    "You are preparing an interview for software engineers. The interviewees are going to complete "
    "the {name} function. Write a clear instruction describing this function in detail, which "
    "includes the functionality, the input arguments (if any), and the outputs (if any). Do not "
    "reveal test cases. Generate the instruction with the following format:\n"
    "```\nFunctionality: ...\nInputs: ...\nOutputs: ...\n```"
)
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Keyword Arguments|Kwargs|Returns|Return|"
                      r"Yields|Raises|Examples?|Notes?|See Also|References|Attributes|Warns|Warnings)\s*:?\s*$")
_SPHINX = re.compile(r"^\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except|"
                     r"exception|yields?|ytype)\b\s*([^:]*):\s*(.*)$")
_MAX_CODE_CHARS = 12000


@dataclass
class Documentation:
    """What a docstring says, split into the parts an instruction needs."""

    summary: str
    params: dict[str, str]
    types: dict[str, str]
    returns: str
    raises: list[str]


def parse_docstring(docstring: str | None) -> Documentation:
    doc = Documentation(summary="", params={}, types={}, returns="", raises=[])
    if not docstring:
        return doc
    lines = textwrap.dedent(docstring).strip("\n").splitlines()
    summary: list[str] = []
    section: str | None = None
    current: str | None = None
    skip_example = False
    index = 0
    while index < len(lines):
        raw = lines[index]
        line = raw.strip()
        index += 1
        if line.startswith(">>>") or line.startswith("..."):
            skip_example = True
            continue
        if skip_example:
            if not line:
                skip_example = False
            continue
        sphinx = _SPHINX.match(line)
        if sphinx:
            kind, name, text = sphinx.group(1), sphinx.group(2).strip(), sphinx.group(3).strip()
            name = name.split()[-1] if name else ""
            if kind in ("param", "parameter", "arg", "argument", "key", "keyword"):
                doc.params[name] = text
                current = name
                section = "sphinx-param"
            elif kind == "type":
                doc.types[name] = text
            elif kind in ("returns", "return", "yields", "yield"):
                doc.returns = text
                section = "sphinx-returns"
            elif kind == "rtype":
                doc.types["return"] = text
            else:
                doc.raises.append(f"{name}: {text}".strip(": "))
            continue
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            if index < len(lines) and set(lines[index].strip()) == {"-"}:
                index += 1  # NumPy underline
            current = None
            continue
        if section is None:
            if not re.match(r"^[\w\s]+::$", line):  # a reST "Examples::" lead-in
                summary.append(line)
            continue
        if section in ("args", "arguments", "parameters", "params", "keyword arguments", "kwargs"):
            match = re.match(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(\(([^)]*)\))?\s*(:\s*(.*))?$", line)
            indent = len(raw) - len(raw.lstrip())
            if match and line and (current is None or indent <= _param_indent(lines, index)):
                current = match.group(1)
                if match.group(3):
                    doc.types[current] = match.group(3)
                text = match.group(5) or ""
                if match.group(4) is None and ":" not in line and match.group(3) is None:
                    text = ""
                # NumPy: "name : type" puts the type after the colon
                numpy = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s+:\s+(.*)$", line)
                if numpy:
                    current, text = numpy.group(1), ""
                    doc.types[current] = numpy.group(2)
                doc.params[current] = text
            elif current is not None and line:
                doc.params[current] = (doc.params[current] + " " + line).strip()
        elif section in ("returns", "return", "yields", "sphinx-returns"):
            if line:
                doc.returns = (doc.returns + " " + line).strip()
        elif section == "raises":
            if line:
                doc.raises.append(line)
        elif section == "sphinx-param" and current is not None and line:
            doc.params[current] = (doc.params[current] + " " + line).strip()
    doc.summary = _paragraphs(summary)
    return doc


def _param_indent(lines: list[str], index: int) -> int:
    previous = lines[index - 1] if index > 0 else ""
    return len(previous) - len(previous.lstrip())


def _paragraphs(lines: list[str]) -> str:
    paragraphs, current = [], []
    for line in lines:
        if line:
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n".join(paragraphs)


def docstring_instruction(task: FunctionTask, module: str | None = None, library: str | None = None) -> str:
    """A deterministic Functionality / Inputs / Outputs instruction from the reference's
    signature and docstring. Only the reference is read; never the tests."""
    tree = parse_python(textwrap.dedent(task.reference))
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    doc = parse_docstring(ast.get_docstring(node))
    *owners, name = task.entry_point.split(".")
    what = f"the method `{name}` of class `{'.'.join(owners)}`" if owners else f"the function `{name}`"
    where = f" in module `{module}`" if module else ""
    if library:
        where += f" ({library})"
    functionality = doc.summary or (f"Implement {what}{where}. No documentation was available: its name, "
                                    "signature and the surrounding code define what it must do.")
    if doc.summary:
        functionality = f"Implement {what}{where}. {functionality}"
    inputs = _inputs(node, doc, method=bool(owners))
    outputs = _outputs(node, doc)
    return f"Functionality: {functionality}\n\nInputs:\n{inputs}\n\nOutputs:\n{outputs}"


def _inputs(node: ast.FunctionDef | ast.AsyncFunctionDef, doc: Documentation, method: bool) -> str:
    arguments = node.args
    positional = arguments.posonlyargs + arguments.args
    defaults: dict[str, ast.expr] = dict(zip([a.arg for a in positional][-len(arguments.defaults):],
                                             arguments.defaults, strict=True)) if arguments.defaults else {}
    defaults.update({a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
                     if d is not None})
    rows = []
    every = [*positional, *([arguments.vararg] if arguments.vararg else []), *arguments.kwonlyargs,
             *([arguments.kwarg] if arguments.kwarg else [])]
    for index, argument in enumerate(every):
        if method and index == 0 and argument.arg in ("self", "cls"):
            continue
        prefix = "*" if argument is arguments.vararg else "**" if argument is arguments.kwarg else ""
        kind = ast.unparse(argument.annotation) if argument.annotation else doc.types.get(argument.arg, "")
        details = [kind] if kind else []
        if argument.arg in defaults:
            details.append(f"default {ast.unparse(defaults[argument.arg])}")
        description = doc.params.get(argument.arg, "")
        row = f"- `{prefix}{argument.arg}`" + (f" ({'; '.join(details)})" if details else "")
        rows.append(row + (f": {description}" if description else ""))
    return "\n".join(rows) if rows else "- none"


def _outputs(node: ast.FunctionDef | ast.AsyncFunctionDef, doc: Documentation) -> str:
    kind = ast.unparse(node.returns) if node.returns else doc.types.get("return", "")
    text = doc.returns
    rows = []
    if kind or text:
        rows.append("- returns" + (f" `{kind}`" if kind else "") + (f": {text}" if text else ""))
    elif any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(node)):
        rows.append("- yields values (a generator)")
    elif any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(node)):
        rows.append("- returns a value (see Functionality)")
    else:
        rows.append("- returns None (it works by side effect)")
    rows += [f"- raises {line}" for line in doc.raises]
    return "\n".join(rows)


def domaineval_messages(task: FunctionTask) -> list[Message]:
    """DomainEval's instruction prompt for one task: the system message names the function,
    the user message is its code (context and reference; never the tests)."""
    name = task.entry_point.split(".")[-1]
    code = (task.context.strip() + "\n\n" + task.reference.strip()).strip()
    if len(code) > _MAX_CODE_CHARS:
        code = task.reference.strip()[:_MAX_CODE_CHARS]
    return [Message(role="system", content=DOMAINEVAL_SYSTEM.format(name=name)),
            Message(role="user", content=code)]


def clean_llm_instruction(text: str) -> str | None:
    """The instruction in a model's reply, or None when it lacks the three sections."""
    stripped = re.sub(r"^```[a-zA-Z]*\n|\n?```\s*$", "", text.strip()).strip()
    if all(section in stripped for section in ("Functionality", "Inputs", "Outputs")):
        return stripped
    return None


async def _generate_all(backend: ModelBackend, tasks: Sequence[FunctionTask],
                        params: SamplingParams) -> list[str]:
    replies = await asyncio.gather(*(backend.generate(task, domaineval_messages(task), params, 0)
                                     for task in tasks))
    await backend.aclose()
    return [reply.text for reply in replies]


def llm_instructions(backend: ModelBackend, tasks: Sequence[FunctionTask],
                     params: SamplingParams | None = None) -> list[str | None]:
    """One instruction per task from `backend` (None where the reply lacks the sections)."""
    params = params or SamplingParams(temperature=0.0, max_tokens=768)
    texts = asyncio.run(_generate_all(backend, tasks, params))
    return [clean_llm_instruction(text) for text in texts]
