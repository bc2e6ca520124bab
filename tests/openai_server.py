"""A real, scripted OpenAI-compatible chat completions server for tests (stdlib only).

In-process use (a daemon thread on 127.0.0.1, a free port)::

    with ScriptedOpenAIServer(responder=lambda body: "def f(): return 1") as server:
        # or responder=sampling_responder({"slugify": (CODE, 0.9)}): greedy CODE, samples
        # CODE 90% of the time and a perturbed variant otherwise (a memorising model)
        backend = OpenAIBackend(model="m", base_url=server.base_url)  # ".../v1"
        ...
        server.requests[-1].body["seed"], server.requests[-1].headers["authorization"]
        server.fail_next(429, times=2, retry_after="0")  # next 2 requests answer 429
        server.delay_s = 0.2                              # hold every response 0.2 s
        server.max_in_flight                              # peak concurrent requests seen

As a separate process (stable CLI; end-to-end tests rely on it)::

    python tests/openai_server.py --replies FILE.json [--port 0] [--delay 0]
                                  [--fallback pass] [--log REQUESTS.jsonl]
    python tests/openai_server.py --tool-script SCRIPT.json ...   (tool-using episodes)

FILE.json is a JSON object mapping a substring of the last user message to the reply text;
the first key (in file order) found in that message wins, and a message matching none gets
the fallback reply ("pass" unless --fallback says otherwise). The first line on stdout is
`PORT <n>` (flushed at once); the API root is then `http://127.0.0.1:<n>/v1`. With --log,
every request body is appended to the file as one JSON line. It serves until killed
(SIGTERM or SIGINT). Endpoints: POST /v1/chat/completions (also /chat/completions) and
GET /v1/models.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Responder = Callable[[dict[str, Any]], "str | ToolTurn | None"]  # None: "content": null
MODEL_ID = "scripted"


@dataclass(frozen=True)
class ToolTurn:
    """A scripted assistant turn that calls tools: `calls` are (tool name, arguments) pairs,
    sent as OpenAI `tool_calls` (arguments JSON-encoded unless given as a string)."""

    calls: tuple[tuple[str, Any], ...]
    content: str | None = None

    def message(self, turn: int) -> dict[str, Any]:
        return {"role": "assistant", "content": self.content, "tool_calls": [
            {"id": f"call_{turn}_{index}", "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str)
                          else json.dumps(args)}}
            for index, (name, args) in enumerate(self.calls)]}


def call(name: str, **arguments: Any) -> ToolTurn:
    """One turn making one tool call: `call("search", query="wrap text")`."""
    return ToolTurn(((name, arguments),))


def assistant_turns(body: dict[str, Any]) -> int:
    """How many assistant messages the request already holds (the episode's turn so far)."""
    return sum(1 for message in body.get("messages") or []
               if isinstance(message, dict) and message.get("role") == "assistant")


def first_user_message(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def tool_script_responder(scripts: dict[str, list[str | ToolTurn]],
                          fallback: str = "pass") -> Responder:
    """A responder playing tool-using episodes: the script whose key occurs in the first
    user message (the task) is played turn by turn, the turn chosen by how many assistant
    messages the request holds, so every episode (every sample) plays it from the start. A
    request past the script's end repeats its last turn; no matching script: `fallback`."""

    def respond(body: dict[str, Any]) -> str | ToolTurn:
        task = first_user_message(body)
        script = next((steps for key, steps in scripts.items() if key in task), None)
        if not script:
            return fallback
        return script[min(assistant_turns(body), len(script) - 1)]

    return respond


def last_user_message(body: dict[str, Any]) -> str:
    """The content of the last message with role "user" ("" when there is none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def echo_responder(body: dict[str, Any]) -> str:
    """The default reply: 'echo: ' followed by the last user message."""
    return f"echo: {last_user_message(body)}"


def replies_responder(replies: dict[str, str], fallback: str = "pass") -> Responder:
    """A responder answering the first reply whose key occurs in the last user message."""

    def respond(body: dict[str, Any]) -> str:
        text = last_user_message(body)
        return next((reply for key, reply in replies.items() if key in text), fallback)

    return respond


def sampling_responder(scripts: dict[str, tuple[str, float]], fallback: str = "pass",
                       seed: int = 0) -> Responder:
    """A model with an output distribution, for contamination checks: for the first key
    found in the last user message, (text, p): a greedy request (temperature 0) gets `text`;
    a sampled one gets `text` with probability p, else a variant of it in which each token
    (a run of non-space characters) is replaced with probability 1/2 by a random word. So
    p near 1 is a model that has memorised `text` and p = 0 a diverse one. Draws come from
    one random generator seeded with `seed`."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> str:
        message = last_user_message(body)
        text, p = next((script for key, script in scripts.items() if key in message), (fallback, 1.0))
        if not body.get("temperature"):
            return text
        with lock:
            if rng.random() < p:
                return text
            return re.sub(r"\S+", lambda token: token[0] if rng.random() < 0.5 else
                          "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)), text)

    return respond


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received. Header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Failure:
    status: int
    retry_after: str | None


def _count_tokens(text: str) -> int:
    return len(text.split())


def _limited(text: str | None, max_tokens: object) -> tuple[str | None, str]:
    if text is None or not isinstance(max_tokens, int):
        return text, "stop"
    tokens = list(re.finditer(r"\S+", text))
    if len(tokens) <= max_tokens:
        return text, "stop"
    return text[: tokens[max_tokens - 1].end()] if max_tokens > 0 else "", "length"


def _limited_calls(message: dict[str, Any], max_tokens: object) -> tuple[dict[str, Any], str]:
    """A tool-calling message cut as a server cuts one at `max_tokens`: the content, then each
    call's arguments in order, until the budget runs out; the call being written when it did
    keeps the arguments written so far (not valid JSON), later calls are dropped."""
    if not isinstance(max_tokens, int):
        return message, "tool_calls"
    left = max_tokens
    content, finish = _limited(message["content"], left)
    left -= _count_tokens(content or "")
    calls = []
    for call in message["tool_calls"] if finish != "length" else []:
        arguments, finish = _limited(call["function"]["arguments"], left)
        left -= _count_tokens(arguments or "")
        calls.append({**call, "function": {**call["function"], "arguments": arguments}})
        if finish == "length":
            break
    cut = finish == "length"
    return {**message, "content": content, "tool_calls": calls}, "length" if cut else "tool_calls"


def completion_json(body: dict[str, Any], text: str | ToolTurn | None,
                    include_usage: bool = True) -> dict[str, Any]:
    """A valid OpenAI chat.completion object answering `body` with `text` (or, for a
    `ToolTurn`, with tool calls and finish_reason "tool_calls").

    Like a real server, a reply longer than the request's `max_tokens` (a token here is a
    run of non-space characters) is cut after that many tokens, with finish_reason "length";
    so is a tool call's arguments (`_limited_calls`).
    """
    prompt = " ".join(str(m.get("content") or "") for m in body.get("messages") or []
                      if isinstance(m, dict))
    if isinstance(text, ToolTurn):  # a tool-calling turn: counted by its arguments' words
        message, finish_reason = _limited_calls(text.message(assistant_turns(body)),
                                                body.get("max_tokens"))
        spoken = " ".join([message["content"] or "", *(c["function"]["arguments"]
                                                      for c in message["tool_calls"])])
        return _completion(body, message, finish_reason, _count_tokens(prompt),
                           _count_tokens(spoken), include_usage)
    text, finish_reason = _limited(text, body.get("max_tokens"))
    prompt_tokens, completion_tokens = _count_tokens(prompt), _count_tokens(text or "")
    return _completion(body, {"role": "assistant", "content": text}, finish_reason, prompt_tokens,
                       completion_tokens, include_usage)


def _completion(body: dict[str, Any], message: dict[str, Any], finish_reason: str,
                prompt_tokens: int, completion_tokens: int, include_usage: bool) -> dict[str, Any]:
    completion: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", MODEL_ID),
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    if not include_usage:
        del completion["usage"]  # some servers send none
    return completion


def error_json(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error object."""
    kind = "rate_limit_error" if status == 429 else (
        "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


class ScriptedOpenAIServer:
    """An OpenAI chat completions server on 127.0.0.1 whose answers tests script.

    Use as a context manager (or call `start()` / `stop()`). Thread-safe: requests are
    served concurrently, one thread each. Set `include_usage = False` to omit "usage".
    """

    def __init__(self, responder: Responder | None = None, delay_s: float = 0.0,
                 port: int = 0, log_path: Path | None = None) -> None:
        self.responder: Responder = responder or echo_responder
        self.delay_s = delay_s
        self.log_path = log_path
        self.include_usage = True
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._failures: list[_Failure] = []
        self._lock = threading.Lock()
        self._httpd = _QuietHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The API root, e.g. "http://127.0.0.1:PORT/v1"."""
        return f"http://127.0.0.1:{self.port}/v1"

    def fail_next(self, status: int, times: int = 1, retry_after: str | None = None) -> None:
        """Answer the next `times` completion requests with `status` and an OpenAI error body."""
        with self._lock:
            self._failures.extend(_Failure(status, retry_after) for _ in range(times))

    def start(self) -> ScriptedOpenAIServer:
        # A short poll interval makes stop() (and so every test's teardown) quick.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True, name=f"openai-server-{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def serve_forever(self) -> None:
        """Serve on the calling thread until `shutdown` (script mode)."""
        self._httpd.serve_forever()

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # Called from handler threads.

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(request.body) + "\n")

    def _enter(self) -> _Failure | None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._failures.pop(0) if self._failures else None

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, JSON body, extra headers) for one completion request."""
        failure = self._enter()
        try:
            if self.delay_s:
                time.sleep(self.delay_s)  # held while in flight, so concurrency is observable
            if failure is not None:
                headers = {"Retry-After": failure.retry_after} if failure.retry_after else {}
                message = f"scripted failure with status {failure.status}"
                return failure.status, error_json(failure.status, message), headers
            return 200, completion_json(body, self.responder(body), self.include_usage), {}
        finally:
            self._leave()


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) leaves a broken pipe behind: not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if len(raw) < length:
                self.close_connection = True  # the client died mid-request: nothing was asked
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError as error:
                self._send(400, error_json(400, f"request body is not JSON: {error}"))
                return
            server._record(RecordedRequest("POST", self.path, _lower(self.headers), body))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, error_json(404, f"no route {self.path}"))
                return
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                self._send(400, error_json(400, "'messages' is a required list"))
                return
            status, payload, headers = server.answer(body)
            self._send(status, payload, headers)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [
                    {"id": MODEL_ID, "object": "model", "owned_by": "knowbench-tests"}]})
            else:
                self._send(404, error_json(404, f"no route {self.path}"))

        def _send(self, status: int, payload: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _load_replies(path: Path) -> dict[str, str]:
    replies = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(replies, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in replies.items()):
        raise SystemExit(f"{path}: expected a JSON object mapping strings to reply strings")
    return replies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server for tests.")
    parser.add_argument("--replies", type=Path, default=None,
                        help="JSON object: substring of the last user message -> reply text")
    parser.add_argument("--tool-script", type=Path, default=None,
                        help="JSON object: substring of the first user message -> list of turns, "
                             "each a reply text or {\"calls\": [[tool, arguments], ...]} "
                             "(see tool_script_responder)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: any free port)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to hold each reply")
    parser.add_argument("--fallback", default="pass", help="reply when no substring matches")
    parser.add_argument("--log", type=Path, default=None, help="append request bodies (JSONL)")
    args = parser.parse_args(argv)

    if args.tool_script is not None:
        scripts = json.loads(args.tool_script.read_text(encoding="utf-8"))
        responder = tool_script_responder(
            {key: [turn if isinstance(turn, str) else
                   ToolTurn(tuple((name, arguments) for name, arguments in turn["calls"]))
                   for turn in turns] for key, turns in scripts.items()}, args.fallback)
    elif args.replies is not None:
        responder = replies_responder(_load_replies(args.replies), args.fallback)
    else:
        parser.error("give --replies or --tool-script")
    server = ScriptedOpenAIServer(responder=responder,
                                  delay_s=args.delay, port=args.port, log_path=args.log)
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"PORT {server.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass  # killed on purpose: exit quietly
    finally:
        server.stop()


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the process like Ctrl-C, so it exits quietly and closes its socket."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
