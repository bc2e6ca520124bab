"""The optional LLM judge, against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

from diagnosis_helpers import fixtures
from knowbench.diagnosis.judge import JUDGE_PROMPT_VERSION, judge, parse_judgement
from knowbench.models.cache import GenerationCache
from knowbench.models.openai import OpenAIBackend
from knowbench.scoring.taxonomy import classify
from openai_server import ScriptedOpenAIServer, last_user_message

CASES = [case for case in fixtures() if case.source == "domaineval"][:40]


def _diagnoses():
    diagnoses = [classify(case.result, case.task, case.surface) for case in CASES]
    results = {(c.result.task_id, c.result.sample_idx): c.result for c in CASES}
    tasks = {c.result.task_id: c.task for c in CASES}
    return [d for d in diagnoses if d is not None], results, tasks


def _backend(server: ScriptedOpenAIServer, cache: Path) -> OpenAIBackend:
    return OpenAIBackend(model="judge-model", base_url=server.base_url, backoff_s=0.01,
                         cache=GenerationCache(cache))


def test_only_ambiguous_failures_are_judged_and_answers_are_cached(tmp_path: Path) -> None:
    diagnoses, results, tasks = _diagnoses()
    ambiguous = [d for d in diagnoses if d.ambiguous]
    assert ambiguous and len(ambiguous) < len(diagnoses)
    answer = '{"label": "WrongAPISelection", "reason": "a sibling API is used"}'
    with ScriptedOpenAIServer(responder=lambda body: answer) as server:
        judged = judge(diagnoses, results, tasks, _backend(server, tmp_path / "c.sqlite"), "judge-model")
        assert len(server.requests) == len(ambiguous)
        body = server.requests[0].body
        assert body["temperature"] == 0 and body["model"] == "judge-model"
        prompt = last_user_message(body)
        assert "WrongShapeDtype:" in prompt and "Candidate code:" in prompt and "Failing test:" in prompt
        again = judge(diagnoses, results, tasks, _backend(server, tmp_path / "c.sqlite"), "judge-model")
        assert len(server.requests) == len(ambiguous), "a cached answer was asked again"
    assert [d.model_dump() for d in again] == [d.model_dump() for d in judged]
    for before, after in zip(diagnoses, judged, strict=True):
        if before.ambiguous:
            assert (after.label, after.source) == ("WrongAPISelection", "judge")
            assert after.judge == {"model": "judge-model", "label": "WrongAPISelection",
                                   "reason": "a sibling API is used", "rule_label": before.label,
                                   "prompt_version": str(JUDGE_PROMPT_VERSION)}
            assert after.evidence == before.evidence
        else:
            assert after == before


def test_a_malformed_judge_answer_keeps_the_rule_label(tmp_path: Path) -> None:
    diagnoses, results, tasks = _diagnoses()
    with ScriptedOpenAIServer(responder=lambda body: "Probably a logic problem, hard to say.") as server:
        judged = judge(diagnoses, results, tasks, _backend(server, tmp_path / "c.sqlite"), "m")
    for before, after in zip(diagnoses, judged, strict=True):
        assert after.label == before.label and after.source == "rule"
        if before.ambiguous:
            assert after.judge is not None and "error" in after.judge


def test_judgements_are_read_from_json_with_a_known_label_only() -> None:
    assert parse_judgement('Sure.\n{"label": "WrongImport", "reason": "not imported"}') == (
        "WrongImport", "not imported")
    assert parse_judgement(json.dumps({"label": "Hallucination"})) is None
    assert parse_judgement("WrongLogic") is None


def test_a_judgement_reason_holding_a_lone_surrogate_is_written_out() -> None:
    assert parse_judgement('{"label": "WrongImport", "reason": "no \\ud800"}') == (
        "WrongImport", "no \\ud800")
