"""The part of a model reply that is its answer rather than its reasoning.

Reasoning models write their thinking in a tagged block before the answer: `<think>`,
`<thinking>` or `<reasoning>` (any case). Both the choice parser and code extraction read
only what follows that block, so both use `after_reasoning`:

- A block opens only at the start of the reply (after whitespace and special tokens such as
  `<|im_start|>assistant` or `<s>`); an opening tag anywhere else is text the reply talks
  about ("the completion must start with <think>", a regular expression
  `r"<think>.*?</think>"` in a reward function) and opens nothing.
- The block ends at the *last* closing tag of its name in the reply that is not quoted: not
  written inside inline code (`` `</think>` ``) or a string (`"</think>"`, `r'^.*?</think>'`:
  the word the tag is part of opens with a quote or backtick), nor in a fenced code block (there only a tag alone on its line counts, the end of a block whose
  draft left its fence open). So tags mentioned inside the block do not matter, and code
  after the block that holds the tag in a string or a fence is never its end. A block closed
  by another reasoning name (`<think>` ... `</thinking>`) ends at the last such tag when none
  of its own name follows. Several leading blocks are all skipped.
- A chat template may put the opening tag in the prompt, so the reply starts inside the block:
  when the reply opens with no tag, the last unquoted closing tag ends the block; with none,
  the whole reply is the answer.
- A block that never closes means the reply was cut off while still reasoning: None.

Each call scans the reply once per leading block: linear in its length.
"""

from __future__ import annotations

import re

_NAMES = r"(?:think|thinking|reasoning)"
_LEADING = re.compile(r"(?:\s|<\|[A-Za-z0-9_]+\|>(?:assistant\b)?|[<\u2039]\uff5c[^\uff5c\n]{1,40}\uff5c>|</?s>)*")
_OPEN = re.compile(rf"<({_NAMES})>", re.IGNORECASE)
_CLOSE = re.compile(rf"</({_NAMES})>", re.IGNORECASE)
_FENCE = re.compile(r"[ \t]*(?:`{3,}|~{3,})")
_QUOTE_SCAN = 300  # how much of its line before a tag is read for the word it is part of


def after_reasoning(reply: str) -> str | None:
    """`reply` without its leading reasoning blocks; None when a block never closes."""
    position = _LEADING.match(reply).end()  # type: ignore[union-attr]
    opening = _OPEN.match(reply, position)
    if opening is None:
        closing = _last_closing(reply, 0, None)
        return reply if closing is None else reply[closing:]
    end = position
    while opening is not None:
        name = opening.group(1).lower()
        found = _last_closing(reply, opening.end(), name)
        if found is None:
            return None
        end = found
        position = _LEADING.match(reply, end).end()  # type: ignore[union-attr]
        opening = _OPEN.match(reply, position)
    return reply[end:]


def _last_closing(reply: str, start: int, name: str | None) -> int | None:
    """Where the last unquoted closing tag after `start` ends: of `name` when there is one,
    else of any reasoning name (any name when `name` is None)."""
    if "</" not in reply:  # most replies: spare the line scan
        return None
    own = other = None
    in_fence = False
    line_start = start
    while line_start <= len(reply):
        line_end = reply.find("\n", line_start)
        line_end = len(reply) if line_end < 0 else line_end
        if _FENCE.match(reply, line_start, line_end):
            in_fence = not in_fence
        else:
            for tag in _CLOSE.finditer(reply, line_start, line_end):
                if in_fence and reply[line_start:line_end].strip() != tag.group():
                    continue
                if _is_quoted(reply[max(line_start, tag.start() - _QUOTE_SCAN) : tag.start()]):
                    continue
                if name is None or tag.group(1).lower() == name:
                    own = tag.end()
                else:
                    other = tag.end()
        line_start = line_end + 1
    return own if own is not None else other


def _is_quoted(before: str) -> bool:
    """Whether a tag preceded on its line by `before` is written inside inline code or a
    string: the word it is part of (what stands between it and the last space) opens with a
    quote or backtick (`` `</think>` ``, `'</think>'`, `r"^<think>.*?</think>`). Quotes further
    back on the line (an apostrophe, a quotation the reasoning ended) do not matter."""
    words = before.split()
    if not words or before[-1].isspace():
        return False
    word = words[-1]
    return any(char in "`'\"" and not (0 < index < len(word) - 1 and word[index - 1].isalnum()
                                       and word[index + 1].isalnum())  # not an apostrophe ("that's")
               for index, char in enumerate(word))
