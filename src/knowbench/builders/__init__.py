"""Building benchmarks: mining repositories (DomainEval's pipeline with certified tests),
certifying any benchmark, and importing public ones.

The stages, in the order data flows through them:

    source.py        fetch and unpack a directory, an sdist/wheel, or a PyPI requirement
    repository.py    index its modules; resolve names through imports and re-exports
    discover.py      find test units and trace them to the library functions they call
    context.py       cut a target out: masked prompt, reference, context closure
    harness.py       rewrite its tests into self-contained specs that call the candidate
    filters.py       static filters: size, triviality, banned operations
    candidates.py    discover, filter and assemble the candidate tasks of one source
    environment.py   the benchmark's requirements, installed and pinned
    certify.py       execution: reference passes, stubs fail, target runs; mutants
    selection.py     prune tests on the reference, certify against stubs; why each left
    instructions.py  Functionality / Inputs / Outputs, from docstrings or a model
    options.py       the knobs of mining
    mine.py          the pipeline end to end, writing the benchmark and build_report.json
    domaineval.py    DomainEval's subjects and released responses, and a verdict comparison
    novelapibench.py NovelAPIBench's tasks, bundles (both ways), filters and instances
    koco_qa.py       KOCO-Bench's knowledge Q&A problems, released replies, verdict comparison

`IMPORTERS` names every importer of a public benchmark's files (`knowbench import NAME`).
An importer is called as `importer(source, out, **options)`: it reads `source` (a file or a
directory of the public release), writes `out` (a benchmark directory, or a samples file for
`--model replay:FILE`) and returns a JSON-able report of what it converted and left out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from knowbench.builders.build_log import BuildReport
from knowbench.builders.certify import CertifyReport, TaskCheck, certify_benchmark
from knowbench.builders.domaineval import compare_with_recorded, convert_responses, import_subjects
from knowbench.builders.humaneval import import_humaneval
from knowbench.builders.koco_qa import convert_replies, import_problems
from knowbench.builders.mine import MineOptions, SourceRequest, mine
from knowbench.builders.novelapibench import (
    bundle_from_record,
    bundle_to_record,
    export_bundles,
    import_release,
)
from knowbench.registry import Registry

Importer = Callable[..., dict[str, Any]]
"""`importer(source: Path, out: Path, **options) -> report` (options differ per importer)."""


IMPORTERS: Registry[Importer] = Registry("importer")
IMPORTERS.register("domaineval", import_subjects)
IMPORTERS.register("novelapibench", import_release)
IMPORTERS.register("koco-qa", import_problems)
IMPORTERS.register("humaneval", import_humaneval)


@IMPORTERS.register("koco-qa-replies")
def _koco_qa_replies(source: Path, out: Path, /, *, benchmark: Path) -> dict[str, Any]:
    """KOCO-Bench's released replies under `source` as replay samples, one file per model in
    `out`, for the tasks of `benchmark` (made by the `koco-qa` importer)."""
    return convert_replies(source, benchmark, out)


@IMPORTERS.register("koco-project")
def _koco_project(source: Path, out: Path, /, **options: Any) -> dict[str, Any]:
    """One KOCO-Bench project folder as project tasks (not certified: `certify_projects`)."""
    from knowbench.builders.koco_projects import import_koco_project

    bench = import_koco_project(source, out, **options)
    return {"tasks": len(bench.tasks), "benchmark": str(bench.path),
            "task_ids": [task.task_id for task in bench.tasks]}


@IMPORTERS.register("domaineval-responses")
def _domaineval_responses(source: Path, out: Path, /, *, benchmark: Path) -> dict[str, Any]:
    """DomainEval's released responses under `source` as replay samples (`out`, JSONL) for the
    tasks of `benchmark` (made by the `domaineval` importer)."""
    return convert_responses(source, benchmark, out)


__all__ = [
    "IMPORTERS",
    "BuildReport",
    "CertifyReport",
    "Importer",
    "MineOptions",
    "SourceRequest",
    "TaskCheck",
    "bundle_from_record",
    "bundle_to_record",
    "certify_benchmark",
    "compare_with_recorded",
    "convert_responses",
    "export_bundles",
    "import_release",
    "import_subjects",
    "mine",
]
