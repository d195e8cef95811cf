"""Run observers: the audit trail, Prometheus metrics and OpenTelemetry spans, through CodeMode."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from codemodekit import CodeMode, Limits, define_tool, local
from codemodekit.bridge.policy import rules_policy
from codemodekit.observe import BaseObserver, RunStart, ToolCallEvent
from codemodekit.observe.audit import AuditSink
from codemodekit.observe.metrics import CodeModeMetrics
from codemodekit.spec.model import PolicyRule, PolicySpec

SECRET_ARGUMENT = "s3cr3t-value-that-must-not-appear"

ECHO = define_tool(
    description="Echo",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    execute=lambda args: {"echo": args["text"]},
)
WIPE = define_tool(
    description="Wipe everything",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    execute=lambda args: {"wiped": True},
)


def _policy() -> Any:
    return rules_policy(
        PolicySpec(
            default="deny",
            rules=(
                PolicyRule(tools="app.wipe", decision="deny"),
                PolicyRule(tools="app.*", decision="allow"),
            ),
        )
    )


PROGRAM = f"""
const a = await tools.app.echo({{ text: "{SECRET_ARGUMENT}" }});
const b = await tools.app.echo({{ text: "{SECRET_ARGUMENT}" }});
const c = await tools.app.echo({{ text: "other" }});
let denied = "";
try {{ await tools.app.wipe({{}}); }} catch (e) {{ denied = e.code; }}
let invalid = "";
try {{ await tools.app.echo({{ nope: 1 }}); }} catch (e) {{ invalid = e.code; }}
return [a.structuredContent.echo.length, denied, invalid];
"""


def _code_mode(*observers: Any) -> CodeMode:
    return CodeMode(
        sources=[local("app", {"echo": ECHO, "wipe": WIPE})],
        policy=_policy(),
        limits=Limits(max_tool_calls=10),
        observers=observers,
    )


async def test_audit_file_has_one_record_per_call_and_a_run_record(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = AuditSink(path)
    async with _code_mode(sink) as cm:
        first = await cm.run(PROGRAM)
        second = await cm.run("return 1 +")  # a compile error: a run record, no calls
    sink.close()
    assert first.ok, first.diagnostic
    assert first.value == [len(SECRET_ARGUMENT), "TOOL_DENIED", "TOOL_INPUT_INVALID"]
    text = path.read_text()
    assert SECRET_ARGUMENT not in text
    records = [json.loads(line) for line in text.splitlines()]
    calls = [r for r in records if r["type"] == "tool_call"]
    runs = [r for r in records if r["type"] == "run"]
    assert [r["execution_id"] for r in runs] == [first.execution_id, second.execution_id]
    assert runs[0]["outcome"] == "ok" and runs[0]["tool_calls"] == 5
    assert runs[1]["outcome"] == "COMPILE_ERROR" and runs[1]["tool_calls"] == 0
    assert {c["execution_id"] for c in calls} == {first.execution_id}
    assert [c["call_id"] for c in calls] == [1, 2, 3, 4, 5]
    assert [c["tool"] for c in calls] == ["tools.app.echo"] * 3 + [
        "tools.app.wipe",
        "tools.app.echo",
    ]
    assert [c["outcome"] for c in calls] == ["ok", "ok", "ok", "TOOL_DENIED", "TOOL_INPUT_INVALID"]
    assert [c["decision"] for c in calls] == ["allow", "allow", "allow", "deny", None]
    assert [c["rule"] for c in calls] == ["rules[1]", "rules[1]", "rules[1]", "rules[0]", None]
    # Equal arguments hash equally; different ones differently; nothing of them is kept.
    hashes = [c["arguments_hash"] for c in calls]
    assert hashes[0] == hashes[1] != hashes[2]
    assert all(h.startswith("sha256:") and len(h) == 7 + 64 for h in hashes)
    assert calls[0]["request_bytes"] > len(SECRET_ARGUMENT)
    assert calls[0]["response_bytes"] > len(SECRET_ARGUMENT)
    assert calls[3]["response_bytes"] == 0
    for call in calls:
        assert call["duration_ms"] >= 0 and call["time"].endswith("+00:00")
        assert set(call) >= {"caller", "correlation_id", "queue_ms", "source"}


async def test_audit_hash_with_a_key_is_an_hmac_that_differs_from_the_plain_hash(
    tmp_path: Path,
) -> None:
    plain, keyed = AuditSink(tmp_path / "a"), AuditSink(tmp_path / "b", hash_key=b"k" * 32)
    async with _code_mode(plain, keyed) as cm:
        assert (await cm.run('return await tools.app.echo({ text: "x" });')).ok
    plain.close()
    keyed.close()
    a = [json.loads(x) for x in (tmp_path / "a").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "b").read_text().splitlines()]
    assert b[0]["arguments_hash"].startswith("hmac-sha256:")
    assert a[0]["arguments_hash"].split(":")[1] != b[0]["arguments_hash"].split(":")[1]
    assert a[1]["code_hash"] != b[1]["code_hash"]


async def test_a_cancelled_run_is_audited_with_its_in_flight_call(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def hang(_args: dict[str, Any]) -> dict[str, Any]:
        gate.set()
        await asyncio.sleep(3600)
        return {}

    slow = define_tool(
        description="Hang",
        input_schema={"type": "object", "properties": {}},
        execute=hang,
    )
    sink = AuditSink(tmp_path / "audit.jsonl")
    cm = CodeMode(
        sources=[local("app", {"hang": slow})],
        policy=rules_policy(PolicySpec(default="allow", rules=())),
        observers=[sink],
    )
    async with cm:
        task = asyncio.ensure_future(cm.run("return await tools.app.hang({});"))
        await asyncio.wait_for(gate.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The call is cancelled with its run; it may be written just after the run record.
        await asyncio.sleep(0)
    sink.close()
    records = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    by_type = {r["type"]: r for r in records}
    assert len(records) == 2 and set(by_type) == {"tool_call", "run"}
    assert by_type["run"]["outcome"] == "CANCELLED"
    call = by_type["tool_call"]
    assert call["outcome"] == "CANCELLED" and call["execution_id"] == by_type["run"]["execution_id"]
    assert call["decision"] == "allow" and call["rule"] == "default"


async def test_an_observer_that_raises_never_fails_a_run(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(BaseObserver):
        def on_run_start(self, run: RunStart) -> None:
            raise RuntimeError("observer bug")

        def on_tool_call(self, call: ToolCallEvent) -> None:
            raise RuntimeError("observer bug")

    seen: list[str] = []

    class Counting(BaseObserver):
        def on_tool_call(self, call: ToolCallEvent) -> None:
            seen.append(call.outcome)

    async with _code_mode(Broken(), Counting()) as cm:
        result = await cm.run('return (await tools.app.echo({ text: "x" })).structuredContent;')
    assert result.ok and result.value == {"echo": "x"}
    assert seen == ["ok"]
    assert "observer bug" not in caplog.text or "ignored" in caplog.text


def test_add_observer_refuses_what_is_not_an_observer() -> None:
    with pytest.raises(TypeError, match="not a RunObserver"):
        _code_mode().add_observer(object())  # type: ignore[arg-type]


def _samples(metrics: CodeModeMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def test_metrics_count_runs_calls_decisions_and_read_engine_state() -> None:
    cm = _code_mode()
    metrics = CodeModeMetrics(cm)
    cm.add_observer(metrics)
    async with cm:
        assert (await cm.run(PROGRAM)).ok
        assert not (await cm.run("throw new Error('x')")).ok
        samples = _samples(metrics)
    assert samples[("codemode_runs_total", (("outcome", "ok"),))] == 1
    assert samples[("codemode_runs_total", (("outcome", "UNCAUGHT_EXCEPTION"),))] == 1
    echo_ok = (("outcome", "ok"), ("source", "app"), ("tool", "echo"))
    assert samples[("codemode_tool_calls_total", echo_ok)] == 3
    invalid = (("outcome", "TOOL_INPUT_INVALID"), ("source", "app"), ("tool", "echo"))
    assert samples[("codemode_tool_calls_total", invalid)] == 1
    assert (
        samples[("codemode_policy_decisions_total", (("decision", "allow"), ("rule", "rules[1]")))]
        == 3
    )
    assert (
        samples[("codemode_policy_decisions_total", (("decision", "deny"), ("rule", "rules[0]")))]
        == 1
    )
    assert samples[("codemode_run_duration_seconds_count", ())] == 2
    assert samples[("codemode_run_compute_seconds_count", ())] == 2
    latency = (("source", "app"), ("tool", "echo"))
    assert samples[("codemode_tool_call_duration_seconds_count", latency)] == 4
    assert samples[("codemode_runs_in_flight", (("mode", cm.runtime_stats().mode),))] == 0
    assert (
        samples[
            ("codemode_source_health", (("kind", "python"), ("source", "app"), ("state", "ok")))
        ]
        == 1
    )
    assert samples[("codemode_source_tools", (("source", "app"),))] == 2
    assert samples[("codemode_catalog_tools", ())] == 2
    assert samples[("codemode_draining", ())] == 0


async def test_two_metrics_instances_do_not_collide() -> None:
    a, b = _code_mode(), _code_mode()
    ma, mb = CodeModeMetrics(a), CodeModeMetrics(b)
    a.add_observer(ma)
    b.add_observer(mb)
    async with a, b:
        await a.run("return 1;")
    assert _samples(ma)[("codemode_runs_total", (("outcome", "ok"),))] == 1
    assert ("codemode_runs_total", (("outcome", "ok"),)) not in _samples(mb)
