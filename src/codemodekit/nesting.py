"""The one nesting bound on tool data: ``MAX_NESTING`` levels of arrays and objects.

Python's JSON codec, pydantic, jsonschema and the ``mcp`` client each give up at a
different depth (some hundreds of levels), and each fails differently: a RecursionError,
a reply the client cannot parse, an "Internal server error". So every boundary checks the
same bound first and fails with its own stable code and a message naming the bound:

- the bridge: arguments (``TOOL_INPUT_INVALID``) and results (``TOOL_RESULT_INVALID``);
- a run's returned value (``RESULT_NOT_SERIALIZABLE``), in-process and through ``serve``;
- tool schemas from a source: a tool nested deeper is set aside, never its source.

``depth_exceeds`` walks iteratively, so a hostile value nested far deeper than Python's
recursion limit is measured safely, and stops as soon as the bound is passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_NESTING = 100
"""Deepest nesting of arrays/objects accepted in tool arguments, results, returned values
and tool schemas (a scalar at the top level is depth 0, ``[1]`` is depth 1)."""

NESTING_HINT = f"nests deeper than {MAX_NESTING} levels of arrays/objects (the bound on tool data)"


def depth_exceeds(value: Any, bound: int = MAX_NESTING) -> bool:
    """True when ``value`` nests arrays/objects more than ``bound`` levels deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        if depth > bound:
            return True
        stack.extend(
            (child, depth) for child in children if isinstance(child, Mapping | list | tuple)
        )
    return False


__all__ = ["MAX_NESTING", "NESTING_HINT", "depth_exceeds"]
