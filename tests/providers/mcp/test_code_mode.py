"""End to end: TypeScript in the sandbox calling real MCP servers through CodeMode."""

from __future__ import annotations

import json
from pathlib import Path

from codemodekit import CodeMode, ErrorCode, Limits, allow_all_tool_calls
from codemodekit.providers.base import HealthStatus
from codemodekit.providers.mcp.provider import McpToolProvider
from codemodekit.spec.model import McpStdioSource
from tests.providers.mcp.helpers import FAST_RECONNECT, eventually
from tests.servers import stdio_source


def mcp(config: McpStdioSource, limits: Limits | None = None) -> McpToolProvider:
    return McpToolProvider(config, limits=limits or Limits(), reconnect=FAST_RECONNECT)


async def test_typescript_calls_mcp_tools() -> None:
    async with CodeMode(sources=[mcp(stdio_source("up"))], policy=allow_all_tool_calls()) as cm:
        result = await cm.run(
            "const sum = await tools.up.add({ a: 2, b: 40 });\n"
            "const echo = await tools.up.echo({ text: 'hi' });\n"
            "const media = await tools.up.media({});\n"
            "return { total: sum.structuredContent.total, text: echo.content[0].text,\n"
            "         kinds: media.content.map((b) => b.type) };"
        )
        assert result.ok, result.diagnostic
        assert result.value == {
            "total": 42,
            "text": "hi",
            "kinds": ["text", "image", "audio", "resource_link", "resource", "resource"],
        }


async def test_is_error_is_catchable_and_uncaught_is_a_tool_diagnostic() -> None:
    async with CodeMode(sources=[mcp(stdio_source("up"))], policy=allow_all_tool_calls()) as cm:
        caught = await cm.run(
            "try { await tools.up.fail({ message: 'no such invoice' }); }\n"
            "catch (e) { return [e.code, e.message.includes('no such invoice')]; }"
        )
        assert caught.value == ["TOOL_ERROR", True]
        uncaught = await cm.run("await tools.up.fail({ message: 'nope' });\nreturn 1;")
        assert not uncaught.ok and uncaught.diagnostic is not None
        assert uncaught.diagnostic.code == ErrorCode.TOOL_ERROR
        assert uncaught.diagnostic.location is not None and uncaught.diagnostic.location.line == 1


async def test_timeout_is_tool_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    limits = Limits(tool_call_time_ms=500)
    async with CodeMode(
        sources=[mcp(stdio_source("up"), limits)], policy=allow_all_tool_calls(), limits=limits
    ) as cm:
        result = await cm.run(
            f"return await tools.up.slow({{ seconds: 60, marker: {str(marker)!r} }});"
        )
        assert result.diagnostic is not None
        assert result.diagnostic.code == ErrorCode.TOOL_TIMEOUT
        await eventually(marker.exists, "the upstream call was cancelled")


async def test_upstream_progress_becomes_run_progress() -> None:
    events: list[object] = []
    async with CodeMode(sources=[mcp(stdio_source("up"))], policy=allow_all_tool_calls()) as cm:
        result = await cm.run(
            "return (await tools.up.progress({ steps: 2 })).content[0].text;",
            on_progress=events.append,
        )
        assert result.value == "done after 2 steps"
    messages = [
        getattr(e, "message", "") for e in events if getattr(e, "kind", "") == "tool_progress"
    ]
    assert any("2/2" in m for m in messages)


async def test_a_source_that_never_comes_up_leaves_its_sibling_working() -> None:
    dead = McpStdioSource(name="dead", command="/nonexistent/mcp-server")
    async with CodeMode(
        sources=[mcp(dead), mcp(stdio_source("up"))], policy=allow_all_tool_calls()
    ) as cm:
        health = {h.source: h for h in cm.health}
        assert health["up"].status == HealthStatus.OK
        assert health["dead"].status == HealthStatus.UNAVAILABLE
        assert "command was not found" in health["dead"].message
        down = await cm.run("return await tools.dead.anything({});")
        assert down.diagnostic is not None
        assert down.diagnostic.code == ErrorCode.SOURCE_UNAVAILABLE
        up = await cm.run("return (await tools.up.add({ a: 1, b: 1 })).structuredContent.total;")
        assert up.ok and up.value == 2


async def test_invalid_schema_quarantines_only_that_tool() -> None:
    async with CodeMode(
        sources=[mcp(stdio_source("odd", "--fault", "invalid-schema"))],
        policy=allow_all_tool_calls(),
    ) as cm:
        echo, broken_tool = cm.catalog.get("odd", "echo"), cm.catalog.get("odd", "broken")
        assert echo is not None and not echo.quarantine
        assert broken_tool is not None and "no-such-type" in (broken_tool.quarantine or "")
        ok = await cm.run("return (await tools.odd.echo({ text: 'fine' })).content[0].text;")
        assert ok.value == "fine"
        broken = await cm.run("return await tools.odd.broken({ x: 1 });")
        assert broken.diagnostic is not None
        assert broken.diagnostic.code == ErrorCode.TOOL_SCHEMA_UNSUPPORTED


async def test_crash_mid_run_is_source_unavailable_and_reconnect_swaps_the_catalog() -> None:
    async with CodeMode(sources=[mcp(stdio_source("crashy"))], policy=allow_all_tool_calls()) as cm:
        first = cm.catalog.revision
        crashed = await cm.run("return await tools.crashy.crash({});")
        assert crashed.diagnostic is not None
        assert crashed.diagnostic.code == ErrorCode.SOURCE_UNAVAILABLE
        assert "not retried" in crashed.diagnostic.message
        await eventually(
            lambda: dict((h.source, h.status) for h in cm.health)["crashy"] == HealthStatus.OK,
            "the source reconnects",
        )
        after = await cm.run("return (await tools.crashy.echo({ text: 'again' })).content[0].text;")
        assert after.value == "again"
        # The fresh discovery replaced the source's tools; same tools, so the same revision.
        assert cm.catalog.revision == first


async def test_tools_added_upstream_appear_in_the_catalog() -> None:
    async with CodeMode(sources=[mcp(stdio_source("up"))], policy=allow_all_tool_calls()) as cm:
        assert cm.catalog.get("up", "sprouted") is None
        grown = await cm.run("return (await tools.up.grow({ name: 'sprouted' })).content[0].text;")
        assert grown.value == "grown"
        await eventually(
            lambda: cm.catalog.get("up", "sprouted") is not None, "the catalog swapped"
        )
        called = await cm.run("return (await tools.up.sprouted({})).content[0].text;")
        assert called.value == "sprouted"


async def test_server_killed_mid_call_fails_that_call_only_and_comes_back(
    tmp_path: Path,
) -> None:
    import asyncio
    import os
    import signal

    started = tmp_path / "started"

    async with CodeMode(
        sources=[mcp(stdio_source("victim")), mcp(stdio_source("sibling"))],
        policy=allow_all_tool_calls(),
    ) as cm:
        pid = (await cm.run("return (await tools.victim.pid({})).structuredContent.result;")).value
        run = asyncio.ensure_future(
            cm.run(
                "const s = await tools.sibling.echo({ text: 'ok' });\n"
                f"try {{ await tools.victim.slow({{ seconds: 60, started: {json.dumps(str(started))} }}); }}"
                " catch (e) { return [e.code, s.content[0].text]; }"
            )
        )
        await eventually(started.exists, "the victim received the call")
        os.kill(pid, signal.SIGKILL)
        result = await run
        assert result.value == ["SOURCE_UNAVAILABLE", "ok"]
        await eventually(
            lambda: all(h.status == HealthStatus.OK for h in cm.health),
            "the killed source reconnects",
        )
        new_pid = (
            await cm.run("return (await tools.victim.pid({})).structuredContent.result;")
        ).value
        assert new_pid != pid


async def test_protocol_malformed_tools_are_quarantined_one_by_one() -> None:
    async with CodeMode(
        sources=[mcp(stdio_source("mixed", "--fault", "malformed-tools"))],
        policy=allow_all_tool_calls(),
    ) as cm:
        for name in ("wrong_root", "bad_props"):
            definition = cm.catalog.get("mixed", name)
            assert definition is not None and definition.quarantine, name
        ok = await cm.run("return (await tools.mixed.add({ a: 1, b: 2 })).structuredContent.total;")
        assert ok.value == 3
        refused = await cm.run("return await tools.mixed.bad_props({ x: 1 });")
        assert refused.diagnostic is not None
        assert refused.diagnostic.code == ErrorCode.TOOL_SCHEMA_UNSUPPORTED
