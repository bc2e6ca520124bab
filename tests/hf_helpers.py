"""Tiny local models for the transformers tests: a randomly initialised Llama of two layers and
a byte-level BPE tokenizer trained on a few texts, saved to a directory like real weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowbench.knowledge.corpus import Chunk, Corpus, CorpusManifest, content_hash, write_corpus

pytest.importorskip("transformers")
pytest.importorskip("torch")

# Text every tiny tokenizer learns from (plus the test's own texts): code and prose.
BASE_TEXTS = [
    "def add(a, b):\n    return a + b\n",
    "import math\n\ndef circle_area(radius):\n    return math.pi * radius ** 2\n",
    "### System\nYou are an expert Python programmer.\n\n### User\nComplete the function.\n",
    "### Assistant\n```python\ndef f(x):\n    return x\n```\n",
    "The quick brown fox jumps over the lazy dog. 0123456789\n",
]
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def tiny_model(directory: Path, texts: list[str] | None = None, *, seed: int = 0,
               hidden: int = 32, layers: int = 2, chat_template: str | None = None,
               initializer_range: float = 0.02) -> Path:
    """Write a tiny causal LM and its tokenizer to `directory` and return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([*BASE_TEXTS, *(texts or [])], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>",
                                   pad_token="<|pad|>")
    if chat_template:
        fast.chat_template = chat_template
    directory.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(directory)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=512, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id, bos_token_id=None,
                         initializer_range=initializer_range)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def make_corpus(directory: Path, texts: list[str], name: str = "toy") -> Corpus:
    """A knowledge corpus of one example chunk per text, written to `directory`."""
    chunks = [Chunk.create("example", f"ex{index}.py", 1, text.count("\n") + 1, text,
                           qualname=f"ex{index}") for index, text in enumerate(texts)]
    manifest = CorpusManifest(name=name, source=str(directory), source_kind="directory",
                              sha256="sha256:0", content_hash=content_hash(chunks),
                              chunks=len(chunks), counts={"example": len(chunks)},
                              files=len(chunks), knowbench="test")
    return write_corpus(directory, manifest, chunks)
