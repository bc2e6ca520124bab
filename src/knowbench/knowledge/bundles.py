"""Knowledge cells: which parts of a task's `KnowledgeBundle` an oracle method shows.

NovelAPIBench decomposes API knowledge into S (signature: qualified name, parameters, return
type), E (usage examples), M (mechanism prose) and C (implementation source without
docstrings), and studies combinations of them ("cells"). `S_name` is the qualified name alone,
without parameters; `Full` is S+E+M+C. Examples whose execution failed are never shown.
"""

from __future__ import annotations

from knowbench.benchmark.schema import BundleSignature, KnowledgeBundle

CELLS: dict[str, tuple[str, ...]] = {
    "S_name": ("S_name",),
    "S": ("S",),
    "E": ("E",),
    "M": ("M",),
    "C": ("C",),
    "S+M": ("S", "M"),
    "S+E": ("S", "E"),
    "S+C": ("S", "C"),
    "S+M+C": ("S", "M", "C"),
    "S+E+C": ("S", "E", "C"),
    "Full": ("S", "E", "M", "C"),
}


def render_cell(bundle: KnowledgeBundle, cell: str) -> tuple[str, dict[str, bool]]:
    """The knowledge text of `cell` for `bundle`, and which of its components had content.

    Raises KeyError for an unknown cell (callers validate names against CELLS first).
    """
    parts: list[str] = []
    present: dict[str, bool] = {}
    for component in CELLS[cell]:
        text = _COMPONENTS[component](bundle)
        present[component] = bool(text)
        if text:
            parts.append(text)
    return "\n\n".join(parts), present


def signature_line(signature: BundleSignature) -> str:
    """'pkg.func(a: int, b: str = 'x') -> bool'."""
    params = []
    for parameter in signature.parameters:
        text = parameter.name
        if parameter.type:
            text += f": {parameter.type}"
        if parameter.default is not None:
            text += f" = {parameter.default}" if parameter.type else f"={parameter.default}"
        params.append(text)
    line = f"{signature.qualified_name}({', '.join(params)})"
    return f"{line} -> {signature.returns}" if signature.returns else line


def _name(bundle: KnowledgeBundle) -> str:
    return f"API: `{bundle.signature.qualified_name}`"


def _signature(bundle: KnowledgeBundle) -> str:
    signature = bundle.signature
    lines = ["Signature (S):", f"```python\n{signature_line(signature)}\n```"]
    described = [p for p in signature.parameters if p.description or p.type or p.default is not None]
    if described:
        lines.append("Parameters:")
        for parameter in described:
            facts = [fact for fact in (parameter.type,
                                       None if parameter.default is None
                                       else f"default {parameter.default}") if fact]
            detail = f" ({', '.join(facts)})" if facts else ""
            text = f": {parameter.description.strip()}" if parameter.description.strip() else ""
            lines.append(f"- `{parameter.name}`{detail}{text}")
    if signature.returns:
        lines.append(f"Returns: `{signature.returns}`")
    return "\n".join(lines)


def _examples(bundle: KnowledgeBundle) -> str:
    shown = [example for example in bundle.examples if example.status != "failed"]
    if not shown:
        return ""
    blocks = [f"```python\n{example.code.strip()}\n```" for example in shown]
    return "Usage examples (E):\n" + "\n\n".join(blocks)


def _mechanism(bundle: KnowledgeBundle) -> str:
    return f"How it works (M):\n{bundle.mechanism.strip()}" if bundle.mechanism.strip() else ""


def _source(bundle: KnowledgeBundle) -> str:
    if not bundle.source.strip():
        return ""
    return f"Implementation (C):\n```python\n{bundle.source.strip()}\n```"


_COMPONENTS = {"S_name": _name, "S": _signature, "E": _examples, "M": _mechanism, "C": _source}
