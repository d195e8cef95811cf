"""register_code_mode_tools on consumer-owned servers, driven by the real mcp client in-process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

from codemodekit import CodeMode, Limits, allow_all_tool_calls, define_tool, local
from codemodekit.run import ProgressEvent
from codemodekit.server.hosting import create_server
from codemodekit.server.tools import ProgressRelay, register_code_mode_tools

_OBJECT = {"type": "object", "properties": {"x": {"type": "string"}}}


class Slow:
    """A tool that sleeps until cancelled, and records that it was."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return {}


@pytest.fixture
def slow() -> Slow:
    return Slow()


@pytest.fixture
async def code_mode(slow: Slow) -> AsyncIterator[CodeMode]:
    tools = {
        "echo": define_tool(
            description="Echo the x argument back.",
            input_schema=_OBJECT,
            execute=lambda args: {"x": args.get("x")},
        ),
        "slow": define_tool(
            description="Sleep for a long time.", input_schema=_OBJECT, execute=slow
        ),
    }
    limits = Limits(progress_events=5, max_tool_calls=50)
    async with CodeMode(
        sources=[local("app", tools)], policy=allow_all_tool_calls(), limits=limits
    ) as cm:
        yield cm


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_lists_two_tools_with_compact_rules(code_mode: CodeMode) -> None:
    async with Client(create_server(code_mode)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == {"run_typescript", "search_tools"}
    run = listed["run_typescript"]
    assert run.input_schema["required"] == ["code"]
    description = run.description or ""
    for needle in ("async function", "return", "tools.", "search_tools", "ToolResult", "fetch"):
        assert needle in description
    assert f"{code_mode.limits.compute_time_ms} ms compute" in description
    assert f"{code_mode.limits.max_tool_calls} tool calls" in description
    # The sources' names, never their tools (the catalog can change while the server runs).
    assert "Sources: `tools.app`." in description and "echo" not in description
    assert len(description) < 1500
    search = listed["search_tools"]
    assert search.annotations is not None and search.annotations.read_only_hint is True
    assert set(search.input_schema["properties"]) == {"query", "source", "detail", "limit"}


async def test_search_can_be_disabled(code_mode: CodeMode) -> None:
    async with Client(create_server(code_mode, search=False)) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["run_typescript"]
        description = (await client.list_tools()).tools[0].description or ""
        assert "search_tools" not in description


async def test_success_returns_value_as_text_and_structured(code_mode: CodeMode) -> None:
    code = "const r = await tools.app.echo({ x: 'hi' });\nconsole.log('seen');\nreturn r.structuredContent;"
    async with Client(create_server(code_mode)) as client:
        result = await client.call_tool("run_typescript", {"code": code})
    assert result.is_error is False
    assert result.content[0].type == "text" and result.content[0].text == '{"x": "hi"}'
    assert "[log] seen" in _text(result)
    structured = result.structured_content
    assert structured["ok"] is True and structured["value"] == {"x": "hi"}
    assert structured["logs"] == [{"level": "log", "message": "seen"}]
    assert structured["catalog_revision"] == code_mode.catalog.revision


async def test_failure_is_error_with_location_line_and_caret(code_mode: CodeMode) -> None:
    code = "const a = 1;\nconst b = a +;\nreturn b;"
    async with Client(create_server(code_mode)) as client:
        result = await client.call_tool("run_typescript", {"code": code})
    assert result.is_error is True
    lines = _text(result).splitlines()
    assert lines[0].startswith("COMPILE_ERROR at 2:")
    assert lines[1] == "2 | const b = a +;"
    caret_column = lines[2].index("^") - lines[1].index("const") + 1
    assert caret_column == result.structured_content["diagnostic"]["location"]["column"]
    diagnostic = result.structured_content["diagnostic"]
    assert diagnostic["code"] == "COMPILE_ERROR" and diagnostic["phase"] == "compile"
    assert result.structured_content["ok"] is False


async def test_uncaught_tool_failure_names_the_tool(code_mode: CodeMode) -> None:
    async with Client(create_server(code_mode)) as client:
        result = await client.call_tool(
            "run_typescript", {"code": "const x = 1;\nawait tools.app.missing({});\nreturn x;"}
        )
    assert result.is_error is True
    text = _text(result)
    assert text.startswith("TOOL_NOT_FOUND at 2:")
    assert "2 | await tools.app.missing({});" in text
    assert "tool: " in text
    assert result.structured_content["diagnostic"]["code"] == "TOOL_NOT_FOUND"


async def test_bad_arguments_are_tool_errors_not_crashes(code_mode: CodeMode) -> None:
    async with Client(create_server(code_mode)) as client:
        no_code = await client.call_tool("run_typescript", {})
        empty_query = await client.call_tool("search_tools", {"query": ""})
        bad_limit = await client.call_tool("search_tools", {"query": "echo", "limit": 500})
    assert no_code.is_error and empty_query.is_error and bad_limit.is_error


async def test_progress_is_increasing_without_total_and_bounded(code_mode: CodeMode) -> None:
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    code = "for (let i = 0; i < 20; i++) { await tools.app.echo({ x: String(i) }); }\nreturn 1;"
    async with Client(create_server(code_mode)) as client:
        result = await client.call_tool(
            "run_typescript", {"code": code}, progress_callback=on_progress
        )
    assert result.is_error is False
    assert updates, "a request with a progress callback gets progress"
    values = [u[0] for u in updates]
    assert values == sorted(set(values))  # strictly increasing
    assert all(total is None for _, total, _ in updates)
    assert len(updates) <= code_mode.limits.progress_events
    assert all(message is not None and len(message.encode()) <= 1024 for *_, message in updates)


async def test_cancelling_the_request_cancels_the_tool_call(
    code_mode: CodeMode, slow: Slow
) -> None:
    async with Client(create_server(code_mode)) as client:
        call = asyncio.ensure_future(
            client.call_tool("run_typescript", {"code": "await tools.app.slow({});\nreturn 1;"})
        )
        await asyncio.wait_for(slow.started.wait(), 10)
        call.cancel()
        await asyncio.wait_for(slow.cancelled.wait(), 10)
        # The server is still usable afterwards.
        again = await client.call_tool("run_typescript", {"code": "return 2;"})
    assert again.structured_content["value"] == 2


async def test_search_tools_summary_typescript_and_unknown_source(code_mode: CodeMode) -> None:
    async with Client(create_server(code_mode)) as client:
        summary = await client.call_tool("search_tools", {"query": "echo"})
        typescript = await client.call_tool(
            "search_tools", {"query": "echo", "detail": "typescript", "limit": 1}
        )
        unknown = await client.call_tool("search_tools", {"query": "echo", "source": "ap"})
    data = summary.structured_content
    assert data["tools"][0]["address"] == "tools.app.echo"
    assert data["revision"] == code_mode.catalog.revision
    assert data["counts"]["catalog"] == 2
    assert _text(summary).startswith("1 of 1 matching tools")
    ts = typescript.structured_content
    assert ts["tools"][0]["typescript"] and "interface ToolResult" in ts["resultContract"]
    assert _text(typescript).count("interface ToolResult") == 1
    assert unknown.is_error is False and unknown.structured_content["tools"] == []
    assert "app" in unknown.structured_content["note"]


async def test_composes_with_consumer_tools_on_mcpserver(code_mode: CodeMode) -> None:
    server: MCPServer[Any] = MCPServer("consumer")

    @server.tool()
    def ping() -> str:
        """The consumer's own tool."""
        return "pong"

    register_code_mode_tools(server, code_mode)
    async with Client(server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        pong = await client.call_tool("ping", {})
        ran = await client.call_tool("run_typescript", {"code": "return 40 + 2;"})
    assert names == {"ping", "run_typescript", "search_tools"}
    assert _text(pong) == "pong" and ran.structured_content["value"] == 42
    with pytest.raises(ValueError, match="run_typescript"):
        register_code_mode_tools(server, code_mode)


async def test_composes_with_consumer_tools_on_lowlevel_server(code_mode: CodeMode) -> None:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="ping", input_schema={"type": "object"})]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])

    server: Server[Any] = Server("consumer", on_list_tools=list_tools, on_call_tool=call_tool)
    register_code_mode_tools(server, code_mode, search=True)
    async with Client(server) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        pong = await client.call_tool("ping", {})
        ran = await client.call_tool("run_typescript", {"code": "return 'ok';"})
        failed = await client.call_tool("run_typescript", {"code": "return ;;; )"})
        found = await client.call_tool("search_tools", {"query": "echo"})
        extra = await client.call_tool("run_typescript", {"code": "return 1;", "other": 1})
    assert names == ["run_typescript", "search_tools", "ping"]
    assert _text(pong) == "pong"
    assert ran.structured_content["value"] == "ok"
    assert failed.is_error and failed.structured_content["diagnostic"]["code"] == "COMPILE_ERROR"
    assert found.structured_content["tools"][0]["address"] == "tools.app.echo"
    assert extra.is_error and "other" in _text(extra)


def test_register_rejects_other_objects(code_mode: CodeMode) -> None:
    with pytest.raises(TypeError, match="MCPServer"):
        register_code_mode_tools(object(), code_mode)  # type: ignore[arg-type]


async def test_progress_relay_bounds_count_rate_and_message() -> None:
    sent: list[tuple[float, str]] = []
    now = [0.0]

    async def send(progress: float, message: str) -> None:
        sent.append((progress, message))

    relay = ProgressRelay(send, max_events=3, per_second=10, message_bytes=16, clock=lambda: now[0])

    def event(message: str, kind: Any = "tool_call_started") -> ProgressEvent:
        return ProgressEvent("run", 1, kind, message, tool=None)

    await relay(event("é" * 40, "started"))
    await relay(event("second"))  # within 100 ms: held
    now[0] = 0.05
    await relay(event("third"))  # replaces the held one
    assert [m for _, m in sent] == ["é" * 6 + "…"]  # cut to at most 16 UTF-8 bytes
    async with asyncio.timeout(60):  # the held event goes out once the interval has passed
        while len(sent) < 2:
            await asyncio.sleep(0.01)
    assert [m for _, m in sent][1:] == ["third"]
    now[0] = 0.06
    await relay(event("done", "finished"))  # never held
    now[0] = 5.0
    await relay(event("over the count"))
    await relay.close()
    assert [p for p, _ in sent] == [1.0, 2.0, 3.0]
    assert [m for _, m in sent][2:] == ["done"]
    assert all(len(m.encode()) <= 16 for _, m in sent)


async def test_progress_relay_close_drops_held_events() -> None:
    sent: list[float] = []

    async def send(progress: float, message: str) -> None:
        sent.append(progress)

    relay = ProgressRelay(send, max_events=10, per_second=1)
    await relay(ProgressEvent("run", 1, "started", "a"))
    await relay(ProgressEvent("run", 2, "tool_call_started", "b"))  # held for ~1 s
    await relay.close()
    await asyncio.sleep(0.05)
    assert sent == [1.0]


def test_diagnostic_text_windows_long_lines_and_keeps_the_caret() -> None:
    from codemodekit.errors import Diagnostic, ErrorCode, Location
    from codemodekit.run import RunResult
    from codemodekit.server.tools import run_result_to_mcp

    line = "x" * 900 + "BAD" + "y" * 900
    code = "const ok = 1;\n\t" + line
    column = 1 + 1 + 900  # the tab, then 900 x's: BAD starts here
    diagnostic = Diagnostic(
        ErrorCode.UNCAUGHT_EXCEPTION, "m" * 5000, Location(2, column), tool="tools.app.x"
    )
    result = RunResult(ok=False, execution_id="e", diagnostic=diagnostic)
    mcp_result = run_result_to_mcp(result, code)
    text = "\n".join(c.text for c in mcp_result.content if isinstance(c, types.TextContent))
    head, source, caret, tool = text.splitlines()[:4]
    assert head.startswith("UNCAUGHT_EXCEPTION at 2:902: ") and len(head) < 2100
    assert len(source) < 200 and len(caret) < 200
    assert source[caret.index("^") : caret.index("^") + 3] == "BAD"
    assert tool == "tool: tools.app.x"
    structured = mcp_result.structured_content["diagnostic"]
    assert len(structured["message"]) <= 2000 and structured["location"]["column"] == column


async def test_not_started_code_mode_gives_a_tool_error() -> None:
    cm = CodeMode(sources=[], policy=allow_all_tool_calls())
    async with Client(create_server(cm)) as client:
        result = await client.call_tool("run_typescript", {"code": "return 1;"})
    assert result.is_error and "not available" in _text(result)
