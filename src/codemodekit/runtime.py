"""How runs execute: sandbox worker processes (the default) or QuickJS in this process."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, fields
from typing import Any, Literal

MIB = 1024 * 1024
MAY_BE_ZERO = frozenset(
    {"max_runs", "warm_workers", "max_queued_runs", "max_runs_per_caller", "max_queued_per_caller"}
)
"""Settings where 0 is meaningful (a computed default, or no queue at all)."""


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeOptions:
    """The execution engine's settings (`[runtime]` in `codemode.toml`).

    `mode = "process"` runs every run in a sandbox worker process that the server can
    always stop: limits are enforced from outside, compute time is the worker's own CPU
    time, and a native fault ends only the run it hosted. `mode = "inline"` runs QuickJS
    inside this process (faster to start, for one-off scripts and embedding where a runaway
    run may hold a thread until its compute budget runs out, and with none of the worker
    processes' containment). See ADR 0019 and ADR 0028.
    """

    mode: Literal["process", "inline"] = "process"
    """`process` (sandbox worker processes) or `inline` (QuickJS in this process)."""
    max_runs: int = 0
    """Runs in flight at once, one worker process each; 0 means 32 per CPU (runs mostly
    wait on tools, and a worker that waits costs about 3 MiB)."""
    max_queued_runs: int = 256
    """Runs waiting for admission; one more is refused with `SERVER_BUSY`."""
    max_runs_per_caller: int = 0
    """Runs one caller may have in flight; 0 means three quarters of `max_runs` (at least
    1), so a caller that floods always leaves slots for the others. The caller is the
    authenticated client, else the MCP session, else `CodeMode.run(caller=...)`."""
    max_queued_per_caller: int = 0
    """Runs one caller may have waiting; 0 means three quarters of `max_queued_runs` (a
    full queue also gives a newcomer the place of the newest run of the busiest caller)."""
    queue_timeout_ms: int = 10_000
    """Longest wait for admission before `SERVER_BUSY`."""
    memory_budget_bytes: int = 4096 * MIB
    """Heap reserved by the runs in flight, added up (each reserves its `memory_bytes`
    plus a worker's own overhead); runs over it wait in the queue."""
    warm_workers: int = 0
    """Idle workers kept ready, forked ahead of demand (each hosts one run; an idle one
    costs about 3 MiB); 0 means eight per CPU and at least 16."""
    worker_max_runs: int = 1000
    """Ignored (deprecated): every worker process hosts exactly one run and exits."""
    worker_max_rss_bytes: int = 256 * MIB
    """Ignored (deprecated): a worker exits after its one run."""
    unsafe_allow_uncontained: bool = False
    """Start worker processes even when a mandatory containment layer (seccomp,
    no-new-privs) cannot be applied on this machine. Unsafe for untrusted code: a
    compromised engine could then reach the machine. Off: such a machine refuses to run."""

    def __post_init__(self) -> None:
        if self.mode not in ("process", "inline"):
            raise ValueError(
                f"RuntimeOptions.mode must be 'process' or 'inline', got {self.mode!r}"
            )
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "mode":
                continue
            if f.name == "unsafe_allow_uncontained":
                if not isinstance(value, bool):
                    raise TypeError(f"RuntimeOptions.{f.name} must be a boolean, got {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"RuntimeOptions.{f.name} must be an integer, got {value!r}")
            floor = 0 if f.name in MAY_BE_ZERO else 1
            if value < floor:
                raise ValueError(f"RuntimeOptions.{f.name} must be at least {floor}, got {value}")
        for name in DEPRECATED:
            if getattr(self, name) != _DEFAULTS[name]:
                warnings.warn(
                    f"RuntimeOptions.{name} is ignored: every sandbox worker process hosts "
                    "one run and exits (ADR 0028)",
                    DeprecationWarning,
                    stacklevel=3,
                )

    @property
    def run_slots(self) -> int:
        return self.max_runs or 32 * usable_cpus()

    @property
    def caller_run_slots(self) -> int:
        share = self.max_runs_per_caller or max(1, self.run_slots * 3 // 4)
        return min(share, self.run_slots)

    @property
    def caller_queue(self) -> int:
        if self.max_queued_per_caller:
            return min(self.max_queued_per_caller, self.max_queued_runs)
        return max(1, self.max_queued_runs * 3 // 4) if self.max_queued_runs else 0

    @property
    def warm(self) -> int:
        return min(self.warm_workers or max(16, 8 * usable_cpus()), self.run_slots)

    def replace(self, **overrides: Any) -> RuntimeOptions:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(overrides)
        return RuntimeOptions(**values)


DEPRECATED = ("worker_max_runs", "worker_max_rss_bytes")
"""Accepted so existing configurations load; meaningless since workers are single-use."""
_DEFAULTS = {f.name: f.default for f in fields(RuntimeOptions)}

DEFAULT_RUNTIME = RuntimeOptions()
