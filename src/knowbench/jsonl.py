"""JSON that knowbench reads from elsewhere: JSON Lines files whose every line is one object,
read with errors a person can act on, and JSON text from sources knowbench does not control
(the records a sample's runner writes, a model server's replies, a model's tool calls,
third-party files such as notebooks, released benchmark data and PyPI's records).

JSON may escape any code point, a lone UTF-16 surrogate (`"\\ud800"`) included, and `json.loads`
turns that into a str that is not valid Unicode: no record holding it can be written as UTF-8
(pydantic, SQLite and files all refuse it), so one such string from a sample or a model would
stop a run at its first write, and every resume at the same one. `load_json` and `valid_text`
keep such text out of knowbench's records at the point where it enters them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from knowbench.errors import UserError


def valid_text(value: Any) -> Any:
    """`value` (a str, or the lists and dicts of one that JSON decodes to, keys included) with
    every lone surrogate written out as its escape, `\\ud800`: visible, and in a string
    literal of Python code the same character it stood for. Valid text is returned equal."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [valid_text(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(key): valid_text(item) for key, item in value.items()}
    return value


# An escape that decodes to a surrogate, high (D800-DBFF) or low (DC00-DFFF).
_SURROGATE_ESCAPE = {str: re.compile(r"\\u[dD][89a-fA-F]"), bytes: re.compile(rb"\\u[dD][89a-fA-F]")}


def load_json(text: str | bytes) -> Any:
    """`json.loads` for text from a source knowbench does not control: every string in the
    value is valid Unicode (`valid_text`). Raises `ValueError` as `json.loads` does.

    ASCII text without a surrogate's escape decodes to valid text as it is: no copy is made
    (a sample's records are such text, read for every sample). Not bytes holding a NUL:
    `json.loads` reads those as UTF-16 or UTF-32, whose escapes the pattern does not see."""
    value = json.loads(text)
    escape = _SURROGATE_ESCAPE.get(type(text))
    if (escape is not None and text.isascii() and (type(text) is str or b"\0" not in text)
            and escape.search(text) is None):
        return value
    return valid_text(value)


def read_objects(path: Path, text: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; `UserError` naming the line otherwise.
    `text`: the file's content when the caller has read it already (a compressed file).
    Strings are valid Unicode (`valid_text`): such files hold replies of models, for one."""
    rows = []
    for number, line in enumerate((path.read_text() if text is None else text).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = load_json(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{number}: invalid JSON: {error.msg}") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{number}: each line must be a JSON object")
        rows.append((number, row))
    return rows
