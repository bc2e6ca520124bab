"""JSON Lines files whose every line is one object, read with errors a person can act on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from knowbench.errors import UserError


def read_objects(path: Path, text: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; `UserError` naming the line otherwise.
    `text`: the file's content when the caller has read it already (a compressed file)."""
    rows = []
    for number, line in enumerate((path.read_text() if text is None else text).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{number}: invalid JSON: {error.msg}") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{number}: each line must be a JSON object")
        rows.append((number, row))
    return rows
