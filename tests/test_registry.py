"""Registries: one per concept, the same behaviour for each, and the command line selects
whatever is registered (it holds no list of its own)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from knowbench.builders import IMPORTERS
from knowbench.errors import UserError
from knowbench.execution import ENGINES, SANDBOXES
from knowbench.methods import METHODS
from knowbench.models import BACKENDS, BackendOptions, create_backend
from knowbench.models.offline import NullBackend, ReferenceBackend, ReplayBackend
from knowbench.models.openai import OpenAIBackend
from knowbench.registry import Registry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "basic"


def test_an_unknown_name_is_a_user_error_that_lists_every_choice() -> None:
    colours: Registry[int] = Registry("colour")
    colours.register("red", 1)
    colours.register("blue", 2)
    with pytest.raises(UserError, match=r"unknown colour 'green'; choose one of red, blue$"):
        colours.get("green")


def test_registering_a_taken_name_is_an_error_naming_the_first_owner() -> None:
    colours: Registry[object] = Registry("colour")

    @colours.register("red")
    def first() -> None: ...

    with pytest.raises(ValueError, match=r"colour 'red' is already registered \(by .*first\)"):
        colours.register("red", object())
    assert colours.get("red") is first


@pytest.mark.parametrize("name", ["", "a:b", "with space", " padded"])
def test_a_name_that_the_command_line_could_not_select_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="plain name"):
        Registry("colour").register(name, 1)


def test_the_decorator_returns_what_it_registers_and_names_keep_their_order() -> None:
    shapes: Registry[object] = Registry("shape")

    @shapes.register("square")
    def square() -> str:
        return "square"

    shapes.register("circle", len)
    assert square() == "square"
    assert shapes.names() == ["square", "circle"] == list(shapes)
    assert "circle" in shapes and "triangle" not in shapes and len(shapes) == 2


def test_every_concept_has_a_registry_with_its_built_in_parts() -> None:
    assert BACKENDS.names() == ["openai", "hf", "reference", "null", "replay"]
    assert METHODS.names() == ["none", "rag-bm25", "rag-dense", "rag-hybrid", "oracle", "knn-lm", "agent",
                               "mini-swe-agent"]
    assert ENGINES.names() == ["forkserver", "subprocess", "ray"]
    assert SANDBOXES.names() == ["auto", "bwrap", "unshare", "none"]
    assert IMPORTERS.names() == ["domaineval", "novelapibench", "koco-qa", "humaneval",
                                 "koco-qa-replies", "koco-project", "domaineval-responses"]


@pytest.mark.parametrize(("registry", "message"), [
    (ENGINES, "unknown engine 'warp'; choose one of forkserver, subprocess, ray"),
    (SANDBOXES, "unknown sandbox 'warp'; choose one of auto, bwrap, unshare, none"),
    (IMPORTERS, "unknown importer 'warp'; choose one of domaineval, novelapibench, koco-qa, "
     "humaneval, koco-qa-replies, koco-project, domaineval-responses"),
    (METHODS, "unknown method 'warp'; choose one of none, rag-bm25, rag-dense, rag-hybrid, oracle:<cell>, knn-lm, "
               "agent:<retriever_kind>, mini-swe-agent:<mode>"),
])
def test_each_registry_names_its_choices_when_a_name_is_unknown(registry: Registry[object], message: str) -> None:
    with pytest.raises(UserError) as error:
        registry.get("warp")
    assert str(error.value) == message


def test_a_model_value_names_a_backend_or_an_openai_compatible_model(tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"task_id": "t", "completion": "x"}\n')
    http = BackendOptions(base_url="http://127.0.0.1:9/v1", no_cache=True)
    assert isinstance(create_backend("reference"), ReferenceBackend)
    assert isinstance(create_backend("null"), NullBackend)
    replay = create_backend(f"replay:{samples}")
    assert isinstance(replay, ReplayBackend) and replay.path == samples
    for model, served in [("Qwen/Qwen2.5-Coder-7B-Instruct", "Qwen/Qwen2.5-Coder-7B-Instruct"),
                          ("qwen2.5-coder:7b", "qwen2.5-coder:7b"),  # ollama's names hold a ':'
                          ("openai:gpt-4o-mini", "gpt-4o-mini"),
                          ("openai", "openai")]:
        backend = create_backend(model, http)
        assert isinstance(backend, OpenAIBackend) and backend.model == served


@pytest.mark.parametrize(("model", "message"), [
    ("replay:", "needs a samples file"),
    ("null:x", "takes no ':' argument"),
    ("gpt-4o", "no endpoint was given"),
])
def test_a_model_value_a_backend_cannot_use_is_a_user_error(model: str, message: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("KNOWBENCH_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(UserError, match=message):
        create_backend(model)


_PLUGIN_RUN = """
import sys
import knowbench.cli as cli
from knowbench.execution import ENGINES, SubprocessEngine
from knowbench.models import BACKENDS
from knowbench.models.offline import ReferenceBackend

class Gold(ReferenceBackend):
    name = "gold"

class Counting(SubprocessEngine):
    name = "counting"
    def execute(self, request):
        print("counted", file=sys.stderr)
        return super().execute(request)

BACKENDS.register("gold", lambda argument, options: Gold())
ENGINES.register("counting", lambda sandbox, *, workers, python, **_: Counting(sandbox, workers, python))
sys.argv = ["knowbench", *sys.argv[1:]]
cli.main()
"""


def test_the_command_line_selects_a_backend_and_an_engine_registered_by_a_plug_in(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PLUGIN_RUN, "run", str(EXAMPLE), "--model", "gold", "--engine", "counting",
         "--task", "text/slugify", "--no-calibrate", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "model gold" in done.stderr and "counting engine" in done.stderr
    assert "counted" in done.stderr
    assert '"backend": "gold"' in (tmp_path / "run" / "run.json").read_text()
