"""The part of a model reply that is its answer rather than its reasoning.

Reasoning models write their thinking in a tagged block before the answer: `<think>`,
`<thinking>` or `<reasoning>` (any case). Both the choice parser and code extraction read
only what follows that block, so both use `after_reasoning`:

- A block counts only when it *opens* the reply (after whitespace and special tokens such as
  `<|im_start|>assistant` or `<s>`); a tag written anywhere else is text the reply talks
  about (a regular expression `r"<think>.*?</think>"` in a reward function, "the template
  strips everything before `</think>`") and is left alone.
- The block ends at its own closing tag; tags of the same name opened inside it (a mention of
  a whole `<think>...</think>` pair) nest. Several leading blocks are all skipped.
- A chat template may put the opening tag in the prompt, so the reply starts inside the block:
  when the reply opens with no tag, the first closing tag that stands at the start or the end
  of a line (never inside inline code or quotes) ends it, provided no opening tag comes before
  it.
- A block that never closes means the reply was cut off while still reasoning: None.
"""

from __future__ import annotations

import re

_NAMES = r"(?:think|thinking|reasoning)"
_LEADING = re.compile(r"(?:\s|<\|[A-Za-z0-9_]+\|>(?:assistant\b)?|</?s>)*")
_OPEN = re.compile(rf"<({_NAMES})>", re.IGNORECASE)
_TAG = re.compile(rf"<(/?)({_NAMES})>", re.IGNORECASE)
# A closing tag on its own at a line's start or end, not quoted: the end of a block whose
# opening tag the chat template wrote.
_BARE_CLOSE = re.compile(
    rf"^[ \t]*</{_NAMES}>|(?<![`'\"/\\])</{_NAMES}>[ \t]*$", re.IGNORECASE | re.MULTILINE
)


def after_reasoning(reply: str) -> str | None:
    """`reply` without its leading reasoning blocks; None when a block never closes."""
    position = _LEADING.match(reply).end()  # type: ignore[union-attr]
    opening = _OPEN.match(reply, position)
    if opening is None:
        return _after_prompt_opened_block(reply)
    while opening is not None:
        end = _block_end(reply, opening.end(), opening.group(1).lower())
        if end is None:
            return None
        position = _LEADING.match(reply, end).end()  # type: ignore[union-attr]
        opening = _OPEN.match(reply, position)
    return reply[end:]


def _block_end(reply: str, start: int, name: str) -> int | None:
    """Where the block of tag `name` opened just before `start` ends (after its closing tag)."""
    depth = 1
    for tag in _TAG.finditer(reply, start):
        if tag.group(2).lower() != name:
            continue
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return tag.end()
    return None


def _after_prompt_opened_block(reply: str) -> str:
    closing = _BARE_CLOSE.search(reply)
    if closing is None or _OPEN.search(reply, 0, closing.start()):
        return reply
    return reply[closing.end():]
