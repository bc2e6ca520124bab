"""Write the demo's replay files: what an imperfect model answered on cachetools tasks.

    .venv/bin/python examples/demo/make_replies.py

Two files, one per knowledge method the demo runs: `replies-none.jsonl` (the model alone) and
`replies-rag-bm25.jsonl` (the same model with retrieved cachetools code in its prompt). The
replies are written by hand, the way code models answer: fenced code with prose around it,
some right, some with a wrong API, a wrong argument, a syntax slip, a reply cut off at the
token limit (finish_reason "length"), prose without code. Each line: task_id, sample_idx,
completion, finish_reason.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
PREFIX = "cachetools/cachetools."


def fenced(code: str, before: str = "Here is the implementation:", after: str = "") -> str:
    reply = f"{before}\n\n```python\n{code.strip()}\n```\n"
    return reply + (f"\n{after}\n" if after else "")


GETITEM = '''
def __getitem__(self, key):
    try:
        return self.__data[key]
    except KeyError:
        return self.__missing__(key)
'''
POP = '''
def pop(self, key, default=__marker):
    if key in self:
        value = self[key]
        del self[key]
    elif default is self.__marker:
        raise KeyError(key)
    else:
        value = default
    return value
'''
CLEAR = '''
def clear(self):
    if self.__size is not None:
        self.__size.clear()
    self.__data.clear()
    self.__currsize = 0
'''
DELITEM = '''
def __delitem__(self, key):
    size = self.__size
    if size is None:
        del self.__data[key]
        self.__currsize -= 1
    else:
        itemsize = size.pop(key)
        del self.__data[key]
        self.__currsize -= itemsize
'''
DELITEM_FORGETS_SIZE = '''
def __delitem__(self, key):
    if self.__size is not None:
        self.__size.pop(key)
    del self.__data[key]
'''
FIFO_POPITEM = '''
def popitem(self):
    try:
        key = next(iter(self.__order))
    except StopIteration:
        raise KeyError("%s is empty" % type(self).__name__) from None
    else:
        value = Cache.__getitem__(self, key)
        del self[key]
        return (key, value)
'''
FIFO_POPITEM_WRONG_API = '''
def popitem(self):
    # the order dict holds the keys in insertion order
    return self.__order.popitem(last=False)
'''
LRU_POPITEM = FIFO_POPITEM
LRU_POPITEM_HALLUCINATED = '''
def popitem(self):
    key = self.least_recently_used()
    return (key, self.pop(key))
'''
LRU_GETITEM = '''
def __getitem__(self, key, cache_getitem=Cache.__getitem__):
    value = cache_getitem(self, key)
    try:
        self.__order.move_to_end(key)
    except KeyError:
        pass
    return value
'''
LRU_GETITEM_WRONG_ARGUMENT = '''
def __getitem__(self, key, cache_getitem=Cache.__getitem__):
    value = cache_getitem(self, key)
    if key in self.__order:
        self.__order.move_to_end(key, first=False)
    return value
'''
RR_POPITEM = '''
def popitem(self):
    keys = self.__keys
    if not keys:
        raise KeyError("%s is empty" % type(self).__name__) from None
    key = self.__choice(keys)
    value = Cache.__getitem__(self, key)
    del self[key]
    return (key, value)
'''
RR_POPITEM_SYNTAX_SLIP = '''
def popitem(self):
    keys = self.__keys
    if not keys
        raise KeyError("%s is empty" % type(self).__name__)
    key = self.__choice(keys)
    return (key, self.pop(key))
'''
FIFO_CACHE = '''
def fifo_cache(maxsize=128, typed=False):
    """Memoize up to `maxsize` results, evicting the first inserted."""
    if maxsize is None:
        return _cache({}, None, typed)
    elif callable(maxsize):
        return _cache(FIFOCache(128), 128, typed)(maxsize)
    else:
        return _cache(FIFOCache(maxsize), maxsize, typed)
'''
FIFO_CACHE_CUT_OFF = (
    "To write `fifo_cache` we should follow the pattern of the other decorators in "
    "`cachetools.func`: they all delegate to a private helper that wraps the function with a "
    "lock and keeps hit/miss statistics. The helper takes the cache, the maxsize to report in "
    "`cache_info()`, and whether arguments of different types are cached separately. "
    "Let me first think about the special cases: `maxsize=None` means an unbounded cache, "
    "and when the decorator is applied without parentheses the first argument is the "
    "function itself, so\n\n```python\ndef fifo_cache(maxsize=128, typed=False):\n"
    "    if maxsize is None:\n        return _cache({}, None, typed)\n    elif callable(maxsize):\n"
    "        return _cache(FIFOCache(128), 128, typed)(maxs"
)
POP_NEVER_RAISES = '''
def pop(self, key, default=None):
    if key in self:
        value = self[key]
        del self[key]
        return value
    return default
'''
LFU_POPITEM = '''
def popitem(self):
    root = self.__root
    curr = root.next
    if curr is root:
        raise KeyError("%s is empty" % type(self).__name__) from None
    key = next(iter(curr.keys))
    value = Cache.__getitem__(self, key)
    del self[key]
    return (key, value)
'''
LFU_PROSE = ("To pop the least frequently used item you need the frequency bookkeeping of "
             "`LFUCache`. Without seeing how the class stores the use counts I cannot write a "
             "correct `popitem`; please share the rest of the class.")

# task -> (reply without knowledge, reply with retrieval); a reply is (text, finish_reason)
REPLIES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "Cache.__getitem__": ((fenced(GETITEM), "stop"), (fenced(GETITEM), "stop")),
    "Cache.pop": ((fenced(POP_NEVER_RAISES, after="Like dict.pop, it returns the default for a missing key."),
                   "stop"),
                  (fenced(POP, after="`__marker` tells a missing default apart from None."), "stop")),
    "Cache.clear": ((fenced(CLEAR, before="Sure! The method resets the size bookkeeping too:"), "stop"),
                    (fenced(CLEAR), "stop")),
    "Cache.__delitem__": ((fenced(DELITEM), "stop"),
                          (fenced(DELITEM_FORGETS_SIZE, before="A shorter version:"), "stop")),
    "FIFOCache.popitem": ((fenced(FIFO_POPITEM_WRONG_API), "stop"), (fenced(FIFO_POPITEM), "stop")),
    "LRUCache.popitem": ((fenced(LRU_POPITEM_HALLUCINATED), "stop"), (fenced(LRU_POPITEM), "stop")),
    "LRUCache.__getitem__": ((fenced(LRU_GETITEM_WRONG_ARGUMENT), "stop"),
                             (fenced(LRU_GETITEM), "stop")),
    "RRCache.popitem": ((fenced(RR_POPITEM_SYNTAX_SLIP), "stop"), (fenced(RR_POPITEM), "stop")),
    "func.fifo_cache": ((FIFO_CACHE_CUT_OFF, "length"), (fenced(FIFO_CACHE), "stop")),
    "LFUCache.popitem": ((LFU_PROSE, "stop"), (fenced(LFU_POPITEM), "stop")),
}


def main() -> None:
    for index, method in enumerate(("none", "rag-bm25")):
        path = HERE / f"replies-{method}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for name, replies in REPLIES.items():
                text, finish_reason = replies[index]
                row = {"task_id": PREFIX + name, "sample_idx": 0, "completion": text,
                       "finish_reason": finish_reason}
                handle.write(json.dumps(row) + "\n")
        print(f"wrote {len(REPLIES)} replies to {path}")


if __name__ == "__main__":
    main()
