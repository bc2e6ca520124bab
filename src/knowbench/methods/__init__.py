"""Knowledge methods selectable with `knowbench run --method`."""

from __future__ import annotations

from knowbench.errors import UserError
from knowbench.methods.base import Method
from knowbench.methods.none import NoKnowledge

METHODS: dict[str, type[Method]] = {"none": NoKnowledge}


def get_method(name: str) -> Method:
    try:
        return METHODS[name]()
    except KeyError:
        raise UserError(f"unknown method '{name}'; available: {', '.join(sorted(METHODS))}") from None


__all__ = ["METHODS", "Method", "get_method"]
