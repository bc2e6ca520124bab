"""A code-aware tokenizer for lexical retrieval.

Identifiers are kept whole and also split into their parts, so a query for "chunked" finds
`more_itertools.more.chunked` and a query for "command invoke" finds `Command.invoke`;
dotted names also keep their tails, so "Context.invoke" finds `click.core.Context.invoke`:

    "HTTPServer.serve_forever"  ->  httpserver.serve_forever, httpserver, http, server,
                                    serve_forever, serve, forever
    "core.Context.invoke"       ->  core.context.invoke, context.invoke, core, context, invoke

Everything is lower-cased; Python keywords, `self`/`cls`, a few English function words and
one-character tokens are dropped. `TOKENIZER_VERSION` is stored with BM25 indexes: changing the
rules below must bump it so indexes rebuild.
"""

from __future__ import annotations

import itertools
import keyword
import re
from collections.abc import Iterable

TOKENIZER_VERSION = 2

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|\d{2,}")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STOPWORDS = frozenset(
    [word.lower() for word in keyword.kwlist]
    + ["self", "cls", "the", "an", "of", "to", "it", "on", "be", "this", "that", "are", "by",
       "at", "can", "will", "you", "your", "we", "which", "then", "than", "its", "into", "has",
       "have", "was", "were", "there", "these", "those", "also"]
)
_MEMO_LIMIT = 2_000_000
_memo: dict[str, list[str]] = {}


def split_identifier(word: str) -> list[str]:
    """The tokens of one (possibly dotted) identifier, whole forms first, without repeats."""
    tokens: list[str] = []
    parts = word.split(".")
    # The whole dotted name and its shorter tails, so 'Context.invoke' in a query matches
    # 'click.core.Context.invoke' in the corpus.
    tokens.extend(".".join(parts[start:]).lower() for start in range(len(parts) - 1))
    for part in parts:
        tokens.append(part.lower())
        for piece in part.split("_"):
            if not piece:
                continue
            pieces = _CAMEL.findall(piece)
            if len(pieces) > 1 or "_" in part:
                tokens.append(piece.lower())
            if len(pieces) > 1:
                tokens.extend(sub.lower() for sub in pieces)
    return [token for token in dict.fromkeys(tokens) if len(token) > 1 and token not in STOPWORDS]


def tokenize(text: str) -> list[str]:
    """Retrieval tokens of `text`, in order (repeats kept: BM25 counts term frequency)."""
    memo = _memo
    if len(memo) > _MEMO_LIMIT:
        memo.clear()
    tokens: list[str] = []
    for word in _WORD.findall(text):
        found = memo.get(word)
        if found is None:
            found = memo[word] = split_identifier(word)
        tokens.extend(found)
    return tokens


def tokenize_to_ids(texts: Iterable[str]) -> tuple[list[list[int]], dict[str, int]]:
    """`tokenize` for a whole corpus, straight to token ids: the ids of each text and the
    vocabulary (token -> id, in order of first appearance). Equivalent to tokenizing every
    text and numbering the tokens, without materialising the strings (BM25 build time)."""
    vocab: dict[str, int] = {}
    word_ids: dict[str, list[int]] = {}
    lookup, find, flatten = word_ids.get, _WORD.findall, itertools.chain.from_iterable
    documents: list[list[int]] = []
    for text in texts:
        words = find(text)
        parts = list(map(lookup, words))  # the per-word work stays in C for known words
        if None in parts:
            for index, part in enumerate(parts):
                if part is None:
                    word = words[index]
                    part = word_ids.get(word)
                    if part is None:
                        part = word_ids[word] = [vocab.setdefault(token, len(vocab))
                                                 for token in split_identifier(word)]
                    parts[index] = part
        documents.append(list(flatten(parts)))  # type: ignore[arg-type]
    return documents, vocab
