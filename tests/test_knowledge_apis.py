"""Retrieval diagnostics on real benchmarks: which APIs hit@k looks for (what the reference
calls, never the target that leakage control withholds) and the one metadata vocabulary for a
target's source location that builders write and leakage control (`--exclude-file`) reads.

A real PyPI library (isodate 0.7.2) mined end to end and a corpus built from its sdist; real
DomainEval subjects (python-rsa, freqtrade) with a corpus of rsa's sdist."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark, write_benchmark
from knowbench.benchmark.schema import FunctionTask, source_location
from knowbench.builders.domaineval import subject_to_task
from knowbench.builders.mine import MineOptions, SourceRequest, mine
from knowbench.errors import UserError
from knowbench.knowledge.corpus import Corpus
from knowbench.knowledge.ingest import build_corpus
from knowbench.knowledge.leakage import LeakageGuard, paths_match
from knowbench.methods import get_method
from knowledge_fixtures import topics_corpus

ROOT = Path(__file__).resolve().parents[1]


def _rag(corpus: Corpus, **options: Any):
    settings = {"corpus": str(corpus.directory), "top_k": 5, "budget": 2000,
                "query": "signature+instruction", **options}
    return get_method("rag-bm25", **settings)


def _function_chunk_names(corpus: Corpus) -> set[str]:
    return {chunk.full_name for chunk in corpus.chunks if chunk.kind in ("function", "class")}


# --- a mined library ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def isodate(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[FunctionTask], Corpus]:
    root = tmp_path_factory.mktemp("isodate")
    mine([SourceRequest("isodate==0.7.2", "time")], root / "bench", MineOptions())
    tasks = [task for task in load_benchmark(root / "bench").tasks if isinstance(task, FunctionTask)]
    return tasks, build_corpus("isodate==0.7.2", "isodate", directory=root / "corpus")


def _target(task: FunctionTask) -> str:
    return f"{task.metadata['module']}.{task.entry_point}"


@pytest.mark.slow
def test_mined_tasks_name_the_library_apis_their_reference_calls(isodate) -> None:
    tasks, corpus = isodate
    defined = _function_chunk_names(corpus)
    with_apis = [task for task in tasks if task.knowledge_apis]
    assert len(with_apis) >= len(tasks) // 2
    for task in tasks:
        assert task.target_api is None  # the target itself is no API to look for
        assert _target(task) not in task.knowledge_apis
        for api in task.knowledge_apis:
            # named where the library defines it (the corpus has that very chunk), in the
            # library: no builtin (`int`, `isinstance`), no standard library (`re.compile`)
            assert api in defined, (task.task_id, api)
            assert api.split(".")[0] == "isodate"
            assert api.rsplit(".", 1)[-1] in task.reference, (task.task_id, api)
    parse_time = next(t for t in tasks if t.entry_point == "parse_time")
    assert "isodate.isotime.build_time_regexps" in parse_time.knowledge_apis  # a module-level call
    assert "isodate.isotzinfo.build_tzinfo" in parse_time.knowledge_apis  # imported from a sibling
    add = next(t for t in tasks if t.entry_point == "Duration.__add__")
    assert "isodate.duration.Duration" in add.knowledge_apis  # constructs its own class


@pytest.mark.slow
def test_hit_at_k_counts_chunks_of_the_helpful_apis_never_namesakes_of_the_target(isodate) -> None:
    tasks, corpus = isodate
    method = _rag(corpus)
    hits = 0
    for task in tasks:
        trace = method.prompt(task).trace
        if not task.knowledge_apis:
            assert "hit_at_k" not in trace
            continue
        assert trace["knowledge_apis"] == task.knowledge_apis and trace["k"] == 5
        for api, rank in trace["api_ranks"].items():
            if rank is not None:
                chunk = corpus.chunks[corpus.position[trace["retrieved"][rank - 1]["id"]]]
                assert chunk.full_name == api or chunk.kind == "doc", (task.task_id, api, chunk.full_name)
        if trace["hit_at_k"]:
            hits += 1
            named = trace["retrieved"][trace["hit_rank"] - 1]["name"]
            assert named.rsplit(".", 1)[-1] != task.entry_point.rsplit(".", 1)[-1]
        # every retrieved chunk that is one of the APIs is counted
        for item in trace["retrieved"]:
            if item["name"] in task.knowledge_apis:
                assert trace["api_ranks"][item["name"]] is not None
    assert hits >= 1


@pytest.mark.slow
def test_exclude_file_withholds_the_target_file_on_a_mined_benchmark(isodate) -> None:
    tasks, corpus = isodate
    task = next(t for t in tasks if t.entry_point == "parse_time")
    location = source_location(task.metadata)
    assert location.path == "src/isodate/isotime.py" or location.path.endswith("isodate/isotime.py")
    assert location.module == "isodate.isotime"
    start, end = location.span
    lines = (corpus_file_lines(corpus, location.path))
    assert lines[start - 1].lstrip().startswith(("def parse_time", "@"))
    assert end > start
    k = len(corpus.chunks)
    plain = _rag(corpus, top_k=k).prompt(task).trace
    same_file = [item for item in plain["retrieved"] if paths_match(item["location"].split(":")[0], location.path)]
    assert same_file  # without the option, other chunks of isotime.py come back
    trace = _rag(corpus, top_k=k, exclude_file=True).prompt(task).trace
    assert not [item for item in trace["retrieved"]
                if paths_match(item["location"].split(":")[0], location.path)]
    assert {item["reason"] for item in trace["excluded"]} >= {"target file"}
    assert "target file" in trace["leakage"]["rules"] and "unmet" not in trace["leakage"]


def corpus_file_lines(corpus: Corpus, path: str) -> list[str]:
    """The file's lines, rebuilt from the corpus's chunks of it (for checking a span)."""
    lines: dict[int, str] = {}
    for chunk in corpus.chunks:
        if chunk.kind in ("function", "class") and paths_match(chunk.path, path):
            for offset, line in enumerate(chunk.text.splitlines()):
                lines.setdefault(chunk.start_line + offset, line)
    return [lines.get(number, "") for number in range(1, max(lines) + 1)]


@pytest.mark.slow
def test_benchmarks_mined_before_still_locate_their_targets(isodate, tmp_path: Path) -> None:
    """Older builds wrote `file`/`line` and made the target its own `target_api`: leakage
    control still finds the file, and hit@k says why it looks for nothing."""
    tasks, corpus = isodate
    task = next(t for t in tasks if t.entry_point == "parse_time")
    location = source_location(task.metadata)
    old_metadata = {key: value for key, value in task.metadata.items()
                    if key not in ("source_path", "source_span")}
    old_metadata.update({"file": location.path, "line": location.span[0]})
    old = task.model_copy(update={"metadata": old_metadata, "knowledge_apis": [], "target_api": _target(task)})
    raw = json.loads(old.model_dump_json(exclude_none=True))
    raw.pop("knowledge_apis")
    old = FunctionTask.model_validate(raw)
    guard = LeakageGuard(old, exclude_file=True)
    assert paths_match(guard.source_path or "", location.path) and guard.span == (location.span[0],) * 2
    trace = _rag(corpus, top_k=len(corpus.chunks), exclude_file=True).prompt(old).trace
    assert not [item for item in trace["retrieved"]
                if paths_match(item["location"].split(":")[0], location.path)]
    assert "hit_at_k" not in trace and "own target" in trace["apis_note"]


# --- DomainEval subjects ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def subjects(shared_data: Callable[..., Path]) -> Callable[[str, str], dict[str, FunctionTask]]:
    root = shared_data("anchors/domaineval") / "subjects"

    def load(domain: str, repository: str) -> dict[str, FunctionTask]:
        rows = [json.loads(line) for line in (root / domain / f"{repository}.jsonl").read_text().splitlines()]
        return {row["full_method_name"]: subject_to_task(row, domain, repository, f"{repository}/{index}")
                for index, row in enumerate(rows)}

    return load


def test_domaineval_tasks_name_the_apis_their_reference_calls(subjects) -> None:
    rsa = subjects("Cryptography", "python-rsa")
    is_prime = rsa["is_prime"]
    # helpers defined beside the target in rsa/prime.py, named in that module
    assert "rsa.prime.miller_rabin_primality_testing" in is_prime.knowledge_apis
    assert "rsa.prime.is_prime" not in is_prime.knowledge_apis
    mgf1 = rsa["mgf1"]
    assert {"rsa.transform.int2bytes", "rsa.common.ceil_div"} <= set(mgf1.knowledge_apis)
    # `HASH_METHODS.keys()` is a method of a constant's value, not an API of rsa
    assert not [api for api in mgf1.knowledge_apis if "HASH_METHODS" in api]
    for task in rsa.values():
        assert task.metadata["module"] == source_location(task.metadata).module
        assert not [api for api in task.knowledge_apis if api.split(".")[0] in ("int", "len", "hashlib", "os")]
    freqtrade = subjects("Cryptography", "freqtrade")
    # a third-party API the reference imports; `engine.begin()` on a parameter is unknown
    assert freqtrade["set_sequence_ids"].knowledge_apis == ["sqlalchemy.text"]


def test_domaineval_tasks_locate_their_target_in_the_repository(subjects) -> None:
    task = subjects("Cryptography", "python-rsa")["is_prime"]
    location = source_location(task.metadata)
    assert (location.path, location.module) == ("rsa/prime.py", "rsa.prime")
    assert task.metadata["method_path"] == "Cryptography/python-rsa/rsa/prime.py"  # upstream's own


@pytest.mark.slow
def test_exclude_file_and_hit_at_k_on_domaineval_tasks(subjects, tmp_path: Path) -> None:
    corpus = build_corpus("rsa==4.9", "rsa", directory=tmp_path / "rsa-corpus")
    rsa = subjects("Cryptography", "python-rsa")
    is_prime = rsa["is_prime"]
    k = len(corpus.chunks)
    plain = _rag(corpus, top_k=k).prompt(is_prime).trace
    assert [item for item in plain["retrieved"] if item["location"].startswith("rsa/prime.py")]
    trace = _rag(corpus, top_k=k, exclude_file=True).prompt(is_prime).trace
    assert not [item for item in trace["retrieved"] if item["location"].startswith("rsa/prime.py")]
    # with k = the whole corpus, every helpful API outside the withheld file is found
    found = _rag(corpus, top_k=k).prompt(rsa["mgf1"]).trace
    assert found["api_ranks"]["rsa.transform.int2bytes"] is not None
    assert found["api_ranks"]["rsa.common.ceil_div"] is not None


# --- an option that cannot apply -------------------------------------------------------------


def test_exclude_file_on_tasks_without_a_source_file_is_an_error_not_a_silent_no_op(tmp_path: Path) -> None:
    corpus = topics_corpus(tmp_path)
    bench = load_benchmark(ROOT / "examples" / "basic")  # hand-written: no source locations
    method = _rag(corpus, exclude_file=True)
    with pytest.raises(UserError, match="no task of this benchmark has one"):
        method.check(bench.tasks)
    assert _rag(corpus).check(bench.tasks) == []
    task = next(t for t in bench.tasks if isinstance(t, FunctionTask))
    located = task.model_copy(update={"task_id": "located", "metadata": {"source_path": "geometry/shapes.py"}})
    warnings = method.check([located, *bench.tasks])
    assert len(warnings) == 1 and f"{len(bench.tasks)} of {len(bench.tasks) + 1} tasks" in warnings[0]
    assert method.prompt(task).trace["leakage"]["unmet"]
    assert "unmet" not in method.prompt(located).trace["leakage"]
    write_benchmark(tmp_path / "basic", bench.manifest, bench.tasks)
    done = run_knowbench("run", str(tmp_path / "basic"), "--model", "reference", "--method", "rag-bm25",
                         "--corpus", str(corpus.directory), "--exclude-file", "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--exclude-file" in done.stdout + done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_outline_of_a_method_targets_class_is_retrievable_and_its_body_is_not(isodate) -> None:
    """`Duration.__add__` constructs a `Duration`: the class outline (signatures, docstring) is
    knowledge it may be given, though its lines enclose the target's; the method is not."""
    tasks, corpus = isodate
    add = next(t for t in tasks if t.entry_point == "Duration.__add__")
    assert "isodate.duration.Duration" in add.knowledge_apis
    trace = _rag(corpus, top_k=len(corpus.chunks)).prompt(add).trace
    retrieved = {item["name"] for item in trace["retrieved"]}
    excluded = {item["name"]: item["reason"] for item in trace["excluded"]}
    assert "isodate.duration.Duration" in retrieved
    assert trace["api_ranks"]["isodate.duration.Duration"] is not None and trace["hit_at_k"]
    assert excluded["isodate.duration.Duration.__add__"] == "target span"
    assert "isodate.duration.Duration.__add__" not in retrieved
