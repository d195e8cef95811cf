"""Observing runs: one small hook that metrics, tracing and the audit trail all use.

``CodeMode(observers=[...])`` (or ``CodeMode.add_observer``) registers ``RunObserver``s. A
run tells them when it starts and ends; its bridge tells them when each tool call starts
and ends, with the facts an operator needs (outcome code, policy decision and rule, byte
counts, waits) and never anything they could leak by accident: the raw arguments ride
along for observers that hash them, and no observer shipped here exports them.

With no observer registered the run and bridge take their original path (one ``is None``
check each), so observability costs nothing when it is off. An observer that raises is
logged and otherwise ignored: observing never fails a run or a tool call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from codemodekit.run_result import RunResult

log = logging.getLogger("codemodekit.observe")

OUTCOME_OK = "ok"
"""Outcome of a run or tool call that succeeded; failures carry their ``ErrorCode``."""
UNLISTED = "(unlisted)"
"""The metric labels of a call that named no tool of the catalog (``ToolCallEvent.labels``)."""


@dataclass(slots=True)
class RunStart:
    """A run that has been accepted (before compiling)."""

    execution_id: str
    catalog_revision: str
    started_at: float
    """Wall-clock start (``time.time()``)."""
    code: str
    """The submitted source, for observers that hash it; never export it as is."""
    caller: str | None = None
    """Who asked, when the transport knows (an OAuth client id, for instance)."""


@dataclass(slots=True)
class ToolCallEvent:
    """One ``tools.<source>.<tool>(…)`` call, filled in as it goes through the bridge."""

    execution_id: str
    call_id: int
    source: str
    tool: str
    arguments: Any
    """As the sandbox sent them (host-side only: hash them, never export them)."""
    started_at: float
    caller: str | None = None
    outcome: str = OUTCOME_OK
    """``ok``, or the ``ErrorCode`` value the call failed with (``CANCELLED`` when the run
    stopped while it was in flight)."""
    decision: str | None = None
    """``allow`` / ``deny``; ``None`` when the call failed before the policy was asked."""
    rule: str | None = None
    """Which policy rule decided (``PolicyDecision.rule``), when the policy says."""
    request_bytes: int = 0
    response_bytes: int = 0
    queue_ms: float = 0.0
    """Time waiting for a ``max_concurrent_tool_calls`` slot."""
    duration_ms: float = 0.0
    """From the sandbox's request to the answer (or failure), queueing included."""
    correlation_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Scratch space for observers (a tracing span, for instance)."""
    listed: bool = False
    """The call named a tool of the run's catalog: ``source`` and ``tool`` are the
    catalog's then, else only what the model wrote (any text, as many as it likes)."""

    @property
    def labels(self) -> tuple[str, str]:
        """Source and tool for a metric label or a span name, which must come from a
        bounded set: the catalog's names, or ``UNLISTED`` for a call that named none (its
        outcome says why)."""
        return (self.source, self.tool) if self.listed else (UNLISTED, UNLISTED)

    @property
    def address(self) -> str:
        from codemodekit.catalog.catalog import tool_address

        return tool_address(self.source, self.tool)


@runtime_checkable
class RunObserver(Protocol):
    """Told about every run and tool call of a ``CodeMode``. Methods must not block."""

    def on_run_start(self, run: RunStart) -> None: ...

    def on_tool_call_start(self, call: ToolCallEvent) -> None:
        """Called in the task that performs the call, before it is resolved or queued."""

    def on_tool_call(self, call: ToolCallEvent) -> None:
        """The call finished (any outcome); same task as ``on_tool_call_start``."""

    def on_run_end(self, run: RunStart, result: RunResult | None) -> None:
        """``result`` is ``None`` when the awaiting task was cancelled (no result exists)."""


class BaseObserver:
    """A ``RunObserver`` that ignores everything: subclass and override what you need."""

    def on_run_start(self, run: RunStart) -> None:
        return None

    def on_tool_call_start(self, call: ToolCallEvent) -> None:
        return None

    def on_tool_call(self, call: ToolCallEvent) -> None:
        return None

    def on_run_end(self, run: RunStart, result: RunResult | None) -> None:
        return None


class ObserverSet(BaseObserver):
    """Fans each event out to several observers; one that raises does not stop the rest."""

    def __init__(self, observers: Sequence[RunObserver]) -> None:
        self.observers = tuple(observers)

    def _each(self, method: str, *args: Any) -> None:
        for observer in self.observers:
            try:
                getattr(observer, method)(*args)
            except Exception:
                log.exception("observer %r failed in %s; ignored", observer, method)

    def on_run_start(self, run: RunStart) -> None:
        self._each("on_run_start", run)

    def on_tool_call_start(self, call: ToolCallEvent) -> None:
        self._each("on_tool_call_start", call)

    def on_tool_call(self, call: ToolCallEvent) -> None:
        self._each("on_tool_call", call)

    def on_run_end(self, run: RunStart, result: RunResult | None) -> None:
        # Reverse order, so an observer that opened something first closes it last.
        for observer in reversed(self.observers):
            try:
                observer.on_run_end(run, result)
            except Exception:
                log.exception("observer %r failed in on_run_end; ignored", observer)


def run_outcome(result: RunResult | None) -> str:
    """``ok`` or the run's ``ErrorCode`` value; ``CANCELLED`` when there is no result."""
    if result is None:
        return "CANCELLED"
    if result.ok or result.diagnostic is None:
        return OUTCOME_OK
    return str(result.diagnostic.code.value)


__all__ = [
    "OUTCOME_OK",
    "BaseObserver",
    "ObserverSet",
    "RunObserver",
    "RunStart",
    "ToolCallEvent",
    "run_outcome",
]
