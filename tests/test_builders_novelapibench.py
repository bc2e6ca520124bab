"""`knowbench import novelapibench` / `knowbench export novelapibench`: the release's filters,
instances and bundles (real records from ../shared/anchors/novelapibench), and its task schema
on rows written here in that schema (the shared subset has no tasks.jsonl), run for real."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.builders import IMPORTERS
from knowbench.builders.novelapibench import (
    bundle_from_record,
    bundle_to_record,
    locate,
    read_filters,
    released_instance,
)
from knowbench.errors import UserError
from knowbench.knowledge.bundles import CELLS, render_cell

MODEL = "qwen2.5-coder-7b"


@pytest.fixture(scope="module")
def release(shared_data: Callable[..., Path]) -> Path:
    return shared_data("anchors/novelapibench")


# ------------------------------------------------------------------ filters and instances


def test_instance_rebuilt_from_the_filter_records_equals_the_released_list(release: Path) -> None:
    found = locate(release)
    filters = read_filters(found, MODEL)
    rebuilt = filters.instance()
    released = released_instance(found, MODEL)
    assert released is not None and len(released) == 312
    assert len(rebuilt) == len(set(rebuilt)) == 312
    assert set(rebuilt) == set(released)
    # the stages the release's README counts: 481 C1 -> 391 novel -> 345 C3 passed -> 312
    assert sum(r["passed"] is True for r in filters.c1.values()) == 481
    assert sum(r["novel"] is True for r in filters.c2.values()) == 391
    c3_passed = {t for t, r in filters.c3.items() if r["passed"] is True}
    assert len(c3_passed) == 345 and len(c3_passed & set(filters.excluded)) == 33


def test_novel_means_all_three_samples_failed(release: Path) -> None:
    filters = read_filters(locate(release), MODEL)
    for row in filters.c2.values():
        assert row["novel"] == (row["fail_count"] == 3 == sum(row["sample_fails"]))


def test_import_without_tasks_writes_filters_bundles_and_says_what_is_missing(release: Path, tmp_path: Path) -> None:
    done = run_knowbench("import", "novelapibench", str(release), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())  # the console wraps long lines
    assert "missing from the release folder: data/benchmark/tasks.jsonl" in said
    assert "345 C3 passed -> instance 312 (equal to the released list)" in said
    report = json.loads((tmp_path / "out" / "import_report.json").read_text())
    assert report["missing"] == ["data/benchmark/tasks.jsonl"] and report["tasks"] is None
    assert report["instances"][MODEL]["equal_to_released"] is True
    assert not (tmp_path / "out" / "benchmark.json").exists()
    rebuilt = (tmp_path / "out" / "instances" / f"{MODEL}.txt").read_text().split()
    assert len(rebuilt) == 312
    assert set(rebuilt) == set((release / f"data/benchmark/instances/{MODEL}.txt").read_text().split())
    rows = [json.loads(line) for line in (tmp_path / "out" / "filters.jsonl").read_text().splitlines()]
    assert len(rows) == 481
    assert sum(row["filters"][MODEL]["instance"] for row in rows) == 312
    excluded = [row for row in rows if row["filters"][MODEL]["excluded"]]
    assert {row["filters"][MODEL]["excluded"] for row in excluded} == {"c3_unsolved_under_call_record_check"}
    bundles = [json.loads(line) for line in (tmp_path / "out" / "bundles.jsonl").read_text().splitlines()]
    assert [row["api_name"] for row in bundles] == ["httpx.put", "httpx.request"]


def test_a_folder_with_nothing_usable_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "data" / "benchmark").mkdir(parents=True)
    with pytest.raises(UserError, match="nothing usable"):
        IMPORTERS.get("novelapibench")(tmp_path, tmp_path / "out")
    done = run_knowbench("import", "novelapibench", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_an_unknown_model_names_the_known_ones(release: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"qwen2\.5-coder-7b"):
        IMPORTERS.get("novelapibench")(release, tmp_path / "out", model="gpt-9")


# ------------------------------------------------------------------ bundles both ways


def test_release_bundles_round_trip_field_by_field_and_byte_for_byte(release: Path) -> None:
    lines = (release / "data/benchmark/bundles.jsonl").read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        record = json.loads(line)
        bundle = bundle_from_record(record)
        assert bundle.signature.qualified_name == record["s_name"]
        assert [p.name for p in bundle.signature.parameters] == [p["name"] for p in record["s_param"]]
        assert bundle.mechanism == record["mechanism"]["text"] and bundle.source == record["implementation"]
        back = bundle_to_record(bundle)
        for key in record:
            assert back[key] == record[key], key
        assert list(back) == list(record)
        assert json.dumps(back, ensure_ascii=False) == line
        # through knowbench's own serialisation too (what a benchmark's tasks.jsonl stores)
        again = type(bundle).model_validate_json(bundle.model_dump_json())
        assert json.dumps(bundle_to_record(again), ensure_ascii=False) == line
        for cell in CELLS:
            text, present = render_cell(bundle, cell)
            assert text and all(present.values()), cell


# ------------------------------------------------------------------ tasks in the release's schema

_CHECK = ("assert _target_api_spy_installed, 'target-API spy failed to install for {api}'\n"
          "assert _target_api_call_count[0] > 0, 'solution did not call target API {api}'\n"
          "_target_api_call_count[0] = 0\n")


def _row(task_id: str, api: str, context: str, masked: str, test: str, difficulty: str = "easy") -> dict:
    return {"task_id": task_id, "api_name": api, "library": api.split(".")[0], "domain": "stdlib",
            "difficulty": difficulty, "description": f"Task {task_id}: use the standard library.",
            "context_code": context, "masked_region": masked, "reference_solution": context + "\n" + masked,
            "test_harness": {"setup_code": "# the release's target monitor, generated from api_name",
                             "execution_test": _CHECK.format(api=api) + test, "shape_type_test": "",
                             "mock_test": "", "target_api": api, "generation_method": "hand-written",
                             "scenarios_succeeded": 1, "scenarios_total": 1}}


ROWS = [
    # a plain call; the answer is a module-level name the test reads
    _row("llm_000000000001", "textwrap.shorten", "import textwrap\ntext = 'The quick brown fox jumps over the lazy dog'",
         "short = textwrap.shorten(text, width=20)",
         "assert short == 'The quick [...]', short\n"),
    # through an alias, rebinding a name of the context (module-level semantics, not a function's)
    _row("llm_000000000002", "statistics.fmean", "import statistics as st\nvalues = [1.0, 2.0, 4.0]",
         "values = [v * 3 for v in values]\naverage = st.fmean(values)",
         "assert average == 7.0 and values == [3.0, 6.0, 12.0]\n", "medium"),
    # a class as target, bound by name in the context; a test_execution() the script never calls
    _row("llm_000000000003", "collections.Counter", "from collections import Counter\nwords = 'a b a c a b'.split()",
         "counts = Counter(words)\ntop = counts.most_common(1)[0]",
         "def test_execution():\n    assert top == ('a', 3)\n    assert counts['b'] == 2\n", "hard"),
    # run as a script: the test's and the completion's main guards hold
    _row("llm_000000000004", "json.dumps", "import json\nrecord = {'b': 1, 'a': [1, 2]}",
         "if __name__ == '__main__':\n    text = json.dumps(record, sort_keys=True)",
         "def test_execution():\n    assert text == '{\"a\": [1, 2], \"b\": 1}'\n\n\n"
         "if __name__ == '__main__':\n    test_execution()\n"),
    # a command-line script: the release passes the argv its test parses to the whole script
    # (the target is the Namespace parse_args makes: a monitored ArgumentParser would recurse, since
    # argparse's own methods name it, and the release's monitor replaces it there too)
    _row("llm_000000000005", "argparse.Namespace", "import argparse",
         "parser = argparse.ArgumentParser()\nparser.add_argument('--n', type=int)\nargs = parser.parse_args()",
         "assert args.n == 3\nassert parser.parse_args(['--n', '3']).n == 3\n"),
]


def _write_release(root: Path, rows: list[dict]) -> Path:
    bench = root / "data" / "benchmark"
    bench.mkdir(parents=True)
    with (bench / "tasks.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    (bench / "filters").mkdir()
    with (bench / "filters" / "c1.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps({"task_id": row["task_id"], "api_name": row["api_name"], "passed": True,
                                "error": None}) + "\n")
    for stage, records in (("c2", [{"novel": True, "fail_count": 3, "sample_fails": [True] * 3},
                                   {"novel": True, "fail_count": 3, "sample_fails": [True] * 3},
                                   {"novel": False, "fail_count": 1, "sample_fails": [True, False, False]}]),
                           ("c3", [{"passed": True, "error": None}, {"passed": True, "error": None}])):
        (bench / "filters" / stage).mkdir()
        with (bench / "filters" / stage / "m1.jsonl").open("w") as handle:
            for row, record in zip(rows, records, strict=False):
                handle.write(json.dumps({"task_id": row["task_id"], "api_name": row["api_name"],
                                         "model": "m1", **record}) + "\n")
    (bench / "excluded_tasks.tsv").write_text("task_id\treason\nllm_000000000002\tevaluation_unsafe\n")
    # a bundle for the first task's API, in the release's record format
    bundle = {"api_name": "textwrap.shorten", "library": "textwrap", "domain": "stdlib", "s_name": "textwrap.shorten",
              "s_param": [{"name": "text", "type": "str", "default": None, "description": "The text.",
                           "constraints": None},
                          {"name": "width", "type": "int", "default": None, "description": "Maximum width.",
                           "constraints": None}],
              "return_type": "str",
              "examples": [{"code": "import textwrap\nprint(textwrap.shorten('Hello  world!', width=12))",
                            "status": "executed", "reason": "runs cleanly"}],
              "mechanism": {"text": "Collapses whitespace, then truncates at a word boundary with a placeholder.",
                            "grounding": "docstring", "references": [], "source_summary": None,
                            "changelog_notes": None},
              "implementation": "def shorten(text, width, **kwargs):\n    w = TextWrapper(width=width, max_lines=1, "
                                "**kwargs)\n    return w.fill(' '.join(text.strip().split()))",
              "is_modified": False, "old_signature": None, "old_parameters": None, "requires_file_io": False}
    (bench / "bundles.jsonl").write_text(json.dumps(bundle) + "\n")
    return root


def test_tasks_in_the_release_schema_import_with_bundles_filters_and_instance(tmp_path: Path) -> None:
    source = _write_release(tmp_path / "release", ROWS)
    report = IMPORTERS.get("novelapibench")(source, tmp_path / "bench")
    assert report["imported"] == 5 and report["left_out"] == [] and report["models"] == ["m1"]
    bench = load_benchmark(tmp_path / "bench")
    tasks = {task.task_id: task for task in bench.tasks}
    first = tasks["llm_000000000001"]
    assert first.target_api == "textwrap.shorten" and first.entry_point == "solution"
    assert first.bundle is not None and first.bundle.examples[0].status == "passed"
    assert tasks["llm_000000000002"].bundle is None
    assert first.metadata["filters"]["m1"] == {"c1_passed": True, "c2_novel": True, "c2_fail_count": 3,
                                               "c3_passed": True, "excluded": None, "instance": True}
    assert tasks["llm_000000000002"].metadata["filters"]["m1"]["excluded"] == "evaluation_unsafe"
    assert tasks["llm_000000000003"].metadata["filters"]["m1"]["instance"] is False
    assert bench.manifest.requirements == []  # standard library: nothing to pin
    from knowbench.methods import get_method

    for cell in CELLS:  # every oracle cell shows the imported bundle
        prompt = get_method(f"oracle:{cell}").prompt(first)
        assert prompt.trace["bundle"] is True and all(prompt.trace["components"].values()), cell
        assert render_cell(first.bundle, cell)[0] in prompt.messages[-1].content
    assert "Collapses whitespace" in get_method("oracle:M").prompt(first).messages[-1].content
    only = IMPORTERS.get("novelapibench")(source, tmp_path / "instance", model="m1", instance=True)
    assert only["imported"] == 1
    assert [t.task_id for t in load_benchmark(tmp_path / "instance").tasks] == ["llm_000000000001"]
    with pytest.raises(UserError, match="--model"):
        IMPORTERS.get("novelapibench")(source, tmp_path / "x", instance=True)


def test_a_bad_row_is_left_out_with_its_line_and_reason(tmp_path: Path) -> None:
    broken = dict(ROWS[0], task_id="llm_00000000000b", masked_region="from os import *")
    absent = {k: v for k, v in ROWS[1].items() if k != "test_harness"}
    not_text = dict(ROWS[2], description=["a", "list"])
    source = _write_release(tmp_path / "release", [ROWS[0], broken, absent, not_text])
    report = IMPORTERS.get("novelapibench")(source, tmp_path / "bench")
    assert report["imported"] == 1
    assert [(row["line"], row["reason"].split(":")[0]) for row in report["left_out"]] == \
        [(2, "masked_region is not a valid block"), (3, "field 'test_harness' is missing"),
         (4, "field 'description' must be a string")]


def test_the_library_requirement_is_pinned_from_its_lock(release: Path, tmp_path: Path) -> None:
    from knowbench.builders.novelapibench import requirement_for

    found = locate(release)
    assert requirement_for(found, "flask") == "Flask==3.1.3"  # its own line of envs/locks/flask.txt
    assert requirement_for(found, "httpx") == "httpx==0.28.1"  # main environment: the pin the lock names
    assert requirement_for(found, "scipy") == "scipy==1.17.1"  # main environment: manifest's new_version
    assert requirement_for(found, "django") == "Django==5.2.13"


@pytest.mark.slow
def test_reference_passes_and_null_fails_every_imported_task(tmp_path: Path) -> None:
    source = _write_release(tmp_path / "release", ROWS)
    IMPORTERS.get("novelapibench")(source, tmp_path / "bench")
    for model, expected in (("reference", 1.0), ("null", 0.0)):
        done = run_knowbench("run", str(tmp_path / "bench"), "--model", model, "--out", str(tmp_path / model))
        assert done.returncode == 0, done.stderr
        summary = json.loads((tmp_path / model / "summary.json").read_text())
        overall = summary["scores"]["overall"]
        assert overall["pass_at"]["1"] == expected, (model, done.stdout)
        assert summary["self_check"]["ok"] is True


@pytest.mark.slow
def test_replies_in_the_release_styles_are_judged_as_the_release_judges_them(tmp_path: Path) -> None:
    """Bare missing lines, a whole `def solution()` that rebinds a context name, and code that
    computes the answer without the target API (passes every scenario assertion, fails the monitor)."""
    source = _write_release(tmp_path / "release", ROWS)
    IMPORTERS.get("novelapibench")(source, tmp_path / "bench")
    replies = {
        "llm_000000000001": "Here it is:\n```python\nshort = textwrap.shorten(text, width=20)\n```",
        "llm_000000000002": "```python\ndef solution():\n    values = [v * 3 for v in values]\n"
                            "    average = sum(values) / len(values)\n    st.fmean([1.0])\n```",
        "llm_000000000003": "```python\ncounts = {w: words.count(w) for w in words}\ntop = ('a', 3)\n```",
        "llm_000000000004": "```python\nimport json\n\nif __name__ == '__main__':\n"
                            "    text = json.dumps(record, sort_keys=True)\n```",
        "llm_000000000005": "```python\nimport sys\nparser = argparse.ArgumentParser()\n"
                            "parser.add_argument('--n', type=int)\nargs = parser.parse_args(sys.argv[1:])\n```",
    }
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": task_id, "sample_idx": 0, "completion": reply}) + "\n"
                               for task_id, reply in replies.items()))
    done = run_knowbench("run", str(tmp_path / "bench"), "--model", f"replay:{samples}", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    rows = {row["task_id"]: row for row in map(json.loads, (tmp_path / "r" / "samples.jsonl").read_text().splitlines())}
    assert {task_id for task_id, row in rows.items() if row["passed"]} == \
        {"llm_000000000001", "llm_000000000002", "llm_000000000004", "llm_000000000005"}
    assert "did not call the target API collections.Counter" in json.dumps(rows["llm_000000000003"])


@pytest.mark.slow
def test_certify_sees_the_target_run_unless_the_body_rebinds_a_context_name(tmp_path: Path) -> None:
    source = _write_release(tmp_path / "release", ROWS)
    IMPORTERS.get("novelapibench")(source, tmp_path / "bench")
    done = run_knowbench("certify", str(tmp_path / "bench"), "--report", str(tmp_path / "c.json"))
    checks = {row["task_id"]: row for row in json.loads((tmp_path / "c.json").read_text())["tasks"]}
    assert all(row["stub_suite_fails"] == {"stub-raise": True, "stub-none": True} for row in checks.values())
    assert all(checks[t]["certified"] for t in ("llm_000000000001", "llm_000000000003", "llm_000000000004",
                                                 "llm_000000000005"))
    # task 2 rebinds `values`: its body runs as module-level code, which `called` cannot see
    assert checks["llm_000000000002"]["failed_checks"] == ["not-called"]
    assert done.returncode == 1


def test_export_gives_the_release_records_back(release: Path, tmp_path: Path) -> None:
    """Tasks carrying the two real httpx bundles export them as the release wrote them."""
    rows = [dict(ROWS[0], task_id=f"llm_00000000001{i}", api_name=api, library="httpx",
                 test_harness=dict(ROWS[0]["test_harness"], target_api=api))
            for i, api in enumerate(("httpx.put", "httpx.request"))]
    source = _write_release(tmp_path / "release", rows)
    shutil.copy(release / "data/benchmark/bundles.jsonl", source / "data/benchmark/bundles.jsonl")
    IMPORTERS.get("novelapibench")(source, tmp_path / "bench")
    done = run_knowbench("export", "novelapibench", str(tmp_path / "bench"), "--out", str(tmp_path / "b.jsonl"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "b.jsonl").read_text() == (release / "data/benchmark/bundles.jsonl").read_text()


PINNED = [
    (_row("llm_0000000000aa", "httpx.QueryParams", "import httpx as hx\nbase = {'q': 'novel apis'}",
          "params = hx.QueryParams(base).merge({'page': '2'})",
          "assert str(params) == 'q=novel+apis&page=2', str(params)\n"), "swe", "httpx==0.28.1"),
    # an API new in scipy 1.15, one of the release's own targets, reached through `from scipy import stats`
    (_row("llm_0000000000bb", "scipy.stats.quantile",
          "import numpy as np\nfrom scipy import stats\nx = np.arange(11.0)",
          "q = stats.quantile(x, [0.25, 0.5])",
          "assert np.allclose(q, [2.5, 5.0]), q\n"), "data_science", "scipy==1.17.1"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("row", "domain", "pin"), PINNED, ids=["httpx", "scipy"])
def test_a_library_task_runs_in_the_environment_pinned_by_the_release(
        release: Path, tmp_path: Path, row: dict, domain: str, pin: str) -> None:
    row = dict(row, library=row["api_name"].split(".")[0], domain=domain)
    source = _write_release(tmp_path / "release", [row])
    shutil.copytree(release / "envs", source / "envs")
    shutil.copy(release / "data/benchmark/manifest.json", source / "data/benchmark/manifest.json")
    IMPORTERS.get("novelapibench")(source, tmp_path / "bench")
    assert load_benchmark(tmp_path / "bench").manifest.requirements == [pin]
    for model, expected in (("reference", 1.0), ("null", 0.0)):
        done = run_knowbench("run", str(tmp_path / "bench"), "--model", model, "--out", str(tmp_path / model))
        assert done.returncode == 0, done.stderr
        summary = json.loads((tmp_path / model / "summary.json").read_text())
        assert summary["scores"]["overall"]["pass_at"]["1"] == expected, (model, done.stdout)


def test_the_release_evaluators_rewrites_of_an_execution_test() -> None:
    from knowbench.builders.novelapibench import release_test_rewrites

    never_called = "def test_execution():\n    assert x == 1\n"
    assert release_test_rewrites(never_called).rstrip().endswith("test_execution()")
    called = never_called + "\n\ntest_execution()\n"
    assert release_test_rewrites(called) == called
    expects_error = "try:\n    f()\nexcept ValueError as error:\n    assert 'bad' in str(error)\n"
    namespace = {"f": lambda: None}
    with pytest.raises(AssertionError, match="expected exception was not raised"):
        exec(release_test_rewrites(expects_error), namespace)
    handles = "try:\n    f()\nexcept ValueError:\n    result = None\n"
    assert release_test_rewrites(handles) == handles
    # as the release's code does it: an assert anywhere in the try counts, a bare except does not
    assert "raise AssertionError" in release_test_rewrites("try:\n    assert f()\nexcept KeyError:\n    pass\n")
    bare = "try:\n    f()\nexcept:\n    assert False\n"
    assert release_test_rewrites(bare) == bare
    guarded = "def test_execution():\n    pass\n\n\nif __name__ == '__main__':\n    test_execution()\n"
    assert release_test_rewrites(guarded).rstrip().endswith("\ntest_execution()")


def test_the_argv_the_release_gives_a_script() -> None:
    from knowbench.builders.novelapibench import cli_argv

    assert cli_argv("ns = parser.parse_args(['--n', '3'])") == ["--n", "3"]
    assert cli_argv("ns = p.parse_args_into_dataclasses(args=('a',))") == ["a"]
    assert cli_argv("ns = parser.parse_args([name])") is None
    assert cli_argv("assert x == 1") is None
