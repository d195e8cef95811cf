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

import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

MAX_NESTING = 100
"""Deepest nesting of arrays/objects accepted in tool arguments, results, returned values
and tool schemas (a scalar at the top level is depth 0, ``[1]`` is depth 1)."""

NESTING_HINT = f"nests deeper than {MAX_NESTING} levels of arrays/objects (the bound on tool data)"


_SCALARS = frozenset({str, int, float, bool, type(None)})


def depth_exceeds(value: Any, bound: int = MAX_NESTING) -> bool:
    """True when ``value`` nests arrays/objects more than ``bound`` levels deep."""
    # Level by level: one pass per depth, exact type checks first (the ABC checks of
    # ``isinstance(x, Mapping)`` dominated a 10,000-tool catalog build).
    kind = type(value)
    if kind in _SCALARS:
        return False
    level = [value] if kind is dict or kind is list or _container(value) else []
    depth = 0
    while level:
        depth += 1
        if depth > bound:
            return True
        below: list[Any] = []
        for node in level:
            for child in node.values() if type(node) is dict or _is_mapping(node) else node:
                kind = type(child)
                if kind is dict or kind is list or kind is tuple:
                    below.append(child)
                elif kind in _SCALARS:
                    continue
                elif _container(child):
                    below.append(child)
        level = below
    return False


_STRING = re.compile(r'"(?:[^"\\]|\\[\s\S])*+(?:"|\\?\Z)')
"""A JSON string; one left open runs to the end of the text (matched once, possessively:
else every later quote of a hostile text starts a scan to the end, quadratic in all)."""
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def text_depth_exceeds(text: str, bound: int = MAX_NESTING) -> bool:
    """``depth_exceeds`` for the value a JSON text encodes, checked before a parser recurses
    through it: linear in any text (for text that is not JSON the answer is only quick)."""
    # No more opening brackets than the bound: cannot nest deeper (most schemas stop here).
    if text.count("[") + text.count("{") <= bound:
        return False
    skeleton = "".join(ch for ch in _STRING.sub("", text) if ch in _STEP)
    return max(accumulate(_STEP[ch] for ch in skeleton), default=0) > bound


def _is_mapping(node: Any) -> bool:
    return type(node) is dict or isinstance(node, Mapping)


def _container(node: Any) -> bool:
    return isinstance(node, Mapping | list | tuple)


__all__ = ["MAX_NESTING", "NESTING_HINT", "depth_exceeds", "text_depth_exceeds"]
