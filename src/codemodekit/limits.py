"""Execution limits: finite defaults, every one overridable, frozen once built."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Bounds of one run. ``Limits(**overrides)`` rejects unknown names and values <= 0."""

    source_bytes: int = 128 * KIB
    """Largest accepted TypeScript source, in UTF-8 bytes."""
    compute_time_ms: int = 5_000
    """Time JavaScript actively runs; time spent awaiting tools is excluded."""
    wall_time_ms: int = 60_000
    """The whole run, from compile to result."""
    tool_call_time_ms: int = 30_000
    """One tool call, from dispatch to result."""
    memory_bytes: int = 64 * MIB
    """Heap of the sandbox runtime."""
    stack_bytes: int = 1 * MIB
    """Stack of the sandbox runtime."""
    max_tool_calls: int = 32
    """Tool calls one run may make."""
    max_concurrent_tool_calls: int = 8
    """Tool calls in flight at once; further calls queue."""
    tool_result_bytes: int = 2 * MIB
    """Largest single tool result, serialized as JSON."""
    total_bridge_bytes: int = 8 * MIB
    """Arguments and results crossing the bridge in one run, added up."""
    final_result_bytes: int = 256 * KIB
    """Largest value a run may return, serialized as JSON."""
    log_bytes: int = 64 * KIB
    """Console output kept per run."""
    log_entries: int = 100
    """Console entries kept per run (head and tail, with a truncation marker between)."""
    progress_events: int = 100
    """Progress events one run may emit."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Limits.{f.name} must be an integer, got {value!r}")
            if value <= 0:
                raise ValueError(f"Limits.{f.name} must be greater than 0, got {value}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def replace(self, **overrides: Any) -> Limits:
        values = {name: getattr(self, name) for name in self.names()}
        unknown = set(overrides) - set(values)
        if unknown:
            raise TypeError(f"unknown limit(s): {', '.join(sorted(unknown))}")
        values.update(overrides)
        return Limits(**values)

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.names()}


DEFAULT_LIMITS = Limits()
