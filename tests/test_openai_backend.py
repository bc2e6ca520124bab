"""OpenAIBackend and GenerationCache against a real HTTP server (tests/openai_server.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from knowbench.benchmark.schema import ChoiceTask
from knowbench.errors import UserError
from knowbench.models.base import BackendError, Message, Reply
from knowbench.models.cache import GenerationCache, default_cache_path
from knowbench.models.openai import OpenAIBackend, _Retry, normalise_base_url
from knowbench.records import SamplingParams, Usage
from openai_server import ScriptedOpenAIServer

T = TypeVar("T")

TASK = ChoiceTask(task_id="t1", domain="d", question="Which?", options={"A": "a", "B": "b"},
                  answer=["A"])
MESSAGES = [Message(role="system", content="be brief"), Message(role="user", content="say hi now")]
GREEDY = SamplingParams()


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as scripted:
        yield scripted


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # A key in the developer's environment must not leak into (or change) these tests.
    monkeypatch.delenv("KNOWBENCH_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def backend_for(server: ScriptedOpenAIServer, **kwargs: Any) -> OpenAIBackend:
    kwargs.setdefault("backoff_s", 0.01)
    return OpenAIBackend(model="test-model", base_url=server.base_url, **kwargs)


async def generate_once(backend: OpenAIBackend, params: SamplingParams = GREEDY,
                        sample_idx: int = 0, messages: list[Message] = MESSAGES) -> Reply:
    try:
        return await backend.generate(TASK, messages, params, sample_idx)
    finally:
        await backend.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Replies and the request body.

def test_reply_and_usage_come_back(server: ScriptedOpenAIServer) -> None:
    server.responder = lambda body: "def f():\n    return 1"
    reply = run(generate_once(backend_for(server)))
    assert reply.text == "def f():\n    return 1"
    assert reply.usage == Usage(prompt_tokens=5, completion_tokens=4)
    assert reply.finish_reason == "stop"
    assert reply.cached is False


def test_request_body_follows_the_api(server: ScriptedOpenAIServer) -> None:
    params = SamplingParams(n=5, temperature=0.7, top_p=0.9, max_tokens=64)
    run(generate_once(backend_for(server), params))
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": "test-model",
        "messages": [{"role": "system", "content": "be brief"},
                     {"role": "user", "content": "say hi now"}],
        "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "n": 1,
    }


def test_seed_is_offset_by_sample_index(server: ScriptedOpenAIServer) -> None:
    backend = backend_for(server)

    async def both() -> None:
        await backend.generate(TASK, MESSAGES, SamplingParams(seed=7), 0)
        await backend.generate(TASK, MESSAGES, SamplingParams(seed=7), 3)
        await backend.aclose()

    run(both())
    assert [request.body["seed"] for request in server.requests] == [7, 10]


def test_missing_usage_and_null_content_give_zeros_and_empty_text(
        server: ScriptedOpenAIServer) -> None:
    server.include_usage = False
    server.responder = lambda body: None
    reply = run(generate_once(backend_for(server)))
    assert reply.text == ""
    assert reply.usage == Usage()


def test_base_url_without_v1_reaches_the_same_endpoint(server: ScriptedOpenAIServer) -> None:
    backend = OpenAIBackend(model="m", base_url=f"http://127.0.0.1:{server.port}/")
    run(generate_once(backend))
    assert server.requests[0].path == "/v1/chat/completions"
    assert backend.describe()["base_url"] == server.base_url


@pytest.mark.parametrize(("given", "expected"), [
    ("http://h:8000", "http://h:8000/v1"),
    ("http://h:8000/", "http://h:8000/v1"),
    ("http://h:8000/v1", "http://h:8000/v1"),
    ("http://h:8000/v1/", "http://h:8000/v1"),
    ("http://h:8000/v1/chat/completions", "http://h:8000/v1"),
    ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1"),
])
def test_base_url_is_normalised(given: str, expected: str) -> None:
    assert normalise_base_url(given) == expected


def test_a_base_url_that_is_not_http_is_a_user_error() -> None:
    with pytest.raises(UserError, match="base-url"):
        OpenAIBackend(model="m", base_url="localhost:8000")


def test_backend_built_outside_a_loop_works_in_successive_loops(
        server: ScriptedOpenAIServer) -> None:
    backend = backend_for(server)
    run(backend.generate(TASK, MESSAGES, GREEDY, 0))  # left open: the next loop starts afresh
    run(generate_once(backend, sample_idx=1))
    assert len(server.requests) == 2


# Retries and failures.

def test_429_with_retry_after_zero_is_retried(server: ScriptedOpenAIServer) -> None:
    server.fail_next(429, retry_after="0")
    reply = run(generate_once(backend_for(server)))
    assert reply.text == "echo: say hi now"
    assert len(server.requests) == 2


def test_numeric_retry_after_is_honoured(server: ScriptedOpenAIServer) -> None:
    server.fail_next(429, retry_after="0.4")
    started = time.monotonic()
    run(generate_once(backend_for(server)))
    assert time.monotonic() - started >= 0.35
    assert len(server.requests) == 2


def test_500_twice_then_success(server: ScriptedOpenAIServer) -> None:
    server.fail_next(500, times=2)
    reply = run(generate_once(backend_for(server)))
    assert reply.text == "echo: say hi now"
    assert len(server.requests) == 3


def test_persistent_5xx_gives_up_after_the_retries(server: ScriptedOpenAIServer) -> None:
    server.fail_next(503, times=10)
    with pytest.raises(BackendError, match=r"503.*gave up after 3 attempts"):
        run(generate_once(backend_for(server, max_retries=2)))
    assert len(server.requests) == 3


def test_400_fails_at_once_quoting_the_server(server: ScriptedOpenAIServer) -> None:
    server.fail_next(400)
    with pytest.raises(BackendError, match="scripted failure with status 400"):
        run(generate_once(backend_for(server)))
    assert len(server.requests) == 1


def test_401_points_at_the_api_key(server: ScriptedOpenAIServer) -> None:
    server.fail_next(401)
    with pytest.raises(BackendError, match="API key"):
        run(generate_once(backend_for(server)))
    assert len(server.requests) == 1


def test_unreachable_server_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    backend = OpenAIBackend(model="m", base_url=url, max_retries=2, backoff_s=0.01)
    with pytest.raises(BackendError) as caught:
        run(generate_once(backend))
    message = str(caught.value)
    assert f"cannot reach {url}/chat/completions" in message
    assert "connection refused" in message
    assert "--base-url" in message


def test_the_first_failure_is_reported_at_once_with_the_retry_plan(
        server: ScriptedOpenAIServer) -> None:
    server.fail_next(500, times=10)
    notices: list[str] = []
    backend = backend_for(server, max_retries=3, backoff_s=0.5)
    backend.notify = notices.append
    backend.backoff_s = 0.01  # the plan was announced above; the test need not wait for it
    with pytest.raises(BackendError, match=r"500.*gave up after 4 attempts"):
        run(generate_once(backend))
    assert len(server.requests) == 4
    # One notice for the failure, not one per attempt, naming the endpoint and the plan.
    assert len(notices) == 1, notices
    assert f"{server.base_url}/chat/completions answered 500" in notices[0]
    assert "retrying 3 more times over ~" in notices[0]


def test_the_retry_plan_states_the_backoff_it_will_wait() -> None:
    backend = OpenAIBackend(model="m", base_url="http://127.0.0.1:1/v1", max_retries=5,
                            backoff_s=1.0)
    notices: list[str] = []
    backend.notify = notices.append
    backend._announce(_Retry("x answered 500"), left=5, attempt=0)
    backend._announce(_Retry("x answered 500"), left=4, attempt=1)  # the same failure: quiet
    assert notices == ["a model request failed: x answered 500; retrying 5 more times over ~31 s"]


def test_a_server_that_never_answered_is_given_up_on_after_two_attempts() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    notices: list[str] = []
    backend = OpenAIBackend(model="m", base_url=url, max_retries=6, backoff_s=0.01)
    backend.notify = notices.append
    with pytest.raises(BackendError) as caught:
        run(generate_once(backend))
    message = str(caught.value)
    assert f"cannot reach {url}/chat/completions: connection refused" in message
    assert f"gave up after 2 attempts: no request to {url} has succeeded yet" in message
    assert "--base-url" in message
    assert len(notices) == 1 and "connection refused" in notices[0]
    assert "retrying once more" in notices[0]


def test_a_name_that_does_not_resolve_is_given_up_on_after_two_attempts() -> None:
    backend = OpenAIBackend(model="m", base_url="http://no-such-host.invalid/v1",
                            max_retries=6, backoff_s=0.01)
    backend.notify = lambda message: None
    with pytest.raises(BackendError, match="gave up after 2 attempts"):
        run(generate_once(backend))


def test_after_a_success_a_refused_connection_gets_every_retry() -> None:
    server = ScriptedOpenAIServer().start()
    notices: list[str] = []
    backend = OpenAIBackend(model="m", base_url=server.base_url, max_retries=3, backoff_s=0.01)
    backend.notify = notices.append

    async def answered_then_gone() -> None:
        try:
            await backend.generate(TASK, MESSAGES, GREEDY, 0)
            server.stop()  # the server that answered goes away: a restart, a hiccup
            await backend.aclose()  # and with it the kept-alive connection
            await backend.generate(TASK, MESSAGES, GREEDY, 1)
        finally:
            await backend.aclose()

    with pytest.raises(BackendError, match="gave up after 4 attempts"):
        run(answered_then_gone())
    assert len(server.requests) == 1
    assert len(notices) == 1 and "retrying 3 more times" in notices[0]


def test_a_slow_server_times_out_and_is_retried(server: ScriptedOpenAIServer) -> None:
    server.delay_s = 0.5
    backend = backend_for(server, timeout_s=0.1, max_retries=1)
    with pytest.raises(BackendError, match=r"did not answer within 0\.1 s"):
        run(generate_once(backend))
    assert len(server.requests) == 2


# Concurrency.

def test_concurrency_bounds_requests_in_flight(server: ScriptedOpenAIServer) -> None:
    server.delay_s = 0.15
    backend = backend_for(server, concurrency=2)

    async def many() -> list[Reply]:
        try:
            return await asyncio.gather(
                *(backend.generate(TASK, MESSAGES, GREEDY, idx) for idx in range(8)))
        finally:
            await backend.aclose()

    replies = run(many())
    assert len(replies) == 8
    assert len(server.requests) == 8
    assert 1 < server.max_in_flight <= 2


# The API key.

def test_api_key_from_env_is_sent_as_bearer_and_not_described(
        server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("KNOWBENCH_API_KEY", "sk-knowbench")
    backend = backend_for(server)
    run(generate_once(backend))
    assert server.requests[0].headers["authorization"] == "Bearer sk-knowbench"
    described = json.dumps(backend.describe())
    assert "sk-" not in described
    assert backend.describe() == {"backend": "openai", "model": "test-model",
                                  "base_url": server.base_url}


def test_openai_api_key_is_the_fallback(server: ScriptedOpenAIServer,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    run(generate_once(backend_for(server)))
    assert server.requests[0].headers["authorization"] == "Bearer sk-openai"


def test_no_key_sends_no_authorization(server: ScriptedOpenAIServer) -> None:
    run(generate_once(backend_for(server)))
    assert "authorization" not in server.requests[0].headers


# The cache.

def test_cache_hit_makes_no_request(server: ScriptedOpenAIServer, tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path / "cache" / "generations.sqlite")
    first = run(generate_once(backend_for(server, cache=cache)))
    again = run(generate_once(backend_for(server, cache=cache)))
    assert len(server.requests) == 1
    assert first.cached is False
    assert again.cached is True
    assert again.model_copy(update={"cached": False}) == first


def test_cache_misses_on_another_sample_or_temperature(server: ScriptedOpenAIServer,
                                                       tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path / "generations.sqlite")
    backend = backend_for(server, cache=cache)

    async def calls() -> None:
        await backend.generate(TASK, MESSAGES, GREEDY, 0)
        await backend.generate(TASK, MESSAGES, GREEDY, 1)
        await backend.generate(TASK, MESSAGES, SamplingParams(temperature=0.5), 0)
        await backend.generate(TASK, MESSAGES, SamplingParams(n=10), 0)  # n is not identity
        await backend.aclose()

    run(calls())
    assert len(server.requests) == 3
    assert len(cache) == 3


def test_cache_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "generations.sqlite"
    key = GenerationCache.key({"backend": "x"}, MESSAGES, GREEDY, 0)
    reply = Reply(text="hello", usage=Usage(prompt_tokens=2, completion_tokens=1),
                  finish_reason="length")
    with GenerationCache(path) as cache:
        cache.put(key, reply)
    with GenerationCache(path) as cache:
        assert cache.get(key) == reply.model_copy(update={"cached": True})
        assert cache.get("0" * 64) is None
        mode = cache._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_cache_key_depends_on_identity_and_messages_not_n() -> None:
    key = GenerationCache.key
    base = key({"model": "a"}, MESSAGES, GREEDY, 0)
    assert base == key({"model": "a"}, MESSAGES, SamplingParams(n=4), 0)
    assert base != key({"model": "b"}, MESSAGES, GREEDY, 0)
    assert base != key({"model": "a"}, MESSAGES[1:], GREEDY, 0)
    assert base != key({"model": "a"}, MESSAGES, SamplingParams(seed=1), 0)
    assert base != key({"model": "a"}, MESSAGES, SamplingParams(max_tokens=5), 0)
    assert base != key({"model": "a"}, MESSAGES, SamplingParams(top_p=0.5), 0)


def test_cache_is_safe_across_threads(tmp_path: Path) -> None:
    import concurrent.futures

    cache = GenerationCache(tmp_path / "generations.sqlite")

    def write(idx: int) -> Reply | None:
        key = GenerationCache.key({}, MESSAGES, GREEDY, idx)
        cache.put(key, Reply(text=str(idx)))
        return cache.get(key)

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(write, range(64)))
    assert [reply.text for reply in replies if reply] == [str(idx) for idx in range(64)]
    assert len(cache) == 64
    cache.close()


def test_default_cache_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KNOWBENCH_CACHE_DIR", str(tmp_path))
    assert default_cache_path() == tmp_path / "generations.sqlite"
    monkeypatch.delenv("KNOWBENCH_CACHE_DIR")
    assert default_cache_path() == Path.home() / ".cache" / "knowbench" / "generations.sqlite"


# The server as a separate process (the CLI end-to-end tests use).

def test_server_script_serves_scripted_replies(tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"add": "def add(a, b):\n    return a + b", "a": "first"}))
    script = Path(__file__).with_name("openai_server.py")
    process = subprocess.Popen([sys.executable, str(script), "--replies", str(replies)],
                               stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert process.stdout is not None
        first = process.stdout.readline().split()
        assert first[0] == "PORT"
        url = f"http://127.0.0.1:{first[1]}/v1/chat/completions"

        def ask(text: str) -> str:
            body = {"model": "m", "messages": [{"role": "user", "content": text}]}
            answer = httpx.post(url, json=body, timeout=10).json()
            return str(answer["choices"][0]["message"]["content"])

        assert ask("please add two numbers") == "def add(a, b):\n    return a + b"
        assert ask("a question") == "first"
        assert ask("xyz") == "pass"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
