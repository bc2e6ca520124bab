"""Argument types the bench scripts share: a value a script cannot use is argparse's usage
error (the option, what it takes, exit 2), never a traceback or a run that measures nothing.

    parser.add_argument("--repeat", type=count(1), default=3)
    parser.add_argument("--workers", type=counts(1), default="1,2")   # "1,2" -> [1, 2]
    parser.add_argument("--timeout", type=seconds, default=120.0)
    parser.add_argument("--harnesses", type=names(HARNESSES), default="a,b")  # -> ["a", "b"]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def count(minimum: int = 1) -> Callable[[str], int]:
    """A whole number of at least `minimum`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"takes a whole number of {minimum} or more, not {text!r}")
        return value
    return parse


def counts(minimum: int = 1) -> Callable[[str], list[int]]:
    """A comma-separated list of whole numbers of at least `minimum`, each kept once, in order."""
    one = count(minimum)

    def parse(text: str) -> list[int]:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"takes a comma-separated list of whole numbers, not {text!r}")
        try:
            return list(dict.fromkeys(one(part) for part in parts))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"takes a comma-separated list of whole numbers of {minimum} or more, "
                                             f"not {text!r}") from None
    return parse


def names(known: Sequence[str]) -> Callable[[str], list[str]]:
    """A comma-separated list of names from `known`, each kept once, in order."""
    def parse(text: str) -> list[str]:
        given = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
        unknown = [name for name in given if name not in known]
        if unknown or not given:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown) or '(none given)'}; known: "
                                             f"{', '.join(known)}")
        return given
    return parse


def seconds(text: str) -> float:
    """A positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"takes a positive number of seconds, not {text!r}")
    return value
