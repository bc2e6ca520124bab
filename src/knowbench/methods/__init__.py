"""Knowledge methods selectable with `knowbench run --method`."""

from __future__ import annotations

from typing import Any

from knowbench.errors import UserError
from knowbench.methods.base import Method, Prompt
from knowbench.methods.none import NoKnowledge
from knowbench.methods.oracle import OracleMethod
from knowbench.methods.rag import RagBM25, RagDense, RagHybrid

METHODS: dict[str, type[Method]] = {
    "none": NoKnowledge,
    "rag-bm25": RagBM25,
    "rag-dense": RagDense,
    "rag-hybrid": RagHybrid,
    "oracle": OracleMethod,
}


def get_method(name: str, **options: Any) -> Method:
    """The method called `name`, built with the run's method options (unused ones ignored).

    'base:variant' (e.g. 'oracle:S+E') selects the method 'base' and passes the variant as the
    option the method names in `variant_option`.
    """
    base, colon, variant = name.partition(":")
    cls = METHODS.get(base)
    if cls is None:
        raise UserError(f"unknown method '{name}'; available: {', '.join(_names())}")
    if colon:
        if cls.variant_option is None:
            raise UserError(f"method '{base}' takes no ':' variant (got '{name}')")
        options[cls.variant_option] = variant
    return cls(**options)


def _names() -> list[str]:
    return [f"{key}:<{cls.variant_option}>" if cls.variant_option else key
            for key, cls in sorted(METHODS.items())]


__all__ = ["METHODS", "Method", "Prompt", "get_method"]
