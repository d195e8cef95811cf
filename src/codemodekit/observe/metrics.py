"""Prometheus metrics for a ``CodeMode`` (optional: ``pip install 'codemodekit[metrics]'``).

``CodeModeMetrics(code_mode)`` is a ``RunObserver`` that counts runs and tool calls into its
own ``CollectorRegistry`` (not the process-global one, so two instances never collide) and
reads the engine's state (``CodeMode.runtime_stats()``), source health and the catalog at
scrape time. ``render()`` gives the text exposition; ``codemode serve --metrics`` serves it
at ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from codemodekit.observe import BaseObserver, RunStart, ToolCallEvent, run_outcome

try:
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.exposition import CONTENT_TYPE_LATEST
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - exercised where the extra is missing
    raise ImportError("metrics need prometheus-client: pip install 'codemodekit[metrics]'") from exc

if TYPE_CHECKING:
    from codemodekit.run import CodeMode
    from codemodekit.run_result import RunResult

DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
CONTENT_TYPE = CONTENT_TYPE_LATEST
HEALTH_STATES = ("ok", "connecting", "degraded", "unavailable", "closed")


class _StateCollector(Collector):
    """Gauges read when scraped: engine, sources, catalog, serving state."""

    def __init__(self, code_mode: CodeMode, draining: Callable[[], bool]) -> None:
        self._code_mode = code_mode
        self._draining = draining

    def collect(self) -> Iterator[Any]:
        stats = self._code_mode.runtime_stats()
        gauges = (
            ("codemode_workers", "Sandbox worker processes alive", stats.workers),
            ("codemode_workers_busy", "Sandbox workers hosting a run", stats.busy_workers),
            ("codemode_runs_in_flight", "Runs admitted and not finished", stats.runs_in_flight),
            ("codemode_runs_queued", "Runs waiting for a sandbox worker", stats.runs_queued),
        )
        for name, doc, value in gauges:
            family = GaugeMetricFamily(name, doc, labels=["mode"])
            family.add_metric([stats.mode], value)
            yield family
        restarts = CounterMetricFamily(
            "codemode_worker_restarts", "Sandbox workers replaced since start", labels=["mode"]
        )
        restarts.add_metric([stats.mode], stats.worker_restarts)
        yield restarts
        rejected = CounterMetricFamily(
            "codemode_runs_rejected", "Runs refused with SERVER_BUSY since start", labels=["mode"]
        )
        rejected.add_metric([stats.mode], stats.runs_rejected)
        yield rejected
        health = GaugeMetricFamily(
            "codemode_source_health",
            "1 for the state each source is in, 0 for the others",
            labels=["source", "kind", "state"],
        )
        tools = GaugeMetricFamily(
            "codemode_source_tools", "Tools a source offers", labels=["source"]
        )
        for source in self._code_mode.health:
            status = str(source.status)
            for state in HEALTH_STATES:
                health.add_metric([source.source, source.kind, state], 1 if status == state else 0)
            tools.add_metric([source.source], source.tools)
        yield health
        yield tools
        catalog = GaugeMetricFamily(
            "codemode_catalog_tools", "Callable tools in the active catalog", labels=[]
        )
        catalog.add_metric([], len(self._code_mode.catalog.available_tools))
        yield catalog
        draining = GaugeMetricFamily(
            "codemode_draining", "1 while the server drains before stopping", labels=[]
        )
        draining.add_metric([], 1 if self._draining() else 0)
        yield draining


class CodeModeMetrics(BaseObserver):
    """Counts runs, tool calls and policy decisions; exposes them with the engine's state."""

    def __init__(
        self,
        code_mode: CodeMode,
        *,
        registry: CollectorRegistry | None = None,
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.runs = Counter("codemode_runs", "Runs by outcome code", ["outcome"], registry=r)
        self.run_seconds = Histogram(
            "codemode_run_duration_seconds",
            "Run wall time",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.compute_seconds = Histogram(
            "codemode_run_compute_seconds",
            "CPU time JavaScript ran per run",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.compile_seconds = Histogram(
            "codemode_run_compile_seconds",
            "TypeScript compile time per run",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_seconds = Histogram(
            "codemode_run_queue_wait_seconds",
            "Time a run waited for a sandbox worker",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.tool_calls = Counter(
            "codemode_tool_calls",
            "Tool calls by source, tool and outcome code",
            ["source", "tool", "outcome"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "codemode_tool_call_duration_seconds",
            "Tool call latency (queueing included)",
            ["source", "tool"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.tool_queue_seconds = Histogram(
            "codemode_tool_call_queue_wait_seconds",
            "Time a tool call waited for a max_concurrent_tool_calls slot",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.policy = Counter(
            "codemode_policy_decisions",
            "Policy decisions by decision and the rule that made it",
            ["decision", "rule"],
            registry=r,
        )
        r.register(_StateCollector(code_mode, draining))

    def on_tool_call(self, call: ToolCallEvent) -> None:
        source, tool = call.labels
        self.tool_calls.labels(source, tool, call.outcome).inc()
        self.tool_seconds.labels(source, tool).observe(call.duration_ms / 1000)
        if call.decision is not None:
            self.tool_queue_seconds.observe(call.queue_ms / 1000)
            self.policy.labels(call.decision, call.rule or "").inc()

    def on_run_end(self, run: RunStart, result: RunResult | None) -> None:
        self.runs.labels(run_outcome(result)).inc()
        if result is None:
            return
        self.run_seconds.observe(result.duration_ms / 1000)
        self.compute_seconds.observe(result.compute_ms / 1000)
        self.compile_seconds.observe(result.compile_ms / 1000)
        self.queue_seconds.observe(result.queue_ms / 1000)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)


__all__ = ["CONTENT_TYPE", "DURATION_BUCKETS", "CodeModeMetrics"]
