"""The `agent` method: a tool-using agent driven through the chat API's tool calls.

Each sample is one episode. The model gets the task (as every method shows it) and tools:

- `search(query)`: the top-k chunks of the run's corpus for `query` (BM25, or the retriever
  named by the variant: `agent:dense`, `agent:hybrid`), through the same leakage control as
  the rag-* methods: a chunk the task's `LeakageGuard` withholds is never returned;
- `list(path)` and `read(path, start, end)`: the corpus as a tree of files, each file shown
  as the chunks the corpus holds for it (functions, class outlines, documentation sections),
  with the withheld ones left out (`read` says which lines were withheld, never their text;
  a file all of whose chunks are withheld is not listed and cannot be read); for a project
  task, `project/...` is the task's project tree (`ProjectView`: the target's body withheld,
  the task's tests and any copy of the target left out) and `corpus/...` the corpus;
- `python(code)`: run a snippet in the run's engine, in the same sandbox and under the same
  limits as the task's samples (no network; the benchmark, the run directory and the corpus
  are masked), for a project task in a copy of the project as `ProjectView` shows it: its
  stdout, stderr and, when it failed, the error;
- `submit(code)` (`submit(answer)` for a multiple-choice task): the final answer, which
  becomes the sample's completion and is judged like any other.

The agent never sees the task's tests. Without a corpus only `python` and `submit` are
offered (and, for a project task, `list` and `read` over `project/`). An episode ends on submit; on a reply with no tool call (its text becomes the
completion, as with one-shot methods); at `max_turns` model calls; when the model calls of
the episode have used `episode_tokens` tokens (prompt plus completion, summed over calls);
after `episode_timeout` seconds; or when one tool call (the same tool with the same
arguments) is made a `loop_limit`-th time. Every end is recorded with its reason, and an
episode that did not submit has an empty completion (status `no-code`, or `truncated` when
its last reply was cut off at --max-tokens). A tool call whose arguments are not a JSON
object (most often a reply cut off at --max-tokens in the middle of the call) is not run: its
tool result tells the model why (cut off at the token limit: make the call again, shorter),
and it goes back to the server with arguments `{}`.

The whole episode (every message, tool call, tool result, per-call token counts and
latencies) is returned as `Generation.trajectory`; the run stores it with the sample (its
`extra["trajectory"]`) and the HTML report shows it. Each model call goes through the
backend's generation cache, so a rerun (or a resumed run) replays finished calls at no cost.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from knowbench.benchmark.schema import ChoiceTask, FunctionTask, ProjectTask, TestSpec
from knowbench.errors import UserError
from knowbench.execution.projects import TargetError
from knowbench.jsonl import load_json
from knowbench.knowledge.corpus import Chunk, Corpus, open_corpus
from knowbench.knowledge.leakage import LeakageGuard, SourceNormaliser
from knowbench.methods.base import Method, Prompt, SampleContext
from knowbench.methods.project_view import ROOT as PROJECT_ROOT
from knowbench.methods.project_view import Normalised, ProjectView
from knowbench.methods.prompts import task_messages
from knowbench.models.base import Message, ModelBackend, Reply
from knowbench.records import CallUsage, Generation, Usage

if TYPE_CHECKING:
    from knowbench.knowledge.retrieval import Retriever

RETRIEVER_KINDS = ("bm25", "dense", "hybrid")
CORPUS_ROOT = "corpus"
"""For a project task, `list` and `read` address `project/...` and `corpus/...`."""
TOOL_OUTPUT_CHARS = 6000
"""Longest tool result the model sees (longer ones are cut, saying so)."""
EXCERPT_CHARS = 800
"""How much of each chunk `search` shows; `read` gives the rest."""

SYSTEM = (
    "You are an expert Python programmer working on one task with tools. Use search, list and "
    "read to look up the library's source and documentation, and python to try code (it runs "
    "in a sandbox without network; print what you want to see). When you are done, call "
    "submit once with your final answer. Call one tool at a time and do not repeat a call "
    "whose result you already have."
)


class AgentMethod(Method):
    name = "agent"
    variant_option = "retriever_kind"

    def __init__(self, corpus: str | None = None, top_k: int = 5, exclude_file: bool = False,
                 retriever_kind: str = "bm25", max_turns: int = 20, episode_tokens: int = 200_000,
                 episode_timeout: float = 600.0, loop_limit: int = 3,
                 retriever: Retriever | None = None, **options: Any) -> None:
        del options  # options of other methods
        if retriever_kind not in RETRIEVER_KINDS:
            raise UserError(f"unknown retriever '{retriever_kind}' for the agent's search; "
                            f"choose one of {', '.join(RETRIEVER_KINDS)} (--method agent:hybrid)")
        if top_k < 1 or max_turns < 1 or episode_tokens < 1 or episode_timeout <= 0 \
                or loop_limit < 2:
            raise UserError("agent: top_k, max_turns and episode_tokens must be >= 1, "
                            "episode_timeout > 0 and loop_limit >= 2")
        if retriever is None and corpus:
            from knowbench.knowledge.retrieval import open_retriever  # numpy: only when used

            retriever = open_retriever(retriever_kind, open_corpus(corpus))
        self.retriever = retriever
        self.corpus: Corpus | None = retriever.corpus if retriever is not None else None
        self.retriever_kind = retriever_kind
        self.top_k, self.exclude_file = top_k, exclude_file
        self.max_turns, self.episode_tokens = max_turns, episode_tokens
        self.episode_timeout, self.loop_limit = episode_timeout, loop_limit
        self.normaliser = SourceNormaliser()
        self._running: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._views: dict[str, ProjectView | None] = {}
        self._normalised = Normalised()
        self.files = CorpusFiles(self.corpus) if self.corpus is not None else None

    # --- the method interface -----------------------------------------------------------

    def prompt(self, task: FunctionTask | ChoiceTask) -> Prompt:
        messages = task_messages(task)
        answer = "the complete definition as code" if isinstance(task, FunctionTask) else \
            "your answer ending with a line 'Answer: X'"
        tools = ", ".join(tool["function"]["name"] for tool in self.tools(task))
        user = (f"{messages[-1].content}\n\nYou have these tools: {tools}. Finish by calling "
                f"submit with {answer}.")
        trace: dict[str, Any] = {"method": self.describe()["method"], "tools": tools.split(", ")}
        view = self._view(task)
        if view is not None:
            where = "." if view.workdir == "." else view.workdir
            importable = ", ".join(f"project/{posixpath.normpath(posixpath.join(view.workdir, entry))}"
                                   for entry in task.project.python_path)  # type: ignore[union-attr]
            corpus = (f" and the {self.corpus.name} knowledge corpus under {CORPUS_ROOT}/"
                      if self.corpus is not None else "")
            user += (f"\n\nThe project's files are under {PROJECT_ROOT}/{corpus} (list '' shows "
                     f"the top); the body of what you are to write is withheld there and the "
                     f"task's tests are not shown. python runs in a copy of the project, in its "
                     f"folder {PROJECT_ROOT}/{where} (relative paths start there), with "
                     f"{importable} first on sys.path.")
            trace["project"] = view.describe()
        if self.corpus is not None or view is not None:
            trace["leakage"] = self._guard(task).describe()
        if self.corpus is not None:
            trace.update({"corpus": self.corpus.name, "corpus_hash": self.corpus.content_hash})
        return Prompt(messages=[Message(role="system", content=SYSTEM),
                                Message(role="user", content=user)], trace=trace)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "method": "agent" if self.retriever_kind == "bm25" else f"agent:{self.retriever_kind}",
            "max_turns": self.max_turns, "episode_tokens": self.episode_tokens,
            "episode_timeout": self.episode_timeout, "loop_limit": self.loop_limit}
        if self.corpus is not None and self.retriever is not None:
            described.update({"corpus": self.corpus.name, "corpus_hash": self.corpus.content_hash,
                              "retriever": self.retriever.describe(), "top_k": self.top_k,
                              "exclude_file": self.exclude_file})
        return described

    def hidden_paths(self) -> list[str]:
        return [str(self.corpus.directory)] if self.corpus is not None else []

    def attach(self, backend: ModelBackend) -> None:
        """Refuses, before any work, a backend that cannot make tool calls."""
        if not backend.supports_tools:
            raise UserError(f"--method agent needs a model that makes tool calls, served through "
                            f"an OpenAI-compatible endpoint; --model {backend.name} makes none\n"
                            "  fix: pass the model's name and --base-url (see docs/agents.md)")

    def check(self, tasks: Sequence[FunctionTask | ChoiceTask]) -> list[str]:
        if self.corpus is None:
            projects = sum(isinstance(task, ProjectTask) for task in tasks)
            if projects == len(tasks):
                return ["--method agent without --corpus: the agent gets no search; list and "
                        "read show the project tree of each task"]
            return ["--method agent without --corpus: the agent gets only the python and submit "
                    "tools (no search, list or read)" + (
                        f"; the {projects} project task(s) get list and read over their project "
                        "tree" if projects else "")]
        return []

    # --- tools ------------------------------------------------------------------------------

    def tools(self, task: FunctionTask | ChoiceTask) -> list[dict[str, Any]]:
        """The OpenAI function-tool schemas offered for `task`."""
        def tool(name: str, description: str, properties: dict[str, Any],
                 required: list[str]) -> dict[str, Any]:
            return {"type": "function", "function": {
                "name": name, "description": description,
                "parameters": {"type": "object", "properties": properties,
                               "required": required}}}

        text = {"type": "string"}
        found = []
        lines = {"path": text, "start": {"type": "integer"}, "end": {"type": "integer"}}
        if self.corpus is not None:
            found.append(tool("search", f"Search the {self.corpus.name} knowledge corpus (source, "
                              "docs, examples); returns the best matching chunks with their file "
                              "and lines.", {"query": text}, ["query"]))
        if self._view(task) is not None:
            roots = f"{PROJECT_ROOT}/ (the project)" + (
                f" and {CORPUS_ROOT}/ (the knowledge corpus)" if self.corpus is not None else "")
            found += [
                tool("list", f"List the files and folders under a folder ('' for the top: "
                     f"{roots}).", {"path": text}, ["path"]),
                tool("read", f"Read a file between two line numbers (inclusive); paths start "
                     f"with {PROJECT_ROOT}/" + (f" or {CORPUS_ROOT}/" if self.corpus is not None
                                                else "") + ".", lines, ["path"]),
            ]
        elif self.corpus is not None:
            found += [
                tool("list", "List the files and folders of the corpus under a folder ('' for "
                     "the top).", {"path": text}, ["path"]),
                tool("read", "Read a corpus file's chunks between two line numbers (inclusive).",
                     lines, ["path"]),
            ]
        found.append(tool("python", "Run Python code in a sandbox (no network, limited time and "
                          "memory); returns its stdout, stderr and any error.", {"code": text},
                          ["code"]))
        if isinstance(task, ChoiceTask):
            found.append(tool("submit", "Submit the final answer (ends the task).",
                              {"answer": text}, ["answer"]))
        else:
            found.append(tool("submit", "Submit the final code: the complete definition of the "
                              "function with the imports it needs (ends the task).",
                              {"code": text}, ["code"]))
        return found

    def _guard(self, task: FunctionTask | ChoiceTask) -> LeakageGuard:
        return LeakageGuard(task, exclude_file=self.exclude_file, normaliser=self.normaliser)

    def _view(self, task: FunctionTask | ChoiceTask) -> ProjectView | None:
        """The project tree `task` offers (a project task loaded from its benchmark), made
        once. None for other tasks, and for a project whose target files do not define their
        targets (judging reports that defect; the episode gets no project tree)."""
        if not isinstance(task, ProjectTask) or task.root is None:
            return None
        if task.task_id not in self._views:
            try:
                self._views[task.task_id] = ProjectView(
                    task, self._guard(task), exclude_file=self.exclude_file,
                    normalised=self._normalised)
            except (TargetError, OSError, SyntaxError, ValueError):
                self._views[task.task_id] = None
        return self._views[task.task_id]

    def _search(self, guard: LeakageGuard, arguments: dict[str, Any],
                prefix: str = "") -> tuple[str, dict[str, Any]]:
        assert self.retriever is not None
        query = str(arguments.get("query") or "").strip()
        if not query:
            return "error: search needs a non-empty query", {}
        hits, withheld = self.retriever.search(query, self.top_k, exclude=guard.reason)
        if not hits:
            return "no results", {"hits": [], "withheld": len(withheld)}
        parts = []
        for hit in hits:
            chunk = hit.chunk
            excerpt = chunk.text if len(chunk.text) <= EXCERPT_CHARS else \
                chunk.text[:EXCERPT_CHARS] + \
                f"\n… (more: read {prefix}{chunk.path} {chunk.start_line} {chunk.end_line})"
            parts.append(f"[{hit.rank}] {chunk.kind} {chunk.full_name or chunk.path} — "
                         f"{prefix}{chunk.location}\n{excerpt}")
        return "\n\n".join(parts), {"hits": [hit.chunk.id for hit in hits],
                                    "withheld": len(withheld)}

    def _list(self, guard: LeakageGuard, arguments: dict[str, Any],
              prefix: str = "") -> tuple[str, dict[str, Any]]:
        assert self.files is not None
        return self.files.list(guard, _clean(arguments.get("path")), prefix)

    def _read(self, guard: LeakageGuard, arguments: dict[str, Any],
              prefix: str = "") -> tuple[str, dict[str, Any]]:
        assert self.files is not None
        try:
            start = int(arguments.get("start") or 1)
            end = int(arguments.get("end") or 10**9)
        except (TypeError, ValueError):
            return "error: start and end must be line numbers", {}
        return self.files.read(guard, _clean(arguments.get("path")), start, end, prefix)

    def _tree(self, view: ProjectView, guard: LeakageGuard, name: str,
              arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """`list` or `read` for a project task: `project/...` is the project's tree,
        `corpus/...` the knowledge corpus."""
        path = _clean(arguments.get("path"))
        roots = [f"{PROJECT_ROOT}/"] + ([f"{CORPUS_ROOT}/"] if self.corpus is not None else [])
        if not path and name == "list":
            return "\n".join(sorted(roots)), {"entries": len(roots)}
        head, _, rest = path.partition("/")
        if head == CORPUS_ROOT and self.corpus is not None:
            corpus_arguments = {**arguments, "path": rest}
            if name == "list":
                return self._list(guard, corpus_arguments, f"{CORPUS_ROOT}/")
            return self._read(guard, corpus_arguments, f"{CORPUS_ROOT}/")
        if head != PROJECT_ROOT:
            return f"error: paths start with {' or '.join(roots)} (list '' shows the top)", {}
        if name == "list":
            listed = view.list(rest)
            if listed is None:
                return f"no folder '{path}' (list '{PROJECT_ROOT}' shows the project's top)", {}
            return listed or "(empty folder)", {"entries": len(listed.split())}
        try:
            start = int(arguments.get("start") or 1)
            end = int(arguments.get("end") or 10**9)
        except (TypeError, ValueError):
            return "error: start and end must be line numbers", {}
        text, why = view.read(rest)
        if text is None:
            return f"{why}: '{path}' (use list to find files)", {}
        lines = text.splitlines()
        shown = lines[max(start, 1) - 1:end]
        if not shown:
            return f"{path} has {len(lines)} lines; none between {start} and {end}", {"lines": len(lines)}
        first = max(start, 1)
        numbered = "\n".join(f"{first + index:>5}  {line}" for index, line in enumerate(shown))
        return f"--- {path}:{first}-{first + len(shown) - 1} of {len(lines)} lines\n{numbered}", {
            "file": rest, "lines": [first, first + len(shown) - 1]}

    async def _python(self, context: SampleContext, arguments: dict[str, Any],
                      view: ProjectView | None = None) -> tuple[str, dict[str, Any]]:
        from knowbench.execution.engine import ExecutionRequest

        code = str(arguments.get("code") or "")
        if not code.strip():
            return "error: python needs code to run", {}
        # A project task's snippet runs in the project's copy (targets withheld, tests left out).
        project = await asyncio.to_thread(view.run) if view is not None else None
        request = ExecutionRequest(program=code, tests=[TestSpec(name="snippet", code="pass")],
                                   limits=context.limits, preload=context.preload, project=project)
        execution = await asyncio.to_thread(context.engine.execute, request)
        parts = []
        if execution.stdout:
            parts.append(f"stdout:\n{execution.stdout}")
        if execution.stderr:
            parts.append(f"stderr:\n{execution.stderr}")
        outcome = execution.tests[0] if execution.tests else None
        if outcome is not None and outcome.status != "pass":
            parts.append(f"{outcome.status} ({outcome.reason}): {outcome.message}")
        return "\n".join(parts) or "(no output)", {
            "status": execution.status, "sandbox": execution.sandbox,
            "reason": outcome.reason if outcome else None, "duration_s": execution.duration_s}

    # --- the episode ------------------------------------------------------------------------

    async def generate(self, task: FunctionTask | ChoiceTask, prompt: Prompt,
                       context: SampleContext) -> Generation:
        """One episode (see the module docstring). At most as many episodes run at once as
        the backend keeps requests in flight, and an episode's clock starts when it does:
        episodes queued behind others do not use up their wall-clock limit waiting."""
        loop = asyncio.get_running_loop()
        if self._running is None or self._running[0] is not loop:
            width = int(context.backend.connection().get("concurrency") or 8)
            self._running = (loop, asyncio.Semaphore(width))
        async with self._running[1]:
            return await self._episode(task, prompt, context)

    async def _episode(self, task: FunctionTask | ChoiceTask, prompt: Prompt,
                       context: SampleContext) -> Generation:
        guard = self._guard(task)
        view = await asyncio.to_thread(self._view, task)
        tools = self.tools(task)
        messages = list(prompt.messages)
        steps: list[dict[str, Any]] = []
        calls: list[CallUsage] = []
        seen: Counter[str] = Counter()
        started = time.monotonic()
        completion, end, detail = "", "max-turns", f"{self.max_turns} model calls made"
        finish_reason: str | None = None
        cached = True
        for turn in range(1, self.max_turns + 1):
            left = self.episode_timeout - (time.monotonic() - started)
            if left <= 0:
                end, detail = "timeout", f"{self.episode_timeout:g} s passed"
                break
            called = time.monotonic()
            try:
                reply: Reply = await asyncio.wait_for(context.backend.generate_with_tools(
                    task, messages, context.params, context.sample_idx, tools), left)
            except TimeoutError:
                end, detail = "timeout", f"{self.episode_timeout:g} s passed during a model call"
                break
            cached = cached and reply.cached
            finish_reason = reply.finish_reason
            call_usage = CallUsage(prompt_tokens=reply.usage.prompt_tokens,
                                   completion_tokens=reply.usage.completion_tokens)
            calls.append(call_usage)
            steps.append({"turn": turn, "role": "assistant", "content": reply.text,
                          "tool_calls": reply.tool_calls, "usage": call_usage.model_dump(),
                          "finish_reason": reply.finish_reason, "cached": reply.cached,
                          "latency_s": round(time.monotonic() - called, 4)})
            if not reply.tool_calls:
                completion, end, detail = reply.text, "answered", "a reply without a tool call"
                break
            # A call whose arguments are not a JSON object is sent back with `{}` (servers
            # that parse the arguments of earlier calls reject the conversation otherwise);
            # the trajectory keeps what the model wrote.
            messages.append(Message(role="assistant", content=reply.text, tool_calls=[
                call if _arguments(call["function"]["arguments"]) is not None else
                {**call, "function": {**call["function"], "arguments": "{}"}}
                for call in reply.tool_calls]))
            stop = None
            for call in reply.tool_calls:
                name = call["function"]["name"]
                raw = call["function"]["arguments"]
                signature = json.dumps([name, _canonical(raw)])
                seen[signature] += 1
                if seen[signature] >= self.loop_limit:
                    stop = ("loop", f"{name} called {seen[signature]} times with the same arguments")
                    break
                arguments = _arguments(raw)
                if name == "submit" and arguments is not None:
                    completion = str(arguments.get("code") or arguments.get("answer") or "")
                    stop = ("submitted", "submit called")
                    break
                ran = time.monotonic()
                if arguments is None and reply.finish_reason == "length":
                    text, record = (
                        f"error: your reply was cut off at the token limit ({context.params.max_tokens} "
                        f"tokens per reply) while writing the arguments of this {name} call "
                        f"({len(raw)} characters, not valid JSON), so the call was not run. "
                        "Make the call again with shorter arguments."), {"cut_off": True}
                elif arguments is None:
                    text, record = (f"error: the arguments of this {name} call are not a JSON "
                                    f"object, so it was not run: {raw[:200]}"), {}
                else:
                    text, record = await self._tool(name, arguments, guard, context, tools, view)
                text = _cut(text)
                steps.append({"turn": turn, "role": "tool", "tool_call_id": call["id"],
                              "name": name, "arguments": arguments if arguments is not None else raw,
                              "content": text, "record": record,
                              "duration_s": round(time.monotonic() - ran, 4)})
                messages.append(Message(role="tool", content=text, tool_call_id=call["id"]))
            if stop is not None:
                end, detail = stop
                break
            used = sum(call.prompt_tokens + call.completion_tokens for call in calls)
            if used >= self.episode_tokens:
                end, detail = "token-limit", f"{used} tokens used, limit {self.episode_tokens}"
                break
        usage = Usage.of_calls(calls)
        trajectory = {
            "end": end, "detail": detail, "turns": sum(step["role"] == "assistant" for step in steps),
            "tool_calls": sum(step["role"] == "tool" for step in steps),
            "usage": {"prompt_tokens": usage.prompt_tokens,
                      "completion_tokens": usage.completion_tokens}, "duration_s": round(time.monotonic() - started, 4),
            "limits": {"max_turns": self.max_turns, "episode_tokens": self.episode_tokens,
                       "episode_timeout": self.episode_timeout, "loop_limit": self.loop_limit},
            "messages": [message.wire() for message in prompt.messages],
            "steps": steps,
        }
        if end not in ("submitted", "answered"):
            finish_reason = f"agent:{end}" if finish_reason != "length" else "length"
        return Generation(task_id=task.task_id, sample_idx=context.sample_idx,
                          completion=completion, usage=usage, finish_reason=finish_reason,
                          cached=cached and bool(steps),
                          latency_s=trajectory["duration_s"], trajectory=trajectory)

    async def _tool(self, name: str, arguments: dict[str, Any], guard: LeakageGuard,
                    context: SampleContext, tools: list[dict[str, Any]],
                    view: ProjectView | None = None) -> tuple[str, dict[str, Any]]:
        if name == "python":
            return await self._python(context, arguments, view)
        if view is not None and name in ("list", "read"):
            return await asyncio.to_thread(self._tree, view, guard, name, arguments)
        if self.corpus is not None and view is not None and name == "search":
            return await asyncio.to_thread(self._search, guard, arguments, f"{CORPUS_ROOT}/")
        if self.corpus is not None:
            if name == "search":
                return await asyncio.to_thread(self._search, guard, arguments)
            if name == "list":
                return self._list(guard, arguments)
            if name == "read":
                return self._read(guard, arguments)
        offered = ", ".join(tool["function"]["name"] for tool in tools)
        return f"error: no tool '{name}' (tools: {offered})", {}


class CorpusFiles:
    """A corpus as a tree of files, each file shown as the chunks the corpus holds for it,
    with the chunks a task's `LeakageGuard` withholds left out: what the agent's `list` and
    `read` tools show, and what a framework's workspace holds (`mini-swe-agent`)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.files: dict[str, list[Chunk]] = {}
        for chunk in corpus.chunks:
            self.files.setdefault(chunk.path, []).append(chunk)
        for chunks in self.files.values():
            chunks.sort(key=lambda chunk: (chunk.start_line, -chunk.end_line))

    def visible(self, guard: LeakageGuard, path: str) -> tuple[list[Chunk], int]:
        """The chunks of corpus file `path` leakage control allows, and how many it withholds."""
        chunks = self.files.get(path, [])
        shown = [chunk for chunk in chunks
                 if guard.reason(self.corpus.position[chunk.id], chunk) is None]
        return shown, len(chunks) - len(shown)

    def list(self, guard: LeakageGuard, folder: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
        """The files and folders under `folder` (`prefix`: how the caller's paths name the
        corpus's top, in messages)."""
        entries: set[str] = set()
        for path in self.files:
            if folder and not path.startswith(folder + "/"):
                continue
            rest = path[len(folder) + 1:] if folder else path
            head, slash, _ = rest.partition("/")
            if slash:
                entries.add(head + "/")
            elif self.visible(guard, path)[0]:
                entries.add(head)
        if not entries:
            return f"no folder '{prefix}{folder}' in the corpus (list '' shows the top)", {}
        return "\n".join(sorted(entries)), {"entries": len(entries)}

    def read(self, guard: LeakageGuard, path: str, start: int = 1, end: int = 10**9,
             prefix: str = "") -> tuple[str, dict[str, Any]]:
        """File `path` between lines `start` and `end` as its visible chunks, each headed by
        its location, kind and name, and how many chunks are withheld (never their text)."""
        shown, withheld = self.visible(guard, path)
        if not shown:
            return f"no file '{prefix}{path}' in the corpus (use list or search to find files)", {}
        parts, ids = [], []
        for chunk in shown:
            if chunk.end_line < start or chunk.start_line > end:
                continue
            ids.append(chunk.id)
            parts.append(f"--- {prefix}{chunk.location} ({chunk.kind} {chunk.qualname or ''})".rstrip()
                         + f"\n{chunk.text}")
        if withheld:
            parts.append(f"({withheld} chunk(s) of this file are withheld)")
        if not ids:
            parts.insert(0, f"no chunk of {prefix}{path} between lines {start} and {end}")
        return "\n".join(parts), {"chunks": ids, "withheld": withheld}


def _arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's arguments as an object (None: not a JSON object). The model may escape
    any code point, a lone surrogate too: `load_json` keeps its strings valid Unicode, since
    they become the sample's completion, code the engine runs and the stored trajectory."""
    try:
        value = load_json(raw or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _canonical(raw: str) -> str:
    """Arguments in a form where the same call compares equal however it was spelled."""
    value = _arguments(raw)
    return raw.strip() if value is None else json.dumps(value, sort_keys=True)


def _cut(text: str) -> str:
    if len(text) <= TOOL_OUTPUT_CHARS:
        return text
    return text[:TOOL_OUTPUT_CHARS] + f"\n… ({len(text) - TOOL_OUTPUT_CHARS} more characters cut)"


def _clean(value: object) -> str:
    path = posixpath.normpath(str(value or "").strip().replace("\\", "/")).strip("/")
    return "" if path in (".", "") else path
