"""Behaviour every ToolProvider must show, through the protocol and through CodeMode."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from codemodekit import CodeMode, ErrorCode, Limits, ToolError, allow_all_tool_calls
from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import CallContext, HealthStatus, ToolOutput
from tests.conformance.providers.factories import FACTORIES, ProviderFactory

pytestmark = pytest.mark.parametrize("factory", list(FACTORIES.values()), ids=list(FACTORIES))


def context(call_id: int = 1, timeout_s: float = 30.0) -> CallContext:
    return CallContext(
        execution_id="conformance", call_id=call_id, timeout_s=timeout_s, max_result_bytes=1 << 20
    )


def _structured(output: ToolOutput) -> Any:
    if output.structured_content is not None:
        return output.structured_content
    # A source without structured output may answer with one JSON text block.
    texts = [b["text"] for b in output.content if b.get("type") == "text"]
    return json.loads(texts[0]) if texts else None


async def test_discovers_the_fixture_tools(factory: ProviderFactory) -> None:
    async with factory("conf") as provider:
        try:
            discovery = await provider.start(lambda _d: None)
            names = {t.name for t in discovery.tools}
            assert {"echo", "fail", "slow"} <= names
            echo = next(t for t in discovery.tools if t.name == "echo")
            assert echo.input_schema.get("type") == "object"
            assert "message" in echo.input_schema.get("properties", {})
            assert provider.health().status == HealthStatus.OK
            assert provider.name == "conf"
        finally:
            await provider.aclose()


async def test_call_returns_the_tool_value(factory: ProviderFactory) -> None:
    async with factory("conf") as provider:
        try:
            await provider.start(lambda _d: None)
            output = await provider.call_tool("echo", {"message": "héllo"}, context())
            assert isinstance(output, ToolOutput)
            assert _structured(output) == {"message": "héllo"}
        finally:
            await provider.aclose()


async def test_refusal_is_a_tool_error_with_its_message(factory: ProviderFactory) -> None:
    async with factory("conf") as provider:
        try:
            await provider.start(lambda _d: None)
            with pytest.raises(ToolError) as caught:
                await provider.call_tool("fail", {}, context())
            assert "refused" in caught.value.message
        finally:
            await provider.aclose()


async def test_cancelling_a_call_leaves_the_provider_usable(factory: ProviderFactory) -> None:
    async with factory("conf") as provider:
        try:
            await provider.start(lambda _d: None)
            task = asyncio.ensure_future(provider.call_tool("slow", {"seconds": 30}, context(1)))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            output = await provider.call_tool("echo", {"message": "after"}, context(2))
            assert _structured(output) == {"message": "after"}
        finally:
            await provider.aclose()


async def test_close_is_idempotent_and_calls_after_close_fail(factory: ProviderFactory) -> None:
    async with factory("conf") as provider:
        await provider.start(lambda _d: None)
        await provider.aclose()
        await provider.aclose()
        assert provider.health().status in (HealthStatus.CLOSED, HealthStatus.UNAVAILABLE)
        with pytest.raises((SourceUnavailable, ToolError)):
            await provider.call_tool("echo", {"message": "x"}, context())


async def test_end_to_end_through_code_mode(factory: ProviderFactory) -> None:
    async with factory("conf") as provider:
        cm = CodeMode(
            sources=[provider],
            policy=allow_all_tool_calls(),
            limits=Limits(tool_call_time_ms=20_000),
        )
        async with cm:
            ok = await cm.run(
                "const r = await tools.conf.echo({ message: 'hi' });\n"
                "return r.structuredContent ?? JSON.parse(r.content[0].text);"
            )
            assert ok.ok, ok.diagnostic
            assert ok.value == {"message": "hi"}
            refused = await cm.run("await tools.conf.fail({});\nreturn 1;")
            assert not refused.ok and refused.diagnostic is not None
            assert refused.diagnostic.code == ErrorCode.TOOL_ERROR
            assert "refused" in refused.diagnostic.message
            caught = await cm.run(
                "try { await tools.conf.fail({}); } catch (e) { return [e.code, e.tool]; }"
            )
            assert caught.value == ["TOOL_ERROR", "tools.conf.fail"]
