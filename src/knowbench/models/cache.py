"""A persistent cache of model replies, so re-running a benchmark costs no new requests.

One SQLite file holds every cached reply, keyed by a hash of everything that decides what
one sample is: the backend's identity, the prompt, the sampling settings and the sample
index. The file is opened in WAL mode and every `put` commits at once, so a run that is
killed loses at most the reply in flight and the next run picks up where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knowbench.errors import UserError
from knowbench.models.base import Message, Reply
from knowbench.records import SamplingParams

CACHE_DIR_ENV = "KNOWBENCH_CACHE_DIR"
CACHE_FILE = "generations.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    reply TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_path() -> Path:
    """`$KNOWBENCH_CACHE_DIR/generations.sqlite`, or `~/.cache/knowbench/generations.sqlite`."""
    directory = os.environ.get(CACHE_DIR_ENV) or "~/.cache/knowbench"
    return Path(directory).expanduser() / CACHE_FILE


class GenerationCache:
    """Replies stored by `key(...)` in one SQLite file.

    Safe to share between asyncio tasks on one thread and between threads: all access goes
    through one connection guarded by a lock, and every operation is one short transaction.
    Several processes may also share the file; SQLite's own locking serialises their writes.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._conn = self._connect(self.path)

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # timeout: wait for another process's write instead of failing with "locked".
            conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            conn.commit()
        except (OSError, sqlite3.Error) as error:
            raise UserError(
                f"cannot open the generation cache {path}: {error}; "
                f"point ${CACHE_DIR_ENV} at a writable directory or disable the cache"
            ) from error
        return conn

    @staticmethod
    def key(identity: dict[str, Any], messages: list[Message], params: SamplingParams,
            sample_idx: int, tools: list[dict[str, Any]] | None = None) -> str:
        """The hex sha256 naming one sample.

        Covers the backend identity, the messages, temperature, top_p, max_tokens, seed and
        the sample index, and the tools offered when there are any (a tool-using turn).
        `params.n` is left out on purpose: it says how many samples a run
        draws, not what any one sample is, so raising n reuses the samples already cached.
        """
        payload = {
            "identity": identity,
            "messages": [message.wire() for message in messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "sample_idx": sample_idx,
        }
        if tools is not None:
            payload["tools"] = tools
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def get(self, key: str) -> Reply | None:
        """The cached reply for `key` (with `cached=True`), or None when there is none."""
        with self._lock:
            row = self._conn.execute("SELECT reply FROM generations WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            reply = Reply.model_validate_json(row[0])
        except ValidationError:
            return None  # written by an incompatible version: treat as a miss and regenerate
        return reply.model_copy(update={"cached": True})

    def put(self, key: str, reply: Reply) -> None:
        """Store `reply` under `key`, replacing any earlier one, and commit at once."""
        data = reply.model_copy(update={"cached": False}).model_dump_json()
        with self._lock, self._conn:  # the connection context commits (or rolls back)
            self._conn.execute(
                "INSERT OR REPLACE INTO generations (key, reply, created) VALUES (?, ?, ?)",
                (key, data, time.time()),
            )

    async def through(self, identity: dict[str, Any], messages: list[Message], params: SamplingParams,
                      sample_idx: int, make: Callable[[], Awaitable[Reply]]) -> Reply:
        """The stored reply for this request, else `make()`'s, stored."""
        key = self.key(identity, messages, params, sample_idx)
        hit = self.get(key)
        if hit is not None:
            return hit
        reply = await make()
        self.put(key, reply)
        return reply

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def close(self) -> None:
        """Close the file; the cache must not be used afterwards."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> GenerationCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
