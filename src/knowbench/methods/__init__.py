"""Knowledge methods selectable with `knowbench run --method`.

`METHODS` names every method class; `get_method(name, **options)` builds one. A method class
takes the run's method options as keywords (`corpus`, `top_k`, `budget`, `query`,
`exclude_file`, kNN-LM's `knn_lambda`, `knn_k`, `knn_temperature`, `knn_index`, and the
agent's `max_turns`, `episode_tokens`, `episode_timeout`, `loop_limit`, which mini-swe-agent
shares but `loop_limit`) and ignores those it does not use.
"""

from __future__ import annotations

from typing import Any

from knowbench.errors import UserError
from knowbench.methods.agent import AgentMethod
from knowbench.methods.base import Method, Prompt
from knowbench.methods.knn import KnnLM
from knowbench.methods.mini_swe import MiniSweAgentMethod
from knowbench.methods.none import NoKnowledge
from knowbench.methods.oracle import OracleMethod
from knowbench.methods.rag import RagBM25, RagDense, RagHybrid
from knowbench.registry import Registry


def _label(name: str, cls: type[Method]) -> str:
    return f"{name}:<{cls.variant_option}>" if cls.variant_option else name


METHODS: Registry[type[Method]] = Registry("method", label=_label)
METHODS.register("none", NoKnowledge)
METHODS.register("rag-bm25", RagBM25)
METHODS.register("rag-dense", RagDense)
METHODS.register("rag-hybrid", RagHybrid)
METHODS.register("oracle", OracleMethod)
METHODS.register("knn-lm", KnnLM)
METHODS.register("agent", AgentMethod)
METHODS.register("mini-swe-agent", MiniSweAgentMethod)


def get_method(name: str, **options: Any) -> Method:
    """The method called `name`, built with the run's method options (unused ones ignored).

    'base:variant' (e.g. 'oracle:S+E') selects the method 'base' and passes the variant as the
    option the method names in `variant_option`. Raises `UserError` for an unknown name, a
    variant given to a method without one, or options the method rejects.
    """
    base, colon, variant = name.partition(":")
    cls = METHODS.get(base)
    if colon:
        if cls.variant_option is None:
            raise UserError(f"method '{base}' takes no ':' variant (got '{name}')")
        options[cls.variant_option] = variant
    return cls(**options)


__all__ = ["METHODS", "Method", "Prompt", "get_method"]
