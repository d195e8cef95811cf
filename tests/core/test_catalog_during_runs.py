"""Issue 13, catalog and calls: app-only tools, one catalog per run, closed providers,
progress delivery. Through the public API (``CodeMode.run``, ``CodeMode.search``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from codemodekit import CodeMode, ErrorCode, ProgressEvent, allow_all_tool_calls, define_tool, local
from codemodekit.errors import SourceUnavailable
from codemodekit.providers.memory import InMemoryProvider
from tests.core.helpers import code_mode, const, source, tool

APP_ONLY = {"ui": {"visibility": ["app"]}}


# -- 1. app-only tools ------------------------------------------------------------------------
async def test_app_only_tool_stays_in_the_catalog_but_out_of_the_models_reach() -> None:
    src = source(
        "ui",
        tool("render_chart", const({"drawn": True}), meta=APP_ONLY, description="Render a chart"),
        tool("chart_data", const({"points": 3}), description="Chart data points"),
        tool("both", const(1), meta={"ui": {"visibility": ["model", "app"]}}),
    )
    async with code_mode(src) as cm:
        hidden = cm.catalog.get("ui", "render_chart")
        assert hidden is not None and not hidden.model_visible
        assert hidden in cm.catalog.tools  # the host still sees it (direct projection)
        assert hidden not in cm.catalog.model_tools
        assert cm.catalog.get("ui", "both").model_visible  # type: ignore[union-attr]

        found = [h.address for h in cm.search("render chart", limit=10).hits]
        assert "tools.ui.render_chart" not in found
        assert "tools.ui.chart_data" in found

        r = await cm.run("return await tools.ui.render_chart({});")
        assert not r.ok and r.diagnostic is not None
        assert r.diagnostic.code is ErrorCode.TOOL_NOT_FOUND
        assert "render_chart" in r.diagnostic.message
        assert src.calls == []  # never dispatched

        ok = await cm.run("return (await tools.ui.chart_data({})).structuredContent;")
        assert ok.ok and ok.value == {"points": 3}


async def test_a_source_with_only_app_tools_is_not_reported_unavailable() -> None:
    src = source("ui", tool("panel", const(1), meta=APP_ONLY))
    async with code_mode(src) as cm:
        r = await cm.run("return await tools.ui.panel({});")
    assert r.diagnostic is not None and r.diagnostic.code is ErrorCode.TOOL_NOT_FOUND


async def test_visibility_changes_the_catalog_revision() -> None:
    visible = source("ui", tool("panel", const(1)))
    hidden = source("ui", tool("panel", const(1), meta=APP_ONLY))
    async with code_mode(visible) as a, code_mode(hidden) as b:
        assert a.catalog.revision != b.catalog.revision


# -- 2. a run is pinned to its catalog revision -------------------------------------------------
async def test_a_tool_added_mid_run_is_callable_only_from_the_next_run() -> None:
    src: InMemoryProvider

    def grow(_args: dict[str, Any], _ctx: Any) -> str:
        src.come_back(dict([tool("ping", const("pong")), tool("grow", grow), tool("late", late)]))
        return "grown"

    def late(_args: dict[str, Any], _ctx: Any) -> str:
        return "late"

    src = source("app", tool("ping", const("pong")), tool("grow", grow))
    async with code_mode(src) as cm:
        before = cm.catalog.revision
        code = "await tools.app.grow({});\nreturn (await tools.app.late({})).structuredContent;"
        first = await cm.run(code)
        assert cm.catalog.revision != before
        assert not first.ok and first.diagnostic is not None
        assert first.diagnostic.code is ErrorCode.TOOL_NOT_FOUND
        assert first.catalog_revision == before
        second = await cm.run("return (await tools.app.late({})).structuredContent;")
        assert second.ok and second.value == "late"
        assert second.catalog_revision == cm.catalog.revision


async def test_a_tool_removed_mid_run_fails_cleanly() -> None:
    src: InMemoryProvider

    def shrink(_args: dict[str, Any], _ctx: Any) -> str:
        src.come_back(dict([tool("shrink", shrink)]))
        return "shrunk"

    src = source("app", tool("doomed", const("here")), tool("shrink", shrink))
    async with code_mode(src) as cm:
        r = await cm.run(
            "await tools.app.shrink({});\n"
            "try { await tools.app.doomed({}); } catch (e) { return [e.code, e.message]; }"
        )
    assert r.ok, r.diagnostic
    code, message = r.value
    assert code == "TOOL_NOT_FOUND"  # the source is up and no longer has it (docs/api.md)
    assert "doomed" in message
    assert [c.name for c in src.calls] == ["shrink"]  # never dispatched


# -- 4. a closed provider cannot be started again ------------------------------------------------
async def test_a_closed_local_provider_cannot_be_started_again() -> None:
    provider = local(
        "app",
        {
            "ping": define_tool(
                description="p", input_schema={"type": "object"}, execute=lambda a: 1
            )
        },
    )
    async with CodeMode(sources=[provider], policy=allow_all_tool_calls()) as cm:
        assert (await cm.run("return 1;")).ok
    with pytest.raises(SourceUnavailable, match="closed and cannot be started again"):
        await provider.start(lambda _d: None)
    # Reused in a new CodeMode, the source is reported unavailable with the reason.
    async with CodeMode(sources=[provider], policy=allow_all_tool_calls()) as again:
        assert len(again.catalog) == 0
        (health,) = again.health
        assert "closed" in health.message
        r = await again.run("return await tools.app.ping({});")
        assert r.diagnostic is not None and r.diagnostic.code is ErrorCode.SOURCE_UNAVAILABLE


async def test_a_closed_memory_provider_cannot_be_started_again() -> None:
    provider = source("mem", tool("x", const(1)))
    await provider.start(lambda _d: None)
    await provider.aclose()
    with pytest.raises(SourceUnavailable, match="closed"):
        await provider.start(lambda _d: None)


# -- 10. progress -------------------------------------------------------------------------------
async def test_a_progress_callback_that_raises_once_keeps_receiving_events(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    def flaky(event: ProgressEvent) -> None:
        seen.append(event.kind)
        if len(seen) == 1:
            raise RuntimeError("consumer hiccup")

    src = source("app", tool("ping", const(1)))
    async with code_mode(src) as cm:
        with caplog.at_level(logging.ERROR, logger="codemodekit"):
            r = await cm.run("await tools.app.ping({});\nreturn 1;", on_progress=flaky)
    assert r.ok
    assert seen[0] == "started" and seen[-1] == "finished"
    assert "tool_call_started" in seen
    assert any("progress callback failed" in rec.getMessage() for rec in caplog.records)


async def test_an_async_progress_callback_that_raises_keeps_receiving_events() -> None:
    seen: list[str] = []

    async def flaky(event: ProgressEvent) -> None:
        seen.append(event.kind)
        if event.kind == "tool_call_started":
            raise RuntimeError("consumer hiccup")

    src = source("app", tool("ping", const(1)))
    async with code_mode(src) as cm:
        r = await cm.run("await tools.app.ping({});\nreturn 1;", on_progress=flaky)
    assert r.ok
    assert seen == ["started", "tool_call_started", "tool_call_finished", "finished"]


async def test_a_slow_async_consumer_still_gets_the_finished_event_of_a_fast_run() -> None:
    seen: list[str] = []

    async def slow(event: ProgressEvent) -> None:
        await asyncio.sleep(0.01)  # every delivery takes a moment (a notification write)
        seen.append(event.kind)

    async with code_mode(source("app", tool("x", const(1)))) as cm:
        r = await cm.run("return 1;", on_progress=slow)
    assert r.ok
    assert seen == ["started", "finished"]
