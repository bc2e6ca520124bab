"""Reading the traceback text that the in-sandbox runner stores in `TestOutcome.message`.

The runner formats exceptions with `traceback.format_exception`; the program runs as file
"solution.py", each test spec as "test:<name>", and everything else (the standard library,
installed packages) under its real path. This module turns that text back into frames and
a final exception, and says for each frame whose code it is. Pure string processing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

CANDIDATE_FILE = "solution.py"
TEST_PREFIX = "test:"

Stage = Literal["load", "spec", "test"]
"""When an exception happened: while the program loaded, while a test spec's own code ran,
or during a test. The caller knows it from the outcome's reason; the text does not say."""

Owner = Literal["candidate", "test", "harness", "library", "runner"]
"""Whose code a frame runs: the program ("solution.py"), the tests, the testing machinery
(unittest, pytest, absl), any other library, or knowbench's runner ("<string>")."""

_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+))?$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::(?: (?P<message>.*))?)?$")
_HARNESS_PARTS = ("/unittest/", "/_pytest/", "/pytest/", "/absl/testing/", "/pluggy/")


@dataclass(frozen=True)
class Frame:
    """One traceback entry: where it ran, whose code it is and its source line (if shown)."""

    file: str
    line: int
    function: str | None
    source: str = ""

    @property
    def owner(self) -> Owner:
        return frame_owner(self.file)

    def describe(self) -> str:
        where = f"{self.file}:{self.line}"
        if self.function:
            where += f" in {self.function}"
        return f"{where}: {self.source}" if self.source else where


@dataclass(frozen=True)
class ParsedError:
    """The last exception of a traceback text and the frames that led to it.

    `frames` are those of the final traceback block (outermost first). `causes` holds the
    exception types of earlier blocks in a chain ("During handling of ..."). `exc_type` is
    the exception's name as printed (possibly dotted, e.g. "binascii.Error"); None when the
    text holds no exception (runner messages such as a timeout notice). `stage` is the one
    the caller passed in.
    """

    exc_type: str | None
    message: str
    frames: tuple[Frame, ...] = ()
    causes: tuple[str, ...] = ()
    stage: Stage = "test"
    text: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def short_type(self) -> str | None:
        """The exception's class name without its module ("Error" for "binascii.Error")."""
        return None if self.exc_type is None else self.exc_type.rsplit(".", 1)[-1]

    @property
    def raise_frame(self) -> Frame | None:
        """The innermost frame that is not the runner's: where the exception was raised."""
        for frame in reversed(self.frames):
            if frame.owner != "runner":
                return frame
        return None

    def last(self, owner: Owner) -> Frame | None:
        """The innermost frame of the given owner."""
        return next((frame for frame in reversed(self.frames) if frame.owner == owner), None)

    def owners(self) -> list[Owner]:
        return [frame.owner for frame in self.frames if frame.owner != "runner"]

    def frames_after(self, frame: Frame) -> list[Frame]:
        """The frames called from `frame` (inner to it), outermost first."""
        index = next(i for i, candidate in enumerate(self.frames) if candidate is frame)
        return [f for f in self.frames[index + 1:] if f.owner != "runner"]


def frame_owner(file: str) -> Owner:
    if file == CANDIDATE_FILE:
        return "candidate"
    if file.startswith(TEST_PREFIX):
        return "test"
    if file.startswith("<") and not file.startswith("<frozen"):
        return "runner"
    if any(part in file for part in _HARNESS_PARTS):
        return "harness"
    return "library"


def parse_traceback(message: str, stage: Stage = "test") -> ParsedError:
    """Parse a stored test message into its final exception and frames.

    Handles chained exceptions (the last block wins, earlier types go to `causes`),
    SyntaxError blocks (a frame without "in ..."), words the runner puts before a traceback
    (ignored: a block starts at "Traceback" or at a frame line) and its truncation marker
    ("\\n...\\n" in the middle of long messages). Never raises.
    """
    blocks = _blocks(message)
    if not blocks:
        return ParsedError(exc_type=None, message=message.strip(), stage=stage, text=message)
    parsed = [_parse_block(block) for block in blocks]
    frames, exc_type, exc_message = parsed[-1]
    causes = tuple(kind for _, kind, _ in parsed[:-1] if kind)
    return ParsedError(exc_type=exc_type, message=exc_message, frames=tuple(frames),
                       causes=causes, stage=stage, text=message)


def _blocks(text: str) -> list[list[str]]:
    """Split a (possibly chained) traceback into blocks of lines, one per exception."""
    lines = text.splitlines()
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        if line.startswith("Traceback (most recent call last):"):
            current = []
            blocks.append(current)
            continue
        if current is None:
            if _FRAME.match(line):  # a bare SyntaxError report has no "Traceback" header
                current = [line]
                blocks.append(current)
            continue
        current.append(line)
    return blocks


def _parse_block(lines: list[str]) -> tuple[list[Frame], str | None, str]:
    frames: list[Frame] = []
    index = 0
    pending: dict[str, object] | None = None
    while index < len(lines):
        line = lines[index]
        match = _FRAME.match(line)
        if match:
            if pending is not None:
                frames.append(Frame(**pending))  # type: ignore[arg-type]
            pending = {"file": match["file"], "line": int(match["line"]),
                       "function": match["function"], "source": ""}
            index += 1
            continue
        if line.strip() == "...":  # the runner cut a long message here: resume at a frame
            following = next((i for i in range(index + 1, len(lines)) if _FRAME.match(lines[i])), None)
            index = following if following is not None else index + 1
            if following is None:
                break
            continue
        if line.startswith("    ") or not line.strip() or line.lstrip().startswith("[Previous"):
            if pending is not None and not pending["source"] and line.startswith("    ") \
                    and not _is_marker(line):
                pending["source"] = line.strip()
            index += 1
            continue
        break
    if pending is not None:
        frames.append(Frame(**pending))  # type: ignore[arg-type]
    rest = lines[index:]
    exc_type, message = _exception(rest)
    return frames, exc_type, message


def _is_marker(line: str) -> bool:
    """Caret and tilde lines under a source line (Python 3.11+ error locations)."""
    stripped = line.strip()
    return bool(stripped) and set(stripped) <= {"^", "~"}


def _exception(lines: list[str]) -> tuple[str | None, str]:
    """The exception type and message at the end of a block (up to the next chain note)."""
    kept: list[str] = []
    for line in lines:
        if line.startswith(("During handling of the above exception",
                            "The above exception was the direct cause")):
            break
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    if not kept:
        return None, ""
    match = _EXCEPTION.match(kept[0].strip())
    if match is None:
        return None, "\n".join(kept).strip()
    first = match["message"] or ""
    return match["type"], "\n".join([first, *kept[1:]]).strip()
