"""Stage 2 of `knowbench novel`: one knowledge bundle (S, E, M, C) per kept API.

Reads stage 1's `candidates.jsonl`, reloads the new release from the download cache (never
installed for reading), and writes `bundles.jsonl` in NovelAPIBench's bundle record format
(`knowbench import novelapibench` reads it; `knowbench.builders.novelapibench.read_bundles`
turns it into `KnowledgeBundle`s) and `bundles_report.json`.

Examples (E) come from the docstring, then the documentation, then the release's tests and
example scripts (at most `max_examples` per API). Every runnable one is executed in the
sandbox, in a benchmark environment holding the new release (`<library>==<new>`), and marked:
`executed` (it ran to the end), `failed` (it raised, timed out or was killed; the note says
how), or `static` (not run, or not verifiable here: a test that needs pytest fixtures, code
that needs the network the sandbox does not have, or code that imports a package other than
the library that the environment does not install; the note says which). Failed examples stay in the record but are
never shown to a model. An API without any example that is not `failed` is discarded, as in
NovelAPIBench (unless `keep_without_examples`).

M is docstring-grounded by default (`grounding: docstring`). With a model (`llm`), the model
writes it from the signature, the docstring and the implementation (`grounding: source`,
`written_by: <model>`); a reply that is empty falls back to the docstring text.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowbench import __version__
from knowbench.builders.novel.discover import read_candidates
from knowbench.builders.novel.extract import (
    docs_examples,
    docstring_examples,
    docstring_mechanism,
    documentation_files,
    implementation,
    parse_docstring,
    referenced_apis,
    signature_parameters,
    test_examples,
    test_files,
    with_imports,
)
from knowbench.builders.novel.pypi import Prefer, fetch_release
from knowbench.builders.novel.surface import ApiObject, Surface, find_packages, load_surface
from knowbench.builders.options import Progress
from knowbench.errors import UserError

BUNDLES = "bundles.jsonl"
BUNDLES_REPORT = "bundles_report.json"
_NETWORK = re.compile(r"(ConnectError|ConnectionError|gaierror|Name or service not known|Temporary failure in "
                      r"name resolution|Network is unreachable|nodename nor servname|ConnectTimeout|"
                      r"Connection refused|getaddrinfo)")
_MISSING = re.compile(r"ModuleNotFoundError: No module named '(?P<module>[\w.]+)'")
MECHANISM_PROMPT = (
    "You document Python APIs. Explain in one or two short paragraphs how the API below works: what "
    "it computes or does, the approach its implementation takes, and when to use it. Ground every "
    "statement in the signature, docstring and source given; do not invent parameters. Plain prose, "
    "no code blocks, no headings.")


@dataclass
class BundleOptions:
    apis: list[str] | None = None  # build these (kept or not) instead of the kept ones
    execute: bool = True
    sandbox: str = "auto"
    time_limit_s: float = 20.0
    max_examples: int = 5
    max_source_chars: int = 6000
    keep_without_examples: bool = False
    domain: str | None = None
    prefer: Prefer = "sdist"
    llm: Any = None  # a ModelBackend writing M


def build_bundles(candidates_path: Path, out: Path, options: BundleOptions,
                  say: Progress = lambda message: None) -> dict[str, Any]:
    """Write one bundle per kept (or named) candidate; return the report."""
    from knowbench.execution.sandbox import SANDBOXES

    SANDBOXES.get(options.sandbox)  # (refused now, not after the release is fetched)
    clock = time.perf_counter()
    records = read_candidates(candidates_path)
    if options.apis:
        by_api = {r["api"]: r for r in records} | {r["canonical"]: r for r in records}
        unknown = [api for api in options.apis if api not in by_api]
        if unknown:
            raise UserError(f"{candidates_path}: no candidate {', '.join(unknown)}\n"
                            "  fix: name an API of the candidates file (its 'api' or 'canonical' field)")
        chosen = [by_api[api] for api in options.apis]
    else:
        chosen = [r for r in records if r["kept"]]
    if not chosen:
        raise UserError(f"{candidates_path}: no kept candidate\n  fix: loosen stage 1's filters or name APIs with --api")
    library, version = chosen[0]["library"], chosen[0]["new_version"]
    release = fetch_release(library, version, options.prefer)
    surface = load_surface(release.root, sorted({r["canonical"].split(".")[0] for r in chosen})
                           or find_packages(release.root, library))
    docs = documentation_files(release.root)
    tests = test_files(release.root)
    say(f"{library} {version}: {len(chosen)} API(s); {len(docs)} documentation file(s), "
        f"{len(tests)} test/example file(s)")
    drafts = []
    for record in chosen:
        entry = surface.objects.get(record["canonical"])
        if entry is None:
            raise UserError(f"{record['canonical']} is not in {release.filename}\n"
                            "  fix: run `knowbench novel discover` again for these versions")
        drafts.append(_draft(record, entry, surface, release.root, docs, tests, options))
    execution_note = None
    if options.execute:
        execution_note = _execute_examples(drafts, f"{library}=={version}", options, say)
    if options.llm is not None:
        _llm_mechanisms(drafts, options.llm, say)
    out.mkdir(parents=True, exist_ok=True)
    kept, discarded = [], []
    for draft in drafts:
        usable = [e for e in draft["examples"] if e["status"] != "failed"]
        if not usable and not options.keep_without_examples:
            discarded.append({"api": draft["record"]["api_name"], "reason": "no-valid-example",
                              "examples": Counter(e["status"] for e in draft["examples"])})
            continue
        kept.append(draft)
    with (out / BUNDLES).open("w") as handle:
        for draft in kept:
            handle.write(json.dumps(_finish(draft), ensure_ascii=False) + "\n")
    statuses = Counter(e["status"] for d in drafts for e in d["examples"])
    origins = Counter(e["origin"].split(":")[0] for d in drafts for e in d["examples"])
    report = {
        "knowbench": __version__, "library": library, "version": version,
        "distribution": release.describe(), "candidates": str(candidates_path),
        "apis": len(chosen), "bundles": len(kept), "discarded": discarded,
        "examples": {"by_status": dict(statuses), "by_origin": dict(origins)},
        "with_parameter_descriptions": sum(1 for d in kept if any(p["description"] for p in d["record"]["s_param"])),
        "with_mechanism": sum(1 for d in kept if d["record"]["mechanism"]["text"]),
        "with_implementation": sum(1 for d in kept if d["record"]["implementation"]),
        "execution": execution_note, "mechanism": "llm" if options.llm is not None else "docstring",
        "seconds": round(time.perf_counter() - clock, 3),
        "per_api": [{"api": d["record"]["api_name"],
                     "examples": [{"origin": e["origin"], "status": e["status"], "reason": e["reason"]}
                                  for e in d["examples"]],
                     "helpers": d["helpers"], "descriptions_from": d["lent_from"]} for d in drafts],
    }
    (out / BUNDLES_REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report


def _draft(record: dict[str, Any], entry: ApiObject, surface: Surface, root: Path, docs: list[Path],
           tests: list[Path], options: BundleOptions) -> dict[str, Any]:
    api = record["api"]
    parsed = parse_docstring(entry.docstring)
    lent: dict[str, dict[str, str]] = {}
    lent_from = []
    described = {name.lstrip("*") for name, value in parsed.params.items() if value.get("description")}
    if any(p["name"] not in described for p in entry.parameters):
        for other in referenced_apis(entry.docstring, surface, entry):
            other_params = parse_docstring(other.docstring).params
            useful = {k: v for k, v in other_params.items() if v.get("description") and k not in lent}
            if useful:
                lent.update(useful)
                lent_from.append(other.public_path)
    parameters = signature_parameters(entry, parsed, lent)
    for parameter in parameters:
        parameter["constraints"] = None
    returns = entry.returns or (parsed.returns[0] if parsed.returns and parsed.returns[0] else None)
    target = surface.objects.get(entry.returns_canonical or "")
    if target is not None and target.public_exposures:
        returns = target.public_path  # `Response` -> `httpx.Response`: where a user finds it
    examples: list[dict[str, Any]] = []
    for code in docstring_examples(parsed):
        examples.append({"code": with_imports(code, entry, api, surface), "origin": "docstring",
                         "runnable": True})
    for code, where in docs_examples(root, entry, api, docs):
        examples.append({"code": code, "origin": f"docs:{where}", "runnable": True})
    for code, where, runnable in test_examples(root, entry, api, tests):
        examples.append({"code": code, "origin": f"tests:{where}", "runnable": runnable})
    seen: set[str] = set()
    unique = []
    for example in examples:
        if example["code"] not in seen:
            seen.add(example["code"])
            unique.append(example)
    examples = unique[:options.max_examples]
    for example in examples:
        example["status"] = "static"
        example["reason"] = "not executed" if example["runnable"] else "a test that needs pytest fixtures"
    source, helpers = implementation(entry, surface, options.max_source_chars)
    old = record.get("old")
    bundle_record = {
        "api_name": api, "library": record["library"], "domain": options.domain,
        "s_name": api, "s_param": parameters, "return_type": returns,
        "examples": [],
        "mechanism": {"text": docstring_mechanism(entry, parsed, record), "grounding": "docstring",
                      "references": [], "source_summary": None, "changelog_notes": None},
        "implementation": source,
        "is_modified": record["change"] == "modified",
        "old_signature": old["signature"] if old else None,
        "old_parameters": [{"name": p["name"], "annotation": p["annotation"], "default": p["default"],
                            "kind": p["kind"].upper().replace(" ", "_").replace("-", "_")}
                           for p in old["parameters"]] if old else None,
        "requires_file_io": False,
    }
    return {"record": bundle_record, "examples": examples, "entry": entry, "helpers": helpers,
            "lent_from": lent_from, "docstring": entry.docstring, "candidate": record}


def _finish(draft: dict[str, Any]) -> dict[str, Any]:
    record = dict(draft["record"])
    record["examples"] = [{"code": e["code"], "status": e["status"], "reason": e["reason"]}
                          for e in draft["examples"]]
    candidate = draft["candidate"]
    record["provenance"] = {
        "knowbench": __version__, "canonical": candidate["canonical"], "change": candidate["change"],
        "versions": {"old": candidate.get("old_version"), "new": candidate.get("new_version")},
        "example_origins": [e["origin"] for e in draft["examples"]],
        "helpers": draft["helpers"], "descriptions_from": draft["lent_from"]}
    return record


def _execute_examples(drafts: list[dict[str, Any]], requirement: str, options: BundleOptions,
                      say: Progress) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    from knowbench.benchmark.schema import TestSpec
    from knowbench.execution import create_engine
    from knowbench.execution.engine import ExecutionRequest
    from knowbench.execution.environments import ensure_env
    from knowbench.execution.sandbox import resolve_sandbox
    from knowbench.records import Limits

    runnable = [e for d in drafts for e in d["examples"] if e["runnable"]]
    own = {d["candidate"]["canonical"].split(".")[0] for d in drafts}
    if not runnable:
        return {"requirement": requirement, "executed": 0}
    say(f"environment: {requirement}")
    env = ensure_env([requirement])
    sandbox = resolve_sandbox(options.sandbox, python=env.python)
    engine = create_engine("subprocess", sandbox, python=env.python)
    limits = Limits(wall_s=options.time_limit_s, cpu_s=int(options.time_limit_s) + 1)
    say(f"executing {len(runnable)} example(s) in the {sandbox.kind} sandbox")

    def run(example: dict[str, Any]) -> None:
        request = ExecutionRequest(program=example["code"], tests=[TestSpec(name="example", code="pass")],
                                   limits=limits)
        execution = engine.execute(request)
        if execution.status == "pass":
            example["status"], example["reason"] = "executed", "runs cleanly"
            return
        message = " ".join(o.message for o in execution.tests if o.message) + "\n" + execution.stderr
        if _NETWORK.search(message):
            example["status"] = "static"
            example["reason"] = "needs the network, which the sandbox does not have"
            return
        missing = _MISSING.search(message)
        if missing and missing["module"].split(".")[0] not in own:
            example["status"] = "static"  # an optional dependency: the example is not wrong
            example["reason"] = f"needs {missing['module']}, which is not installed with {requirement}"
            return
        last = [line for line in message.strip().splitlines() if line.strip()]
        example["status"] = "failed"
        example["reason"] = f"{execution.status}: {last[-1].strip()[:200] if last else 'no message'}"

    try:
        with ThreadPoolExecutor(max(1, engine.workers)) as pool:
            list(pool.map(run, runnable))
    finally:
        engine.close()
    return {"requirement": requirement, "environment": env.key, "sandbox": sandbox.kind,
            "time_limit_s": options.time_limit_s, "executed": len(runnable)}


def _llm_mechanisms(drafts: list[dict[str, Any]], backend: Any, say: Progress) -> None:
    from knowbench.models.base import Message
    from knowbench.records import SamplingParams

    say(f"mechanisms: asking {backend.describe().get('model')}")
    params = SamplingParams(temperature=0.0, max_tokens=600)

    def messages(draft: dict[str, Any]) -> list[Message]:
        record = draft["record"]
        user = (f"API: {record['api_name']}\nSignature: {draft['entry'].signature_text()}\n\n"
                f"Docstring:\n{draft['docstring'].strip() or '(none)'}\n\n"
                f"Implementation:\n```python\n{record['implementation'][:4000]}\n```")
        return [Message(role="system", content=MECHANISM_PROMPT), Message(role="user", content=user)]

    async def ask() -> list[str]:
        try:
            replies = await asyncio.gather(*(backend.generate(None, messages(d), params, 0) for d in drafts))
        finally:
            await backend.aclose()
        return [reply.text for reply in replies]

    for draft, text in zip(drafts, asyncio.run(ask()), strict=True):
        text = re.sub(r"^```\w*\n|\n?```\s*$", "", (text or "").strip()).strip()
        if text:
            draft["record"]["mechanism"] = {"text": text, "grounding": "source", "references": [],
                                            "source_summary": None, "changelog_notes": None,
                                            "written_by": backend.describe().get("model")}
