"""Letters from a multiple-choice reply.

A reply answers only when it *states* a choice; a reply that never gets there (cut off by a
token limit in the middle of its reasoning) answers nothing, and the parser returns no
letters rather than a guess from letters mentioned in the reasoning. The steps:

1. **Reasoning blocks.** A reasoning block that opens the reply (`<think>`, `<thinking>`,
   `<reasoning>`, any case) is skipped up to the last closing tag of its name that is not
   quoted (inline code, a string, a fence), as code extraction does (`knowbench.reasoning`);
   a reply still inside one is unanswered. Opening tags anywhere else are text the reply
   talks about.
2. **Run-on.** A model that answers and then keeps generating (a chat-template turn such as
   "Human:", "User:", "Assistant:", a special token such as `<|im_start|>` or `<|file_sep|>`,
   a new "Question"/"Instruction: choose" block, or a new question line followed by option
   lines "- (A) ...") is cut at the first such boundary *after* its first answer; what follows
   is not its reply to this question. Boundaries before any answer are kept (a reply may
   restate the question first).
3. **Explicit answers**, the last one wins: `\\boxed{...}`, `<answer>...</answer>`, "Answer:",
   "the answer is", "final answer", "the correct options are", `{"answer": ...}`, ...; the
   letters are read inside the braces or
   tags, or up to the end of the marker's sentence. When the marker ends its line, the list
   that follows is read: every line of nothing but letters, and the leading letter of every
   list item ("- **A**: text", "2. (C) text"; not letters in the item's text, nothing from an
   item that rejects its letter, "- B: incorrect"), up to the first other line; with no list,
   the next non-blank line. With `multiple` False a list that explains every option gives
   the item it marks correct ("- **C** is correct.", "- C: correct"), else the one item it
   does not reject ("- A is wrong because ...", "This is incorrect", a cross), else the
   marker's next line as above. A parenthesis that holds a word is an aside and is skipped
   ("C (B is a common misconception)"; "(A)" is a letter, "(and D)" and "(also D)" add D);
   the sentence ends at ".", ";", "!", "?", a dash clause ("C — unlike B"; "A - B - D" is a
   list), or a word that starts a reason, a contrast or a condition ("because", "not",
   "rather than", "instead of", "unlike", "over", "excluding", "if", ...). A JSON answer
   key's value ends at its closing quote or bracket.
   A marker where "answer" follows a preposition ("Explanation of the answer:"; not "for the
   final answer:") or that ends its line after a plan ("Let me evaluate each option to
   identify the correct answers:") is not an answer. The kinds of answer, strongest first:
   a plain or hedged one; a hypothetical one ("the answer would be C if the flag were set":
   "would/could/might be" under a condition contrary to fact or an assumption; not "If X, the
   answer is C", nor "the answer would be C, since it works even if ..."); a marker of the rejected options ("Incorrect answers:", "The
   incorrect answer is B", "the other answers are"), which counts only when steps 4 and 5
   find no choice either (the answer of a NOT-question). A hedged answer ("the answer is
   likely B", "I think the answer is B") gives way only to a later explicit one: a marker
   (read as the last one), or a last non-blank line of nothing but letters ("Wait, B fails.
   ... **C**"); never to prose, headings or explanations ("so the one that fails is A").
   Echoed instructions are not answers: a box that describes the answer form ("\\boxed{LETTER}
   for single-choice or \\boxed{A,B} for multiple-choice") and a quoted marker ("a line
   'Answer: X'") are skipped.
4. **Lone-letter lines** ("B", "**D**", "(A)", "A, C"), the last first, and
5. **a choice stated in prose** in the last paragraph, its last 4000 characters ("option C
   is correct", "A good choice is B", "So B.", "Both A and C.", "Correct: B, C"), or the
   letter the reply opens with ("B. Because ...", "B, because ..."); letters after a label or
   clause that rejects them ("Incorrect: A, D", "Eliminated: A", "The statement that is NOT
   true is C") are chosen only when nothing else is (before the opening letter)
   -- steps 4 and 5 only when the reply is complete: its last line ends a sentence (or is
   itself a lone-letter line), or the reply is a single line.
   Letters merely mentioned in reasoning ("Analyze Option (B)", "as mentioned in E", the
   article "A") are never read.

Letters count in the forms models write them: "**A** and **C**", "(A)", "`A`", "'A'",
"['A', 'C']", a JSON `{"answer": ["A", "C"]}`, full-width "Answer：Ｂ" (read as ASCII), and
lower case only as the whole of a labelled answer ("Answer: b, d", "The answer is: b",
`\\boxed{b}`), letters separated by commas or "and" ("Answer: a cache", "Answer: i.e. ..."
and a cut-off "the answer is a" give no letter).

A letter counts only when it stands alone: capital, not part of a word or identifier
(`T_BS`, `X-ray`), not the name of a LaTeX command (`\\text` yields nothing), and not the
English article "A" or pronoun "I" before a lowercase word ("A good choice is B" gives B;
"I'm" is the pronoun, "A's" the option).
With `multiple` False the last letter of the answer found is returned.

Letters written as one run of capitals ("BD", `\\boxed{ABD}`, `<answer>AC</answer>`) are read
only in an answer position: the whole text of an explicit answer, or the whole last line of
the reply; only when its letters are distinct options in option order (else the run is a
word or an acronym: "API", "OK", "CBD", "BAD", "FACE"); and only for multiple choice (one
option is one letter).

Every step is linear in the length of the reply: each pass scans it at most twice (the first
answer forward, the last one backward from the run-on), every region read around a match is
bounded, and no pattern nests unbounded repetitions (a line of letters separated by runs of
spaces once made the lone-letter pattern backtrack exponentially).

What does not hold: a cut-off reply that had already written an explicit answer marker ("the
answer is B", then more checking that was cut off) gives that answer; a run-on that uses none
of the boundaries above is read as part of the reply; an echoed instruction in another wording
than the forms above can be read as an answer; and a single-choice reply that names two
options ("\\boxed{C} and \\boxed{D}") gives the last one, whatever it says about them (and a
multiple-choice reply that splits its answer into several boxes gives the last box). Ranges
and sets in words ("A-D", "all except B", "all of the above"), answers marked in other
languages ("答案：B") and letters separated by ";" ("Answer: A; C" gives A) are not read;
joined letters out of option order ("\\boxed{BA}") are read as a word; a hedged answer that
the reply corrects only in prose ("I think B. ... Actually option C is correct.") keeps the
hedged letter; lower case after "the answer is" without a colon is not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from knowbench.reasoning import after_reasoning

_REGION = 1000  # how far an answer marker's text is read
_BRACED = 500  # how far the closing brace of \boxed{ is looked for
_LONE_LINE = 200  # longest line read as a lone-letter line
_LABEL_INDENT = 80  # how far into its line a letter may stand and still be a label
_PARAGRAPH = 4000  # how much of the last paragraph is read for a choice stated in prose

_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_BOXED = re.compile(r"\\boxed\s*\{")
_ANSWER_TAG = re.compile(r"<answer>(?![`'\"])", re.IGNORECASE)
_ANSWER_TAG_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_MARKER = re.compile(
    r"\b(?:final\s+(?:answers?|choices?|selections?)|answers?(?:\s*\(s\))?"
    r"|correct\s+(?:options?|choices?|answers?|letters?)(?:\s*\(s\))?)"
    r"(?P<key>[\"'])?[ \t*_]*(?::|=|\bis\b|\bare\b|\bwould\s+be\b|\bshould\s+be\b)",
    re.IGNORECASE,
)
# A box that describes the answer form rather than giving an answer.
_FORM_DESCRIPTION = re.compile(r"[ \t]*(?:for|in)\s+(?:a\s+)?(?:single|multiple|multi)[- ]?"
                               r"(?:choice|select|answer|option)", re.IGNORECASE)
_CLAUSE = 200  # how far around a marker its sentence is read
# Words before a marker that make it name the rejected options ("Incorrect answers:"): the
# answer of a NOT-question, or the options left out beside the chosen ones.
_REJECTING_BEFORE = re.compile(
    r"\b(?:incorrect|wrong|other|eliminated|excluded|rejected|invalid|false|bad|not|non)"
    r"[ \t*_-]*(?:the[ \t]+)?$",
    re.IGNORECASE,
)
# A preposition that makes "answer" its object ("Explanation of the answer:").
_PREPOSITION_BEFORE = re.compile(
    r"\b(?:of|for|behind|about)[ \t]+(?:the|my|this|that|our|each|an?)[ \t*_-]*$", re.IGNORECASE
)
# A marker that announces a plan, not an answer ("To determine the correct answer:").
_PLAN_BEFORE = re.compile(
    r"\b(?:to|let[ \t]+me|let's|let[ \t]+us|I'll|I[ \t]+will|we'll|we[ \t]+will)[ \t]+"
    r"(?:identify|determine|find|figure[ \t]+out|select|choose|pick|decide|work[ \t]+out)\b",
    re.IGNORECASE,
)
# A condition contrary to fact ("if the flag were set", "if we had used"): the answer under it
# is hypothetical; "If I had to pick one" and "if it matches" state the reply's own answer.
_COUNTERFACTUAL = re.compile(
    r"\b(?:assuming|suppose|supposing)\b|^[ \t*_(]*had\b"
    r"|\b(?:if|unless)\b[^.!?\n]*?\b(?:were|had(?![ \t]+to\b))\b",
    re.IGNORECASE,
)
_HYPOTHETICAL_MARKER = re.compile(r"\b(?:would|could|might)\s+be\s*$", re.IGNORECASE)
_HEDGE_AFTER = re.compile(
    r"[ \t*_:]*(?:most[ \t]+)?(?:likely|probably|possibly|perhaps|maybe|presumably|tentatively)\b",
    re.IGNORECASE,
)
_HEDGE_BEFORE = re.compile(
    r"\b(?:I[ \t]+(?:think|believe|guess|suspect)|maybe|perhaps|probably|possibly)\b", re.IGNORECASE
)
_QUOTE_BEFORE = re.compile(r"['\"`\u2018\u201c][ \t*_]*$")
_LETTER = re.compile(r"(?<![A-Za-z0-9_\\.-])[A-Z](?![A-Za-z0-9_]|-[A-Za-z])")
_JOINED = re.compile(r"[\s*_`#>$(){}\[\].:!]*([A-Z]{2,26})[\s*_`$(){}\[\].!]*")
# An item of a list that gives an answer: "- **A**: text", "1. (C) text", "* Option B".
_LIST_ITEM = re.compile(
    r"[ \t>]*(?:[-*+\u2022]|\d+[.)])[ \t]+[*_`]*(?i:(?:options?|choices?|statements?)[ \t]*)?"
    r"[(\[]?[*_`]*([A-Z])(?![A-Za-z0-9_'\u2019-])[*_`]*(?=[ \t]*(?:[):.\]\-\u2013\u2014*_`]|$)"
    r"|[ \t]+[A-Za-z])"
)
# What an item's text says of its option first: "- B: incorrect", "- **B** is wrong because",
# "2. **Option B**: This is incorrect", "- C: correct", "- C ✓".
_VERDICT_PREFIX = (r"[ \t)\]:.*_`\-\u2013\u2014]*(?i:(?:this|it|which|that)[ \t]+)?"
                   r"(?i:(?:is|are)[ \t]+)?")
_REJECTED = re.compile(
    _VERDICT_PREFIX
    + r"(?:(?i:incorrect|wrong|false|invalid|not\b|no\b)|[\u2717\u2718\u274c\u00d7])"
)
_APPROVED = re.compile(
    _VERDICT_PREFIX + r"(?:(?i:correct|right|true|valid)\b|[\u2713\u2714\u2705])"
)
_WORD_AFTER = re.compile(r"\s+([a-z][a-z-]*)")
# What ends the letters of an answer: a sentence's end, a dash clause, a word that starts
# a reason, a contrast or a condition ("C rather than B", "C, unlike B", "C if D is set").
_SENTENCE_END = re.compile(
    r"[.;!?](?=\s|$)|\u2014|[ \t][-\u2013]{1,2}[ \t]"
    r"|\b(?:while|whereas|but|because|since|as|although|except|excluding|not|however|rather"
    r"|instead|unlike|over|versus|vs|if|unless)\b",
    re.IGNORECASE,
)
_PARENTHESIS = re.compile(r"\([^()\n]*\)?")
# A parenthesis that adds letters to the answer: "C (and D)", "B (also D)".
_ADDITION = re.compile(r"\([ \t]*(?i:and|also|plus|as[ \t]+well[ \t]+as)[ \t]+[^()\n]*\)")
_WORD = re.compile(r"[A-Za-z]{2}")
# Where a model's reply to this question ends and invented text begins.
_RUN_ON = re.compile(
    r"<\|[A-Za-z_]+\|>"
    r"|^[ \t#*>]*(?:Human|User|Assistant|System)[ \t*]*:"
    r"|^[ \t#*>]*(?:Question|Problem)(?:[ \t]*\d+)?[ \t*]*(?::|$)"
    r"|^[ \t]*Instruction:[ \t]*choose\b"
    r"|^[^\n]*\?[ \t*]*\n(?:[ \t]*\n){0,2}[ \t]*(?:[-*+][ \t]*)?\(?A[).][ \t]",
    re.MULTILINE | re.IGNORECASE,
)
_SEP = r"(?:[ \t]*(?:,|&|/|\+)[ \t]*(?:and[ \t]+|or[ \t]+)?|[ \t]+(?:and|or)[ \t]+|[ \t]+)"
# One letter as it is written in a list: "A", "(A)", "**A**", "**(A)**", "`A`".
_UNIT = r"[*_`]{0,2}\(?[*_`]{0,2}[A-Z][*_`]{0,2}\)?[*_`]{0,2}"
_LONE_LETTERS = re.compile(
    r"[ \t*_#>`.:-]*(?i:options?[ \t]*)?" + _UNIT + "(?:" + _SEP + _UNIT + r"){0,25}[ \t*_`.]*"
)
_LETTER_LIST = _UNIT + r"(?:(?:[ \t]*,[ \t]*(?:and[ \t]+)?|[ \t]+and[ \t]+)" + _UNIT + r"){0,25}"
# Forms written in full width (U+FF01..U+FF5E: "Answer：Ｂ") and CJK punctuation, as ASCII.
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3001: ",", 0x3002: "."}
_FULL_WIDTH_CHAR = re.compile("[\uff01-\uff5e\u3001\u3002]")
# An answer of nothing but lower-case letters: "b, d", "(b)", "'a' and 'c'"; not "i.e.".
_LOWER_UNIT = r"[*_`'\"(\[\u2018\u201c]{0,3}[a-z][*_`'\")\]\u2019\u201d]{0,3}"
_LOWER_LETTER = re.compile(r"(?<![a-z])[a-z](?![a-z])")
_LOWER_ANSWER = re.compile(
    r"[ \t]*" + _LOWER_UNIT + r"(?:(?:[ \t]*[,&/+][ \t]*(?:and[ \t]+|or[ \t]+)?|[ \t]+(?:and|or)[ \t]+"
    r"|[ \t]+)" + _LOWER_UNIT + r"){0,25}[ \t.!*_]*"
)
_DASHED = re.compile(_UNIT + r"(?:[ \t]+[-\u2013][ \t]+" + _UNIT + r"){1,25}[ \t.]*")
# Prose that states a choice: "option C is correct", "A and C are right", "the best is B".
_CHOICE_STATED = re.compile(
    r"(?:\b(?i:options?|choices?)[ \t]+)?(?P<a>" + _LETTER_LIST + r")[ \t*_]+"
    r"(?i:is|are|seems|appears|would[ \t]+be|must[ \t]+be)[ \t]+(?i:the[ \t]+)?(?i:most[ \t]+)?"
    r"(?i:correct|right|best|true|valid|accurate|answer)\b"
    r"|\b(?i:is|are|be|choose|chose|select|pick|go[ \t]+with|answer|so|thus|hence|therefore"
    r"|both)[ \t]*[:,]?[ \t]+"
    r"(?i:options?[ \t]+)?(?P<b>" + _LETTER_LIST + r")[ \t*_]*(?=[.!;,]|$)"
    r"|:[ \t*_]*(?P<c>" + _LETTER_LIST + r")[ \t*_.!]*$",
    re.MULTILINE,
)
# Words that make a label or clause name the options left out ("Incorrect: A, D").
_REJECTING = re.compile(
    r"\b(?:incorrect|wrong|false|invalid|eliminated?|excluded?|rejected?|ruled[ \t]+out|discard"
    r"(?:ed)?|distractors?|not|none|other|bad)\b",
    re.IGNORECASE,
)
_CHOOSING = re.compile(
    r"\b(?:go(?:ing)?[ \t]+with|choose|chose|select|pick|so|thus|hence|therefore|answer|leaves?"
    r"|leaving)\b",
    re.IGNORECASE,
)
_OPENING_ANSWER = re.compile(r"[ \t\n*_#>]*\(?([A-Z])\)?[).:,][ \t]")
_SENTENCE_CLOSERS = frozenset(".!?)]*_`\"'\u201d")
# What may stand before a label at the start of its line: "2. **Analyze Option (B):**",
# "*   **Step 2: Evaluate option (A).**", "(C) Using ...".
_LINE_START = re.compile(
    r"[ \t>]*(?:\d+[.)]|[-*+\u2022])?[ \t*_#]*"
    r"(?i:step[ \t]*\d+[ \t]*[:.][ \t]*)?"
    r"(?i:(?:analy[sz]e|evaluate|evaluating|consider|check|review|examine)[ \t]+)?"
    r"(?i:(?:option|choice|statement)[ \t]*)?[(\[]?"
)
_LABEL_END = re.compile(r"[)\].:]|[*_]+[ \t]*[).:]")
_LABEL_AFTER = re.compile(r"[)*\]]*[ \t]*:")
_LABEL_WORD = re.compile(r"[ \t*_]*([A-Za-z]+)")
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
    found. An empty list means the reply names no option (see the module docstring).
    """
    allowed = set(letters)
    text = after_reasoning(reply)
    if text is None:
        return []
    if _FULL_WIDTH_CHAR.search(text):  # translating costs more than looking
        text = text.translate(_FULL_WIDTH)

    def pick(found: list[str]) -> list[str]:
        found = [letter for letter in found if letter in allowed]
        if not found:
            return []
        return sorted(set(found)) if multiple else [found[-1]]

    joinable = allowed if multiple else set()

    def read(region: Region) -> list[str]:
        """The letters of text in an answer position."""
        return (pick(_joined(region.text, joinable)) or pick(_standalone(region.text))
                or (pick(_lower_case(region.text)) if region.labelled else []))

    # The first answer (explicit, or a line of letters) decides where a run-on starts;
    # every search below stops at the first hit, so each line and marker is read at most twice.
    spans = _answer_spans(text)
    firsts = [next((region.end for region in _regions(text, spans, multiple) if read(region)),
                   None),
              next((end for end, line in _lone_letter_lines(text) if pick(_standalone(line))),
                   None)]
    found = [end for end in firsts if end is not None]
    if found:
        text = text[: _run_on_start(text, min(found))]
    explicit, doubt, end = _last_answer(text, spans, multiple, read)
    if explicit and doubt in {"", "conditional"}:
        return explicit
    if doubt == "hedged":
        # "The answer is likely B. Let me check. ... **C**": only a line of nothing but
        # letters that ends the reply overrides it (a later marker already has).
        return _final_letters(text[end:], pick, joinable) or explicit
    # No answer marker, or one that names rejected options ("The incorrect statement is C"):
    # a choice the reply states wins; the rejected options only when it states none.
    chosen, rejected = _implicit_choice(text, pick, joinable)
    if chosen or explicit:
        return chosen or explicit
    if rejected:
        return rejected
    first = _OPENING_ANSWER.match(text)
    return pick([first.group(1)]) if first and _is_complete(text) else []


def _implicit_choice(text: str, pick: Callable[[list[str]], list[str]],
                     joinable: set[str]) -> tuple[list[str], list[str]]:
    """Letters of a reply without an explicit answer, and letters it names as rejected: its
    last line as letters of `joinable` joined, a line of letters, a choice stated in prose."""
    if chosen := _final_letters(text, pick, joinable):
        return chosen, []
    if not _is_complete(text):
        return [], []
    lone = (pick(_standalone(line)) for _, line in _lone_letter_lines(text, backward=True))
    if chosen := next((letters for letters in lone if letters), []):
        return chosen, []
    chosen, rejected = _stated_choice(text)
    return pick(chosen), pick(rejected)


def _final_letters(text: str, pick: Callable[[list[str]], list[str]],
                   joinable: set[str]) -> list[str]:
    """The letters of the last non-blank line of `text` when it holds nothing but letters
    ("C", "**C**", "A, C", or a run "AC" of `joinable`), unless a heading or label above it
    rejects them ("### Eliminated")."""
    line = _final_line(text)
    if _under_rejecting_heading(text, len(text.rstrip()) - len(line)):
        return []
    if chosen := pick(_joined(line, joinable)):
        return chosen
    if len(line) <= _LONE_LINE and _LONE_LETTERS.fullmatch(_LATEX_COMMAND.sub(" ", line)):
        return pick(_standalone(line))
    return []


def _run_on_start(text: str, after: int) -> int:
    """Where the reply runs on into invented text after its first answer (ending at `after`)."""
    boundary = _RUN_ON.search(text, after)
    return len(text) if boundary is None else boundary.start()


Span = tuple[int, int, str]  # start, end, kind: "box", "tag" (<answer>) or "marker"


class Region(NamedTuple):
    """The text of one explicit answer: where it ends, what it says, how its sentence
    qualifies it ("", "hedged", "conditional" or "rejecting"), and whether it is labelled
    (a box, a tag, "Answer:"), where lower-case letters count."""

    end: int
    text: str
    doubt: str
    labelled: bool


def _answer_spans(text: str) -> list[Span]:
    """Every `\\boxed{`, `<answer>` tag and answer marker, in order of position."""
    boxes = [(match.start(), match.end(), "box") for match in _BOXED.finditer(text)]
    tags = [(match.start(), match.end(), "tag") for match in _ANSWER_TAG.finditer(text)
            if text[match.start() - 1 : match.start()] not in {"`", "'", '"'}]  # quoted: a mention
    markers = [(match.start(), match.end(), "marker") for match in _MARKER.finditer(text)
               if match.group("key") or not _QUOTE_BEFORE.search(text, max(0, match.start() - 3),
                                                                 match.start())]
    return sorted(boxes + tags + markers)


def _last_answer(text: str, spans: list[Span], multiple: bool,
                 read: Callable[[Region], list[str]]) -> tuple[list[str], str, int]:
    """The letters of the last explicit answer in `text`, its doubt and where it ends: the
    last plain or hedged one ("the answer is likely B"), else the last conditional one ("the
    answer would be C if ..."), else the last that names rejected options."""
    fallback: dict[str, tuple[list[str], str, int]] = {}
    for region in _regions(text, reversed(spans), multiple):
        if region.end > len(text) or not (letters := read(region)):
            continue
        if region.doubt in {"", "hedged"}:
            return letters, region.doubt, region.end
        fallback.setdefault(region.doubt, (letters, region.doubt, region.end))
    return fallback.get("conditional") or fallback.get("rejecting") or ([], "", 0)


def _regions(text: str, spans: Iterable[Span], multiple: bool) -> Iterator[Region]:
    """The region of each span in turn, skipping echoed answer forms, markers that make
    "answer" the object of a preposition ("explanation of the answer:") and markers that
    announce a plan ("To determine the correct answer:")."""
    for start, end, kind in spans:
        if end > len(text):
            continue
        if kind == "box":
            region = _braced(text, end)
            after = end + len(region) + 1
            if not _FORM_DESCRIPTION.match(text, after):
                yield Region(after, region, "", True)
        elif kind == "tag":
            closing = _ANSWER_TAG_CLOSE.search(text, end, end + _REGION)
            stop = closing.end() if closing else min(len(text), end + _REGION)
            yield Region(stop, text[end: closing.start() if closing else stop], "", True)
        elif not _is_no_answer(text, start, end):
            labelled = text[end - 1] in ":=" or text[end : end + 4].lstrip(" \t*_")[:1] == ":"
            if text[start:end].rstrip(" \t*_:=").endswith(("\"", "'")):  # a JSON key
                yield Region(end, _json_value(text, end), "", True)
            else:
                yield Region(end, _sentence_after(text, end, multiple), _doubt(text, start, end),
                             labelled)


def _line_before(text: str, start: int) -> str:
    """The text of `start`'s line before it, at most `_CLAUSE` characters."""
    line_start = text.rfind("\n", max(0, start - _CLAUSE), start) + 1
    return text[max(line_start, start - _CLAUSE) : start]


def _is_no_answer(text: str, start: int, end: int) -> bool:
    """Whether the marker at `start`..`end` is no answer: "answer" is the object of a
    preposition ("Explanation of the answer:"; "for the final answer:" is an answer), or the
    marker ends its line after a plan ("Let me evaluate each option to identify the correct
    answers:")."""
    before = _line_before(text, start)
    if not text[start:end].lower().startswith("final") and _PREPOSITION_BEFORE.search(before):
        return True
    line_end = text.find("\n", end, end + _CLAUSE)
    return _is_blank(text[end : end + _CLAUSE if line_end < 0 else line_end]) \
        and _PLAN_BEFORE.search(before) is not None


def _doubt(text: str, start: int, end: int) -> str:
    """How the sentence of the marker at `start`..`end` qualifies it: "rejecting" ("Incorrect
    answers:", "the other answers are"), "conditional" (hypothetical: "the answer would be C
    if the flag were set"; not "If X, the answer is C" nor "it would be C, since it works even
    if ..."), "hedged" ("the answer is likely B", "I think the answer is B") or ""."""
    before = _line_before(text, start)
    if _REJECTING_BEFORE.search(before):
        return "rejecting"
    before = before[max(before.rfind(mark) for mark in ".!?;") + 1 :]
    after = text[end : end + _CLAUSE]
    after = after[: min((index for index in (after.find(mark) for mark in ".!?\n") if index >= 0),
                        default=len(after))]
    hypothetical = _HYPOTHETICAL_MARKER.search(text, start, end) is not None
    if hypothetical and (_COUNTERFACTUAL.search(before) or _COUNTERFACTUAL.search(after)):
        return "conditional"
    if _HEDGE_AFTER.match(after) or _HEDGE_BEFORE.search(before):
        return "hedged"
    return ""


def _json_value(text: str, start: int) -> str:
    """The value after a JSON answer key: a quoted string or a list, up to its closing quote
    or bracket, so that the next key (`"explanation": "A is wrong"`) is not read."""
    value = text[start : start + _REGION].lstrip()
    if value[:1] == "[":
        close = value.find("]")
        return value[: close + 1] if close >= 0 else value
    if value[:1] in {'"', "'"}:
        close = value.find(value[0], 1)
        return value[1:close] if close >= 0 else value[1:]
    return _cut_sentence(value.split("\n", 1)[0].split(",", 1)[0])


def _braced(text: str, start: int) -> str:
    """The text from `start` up to the brace that closes the one just before `start`."""
    depth = 1
    stop = min(len(text), start + _BRACED)
    for index in range(start, stop):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:index]
    return text[start:stop]


def _sentence_after(text: str, start: int, multiple: bool) -> str:
    """The rest of the sentence after a marker; when the marker ends its line, the list
    that follows (the letters of each item) or else the next non-blank line."""
    lines = text[start : start + _REGION].split("\n")
    if not _is_blank(lines[0]) or len(lines) == 1:
        return _cut_sentence(lines[0])
    first = next((line for line in lines[1:] if not _is_blank(line)), "")
    items: list[tuple[str, str]] = []
    for line in lines[1:]:
        if _is_blank(line):
            continue
        item = _list_item(line)
        if item is None:
            break
        items.append(item)
    chosen = [letters for letters, verdict in items if verdict != "rejected"]
    if not items:
        return _cut_sentence(first)
    if multiple:
        return ", ".join(chosen)
    # One option: the item the list marks correct, the one it does not reject, or else (a
    # list that explains every option) the first line, as a marker's next line is read.
    approved = [letters for letters, verdict in items if verdict == "approved"]
    for candidates in (approved, chosen):
        if len(candidates) == 1:
            return candidates[0]
    return _cut_sentence(first)


def _list_item(line: str) -> tuple[str, str] | None:
    """The letters a line of an answer list gives and what the item says of them ("approved",
    "rejected" or ""): all of a line of nothing but letters ("**A**", "- (A), (C)"), the
    leading letter of a list item ("- **A**: text", "2. (C) Uses ...", not letters in its
    text; "- B: incorrect", "- **B** is wrong because ..." reject it, "- C: correct" approves
    it); None when the line is no list item."""
    if len(line) <= _LONE_LINE and _LONE_LETTERS.fullmatch(_LATEX_COMMAND.sub(" ", line)):
        return line, ""
    item = _LIST_ITEM.match(line)
    if item is None or _is_word_use(line, item.start(1)):
        return None
    if _REJECTED.match(line, item.end()):
        return item.group(1), "rejected"
    return item.group(1), "approved" if _APPROVED.match(line, item.end()) else ""


def _cut_sentence(line: str) -> str:
    """The answer part of the line after a marker: without parenthesised asides ("C (B is a
    common misconception)"; "(A)" and "(and D)" stay) and up to the end of its clause;
    letters joined by dashes ("A - B - D") are a list, not a dash clause."""
    line = _PARENTHESIS.sub(_without_aside, line).lstrip(" \t*_:-\u2013\u2014")
    if _DASHED.fullmatch(line[:_LONE_LINE]):
        return line
    end = _SENTENCE_END.search(line)
    return line if end is None else line[: end.start()]


def _without_aside(parenthesis: re.Match[str]) -> str:
    """A parenthesis that holds a word is an aside, unless it adds letters ("(and D)",
    "(also D)"); one of letters only is kept."""
    if _ADDITION.fullmatch(parenthesis.group()):
        return " " + parenthesis.group()[1:-1] + " "
    return " " if _WORD.search(parenthesis.group()) else parenthesis.group()


def _is_blank(text: str) -> bool:
    return not text.strip(" \t*_:#>`")


def _lone_letter_lines(text: str, backward: bool = False) -> Iterator[tuple[int, str]]:
    """(end, line) of each line that holds nothing but option letters, in order (or last
    first)."""
    bounds = _lines_backward(text) if backward else _lines_forward(text)
    for start, end in bounds:
        if end - start <= _LONE_LINE:
            line = _LATEX_COMMAND.sub(" ", text[start:end])
            if line.strip() and _LONE_LETTERS.fullmatch(line) and not _under_rejecting_heading(text, start):
                yield end, line


_HEADING = re.compile(r"[ \t>]*(?:#{1,6}[ \t]|[*_]{2}[^\n]*[*_]{2}[ \t]*$|[^\n]*:[*_ \t]*$)")


def _under_rejecting_heading(text: str, start: int) -> bool:
    """Whether the line at `start` comes under a heading or label (the nearest line above it
    that is not blank, when it is a heading, a bold line or ends with a colon) whose words
    reject options ("### Incorrect", "**Eliminated:**")."""
    above = text.rfind("\n", 0, max(0, start - 1))
    while start > 0:
        line = text[above + 1 : start].strip()
        if line:
            return _HEADING.match(line) is not None and _REJECTING.search(line) is not None
        start, above = above, text.rfind("\n", 0, max(0, above))
        if start < 0:
            return False
    return False


def _lines_forward(text: str) -> Iterator[tuple[int, int]]:
    start = 0
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield start, end
        start = end + 1


def _lines_backward(text: str) -> Iterator[tuple[int, int]]:
    end = len(text)
    while end >= 0:
        start = text.rfind("\n", 0, end) + 1
        yield start, end
        end = start - 1


def _is_complete(text: str) -> bool:
    """Whether the reply reached its end rather than being cut off mid-sentence: its last line
    ends a sentence, holds only letters or ends stating a choice ("so option C is correct"),
    or the whole reply is one line."""
    stripped = text.rstrip()
    if not stripped:
        return False
    last_line = stripped[stripped.rfind("\n") + 1 :]
    if "\n" not in stripped or last_line[-1] in _SENTENCE_CLOSERS:
        return True
    if len(last_line) <= _LONE_LINE and _LONE_LETTERS.fullmatch(_LATEX_COMMAND.sub(" ", last_line)):
        return True
    tail = last_line[-_PARAGRAPH:]
    return any(match.end() == len(tail) for match in _CHOICE_STATED.finditer(tail))


def _stated_choice(text: str) -> tuple[list[str], list[str]]:
    """Letters the last paragraph states as the choice, and letters it names after a clause
    that rejects them ("The incorrect statement is C", "Incorrect: A, D")."""
    stripped = text.rstrip()
    tail = stripped[-_PARAGRAPH:]
    last_break = max(tail.rfind("\n\n"), tail.rfind("\n \n"))
    paragraph = _LATEX_COMMAND.sub(" ", tail[last_break + 1 :])
    labels = _label_spans(paragraph)
    chosen: list[str] = []
    rejected: list[str] = []
    for match in _CHOICE_STATED.finditer(paragraph):
        name = next(group for group in ("a", "b", "c") if match.group(group) is not None)
        letters = rejected if name != "a" and _is_rejection(paragraph, match.start(name)) else chosen
        offset = match.start(name)
        for letter in _LETTER.finditer(match.group(name)):
            position = offset + letter.start()
            if position not in labels and not _is_word_use(paragraph, position):
                letters.append(letter.group())
    return chosen, rejected


def _is_rejection(text: str, start: int) -> bool:
    """Whether the clause before `start` rejects the letters that follow it: "Incorrect:",
    "Eliminated:", "the wrong ones are"; not when the reply chooses after the rejecting word
    ("since C is not thread-safe I'd go with B", "D is not hashable so B")."""
    clause = text[max(0, start - _CLAUSE) : start]
    clause = clause[max(clause.rfind(mark) for mark in ".;,!?\n") + 1 :]
    last = None
    for last in _REJECTING.finditer(clause):  # noqa: B007 (the last one is wanted)
        continue
    return last is not None and not _CHOOSING.search(clause, last.end())


def _label_spans(text: str) -> set[int]:
    """Positions of letters used as labels of an option's analysis ("2. **Option (B):**",
    "(A) Fusion needs ...", "A. ..."): they say what is discussed, not what is chosen."""
    labels: set[int] = set()
    line_start = scanned = 0
    for match in _LETTER.finditer(text):
        start, end = match.span()
        while (newline := text.find("\n", scanned, start)) >= 0:
            line_start = scanned = newline + 1
        scanned = start
        if _is_label(text, line_start, start, end):
            labels.add(start)
    return labels


def _is_label(text: str, line_start: int, start: int, end: int) -> bool:
    if _LABEL_AFTER.match(text, end):
        return True
    if start - line_start > _LABEL_INDENT or not _LINE_START.fullmatch(text, line_start, start):
        return False
    label_end = _LABEL_END.match(text, end)
    if label_end is None:
        return False
    word = _LABEL_WORD.match(text, label_end.end())
    return word is None or word.group(1).lower() not in _AFTER_OPTION


def _joined(answer: str, allowed: set[str]) -> list[str]:
    """The letters of an answer written as one run of capitals ("BD", "\\boxed{ABD}"): only
    when the run is the whole answer and its letters are distinct options in option order,
    as a run of capitals is otherwise a word or an acronym ("API", "OK", "CBD", "BAD")."""
    if not allowed:
        return []
    run = _JOINED.fullmatch(_LATEX_COMMAND.sub("", answer[:_LONE_LINE]))
    if run is None:
        return []
    letters = list(run.group(1))
    return letters if set(letters) <= allowed and letters == sorted(set(letters)) else []


def _lower_case(answer: str) -> list[str]:
    """The letters of a labelled answer written in lower case ("Answer: b, d"): only when
    the answer is nothing but single letters ("a cache" is a word, "i.e." an abbreviation)."""
    answer = _LATEX_COMMAND.sub(" ", answer[:_LONE_LINE]).strip()
    if not _LOWER_ANSWER.fullmatch(answer):
        return []
    return [letter.upper() for letter in _LOWER_LETTER.findall(answer)]


def _final_line(text: str) -> str:
    stripped = text.rstrip()
    return stripped[stripped.rfind("\n") + 1 :]


def _standalone(text: str) -> list[str]:
    """Capital letters standing alone in `text` (a bounded region), in order, skipping LaTeX
    command names and the article "A" / pronoun "I" before a lowercase word."""
    cleaned = _LATEX_COMMAND.sub(" ", text)
    return [match.group() for match in _LETTER.finditer(cleaned)
            if not _is_word_use(cleaned, match.start())]


def _is_word_use(text: str, position: int) -> bool:
    """Whether the letter at `position` is the English word "A" or "I" rather than an option."""
    if text[position] not in {"A", "I"}:
        return False
    if text[position] == "I" and re.match(r"['\u2019][a-z]", text[position + 1 : position + 3]):
        return True  # I'm, I've; "A's" and "'A'" are the option
    word = _WORD_AFTER.match(text, position + 1)
    return word is not None and word.group(1) not in _AFTER_OPTION
