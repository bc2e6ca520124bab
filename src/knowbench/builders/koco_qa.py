"""KOCO-Bench's knowledge Q&A (domain knowledge understanding): its problem files as choice
tasks, its released model replies as replay samples, and knowbench's verdicts on those replies
next to the ones KOCO-Bench recorded.

The release lays the data out as

    problems/problems_<framework>_EN.json   {meta: {repository, target_domains, ...},
                                             problems: [{id, dataset, instruction, stem,
                                                         explanation, gt}]}
    results/<model>/results_<framework>.json {summary: {model, total, correct, accuracy_percent},
                                             results: [{id, stem, pred_raw, pred_letters,
                                                        gt_letters, is_correct}]}

A problem's options are the lines "- (A) text" of its `stem` (a line that starts no option
continues the one before it); the text before the first option is the question. Its
`instruction` ("choose ONE option" / "choose MULTIPLE options") says whether several letters
may be right, and `gt` lists them. Each problem becomes a `choice` task with the id
`<framework>/<id>`, framework and domain both the framework's name (a KOCO problem names no
finer domain; the framework's `target_domains` and the problem's `explanation` go into the
task's metadata).

Replies become one replay samples file per model (`<model>.jsonl`: task_id, completion =
`pred_raw`, sample_idx 0, and under `koco` what KOCO recorded: `pred_letters`, `is_correct`),
plus `recorded.json` with each results file's `summary`. `knowbench run BENCH --model
replay:<model>.jsonl` then scores the replies with knowbench's own parser, and
`compare_replay` sets its verdicts beside KOCO's.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench import __version__
from knowbench.benchmark.load import load_benchmark, sha256_file, write_benchmark
from knowbench.benchmark.schema import ChoiceTask, Manifest, Provenance
from knowbench.errors import UserError, first_problem
from knowbench.jsonl import load_json, read_objects
from knowbench.scoring.metrics import percent

_PROBLEMS = re.compile(r"^problems_(?P<framework>.+?)(?:_(?P<language>[A-Z]{2}))?\.json$")
_RESULTS = re.compile(r"^results_(?P<framework>.+)\.json$")
_OPTION = re.compile(r"^[ \t]*(?:[-*+][ \t]*)?\(([A-Z])\)[ \t]*(.*)$")
_MULTIPLE = re.compile(r"\bmultiple\b", re.IGNORECASE)
_SINGLE = re.compile(r"\b(?:one|single)\b", re.IGNORECASE)


def task_id_of(framework: str, problem_id: object) -> str:
    return f"{framework}/{problem_id}"


def problem_files(source: Path) -> list[Path]:
    """The problem files under `source`: the file itself, or `problems_*.json` in it or in its
    `problems/` folder."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise UserError(f"{source}: no such file or directory\n  fix: pass a KOCO-Bench problems "
                        "file (problems_<framework>_EN.json) or the folder holding problems/")
    folder = source / "problems" if (source / "problems").is_dir() else source
    found = sorted(folder.glob("problems_*.json"))
    if not found:
        raise UserError(f"{source}: no problems_<framework>_EN.json file here or in problems/\n"
                        "  fix: pass KOCO-Bench's domain_knowledge_understanding folder or one "
                        "problems file")
    return found


def split_stem(stem: str) -> tuple[str, dict[str, str]]:
    """The question and the options (letter -> text, in order) of a KOCO stem. Raises
    ValueError when it has no option lines or a letter repeats."""
    lines = stem.split("\n")
    first = next((index for index, line in enumerate(lines) if _OPTION.match(line)), None)
    if first is None:
        raise ValueError("the stem holds no option line '- (A) ...'")
    options: dict[str, list[str]] = {}
    letter = ""
    for line in lines[first:]:
        match = _OPTION.match(line)
        if match:
            letter = match.group(1)
            if letter in options:
                raise ValueError(f"option ({letter}) appears twice in the stem")
            options[letter] = [match.group(2)]
        elif line.strip():
            options[letter].append(line.strip())
    question = "\n".join(lines[:first]).strip()
    if not question:
        raise ValueError("the stem has no question before its options")
    return question, {key: " ".join(parts).strip() for key, parts in options.items()}


def is_multiple(instruction: str, answer: list[str]) -> bool:
    """Whether a problem asks for several letters: its instruction says MULTIPLE, or (an
    instruction that says neither) its answer has more than one."""
    if _MULTIPLE.search(instruction):
        return True
    if _SINGLE.search(instruction):
        return False
    return len(answer) > 1


def task_from_problem(framework: str, problem: dict[str, Any], meta: dict[str, Any]) -> ChoiceTask:
    """One KOCO problem as a choice task. Raises ValueError (or ValidationError) when it cannot
    be one."""
    for field, kind in (("stem", str), ("gt", list)):
        if not isinstance(problem.get(field), kind):
            raise ValueError(f"field '{field}' is missing or not a {kind.__name__}")
    if "id" not in problem:
        raise ValueError("field 'id' is missing")
    question, options = split_stem(problem["stem"])
    instruction = str(problem.get("instruction") or "")
    answer = [str(letter).strip() for letter in problem["gt"]]
    metadata: dict[str, Any] = {"source": "koco-bench", "koco_id": problem["id"]}
    if problem.get("explanation"):
        metadata["explanation"] = problem["explanation"]
    if meta.get("target_domains"):
        metadata["target_domains"] = meta["target_domains"]
    return ChoiceTask(task_id=task_id_of(framework, problem["id"]), domain=framework,
                      framework=framework, question=question, options=options, answer=answer,
                      multiple=is_multiple(instruction, answer), instruction=instruction,
                      metadata=metadata)


def _load_json(path: Path) -> Any:
    try:
        return load_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: not readable JSON ({error})") from None


def _koco_file(path: Path, key: str, pattern: re.Pattern[str]) -> tuple[dict[str, Any], str]:
    """A KOCO-Bench problems or results file (an object holding the list `key`), and the
    framework it is about."""
    data = _load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise UserError(f"{path}: expected an object with a '{key}' list (a KOCO-Bench "
                        f"{key} file)")
    return data, _framework(path, pattern, data)


def _framework(path: Path, pattern: re.Pattern[str], data: dict[str, Any]) -> str:
    match = pattern.match(path.name)
    if match:
        return match.group("framework")
    meta = data.get("meta") or {}
    name = meta.get("repository") if isinstance(meta, dict) else None
    if isinstance(name, str) and name:
        return name
    raise UserError(f"{path}: the file name does not say the framework "
                    "(expected problems_<framework>_EN.json or results_<framework>.json)")


def import_problems(source: Path, out: Path, *, name: str = "koco-qa") -> dict[str, Any]:
    """Write KOCO-Bench problem files under `source` as a benchmark of choice tasks at `out`.

    Returns the report (also written to `out/import_report.json`): problems read, tasks
    imported per framework, and every problem left out with its file, index and reason.
    """
    tasks: list[ChoiceTask] = []
    left_out: list[dict[str, Any]] = []
    hashes: dict[str, str] = {}
    problems = 0
    seen: set[str] = set()
    for path in problem_files(source):
        data, framework = _koco_file(path, "problems", _PROBLEMS)
        meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
        hashes[f"problems/{path.name}"] = sha256_file(path)
        for index, problem in enumerate(data["problems"]):
            problems += 1
            where = {"file": path.name, "index": index,
                     "id": problem.get("id") if isinstance(problem, dict) else None}
            try:
                if not isinstance(problem, dict):
                    raise ValueError("a problem must be an object")
                task = task_from_problem(framework, problem, meta)
            except ValidationError as error:
                left_out.append({**where, "reason": first_problem(error)})
                continue
            except ValueError as error:
                left_out.append({**where, "reason": str(error)})
                continue
            if task.task_id in seen:
                left_out.append({**where, "reason": f"id repeats an earlier problem ({task.task_id})"})
                continue
            seen.add(task.task_id)
            tasks.append(task)
    if not tasks:
        first = left_out[0] if left_out else None
        raise UserError(f"{source}: no problem could be imported"
                        + (f" (first: {first['file']} problem {first['index']}: {first['reason']})"
                           if first else ""))
    frameworks = list(dict.fromkeys(task.framework or "" for task in tasks))
    manifest = Manifest(name=name, description="KOCO-Bench knowledge Q&A imported by knowbench "
                                               "(see import_report.json)",
                        domains=frameworks,
                        provenance=Provenance(source=str(source.resolve()),
                                              tool=f"knowbench {__version__}", hashes=hashes))
    write_benchmark(out, manifest, tasks)
    report = {"problems": problems, "imported": len(tasks),
              "per_framework": dict(Counter(task.framework or "" for task in tasks)),
              "multiple": sum(task.multiple for task in tasks), "left_out": left_out}
    (out / "import_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


# ------------------------------------------------------------------------ replay samples


def result_files(source: Path) -> list[Path]:
    """`results/<model>/results_<framework>.json` under `source` (the release folder, its
    results/ folder, or one model's folder)."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise UserError(f"{source}: no such file or directory")
    found = sorted(source.glob("results/*/results_*.json")) or sorted(source.glob("*/results_*.json")) \
        or sorted(source.glob("results_*.json"))
    if not found:
        raise UserError(f"{source}: no results/<model>/results_<framework>.json files\n  fix: pass "
                        "KOCO-Bench's domain_knowledge_understanding folder or its results/ folder")
    return found


def model_label(name: str) -> str:
    """A file-safe model label: 'google/gemini-2.5-pro' -> 'gemini-2.5-pro'."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name.rsplit("/", 1)[-1]) or "model"


def convert_replies(source: Path, benchmark: Path, out: Path) -> dict[str, Any]:
    """Write KOCO-Bench's released replies under `source` as replay samples, one file per model
    (`out/<model>.jsonl`), for the tasks of `benchmark` (made by `import_problems`), and what
    KOCO recorded per results file (`out/recorded.json`).

    A reply is matched to its task by framework and id, and only when its stem and correct
    letters equal the problem's (otherwise it answers another question and is left out)."""
    tasks = {task.task_id: task for task in load_benchmark(benchmark).tasks
             if isinstance(task, ChoiceTask)}
    if not tasks:
        raise UserError(f"{benchmark}: no choice tasks; build it with `knowbench import koco-qa`")
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, Any]]] = {}
    recorded: dict[str, dict[str, Any]] = {}
    unmatched: list[str] = []
    for path in result_files(source):
        data, framework = _koco_file(path, "results", _RESULTS)
        summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
        folder = path.parent.name
        model = model_label(str(summary.get("model") or folder)
                            if path.parent == source or folder == "results" else folder)
        recorded.setdefault(model, {})[framework] = {"file": str(path), **summary}
        for index, result in enumerate(data["results"]):
            if not isinstance(result, dict) or not isinstance(result.get("pred_raw"), str):
                unmatched.append(f"{path}: result {index} has no 'pred_raw' string")
                continue
            task_id = task_id_of(framework, result.get("id"))
            task = tasks.get(task_id)
            if task is None:
                unmatched.append(f"{path}: result {index} (id {result.get('id')}) matches no task")
                continue
            question, options = split_stem(str(result.get("stem", ""))) if result.get("stem") \
                else (task.question, task.options)
            if (question, options) != (task.question, task.options) or \
                    sorted(result.get("gt_letters") or task.answer) != sorted(task.answer):
                unmatched.append(f"{path}: result {index} (id {result.get('id')}) has another stem "
                                 "or answer than the problem")
                continue
            rows.setdefault(model, []).append({
                "task_id": task_id, "completion": result["pred_raw"], "sample_idx": 0,
                "koco": {"pred_letters": list(result.get("pred_letters") or []),
                         "is_correct": bool(result.get("is_correct"))}})
    files = {}
    for model, samples in rows.items():
        file = out / f"{model}.jsonl"
        file.write_text("".join(json.dumps(row) + "\n" for row in samples))
        files[model] = {"file": str(file), "samples": len(samples)}
    (out / "recorded.json").write_text(json.dumps(recorded, indent=2) + "\n")
    return {"models": files, "unmatched": unmatched, "recorded": str(out / "recorded.json")}


# -------------------------------------------------------------------------- comparison


def disagreement_reason(reply: str, ours: list[str], theirs: list[str], options: list[str]) -> str:
    """Why knowbench's letters (`ours`) and KOCO's (`theirs`) differ on `reply`, by rule."""
    foreign = sorted(set(theirs) - set(options))
    extra = set(theirs) - set(ours)
    commands = set(re.findall(r"\\([A-Za-z]+)\s*\{", reply))
    command_letters = {letter.upper() for name in commands for letter in name}
    if extra and ours and extra <= command_letters:
        return ("KOCO reads the letters of a LaTeX command's name as options ("
                + ", ".join(f"\\{name}" for name in sorted(commands)) + "): "
                + ", ".join(sorted(extra)))
    if not ours and theirs:
        return ("the reply states no answer (cut off or still reasoning); KOCO takes letters "
                "mentioned in the reasoning" + (f", some not options at all ({', '.join(foreign)})"
                                                 if foreign else ""))
    if foreign:
        return f"KOCO keeps capitals that are not options ({', '.join(foreign)})"
    if ours and not theirs:
        return "KOCO finds no answer in a form knowbench reads (answer marker, lone letters, stated choice)"
    return "the parsers read different answers (run-on text, an echoed instruction, or several candidates)"


def compare_replay(run_dir: Path, samples_file: Path) -> dict[str, Any]:
    """knowbench's verdicts in `run_dir` (a replay run of `samples_file`) beside KOCO's.

    Per framework: tasks, knowbench's accuracy, unanswered rate and partial credit (from the
    run's scores), KOCO's accuracy recomputed from its `is_correct`, and the replies whose
    letters differ with the reason (`disagreement_reason`)."""
    from knowbench.scoring.metrics import score

    samples_path = run_dir / "samples.jsonl"
    if not samples_path.is_file():
        raise UserError(f"{run_dir}: no samples.jsonl; run `knowbench run BENCH --model "
                        f"replay:{samples_file}` first")
    if not samples_file.is_file():
        raise UserError(f"{samples_file}: no such file; pass the replay file `knowbench import "
                        "koco-qa --replies` wrote (OUT/replies/<model>.jsonl)")
    theirs = {str(row.get("task_id")): row for _, row in read_objects(samples_file)
              if isinstance(row.get("koco"), dict)}
    if not theirs:
        raise UserError(f"{samples_file}: no line holds KOCO-Bench's recorded verdict (a 'koco' "
                        "field)\n  fix: pass the replay file `knowbench import koco-qa --replies` "
                        "wrote (OUT/replies/<model>.jsonl)")
    ours = {row["task_id"]: row for _, row in read_objects(samples_path) if row.get("sample_idx", 0) == 0}
    if not ours.keys() & theirs.keys():
        raise UserError(f"{run_dir} answered none of the tasks of {samples_file}\n  fix: compare the "
                        f"run of that file: `knowbench run BENCH --model replay:{samples_file}`")
    benchmark = Path(json.loads((run_dir / "run.json").read_text())["settings"]["benchmark"]["path"])
    tasks = {task.task_id: task for task in load_benchmark(benchmark).tasks}
    from knowbench.records import SampleResult

    results = [SampleResult.model_validate(row) for task_id, row in ours.items() if task_id in theirs]
    scores = score(results, ks=(1,))
    frameworks: dict[str, dict[str, Any]] = {}
    disagreements = []
    for task_id, row in ours.items():
        if task_id not in theirs:
            continue
        koco = theirs[task_id].get("koco", {})
        framework = row.get("framework") or ""
        entry = frameworks.setdefault(framework, {"tasks": 0, "koco_correct": 0, "disagree": 0})
        entry["tasks"] += 1
        entry["koco_correct"] += bool(koco.get("is_correct"))
        mine, recorded = sorted(row.get("chosen") or []), sorted(set(koco.get("pred_letters") or []))
        if mine != recorded:
            entry["disagree"] += 1
            task = tasks.get(task_id)
            options = list(task.options) if isinstance(task, ChoiceTask) else []
            disagreements.append({
                "task_id": task_id, "knowbench": mine, "koco": recorded,
                "answer": sorted(task.answer) if isinstance(task, ChoiceTask) else [],
                "knowbench_right": bool(row.get("passed")), "koco_right": bool(koco.get("is_correct")),
                "reason": disagreement_reason(row.get("completion", ""), mine, recorded, options)})
    for framework, entry in frameworks.items():
        metrics = scores.by_framework.get(framework)
        entry["koco_accuracy"] = entry["koco_correct"] / entry["tasks"]
        entry["accuracy"] = metrics.accuracy if metrics else None
        entry["unanswered"] = metrics.unanswered if metrics else None
        entry["jaccard"] = metrics.jaccard if metrics else None
    total = sum(entry["tasks"] for entry in frameworks.values())
    overall = {"tasks": total, "accuracy": scores.overall.accuracy,
               "unanswered": scores.overall.unanswered, "jaccard": scores.overall.jaccard,
               "koco_accuracy": (sum(e["koco_correct"] for e in frameworks.values()) / total
                                 if total else None),
               "disagree": len(disagreements)}
    return {"frameworks": dict(sorted(frameworks.items())), "overall": overall,
            "disagreements": disagreements}


def accuracy_line(entry: dict[str, Any]) -> str:
    return (f"knowbench {percent(entry['accuracy'])}% (unanswered {percent(entry['unanswered'])}%, "
            f"Jaccard {percent(entry['jaccard'])}%) · KOCO {percent(entry['koco_accuracy'])}%")
