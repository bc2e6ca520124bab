"""The HTML report (and its md/csv/json tables) over stored runs.

Fast tests build run directories from the labelled real failures of the fixture set. The
slow tests run examples/basic for real twice (a scripted OpenAI-compatible server on
loopback whose replies fail in known ways, and the reference backend), write the report
under runs/test-report/ (kept as a CI artifact with its screenshot) and open it in
headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagnosis_helpers import fixtures, sample, settings, store_run
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.diagnosis.runs import load_diagnoses, task_infos
from knowbench.execution.engine import SubprocessEngine
from knowbench.execution.sandbox import resolve_sandbox
from knowbench.methods import get_method
from knowbench.models.offline import ReferenceBackend
from knowbench.models.openai import OpenAIBackend
from knowbench.records import Limits, SampleResult, SamplingParams
from knowbench.report.html import CHART_IDS, build_report, write_report
from knowbench.report.runs import load_views, render_table
from knowbench.run import TimePolicy, run_benchmark
from knowbench.scoring.taxonomy import sample_digest
from knowbench.store import RunDirectory
from openai_server import ScriptedOpenAIServer, last_user_message
from report_runs import MODELS, SCRIPTED_FAILURES, four_replay_runs, measure, screenshot
from report_runs import chromium as _chromium

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "basic"
BENCH = load_benchmark(EXAMPLE)
ARTIFACTS = ROOT / "runs" / "test-report"
CHROMIUM = Path("/usr/bin/chromium")
# Where the four-run browser check writes its screenshots (default: the test's tmp_path).
SHOTS_ENV = "KNOWBENCH_REPORT_SHOTS"
SECTIONS = ("runs", "headline", "domains", "failures", "passk", "cost", "compare", "tasks")
# Attributes through which a page loads something; only same-document "#..." links may appear.
_LOADING_ATTRIBUTE = re.compile(r"\b(src|href|xlink:href|srcset|action|poster|data|background)"
                                r"\s*=\s*[\"']([^\"']*)[\"']", re.IGNORECASE)


def _example_settings(model: str) -> dict:
    return settings(model=model, benchmark_hash=BENCH.content_hash,
                    benchmark={"name": BENCH.name, "version": "1", "path": str(EXAMPLE),
                               "content_hash": BENCH.content_hash})


@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Run A: the hand-written real failures on examples/basic (one sample index each);
    run B: every task of A passing."""
    base = tmp_path_factory.mktemp("runs")
    failures: list[SampleResult] = []
    seen: dict[str, int] = {}
    for case in fixtures():
        task_id = case.result.task_id
        if case.source != "handwritten" or task_id.startswith("extra/"):
            continue
        failures.append(case.result.model_copy(update={"sample_idx": seen.get(task_id, 0)}))
        seen[task_id] = seen.get(task_id, 0) + 1
    passing = [sample(task_id, True, domain=task_id.split("/")[0]) for task_id in seen]
    return [store_run(base / "failing", failures, _example_settings("scripted")),
            store_run(base / "passing", passing, _example_settings("reference"))]


@pytest.fixture(scope="module")
def page(fixture_runs: list[Path]) -> str:
    return build_report(load_views(fixture_runs))


def test_report_is_one_file_with_every_section_and_chart_and_nothing_to_fetch(page: str) -> None:
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    assert len(re.findall(r"<svg\b", page)) == len(CHART_IDS)
    for chart in CHART_IDS:
        assert f'<svg id="{chart}"' in page and f'<figure id="figure-{chart}">' in page
    external = [value for _, value in _LOADING_ATTRIBUTE.findall(page) if not value.startswith("#")]
    assert external == []
    for forbidden in ("<script", "<link", "<img", "<iframe", "@import", "url(http", "<?xml", "<!DOCTYPE svg"):
        assert forbidden not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "element ids repeat across the inline charts"
    assert len(page) < 2_000_000


def test_report_is_deterministic(fixture_runs: list[Path], page: str) -> None:
    assert build_report(load_views(fixture_runs)) == page


def test_drill_down_shows_instruction_diff_traceback_and_diagnosis(page: str) -> None:
    block = page[page.index('<details id="task-text-slugify">'):]
    block = block[:block.index('<details id="task-', 10)]
    assert "turns a human-readable title into a URL slug" in block  # the instruction
    assert '<span class="del">' in block and '<span class="add">' in block  # diff vs reference
    assert "NameError: name &#x27;normalize&#x27; is not defined" in block  # the traceback
    assert "<b>WrongImport</b>" in block and "missing-import" in block  # the diagnosis
    assert "scripted · none: 0/" in block and "reference · none: 1/1" in block


def test_stored_diagnoses_are_used_only_for_the_sample_they_were_made_from(
        fixture_runs: list[Path], tmp_path: Path) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(fixture_runs[0], run_dir)
    results = RunDirectory.open(run_dir).results()
    fresh = load_diagnoses(run_dir, results)
    judged = fresh[0].model_copy(update={"label": "WrongLogic", "source": "judge",
                                         "judge": {"model": "j", "reason": "because"}})
    stale = fresh[1].model_copy(update={"label": "Resource", "sample_digest": "0" * 16})
    RunDirectory(run_dir).write_diagnoses([judged, stale])
    loaded = load_diagnoses(run_dir, results)
    assert loaded[0] == judged
    assert loaded[1] == fresh[1] and loaded[1].sample_digest == sample_digest(results[1])
    assert "judged by j: because" in build_report(load_views([run_dir]))


def test_table_formats_carry_the_same_scores(fixture_runs: list[Path]) -> None:
    views = load_views(fixture_runs)
    document = json.loads(render_table(views, "json"))
    csv_lines = render_table(views, "csv").strip().splitlines()
    markdown = render_table(views, "md")
    assert len(csv_lines) - 1 == len(document["rows"])
    assert [run["name"] for run in document["runs"]] == ["scripted · none", "reference · none"]
    overall = document["runs"][1]["scores"]["overall"]
    assert overall["pass_at"]["1"] == 1.0
    assert "| reference · none | n=1, T=0.0 | all (micro) |" in markdown and "WrongImport" in markdown
    assert document["runs"][0]["failures"]["pass"] == 0
    assert sum(document["runs"][0]["failures"].values()) == sum(
        1 for r in views[0].results if r.kind == "function")


# ---------------------------------------------------------------------------- what a reader sees


def _cells(page: str, section: str) -> list[list[str]]:
    """The text of every row of a section's first table (tags removed)."""
    block = page[page.index(f'<section id="{section}">'):]
    block = block[:block.index("</table>")]
    return [[re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", block)]


def _replay_settings(file: str, **extra: object) -> dict:
    run_settings = settings(**extra)
    run_settings["model"] = {"backend": "replay", "path": f"/data/samples/{file}"}
    return run_settings


def test_runs_are_named_by_their_label_else_by_model_method_and_replay_file(tmp_path: Path) -> None:
    results = [sample("a", True), sample("b", False)]
    first = store_run(tmp_path / "one", results, _replay_settings("gpt-4o-mini.jsonl"))
    second = store_run(tmp_path / "two", results, _replay_settings("qwen-7b.jsonl"))
    labelled = store_run(tmp_path / "three", results, _replay_settings("qwen-7b.jsonl"))
    document = json.loads((labelled / "run.json").read_text())
    (labelled / "run.json").write_text(json.dumps({**document, "label": "Qwen 7B, RAG off"}))
    views = load_views([first, second, labelled])
    assert [view.name for view in views] == [
        "replay:gpt-4o-mini.jsonl · none", "replay:qwen-7b.jsonl · none", "Qwen 7B, RAG off"]
    page = build_report(views)
    assert [row[0] for row in _cells(page, "runs")[1:]] == [view.name for view in views]
    assert "replay · none" not in page


def _noisy_run(base: Path, name: str, flip: bool = False) -> Path:
    from test_metrics import NOISY_COUNTS

    results = [sample(f"t{i:03d}", j < c if not (flip and i == 0) else j >= c, idx=j)
               for i, c in enumerate(NOISY_COUNTS) for j in range(3)]
    return store_run(base / name, results, settings(model=name))


def test_a_score_prints_the_same_in_the_headline_the_comparison_the_leaderboard_and_the_cli(
        tmp_path: Path) -> None:
    from helpers import run_knowbench

    runs = [_noisy_run(tmp_path, "a"), _noisy_run(tmp_path, "b", flip=True)]
    page = build_report(load_views(runs))
    headline = _cells(page, "headline")
    assert headline[1][0] == "a · none" and headline[1][5] == "53.8"  # pass@1 of run a
    compared = _cells(page, "compare")[1]
    assert compared[3] == "53.8"  # pass@1 A, summed by numpy on the paired tasks
    board = run_knowbench("leaderboard", str(runs[0]), "--out", str(tmp_path / "board.json"))
    assert board.returncode == 0, board.stderr
    assert "53.8" in board.stdout and "53.7" not in board.stdout
    compared_cli = run_knowbench("compare", str(runs[0]), str(runs[1]), "--resamples", "200")
    assert compared_cli.returncode == 0, compared_cli.stderr
    assert "53.8" in compared_cli.stdout and "53.7" not in compared_cli.stdout
    scored = run_knowbench("score", str(runs[0]))
    assert scored.returncode == 0, scored.stderr
    assert "53.8" in scored.stdout and "53.7" not in scored.stdout
    assert "95% CI (tasks)" in scored.stdout  # the CLI shows the headline interval too


def test_headline_scores_carry_their_bootstrap_interval(fixture_runs: list[Path], page: str) -> None:
    views = load_views(fixture_runs)
    header, failing = _cells(page, "headline")[:2]
    interval = views[0].scores.ci["pass@1"]
    assert "pass@1 95% CI" in header and "ACC 95% CI" in header
    expected = f"[{100 * interval.low:.1f}, {100 * interval.high:.1f}]"
    assert failing[header.index("pass@1 95% CI")] == expected
    assert "1,000 resamples, seed 0" in page


def _executed(task_id: str, wall_s: float, passed: bool = True) -> SampleResult:
    from knowbench.records import Execution

    return sample(task_id, passed, execution=Execution(status="pass" if passed else "fail", tests=[],
                                                       sandbox="bwrap", limits=Limits(wall_s=wall_s)))


def test_the_runs_table_shows_the_limits_the_samples_ran_under(tmp_path: Path) -> None:
    calibrated = settings(time_policy={"mode": "calibrated", "floor_s": 3.0, "factor": 10.0})
    run = store_run(tmp_path / "calibrated", [_executed("a", 3.0), _executed("b", 3.0),
                                              _executed("c", 7.5)], calibrated)
    fixed = settings(time_policy={"mode": "fixed", "fixed_s": 2.0, "floor_s": 3.0, "factor": 10.0})
    other = store_run(tmp_path / "fixed", [_executed("a", 2.0), _executed("b", 2.0)], fixed)
    rows = _cells(build_report(load_views([run, other])), "runs")
    limits = rows[0].index("limits applied")
    assert rows[1][limits] == ("3–7.5 s (median 3 s), 1024 MB over 3 executed samples "
                               "(calibrated: max(3 s, 10 × the reference&#x27;s runtime))")
    assert rows[2][limits] == "2 s, 1024 MB over 2 executed samples (fixed by --timeout 2 s)"
    assert "10 s" not in rows[1][limits]  # the configured limit no sample ran under


def test_the_reference_diff_ignores_docstrings_and_comments(tmp_path: Path) -> None:
    from knowbench.report.html import without_docstrings

    reference = ('def area(r):\n    """The area of a circle.\n\n    Args:\n        r: radius\n    """\n'
                 "    # pi times r squared\n    return 3.14159 * r * r  # close enough\n")
    assert without_docstrings(reference) == "def area(r):\n    return 3.14159 * r * r"
    assert without_docstrings('class A:\n    """Doc."""\n') == "class A:\n    ..."
    assert without_docstrings("def broken(:\n") == "def broken(:\n"
    assert without_docstrings("x = '# not a comment'\n") == "x = '# not a comment'"
    assert without_docstrings('def f(): "doc"\n') == 'def f(): "doc"'  # on the def line: kept

    task = next(t for t in BENCH.tasks if isinstance(t, FunctionTask) and '"""' in t.reference)
    wrong = without_docstrings(task.reference).replace("return", "return None or", 1)
    result = sample(task.task_id, False, domain=task.domain, code=wrong)
    run = store_run(tmp_path / "run", [result], _example_settings("m"))
    page = build_report(load_views([run]))
    diff = page[page.index('<pre class="diff">'):]
    diff = diff[:diff.index("</pre>")]
    changed = [line for line in re.findall(r'<span class="(?:add|del)">(.*?)</span>', diff)]
    assert len(changed) == 2 and all("return" in line for line in changed), changed
    assert "docstrings and comments omitted" in page


def test_runs_sharing_no_task_are_not_compared_in_the_report(tmp_path: Path) -> None:
    one = store_run(tmp_path / "one", [sample("a", True)], settings(model="x"))
    other = store_run(tmp_path / "other", [sample("z", True)],
                      settings(model="y", benchmark_hash="sha256:def"))
    page = build_report(load_views([one, other]))
    row = _cells(page, "compare")[1]
    assert row[2] == "0" and row[-1] == "not compared: no function task in common"
    assert "compare runs of the same benchmark" in page


# ---------------------------------------------------------------------------- real runs

# Replies of the scripted model: sample 0 fails in a known way, sample 1 is the gold code.


def _scripted_reply(body: dict) -> str:
    message = last_user_message(body)
    sample_idx = int(body.get("seed") or 0)
    for task in BENCH.tasks:
        if isinstance(task, FunctionTask) and f"Complete the function `{task.entry_point}`." in message:
            failure = SCRIPTED_FAILURES.get(task.task_id)
            code = failure[1] if failure and sample_idx == 0 else task.reference
            return f"Here it is:\n```python\n{code}```\n"
        if isinstance(task, ChoiceTask) and task.question.strip()[:60] in message:
            right = task.task_id.startswith(("text", "data"))
            letters = task.answer if right else [next(x for x in task.options if x not in task.answer)]
            return f"Answer: {', '.join(letters)}"
    return "no idea"


@pytest.fixture(scope="module")
def real_runs() -> Iterator[tuple[Path, Path, Path]]:
    """Two real runs of examples/basic and their report, kept under runs/test-report/."""
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    engine = SubprocessEngine(resolve_sandbox("auto"), workers=2)
    try:
        with ScriptedOpenAIServer(responder=_scripted_reply) as server:
            backend = OpenAIBackend(model="scripted", base_url=server.base_url, backoff_s=0.01)
            run_benchmark(BENCH, backend, get_method("none"), engine, ARTIFACTS / "scripted",
                          SamplingParams(n=2, temperature=0.7, seed=0), Limits(),
                          time_policy=TimePolicy(mode="fixed", fixed_s=3.0), ks=(1, 2))
        run_benchmark(BENCH, ReferenceBackend(), get_method("none"), engine, ARTIFACTS / "reference",
                      SamplingParams(), Limits(), time_policy=TimePolicy(mode="benchmark"), ks=(1, 2))
    finally:
        engine.close()
    report = write_report([ARTIFACTS / "reference", ARTIFACTS / "scripted"], ARTIFACTS / "report.html",
                          ks=(1, 2))
    yield ARTIFACTS / "scripted", ARTIFACTS / "reference", report


@pytest.mark.slow
def test_real_runs_are_diagnosed_as_their_failures_were_scripted(real_runs: tuple[Path, Path, Path]) -> None:
    scripted, _, report = real_runs
    run = RunDirectory.open(scripted)
    results = run.results()
    diagnoses = load_diagnoses(scripted, results, task_infos(run.tasks()))
    labels = {(d.task_id, d.sample_idx): d.label for d in diagnoses}
    assert labels == {(task_id, 0): label for task_id, (label, _) in SCRIPTED_FAILURES.items()}
    page = report.read_text()
    for label in {label for label, _ in SCRIPTED_FAILURES.values()}:
        assert f"<b>{label}</b>" in page
    assert "Paired comparison" in page and "scripted · none" in page


def _page_requests(net_log: Path) -> list[str]:
    """http(s) URLs the page asked for, from Chromium's NetLog. Requests the browser makes
    for itself (update checks, time sync) carry the initiator "not an origin"; a page opened
    from disk has the opaque origin "null"."""
    log = json.loads(net_log.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [event["params"]["url"] for event in log["events"]
            if event["type"] == start_job and "url" in event.get("params", {})
            and event["params"].get("initiator") != "not an origin"
            and event["params"]["url"].startswith(("http://", "https://"))]


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing: install the Debian "
                                                  "package 'chromium' (the Makefile's test set-up does)")
def test_report_renders_in_headless_chromium_and_fetches_nothing(
        real_runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, _, report = real_runs
    net_log = tmp_path / "net.json"
    dumped = _chromium(f"--log-net-log={net_log}", "--dump-dom", report.as_uri(), profile=tmp_path / "p1")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    assert len(re.findall(r"<svg\b", dom)) == len(CHART_IDS)
    for chart in CHART_IDS:
        assert f'id="{chart}"' in dom
    assert dom.count('<details id="task-') == len(BENCH.tasks)
    assert _page_requests(net_log) == []

    shot_path = ARTIFACTS / "report.png"
    shot = _chromium(f"--screenshot={shot_path}", "--window-size=1280,2000", report.as_uri(),
                     profile=tmp_path / "p2")
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = shot_path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000

    # The network check itself works: a page that does fetch something is caught.
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
    control_log = tmp_path / "control.json"
    _chromium(f"--log-net-log={control_log}", "--dump-dom", control.as_uri(), profile=tmp_path / "p3")
    assert _page_requests(control_log) == ["http://127.0.0.1:9/x.png"]


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing: install the Debian "
                                                  "package 'chromium' (the Makefile's test set-up does)")
def test_a_report_of_four_runs_fits_1400_pixels_in_chromium(tmp_path: Path) -> None:
    """Four real replay runs with long labels: at 1400 CSS pixels neither the page nor any
    table's container scrolls sideways and no chart text (legends, labels) is cut off."""
    runs = four_replay_runs(tmp_path / "runs")
    report = write_report(runs, tmp_path / "report.html")
    page = report.read_text()
    assert all(f"<td class=text>{_html_text(label)}</td>" in page for _, label, _, _ in MODELS)
    shots = Path(os.environ.get(SHOTS_ENV) or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    for height in (2400, 5200):
        png = screenshot(report, shots / f"report-1400x{height}.png", tmp_path, height=height)
        assert png.read_bytes().startswith(b"\x89PNG")
        print(f"screenshot: {png}")
    measured = measure(report, tmp_path, width=1400)
    assert measured["page"]["scroll"] <= measured["page"]["client"], measured["page"]
    sections = {box["section"] for box in measured["containers"]}
    assert {"runs", "headline", "domains", "failures", "cost", "compare"} <= sections
    too_wide = [box for box in measured["containers"] if box["scroll"] > box["client"]]
    assert too_wide == []
    assert measured["clipped"] == []


def _html_text(text: str) -> str:
    import html

    return html.escape(text, quote=True)


@pytest.mark.slow
def test_run_label_is_stored_beside_the_settings_and_a_resumed_run_can_be_relabelled(tmp_path: Path) -> None:
    from helpers import run_knowbench

    task = next(t for t in BENCH.tasks if isinstance(t, FunctionTask))
    samples = tmp_path / "model-x.jsonl"
    samples.write_text(json.dumps({"task_id": task.task_id, "completion": task.reference}) + "\n")
    out = tmp_path / "run"
    command = ("run", str(EXAMPLE), "--model", f"replay:{samples}", "--task", task.task_id,
               "--out", str(out), "--engine", "subprocess", "--workers", "1")
    first = run_knowbench(*command)
    assert first.returncode == 0, first.stderr
    document = json.loads((out / "run.json").read_text())
    assert document["label"] == "replay:model-x.jsonl · none" and "label" not in document["settings"]
    relabelled = run_knowbench(*command, "--label", "Model X, no knowledge")
    assert relabelled.returncode == 0, relabelled.stderr  # not "different settings"
    resumed = run_knowbench(*command)  # without --label the run keeps the label it has
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "run.json").read_text())["label"] == "Model X, no knowledge"
    assert load_views([out])[0].name == "Model X, no knowledge"
    empty = run_knowbench(*command, "--label", " ")
    assert empty.returncode == 2 and "--label must be one non-empty line" in empty.stderr
