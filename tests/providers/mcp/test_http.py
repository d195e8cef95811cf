"""McpToolProvider over Streamable HTTP and legacy SSE against the real test server."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemodekit.errors import SourceUnavailable, ToolError
from codemodekit.providers.base import HealthStatus, ResultTooLarge
from tests.providers.mcp.helpers import Changes, context, eventually, provider
from tests.servers import free_port, http_server, http_source


async def test_streamable_http_discovers_and_calls() -> None:
    with http_server() as server:
        config = http_source("web", f"http://127.0.0.1:{server.port}/mcp")
        async with provider(config) as mcp:
            discovery = await mcp.start(Changes())
            assert mcp.protocol_version == "2026-07-28"
            tools = {tool.name: tool for tool in discovery.tools}
            assert tools["echo"].provenance["transport"] == "streamable-http"
            assert "token" not in repr(tools["echo"].provenance)
            added = await mcp.call_tool("add", {"a": 20, "b": 22}, context())
            assert added.structured_content == {"total": 42, "inputs": [20, 22]}
            progress: list[str] = []
            await mcp.call_tool("progress", {"steps": 2}, context(progress=progress))
            assert progress == ["1/2 step 1 of 2", "2/2 step 2 of 2"]
            with pytest.raises(ToolError) as caught:
                await mcp.call_tool("fail", {"message": "over http"}, context())
            assert "over http" in caught.value.message


async def test_headers_are_sent_and_never_shown() -> None:
    secret = "very-secret-value"
    with http_server() as server:
        config = http_source(
            "web",
            f"http://127.0.0.1:{server.port}/mcp",
            headers={"X-Api-Key": "Bearer ${CM_TEST_KEY}"},
        )
        async with provider(config, environ={"CM_TEST_KEY": secret}) as mcp:
            await mcp.start(Changes())
            sent = await mcp.call_tool("has_header", {"name": "X-Api-Key"}, context())
            assert sent.structured_content == {"result": True}
            with pytest.raises(ToolError) as caught:
                await mcp.call_tool("fail", {"message": f"rejected {secret}"}, context())
            assert secret not in caught.value.message
            assert secret not in mcp.health().message


async def test_timeout_cancels_the_upstream_call_over_http(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    with http_server() as server:
        config = http_source("web", f"http://127.0.0.1:{server.port}/mcp")
        async with provider(config) as mcp:
            await mcp.start(Changes())
            with pytest.raises(TimeoutError):
                await mcp.call_tool(
                    "slow", {"seconds": 60, "marker": str(marker)}, context(timeout_s=0.5)
                )
            await eventually(marker.exists, "the upstream handler was cancelled")


async def test_nothing_listening_is_unavailable() -> None:
    config = http_source("gone", f"http://127.0.0.1:{free_port()}/mcp", timeout_ms=5_000)
    async with provider(config) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "gone" in str(caught.value)
        assert mcp.health().status == HealthStatus.UNAVAILABLE


async def test_http_server_goes_away_and_comes_back() -> None:
    changes = Changes()
    with http_server() as server:
        config = http_source("web", f"http://127.0.0.1:{server.port}/mcp", timeout_ms=5_000)
        async with provider(config) as mcp:
            await mcp.start(changes)
            server.stop()
            with pytest.raises(SourceUnavailable):
                await mcp.call_tool("echo", {"text": "lost"}, context(timeout_s=10))
            await eventually(
                lambda: mcp.health().status == HealthStatus.UNAVAILABLE, "the loss shows in health"
            )
            with pytest.raises(SourceUnavailable):
                await mcp.call_tool("echo", {"text": "still down"}, context())
            server.start()
            await eventually(
                lambda: bool(changes.seen), "a reconnect announces the fresh discovery"
            )
            echoed = await mcp.call_tool("echo", {"text": "back"}, context())
            assert echoed.content[0]["text"] == "back"


async def test_legacy_sse_transport() -> None:
    with http_server(transport="sse") as server:
        config = http_source("old", f"http://127.0.0.1:{server.port}/sse", transport="sse")
        async with provider(config) as mcp:
            discovery = await mcp.start(Changes())
            # The SDK's SSE server speaks both eras; auto negotiation picks the newest.
            assert mcp.protocol_version in ("2026-07-28", "2025-11-25")
            assert discovery.tools[0].provenance["transport"] == "sse"
            echoed = await mcp.call_tool("echo", {"text": "sse"}, context())
            assert echoed.content[0]["text"] == "sse"


async def test_rejected_credentials_are_unavailable_without_the_value() -> None:
    with http_server("--require-header", "X-Api-Key=right-key-123") as server:
        url = f"http://127.0.0.1:{server.port}/mcp"
        wrong = http_source("locked", url, headers={"X-Api-Key": "${CM_KEY}"}, timeout_ms=5_000)
        async with provider(wrong, environ={"CM_KEY": "wrong-key-456"}) as mcp:
            with pytest.raises(SourceUnavailable) as caught:
                await mcp.start(Changes())
            assert "401" in str(caught.value)
            assert "wrong-key-456" not in str(caught.value)
        right = http_source("locked", url, headers={"X-Api-Key": "${CM_KEY}"})
        async with provider(right, environ={"CM_KEY": "right-key-123"}) as mcp:
            await mcp.start(Changes())
            echoed = await mcp.call_tool("echo", {"text": "in"}, context())
            assert echoed.content[0]["text"] == "in"


async def test_stateless_modern_http_survives_a_quick_restart() -> None:
    # 2026-07-28 Streamable HTTP carries no session: the restarted server answers the next
    # call (sent once, not a replay). Session-bound 2025 servers: see test_everything.
    with http_server() as server:
        async with provider(http_source("web", f"http://127.0.0.1:{server.port}/mcp")) as mcp:
            await mcp.start(Changes())
            server.stop()
            server.start()
            echoed = await mcp.call_tool("echo", {"text": "x"}, context(timeout_s=10))
            assert echoed.content[0]["text"] == "x"
            assert mcp.health().status == HealthStatus.OK


async def test_result_over_the_limit_over_http() -> None:
    with http_server() as server:
        async with provider(http_source("web", f"http://127.0.0.1:{server.port}/mcp")) as mcp:
            await mcp.start(Changes())
            with pytest.raises(ResultTooLarge):
                await mcp.call_tool("big", {"size": 3_000_000}, context(max_result_bytes=100_000))
            assert mcp.health().status == HealthStatus.OK
            small = await mcp.call_tool("big", {"size": 10}, context(max_result_bytes=100_000))
            assert small.content[0]["text"] == "x" * 10


async def test_http_server_killed_mid_call(tmp_path: Path) -> None:
    import asyncio

    changes = Changes()
    started = tmp_path / "started"
    with http_server() as server:
        async with provider(http_source("web", f"http://127.0.0.1:{server.port}/mcp")) as mcp:
            await mcp.start(changes)
            call = asyncio.ensure_future(
                mcp.call_tool(
                    "slow", {"seconds": 60, "started": str(started)}, context(timeout_s=60)
                )
            )
            await eventually(started.exists, "the server received the call")
            server.kill()
            with pytest.raises(SourceUnavailable) as caught:
                await call
            assert "not retried" in str(caught.value)
            server.start()
            await eventually(
                lambda: bool(changes.seen), "a reconnect announces the fresh discovery"
            )
