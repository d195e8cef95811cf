"""Issue 13 against real MCP servers: app-only tools (MCP Apps ``_meta.ui.visibility``) and
a run pinned to its catalog revision while ``tools/list_changed`` arrives mid-run."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from codemodekit import CodeMode, ErrorCode, Limits, allow_all_tool_calls
from codemodekit.providers.mcp.provider import McpToolProvider
from tests.providers.mcp.helpers import FAST_RECONNECT, eventually
from tests.providers.mcp.test_in_process import serve
from tests.servers import http_source, stdio_source


async def test_app_only_mcp_tool_is_cataloged_but_not_searchable_or_callable() -> None:
    server = MCPServer("apps")
    called: list[str] = []

    @server.tool(meta={"ui": {"visibility": ["app"], "resourceUri": "ui://chart"}})
    def refresh_chart() -> str:
        """Refresh the chart shown in the app."""
        called.append("refresh_chart")
        return "refreshed"

    @server.tool(meta={"ui": {"visibility": ["model", "app"]}})
    def chart_points() -> str:
        """Chart points for the model."""
        return "points"

    async with serve(server) as url:
        provider = McpToolProvider(
            http_source("apps", url), limits=Limits(), reconnect=FAST_RECONNECT
        )
        async with CodeMode(sources=[provider], policy=allow_all_tool_calls()) as cm:
            hidden = cm.catalog.get("apps", "refresh_chart")
            assert hidden is not None and not hidden.model_visible
            assert hidden.meta["ui"]["resourceUri"] == "ui://chart"
            addresses = [h.address for h in cm.search("refresh chart", limit=10).hits]
            assert "tools.apps.refresh_chart" not in addresses
            assert "tools.apps.chart_points" in addresses
            r = await cm.run("return await tools.apps.refresh_chart({});")
            assert r.diagnostic is not None and r.diagnostic.code is ErrorCode.TOOL_NOT_FOUND
            ok = await cm.run("return (await tools.apps.chart_points({})).content[0].text;")
            assert ok.ok and ok.value == "points"
    assert called == []


async def test_list_changed_mid_run_is_seen_by_the_next_run_only() -> None:
    provider = McpToolProvider(stdio_source("up"), limits=Limits(), reconnect=FAST_RECONNECT)
    async with CodeMode(sources=[provider], policy=allow_all_tool_calls()) as cm:
        before = cm.catalog.revision
        first = await cm.run(
            "await tools.up.grow({ name: 'fresh' });\n"
            "await new Promise((resolve) => resolve(0));\n"
            "try { await tools.up.fresh({}); return 'called'; }\n"
            "catch (e) { return e.code; }"
        )
        await eventually(lambda: cm.catalog.get("up", "fresh") is not None, "list_changed seen")
        assert first.ok, first.diagnostic
        assert first.catalog_revision == before
        assert first.value == "TOOL_NOT_FOUND"
        second = await cm.run("return (await tools.up.fresh({})).content[0].text;")
        assert second.ok, second.diagnostic
        assert second.value == "fresh"
        assert second.catalog_revision == cm.catalog.revision != before
