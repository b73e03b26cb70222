"""Name → object tables: how operators, samplers, estimators and schedules are found by name.

Each extensible family keeps one :class:`Registry`; adding a member is one decorated
definition in its own module. Names are matched case-insensitively with ``_`` read as ``-``,
and an unknown name is refused with the list of known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from boltzlab.errors import ValidationError

__all__ = ["Registry"]

Entry = TypeVar("Entry")


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-")


class Registry(Generic[Entry]):
    """A table of named entries of one kind (``"operator"``, ``"sampler"``, ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str) -> Callable[[Entry], Entry]:
        """Decorator that files the decorated class or function under ``name``."""

        def decorate(entry: Entry) -> Entry:
            self._entries[_normalise(name)] = entry
            return entry

        return decorate

    def add(self, name: str, entry: Entry) -> None:
        """File ``entry`` under ``name`` (the non-decorator form)."""
        self._entries[_normalise(name)] = entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (for tests that register temporary entries)."""
        self._entries.pop(_normalise(name), None)

    def names(self) -> tuple[str, ...]:
        """Registered names, sorted."""
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _normalise(name) in self._entries

    def get(self, name: str) -> Entry:
        """The entry called ``name``; :class:`ValidationError` listing the choices otherwise."""
        if not isinstance(name, str) or _normalise(name) not in self._entries:
            raise ValidationError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self.names())}")
        return self._entries[_normalise(name)]
