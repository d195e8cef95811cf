"""The ``CodeSandbox`` protocol: run compiled JavaScript whose only way out is ``tools.*``.

The sandbox never sees a catalog, a provider or a credential. It hands every tool call to
the ``SandboxHost`` (the bridge) and settles the promise with what comes back. Every
adapter must pass ``tests/conformance/sandbox``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from codemodekit.errors import Diagnostic
from codemodekit.limits import Limits


@dataclass(frozen=True, slots=True)
class CompiledProgram:
    """JavaScript ready for a sandbox, produced by ``CodeCompiler``.

    ``javascript`` is one expression that evaluates to a Promise (the user's code wrapped
    as the body of an async function). Line ``N`` of the user's code is line
    ``N + line_offset`` of ``javascript``; columns are unchanged.
    """

    javascript: str
    line_offset: int
    source: str
    """The user's original TypeScript, for excerpts under diagnostics."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    level: str
    """``log`` | ``info`` | ``warn`` | ``error`` | ``debug``; ``truncated`` for the marker."""
    message: str

    def to_json(self) -> dict[str, str]:
        return {"level": self.level, "message": self.message}


class JsonText(str):
    """A tool result already encoded as compact JSON text by the host (the bridge encodes
    it once to measure and bound it); the sandbox passes the text on as it is."""

    __slots__ = ()


class ToolCallRejected(Exception):
    """Raised by ``SandboxHost.call_tool``: becomes a catchable JS ``Error`` in the sandbox.

    The JS error has ``name = "ToolCallError"``, ``code``, ``tool`` and ``message`` from the
    diagnostic. If the user's code does not catch it, the run's diagnostic is this one
    (with the location of the user's call site when known).
    """

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class SandboxHost(Protocol):
    """The trusted side, as seen by a sandbox."""

    def call_tool(self, source: str, tool: str, arguments: Any) -> Awaitable[Any]:
        """Perform one call. Returns the JSON-ready ``ToolResult`` for the sandbox or raises
        ``ToolCallRejected``. The host applies queueing, policy and every bound; the sandbox
        may start many calls at once."""
        ...


@dataclass(frozen=True, slots=True)
class SandboxOutcome:
    ok: bool
    value: Any = None
    """The returned value after a JSON round trip (``undefined`` → ``None``)."""
    diagnostic: Diagnostic | None = None
    logs: tuple[LogEntry, ...] = ()
    compute_ms: float = 0.0
    compile_ms: float = 0.0
    """Compile time, when the sandbox compiled the TypeScript itself (``run_source``)."""
    queue_ms: float = 0.0
    """Time the run waited for a sandbox worker before its JavaScript could start."""
    warnings: tuple[str, ...] = ()
    """Hints about likely mistakes (an un-awaited tool call), for ``RunResult.warnings``."""
    worker_cpu_ms: float = 0.0
    """CPU time the sandbox worker process spent on this run (compile, JavaScript and its
    own message handling), as it reported it; 0 in-process."""


@dataclass(frozen=True, slots=True)
class RuntimeStats:
    """A snapshot of the execution engine, for health endpoints and metrics."""

    mode: str
    """``process`` (sandbox worker processes) or ``inline`` (QuickJS in this process)."""
    workers: int = 0
    """Worker processes alive (idle or busy)."""
    busy_workers: int = 0
    """Workers hosting a run now."""
    runs_in_flight: int = 0
    """Runs admitted and not finished."""
    runs_queued: int = 0
    """Runs waiting for admission."""
    worker_restarts: int = 0
    """Workers killed (limits, cancellation) or crashed and replaced since start."""
    runs_rejected: int = 0
    """Runs refused with ``SERVER_BUSY`` since start."""
    worker_rss_bytes: int = 0
    """Resident memory of the live workers, added up, as each reported when it started
    (pages shared with the zygote count in each)."""
    containment: tuple[tuple[str, str], ...] = ()
    """Process mode: each containment layer of the worker processes and its state (``on``,
    or ``off (why)``), once the zygote started; empty in inline mode, which has none
    (ADR 0028)."""


class CodeSandbox(Protocol):
    def run(
        self, program: CompiledProgram, host: SandboxHost, limits: Limits
    ) -> Awaitable[SandboxOutcome]:
        """Run one program in a fresh, isolated context and dispose of it.

        Reports ``UNCAUGHT_EXCEPTION``, ``COMPUTE_LIMIT``, ``MEMORY_LIMIT``,
        ``RESULT_NOT_SERIALIZABLE``, ``RESULT_TOO_LARGE`` (and ``COMPILE_ERROR`` for syntax the
        engine rejects) as outcomes. Wall time is enforced by the caller through cancellation:
        on ``CancelledError`` the sandbox stops, cancels its in-flight host calls, disposes
        the context and re-raises.
        """
        ...


@runtime_checkable
class SourceSandbox(Protocol):
    """A sandbox that also compiles: TypeScript crosses into it as source, so compiling
    (model-controlled work) is bounded and isolated like the run itself."""

    def run_source(
        self, source: str, host: SandboxHost, limits: Limits
    ) -> Awaitable[SandboxOutcome]: ...
