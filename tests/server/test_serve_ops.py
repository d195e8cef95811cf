"""`codemode serve --transport http` for operators: stateless mode, health, metrics, audit, drain."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.conftest import tools_project
from tests.server.test_serve import (
    CONFIG,
    TOKEN,
    TOOLS_MODULE,
    Served,
    _authorized,
    _env,
    _run_cli,
    _start_http,
    _wait_for,
)

GATE_MODULE = (
    TOOLS_MODULE.replace('__all__ = ["echo", "slow"]', '__all__ = ["echo", "slow", "gate"]')
    + """

async def _gate(args):
    (MARKERS / "gate.started").write_text("started")
    while not (MARKERS / "gate.open").exists():
        await asyncio.sleep(0.02)
    return {"passed": True}


gate = define_tool(description="Wait until the test opens the gate.",
                   input_schema={"type": "object", "properties": {}}, execute=_gate)
"""
)
METRICS_TOKEN = "metrics-only-token"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tools_project(tmp_path, "servetools", GATE_MODULE, CONFIG)


def _base(served: Served) -> str:
    return served.url.removesuffix("/mcp")


@pytest.fixture
def ops_server(config: Path) -> Iterator[Served]:
    served = _start_http(
        config,
        "--auth-token-env",
        "CM_TEST_TOKEN",
        "--stateless",
        "--public-health",
        "--metrics",
        "--metrics-token-env",
        "CM_METRICS_TOKEN",
        "--audit",
        str(config.parent / "audit.jsonl"),
        env=_env(CM_TEST_TOKEN=TOKEN, CM_METRICS_TOKEN=METRICS_TOKEN),
    )
    try:
        yield served
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()


def _metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no sample {name} {labels} in:\n{text}")


async def test_stateless_runs_with_progress_and_cancellation_then_metrics_and_audit(
    ops_server: Served, config: Path
) -> None:
    updates: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append(progress)

    async with _authorized(ops_server.url) as client:
        ran = await client.call_tool(
            "run_typescript",
            {
                "code": "const r = await tools.app.echo({ text: 'ok' });\nreturn r.structuredContent;"
            },
            progress_callback=on_progress,
        )
        failed = await client.call_tool("run_typescript", {"code": "throw new Error('no');"})
        call = asyncio.ensure_future(
            client.call_tool("run_typescript", {"code": "await tools.app.slow({});"})
        )
        await _wait_for(config.parent / "slow.started")
        call.cancel()
        await _wait_for(config.parent / "slow.cancelled")
    assert ran.structured_content is not None and ran.structured_content["value"] == {"text": "ok"}
    assert updates and updates == sorted(set(updates))
    assert failed.is_error

    base = _base(ops_server)
    metrics_url = base + "/metrics"
    assert httpx.get(metrics_url, timeout=10).status_code == 401
    mcp_token = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(metrics_url, headers=mcp_token, timeout=10).status_code == 401
    scraped = httpx.get(
        metrics_url, headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
    )
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    assert _metric(text, "codemode_runs_total", outcome="ok") == 1
    assert _metric(text, "codemode_runs_total", outcome="UNCAUGHT_EXCEPTION") == 1
    assert _metric(text, "codemode_tool_calls_total", source="app", tool="echo", outcome="ok") == 1
    assert _metric(text, "codemode_source_health", source="app", state="ok") == 1
    assert _metric(text, "codemode_draining") == 0

    records = [
        json.loads(line) for line in (config.parent / "audit.jsonl").read_text().splitlines()
    ]
    runs = [r for r in records if r["type"] == "run"]
    calls = [r for r in records if r["type"] == "tool_call"]
    assert ran.structured_content["execution_id"] in {r["execution_id"] for r in runs}
    echo = next(c for c in calls if c["tool"] == "tools.app.echo")
    assert echo["execution_id"] == ran.structured_content["execution_id"]
    assert echo["decision"] == "allow" and echo["rule"] == "default" and echo["outcome"] == "ok"
    assert "'ok'" not in json.dumps(calls) and TOKEN not in json.dumps(records)


def test_health_and_readiness_are_public_when_asked(ops_server: Served) -> None:
    base = _base(ops_server)
    health = httpx.get(base + "/healthz", timeout=10)
    ready = httpx.get(base + "/readyz", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] is True and body["draining"] is False and body["tools"] == 3
    assert body["sources"][0]["source"] == "app" and body["sources"][0]["status"] == "ok"
    assert body["runtime"]["mode"]
    # Public health does not open the MCP endpoint.
    assert httpx.post(ops_server.url, json={}, timeout=10).status_code == 401


def test_health_is_behind_the_token_by_default(config: Path) -> None:
    served = _start_http(config, "--auth-token-env", "CM_TEST_TOKEN", env=_env(CM_TEST_TOKEN=TOKEN))
    try:
        base = _base(served)
        for path in ("/healthz", "/readyz"):
            assert httpx.get(base + path, timeout=10).status_code == 401
            authorized = httpx.get(
                base + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
            )
            assert authorized.status_code == 200
        # /metrics is not served unless asked for: it is just another path of the app.
        assert (
            httpx.get(
                base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
            ).status_code
            == 404
        )
    finally:
        code, _ = served.stop()
    assert code == 0


async def test_sigterm_drains_finishing_in_flight_runs_and_refusing_new_ones(
    config: Path,
) -> None:
    served = _start_http(config, "--stateless", "--public-health", "--drain-timeout", "60")
    try:
        base = _base(served)
        async with _authorized(served.url) as client:
            await client.list_tools()  # the client validates results against the listing
            call = asyncio.ensure_future(
                client.call_tool(
                    "run_typescript",
                    {"code": "const r = await tools.app.gate({});\nreturn r.structuredContent;"},
                )
            )
            await _wait_for(config.parent / "gate.started")
            served.process.send_signal(signal.SIGTERM)
            await _wait_for_line(served, "draining (1 request(s) in flight)")
            # New connections are refused; the run in flight goes on.
            with pytest.raises(httpx.ConnectError):
                httpx.get(base + "/readyz", timeout=10)
            assert served.process.poll() is None
            (config.parent / "gate.open").write_text("open")
            result = await asyncio.wait_for(call, 60)
        assert result.structured_content is not None
        assert result.structured_content["value"] == {"passed": True}
        code = await asyncio.to_thread(served.process.wait, 30)
        assert code == 0
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()


@pytest.mark.parametrize("mode", [["--stateless"], []], ids=["stateless", "sessions"])
async def test_drain_deadline_cancels_every_run_and_each_client_gets_cancelled(
    config: Path, mode: list[str]
) -> None:
    """Issue 23, item 13: at the deadline every run in flight is cancelled (its tool call
    too), each client gets a CANCELLED result (not a cut stream), then the server exits
    cleanly: no traceback. The hang guards are generous; the order of events is asserted."""
    served = _start_http(config, *mode, "--drain-timeout", "1")
    try:
        async with _authorized(served.url) as first, _authorized(served.url) as second:
            calls = [
                asyncio.ensure_future(
                    client.call_tool("run_typescript", {"code": "await tools.app.slow({});"})
                )
                for client in (first, second)
            ]
            await _wait_for(config.parent / "slow.started")
            served.process.send_signal(signal.SIGTERM)
            results = await asyncio.wait_for(asyncio.gather(*calls), 60)
        for result in results:
            assert result.is_error
            assert result.structured_content is not None
            assert result.structured_content["diagnostic"]["code"] == "CANCELLED"
            assert "drain deadline" in result.structured_content["diagnostic"]["message"]
        code = await asyncio.to_thread(served.process.wait, 60)
        stderr = "".join(served.lines.queue)
        assert code == 0, stderr
        assert (config.parent / "slow.cancelled").exists()  # the tool call was cancelled
        events = [
            "draining (2 request(s) in flight)",
            "drain deadline (1 s) reached; cancelling 2 request(s) in flight",
            "codemode serve: stopped",
        ]
        positions = [stderr.find(event) for event in events]
        assert -1 not in positions and positions == sorted(positions), stderr
        assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()


async def _wait_for_line(served: Served, text: str, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if any(text in line for line in list(served.lines.queue)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{text!r} not in stderr: {list(served.lines.queue)}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--stateless",), "--stateless applies to --transport http only"),
        (("--metrics",), "--metrics applies to --transport http only"),
        (("--audit", "-"), "would write into the stdio wire"),
        (
            ("--transport", "http", "--metrics-token-env", "X"),
            "--metrics-token-env/--public-metrics need --metrics",
        ),
        (("--transport", "http", "--drain-timeout", "-1"), "--drain-timeout -1.0 is negative"),
        (("--audit-hash-key-env", "X"), "--audit-hash-key-env needs --audit"),
        (
            ("--transport", "http", "--metrics", "--metrics-token-env", "CM_NOPE_UNSET"),
            "environment variable CM_NOPE_UNSET (--metrics-token-env) is unset or empty",
        ),
    ],
)
def test_operator_flags_are_checked_before_starting(
    config: Path, args: tuple[str, ...], message: str
) -> None:
    done = _run_cli("serve", "-c", str(config), *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_stateless_callers_are_their_peer_whatever_session_id_they_send(config: Path) -> None:
    # No session exists in stateless mode to check a session id against: a client that
    # sends a new one per request must not become a new caller (its own fair share each
    # time, any name in the audit trail).
    audit = config.parent / "audit.jsonl"
    served = _start_http(config, "--stateless", "--audit", str(audit))
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2025-06-18",
    }
    try:
        for number, session in enumerate(["forged-1", "forged-2", None], start=1):
            call = {
                "jsonrpc": "2.0",
                "id": number,
                "method": "tools/call",
                "params": {"name": "run_typescript", "arguments": {"code": f"return {number};"}},
            }
            extra = {"mcp-session-id": session} if session else {}
            reply = httpx.post(served.url, json=call, headers={**headers, **extra}, timeout=60)
            assert reply.status_code == 200, reply.text
    finally:
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(timeout=60)
    runs = [json.loads(line) for line in audit.read_text().splitlines()]
    callers = {r["caller"] for r in runs if r["type"] == "run"}
    assert len([r for r in runs if r["type"] == "run"]) == 3
    assert callers == {"peer:127.0.0.1"}, callers
