"""Choice samples are scored off the event loop: parsing a huge reply must not stall the run."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import knowbench.run
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask
from knowbench.execution.engine import SubprocessEngine
from knowbench.methods import get_method
from knowbench.models.offline import ReplayBackend
from knowbench.records import Limits, SamplingParams
from knowbench.run import run_benchmark

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "basic"


class LoopRecordingReplay(ReplayBackend):
    """The replay backend, remembering the event loop the run generates on."""

    loop: asyncio.AbstractEventLoop | None = None

    async def generate(self, *args: Any, **kwargs: Any) -> Any:
        type(self).loop = asyncio.get_running_loop()
        return await super().generate(*args, **kwargs)


def test_choice_replies_are_parsed_in_a_worker_thread_while_the_loop_runs(
        tmp_path: Path, engine: SubprocessEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_benchmark(EXAMPLE)
    choices = [task for task in bench.tasks if isinstance(task, ChoiceTask)]
    assert len(choices) >= 2
    # a long reasoning full of standalone capitals and "(B)" in prose, then the answer
    prose = "Step 2: Analyze Option (B). A view of (C) and D matters, as in E. " * 20_000
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(
        json.dumps({"task_id": task.task_id, "completion": f"{prose}\n\nAnswer: {', '.join(task.answer)}"})
        + "\n" for task in choices))
    parse = knowbench.run.parse_choice
    seen: list[tuple[bool, bool]] = []

    def spying_parse(reply: str, letters: list[str], multiple: bool) -> list[str]:
        # the loop must be able to run other work while this reply is parsed: if parsing
        # ran on the loop's own thread, this would wait forever (here: fail after 20 s)
        loop = LoopRecordingReplay.loop
        assert loop is not None
        progressed = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, result=True), loop)
        seen.append((threading.current_thread() is threading.main_thread(),
                     progressed.result(timeout=20)))
        return parse(reply, letters, multiple)

    monkeypatch.setattr(knowbench.run, "parse_choice", spying_parse)
    summary = run_benchmark(bench, LoopRecordingReplay(samples), get_method("none"), engine,
                            tmp_path / "run", SamplingParams(), Limits(),
                            task_ids=[task.task_id for task in choices])
    assert seen == [(False, True)] * len(choices)
    assert all(result.passed for result in summary.results)
