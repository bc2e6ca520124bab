"""Knowledge methods selectable with `knowbench run --method`."""

from __future__ import annotations

from typing import Any

from knowbench.errors import UserError
from knowbench.methods.base import Method, Prompt
from knowbench.methods.none import NoKnowledge

METHODS: dict[str, type[Method]] = {"none": NoKnowledge}


def get_method(name: str, **options: Any) -> Method:
    """The method called `name`, built with the run's method options (unused ones ignored)."""
    try:
        cls = METHODS[name]
    except KeyError:
        raise UserError(f"unknown method '{name}'; available: {', '.join(sorted(METHODS))}") from None
    return cls(**options)


__all__ = ["METHODS", "Method", "Prompt", "get_method"]
