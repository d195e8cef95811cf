"""Against a real third-party server: npm's @modelcontextprotocol/server-everything.

Over stdio, Streamable HTTP (``/mcp``) and legacy SSE (``/sse``). Skipped with the install
command when node/npm or the package is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import HealthStatus
from codemodekit.providers.mcp.provider import McpToolProvider
from codemodekit.spec.model import McpStdioSource
from tests.conftest import node_tool
from tests.providers.mcp.helpers import Changes, context, eventually, provider
from tests.servers import everything_server, http_source, pid_alive

pytestmark = pytest.mark.npm

TRANSPORTS = ["stdio", "streamable-http", "sse"]


@asynccontextmanager
async def everything(transport: str) -> AsyncIterator[McpToolProvider]:
    binary = node_tool("mcp-server-everything")
    if transport == "stdio":
        config: Any = McpStdioSource(
            name="everything", command=str(binary), args=("stdio",), timeout_ms=30_000
        )
        async with provider(config) as mcp:
            yield mcp
        return
    mode, path = ("streamableHttp", "/mcp") if transport == "streamable-http" else ("sse", "/sse")
    with everything_server(binary, mode) as server:
        config = http_source(
            "everything", f"http://127.0.0.1:{server.port}{path}", transport=transport
        )
        async with provider(config) as mcp:
            yield mcp


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_discovery_and_calls(transport: str) -> None:
    async with everything(transport) as mcp:
        discovery = await mcp.start(Changes())
        assert mcp.health().status == HealthStatus.OK
        assert mcp.protocol_version in ("2025-11-25", "2026-07-28")
        tools = {tool.name: tool for tool in discovery.tools}
        assert {
            "echo",
            "get-sum",
            "get-structured-content",
            "trigger-long-running-operation",
        } <= set(tools)
        assert tools["echo"].annotations["readOnlyHint"] is True
        # An explicit $schema upstream is kept as-is for the catalog.
        assert tools["echo"].input_schema["$schema"].startswith("http://json-schema.org/draft-07")

        # A tool that only runs as an MCP task is skipped with the reason, not offered.
        skipped = {item.name: item.reason for item in discovery.skipped}
        assert "taskSupport" in skipped["simulate-research-query"]
        assert "simulate-research-query" not in tools

        echoed = await mcp.call_tool("echo", {"message": "hi"}, context())
        assert echoed.content == ({"type": "text", "text": "Echo: hi"},)

        structured = await mcp.call_tool(
            "get-structured-content", {"location": "Chicago"}, context()
        )
        assert tools["get-structured-content"].output_schema is not None
        assert set(structured.structured_content) >= {"temperature", "conditions", "humidity"}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_progress_from_a_long_running_operation(transport: str) -> None:
    async with everything(transport) as mcp:
        await mcp.start(Changes())
        progress: list[str] = []
        output = await mcp.call_tool(
            "trigger-long-running-operation",
            {"duration": 1, "steps": 4},
            context(progress=progress),
        )
        assert "completed" in output.content[0]["text"]
        assert progress[-1].startswith("4/4")
        assert len(progress) == 4


async def test_image_content_is_normalized() -> None:
    async with everything("stdio") as mcp:
        await mcp.start(Changes())
        output = await mcp.call_tool("get-tiny-image", {}, context())
        images = [block for block in output.content if block["type"] == "image"]
        assert images and images[0]["mimeType"] == "image/png" and images[0]["data"]
        assert set(images[0]) == {"type", "mimeType", "data"}


async def test_resource_links_are_normalized() -> None:
    async with everything("stdio") as mcp:
        await mcp.start(Changes())
        output = await mcp.call_tool("get-resource-links", {"count": 2}, context())
        links = [block for block in output.content if block["type"] == "resource_link"]
        assert len(links) == 2
        assert all(link["uri"] and link["name"] for link in links)


async def test_embedded_resource_is_normalized() -> None:
    async with everything("stdio") as mcp:
        await mcp.start(Changes())
        output = await mcp.call_tool(
            "get-resource-reference", {"resourceType": "Text", "resourceId": 1}, context()
        )
        embedded = [block for block in output.content if block["type"] == "resource"]
        assert embedded and embedded[0]["resource"]["uri"]
        assert "text" in embedded[0]["resource"] or "blob" in embedded[0]["resource"]


async def test_child_process_is_gone_after_close() -> None:
    async with everything("stdio") as mcp:
        await mcp.start(Changes())
        pids = _children_named("mcp-server-everything") | _children_named("node")
    assert pids, "server-everything ran as a child of this test"
    assert not any(pid_alive(pid) for pid in pids)


def _children_named(word: str) -> set[int]:
    import os
    from pathlib import Path

    found: set[int] = set()
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if fields[1] == me and word in cmdline:
            found.add(int(stat.parent.name))
    return found


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_server_killed_and_restarted_between_calls(transport: str) -> None:
    binary = node_tool("mcp-server-everything")
    mode, path = ("streamableHttp", "/mcp") if transport == "streamable-http" else ("sse", "/sse")
    changes = Changes()
    with everything_server(binary, mode) as server:
        config = http_source(
            "everything", f"http://127.0.0.1:{server.port}{path}", transport=transport
        )
        async with provider(config) as mcp:
            await mcp.start(changes)
            server.stop()
            server.start()
            # The restarted server does not know the old session: this call fails, unreplayed.
            with pytest.raises(SourceUnavailable) as caught:
                await mcp.call_tool("echo", {"message": "lost"}, context(timeout_s=10))
            assert "not retried" in str(caught.value)
            await eventually(
                lambda: bool(changes.seen), "a reconnect announces the fresh discovery"
            )
            echoed = await mcp.call_tool("echo", {"message": "back"}, context())
            assert echoed.content == ({"type": "text", "text": "Echo: back"},)


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_server_gone_fails_fast_and_health_says_so(transport: str) -> None:
    binary = node_tool("mcp-server-everything")
    mode, path = ("streamableHttp", "/mcp") if transport == "streamable-http" else ("sse", "/sse")
    with everything_server(binary, mode) as server:
        config = http_source(
            "everything", f"http://127.0.0.1:{server.port}{path}", transport=transport
        )
        async with provider(config) as mcp:
            await mcp.start(Changes())
            server.stop()
            with pytest.raises(SourceUnavailable):
                await mcp.call_tool("echo", {"message": "x"}, context(timeout_s=30))
            await eventually(
                lambda: "cannot connect" in mcp.health().message, "reconnects report the refusal"
            )
            assert mcp.health().status == HealthStatus.UNAVAILABLE
