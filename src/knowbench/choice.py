"""Letters from a multiple-choice reply.

The parser looks for the reply's final answer in this order, stopping at the first that
yields letters:

1. the last explicit answer marker: `\\boxed{...}`, "answer:", "the answer is", "final
   answer", "the correct options are", ...; its letters are read up to the end of the
   sentence (or from the next line when the marker ends its line);
2. the last line that holds nothing but letters ("B", "**D**", "(A)", "A, C");
3. the last paragraph that mentions option letters standing alone.

A letter counts only when it stands alone: capital, not part of a word or identifier
(`T_BS`, `X-ray`), not the name of a LaTeX command (`\\text` yields nothing), and not the
English article "A" or pronoun "I" before a lowercase word ("A good choice is B" gives B).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_BOXED = re.compile(r"\\boxed\s*\{")
_MARKER = re.compile(
    r"\b(?:final\s+(?:answers?|choices?|selections?)|answers?(?:\s*\(s\))?"
    r"|correct\s+(?:options?|choices?|answers?|letters?)(?:\s*\(s\))?)"
    r"[\s*_]*(?::|=|\bis\b|\bare\b|\bwould\s+be\b|\bshould\s+be\b)",
    re.IGNORECASE,
)
_LETTER = re.compile(r"(?<![A-Za-z0-9_\\.-])[A-Z](?![A-Za-z0-9_]|-[A-Za-z])")
_SENTENCE_END = re.compile(
    r"[.;!?](?=\s|$)|\b(?:while|whereas|but|because|since|as|although|except|not|however)\b",
    re.IGNORECASE,
)
_LONE_LETTERS = re.compile(
    r"^[\s*_#>`.:-]*(?i:options?\s*)?\(?[A-Z]\)?"
    r"(?:\s*(?:,|and|&|/|\+|or)?\s*\(?[A-Z]\)?)*[\s*_`.]*$",
)
_LABEL_AFTER = re.compile(r"[)*\]]*\s*:")  # "B:", "(B):", "**B**:" anywhere
_LINE_START = re.compile(  # what may precede a label at the start of a line
    r"[ \t>]*(?:\d+[.)]|[-*+•])?[\s*_#]*"
    r"(?i:(?:analy[sz]e|evaluate|evaluating|consider|check|review|examine)\s+)?"
    r"(?i:(?:option|choice|statement)\s*)?[(\[]?"
)
_OPENING_MARKUP = " \t\n*_#>(["
_LABEL_END = re.compile(r"[)\].:]|[*_]+\s*[).:]")
# Words that follow a letter naming an option ("A is right") but never the article "A".
_AFTER_OPTION = frozenset({
    "is", "are", "was", "were", "and", "or", "also", "alone", "only", "too", "seems",
    "appears", "remains", "would", "should", "could", "might", "must", "can", "may", "will",
    "has", "have", "does", "correctly", "accurately", "describes", "states", "represents",
    "captures", "reflects",
})


def parse_choice(reply: str, letters: Sequence[str], multiple: bool) -> list[str]:
    """The option letters `reply` chooses: sorted, unique, each one of `letters`.

    With `multiple` False the result has at most one letter, the last one of the answer
    found. An empty list means the reply names no option.
    """
    allowed = set(letters)
    for region in _answer_regions(reply):
        found = [letter for letter in _standalone(region) if letter in allowed]
        if found:
            return sorted(set(found)) if multiple else [found[-1]]
    return []


def _answer_regions(reply: str) -> list[str]:
    """Candidate answer texts, most authoritative first (see the module docstring)."""
    return [*_marker_regions(reply), *_lone_letter_lines(reply), *_paragraphs(reply)]


def _marker_regions(reply: str) -> list[str]:
    """The text each answer marker introduces, the last marker first."""
    found: list[tuple[int, str]] = []
    for match in _BOXED.finditer(reply):
        found.append((match.start(), _braced(reply, match.end())))
    for match in _MARKER.finditer(reply):
        found.append((match.start(), _sentence_after(reply, match.end())))
    return [text for _, text in sorted(found, key=lambda item: item[0], reverse=True)]


def _braced(text: str, start: int) -> str:
    """The text from `start` up to the brace that closes the one just before `start`."""
    depth = 1
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index]
    return text[start:]


def _sentence_after(text: str, start: int) -> str:
    """The rest of the sentence after a marker, or the next non-empty line if none."""
    lines = text[start:].split("\n")
    if not _is_blank(lines[0]):
        return _cut_sentence(lines[0])
    following = next((line for line in lines[1:] if not _is_blank(line)), "")
    return _cut_sentence(following)


def _cut_sentence(line: str) -> str:
    end = _SENTENCE_END.search(line)
    return line if end is None else line[: end.start()]


def _is_blank(text: str) -> bool:
    return not text.strip(" \t*_:#>`")


def _lone_letter_lines(reply: str) -> list[str]:
    """Lines that hold nothing but option letters, the last first."""
    lines = [_LATEX_COMMAND.sub(" ", line) for line in reply.splitlines()]
    return [line for line in reversed(lines) if line.strip() and _LONE_LETTERS.match(line)]


def _paragraphs(reply: str) -> list[str]:
    """The reply's paragraphs, the last first, without option-analysis headers."""
    blocks = re.split(r"\n\s*\n", _drop_header_labels(reply))
    return [block for block in reversed(blocks) if block.strip()]


def _drop_header_labels(text: str) -> str:
    """Blank out letters used as labels of an option's analysis ("2. **Option (B):**",
    "(A) Fusion needs ...", "A. ..."): they say what is discussed, not what is chosen."""
    cleaned = _LATEX_COMMAND.sub(" ", text)
    opening = len(cleaned) - len(cleaned.lstrip(_OPENING_MARKUP))
    spans = [m.span() for m in _LETTER.finditer(cleaned)
             if m.start() > opening and _is_label(cleaned, m.start(), m.end())]
    for start, end in spans:
        cleaned = cleaned[:start] + " " * (end - start) + cleaned[end:]
    return cleaned


def _is_label(text: str, start: int, end: int) -> bool:
    """Whether the letter at text[start:end] labels a line or item rather than answers.
    (A reply that opens with "B. Because ..." answers B, so its first letter is no label.)"""
    if _LABEL_AFTER.match(text, end):
        return True
    if not _LINE_START.fullmatch(text[text.rfind("\n", 0, start) + 1 : start]):
        return False
    label_end = _LABEL_END.match(text, end)
    if label_end is None:
        return False
    word = re.match(r"[\s*_]*([A-Za-z]+)", text[label_end.end() :])
    return word is None or word.group(1).lower() not in _AFTER_OPTION


def _standalone(text: str) -> list[str]:
    """Capital letters standing alone in `text`, in order, skipping LaTeX command names and
    the article "A" / pronoun "I" before a lowercase word."""
    cleaned = _LATEX_COMMAND.sub(" ", text)
    letters: list[str] = []
    for match in _LETTER.finditer(cleaned):
        if not _is_word_use(match.group(), cleaned[match.end():]):
            letters.append(match.group())
    return letters


def _is_word_use(letter: str, after: str) -> bool:
    """Whether `letter` is the English word "A" or "I" here rather than an option."""
    if letter not in {"A", "I"}:
        return False
    if after.startswith("'"):
        return True  # I'm, I've
    word = re.match(r"\s+([a-z][a-z-]*)", after)
    return word is not None and word.group(1) not in _AFTER_OPTION
