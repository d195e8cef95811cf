"""What one slice of a run's engine hands to the host, and the host-side decoding of it.

Model-controlled data stays JSON text until it reaches the host (a worker process never
parses it); the host decodes it once, here, with its own bounds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from codemodekit.errors import Diagnostic, ErrorCode, well_formed
from codemodekit.nesting import NESTING_HINT
from codemodekit.sandbox.base import LogEntry


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: int
    source: str
    tool: str
    arguments: Any
    problem: str | None = None
    """Why the host could not decode the arguments; the call is rejected without dispatch."""


@dataclass(slots=True)
class Step:
    """What one slice produced: new tool calls, or the end of the run.

    Model-controlled data stays JSON text here (``call_lines``, ``value_json``): it is
    decoded by the host-side driver (``decode_calls``, ``decode_value``), so a worker process
    never parses it and the host parses it once, with its own bounds.
    """

    call_lines: list[str] = field(default_factory=list)
    """``[id, source, tool, arguments]`` as JSON text, one per queued call."""
    done: bool = False
    ok: bool = False
    value_json: str | None = None
    """The returned value as JSON text (``None``: ``undefined``), until decoded."""
    value: Any = None
    """The returned value, once ``decode_value`` ran."""
    diagnostic: Diagnostic | None = None
    tool_call_id: int | None = None
    """Set when the run ended on an uncaught host rejection of this call."""
    logs: tuple[LogEntry, ...] = ()
    stream: tuple[LogEntry, ...] = ()
    """Console entries written since the previous step, when the host streams them."""
    compute_ms: float = 0.0
    compile_ms: float = 0.0
    warnings: tuple[str, ...] = ()
    """Hints about likely mistakes (a forgotten ``await``), from the prelude."""


_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(text: str) -> Any:
    try:
        value, end = _scan(text, 0)  # the decoder's own scanner, without its two regexes
    except StopIteration:
        end = -1
    if end != len(text):
        value = json.loads(text)  # not one bare JSON value: the full decoder says why
    if "\\ud" in text or "\\uD" in text:
        value = well_formed(value)
    return value


TOO_DEEP = NESTING_HINT.removeprefix("nests ")  # past the decoder is past the one bound too
_CALL_HEAD = re.compile(r'\[(\d+),("(?:[^"\\]|\\.)*"),("(?:[^"\\]|\\.)*"),')


def decode_calls(lines: list[str]) -> list[ToolCall]:
    """The queued calls of a step, decoded on the host."""
    return [call for line in lines if (call := _tool_call(line)) is not None]


def decode_value(step: Step) -> Step:
    """Decode a successful step's returned value; a value nested deeper than the decoder
    goes fails the run with ``RESULT_NOT_SERIALIZABLE``."""
    if not (step.done and step.ok) or step.value_json is None:
        return step
    try:
        value = loads(step.value_json)
    except (RecursionError, ValueError):
        step.ok = False
        step.diagnostic = Diagnostic(
            ErrorCode.RESULT_NOT_SERIALIZABLE,
            f"the returned value nests {TOO_DEEP}; return a flatter value",
        )
        return step
    step.value_json = None
    step.value = value
    return step


def _tool_call(line: str) -> ToolCall | None:
    """One queued call, ``[id, source, tool, arguments]`` as JSON text."""
    try:
        c = loads(line)
    except RecursionError:
        # Arguments nested deeper than Python's decoder goes: the call fails on its own.
        head = _CALL_HEAD.match(line)
        if head is None:  # pragma: no cover - the prelude always writes this shape
            return None
        # Model-written names, decoded here without the sandbox's own replacement.
        source = well_formed(json.loads(head.group(2)))
        tool = well_formed(json.loads(head.group(3)))
        return ToolCall(int(head.group(1)), source, tool, None, f"the arguments nest {TOO_DEEP}")
    if isinstance(c, list) and len(c) == 4:
        return ToolCall(int(c[0]), str(c[1]), str(c[2]), c[3])
    return None  # pragma: no cover - the prelude always writes this shape
