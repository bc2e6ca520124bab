"""KOCO-Bench's spec format imported as project tasks, on the three real projects."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from knowbench.benchmark.load import load_benchmark
from knowbench.builders.koco_projects import import_koco_project, locate, parse_spec
from knowbench.errors import UserError

PROJECTS = {
    "PACS": "verl/test_examples/PACS",
    "ToolBrain": "smolagents/test_examples/ToolBrain",
    "law-unleashed-rag": "raganything/test_examples/law-unleashed-rag",
}


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def koco(shared_data) -> Path:
    return shared_data("anchors/koco-projects")


def test_every_span_becomes_the_function_defined_there(koco):
    found = {}
    for name, relative in PROJECTS.items():
        folder = koco / relative
        for block in parse_spec(next((folder / "requirements").glob("03_*.md"))):
            located = locate(folder / "code", block.text("location"), block.name)
            found[(name, block.name)] = (located.file, located.qualname)
    assert len(found) == 3 + 13 + 2
    assert found[("PACS", "compute_weight")] == ("src/pacs/pacs_core_algos.py", "compute_weight")
    # the decorator lies outside the span; the name is a method's, by its class
    assert found[("ToolBrain", "Brain.is_agent_supported")] == ("toolbrain/brain.py", "Brain.is_agent_supported")
    assert found[("ToolBrain", "prompt.validate_model")] == ("toolbrain/prompt.py", "validate_model")
    assert found[("ToolBrain", "factory.create_agent")] == ("toolbrain/factory.py", "create_agent")
    # written with backticks and Windows separators
    assert found[("law-unleashed-rag", "_create_rag_instance")] == (
        "src/services/rag_anything_service.py", "RAGAnythingService._create_rag_instance")


def test_import_writes_project_tasks_and_leaves_the_release_alone(koco, tmp_path):
    before = _digest(koco / PROJECTS["ToolBrain"])
    bench = import_koco_project(koco / PROJECTS["ToolBrain"], tmp_path / "tb", requirements=["smolagents"])
    assert _digest(koco / PROJECTS["ToolBrain"]) == before
    again = load_benchmark(tmp_path / "tb")
    assert again.content_hash == bench.content_hash
    tasks = {task.task_id.rsplit("/", 1)[-1]: task for task in again.tasks}
    assert len(tasks) == 14
    run = tasks["SmolAgentAdapter.run"]
    assert run.project.targets[0].qualname == "SmolAgentAdapter.run"
    assert run.project.tests == ["test_code/test_smolagent_adapter_parse_and_segment.py"]
    assert "def run(self" in run.reference and run.prompt_code.startswith("class SmolAgentAdapter:")
    assert run.metadata["source_path"] == "code/toolbrain/adapters/smolagent/smolagent_adapter.py"
    # what the project's code imports from outside: preloaded once by the fork server
    assert {"torch", "smolagents"} <= set(again.manifest.preload)
    assert not {"toolbrain", "peft", "unsloth"} & set(again.manifest.preload)
    # KOCO's runner choice: a pytest-style file that never names pytest runs as a script
    assert tasks["factory.create_agent"].metadata["koco"]["runner"] == "python FILE"
    # the conftest walks up to <framework>/knowledge_corpus: the corpus ships beside it
    assert (tmp_path / "tb/projects/smolagents/knowledge_corpus/smolagents").is_dir()
    project = tasks["project"]
    assert len(project.project.targets) == 13 and len(project.project.tests) == 8
    assert len(project.test_items()) == 27  # as the release's README counts them
    assert {doc.name for doc in project.project.documents} == {
        "01_project_overview.md", "02_system_architecture.md"}
    # a changed project file changes the benchmark's content hash
    (tmp_path / "tb/projects/smolagents/test_examples/ToolBrain/code/toolbrain/prompt.py").write_text("x = 1\n")
    assert load_benchmark(tmp_path / "tb").content_hash != bench.content_hash


def test_bad_spec_names_file_and_line(tmp_path):
    folder = tmp_path / "fw" / "test_examples" / "p"
    (folder / "code").mkdir(parents=True)
    (folder / "requirements").mkdir()
    (folder / "requirements" / "03_core.md").write_text(
        "# Core\n\n# FUNCTION: f\n\n## Function Overview\nDoes f.\n\n## Test Code\ncode/test_code/test_f.py\n")
    with pytest.raises(UserError, match=r"03_core.md:3: FUNCTION f has no ## Function Implementation"):
        import_koco_project(folder, tmp_path / "out")


def test_retrieval_from_the_project_withholds_every_target(koco, tmp_path):
    """Methods may retrieve from the project itself; the targets are withheld from what they
    retrieve (each of them, for the task asking for all core functions)."""
    from knowbench.knowledge.chunking import chunk_file
    from knowbench.knowledge.leakage import LeakageGuard

    bench = import_koco_project(koco / PROJECTS["PACS"], tmp_path / "pacs")
    code = tmp_path / "pacs/projects/verl/test_examples/PACS/code"
    chunks = chunk_file((code / "src/pacs/pacs_core_algos.py").read_text(), "src/pacs/pacs_core_algos.py",
                        "pacs.pacs_core_algos")
    names = {chunk.qualname for chunk in chunks if chunk.kind == "function"}
    assert {"compute_reward", "compute_weight", "compute_pacs_loss"} <= names
    tasks = {task.task_id.rsplit("/", 1)[-1]: task for task in bench.tasks}

    def withheld(task) -> set[str]:
        guard = LeakageGuard(task)
        return {c.qualname for c in chunks if c.kind == "function" and guard.reason(0, c)}

    assert withheld(tasks["compute_weight"]) == {"compute_weight"}
    assert withheld(tasks["project"]) == {"compute_reward", "compute_weight", "compute_pacs_loss"}


@pytest.mark.slow  # builds (or reuses) an environment with torch; about 15 s per sample on 2 busy cores
def test_pacs_certifies_reference_passes_stub_fails(koco, tmp_path, best_sandbox):
    """The real project end to end: import through the spec format, then every task (the
    three core functions and the project-level one, 35 tests with the integration classes)
    passes on the reference and fails on the stub, in the sandbox, on the fork server."""
    from knowbench.benchmark.preload import preload_modules
    from knowbench.builders.koco_projects import certify_projects
    from knowbench.execution.environments import ensure_env
    from knowbench.execution.forkserver import ForkServerEngine
    from knowbench.execution.sandbox import resolve_sandbox

    bench = import_koco_project(koco / PROJECTS["PACS"], tmp_path / "pacs",
                                requirements=["torch", "numpy", "scikit-learn"])
    python = ensure_env(bench.manifest.requirements).python
    engine = ForkServerEngine(resolve_sandbox(best_sandbox.kind, python=python), workers=1, python=python,
                              preload=preload_modules(bench.tasks, bench.manifest.preload))
    try:
        report = certify_projects(bench, engine)
    finally:
        engine.close()
    assert report["left_out"] == []
    rows = {task_id.rsplit("/", 1)[-1]: row for task_id, row in report["tasks"].items()}
    assert {name: (row["reference"], row["stub"]) for name, row in rows.items()} == {
        "compute_reward": ("12/12", "0/12"), "compute_weight": ("11/11", "0/11"),
        "compute_pacs_loss": ("12/12", "0/12"), "project": ("35/35", "0/35")}
    assert len(load_benchmark(tmp_path / "pacs").tasks) == 4
