"""What `knowbench train` learns from: a corpus (causal LM) or a benchmark's tasks (instruction
tuning), as examples of prompt and completion text.

- `corpus:NAME`: every chunk's text is a completion with no prompt; the chunks that leakage
  control withholds from any task of the benchmarks named to withhold (`withheld_chunks`, the
  same rules as retrieval) are left out;
- `tasks:BENCH`: the tasks of a split's train part (`knowbench split`), each prompted exactly as
  `knowbench run` would prompt it with the knowledge method given (`none`, `oracle:CELL` for the
  task's knowledge bundle, `rag-*` for retrieved chunks: retrieval-augmented fine-tuning), and
  its reference solution in a python block (a choice task: its `Answer:` line) as completion.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowbench.benchmark.load import Benchmark, load_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.knowledge.corpus import Chunk, Corpus, open_corpus
from knowbench.knowledge.leakage import withheld_chunks
from knowbench.models.base import Message
from knowbench.training.split import read_split

DATA_KINDS = ("corpus", "tasks")


@dataclass(frozen=True)
class Example:
    """One training example: the prompt (chat messages, or none for plain text) and the
    completion the loss is taken on."""

    completion: str
    messages: tuple[Message, ...] = ()


@dataclass
class TrainingData:
    kind: str
    source: str
    examples: list[Example]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        digest = hashlib.sha256(self.kind.encode() + b"\n")
        for example in self.examples:
            record = {"prompt": [m.model_dump() for m in example.messages],
                      "completion": example.completion}
            digest.update(json.dumps(record, sort_keys=True).encode() + b"\n")
        return "sha256:" + digest.hexdigest()


def parse_data(spec: str) -> tuple[str, str]:
    kind, colon, source = spec.partition(":")
    if not colon or kind not in DATA_KINDS or not source:
        raise UserError(f"--data {spec!r}: give corpus:NAME (a knowledge corpus) or tasks:BENCH "
                        "(a benchmark directory)")
    return kind, source


def select_chunks(corpus: Corpus, withhold: list[Benchmark],
                  share: float = 1.0) -> tuple[list[Chunk], set[str]]:
    """The chunks `corpus_data` trains on, in corpus order, and the ids leakage control
    withheld: the corpus minus what any task of `withhold` may not see, then `share` of the
    rest (the first ones by a hash of their id, so a smaller share is a subset of a larger)."""
    tasks = [task for bench in withhold for task in bench.tasks]
    withheld = withheld_chunks(corpus.chunks, tasks)
    kept = [chunk for chunk in corpus.chunks if chunk.id not in withheld]
    if share < 1.0:
        ranked = sorted(kept, key=lambda chunk: hashlib.sha256(chunk.id.encode()).hexdigest())
        chosen = {chunk.id for chunk in ranked[: max(1, round(share * len(kept)))]}
        kept = [chunk for chunk in kept if chunk.id in chosen]
    return kept, set(withheld)


def corpus_data(name: str, withhold: list[Benchmark], share: float = 1.0) -> TrainingData:
    """The corpus's chunks minus those any task of `withhold` may not see; `share` < 1 keeps
    that fraction of the remaining chunks (the first ones by a hash of their id)."""
    corpus = open_corpus(name)
    kept, withheld = select_chunks(corpus, withhold, share)
    if not kept:
        raise UserError(f"corpus {corpus.name}: no chunk is left to train on ({len(withheld)} "
                        "withheld by leakage control)")
    info = {"corpus": corpus.name, "corpus_hash": corpus.content_hash, "chunks": len(kept),
            "withheld_chunks": len(withheld), "withheld_for": [bench.name for bench in withhold],
            "share": share}
    return TrainingData("corpus", name, [Example(chunk.text) for chunk in kept], info)


def task_completion(task: FunctionTask | ChoiceTask) -> str:
    if isinstance(task, ChoiceTask):
        return "Answer: " + ", ".join(task.answer)
    return f"```python\n{task.reference.strip()}\n```"


def task_data(path: str, split_file: Path | None, knowledge: str = "none",
              corpus: str | None = None, top_k: int = 5, budget: int = 2000) -> tuple[TrainingData, list[str]]:
    """Examples from the train part of a benchmark's split, and warnings."""
    from knowbench.methods import get_method

    bench = load_benchmark(Path(path))
    warnings = []
    if split_file is None:
        chosen = list(bench.tasks)
        warnings.append(f"no --split: training on all {len(chosen)} tasks of {bench.name}; "
                        "evaluating on them afterwards measures memorisation, not knowledge "
                        "(make a split with `knowbench split`)")
        split_info: dict[str, Any] = {}
    else:
        split = read_split(split_file, bench)
        train = set(split.train)
        chosen = [task for task in bench.tasks if task.task_id in train]
        split_info = {"split": str(split_file), "by": split.by, "test": len(split.test)}
    if knowledge.partition(":")[0] == "knn-lm":
        raise UserError("--knowledge knn-lm changes decoding, not prompts: train with none, "
                        "oracle:CELL or rag-*, and evaluate with --method knn-lm")
    method = get_method(knowledge, corpus=corpus, top_k=top_k, budget=budget)
    examples = [Example(task_completion(task), tuple(method.prompt(task).messages)) for task in chosen]
    info = {"benchmark": bench.name, "content_hash": bench.content_hash, "tasks": len(examples),
            "knowledge": method.describe(), **split_info}
    return TrainingData("tasks", path, examples, info), warnings
