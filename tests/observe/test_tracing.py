"""OpenTelemetry spans: run, compile, tool calls, upstream MCP/HTTP, trace context in and out."""

from __future__ import annotations

from typing import Any

from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemodekit import CodeMode, Limits, allow_all_tool_calls, define_tool, local
from codemodekit.observe.tracing import TracingObserver, disable_upstream_spans
from codemodekit.server.hosting import create_server
from tests.providers.openapi.conftest import make_provider
from tests.providers.openapi.server import RecordingApp, ServerThread

SECRET = "do-not-export-this-argument"


ECHO = define_tool(
    description="Echo",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    execute=lambda args: {"echo": args.get("text")},
)


def _by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def _attribute_values(spans: tuple[ReadableSpan, ...]) -> list[Any]:
    return [v for s in spans for v in (s.attributes or {}).values()]


async def test_run_compile_and_tool_call_spans_nest_and_carry_no_arguments(
    exporter: InMemorySpanExporter,
) -> None:
    cm = CodeMode(
        sources=[local("app", {"echo": ECHO})],
        policy=allow_all_tool_calls(),
        observers=[TracingObserver()],
    )
    async with cm:
        result = await cm.run(
            f'await tools.app.echo({{ text: "{SECRET}" }});\n'
            "try { await tools.app.missing({}); } catch (e) {}\nreturn 1;"
        )
    assert result.ok
    spans = exporter.get_finished_spans()
    (run,) = _by_name(spans, "codemode.run")
    (compiled,) = _by_name(spans, "codemode.compile")
    calls = _by_name(spans, "codemode.tool_call")
    # A tool the catalog does not list names no span (``test_unlisted_names.py``).
    assert [c.name for c in calls] == ["codemode.tool_call app.echo", "codemode.tool_call"]
    assert run.attributes is not None and run.attributes["codemode.outcome"] == "ok"
    assert run.attributes["codemode.execution_id"] == result.execution_id
    for child in (compiled, *calls):
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    ok, missing = (c.attributes or {} for c in calls)
    assert ok["codemode.tool.outcome"] == "ok" and ok["codemode.policy.decision"] == "allow"
    assert missing["codemode.tool.outcome"] == "TOOL_NOT_FOUND"
    assert missing["codemode.tool.name"] == "missing"
    assert calls[1].status.status_code == trace.StatusCode.ERROR
    assert not any(SECRET in str(v) for v in _attribute_values(spans))


async def test_trace_context_from_the_mcp_request_parents_the_run(
    exporter: InMemorySpanExporter,
) -> None:
    cm = CodeMode(
        sources=[local("app", {"echo": ECHO})],
        policy=allow_all_tool_calls(),
        observers=[TracingObserver()],
    )
    tracer = trace.get_tracer("test-client")
    async with cm, Client(create_server(cm)) as client:
        with tracer.start_as_current_span("agent step") as agent:
            result = await client.call_tool("run_typescript", {"code": "return 2;"})
    assert not result.is_error
    spans = exporter.get_finished_spans()
    (run,) = _by_name(spans, "codemode.run")
    assert run.context.trace_id == agent.get_span_context().trace_id
    assert run.parent is not None and run.parent.span_id != agent.get_span_context().span_id


async def test_openapi_requests_carry_traceparent_of_their_tool_call_span(
    exporter: InMemorySpanExporter,
) -> None:
    app = RecordingApp()
    with ServerThread(app) as server:
        api = make_provider("wire.yaml", base_url=server.url + "/api")
        cm = CodeMode(sources=[api], policy=allow_all_tool_calls(), observers=[TracingObserver()])
        async with cm:
            result = await cm.run("await tools.api.queryForm({ prim: 'x' }); return 1;")
    assert result.ok
    spans = exporter.get_finished_spans()
    (upstream,) = [s for s in spans if s.kind == trace.SpanKind.CLIENT]
    (call,) = _by_name(spans, "codemode.tool_call")
    assert upstream.parent is not None and upstream.parent.span_id == call.context.span_id
    traceparent = app.last.header("traceparent")
    assert traceparent is not None
    _, trace_id, span_id, _ = traceparent.split("-")
    assert int(trace_id, 16) == upstream.context.trace_id
    assert int(span_id, 16) == upstream.context.span_id


async def test_without_a_tracing_observer_upstream_requests_carry_no_traceparent(
    exporter: InMemorySpanExporter,
) -> None:
    disable_upstream_spans()
    app = RecordingApp()
    with ServerThread(app) as server:
        api = make_provider("wire.yaml", base_url=server.url + "/api")
        async with CodeMode(sources=[api], policy=allow_all_tool_calls()) as cm:
            assert (await cm.run("await tools.api.queryForm({}); return 1;")).ok
    assert app.requests and app.last.header("traceparent") is None
    assert not _by_name(exporter.get_finished_spans(), "codemode.")


async def test_streamable_http_upstream_receives_the_tool_call_trace_context(
    exporter: InMemorySpanExporter,
) -> None:
    from mcp.server.mcpserver import MCPServer

    from codemodekit.providers.mcp.provider import McpToolProvider
    from tests.providers.mcp.test_in_process import serve
    from tests.servers import http_source

    upstream = MCPServer("upstream")

    @upstream.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    async with serve(upstream) as url:
        source = McpToolProvider(http_source("up", url), limits=Limits())
        cm = CodeMode(
            sources=[source], policy=allow_all_tool_calls(), observers=[TracingObserver()]
        )
        async with cm:
            result = await cm.run("const r = await tools.up.ping({});\nreturn r.content[0].text;")
    assert result.ok and result.value == "pong"
    spans = exporter.get_finished_spans()
    (call,) = _by_name(spans, "codemode.tool_call")
    # The upstream server's own span (the SDK extracts params._meta.traceparent) is in the
    # run's trace, beneath the SDK client span that the tool-call span parents.
    (served,) = [
        s for s in spans if s.kind == trace.SpanKind.SERVER and s.name == "tools/call ping"
    ]
    assert served.context.trace_id == call.context.trace_id
    by_id = {s.context.span_id: s for s in spans}
    chain = []
    parent = served.parent
    while parent is not None and parent.span_id in by_id:
        chain.append(by_id[parent.span_id].name)
        parent = by_id[parent.span_id].parent
    assert chain[-2:] == ["codemode.tool_call up.ping", "codemode.run"], chain


async def test_traceparent_http_header_parents_the_run_when_meta_has_none(
    exporter: InMemorySpanExporter,
) -> None:
    import asyncio

    import httpx
    import uvicorn

    from codemodekit.server.hosting import http_app
    from tests.servers import free_port

    cm = CodeMode(
        sources=[local("app", {"echo": ECHO})],
        policy=allow_all_tool_calls(),
        observers=[TracingObserver()],
    )
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    async with cm:
        port = free_port()
        app = http_app(create_server(cm), stateless=True)
        web = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        serving = asyncio.create_task(web.serve())
        while not web.started:
            assert not serving.done()
            await asyncio.sleep(0.01)
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                reply = await http.post(
                    f"http://127.0.0.1:{port}/mcp",
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "tools/call",
                        "params": {"name": "run_typescript", "arguments": {"code": "return 3;"}},
                    },
                    headers={
                        "Accept": "application/json, text/event-stream",
                        "MCP-Protocol-Version": "2025-11-25",
                        "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01",
                    },
                )
        finally:
            web.should_exit = True
            await serving
    assert reply.status_code == 200, reply.text
    assert '"isError":false' in reply.text.replace(" ", "")
    (run,) = _by_name(exporter.get_finished_spans(), "codemode.run")
    assert f"{run.context.trace_id:032x}" == trace_id
    assert run.parent is not None and f"{run.parent.span_id:016x}" == "00f067aa0ba902b7"
