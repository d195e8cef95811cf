"""Hints that let the model fix a call at once: the real names when it guessed one wrong,
and what a tool expects, in a few words, for a ``TOOL_INPUT_INVALID`` message.

``get_pet({id: 1})`` failing with "Additional properties are not allowed ('id' was
unexpected)" does not say that ``petId`` was meant; naming the declared properties (the
required ones marked) lets the model fix the call without a search round trip (issue 20).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

EXPECTED_CHARS = 480
"""Longest list of expected properties added to a message (the message is bounded too)."""
_ENUM_SHOWN = 4


def _type_of(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return ""
    values = schema.get("enum")
    if isinstance(values, list | tuple) and values:
        shown = " | ".join(repr(v) if isinstance(v, str) else str(v) for v in values[:_ENUM_SHOWN])
        return shown + (" | …" if len(values) > _ENUM_SHOWN else "")
    kind = schema.get("type")
    if isinstance(kind, str):
        if kind == "array" and isinstance(schema.get("items"), Mapping):
            inner = _type_of(schema["items"])
            return f"{inner}[]" if inner and " " not in inner else "array"
        return kind
    if isinstance(kind, list | tuple) and all(isinstance(k, str) for k in kind):
        return " | ".join(kind)
    return ""


def expected_properties(schema: Mapping[str, Any]) -> str:
    """`` Expected properties: `petId` (required, integer), `name` (string).`` or ``""``
    when the input declares no properties."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return ""
    required = schema.get("required")
    needed = set(required) if isinstance(required, list | tuple) else set()
    # Required ones first, then the others, each group in declaration order.
    ordered = [p for p in props if p in needed] + [p for p in props if p not in needed]
    parts: list[str] = []
    used = 0
    for name in ordered:
        kind = _type_of(props[name])
        notes = ", ".join(x for x in ("required" if name in needed else "", kind) if x)
        part = f"`{name}`" + (f" ({notes})" if notes else "")
        if used + len(part) > EXPECTED_CHARS:
            parts.append(f"and {len(ordered) - len(parts)} more")
            break
        parts.append(part)
        used += len(part) + 2
    closed = schema.get("additionalProperties") is False
    tail = "; no others" if closed else ""
    return " Expected properties: " + ", ".join(parts) + tail + "."


MAX_SUGGEST_CHARS = 128
"""Longest unknown name that gets "did you mean" suggestions (MCP caps tool names at 128).
difflib over a large catalog with a megabyte-long name held the event loop for seconds."""


LISTED_NAMES = 20
"""At most this many names are listed when none is close to an unknown one."""


def suggest(
    word: str, candidates: list[str], shown: Callable[[str], str], what: str = "tools"
) -> str:
    """`` Did you mean `tools["deploy-api"]`?``: each candidate as code would write it; when
    none is close, the available ones (at most ``LISTED_NAMES``), so a first guess that
    was far off still learns the real names."""
    close = []
    if len(word) <= MAX_SUGGEST_CHARS:
        close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.6)
    if close:
        return " Did you mean " + " or ".join(f"`{shown(c)}`" for c in close) + "?"
    if not candidates:
        return ""
    listed = sorted(candidates)[:LISTED_NAMES]
    more = len(candidates) - len(listed)
    return (
        f" Available {what}: "
        + ", ".join(f"`{shown(c)}`" for c in listed)
        + (f" (and {more} more)" if more else "")
        + "."
    )
