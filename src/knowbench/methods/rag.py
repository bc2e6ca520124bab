"""Retrieval-augmented methods: `rag-bm25`, `rag-dense`, `rag-hybrid`.

For each task: build a query, retrieve the top-k chunks of the corpus that leakage control
allows, fit them into the token budget in rank order, and place them with
`task_messages(task, knowledge=...)`. The trace records the query, every retrieved chunk (id,
rank, score, whether it made it into the prompt), what leakage control withheld, the prompt
size, and hit@k: whether a retrieved chunk documents or defines an API whose knowledge helps
the task (`helpful_apis`, matched by `ApiMatcher`), and at which rank.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from knowbench.benchmark.schema import ChoiceTask, FunctionTask, find_definition, source_location
from knowbench.errors import UserError
from knowbench.knowledge.chunking import signature as definition_signature
from knowbench.knowledge.context import approx_tokens, fit_chunks
from knowbench.knowledge.corpus import Chunk, Corpus, open_corpus
from knowbench.knowledge.leakage import LeakageGuard, SourceNormaliser
from knowbench.methods.base import Method, Prompt
from knowbench.methods.prompts import task_messages
from knowbench.parsing import parse_python

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
        self.matcher = ApiMatcher(self.corpus)

    def check(self, tasks: Sequence[FunctionTask | ChoiceTask]) -> list[str]:
        """Warnings about options that cannot apply to `tasks`; raises `UserError` when an
        option applies to none of them (`exclude_file` on tasks that name no source file)."""
        if not self.exclude_file:
            return []
        unlocated = [task.task_id for task in tasks
                     if LeakageGuard(task, exclude_file=True, normaliser=self.normaliser).unmet()]
        if not unlocated:
            return []
        what = ("exclude_file (--exclude-file) withholds the chunks of the file that defines a "
                "task's target, read from the task's metadata `source_path`")
        if len(unlocated) == len(tasks):
            raise UserError(f"{what}, and no task of this benchmark has one: the option would "
                            "do nothing\n  fix: rebuild the benchmark with this knowbench (mine and "
                            "import-domaineval record source_path), add source_path to the tasks' "
                            "metadata, or drop --exclude-file")
        shown = ", ".join(unlocated[:3]) + (", …" if len(unlocated) > 3 else "")
        return [f"{what}; {len(unlocated)} of {len(tasks)} tasks have none ({shown}): for them "
                "it does nothing (their traces say so under leakage.unmet)"]

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
        if isinstance(task, FunctionTask):
            trace.update(self.diagnose(task, hits, status))
        return Prompt(messages=messages, trace=trace)

    def diagnose(self, task: FunctionTask, hits: list[Hit], status: dict[str, str]) -> dict[str, Any]:
        """hit@k: whether a retrieved chunk documents or defines one of the APIs whose
        knowledge helps the task (`knowledge_apis`, else `target_api`; see `helpful_apis`)."""
        found: dict[str, Any] = {}
        if task.target_api:
            found["target_api"] = task.target_api
        apis, note = helpful_apis(task)
        if note:
            found["apis_note"] = note
        if not apis:
            return found
        ranks = {api: next((hit.rank for hit in hits if self.matcher.matches(hit.chunk, api)), None)
                 for api in apis}
        first = min((rank for rank in ranks.values() if rank is not None), default=None)
        found.update({"knowledge_apis": apis, "api_ranks": ranks, "hit_at_k": first is not None,
                      "hit_rank": first, "k": self.top_k,
                      "hit_in_prompt": first is not None and status[hits[first - 1].chunk.id] != "dropped"})
        return found

    def hidden_paths(self) -> list[str]:
        return [str(self.corpus.directory)]

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
        node = find_definition(parse_python(task.prompt_code), task.entry_point)
    except SyntaxError:
        node = None
    if node is None:
        return task.entry_point
    owners = task.entry_point.split(".")[:-1]
    text = definition_signature(node).removeprefix("async ").removeprefix("def ")
    return ".".join([*owners, text.removesuffix(": ...")])


def helpful_apis(task: FunctionTask) -> tuple[list[str], str | None]:
    """The APIs hit@k looks for: the task's `knowledge_apis`, else its `target_api` unless
    that names the task's own target (benchmarks mined before `knowledge_apis` existed did):
    leakage control withholds the target, so only namesakes could be found. Also a note
    saying why nothing is looked for, or None."""
    if task.knowledge_apis:
        return list(task.knowledge_apis), None
    target = task.target_api
    if not target:
        return [], None
    module = source_location(task.metadata).module
    if module and target == f"{module}.{task.entry_point}":
        return [], (f"target_api {target} is the task's own target, which leakage control "
                    "withholds: no hit@k (rebuild the benchmark to record knowledge_apis)")
    return [target], None


class ApiMatcher:
    """Which chunks of a corpus document or define an API.

    A function or class chunk matches when its full name is the API's; when the corpus has no
    chunk of that exact name (the API is named by a public re-export, `click.prompt` for
    `click.termui.prompt`), chunks of the same top-level package whose name ends with the API's
    last name and owning classes (`target_suffix`) match. A documentation chunk matches when it
    holds a Sphinx directive (`.. autofunction:: click.prompt`, `.. py:method:: Cls.meth`) or a
    mkdocstrings block (`::: pkg.mod.func`) naming the API the same way. Chunks of other
    packages never match: a same-named function elsewhere is a namesake, not the API.
    """

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._names: set[str] | None = None
        self._accepted: dict[str, frozenset[str]] = {}

    def matches(self, chunk: Chunk, api: str) -> bool:
        if chunk.kind in ("function", "class"):
            return chunk.full_name in self.accepted(api)
        if chunk.kind == "doc":
            return any(self._documents(named, api) for named in _DOC_DIRECTIVE.findall(chunk.text))
        return False

    def accepted(self, api: str) -> frozenset[str]:
        """The full names of the corpus's chunks that are `api`."""
        found = self._accepted.get(api)
        if found is None:
            if self._names is None:
                self._names = {chunk.full_name for chunk in self.corpus.chunks
                               if chunk.kind in ("function", "class")}
            if api in self._names:
                found = frozenset({api})
            else:
                top, suffix = api.split(".")[0], target_suffix(api)
                found = frozenset(name for name in self._names if name.split(".")[0] == top
                                  and name.endswith("." + suffix))
            self._accepted[api] = found
        return found

    @staticmethod
    def _documents(named: str, api: str) -> bool:
        """A directive naming `named` documents `api`: the same name, the bare name under a
        `currentmodule` ('prompt', 'Command.invoke'), or a re-export in the same package."""
        suffix = target_suffix(api)
        return named in (api, suffix) or (named.endswith("." + suffix)
                                          and named.split(".")[0] == api.split(".")[0])


_DOC_DIRECTIVE = re.compile(
    r"^[ \t]*(?:\.\.[ \t]+(?:py:)?(?:auto)?(?:function|class|method|classmethod|staticmethod|"
    r"exception|decorator|attribute|property)::|:::)[ \t]*([A-Za-z_][\w.]*)", re.M)


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


def _name(chunk: Chunk) -> str:
    return chunk.full_name or chunk.qualname or chunk.path


def _hit_record(hit: Hit, status: str) -> dict[str, Any]:
    chunk = hit.chunk
    return {"id": chunk.id, "rank": hit.rank, "score": round(hit.score, 6), "kind": chunk.kind,
            "name": _name(chunk), "location": chunk.location, "in_prompt": status}
