"""Read-only JSON values of the catalog: ``FrozenJSON`` (kept as text, decoded on first use
into mapping proxies and tuples), ``freeze`` and ``thaw``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from codemodekit.nesting import text_depth_exceeds
from codemodekit.schema.normalize import compact_json

EMPTY: Mapping[str, Any] = MappingProxyType({})


def freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        if not value:
            return EMPTY  # shared: most tools have no sideband at all
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, JSON-ready copy of a frozen schema or annotation mapping."""
    if isinstance(value, FrozenJSON):
        return value.plain()
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


def json_or_empty(value: Any) -> str:
    """JSON text of a mapping as declared; ``{}`` when it is not JSON data (quarantined)
    or nests deeper than the bound."""
    if not isinstance(value, Mapping):
        return "{}"
    try:
        # The C encoder stops at the recursion limit (RecursionError), never crashes.
        text = compact_json(value if type(value) is dict else thaw(value))
    except (TypeError, ValueError, RecursionError):
        return "{}"
    return "{}" if text_depth_exceeds(text) else text


def _tuple(items: list[Any]) -> tuple[Any, ...]:
    return tuple([_tuple(v) if type(v) is list else v for v in items])


def _freeze_member(obj: dict[str, Any]) -> Mapping[str, Any]:
    for key, value in obj.items():
        if type(value) is list:
            obj[key] = _tuple(value)
    return MappingProxyType(obj)


class FrozenJSON(Mapping[str, Any]):
    """A read-only JSON object kept as its text and decoded on first use.

    A catalog of 10,000 tools then holds three strings per tool instead of ~150 container
    objects, which keeps the build (and every later garbage collection) cheap. Decoded
    values are mapping proxies and tuples, so nothing reachable from it can be mutated.
    """

    __slots__ = ("_text", "_value")

    def __init__(self, text: str) -> None:
        self._text = text
        self._value: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """Compact JSON, keys in declared order."""
        return self._text

    def _data(self) -> Mapping[str, Any]:
        value = self._value
        if value is None:  # a benign race: two threads decode the same text
            value = self._value = json.loads(self._text, object_hook=_freeze_member)
        return value

    def plain(self) -> dict[str, Any]:
        """A fresh, mutable plain-JSON copy."""
        copy: dict[str, Any] = json.loads(self._text)
        return copy

    def __getitem__(self, key: str) -> Any:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __contains__(self, key: object) -> bool:
        return key in self._data()

    def __repr__(self) -> str:
        return f"FrozenJSON({self._text if len(self._text) <= 200 else self._text[:199] + '…'})"
