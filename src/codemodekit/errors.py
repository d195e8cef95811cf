"""Stable error codes, model-visible diagnostics and the exception hierarchy.

Exceptions raised to Python callers::

    CodeModeError                  base of everything this library raises on purpose
    ├── SpecError                  codemode.toml is malformed (file, line, column, key path)
    ├── SecretUnavailable          a ${VAR} that a source needs at connect time is unset
    ├── SourceUnavailable          a provider cannot start, connect or discover (sanitized)
    └── CompileFailure             the compiler rejected the code; carries a Diagnostic

    ToolError                      raised by a tool: its message is model-visible, its
                                   ``cause`` reaches only the host log

Expected failures of a run are never raised: ``CodeMode.run`` returns a ``RunResult`` whose
``diagnostic`` carries one of the ``ErrorCode`` values below. A code's meaning never
changes; new codes may be added in minor releases.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Phase(StrEnum):
    COMPILE = "compile"
    SANDBOX = "sandbox"
    TOOL = "tool"
    HOST = "host"


class ErrorCode(StrEnum):
    # compile
    SOURCE_TOO_LARGE = "SOURCE_TOO_LARGE"
    COMPILE_ERROR = "COMPILE_ERROR"
    UNSUPPORTED_SYNTAX = "UNSUPPORTED_SYNTAX"
    # sandbox
    UNCAUGHT_EXCEPTION = "UNCAUGHT_EXCEPTION"
    COMPUTE_LIMIT = "COMPUTE_LIMIT"
    WALL_LIMIT = "WALL_LIMIT"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    CANCELLED = "CANCELLED"
    RESULT_NOT_SERIALIZABLE = "RESULT_NOT_SERIALIZABLE"
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    SANDBOX_CRASHED = "SANDBOX_CRASHED"
    # tool
    SOURCE_NOT_FOUND = "SOURCE_NOT_FOUND"
    SOURCE_UNAVAILABLE = "SOURCE_UNAVAILABLE"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    TOOL_SCHEMA_UNSUPPORTED = "TOOL_SCHEMA_UNSUPPORTED"
    TOOL_INPUT_INVALID = "TOOL_INPUT_INVALID"
    TOOL_DENIED = "TOOL_DENIED"
    TOOL_ERROR = "TOOL_ERROR"
    TOOL_INTERNAL_ERROR = "TOOL_INTERNAL_ERROR"
    TOOL_TIMEOUT = "TOOL_TIMEOUT"
    TOOL_CALL_LIMIT = "TOOL_CALL_LIMIT"
    TOOL_RESULT_INVALID = "TOOL_RESULT_INVALID"
    TOOL_RESULT_TOO_LARGE = "TOOL_RESULT_TOO_LARGE"
    BRIDGE_LIMIT = "BRIDGE_LIMIT"
    # host
    INTERNAL_ERROR = "INTERNAL_ERROR"
    SERVER_BUSY = "SERVER_BUSY"

    @property
    def phase(self) -> Phase:
        return _PHASES[self]


_PHASES: dict[ErrorCode, Phase] = {
    **dict.fromkeys(
        (ErrorCode.SOURCE_TOO_LARGE, ErrorCode.COMPILE_ERROR, ErrorCode.UNSUPPORTED_SYNTAX),
        Phase.COMPILE,
    ),
    **dict.fromkeys(
        (
            ErrorCode.UNCAUGHT_EXCEPTION,
            ErrorCode.COMPUTE_LIMIT,
            ErrorCode.WALL_LIMIT,
            ErrorCode.MEMORY_LIMIT,
            ErrorCode.CANCELLED,
            ErrorCode.RESULT_NOT_SERIALIZABLE,
            ErrorCode.RESULT_TOO_LARGE,
            ErrorCode.SANDBOX_CRASHED,
        ),
        Phase.SANDBOX,
    ),
    ErrorCode.INTERNAL_ERROR: Phase.HOST,
    ErrorCode.SERVER_BUSY: Phase.HOST,
}
for _code in ErrorCode:
    _PHASES.setdefault(_code, Phase.TOOL)


MAX_NAME_CHARS = 256
"""Longest tool address, source name or other model-chosen name a diagnostic (or any echo
of it: ``serve``'s text and structured content, the audit log) carries."""
MAX_DIAGNOSTIC_MESSAGE_CHARS = 8_192
"""Longest diagnostic message (an uncaught error's text is the model's own choice)."""
MAX_ID_CHARS = 64


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with ``…`` and the full length.

    The one bound on model-chosen text that is echoed back (names, paths, messages)."""
    if len(text) <= limit:
        return text
    note = f"… ({len(text)} characters)"
    return text[: max(limit - len(note), 0)] + note


@dataclass(frozen=True, slots=True)
class Location:
    """1-based line and column in the user's own code."""

    line: int
    column: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A model-visible failure: safe to show, never carries secrets or host internals."""

    code: ErrorCode
    message: str
    location: Location | None = None
    tool: str | None = None
    """The tool's address (``github.search_issues`` / ``tools["deployment-api"].deploy``)."""
    source: str | None = None
    correlation_id: str | None = None
    """Links a sanitized message to the full cause in the host log."""
    details: tuple[tuple[str, Any], ...] = ()
    """Extra bounded facts (``("path", "$.id")``, ``("upstream_code", ...)``)."""

    def __post_init__(self) -> None:
        # Every field is bounded where it is made, so no echo of it can grow past the
        # result bound (a tool named 'x'.repeat(1 << 20) gave a 1 MiB `tool` field).
        # And well-formed: a lone surrogate (a tool's error text, an upstream's JSON
        # `"\ud800"`) cannot be encoded as UTF-8, and a reply that carries one fails to
        # serialize (over stdio, the MCP server's writer died with it).
        for name, limit in _BOUNDS:
            value = getattr(self, name)
            if isinstance(value, str) and (len(value) > limit or _SURROGATE.search(value)):
                object.__setattr__(self, name, clip(well_formed(value), limit))
        details = self.details
        if details and (
            len(details) > MAX_DETAILS
            or any(
                len(str(key)) > MAX_DETAIL_KEY_CHARS
                or _SURROGATE.search(str(key))
                or (
                    isinstance(value, str)
                    and (len(value) > MAX_DETAIL_VALUE_CHARS or _SURROGATE.search(value))
                )
                or not isinstance(value, str | int | float | bool | type(None))
                for key, value in details
            )
        ):
            object.__setattr__(self, "details", bounded_details(dict(details)))

    @property
    def phase(self) -> Phase:
        return self.code.phase

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": str(self.code),
            "phase": str(self.phase),
            "message": self.message,
        }
        if self.location is not None:
            out["location"] = self.location.to_json()
        if self.tool is not None:
            out["tool"] = self.tool
        if self.source is not None:
            out["source"] = self.source
        if self.correlation_id is not None:
            out["correlation_id"] = self.correlation_id
        if self.details:
            out["details"] = dict(self.details)
        return out


MAX_DETAILS = 16
"""Most entries a diagnostic's ``details`` keeps."""
MAX_DETAIL_KEY_CHARS = 64
MAX_DETAIL_VALUE_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(value: Any) -> bool:
    """Whether any string in ``value`` (keys too) holds a lone surrogate."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, list | tuple):
        return any(has_surrogates(v) for v in value)
    if isinstance(value, Mapping):
        return any(has_surrogates(k) or has_surrogates(v) for k, v in value.items())
    return False


def well_formed(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD:
    JSON allows ``"\\ud800"``, UTF-8 does not. Any mapping becomes a dict and any tuple
    a list, as in JSON."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list | tuple):
        return [well_formed(v) for v in value]
    if isinstance(value, Mapping):
        return {well_formed(k): well_formed(v) for k, v in value.items()}
    return value


def _detail_value(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else str(value)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except (TypeError, ValueError, RecursionError):
            value = type(value).__name__
    text = _CONTROL.sub(" ", well_formed(value))
    if len(text) > MAX_DETAIL_VALUE_CHARS:
        text = text[: MAX_DETAIL_VALUE_CHARS - 1] + "…"
    return text


def bounded_details(details: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Model-visible details made safe to cross: at most ``MAX_DETAILS`` string keys, each
    value a JSON scalar (anything else becomes bounded JSON text), control characters out."""
    out: list[tuple[str, Any]] = []
    for key, value in details.items():
        if len(out) >= MAX_DETAILS:
            break
        name = _CONTROL.sub(" ", well_formed(str(key)))[:MAX_DETAIL_KEY_CHARS]
        if name:
            out.append((name, _detail_value(value)))
    return tuple(out)


_BOUNDS = (
    ("message", MAX_DIAGNOSTIC_MESSAGE_CHARS),
    ("tool", MAX_NAME_CHARS),
    ("source", MAX_NAME_CHARS),
    ("correlation_id", MAX_ID_CHARS),
)


def new_correlation_id() -> str:
    return uuid.uuid4().hex[:16]


class CodeModeError(Exception):
    """Base of the exceptions this library raises on purpose."""


class SecretUnavailable(CodeModeError):
    """A ``${VAR}`` needed at connect time is not set. Names the key, never a value."""


class SourceUnavailable(CodeModeError):
    """A source could not start, connect or list its tools. The message is sanitized."""


class CompileFailure(CodeModeError):
    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class ToolError(Exception):
    """Raised by a tool to refuse a call with a message the model may see.

    ``cause`` (or the exception chained with ``raise ... from``) reaches only the host log.
    ``code`` is an optional tool-specific string reported as ``details.upstream_code`` and,
    to code that catches the failure, as ``error.upstreamCode``; the run-level code is
    always ``TOOL_ERROR``. ``details`` are model-visible facts (``{"retry_after": "30"}``),
    bounded by ``bounded_details``: never put secrets there.
    """

    def __init__(
        self,
        message: str,
        *,
        cause: BaseException | str | None = None,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause
        self.code = code
        self.details = bounded_details(details or {})
