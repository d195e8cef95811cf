"""Operating figures: observer overhead in-process, and HTTP throughput with replicas.

    python benchmarks/bench_operations.py [--rounds 7] [--runs 60] [--http-runs 150]
                                          [--concurrency 6] [--skip-http]

0. The hook's own cost: one tool call through the bridge alone, per configuration.
1. Observer overhead. One CodeMode, a mixed workload (a quick run, a run making 5 tool
   calls, a CPU-bound run), run under each configuration in interleaved rounds: no observer
   (the path taken when observability is off), a do-nothing observer (the hook's own cost),
   metrics, tracing (SDK provider, batch processor, a dropping exporter), audit (to a file),
   and all three. Prints each configuration's p50 per workload kind and its ratio to "off".
2. Throughput over HTTP: the same mixed workload through the `mcp` client, ``--concurrency``
   clients at once, against one `codemode serve --stateless` replica directly and against
   three behind HAProxy (skipped when haproxy is not installed). Prints runs/s, p50 and p99.

Nothing here is asserted; figures depend on the machine (note its core count).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemodekit import (
    AuditSink,
    BaseObserver,
    CodeMode,
    CodeModeMetrics,
    Limits,
    TracingObserver,
    allow_all_tool_calls,
    define_tool,
    local,
)

QUICK = "return 1 + 1;"
TOOLS = (
    "let n = 0;\nfor (let i = 0; i < 5; i++) {\n"
    "  const r = await tools.app.echo({ text: 'x' + i });\n  n += r.structuredContent.text.length;\n}\n"
    "return n;"
)
CPU = "let s = 0;\nfor (let i = 0; i < 200000; i++) { s = (s + i * 7) % 1000003; }\nreturn s;"
WORKLOAD = (("quick", QUICK), ("tools", TOOLS), ("cpu", CPU))

ECHO = define_tool(
    description="Echo",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    execute=lambda args: {"text": args.get("text", "")},
)


def _tracer_provider() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    return provider


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def observer_overhead(rounds: int, runs: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="codemode-bench-"))
    provider = _tracer_provider()
    configs: dict[str, Callable[[CodeMode], list[Any]]] = {
        "off (no observer)": lambda cm: [],
        "no-op observer": lambda cm: [BaseObserver()],
        "metrics": lambda cm: [CodeModeMetrics(cm)],
        "tracing": lambda cm: [TracingObserver(provider)],
        "audit (file)": lambda cm: [AuditSink(directory / "audit.jsonl")],
        "metrics+tracing+audit": lambda cm: [
            CodeModeMetrics(cm),
            TracingObserver(provider),
            AuditSink(directory / "audit-all.jsonl"),
        ],
    }
    samples: dict[str, dict[str, list[float]]] = {c: {k: [] for k, _ in WORKLOAD} for c in configs}
    modes = {}
    for name, make in configs.items():
        cm = CodeMode(
            sources=[local("app", {"echo": ECHO})],
            policy=allow_all_tool_calls(),
            limits=Limits(compute_time_ms=20000),
        )
        for observer in make(cm):
            cm.add_observer(observer)
        modes[name] = cm
    for cm in modes.values():
        await cm.start()
    try:
        for cm in modes.values():  # warm-up
            for _, code in WORKLOAD:
                assert (await cm.run(code)).ok
        for _ in range(rounds):
            for name, cm in modes.items():  # interleaved so drift hits every config alike
                for kind, code in WORKLOAD:
                    for _ in range(max(1, runs // rounds)):
                        started = time.perf_counter()
                        result = await cm.run(code)
                        samples[name][kind].append((time.perf_counter() - started) * 1000)
                        assert result.ok, result.diagnostic
    finally:
        for cm in modes.values():
            await cm.aclose()
        provider.shutdown()
    print(f"1. observer overhead (p50 ms per run; ratio to off) — {os.cpu_count()} cores")
    base = {k: statistics.median(samples["off (no observer)"][k]) for k, _ in WORKLOAD}
    print(f"  {'configuration':<24}" + "".join(f"{k:>22}" for k, _ in WORKLOAD))
    for name in configs:
        cells = []
        for kind, _ in WORKLOAD:
            p50 = statistics.median(samples[name][kind])
            cells.append(f"{p50:>12.3f} ({p50 / base[kind]:>5.3f})")
        print(f"  {name:<24}" + "".join(f"{c:>22}" for c in cells))


async def bridge_overhead(calls: int) -> None:
    """Per tool call through the bridge alone (no sandbox, no processes): the hook's cost."""
    from codemodekit.bridge.bridge import ToolBridge
    from codemodekit.observe import ObserverSet

    directory = Path(tempfile.mkdtemp(prefix="codemode-bench-bridge-"))
    provider = _tracer_provider()
    cm = CodeMode(sources=[local("app", {"echo": ECHO})], policy=allow_all_tool_calls())
    configs: dict[str, list[Any]] = {
        "off (no observer)": [],
        "no-op observer": [BaseObserver()],
        "metrics": [CodeModeMetrics(cm)],
        "tracing": [TracingObserver(provider)],
        "audit (file)": [AuditSink(directory / "audit.jsonl")],
        "metrics+tracing+audit": [
            CodeModeMetrics(cm),
            TracingObserver(provider),
            AuditSink(directory / "audit-all.jsonl"),
        ],
    }
    samples: dict[str, list[float]] = {name: [] for name in configs}
    limits = Limits(max_tool_calls=10**9, total_bridge_bytes=10**12)
    async with cm:
        bridges = {
            name: ToolBridge(
                catalog=lambda: cm.catalog,
                providers=cm.providers,
                policy=cm.policy,
                limits=limits,
                execution_id="bench",
                observer=ObserverSet(observers) if observers else None,
            )
            for name, observers in configs.items()
        }
        for bridge in bridges.values():
            for _ in range(50):
                await bridge.call_tool("app", "echo", {"text": "warm"})
        for _ in range(10):  # interleaved rounds
            for name, bridge in bridges.items():
                for _ in range(calls // 10):
                    started = time.perf_counter()
                    await bridge.call_tool("app", "echo", {"text": "hello"})
                    samples[name].append((time.perf_counter() - started) * 1_000_000)
    provider.shutdown()
    base = statistics.median(samples["off (no observer)"])
    print(f"0. one tool call through the bridge (p50 µs; ratio to off), {calls} calls each")
    for name in configs:
        p50 = statistics.median(samples[name])
        print(f"  {name:<24} {p50:>10.1f} µs ({p50 / base:>5.3f})   +{p50 - base:>6.1f} µs")


async def _drive(url: str, total: int, concurrency: int) -> tuple[float, list[float]]:
    from tests.server.test_serve import _authorized

    latencies: list[float] = []
    queue: asyncio.Queue[str] = asyncio.Queue()
    for index in range(total):
        queue.put_nowait(WORKLOAD[index % len(WORKLOAD)][1])

    async def worker() -> None:
        async with _authorized(url) as client:
            await client.list_tools()
            while not queue.empty():
                code = queue.get_nowait()
                started = time.perf_counter()
                result = await client.call_tool("run_typescript", {"code": code})
                latencies.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - started), latencies


async def http_throughput(total: int, concurrency: int) -> None:
    from tests.server.cluster import Cluster, haproxy
    from tests.server.test_serve import CONFIG, _start_http

    directory = Path(tempfile.mkdtemp(prefix="codemode-bench-http-"))
    (directory / "servetools.py").write_text(
        "from codemodekit import define_tool\n__all__ = ['echo']\n"
        "echo = define_tool(description='Echo', input_schema={'type': 'object', "
        "'properties': {'text': {'type': 'string'}}}, execute=lambda a: {'text': a.get('text', '')})\n"
    )
    config = directory / "codemode.toml"
    config.write_text(CONFIG)
    print(f"2. HTTP throughput, mixed workload, {concurrency} clients, {total} runs")
    single = _start_http(config, "--stateless")
    try:
        await _drive(single.url, 3 * concurrency, concurrency)  # warm-up
        rate, latencies = await _drive(single.url, total, concurrency)
        _report("one replica (direct)", rate, latencies)
    finally:
        single.stop()
    if haproxy() is None:
        print("  three replicas behind HAProxy: skipped (haproxy is not installed)")
        return
    cluster = Cluster(config, 3)
    try:
        cluster.start()
        await _drive(cluster.url, 3 * concurrency, concurrency)
        rate, latencies = await _drive(cluster.url, total, concurrency)
        _report("three replicas behind HAProxy", rate, latencies)
    finally:
        cluster.stop()


def _report(label: str, rate: float, latencies: list[float]) -> None:
    print(
        f"  {label:<32} {rate:>8.1f} runs/s   p50 {statistics.median(latencies):>8.2f} ms"
        f"   p99 {_percentile(latencies, 0.99):>8.2f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=70, help="runs per workload kind and config")
    parser.add_argument("--http-runs", type=int, default=150)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--bridge-calls", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(bridge_overhead(args.bridge_calls))
    asyncio.run(observer_overhead(args.rounds, args.runs))
    if not args.skip_http:
        asyncio.run(http_throughput(args.http_runs, args.concurrency))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
