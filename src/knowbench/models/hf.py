"""Local models through `transformers` (extra `knowbench[hf]`): `--model hf:PATH_OR_NAME`.

Weights are read offline only: a directory (with `config.json`), a LoRA adapter directory
(its `adapter_config.json` names the base model), or a model name already in the local
Hugging Face cache. `--adapter PATH` puts a LoRA adapter (peft) on top of the model.

Samples that are waiting at the same time are generated together, in batches of
`batch_size` prompts of the same sampling settings (left-padded). Sampling is done by
`SeededSampling`, one random generator per sample seeded with `seed + sample_idx`, so a
sample does not depend on which other samples share its batch (on the same device and
dtype; a different batch can still change float rounding, rarely a token). Greedy decoding
(temperature 0) needs no seed. On CUDA the model runs in bfloat16, on CPU in float32.

Decoding hooks (`DecodingHook`, e.g. the kNN-LM method) add logits processors that see every
decoding step; their description becomes part of the backend's identity, so cached replies
of one configuration never answer for another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.models.base import BackendError, Message, ModelBackend, Reply
from knowbench.models.cache import GenerationCache
from knowbench.records import SamplingParams, Usage

ADAPTER_CONFIG = "adapter_config.json"
MODEL_CONFIG = "config.json"


def require(extra: str, *modules: str) -> None:
    """Raise `UserError` naming the extra to install when a module is missing."""
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"{', '.join(missing)} is not installed, and local models need it\n"
                        f"  fix: pip install 'knowbench[{extra}]'")


@dataclass
class LoadedModel:
    """A model and its tokenizer, ready to generate, with what identifies them."""

    model: Any
    tokenizer: Any
    ref: str
    adapter: str | None
    device: str
    dtype: str
    identity: dict[str, Any] = field(default_factory=dict)


def _looks_like_path(ref: str) -> bool:
    return ref.startswith((".", "/", "~")) or ref.count("/") > 1 or Path(ref).expanduser().exists()


def fingerprint(directory: Path) -> str:
    """What identifies a model or adapter directory's weights without reading them: the names,
    sizes and modification times of its files (a retrained model gets a new fingerprint)."""
    digest = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def resolve_model(ref: str) -> tuple[str, str | None]:
    """(model, adapter) for a `--model hf:` value: a LoRA adapter directory resolves to the
    base model its adapter_config.json names, plus itself as the adapter."""
    if not ref:
        raise UserError("model backend 'hf' needs a model: --model hf:PATH (a directory with "
                        "config.json) or hf:NAME (a model in the local Hugging Face cache)")
    path = Path(ref).expanduser()
    if path.is_dir():
        if (path / MODEL_CONFIG).is_file():
            return str(path), None
        if (path / ADAPTER_CONFIG).is_file():
            base = json.loads((path / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
            if not base:
                raise UserError(f"{path / ADAPTER_CONFIG} names no base model "
                                "(base_model_name_or_path)\n  fix: pass --model hf:BASE --adapter "
                                f"{path}")
            return str(base), str(path)
        raise UserError(f"{path}: neither a model (no {MODEL_CONFIG}) nor a LoRA adapter (no "
                        f"{ADAPTER_CONFIG})\n  fix: point --model hf: at the directory that holds "
                        "the weights")
    if _looks_like_path(ref):
        raise UserError(f"no model at {path}: the directory does not exist\n  fix: pass the "
                        "directory that holds config.json and the weights")
    if not _cached(ref):
        raise UserError(f"no model '{ref}' in the local Hugging Face cache ($HF_HOME), and knowbench "
                        "downloads no weights\n  fix: pass hf:PATH, the directory that holds "
                        "config.json and the weights")
    return ref, None


def _cached(name: str) -> bool:
    """Whether the Hugging Face cache holds a model of that name (its config.json); true
    when that cannot be told (huggingface_hub missing: loading will say what is wrong)."""
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.errors import HFValidationError
    except ImportError:
        return True
    try:
        return isinstance(try_to_load_from_cache(name, MODEL_CONFIG), str)
    except HFValidationError:
        return False


def load_model(ref: str, adapter: str | None = None, device: str | None = None,
               trainable: bool = False, dtype: str | None = None) -> LoadedModel:
    """Load a causal LM and its tokenizer offline (`local_files_only`), with an optional LoRA
    adapter; `dtype` (e.g. "float32") overrides bfloat16 on CUDA and float32 on CPU. Raises
    `UserError` naming the path when the weights are not there."""
    require("hf", "torch", "transformers")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_ref, implied_adapter = resolve_model(ref)
    if adapter and implied_adapter:
        raise UserError(f"--model hf:{ref} is already a LoRA adapter; drop --adapter {adapter} "
                        "or pass --model hf:BASE")
    adapter = adapter or implied_adapter
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = getattr(torch, dtype) if dtype else (
        torch.bfloat16 if device.startswith("cuda") else torch.float32)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_ref, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(model_ref, local_files_only=True,
                                                     dtype=torch_dtype)
    except (OSError, ValueError) as error:
        raise UserError(
            f"cannot load the model '{model_ref}' offline: {str(error).splitlines()[0]}\n"
            "  fix: knowbench reads local weights only; pass a directory with config.json and "
            "the weights, or a name already in the Hugging Face cache ($HF_HOME)") from None
    identity: dict[str, Any] = {"model": model_ref}
    model_path = Path(model_ref).expanduser()
    if model_path.is_dir():
        identity["model_fingerprint"] = fingerprint(model_path)
    if adapter:
        adapter_path = Path(adapter).expanduser()
        if not (adapter_path / ADAPTER_CONFIG).is_file():
            raise UserError(f"no LoRA adapter at {adapter_path} (no {ADAPTER_CONFIG})\n  fix: pass "
                            "the output directory of `knowbench train --method lora`")
        require("train", "peft")
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter_path), is_trainable=trainable)
        identity.update(adapter=str(adapter_path), adapter_fingerprint=fingerprint(adapter_path))
    model.to(device)
    if not trainable:
        model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    identity["dtype"] = str(torch_dtype).removeprefix("torch.")
    return LoadedModel(model, tokenizer, model_ref, adapter, device,
                       identity["dtype"], identity)


def render_chat(tokenizer: Any, messages: Sequence[Message | dict[str, str]]) -> str:
    """The prompt text for chat `messages`: the tokenizer's chat template with the assistant
    turn opened, or, for a tokenizer without one (base models), `plain_chat`."""
    turns = [m.model_dump() if isinstance(m, Message) else dict(m) for m in messages]
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True))
    return plain_chat(turns)


def plain_chat(turns: Sequence[dict[str, str]]) -> str:
    """Messages as '### Role' sections ending with an open '### Assistant' section."""
    parts = [f"### {turn['role'].capitalize()}\n{turn['content'].strip()}" for turn in turns]
    return "\n\n".join([*parts, "### Assistant\n"])


def eos_ids(loaded: LoadedModel) -> list[int]:
    """The token ids that end a reply: the model's generation config, else the tokenizer's."""
    configured = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    ids = configured if isinstance(configured, list) else [configured]
    ids = [int(i) for i in ids if i is not None]
    if loaded.tokenizer.eos_token_id is not None and loaded.tokenizer.eos_token_id not in ids:
        ids.append(int(loaded.tokenizer.eos_token_id))
    return ids


class DecodingHook(Protocol):
    """Something that changes every decoding step (a logits processor), e.g. kNN-LM."""

    def describe(self) -> dict[str, Any]:
        """What changes the replies: part of the backend's identity and cache keys."""
        ...

    def processor(self, loaded: LoadedModel) -> Any:
        """A context manager giving a transformers `LogitsProcessor` for one batch."""
        ...


class SeededSampling:
    """Temperature and nucleus sampling with one generator per row, as a logits processor that
    leaves only the drawn token (greedy decoding then takes it). A row's draw depends only on
    its own seed and logits, never on the other rows of its batch."""

    def __init__(self, temperature: float, top_p: float, seeds: Sequence[int | None]) -> None:
        import torch

        self.temperature, self.top_p = temperature, top_p
        self.generators = []
        for seed in seeds:
            generator = torch.Generator()
            if seed is None:
                generator.seed()
            else:
                generator.manual_seed(seed)
            self.generators.append(generator)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        probs = torch.softmax(scores.float().cpu() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            ordered, order = torch.sort(probs, descending=True, dim=-1)
            before = torch.cumsum(ordered, dim=-1) - ordered
            ordered[before >= self.top_p] = 0.0
            probs = torch.zeros_like(probs).scatter(-1, order, ordered)
        chosen = torch.full_like(scores, float("-inf"))
        for row, generator in enumerate(self.generators):
            token = torch.multinomial(probs[row], 1, generator=generator)
            chosen[row, token.to(scores.device)] = 0.0
        return chosen


@dataclass
class _Pending:
    ids: list[int]
    params: SamplingParams
    seed: int | None
    future: asyncio.Future[Reply]


class HFBackend(ModelBackend):
    """Generates with a local transformers model (see the module docstring)."""

    name = "hf"
    converses = True

    def __init__(self, ref: str, adapter: str | None = None, cache: GenerationCache | None = None,
                 batch_size: int = 8, device: str | None = None) -> None:
        if batch_size < 1:
            raise UserError(f"batch size must be at least 1, got {batch_size}")
        self.loaded = load_model(ref, adapter, device)
        self.cache = cache
        self.batch_size = batch_size
        self.hooks: list[DecodingHook] = []
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Future[None] | None = None
        self._lock = threading.Lock()  # one generate() on the model at a time

    def add_hook(self, hook: DecodingHook) -> None:
        """Apply `hook` at every decoding step from now on (before any sample is drawn)."""
        self.hooks.append(hook)

    def describe(self) -> dict[str, Any]:
        described = {"backend": self.name, **self.loaded.identity, "device": self.loaded.device}
        if self.hooks:
            described["decoding"] = [hook.describe() for hook in self.hooks]
        return described

    def connection(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size}

    def encode(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the prompt for chat `messages` (see `render_chat`)."""
        text = render_chat(self.loaded.tokenizer, messages)
        special = not getattr(self.loaded.tokenizer, "chat_template", None)
        return list(self.loaded.tokenizer(text, add_special_tokens=special)["input_ids"])

    async def generate(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                       params: SamplingParams, sample_idx: int) -> Reply:
        seed = None if params.seed is None else params.seed + sample_idx

        def make() -> Awaitable[Reply]:
            return self.submit(self.encode(messages), params, seed)
        if self.cache is None:
            return await make()
        return await self.cache.through(self.describe(), messages, params, sample_idx, make)

    async def submit(self, ids: list[int], params: SamplingParams, seed: int | None) -> Reply:
        """Queue one prompt (token ids); prompts queued together are generated in batches."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reply] = loop.create_future()
        self._pending.append(_Pending(ids, params, seed, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return await future

    async def _flush(self) -> None:
        for _ in range(3):  # let the other samples started in this tick join the queue
            await asyncio.sleep(0)
        while self._pending:
            first = self._pending[0]
            same = [p for p in self._pending if p.params == first.params][: self.batch_size]
            self._pending = [p for p in self._pending if all(p is not q for q in same)]
            try:
                replies = await asyncio.to_thread(self.generate_ids, [p.ids for p in same],
                                                  first.params, [p.seed for p in same])
            except Exception as error:
                failure = error if isinstance(error, UserError | BackendError) else BackendError(
                    f"{self.loaded.ref}: generation failed: {type(error).__name__}: {error}")
                for pending in same:
                    if not pending.future.done():
                        pending.future.set_exception(failure)
                continue
            for pending, reply in zip(same, replies, strict=True):
                if not pending.future.done():
                    pending.future.set_result(reply)

    def generate_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                     seeds: Sequence[int | None] | None = None) -> list[Reply]:
        """Generate one reply per prompt (token ids, no chat template applied), in one batch."""
        import contextlib

        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        loaded = self.loaded
        tokenizer, model = loaded.tokenizer, loaded.model
        pad = int(tokenizer.pad_token_id)
        width = max(len(ids) for ids in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):  # left padding: every prompt ends at the same column
            if ids:
                input_ids[row, width - len(ids):] = torch.tensor(list(ids), dtype=torch.long)
                mask[row, width - len(ids):] = 1
        stop = eos_ids(loaded)
        config = GenerationConfig(max_new_tokens=params.max_tokens, do_sample=False, num_beams=1,
                                  pad_token_id=pad, eos_token_id=stop or None)
        with self._lock, torch.inference_mode(), contextlib.ExitStack() as stack:
            processors = LogitsProcessorList(
                [stack.enter_context(hook.processor(loaded)) for hook in self.hooks])
            if params.temperature > 0:
                processors.append(SeededSampling(params.temperature, params.top_p,
                                                 list(seeds or [None] * len(prompts))))
            output = model.generate(input_ids=input_ids.to(loaded.device),
                                    attention_mask=mask.to(loaded.device),
                                    generation_config=config, logits_processor=processors)
        replies = []
        for row, ids in enumerate(prompts):
            new = output[row, width:].tolist()
            end = next((index for index, token in enumerate(new) if token in stop), None)
            tokens = new if end is None else new[:end]
            finish = "stop" if end is not None else ("length" if len(new) >= params.max_tokens
                                                     else "stop")
            text = tokenizer.decode(tokens, skip_special_tokens=True)
            replies.append(Reply(text=text, finish_reason=finish, usage=Usage(
                prompt_tokens=len(ids), completion_tokens=len(tokens) + (end is not None))))
        return replies

    def complete(self, texts: Sequence[str], params: SamplingParams | None = None,
                 seed: int | None = None) -> list[Reply]:
        """Continue raw `texts` (no chat template), e.g. to probe what a model has learned."""
        params = params or SamplingParams(max_tokens=16)
        tokenizer = self.loaded.tokenizer
        prompts = [list(tokenizer(text)["input_ids"]) for text in texts]
        seeds = [None if seed is None else seed + index for index in range(len(texts))]
        return self.generate_ids(prompts, params, seeds)
