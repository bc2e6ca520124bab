"""Multiple-choice knowledge questions generated from a corpus (`knowbench build qa`), the way
KOCO-Bench built its Q&A: a model writes questions at scale from the knowledge corpus, questions
that every one of a few weak models answers correctly are dropped as trivial, and what remains is
deduplicated.

Steps, each recorded in `build_report.json`:

1. **Chunks.** Up to `questions` chunks of the corpus are chosen: source functions, classes,
   module docstrings, documentation sections and examples of at least `min_chars` characters,
   one per file first (files in a seeded order), then more from the same files.
2. **Generation.** For each chunk the model gets the framework's name and description, the
   chunk with its id and location, optional example questions, and the rules (domain knowledge
   only, one knowledge point, one unambiguous solution, 4-6 options, one or several right) and
   answers with one JSON object: question, options, answer, multiple, knowledge_point,
   cited_chunks, evidence (options may also come as a list, labelled A, B, ... in order, and
   the answer as a string of letters).
3. **Checks.** A reply is kept only when it parses, its letters and answer agree (one letter
   exactly when `multiple` is false), its options differ, the question asks one thing (one
   question mark at most) and names a knowledge point, and it is *grounded*: it cites the
   chunk it was given and its `evidence` is a verbatim passage (at least 20 characters,
   compared with whitespace collapsed) of that chunk.
4. **Deduplication.** A question whose normalised text, or whose word set together with its
   correct options' words, is within Jaccard `duplicate_threshold` (default 0.8) of an earlier
   kept one is dropped as its duplicate. (Done before the filter: it saves the weak models'
   calls and drops the same questions.)
5. **Trivial-case filter.** Each remaining question is put to every filter model with
   knowbench's multiple-choice prompt and read with knowbench's parser; a question all of them
   answer exactly right is dropped as trivial. A filter model that fails to reply counts as not
   answering right (the question stays). Without filter models this step is skipped and the
   report says so.

What does not hold: the grounding check shows the evidence is in the cited chunk, not that the
answer follows from it; a question a human would find ambiguous passes when it is well formed;
KOCO's final human review is not replaced; questions that synthesise several files are not
asked for (each question cites one chunk).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench import __version__
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import ChoiceTask, Manifest, Provenance
from knowbench.choice import parse_choice
from knowbench.errors import UserError, first_problem
from knowbench.knowledge.corpus import Chunk, Corpus
from knowbench.methods.prompts import choice_messages
from knowbench.models.base import BackendError, Message, ModelBackend
from knowbench.records import SamplingParams

QA_KINDS = ("function", "class", "module", "doc", "example")
MIN_EVIDENCE = 20
_MAX_CHUNK_CHARS = 6000
_WORD = re.compile(r"[a-z0-9_]+")
_LABEL = re.compile(r"^\s*\(?[A-Z][).:]\s+")


@dataclass
class QAOptions:
    questions: int = 20
    filter_models: Sequence[ModelBackend] = ()
    min_chars: int = 200
    seed: int = 0
    duplicate_threshold: float = 0.8
    examples: Sequence[ChoiceTask] = ()
    max_tokens: int = 1024
    filter_max_tokens: int = 1024


@dataclass
class Candidate:
    chunk: Chunk
    task: ChoiceTask | None = None
    reason: str = ""
    filter: dict[str, Any] = field(default_factory=dict)


def select_chunks(chunks: Sequence[Chunk], count: int, seed: int, min_chars: int) -> list[Chunk]:
    """Up to `count` chunks to ask about: eligible kinds and sizes, one per file first."""
    by_file: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        if chunk.kind in QA_KINDS and len(chunk.text.strip()) >= min_chars:
            by_file.setdefault(chunk.path, []).append(chunk)
    files = sorted(by_file)
    random.Random(seed).shuffle(files)
    chosen: list[Chunk] = []
    depth = 0
    while len(chosen) < count and any(len(by_file[f]) > depth for f in files):
        chosen += [by_file[f][depth] for f in files if len(by_file[f]) > depth][: count - len(chosen)]
        depth += 1
    return chosen


def generation_messages(corpus: Corpus, chunk: Chunk, examples: Sequence[ChoiceTask]) -> list[Message]:
    framework = corpus.manifest.framework or corpus.name
    about = f"{framework}: {corpus.manifest.description}" if corpus.manifest.description else framework
    system = ("You write multiple-choice questions that test knowledge of the software framework "
              f"{about}")
    parts = [
        "Write ONE multiple-choice question about the framework, answerable from the material "
        "below. Rules:\n"
        "1. It tests domain knowledge of this framework (its APIs, rules, constraints, design), "
        "not general programming trivia.\n"
        "2. It tests exactly one knowledge point and has one unambiguous solution.\n"
        "3. It has 4 to 6 options labelled A, B, C, ...; one or several may be correct "
        "(set \"multiple\" to true when the question may have several correct options).\n"
        "4. Wrong options are plausible to someone who does not know the framework.\n"
        "5. Ground it: cite the chunk id and copy into \"evidence\" a passage of the chunk, word "
        "for word, that shows the answer.",
    ]
    for example in examples[:2]:
        shown = {"question": example.question, "options": example.options, "answer": example.answer,
                 "multiple": example.multiple}
        parts.append("Example of a good question:\n" + json.dumps(shown, indent=1))
    text = chunk.text if len(chunk.text) <= _MAX_CHUNK_CHARS else chunk.text[:_MAX_CHUNK_CHARS]
    name = chunk.full_name or chunk.qualname
    parts.append(f"[chunk {chunk.id}] {chunk.path}:{chunk.start_line}-{chunk.end_line}"
                 + (f" ({name})" if name else "") + f"\n{text}")
    parts.append('Reply with one JSON object and nothing else: {"question": str, "options": '
                 '{"A": str, ...}, "answer": [letters], "multiple": bool, "knowledge_point": str, '
                 '"cited_chunks": [chunk ids], "evidence": str}')
    return [Message(role="system", content=system), Message(role="user", content="\n\n".join(parts))]


def _json_object(text: str) -> dict[str, Any]:
    fenced = re.search(r"```(?:json)?\s*\n(.*?)\n```", text, re.DOTALL)
    body = fenced.group(1) if fenced else text
    start = body.find("{")
    if start < 0:
        raise ValueError("the reply holds no JSON object")
    try:
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as error:
        raise ValueError(f"the reply's JSON does not parse ({error.msg})") from None
    if not isinstance(value, dict):
        raise ValueError("the reply's JSON is not an object")
    return value


def _squash(text: str) -> str:
    return " ".join(text.split()).lower()


def candidate_task(reply: str, chunk: Chunk, task_prefix: str, domain: str, framework: str,
                   generator: str) -> ChoiceTask:
    """The choice task a generation reply describes. Raises ValueError naming what is wrong."""
    data = _json_object(reply)
    if isinstance(data.get("options"), list):  # ["(A) text", "B. text", "text", ...]
        data["options"] = {chr(ord("A") + index): _LABEL.sub("", str(text), count=1)
                           for index, text in enumerate(data["options"])}
    if isinstance(data.get("answer"), str):  # "A, C"
        data["answer"] = re.findall(r"\b[A-Z]\b", data["answer"])
    for name, kind in (("question", str), ("options", dict), ("answer", list),
                       ("knowledge_point", str), ("evidence", str), ("cited_chunks", list)):
        if not isinstance(data.get(name), kind):
            raise ValueError(f"field '{name}' is missing or not a {kind.__name__}")
    question = data["question"].strip()
    if question.count("?") > 1:
        raise ValueError("the question asks more than one thing (several question marks)")
    if not data["knowledge_point"].strip():
        raise ValueError("no knowledge point is named")
    options = {str(k).strip().strip("()"): str(v).strip() for k, v in data["options"].items()}
    if not 4 <= len(options) <= 6:
        raise ValueError(f"{len(options)} options; 4 to 6 are asked for")
    if len({_squash(text) for text in options.values()}) != len(options):
        raise ValueError("two options have the same text")
    if chunk.id not in {str(c).strip() for c in data["cited_chunks"]}:
        raise ValueError(f"not grounded: it does not cite the chunk it was given ({chunk.id})")
    evidence = _squash(data["evidence"])
    if len(evidence) < MIN_EVIDENCE or evidence not in _squash(chunk.text):
        raise ValueError("not grounded: its evidence is not a passage of the cited chunk")
    answer = sorted({str(letter).strip().strip("()") for letter in data["answer"]})
    multiple = data.get("multiple")
    multiple = len(answer) > 1 if not isinstance(multiple, bool) else multiple
    digest = hashlib.sha256(_squash(question).encode()).hexdigest()[:10]
    metadata = {"knowledge_point": data["knowledge_point"].strip(), "evidence": data["evidence"].strip(),
                "cited_chunks": [{"id": chunk.id, "kind": chunk.kind, "path": chunk.path,
                                  "start_line": chunk.start_line, "end_line": chunk.end_line,
                                  "name": chunk.full_name or chunk.qualname}],
                "generator": generator}
    try:
        return ChoiceTask(task_id=f"{task_prefix}/{digest}", domain=domain, framework=framework,
                          question=question, options=options, answer=answer, multiple=multiple,
                          instruction="choose MULTIPLE options" if multiple else "choose ONE option",
                          metadata=metadata)
    except ValidationError as error:
        raise ValueError(first_problem(error)) from None


def _words(task: ChoiceTask, with_answer: bool) -> set[str]:
    text = task.question + (" " + " ".join(task.options[a] for a in task.answer) if with_answer else "")
    return set(_WORD.findall(text.lower()))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def duplicate_of(task: ChoiceTask, kept: Sequence[ChoiceTask], threshold: float) -> str | None:
    """The id of an earlier kept question `task` repeats, or None."""
    for other in kept:
        if _squash(task.question) == _squash(other.question):
            return other.task_id
        if max(_jaccard(_words(task, False), _words(other, False)),
               _jaccard(_words(task, True), _words(other, True))) >= threshold:
            return other.task_id
    return None


def _label(backend: ModelBackend) -> str:
    described = backend.describe()
    return str(described.get("model") or described.get("backend") or backend.name)


async def _generate(backend: ModelBackend, corpus: Corpus, chunks: Sequence[Chunk],
                    options: QAOptions) -> list[str | BaseException]:
    params = SamplingParams(temperature=0.0, max_tokens=options.max_tokens, seed=options.seed)

    async def one(chunk: Chunk) -> str:
        # the backend interface answers per task: a stand-in names the chunk asked about
        stand_in = ChoiceTask(task_id=f"chunk/{chunk.id}", domain="corpus", question=chunk.path,
                              options={"A": "-", "B": "-"}, answer=["A"])
        reply = await backend.generate(stand_in, generation_messages(corpus, chunk, options.examples),
                                       params, 0)
        return reply.text

    try:
        return list(await asyncio.gather(*(one(chunk) for chunk in chunks), return_exceptions=True))
    finally:
        await backend.aclose()


async def _answers(backend: ModelBackend, tasks: Sequence[ChoiceTask],
                   max_tokens: int) -> list[list[str] | None]:
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)

    async def one(task: ChoiceTask) -> list[str] | None:
        try:
            reply = await backend.generate(task, choice_messages(task), params, 0)
        except BackendError:
            return None
        return parse_choice(reply.text, list(task.options), task.multiple)

    try:
        return list(await asyncio.gather(*(one(task) for task in tasks)))
    finally:
        await backend.aclose()


def build_qa(corpus: Corpus, generator: ModelBackend, out: Path, options: QAOptions, *,
             name: str | None = None, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Generate, check, deduplicate and filter questions from `corpus`; write the kept ones as
    a benchmark of choice tasks at `out` with `build_report.json`. Returns the report."""
    if options.questions < 1:
        raise UserError("--questions must be at least 1")
    chunks = select_chunks(corpus.chunks, options.questions, options.seed, options.min_chars)
    if not chunks:
        raise UserError(f"corpus {corpus.name}: no chunk of at least {options.min_chars} characters "
                        f"of the kinds {', '.join(QA_KINDS)} to ask about\n  fix: lower --min-chars")
    framework = corpus.manifest.framework or corpus.name
    prefix = "qa/" + re.sub(r"[^A-Za-z0-9_.+-]+", "-", corpus.name)
    generator_label = _label(generator)
    progress(f"asking {generator_label} for {len(chunks)} questions, one per chunk …")
    replies = asyncio.run(_generate(generator, corpus, chunks, options))
    candidates = []
    for chunk, reply in zip(chunks, replies, strict=True):
        candidate = Candidate(chunk)
        if isinstance(reply, BaseException):
            candidate.reason = f"generation failed: {reply}"
        else:
            try:
                candidate.task = candidate_task(reply, chunk, prefix, framework, framework, generator_label)
            except ValueError as error:
                candidate.reason = f"invalid: {error}"
        candidates.append(candidate)
    kept: list[ChoiceTask] = []
    for candidate in candidates:
        if candidate.task is None:
            continue
        original = duplicate_of(candidate.task, kept, options.duplicate_threshold)
        if original is not None:
            candidate.reason = f"duplicate of {original}"
            continue
        kept.append(candidate.task)
    filters = [_label(model) for model in options.filter_models]
    if options.filter_models:
        progress(f"trivial-case filter: {len(kept)} questions to {', '.join(filters)} …")
        verdicts = [asyncio.run(_answers(model, kept, options.filter_max_tokens))
                    for model in options.filter_models]
        by_id = {c.task.task_id: c for c in candidates if c.task is not None and not c.reason}
        for index, task in enumerate(kept):
            results = {label: verdicts[m][index] for m, label in enumerate(filters)}
            candidate = by_id[task.task_id]
            candidate.filter = {label: {"chose": chosen, "right": chosen is not None
                                        and sorted(chosen) == sorted(task.answer)}
                                for label, chosen in results.items()}
            if all(entry["right"] for entry in candidate.filter.values()):
                candidate.reason = f"trivial: all {len(filters)} filter models answer it right"
    published = []
    for candidate in candidates:
        if candidate.task is not None and not candidate.reason:
            task = candidate.task
            if candidate.filter:
                task = task.model_copy(update={"metadata": {**task.metadata, "filter": candidate.filter}})
            published.append(task)
    report: dict[str, Any] = {
        "corpus": corpus.name, "corpus_content_hash": corpus.manifest.content_hash,
        "generator": generator_label, "filter_models": filters,
        "filter_applied": bool(filters), "chunks_asked": len(chunks),
        "counts": {"published": len(published),
                   "invalid": sum(c.reason.startswith(("invalid", "generation failed")) for c in candidates),
                   "duplicate": sum(c.reason.startswith("duplicate") for c in candidates),
                   "trivial": sum(c.reason.startswith("trivial") for c in candidates),
                   "single": sum(not t.multiple for t in published),
                   "multiple": sum(t.multiple for t in published)},
        "candidates": [{"chunk": c.chunk.id, "path": c.chunk.path,
                        "task_id": c.task.task_id if c.task else None,
                        "kept": c.task is not None and not c.reason, "reason": c.reason,
                        **({"filter": c.filter} if c.filter else {})} for c in candidates],
    }
    out.mkdir(parents=True, exist_ok=True)
    if published:
        manifest = Manifest(
            name=name or out.name, description=f"Multiple-choice questions on {framework} generated "
                                                "from its knowledge corpus by knowbench build qa",
            domains=[framework],
            provenance=Provenance(source=f"corpus {corpus.name} ({corpus.manifest.source})",
                                  created=datetime.now(UTC).isoformat(timespec="seconds"),
                                  tool=f"knowbench {__version__}",
                                  versions={corpus.name: corpus.manifest.version or "unknown"},
                                  hashes={"corpus": corpus.manifest.content_hash}))
        write_benchmark(out, manifest, published)
    (out / "build_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def example_questions(path: Path) -> list[ChoiceTask]:
    """The choice tasks of a benchmark, as examples for the generator (e.g. imported KOCO Q&A)."""
    examples = [task for task in load_benchmark(path).tasks if isinstance(task, ChoiceTask)]
    if not examples:
        raise UserError(f"{path}: no choice tasks to show as examples")
    return examples
