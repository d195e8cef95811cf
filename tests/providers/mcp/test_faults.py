"""Fault cases with real processes: crash, hang, garbage, invalid schema, down-and-back."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import HealthStatus
from codemodekit.spec.model import McpStdioSource, SecretTemplate
from tests.providers.mcp.helpers import Changes, context, eventually, provider
from tests.servers import pid_alive, stdio_source


async def test_missing_command_is_unavailable_and_health_says_why() -> None:
    config = McpStdioSource(name="ghost", command="/nonexistent/mcp-server-nowhere", args=("--x",))
    async with provider(config) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "ghost" in str(caught.value)
        assert "command was not found" in str(caught.value)
        health = mcp.health()
        assert health.status == HealthStatus.UNAVAILABLE
        # Retrying cannot fix a bad path: no background reconnect is promised (issue 20).
        assert "reconnect" not in health.message
        assert health.message.endswith("; fix it and restart codemode")
        with pytest.raises(SourceUnavailable):
            await mcp.call_tool("echo", {"text": "x"}, context())


async def test_missing_secret_names_the_key_not_a_value() -> None:
    config = McpStdioSource(
        name="needs",
        command=sys.executable,
        args=("-c", "pass"),
        env={"TOKEN": SecretTemplate("${CM_TEST_UNSET_TOKEN}", key="sources.needs.env.TOKEN")},
    )
    async with provider(config, environ={}) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "CM_TEST_UNSET_TOKEN" in str(caught.value)
        assert "sources.needs.env.TOKEN" in str(caught.value)
        assert mcp.health().status == HealthStatus.UNAVAILABLE


async def test_crash_mid_call_fails_the_call_reaps_the_child_and_reconnects(tmp_path: Path) -> None:
    changes = Changes()
    async with provider(stdio_source("crashy")) as mcp:
        await mcp.start(changes)
        pid = (await mcp.call_tool("pid", {}, context())).structured_content["result"]
        calls = tmp_path / "calls"
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.call_tool("crash", {"marker": str(calls)}, context())
        message = str(caught.value)
        assert "not retried" in message
        # The stderr tail is host-only: in health().detail (and the log), not the message.
        assert "fatal: crashing on purpose" not in message
        assert "correlation" in message
        assert "fatal: crashing on purpose" in mcp.health().detail
        await eventually(lambda: not pid_alive(pid), "the crashed child is reaped (no zombie)")
        await eventually(lambda: bool(changes.seen), "a reconnect announces the fresh discovery")
        assert mcp.health().status == HealthStatus.OK
        new_pid = (await mcp.call_tool("pid", {}, context())).structured_content["result"]
        assert new_pid != pid
        # Never replayed: the reconnected server did not see the failed call again.
        assert calls.read_text() == "called\n"


async def test_crash_while_down_stays_unavailable_then_comes_back(tmp_path: Path) -> None:
    down = tmp_path / "down"
    changes = Changes()
    async with provider(stdio_source("flaky", "--down-file", str(down))) as mcp:
        await mcp.start(changes)
        down.write_text("maintenance")
        with pytest.raises(SourceUnavailable):
            await mcp.call_tool("crash", {}, context())
        await eventually(
            lambda: "test server is down" in mcp.health().detail,
            "reconnect attempts report the stderr tail (host-only)",
        )
        assert mcp.health().status == HealthStatus.UNAVAILABLE
        with pytest.raises(SourceUnavailable) as fast:
            await mcp.call_tool("echo", {"text": "x"}, context())
        assert "flaky" in str(fast.value)
        down.unlink()
        await eventually(lambda: mcp.health().status == HealthStatus.OK, "the source came back")
        assert changes.seen and "echo" in {tool.name for tool in changes.seen[-1].tools}
        echoed = await mcp.call_tool("echo", {"text": "back"}, context())
        assert echoed.content[0]["text"] == "back"


async def test_server_down_at_start_reports_stderr_then_reconnects(tmp_path: Path) -> None:
    down = tmp_path / "down"
    down.write_text("x")
    changes = Changes()
    async with provider(stdio_source("late", "--down-file", str(down))) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(changes)
        assert "test server is down" not in str(caught.value)
        assert "test server is down" in mcp.health().detail
        down.unlink()
        await eventually(lambda: bool(changes.seen), "on_change after the background reconnect")
        assert mcp.health().status == HealthStatus.OK
        assert "echo" in {tool.name for tool in changes.seen[0].tools}


async def test_hanging_server_times_out_and_leaves_no_process() -> None:
    async with provider(stdio_source("hangs", "--fault", "hang", timeout_ms=1_500)) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "within 1.5s" in str(caught.value)
        assert "test server starting" in mcp.health().detail
    # aclose ran: nothing of ours is still running the hang script.
    assert not _children_running("--fault")


async def test_garbage_on_stdout_is_skipped_and_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with provider(stdio_source("noisy", "--fault", "garbage")) as mcp:
        discovery = await mcp.start(Changes())
        assert "this is not json" not in caplog.text
        assert "content not logged" in caplog.text
        assert "echo" in {tool.name for tool in discovery.tools}
        echoed = await mcp.call_tool("echo", {"text": "ok"}, context())
        assert echoed.content[0]["text"] == "ok"


async def test_invalid_schema_is_passed_through_for_the_catalog_to_quarantine() -> None:
    async with provider(stdio_source("odd", "--fault", "invalid-schema")) as mcp:
        discovery = await mcp.start(Changes())
        tools = {tool.name: tool for tool in discovery.tools}
        assert tools["broken"].input_schema["properties"]["x"]["type"] == "no-such-type"
        assert "echo" in tools
        assert (await mcp.call_tool("echo", {"text": "fine"}, context())).content[0][
            "text"
        ] == "fine"


async def test_aclose_during_reconnect_backoff_stops_everything(tmp_path: Path) -> None:
    down = tmp_path / "down"
    down.write_text("x")
    async with provider(stdio_source("never", "--down-file", str(down))) as mcp:
        with pytest.raises(SourceUnavailable):
            await mcp.start(Changes())
    assert mcp.health().status == HealthStatus.CLOSED
    down.unlink()
    assert not _children_running("--down-file")


def _children_running(flag: str) -> bool:
    """Whether a live (non-zombie) child of this process still runs the test server."""
    import os

    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z" and flag in cmdline:
            return True
    return False


async def test_stderr_tail_is_bounded_and_keeps_the_last_words(tmp_path: Path) -> None:
    down = tmp_path / "down"
    down.write_text("x")
    async with provider(
        stdio_source("loud", "--down-file", str(down), "--stderr-flood", "2000000")
    ) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        detail = mcp.health().detail
    message = str(caught.value)
    assert "test server is down" in detail
    assert len(message) < 1_500 and len(detail) < 1_500


async def test_secret_printed_on_stderr_is_masked(tmp_path: Path) -> None:
    down = tmp_path / "down"
    down.write_text("x")
    secret = "hunter2-secret-value"
    config = stdio_source(
        "leaky", "--down-file", str(down), "--stderr-env", "TOKEN", env={"TOKEN": "${CM_T}"}
    )
    async with provider(config, environ={"CM_T": secret}) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "token was ***" in mcp.health().detail
        assert secret not in str(caught.value) + mcp.health().detail
        assert secret not in mcp.health().message


async def test_endless_pagination_is_cut_off() -> None:
    async with provider(stdio_source("pages", "--fault", "endless-pages")) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "did not end within 100 pages" in str(caught.value)


async def test_a_tool_listed_twice_keeps_the_first_and_reports_the_second() -> None:
    async with provider(stdio_source("dupes", "--fault", "duplicate")) as mcp:
        discovery = await mcp.start(Changes())
        assert [tool.name for tool in discovery.tools].count("echo") == 1
        echo = next(tool for tool in discovery.tools if tool.name == "echo")
        assert echo.description == "Return the text unchanged."
        assert [skipped.name for skipped in discovery.skipped] == ["echo"]
        assert "skipped" in mcp.health().message


async def test_start_twice_is_a_programming_error() -> None:
    async with provider(stdio_source()) as mcp:
        await mcp.start(Changes())
        with pytest.raises(RuntimeError):
            await mcp.start(Changes())


async def test_server_that_never_lists_its_tools_times_out() -> None:
    async with provider(stdio_source("mute", "--fault", "hang-list", timeout_ms=2_000)) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "within 2s" in str(caught.value)
    assert not _children_running("hang-list")


async def test_aclose_during_a_pending_start_leaves_no_process() -> None:
    import asyncio

    async with provider(stdio_source("slowpoke", "--fault", "hang", timeout_ms=60_000)) as mcp:
        starting = asyncio.ensure_future(mcp.start(Changes()))
        await eventually(lambda: _children_running("hang"), "the server process was spawned")
        await mcp.aclose()
        with pytest.raises(SourceUnavailable) as caught:
            await starting
        assert "closed while connecting" in str(caught.value)
    assert not _children_running("--fault")
    assert mcp.health().status == HealthStatus.CLOSED


@pytest.mark.parametrize("flags", [(), ("--legacy",)], ids=["modern", "legacy"])
async def test_tools_malformed_for_the_protocol_do_not_take_their_siblings_down(
    flags: tuple[str, ...],
) -> None:
    async with provider(stdio_source("mixed", "--fault", "malformed-tools", *flags)) as mcp:
        discovery = await mcp.start(Changes())
        tools = {tool.name: tool for tool in discovery.tools}
        # Passed through as declared, for the catalog to quarantine one by one.
        assert tools["wrong_root"].input_schema == {"type": "array", "items": {}}
        assert tools["bad_props"].input_schema["properties"] == {"x": 5}
        (nameless,) = discovery.skipped
        assert "invalid tool definition at name" in nameless.reason
        assert (await mcp.call_tool("echo", {"text": "ok"}, context())).content[0]["text"] == "ok"


async def test_a_server_logging_to_stdout_gets_a_hint() -> None:
    # The server must start and print before the handshake times out: room for a busy machine.
    async with provider(stdio_source("chatty", "--fault", "only-garbage", timeout_ms=6_000)) as mcp:
        with pytest.raises(SourceUnavailable) as caught:
            await mcp.start(Changes())
        assert "not JSON-RPC" in str(caught.value)
        assert "logging to stdout" in str(caught.value)
    assert not _children_running("only-garbage")
