"""Paths and values a user gives that the command cannot use: one message naming the option or
the file, exit code 2, no traceback; and an output that could not be written at the end is
refused before the work, where the command knows it (`knowbench.paths.check_output`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from helpers import ROOT, run_knowbench

BASIC = ROOT / "examples" / "basic"


def refused(done, *says: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    for text in says:
        assert text in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished reference run of one task of the example benchmark."""
    run_dir = tmp_path_factory.mktemp("run") / "run"
    done = run_knowbench("run", str(BASIC), "--model", "reference", "--task", "text/slugify",
                         "--out", str(run_dir), timeout=300)
    assert done.returncode == 0, done.stderr
    return run_dir


def test_an_output_directory_that_is_a_file_or_under_one_is_refused_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    refused(run_knowbench("run", str(BASIC), "--model", "reference", "--out", str(tmp_path / "afile")),
            f"--out {tmp_path / 'afile'} is a file; give a directory")
    refused(run_knowbench("run", str(BASIC), "--model", "reference", "--out", str(tmp_path / "afile" / "run")),
            f"{tmp_path / 'afile'} is a file, so nothing can be written under it")
    assert (tmp_path / "afile").read_text() == "x"


def test_a_report_file_that_is_a_directory_is_refused_before_certification(tmp_path: Path) -> None:
    done = run_knowbench("certify", str(BASIC), "--task", "text/slugify", "--report", str(tmp_path))
    refused(done, f"--report {tmp_path} is a directory; give a file")
    assert "certif" not in done.stdout.lower()  # nothing was run


def test_a_path_the_machine_refuses_at_the_end_is_a_message(tmp_path: Path) -> None:
    # `split` writes last; its directory target fails at the write, and says where and why.
    refused(run_knowbench("split", str(BASIC), "--out", str(tmp_path)),
            f"error: {tmp_path}: Is a directory; check the paths given to this command")


@pytest.mark.parametrize("command", ["run", "score", "report"])
def test_k_below_one_is_a_usage_error_before_anything_runs(command: str, finished_run: Path, tmp_path: Path) -> None:
    args = {"run": ["run", str(BASIC), "--model", "reference", "--out", str(tmp_path / "run")],
            "score": ["score", str(finished_run)],
            "report": ["report", str(finished_run), "--format", "md"]}[command]
    refused(run_knowbench(*args, "--k", "0"), "Invalid value for '--k'")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("text", "says"), [
    ("{bad", "run.json:1:2: not JSON (Expecting property name enclosed in double quotes)"),
    ("", "run.json:1:1: not JSON (Expecting value)"),
    ('{"settings": 3}', "not a run's run.json (an object with \"settings\")"),
])
@pytest.mark.parametrize("command", ["score", "report", "diagnose", "run"])
def test_a_damaged_run_json_is_named_with_where_it_breaks(text: str, says: str, command: str, finished_run: Path,
                                                          tmp_path: Path) -> None:
    damaged = tmp_path / "run"
    shutil.copytree(finished_run, damaged)
    (damaged / "run.json").write_text(text)
    args = {"score": ["score", str(damaged)], "report": ["report", str(damaged), "--format", "md"],
            "diagnose": ["diagnose", str(damaged)],
            "run": ["run", str(BASIC), "--model", "reference", "--task", "text/slugify", "--out", str(damaged)]}
    refused(run_knowbench(*args[command], env={**os.environ, "OPENAI_API_KEY": ""}), str(damaged / "run.json"), says)


def test_a_split_that_is_a_directory_or_not_a_split_is_named(tmp_path: Path) -> None:
    refused(run_knowbench("run", str(BASIC), "--model", "reference", "--split", str(tmp_path),
                          "--out", str(tmp_path / "run")),
            f"{tmp_path} is a directory; give a split file")
    bad = tmp_path / "split.json"
    bad.write_text(json.dumps({"test": 5}))
    done = run_knowbench("run", str(BASIC), "--model", "reference", "--split", str(bad), "--out", str(tmp_path / "run"))
    refused(done, "not a split written by `knowbench split` (benchmark: Field required (and 7 more problems))")
    assert "errors.pydantic.dev" not in done.stdout + done.stderr


def test_a_report_into_a_directory_says_so(finished_run: Path, tmp_path: Path) -> None:
    refused(run_knowbench("report", str(finished_run), "--out", str(tmp_path)),
            f"--out {tmp_path} is a directory; give a file")


def test_a_corpus_source_that_is_a_missing_path_is_not_sent_to_the_package_index(tmp_path: Path) -> None:
    env = {**os.environ, "KNOWBENCH_HOME": str(tmp_path / "home")}
    refused(run_knowbench("corpus", "build", str(tmp_path / "nosrc"), "--name", "c", env=env),
            f"{tmp_path / 'nosrc'}: no such directory or file")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("def f():\n    return 1\n")
    refused(run_knowbench("corpus", "build", str(tmp_path / "src"), "--installed", "json", "--name", "c", env=env),
            f"give SOURCE ({tmp_path / 'src'}) or --installed (json), not both")
    assert not (tmp_path / "home" / "corpora" / "c").exists()


def test_a_koco_project_without_a_function_block_is_named_and_writes_nothing(tmp_path: Path) -> None:
    project = tmp_path / "fw" / "test_examples" / "proj"
    (project / "code").mkdir(parents=True)
    (project / "requirements").mkdir()
    (project / "code" / "m.py").write_text("x = 1\n")
    (project / "requirements" / "03_spec.md").write_text("# spec\n")
    refused(run_knowbench("import", "koco-project", str(project), "--out", str(tmp_path / "out")),
            f"{project / 'requirements' / '03_spec.md'}: no '# FUNCTION:' block")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["tasks", "filter"])
def test_novel_time_limits_below_a_second_are_usage_errors(command: str, tmp_path: Path) -> None:
    refused(run_knowbench("novel", command, str(BASIC), "--out", str(tmp_path / "out"), "--time-limit", "0"),
            "Invalid value for '--time-limit'")


def test_overwrite_starts_a_run_over_but_never_clears_a_directory_that_holds_no_run(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(BASIC, bench)
    before = sorted(path.name for path in bench.iterdir())
    refused(run_knowbench("run", str(BASIC), "--model", "reference", "--out", str(bench), "--overwrite"),
            f"{bench} exists and is not a knowbench run directory (it holds benchmark.json, tasks.jsonl)")
    assert sorted(path.name for path in bench.iterdir()) == before
    # What a run killed before its run.json left is a run's, and --overwrite clears it.
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / "run.sqlite").write_bytes(b"")
    done = run_knowbench("run", str(BASIC), "--model", "reference", "--task", "text/slugify",
                         "--out", str(tmp_path / "killed"), "--overwrite", timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "killed" / "run.json").is_file()


@pytest.mark.parametrize(("options", "says"), [
    (["--source", "{src}=other"], "{src} given more than once; mine each source once, with one domain"),
    (["--engine", "bogus"], "unknown engine 'bogus'; choose one of forkserver, subprocess, ray"),
    (["--sandbox", "bogus"], "unknown sandbox 'bogus'; choose one of auto, bwrap, unshare, none"),
    (["--min-lines", "50", "--max-lines", "5"], "--min-lines 50 is more than --max-lines 5"),
    (["--llm", "null"], "--llm null calls no model"),
])
def test_mine_refuses_what_it_cannot_do_before_fetching_anything(options: list[str], says: str, tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "m.py").write_text("def f(x):\n    return x + 1\n")
    done = run_knowbench("mine", str(source), "--domain", "d", "--out", str(tmp_path / "out"),
                         *(option.format(src=source) for option in options))
    refused(done, says.format(src=source))
    assert "fetching" not in done.stdout and not (tmp_path / "out").exists()


def test_a_damaged_run_store_says_how_to_start_over_with_the_command_that_can(finished_run: Path,
                                                                              tmp_path: Path) -> None:
    damaged = tmp_path / "run"
    shutil.copytree(finished_run, damaged)
    for name in ("run.sqlite-wal", "run.sqlite-shm"):
        (damaged / name).unlink(missing_ok=True)
    (damaged / "run.sqlite").write_bytes(b"not a database" * 100)
    refused(run_knowbench("score", str(damaged)), f"{damaged / 'run.sqlite'}: cannot open the run store",
            "fix: restore it, or start the run over (`knowbench run ... --overwrite` on this directory)")


def test_compare_warns_when_the_runs_scored_other_benchmark_content_or_are_one_run(finished_run: Path,
                                                                                   tmp_path: Path) -> None:
    changed = tmp_path / "bench"
    shutil.copytree(BASIC, changed)
    manifest = json.loads((changed / "benchmark.json").read_text())
    manifest["description"] = manifest.get("description", "") + " (edited)"
    (changed / "benchmark.json").write_text(json.dumps(manifest))
    other = tmp_path / "other"
    done = run_knowbench("run", str(changed), "--model", "reference", "--task", "text/slugify", "--out", str(other),
                         timeout=300)
    assert done.returncode == 0, done.stderr
    compared = run_knowbench("compare", str(finished_run), str(other))
    assert compared.returncode == 0, compared.stderr
    assert "tasks are paired by id, and a task whose tests or reference changed between them is not the same task" \
        in " ".join(compared.stderr.split())
    same = run_knowbench("compare", str(finished_run), str(finished_run))
    assert same.returncode == 0 and "are the same run" in same.stderr
    assert "paired by id" not in " ".join(same.stderr.split())


@pytest.mark.parametrize(("args", "option", "value"), [
    (["run", str(BASIC), "--model", "reference"], "--env", "bogus"),
    (["run", str(BASIC), "--model", "reference"], "--isolation", "split"),
    (["certify", str(BASIC)], "--env", "bogus"),
    (["compare", "a", "b"], "--kind", "functions"),
    (["train", "--model", "hf:x", "--data", "corpus:x", "--out", "x"], "--method", "qlora"),
    (["train", "--model", "hf:x", "--data", "corpus:x", "--out", "x"], "--schedule", "step"),
    (["study", "forgetting", "--model", "hf:x", "--tuned", "hf:y", "--out", "x"], "--env", "bogus"),
    (["study", "bundle-stripped", "--model", "hf:x", "--out", "x"], "--train-method", "bogus"),
    (["novel", "discover", "httpx"], "--prefer", "egg"),
])
def test_an_option_of_fixed_values_refuses_another_as_the_command_line_is_read(
        args: list[str], option: str, value: str, tmp_path: Path) -> None:
    done = run_knowbench(*args, option, value, cwd=tmp_path)
    refused(done, f"Invalid value for '{option}': '{value}' is not one of")
    assert not any(tmp_path.iterdir())  # nothing was started


def test_a_model_that_must_write_text_is_refused_when_it_calls_no_model(finished_run: Path,
                                                                        tmp_path: Path) -> None:
    """Judges, question writers, filter models and CDD's model write or answer text no task
    keys: the offline backends (reference, null, replay) cannot, and are refused up front."""
    refused(run_knowbench("diagnose", str(finished_run), "--judge", "reference"),
            "--judge reference calls no model")
    assert not (finished_run / "diagnoses.jsonl").exists()
    refused(run_knowbench("contamination", str(BASIC), "--model", "null"), "--model null calls no model")
    replay = f"replay:{finished_run / 'samples.jsonl'}"
    refused(run_knowbench("build", "qa", "--corpus", "c", "--llm", replay, "--out", str(tmp_path / "qa")),
            f"--llm {replay} calls no model")
    refused(run_knowbench("build", "qa", "--corpus", "c", "--llm", "gen", "--base-url", "http://127.0.0.1:9/v1",
                          "--filter-model", "reference", "--out", str(tmp_path / "qa")),
            "--filter-model reference calls no model")
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("")
    refused(run_knowbench("novel", "bundles", str(candidates), "--llm", "null"), "--llm null calls no model")
    assert not (tmp_path / "qa").exists()


def test_koco_qa_compare_refuses_a_replay_file_without_koco_verdicts(finished_run: Path, tmp_path: Path) -> None:
    samples = finished_run / "samples.jsonl"
    refused(run_knowbench("import", "koco-qa-compare", str(finished_run), str(samples)),
            f"{samples}: no line holds KOCO-Bench's recorded verdict")
    refused(run_knowbench("import", "koco-qa-compare", str(finished_run), str(tmp_path / "none.jsonl")),
            f"{tmp_path / 'none.jsonl'}: no such file")
    task = json.loads(samples.read_text().splitlines()[0])
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"task_id": "x/" + task["task_id"], "completion": "A",
                                 "koco": {"is_correct": True, "pred_letters": ["A"]}}) + "\n")
    refused(run_knowbench("import", "koco-qa-compare", str(finished_run), str(other)),
            f"{finished_run} answered none of the tasks of {other}")


def test_a_report_format_that_contradicts_the_file_suffix_is_refused(finished_run: Path, tmp_path: Path) -> None:
    refused(run_knowbench("report", str(finished_run), "--format", "md", "--out", str(tmp_path / "r.html")),
            f"--format md but --out {tmp_path / 'r.html'} names a .html file", f"name the file {tmp_path / 'r.md'}")
    refused(run_knowbench("report", str(finished_run), "--out", str(tmp_path / "r.txt")),
            "no report format is written as '.txt'")
    assert not any(tmp_path.iterdir())
    done = run_knowbench("report", str(finished_run), "--format", "CSV", "--out", str(tmp_path / "r.txt"))
    assert done.returncode == 0, done.stderr
    assert "," in (tmp_path / "r.txt").read_text().splitlines()[0]  # CSV, as asked, whatever the suffix


def test_a_local_model_name_missing_from_the_cache_is_refused_before_anything_loads(tmp_path: Path) -> None:
    says = "no model 'no-such-org/no-such-model' in the local Hugging Face cache"
    refused(run_knowbench("run", str(BASIC), "--model", "hf:no-such-org/no-such-model", "--out", str(tmp_path / "r"),
                          env={**os.environ, "HF_HOME": str(tmp_path / "hf")}), says)
    refused(run_knowbench("train", "--model", "no-such-org/no-such-model", "--data", "corpus:none",
                          "--out", str(tmp_path / "t"), env={**os.environ, "HF_HOME": str(tmp_path / "hf")}), says)
    assert not (tmp_path / "r").exists() and not (tmp_path / "t").exists()


def test_benchmark_and_replay_files_that_are_not_what_they_should_be_are_named(finished_run: Path,
                                                                                tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(BASIC, bench)
    (bench / "tasks.jsonl").write_bytes((bench / "tasks.jsonl").read_bytes() + b'{"task_id": "\xff"}\n')
    lines = (bench / "tasks.jsonl").read_bytes().count(b"\n")
    refused(run_knowbench("validate", str(bench)), f"{bench / 'tasks.jsonl'}:{lines}: is not UTF-8 text (byte 0xff)")
    (bench / "benchmark.json").unlink()
    (bench / "benchmark.json").mkdir()
    refused(run_knowbench("validate", str(bench)), f"{bench / 'benchmark.json'}: is a directory, not a file")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    for model, says in ((f"replay:{empty}", f"{empty}: holds no completion"),
                        (f"replay:{tmp_path}", f"{tmp_path}: is a directory")):
        refused(run_knowbench("run", str(BASIC), "--model", model, "--out", str(tmp_path / "r")), says)
    done = run_knowbench("run", str(BASIC), "--model", f"replay:{finished_run / 'samples.jsonl'}",
                         "--task", "text/slugify", "--n", "2", "--out", str(tmp_path / "r"), timeout=300)
    assert done.returncode == 0, done.stderr
    assert "--n is ignored" in done.stderr and "temperature 0" not in done.stderr
