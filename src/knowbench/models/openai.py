"""A backend for any OpenAI-compatible chat completions endpoint (vLLM, ollama, hosted APIs).

Each sample is one request with `n: 1`, so samples can be cached, retried and resumed one
at a time. Transient failures (429, 5xx, 408, timeouts, dropped connections) are retried
with exponential backoff and jitter, honouring a numeric `Retry-After`; any other 4xx
fails at once, because repeating a bad request cannot fix it. The first failure of each kind
is reported at once through `notice` (what failed, and the retries left), so a failing
endpoint is visible long before the retries run out. Until one request has succeeded, an
endpoint that refuses connections or whose name does not resolve is tried only
`UNREACHABLE_ATTEMPTS` times: that is a wrong URL or a server not started, not a hiccup.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from knowbench.benchmark.schema import ChoiceTask, FunctionTask
from knowbench.errors import UserError
from knowbench.jsonl import load_json
from knowbench.models.base import BackendError, Message, ModelBackend, Reply
from knowbench.models.cache import GenerationCache
from knowbench.records import SamplingParams, Usage

API_KEY_ENVS = ("KNOWBENCH_API_KEY", "OPENAI_API_KEY")
RETRY_AFTER_CAP_S = 60.0
_BACKOFF_CAP_S = 60.0
_COMPLETIONS_SUFFIX = "/chat/completions"
UNREACHABLE_ATTEMPTS = 2


def normalise_base_url(base_url: str) -> str:
    """The API root that `/chat/completions` is appended to.

    `http://host:port` becomes `http://host:port/v1`; a URL that already has a path
    (`.../v1`, or a hosted prefix such as `.../openai/v1`) is kept; a pasted full
    `.../chat/completions` endpoint is cut back to its root. Trailing slashes are dropped.
    """
    url = base_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(
            f"--base-url {base_url!r} is not an http(s) URL; "
            "give the server's address, e.g. http://localhost:8000/v1"
        )
    if url.endswith(_COMPLETIONS_SUFFIX):
        url = url[: -len(_COMPLETIONS_SUFFIX)]
    if not urlsplit(url).path:
        url += "/v1"
    return url


def _api_key_from_env() -> str | None:
    for name in API_KEY_ENVS:
        value = os.environ.get(name)
        if value:
            return value
    return None


@dataclass
class _Retry:
    """A failed attempt that may succeed if repeated."""

    reason: str
    wait_s: float | None = None  # the server's Retry-After, when it gave one
    unreachable: bool = False  # no connection could be made (refused, name not resolved)


class OpenAIBackend(ModelBackend):
    """Samples completions from an OpenAI-compatible `/v1/chat/completions` endpoint.

    The HTTP client and the concurrency semaphore are created on first use, inside the
    running event loop, so the backend can be built outside one. Use it from one event loop
    at a time; if a later loop uses it, it starts a fresh client for that loop.
    """

    name = "openai"
    supports_tools = True
    converses = True

    def __init__(self, model: str, base_url: str, api_key: str | None = None,
                 concurrency: int = 8, timeout_s: float = 120.0, max_retries: int = 6,
                 backoff_s: float = 1.0, cache: GenerationCache | None = None) -> None:
        if not model:
            raise UserError("no model name given; pass --model as the server knows it")
        if concurrency < 1:
            raise UserError(f"concurrency must be at least 1, got {concurrency}")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise UserError("timeout must be positive, and retries and backoff not negative")
        self.model = model
        self.base_url = normalise_base_url(base_url)
        self.endpoint = self.base_url + _COMPLETIONS_SUFFIX
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.cache = cache
        self._api_key = api_key or _api_key_from_env()
        self._client: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._succeeded = False  # some request has been answered: the endpoint exists
        self._announced: set[str] = set()  # failures already reported since the last success

    def describe(self) -> dict[str, Any]:
        """Backend, model and normalised base URL; never the API key."""
        return {"backend": self.name, "model": self.model, "base_url": self.base_url}

    def connection(self) -> dict[str, Any]:
        """How the endpoint is reached: no part of a run's identity (replies do not depend on
        it); whether an API key is used, never the key."""
        return {"base_url": self.base_url, "api_key": self._api_key is not None,
                "concurrency": self.concurrency, "timeout_s": self.timeout_s,
                "max_retries": self.max_retries}

    @property
    def api_key(self) -> str | None:
        """The key requests carry (None: none), for an agent framework that makes its own
        requests to this endpoint (`--method mini-swe-agent`); never recorded."""
        return self._api_key

    def check_tasks(self, task_ids: list[str], known_ids: list[str]) -> list[str]:
        """Before any work (the reference checks can take minutes): whether anything accepts
        connections at the endpoint's host and port. Only a warning, since replies already in
        the cache need no server; skipped when a proxy is configured."""
        del task_ids, known_ids
        if any(os.environ.get(name) for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                                 "http_proxy", "https_proxy", "all_proxy")):
            return []
        parts = urlsplit(self.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=5):
                return []
        except OSError as error:
            cause = ("connection refused" if isinstance(error, ConnectionRefusedError)
                     else getattr(error, "strerror", None) or str(error) or type(error).__name__)
            return [f"nothing answers at {self.base_url} ({cause}): every request not in the "
                    "cache will fail; check --base-url and that the server is running"]

    async def generate(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                       params: SamplingParams, sample_idx: int) -> Reply:
        """One sample: from the cache when present, otherwise from the server (then cached)."""
        def make() -> Awaitable[Reply]:
            return self._request_with_retries(self._payload(messages, params, sample_idx))
        if self.cache is None:
            return await make()
        return await self.cache.through(self.describe(), messages, params, sample_idx, make)

    async def generate_with_tools(self, task: FunctionTask | ChoiceTask, messages: list[Message],
                                  params: SamplingParams, sample_idx: int,
                                  tools: list[dict[str, Any]]) -> Reply:
        """One turn of a tool-using conversation (`tools` offered, the model chooses), cached
        like any sample under a key that also covers the tools."""
        key = None
        if self.cache is not None:
            key = self.cache.key(self.describe(), messages, params, sample_idx, tools)
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        payload = self._payload(messages, params, sample_idx)
        payload["tools"] = tools
        payload["tool_choice"] = "auto"
        reply = await self._request_with_retries(payload)
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)
        return reply

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._client = None
        self._semaphore = None
        self._loop = None

    def _payload(self, messages: list[Message], params: SamplingParams,
                 sample_idx: int) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [message.wire() for message in messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "n": 1,
        }
        if params.seed is not None:
            # Offset by the sample index: samples differ from each other, yet each is reproducible.
            payload["seed"] = params.seed + sample_idx
        return payload

    def _connection(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._semaphore is None or self._loop is not loop:
            # A client from another (finished) loop cannot be reused, so start afresh.
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._client = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(self.timeout_s),
                limits=httpx.Limits(max_connections=self.concurrency),
            )
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._loop = loop
        return self._client, self._semaphore

    async def _request_with_retries(self, payload: dict[str, Any]) -> Reply:
        attempts = self.max_retries + 1
        retry = _Retry("no request made")
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self._delay(attempt - 1, retry.wait_s))
            outcome = await self._attempt(payload)
            if isinstance(outcome, Reply):
                self._succeeded = True
                self._announced.clear()
                return outcome
            retry = outcome
            tried = attempt + 1
            if retry.unreachable and not self._succeeded and tried >= UNREACHABLE_ATTEMPTS:
                raise BackendError(f"{retry.reason} (gave up after {tried} attempts: no request "
                                   f"to {self.base_url} has succeeded yet)")
            left = attempts - tried
            if retry.unreachable and not self._succeeded:
                left = min(left, UNREACHABLE_ATTEMPTS - tried)
            if left:
                self._announce(retry, left, attempt)
        raise BackendError(f"{retry.reason} (gave up after {attempts} attempts)")

    def _announce(self, retry: _Retry, left: int, attempt: int) -> None:
        """Report a failure the first time it is seen (since the last success), with the
        retry plan: how many more attempts and about how long they take."""
        if retry.reason in self._announced:
            return
        self._announced.add(retry.reason)
        if retry.wait_s is not None:
            span = min(retry.wait_s, RETRY_AFTER_CAP_S) * left
        else:
            span = sum(min(self.backoff_s * 2**step, _BACKOFF_CAP_S)
                       for step in range(attempt, attempt + left))
        times = "once more" if left == 1 else f"{left} more times"
        self.notice(f"a model request failed: {retry.reason}; retrying {times} over ~{span:.0f} s")

    def _delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, RETRY_AFTER_CAP_S)
        # Full exponential backoff with jitter, so many waiting requests do not retry in step.
        return min(self.backoff_s * 2**attempt, _BACKOFF_CAP_S) * random.uniform(0.5, 1.5)

    async def _attempt(self, payload: dict[str, Any]) -> Reply | _Retry:
        """One request: a Reply, a _Retry for transient failures, or BackendError for the rest."""
        client, semaphore = self._connection()
        try:
            async with semaphore:
                response = await client.post(self.endpoint, json=payload)
        except httpx.TimeoutException:
            return _Retry(
                f"{self.endpoint} did not answer within {self.timeout_s:g} s; the server may be "
                "overloaded: raise the timeout or lower the concurrency"
            )
        except httpx.TransportError as error:
            return _Retry(
                f"cannot reach {self.endpoint}: {_describe_transport_error(error)}; "
                "is the server running? check --base-url",
                unreachable=isinstance(error, httpx.ConnectError),
            )
        return self._interpret(response)

    def _interpret(self, response: httpx.Response) -> Reply | _Retry:
        status = response.status_code
        if status == 200:
            return _parse_reply(response, self.endpoint)
        message = _error_message(response)
        if status == 429:
            return _Retry(
                f"{self.endpoint} is rate limiting requests (429: {message}); "
                "lower the concurrency or wait and rerun (cached samples are kept)",
                _retry_after(response),
            )
        if status >= 500 or status == 408:
            return _Retry(
                f"{self.endpoint} answered {status}: {message}; check the server's logs",
                _retry_after(response),
            )
        raise BackendError(f"{self.endpoint} rejected the request ({status}: {message}); "
                           f"{_hint_for(status)}")


def _parse_reply(response: httpx.Response, endpoint: str) -> Reply:
    """The reply in a 200 response; its strings valid Unicode (`load_json`), since the server
    may send any code point escaped, a lone surrogate included."""
    try:
        data = load_json(response.content)
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        usage = data.get("usage") or {}
        calls = [{"id": str(call.get("id") or f"call_{index}"), "type": "function",
                  "function": {"name": str(call["function"].get("name") or ""),
                               "arguments": _arguments_text(call["function"].get("arguments"))}}
                 for index, call in enumerate(choice["message"].get("tool_calls") or [])]
        return Reply(
            text=text,
            usage=Usage(prompt_tokens=usage.get("prompt_tokens") or 0,
                        completion_tokens=usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
            tool_calls=calls,
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
        raise BackendError(
            f"{endpoint} answered 200 but not with a chat completion ({type(error).__name__}: "
            f"{error}); check that --base-url points at an OpenAI-compatible API"
        ) from error


def _arguments_text(arguments: object) -> str:
    """A tool call's arguments as the JSON text the API specifies (some servers send an
    object instead of a string)."""
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _error_message(response: httpx.Response) -> str:
    """The server's own error text: OpenAI's {"error": {"message"}}, vLLM's or FastAPI's shapes."""
    try:
        data = load_json(response.content)
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for value in (error, data.get("message"), data.get("detail")):
            if value:
                return str(value)
    return str(data)[:500]


def _retry_after(response: httpx.Response) -> float | None:
    """A numeric Retry-After in seconds; HTTP dates and junk are ignored (normal backoff applies)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _hint_for(status: int) -> str:
    if status in (401, 403):
        return "check the API key (--api-key, $KNOWBENCH_API_KEY or $OPENAI_API_KEY)"
    if status == 404:
        return "check --base-url and that the server serves this --model"
    return "check --model and the sampling settings the server accepts"


def _describe_transport_error(error: httpx.TransportError) -> str:
    """The root cause in words: httpx's own text ("All connection attempts failed") hides it."""
    cause: BaseException | None = error
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror  # e.g. "Name or service not known", "Network is unreachable"
        cause = cause.__cause__ or cause.__context__
    return str(error) or type(error).__name__
