"""McpToolProvider over stdio against the real test server (both protocol eras)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codemodekit.errors import SourceUnavailable, ToolError
from codemodekit.providers.base import HealthStatus, ResultTooLarge, ToolProvider
from codemodekit.providers.mcp.content import DRAFT_07, DRAFT_2020_12
from codemodekit.providers.mcp.provider import McpToolProvider
from tests.providers.mcp.helpers import Changes, context, eventually, provider
from tests.servers import pid_alive, stdio_source

ERAS = pytest.mark.parametrize(
    ("flags", "version"),
    [((), "2026-07-28"), (("--legacy",), "2025-11-25")],
    ids=["modern", "legacy"],
)


@ERAS
async def test_discovery_passes_schemas_and_keeps_sideband_host_side(
    flags: tuple[str, ...], version: str
) -> None:
    async with provider(stdio_source("up", *flags)) as mcp:
        assert isinstance(mcp, ToolProvider)
        assert mcp.health().status == HealthStatus.CONNECTING
        discovery = await mcp.start(Changes())
        assert mcp.protocol_version == version
        tools = {tool.name: tool for tool in discovery.tools}
        assert {"echo", "add", "progress", "slow", "fail", "media"} <= set(tools)
        echo = tools["echo"]
        assert echo.input_schema["properties"]["text"]["type"] == "string"
        assert echo.annotations["readOnlyHint"] is True
        assert echo.annotations["title"] == "Echo"
        assert tools["add"].output_schema is not None
        assert tools["add"].output_schema["properties"]["total"]["type"] == "integer"
        assert tools["media"].output_schema is None
        assert echo.provenance["protocol_version"] == version
        assert echo.provenance["transport"] == "stdio"
        assert echo.provenance["server"]["name"] == "codemodekit-test-server"
        # 2025-11-25 made JSON Schema 2020-12 the default dialect of tool schemas.
        assert echo.default_dialect == DRAFT_2020_12
        health = mcp.health()
        assert health.status == HealthStatus.OK
        assert health.tools == len(discovery.tools)
        assert version in health.message


async def test_pagination_is_followed() -> None:
    async with provider(stdio_source("paged", "--page-size", "3")) as mcp:
        discovery = await mcp.start(Changes())
        names = [tool.name for tool in discovery.tools]
        assert len(names) == len(set(names)) >= 12
        assert "grow" in names


@ERAS
async def test_text_structured_and_rich_content(flags: tuple[str, ...], version: str) -> None:
    async with provider(stdio_source("up", *flags)) as mcp:
        await mcp.start(Changes())
        echoed = await mcp.call_tool("echo", {"text": "héllo"}, context())
        assert echoed.content == ({"type": "text", "text": "héllo"},)
        assert echoed.structured_content == {"result": "héllo"}

        added = await mcp.call_tool("add", {"a": 2, "b": 3}, context())
        assert added.structured_content == {"total": 5, "inputs": [2, 3]}

        media = await mcp.call_tool("media", {}, context())
        assert media.structured_content is None
        kinds = [block["type"] for block in media.content]
        assert kinds == ["text", "image", "audio", "resource_link", "resource", "resource"]
        image, audio, link, text_resource, blob_resource = media.content[1:]
        assert image["mimeType"] == "image/png" and image["data"].startswith("iVBOR")
        assert audio == {"type": "audio", "mimeType": "audio/wav", "data": "UklGRjAwMDA="}
        assert link["uri"] == "file:///tmp/report.txt" and link["name"] == "report"
        assert text_resource == {
            "type": "resource",
            "resource": {"uri": "memo://a", "mimeType": "text/plain", "text": "hello"},
        }
        assert blob_resource["resource"]["blob"] == "AAE="
        # Opaque _meta of the result never reaches the computation-facing output.
        assert "upstream/trace" not in repr(media)


async def test_is_error_becomes_tool_error_with_upstream_text() -> None:
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        with pytest.raises(ToolError) as caught:
            await mcp.call_tool("fail", {"message": "no such invoice"}, context())
        assert "no such invoice" in caught.value.message
        # The provider stays usable.
        again = await mcp.call_tool("echo", {"text": "still here"}, context())
        assert again.content[0]["text"] == "still here"


async def test_long_upstream_error_is_bounded() -> None:
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        with pytest.raises(ToolError) as caught:
            await mcp.call_tool("fail", {"message": "e" * 50_000}, context())
        assert len(caught.value.message) <= 2_000
        assert caught.value.message.endswith("(truncated)")


async def test_protocol_error_for_unknown_tool_is_a_tool_error() -> None:
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        with pytest.raises(ToolError):
            await mcp.call_tool("no_such_tool", {}, context())
        assert mcp.health().status == HealthStatus.OK


@ERAS
async def test_upstream_progress_is_reported_as_short_text(
    flags: tuple[str, ...], version: str
) -> None:
    async with provider(stdio_source("up", *flags)) as mcp:
        await mcp.start(Changes())
        progress: list[str] = []
        output = await mcp.call_tool("progress", {"steps": 3}, context(progress=progress))
        assert output.content[0]["text"] == "done after 3 steps"
        assert progress == ["1/3 step 1 of 3", "2/3 step 2 of 3", "3/3 step 3 of 3"]


@ERAS
async def test_timeout_cancels_the_upstream_call(
    flags: tuple[str, ...], version: str, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    async with provider(stdio_source("up", *flags)) as mcp:
        await mcp.start(Changes())
        with pytest.raises(TimeoutError):
            await mcp.call_tool(
                "slow", {"seconds": 60, "marker": str(marker)}, context(timeout_s=0.5)
            )
        # notifications/cancelled reached the server: its handler was cancelled.
        await eventually(marker.exists, "the upstream handler was cancelled")
        assert (await mcp.call_tool("echo", {"text": "next"}, context())).content[0][
            "text"
        ] == "next"


async def test_cancelling_the_caller_cancels_the_upstream_call(tmp_path: Path) -> None:
    marker, started = tmp_path / "cancelled", tmp_path / "started"
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        arguments = {"seconds": 60, "marker": str(marker), "started": str(started)}
        task = asyncio.ensure_future(mcp.call_tool("slow", arguments, context()))
        await eventually(started.exists, "the upstream received the call")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(marker.exists, "the upstream handler was cancelled")
        assert mcp.health().status == HealthStatus.OK


async def test_result_over_the_limit_raises_result_too_large() -> None:
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        with pytest.raises(ResultTooLarge):
            await mcp.call_tool("big", {"size": 5_000}, context(max_result_bytes=4_096))
        small = await mcp.call_tool("big", {"size": 10}, context(max_result_bytes=4_096))
        assert small.content[0]["text"] == "x" * 10


async def test_concurrent_calls_share_one_connection() -> None:
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        outputs = await asyncio.gather(
            *(mcp.call_tool("add", {"a": i, "b": i}, context(i)) for i in range(8))
        )
        assert [o.structured_content["total"] for o in outputs] == [2 * i for i in range(8)]


async def test_env_reaches_the_child_and_its_value_never_shows() -> None:
    secret = "s3cr3t-token-value"
    config = stdio_source("envy", env={"UPSTREAM_TOKEN": "${MY_TOKEN}"})
    async with provider(config, environ={"MY_TOKEN": secret}) as mcp:
        await mcp.start(Changes())
        present = await mcp.call_tool("secret_env", {"name": "UPSTREAM_TOKEN"}, context())
        assert present.structured_content == {"result": True}
        # The upstream echoes the value in a refusal: the model-visible message masks it.
        with pytest.raises(ToolError) as caught:
            await mcp.call_tool("fail", {"message": f"bad token {secret}"}, context())
        assert secret not in caught.value.message
        assert secret not in repr(mcp) and secret not in mcp.health().message


async def test_host_environment_is_not_inherited_wholesale() -> None:
    async with provider(stdio_source(), environ={}) as mcp:
        await mcp.start(Changes())
        # Only the SDK's short allow-list (PATH, HOME...) plus the declared env reach the child.
        leaked = await mcp.call_tool("secret_env", {"name": "PYTEST_CURRENT_TEST"}, context())
        assert leaked.structured_content == {"result": False}


@ERAS
async def test_tools_list_changed_triggers_rediscovery(
    flags: tuple[str, ...], version: str
) -> None:
    changes = Changes()
    async with provider(stdio_source("up", *flags)) as mcp:
        await mcp.start(changes)
        await mcp.call_tool("grow", {"name": "sprouted"}, context())
        await eventually(lambda: bool(changes.seen), "on_change after tools/list_changed")
        assert "sprouted" in {tool.name for tool in changes.seen[-1].tools}
        assert mcp.health().tools == len(changes.seen[-1].tools)


async def test_aclose_terminates_the_child_and_is_idempotent() -> None:
    mcp = McpToolProvider(stdio_source(), limits=__import__("codemodekit").Limits())
    await mcp.start(Changes())
    pid = (await mcp.call_tool("pid", {}, context())).structured_content["result"]
    assert pid_alive(pid)
    await mcp.aclose()
    assert not pid_alive(pid)
    await mcp.aclose()
    assert mcp.health().status == HealthStatus.CLOSED
    with pytest.raises(SourceUnavailable):
        await mcp.call_tool("echo", {"text": "x"}, context())


async def test_an_older_protocol_selects_the_draft_07_default_dialect() -> None:
    async with provider(stdio_source("old", "--legacy", "--announce-version", "2025-06-18")) as mcp:
        discovery = await mcp.start(Changes())
        assert mcp.protocol_version == "2025-06-18"
        echo = next(tool for tool in discovery.tools if tool.name == "echo")
        assert echo.default_dialect == DRAFT_07
        assert (await mcp.call_tool("echo", {"text": "old"}, context())).content[0]["text"] == "old"


async def test_a_protocol_version_the_client_does_not_know_is_unavailable() -> None:
    async with provider(
        stdio_source("future", "--legacy", "--announce-version", "2099-01-01")
    ) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "future" in str(caught.value)
        assert mcp.health().status == HealthStatus.UNAVAILABLE


async def test_progress_text_is_bounded_and_free_of_control_characters() -> None:
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        progress: list[str] = []
        note = " \x1b[31mred\x1b[0m\nnext line " + "y" * 1_000
        await mcp.call_tool("progress", {"steps": 1, "note": note}, context(progress=progress))
        (text,) = progress
        assert text.startswith("1/1 step 1 of 1 red next line")
        assert len(text) <= 200 and text.endswith("(truncated)")
        assert not any(ord(ch) < 32 for ch in text)
