"""Model backends: where completions come from.

`BACKENDS` names every backend. `create_backend(model, options)` reads a `--model` value:

- `NAME` or `NAME:ARGUMENT` where NAME is registered: that backend (`reference`, `null`,
  `replay:FILE`, `openai:MODEL`, `hf:PATH_OR_NAME` for a local transformers model);
- anything else: a model of that name served by an OpenAI-compatible endpoint (the `openai`
  backend), so `Qwen/Qwen2.5-Coder-7B-Instruct` or ollama's `qwen2.5-coder:7b` just work.

A backend factory takes the argument after ':' ("" when there is none; the whole model name
for the `openai` fallback) and the run's `BackendOptions`, and returns a `ModelBackend`.
Factories import their backend when called, so listing backends stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from knowbench.errors import UserError
from knowbench.registry import Registry

if TYPE_CHECKING:
    from knowbench.models.base import ModelBackend


@dataclass(frozen=True)
class BackendOptions:
    """Options of `knowbench run` that backends may use; offline backends ignore them all.

    `base_url` falls back to KNOWBENCH_BASE_URL, then OPENAI_BASE_URL; `api_key` to
    KNOWBENCH_API_KEY, then OPENAI_API_KEY (never written to disk).
    """

    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 8
    request_timeout: float = 120.0
    max_retries: int = 6
    no_cache: bool = False
    adapter: str | None = None  # hf: a LoRA adapter directory put on top of the model
    batch_size: int = 8  # hf: prompts generated together


BackendFactory = Callable[[str, BackendOptions], "ModelBackend"]
BACKENDS: Registry[BackendFactory] = Registry("model backend")
FALLBACK_BACKEND = "openai"


def create_backend(model: str, options: BackendOptions | None = None) -> ModelBackend:
    """The backend a `--model` value names (see the module docstring).

    Raises `UserError` when the backend cannot be built (no endpoint for an HTTP model, a
    replay file that is missing or malformed, an argument given to a backend that takes none).
    """
    name, colon, argument = model.partition(":")
    if colon and name in BACKENDS:
        return BACKENDS.get(name)(argument, options or BackendOptions())
    if model in BACKENDS and model != FALLBACK_BACKEND:
        return BACKENDS.get(model)("", options or BackendOptions())
    return BACKENDS.get(FALLBACK_BACKEND)(model, options or BackendOptions())


def calls_model(backend: ModelBackend) -> bool:
    """Whether the backend asks a model: the offline ones (`reference`, `null`, `replay:FILE`)
    report no connection."""
    return bool(backend.connection())


def create_writer(model: str, options: BackendOptions, option: str, purpose: str) -> ModelBackend:
    """The backend of an option whose model writes text no task answer keys (a judge, the
    writer of questions or instructions, a model sampled for contamination): `create_backend`,
    refusing the offline backends, which can only answer benchmark tasks. `purpose` completes
    "... needs a model that ..." in the error."""
    backend = create_backend(model, options)
    if not calls_model(backend):
        raise UserError(f"{option} {model} calls no model, and {purpose}\n  fix: pass the name of "
                        "a model served by an OpenAI-compatible endpoint (with --base-url) or "
                        "hf:PATH for a local one")
    return backend


def _no_argument(name: str, argument: str) -> None:
    if argument:
        raise UserError(f"model backend '{name}' takes no ':' argument (got '{name}:{argument}')")


@BACKENDS.register("openai")
def _openai(model: str, options: BackendOptions) -> ModelBackend:
    from knowbench.models.cache import GenerationCache, default_cache_path
    from knowbench.models.openai import OpenAIBackend

    url = options.base_url or os.environ.get("KNOWBENCH_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    if not url:
        raise UserError(f"model '{model}' is served over HTTP, but no endpoint was given\n"
                        "  fix: pass --base-url http://HOST:PORT/v1 (or set OPENAI_BASE_URL); "
                        "use --model reference or --model null to check a benchmark without a model")
    cache = None if options.no_cache else GenerationCache(default_cache_path())
    return OpenAIBackend(model=model, base_url=url, api_key=options.api_key, concurrency=options.concurrency,
                         timeout_s=options.request_timeout, max_retries=options.max_retries, cache=cache)


@BACKENDS.register("hf")
def _hf(ref: str, options: BackendOptions) -> ModelBackend:
    from knowbench.models.cache import GenerationCache, default_cache_path
    from knowbench.models.hf import HFBackend

    cache = None if options.no_cache else GenerationCache(default_cache_path())
    return HFBackend(ref, adapter=options.adapter, cache=cache, batch_size=options.batch_size)


@BACKENDS.register("reference")
def _reference(argument: str, options: BackendOptions) -> ModelBackend:
    from knowbench.models.offline import ReferenceBackend

    _no_argument("reference", argument)
    return ReferenceBackend()


@BACKENDS.register("null")
def _null(argument: str, options: BackendOptions) -> ModelBackend:
    from knowbench.models.offline import NullBackend

    _no_argument("null", argument)
    return NullBackend()


@BACKENDS.register("replay")
def _replay(path: str, options: BackendOptions) -> ModelBackend:
    from knowbench.models.offline import ReplayBackend

    if not path:
        raise UserError("model backend 'replay' needs a samples file: --model replay:FILE")
    return ReplayBackend(path)


__all__ = ["BACKENDS", "BackendFactory", "BackendOptions", "create_backend"]
