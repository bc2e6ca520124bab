"""The `hf` backend: local transformers models, on CPU with a tiny model made by the test."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from hf_helpers import CHAT_TEMPLATE, tiny_model
from knowbench.benchmark.load import load_benchmark
from knowbench.errors import UserError
from knowbench.models import BackendOptions, create_backend
from knowbench.models.base import Message
from knowbench.models.cache import GenerationCache
from knowbench.models.hf import HFBackend, plain_chat
from knowbench.records import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
TASK = load_benchmark(ROOT / "examples" / "basic").tasks[0]
MESSAGES = [Message(role="system", content="You write Python."),
            Message(role="user", content="def add(a, b):")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _generate(backend: HFBackend, params: SamplingParams, indices: list[int]) -> list[str]:
    async def all_of() -> list[str]:
        replies = await asyncio.gather(*(backend.generate(TASK, MESSAGES, params, index)
                                         for index in indices))
        return [reply.text for reply in replies]
    return asyncio.run(all_of())


def test_a_missing_model_directory_is_a_user_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(UserError, match=re.escape(str(missing))):
        create_backend(f"hf:{missing}", BackendOptions(no_cache=True))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match=r"config\.json"):
        create_backend(f"hf:{empty}", BackendOptions(no_cache=True))


def test_a_name_not_in_the_local_cache_is_a_user_error(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="no-org/no-model"):
        create_backend("hf:no-org/no-model", BackendOptions(no_cache=True))


def test_sampling_is_reproducible_under_a_seed_whatever_the_batch(model_dir: Path) -> None:
    params = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=12, seed=7)
    batched = _generate(HFBackend(str(model_dir), batch_size=4), params, [0, 1, 2, 3])
    alone = [_generate(HFBackend(str(model_dir), batch_size=1), params, [index])[0]
             for index in (2, 0)]
    assert [batched[2], batched[0]] == alone
    assert len(set(batched)) > 1, "samples with different seeds should differ"
    other = _generate(HFBackend(str(model_dir)), params.model_copy(update={"seed": 8}), [0])
    assert other[0] != batched[0]


def test_greedy_replies_are_cached_and_count_tokens(model_dir: Path, tmp_path: Path) -> None:
    params = SamplingParams(max_tokens=5)
    with GenerationCache(tmp_path / "cache.sqlite") as cache:
        backend = HFBackend(str(model_dir), cache=cache)
        first = asyncio.run(backend.generate(TASK, MESSAGES, params, 0))
        again = asyncio.run(HFBackend(str(model_dir), cache=cache).generate(TASK, MESSAGES, params, 0))
        assert len(cache) == 1
    assert not first.cached and again.cached and again.text == first.text
    assert first.usage.prompt_tokens == len(backend.encode(MESSAGES))
    # A random model rarely stops by itself: 5 tokens drawn, cut at the limit.
    assert first.finish_reason == "length" and first.usage.completion_tokens == 5


def test_a_reply_that_ends_itself_stops_before_the_limit(model_dir: Path) -> None:
    backend = HFBackend(str(model_dir))
    eos = backend.loaded.tokenizer.eos_token_id

    class EndNow:  # a decoding hook that forces the end-of-text token after two tokens
        def describe(self) -> dict[str, str]:
            return {"hook": "end-now"}

        def processor(self, loaded):
            import contextlib

            import torch

            def end(input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                if input_ids.shape[1] >= 6:
                    scores = torch.full_like(scores, float("-inf"))
                    scores[:, eos] = 0.0
                return scores
            return contextlib.nullcontext(end)

    backend.add_hook(EndNow())
    reply = backend.generate_ids([[5, 6, 7, 8]], SamplingParams(max_tokens=10))[0]
    assert reply.finish_reason == "stop" and reply.usage.completion_tokens == 3
    assert backend.describe()["decoding"] == [{"hook": "end-now"}]


def test_the_chat_template_is_applied_and_plain_sections_without_one(tmp_path: Path) -> None:
    templated = HFBackend(str(tiny_model(tmp_path / "chat", chat_template=CHAT_TEMPLATE)))
    text = templated.loaded.tokenizer.decode(templated.encode(MESSAGES))
    assert text == "<|system|>You write Python.\n<|user|>def add(a, b):\n<|assistant|>"
    assert plain_chat([m.model_dump() for m in MESSAGES]).endswith("### Assistant\n")
