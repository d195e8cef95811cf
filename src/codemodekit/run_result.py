"""What ``CodeMode.run`` returns: the outcome of one run, with its timings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codemodekit.errors import Diagnostic
from codemodekit.sandbox.base import LogEntry


@dataclass(frozen=True, slots=True)
class RunResult:
    ok: bool
    execution_id: str
    value: Any = None
    logs: tuple[LogEntry, ...] = ()
    diagnostic: Diagnostic | None = None
    tool_calls: int = 0
    duration_ms: float = 0.0
    catalog_revision: str = ""
    compile_ms: float = 0.0
    """Time spent compiling TypeScript to JavaScript."""
    compute_ms: float = 0.0
    """CPU time JavaScript actively ran (what ``compute_time_ms`` bounds)."""
    tool_ms: float = 0.0
    """Tool-call time, summed over the run's calls (concurrent calls each count)."""
    queue_ms: float = 0.0
    """Time the run waited for a sandbox worker (admission control)."""
    warnings: tuple[str, ...] = ()
    """Short hints about likely mistakes that did not fail the run (or that explain a
    failure): a forgotten ``await``, no ``return`` in code that called tools."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.ok,
            "execution_id": self.execution_id,
            "value": self.value,
            "logs": [entry.to_json() for entry in self.logs],
            "tool_calls": self.tool_calls,
            "catalog_revision": self.catalog_revision,
            "warnings": list(self.warnings),
            "timings": {
                "duration_ms": round(self.duration_ms, 3),
                "compile_ms": round(self.compile_ms, 3),
                "compute_ms": round(self.compute_ms, 3),
                "tool_ms": round(self.tool_ms, 3),
                "queue_ms": round(self.queue_ms, 3),
            },
        }
        if self.diagnostic is not None:
            out["diagnostic"] = self.diagnostic.to_json()
        return out
