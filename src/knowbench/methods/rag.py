"""Retrieval-augmented methods: `rag-bm25`, `rag-dense`, `rag-hybrid`.

For each task: build a query, retrieve the top-k chunks of the corpus that leakage control
allows, fit them into the token budget in rank order, and place them with
`task_messages(task, knowledge=...)`. The trace records the query, every retrieved chunk (id,
rank, score, whether it made it into the prompt), what leakage control withheld, the prompt
size, and, when the task names a `target_api`, hit@k and the target's rank.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, ClassVar

from knowbench.benchmark.schema import ChoiceTask, FunctionTask, find_definition
from knowbench.errors import UserError
from knowbench.knowledge.chunking import signature as definition_signature
from knowbench.knowledge.context import approx_tokens, fit_chunks
from knowbench.knowledge.corpus import Chunk, open_corpus
from knowbench.knowledge.leakage import LeakageGuard, SourceNormaliser
from knowbench.methods.base import Method, Prompt
from knowbench.methods.prompts import task_messages

if TYPE_CHECKING:
    from knowbench.knowledge.retrieval import Hit, Retriever

QUERY_MODES = ("signature+instruction", "signature")


class RagMethod(Method):
    """Retrieve from a corpus with the retriever named by `retriever_kind`."""

    name = "rag"
    retriever_kind: ClassVar[str] = "bm25"

    def __init__(self, corpus: str | None = None, top_k: int = 5, budget: int = 2000,
                 query: str = "signature+instruction", exclude_file: bool = False,
                 retriever: Retriever | None = None, **options: Any) -> None:
        del options  # options of other methods
        if query not in QUERY_MODES:
            raise UserError(f"unknown query mode '{query}'; choose one of {', '.join(QUERY_MODES)}")
        if top_k < 1 or budget < 0:
            raise UserError(f"{self.name}: top_k must be >= 1 and budget >= 0")
        if retriever is None:
            from knowbench.knowledge.retrieval import open_retriever  # numpy: only when used

            if not corpus:
                raise UserError(f"method '{self.name}' needs a knowledge corpus\n  fix: pass "
                                "--corpus NAME (build one with `knowbench corpus build SOURCE "
                                "--name NAME`)")
            retriever = open_retriever(self.retriever_kind, open_corpus(corpus))
        self.retriever = retriever
        self.corpus = retriever.corpus
        self.top_k, self.budget, self.query_mode = top_k, budget, query
        self.exclude_file = exclude_file
        self.normaliser = SourceNormaliser()

    def prompt(self, task: FunctionTask | ChoiceTask) -> Prompt:
        query = build_query(task, self.query_mode)
        guard = LeakageGuard(task, exclude_file=self.exclude_file, normaliser=self.normaliser)
        hits, withheld = self.retriever.search(query, self.top_k, exclude=guard.reason)
        knowledge, placements = fit_chunks([hit.chunk for hit in hits], self.budget)
        messages = task_messages(task, knowledge=knowledge)
        status = {placement.chunk.id: placement.status for placement in placements}
        trace: dict[str, Any] = {
            "method": self.name,
            "corpus": self.corpus.name,
            "corpus_hash": self.corpus.content_hash,
            "query": query,
            "retrieved": [_hit_record(hit, status[hit.chunk.id]) for hit in hits],
            "excluded": [{"id": item.chunk.id, "name": _name(item.chunk),
                          "location": item.chunk.location, "reason": item.reason,
                          "would_be_rank": item.would_be_rank} for item in withheld],
            "leakage": guard.describe(),
            "knowledge_tokens": approx_tokens(knowledge),
            "prompt_tokens": Prompt(messages=messages).approx_tokens,
        }
        target = task.target_api if isinstance(task, FunctionTask) else None
        if target:
            rank = target_rank(hits, target)
            in_prompt = rank is not None and status[hits[rank - 1].chunk.id] != "dropped"
            trace.update({"target_api": target, "hit_at_k": rank is not None,
                          "target_rank": rank, "target_in_prompt": in_prompt, "k": self.top_k})
        return Prompt(messages=messages, trace=trace)

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "corpus": self.corpus.name,
                "corpus_hash": self.corpus.content_hash, "retriever": self.retriever.describe(),
                "top_k": self.top_k, "budget": self.budget, "query": self.query_mode,
                "exclude_file": self.exclude_file}


class RagBM25(RagMethod):
    name = "rag-bm25"
    retriever_kind = "bm25"


class RagDense(RagMethod):
    name = "rag-dense"
    retriever_kind = "dense"


class RagHybrid(RagMethod):
    name = "rag-hybrid"
    retriever_kind = "hybrid"


def build_query(task: FunctionTask | ChoiceTask, mode: str) -> str:
    """The retrieval query. 'signature' is KOCO-Bench's choice: the target's qualified name and
    parameter signature only; 'signature+instruction' adds the task's instruction. A choice
    task has no signature: its query is the question (plus the options for the wider mode).
    The target API's name is never part of a query: finding it is what retrieval is tested on.
    """
    if isinstance(task, ChoiceTask):
        if mode == "signature":
            return task.question.strip()
        options = "\n".join(task.options.values())
        return "\n".join(part for part in (task.instruction.strip(), task.question.strip(), options)
                         if part)
    signature = task_signature(task)
    if mode == "signature":
        return signature
    return f"{signature}\n{task.instruction.strip()}"


def task_signature(task: FunctionTask) -> str:
    """'Owner.name(params) -> returns' of the task's entry point, from its prompt_code."""
    try:
        node = find_definition(ast.parse(task.prompt_code), task.entry_point)
    except SyntaxError:
        node = None
    if node is None:
        return task.entry_point
    owners = task.entry_point.split(".")[:-1]
    text = definition_signature(node).removeprefix("async ").removeprefix("def ")
    return ".".join([*owners, text.removesuffix(": ...")])


def target_suffix(target_api: str) -> str:
    """The part of a target API that identifies it wherever it is defined: its last name and
    the classes that own it ('click.core.Command.invoke' -> 'Command.invoke',
    'more_itertools.chunked' -> 'chunked'). Module paths are left out because packages
    re-export names from private modules."""
    parts = [part for part in target_api.split(".") if part]
    suffix = parts[-1:]
    for part in reversed(parts[:-1]):
        if not part[:1].isupper():
            break
        suffix.insert(0, part)
    return ".".join(suffix)


def matches_target(chunk: Chunk, target_api: str) -> bool:
    """Whether the chunk's qualified name ends with the target API's last components."""
    if chunk.kind not in ("function", "class"):
        return False
    suffix = target_suffix(target_api)
    name = chunk.full_name
    return bool(suffix) and (name == suffix or name.endswith("." + suffix))


def target_rank(hits: list[Hit], target_api: str) -> int | None:
    """The rank of the first retrieved chunk that is the target API, None if none is."""
    return next((hit.rank for hit in hits if matches_target(hit.chunk, target_api)), None)


def _name(chunk: Chunk) -> str:
    return chunk.full_name or chunk.qualname or chunk.path


def _hit_record(hit: Hit, status: str) -> dict[str, Any]:
    chunk = hit.chunk
    return {"id": chunk.id, "rank": hit.rank, "score": round(hit.score, 6), "kind": chunk.kind,
            "name": _name(chunk), "location": chunk.location, "in_prompt": status}
