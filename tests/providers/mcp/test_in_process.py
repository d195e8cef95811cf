"""An MCP server running in this very process (uvicorn on 127.0.0.1), reached over HTTP.

Being in-process lets the test look at the server's own state: what it received, and that
a refused call was made exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as UpstreamToolError

from codemodekit.errors import ToolError
from tests.providers.mcp.helpers import Changes, context, provider
from tests.servers import free_port, http_source


@asynccontextmanager
async def serve(server: MCPServer) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(
        server.streamable_http_app(),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
    )
    web = uvicorn.Server(config)
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        web.should_exit = True
        await task


async def test_arguments_arrive_as_sent_and_a_refusal_is_not_replayed() -> None:
    received: list[dict[str, object]] = []
    server = MCPServer("in-process")

    @server.tool()
    def record(name: str, count: int, tags: list[str]) -> str:
        """Remember the arguments."""
        received.append({"name": name, "count": count, "tags": tags})
        return "recorded"

    @server.tool()
    def refuse() -> str:
        """Refuse, once per call."""
        received.append({"refused": True})
        raise UpstreamToolError("not today")

    async with serve(server) as url, provider(http_source("local", url)) as mcp:
        discovery = await mcp.start(Changes())
        assert {tool.name for tool in discovery.tools} == {"record", "refuse"}
        await mcp.call_tool("record", {"name": "ü", "count": 3, "tags": ["a", "b"]}, context())
        assert received == [{"name": "ü", "count": 3, "tags": ["a", "b"]}]
        with pytest.raises(ToolError) as caught:
            await mcp.call_tool("refuse", {}, context())
        assert "not today" in caught.value.message
        assert received[1:] == [{"refused": True}]
