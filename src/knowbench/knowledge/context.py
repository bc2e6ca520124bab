"""Turn retrieved chunks into the knowledge text of a prompt, within a token budget.

Each chunk is a block: a header line naming its kind, qualified name and location, then its
text (fenced as Python when it is code). Blocks go in rank order while they fit the budget;
the first that does not fit is cut at a line boundary (when a useful part of it fits) and the
rest are dropped. Token counts are approximate: 4 characters per token, as `Prompt` counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from knowbench.knowledge.corpus import KIND_LABELS, Chunk

MIN_PARTIAL_TOKENS = 40  # a cut block smaller than this is noise: drop it instead
TRUNCATION_NOTE = "… (truncated)"


def approx_tokens(text: str) -> int:
    return len(text) // 4


def chunk_header(chunk: Chunk, number: int | None = None) -> str:
    name = chunk.full_name or chunk.qualname or chunk.path
    prefix = f"[{number}] " if number is not None else ""
    return f"{prefix}{KIND_LABELS[chunk.kind]} · {name} · {chunk.location}"


def format_chunk(chunk: Chunk, number: int | None = None, text: str | None = None) -> str:
    body = (chunk.text if text is None else text).strip("\n")
    if chunk.is_code:
        body = f"```python\n{body}\n```"
    return f"{chunk_header(chunk, number)}\n{body}"


@dataclass(frozen=True)
class Placement:
    """What happened to one retrieved chunk when the prompt was assembled."""

    chunk: Chunk
    status: Literal["full", "truncated", "dropped"]
    tokens: int


def fit_chunks(chunks: list[Chunk], budget: int) -> tuple[str, list[Placement]]:
    """The knowledge text for `chunks` (in rank order) within `budget` tokens, and the fate of
    each chunk. `approx_tokens` of the text never exceeds `budget`."""
    limit = budget * 4 + 3  # the most characters whose approx_tokens is still <= budget
    blocks: list[str] = []
    placements: list[Placement] = []
    used = 0
    full = True
    for number, chunk in enumerate(chunks, 1):
        separator = 2 if blocks else 0  # the blank line between blocks
        block = format_chunk(chunk, number)
        if full and used + separator + len(block) <= limit:
            blocks.append(block)
            used += separator + len(block)
            placements.append(Placement(chunk, "full", approx_tokens(block)))
            continue
        if full:
            full = False
            partial = _cut(chunk, number, limit - used - separator)
            if partial is not None:
                blocks.append(partial)
                used += separator + len(partial)
                placements.append(Placement(chunk, "truncated", approx_tokens(partial)))
                continue
        placements.append(Placement(chunk, "dropped", 0))
    return "\n\n".join(blocks), placements


def _cut(chunk: Chunk, number: int, room: int) -> str | None:
    """The chunk's block cut at a line boundary to at most `room` characters, or None when
    too little of it would fit to be useful."""
    overhead = len(format_chunk(chunk, number, text="")) + len(TRUNCATION_NOTE) + 1
    kept: list[str] = []
    size = 0
    for line in chunk.text.splitlines():
        if overhead + size + len(line) + 1 > room:
            break
        kept.append(line)
        size += len(line) + 1
    if size < MIN_PARTIAL_TOKENS * 4:
        return None
    return format_chunk(chunk, number, text="\n".join(kept) + "\n" + TRUNCATION_NOTE)
