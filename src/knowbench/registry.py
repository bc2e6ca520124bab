"""Named, pluggable parts: one `Registry` per concept (backends, methods, engines, sandboxes,
importers), each declared in the package that owns the concept.

A registry maps a name to an entry (a class or a factory function). Register with a decorator
or a call; look up with `get`, which raises a `UserError` naming every choice:

    from knowbench.models import BACKENDS

    @BACKENDS.register("echo")
    def echo(argument: str, options: BackendOptions) -> ModelBackend: ...

    BACKENDS.register("echo2", echo)   # the same, as a call
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, overload

from knowbench.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries of one concept by name, in the order they were registered.

    `concept` names the kind of thing in error messages ("engine", "model backend").
    `label(name, entry)` is how a choice is shown in those messages (default: its name),
    e.g. `oracle:<cell>` for a method that takes a variant.
    """

    def __init__(self, concept: str, label: Callable[[str, T], str] | None = None) -> None:
        self.concept = concept
        self._label = label
        self._entries: dict[str, T] = {}

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...

    @overload
    def register(self, name: str, entry: T) -> T: ...

    def register(self, name: str, entry: T | None = None) -> T | Callable[[T], T]:
        """Add `entry` under `name`; without `entry`, a decorator that adds what it decorates.

        Raises `ValueError` when `name` is taken or not a plain name (no ':' or spaces): two
        parts answering to one name is a bug, not a choice.
        """
        if not name or ":" in name or name != name.strip() or " " in name:
            raise ValueError(f"{self.concept} name {name!r}: use a plain name without ':' or spaces")

        def add(item: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.concept} '{name}' is already registered "
                                 f"(by {_origin(self._entries[name])})")
            self._entries[name] = item
            return item

        return add if entry is None else add(entry)

    def get(self, name: str) -> T:
        """The entry called `name`; a `UserError` listing the choices when there is none."""
        try:
            return self._entries[name]
        except KeyError:
            raise UserError(f"unknown {self.concept} '{name}'; choose one of {', '.join(self.choices())}") \
                from None

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._entries)

    def choices(self) -> list[str]:
        """Names as shown to a user (see `label`)."""
        if self._label is None:
            return self.names()
        return [self._label(name, entry) for name, entry in self._entries.items()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.concept!r}: {', '.join(self._entries)})"


def _origin(entry: object) -> str:
    module = getattr(entry, "__module__", None) or type(entry).__module__
    return f"{module}.{getattr(entry, '__qualname__', type(entry).__qualname__)}"
