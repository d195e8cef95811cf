"""A hostile MCP server over HTTP (Streamable HTTP with JSON or SSE replies, and legacy
SSE): one bad tool is set aside, never its source; one bad reply (too deep, too large,
a gzip bomb) fails its own call with the same stable code as over stdio, and the other
calls go on; a large reply in progress shows the source as degraded."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec
from codemodekit.nesting import MAX_NESTING
from tests.security._stall import assert_a_stalled_large_reply_degrades
from tests.servers import ServerProcess, free_port

SERVER = Path(__file__).parent.parent / "servers" / "hostile_http_mcp.py"
STYLES = ("json", "sse", "sse-crlf", "legacy")


@pytest.fixture(params=STYLES)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    style: str = request.param
    port = free_port()
    process = ServerProcess(
        [sys.executable, str(SERVER), "--port", str(port), "--style", style], port
    )
    process.start()
    try:
        if style == "legacy":
            yield f"http://127.0.0.1:{port}/sse", "sse"
        else:
            yield f"http://127.0.0.1:{port}/mcp", "streamable-http"
    finally:
        process.stop()


def _spec(tmp_path: Path, url: str, transport: str) -> Path:
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "hostile"\n[policy]\ndefault = "allow"\n'
        "[limits]\ntool_call_time_ms = 120000\nwall_time_ms = 120000\n"
        f'[sources.up]\ntype = "mcp"\nurl = {json.dumps(url)}\n'
        f'transport = "{transport}"\ntimeout_ms = 60000\n'
    )
    return tmp_path / "codemode.toml"


async def _still_serving(cm: CodeMode, why: object) -> None:
    ok = await cm.run("return (await tools.up.echo({text: 'still here'})).content[0].text;")
    assert ok.ok and ok.value == "still here", (why, ok.diagnostic)


async def test_hostile_http_replies_fail_their_own_call_only(
    tmp_path: Path, server: tuple[str, str]
) -> None:
    async with CodeMode.from_spec(load_spec(_spec(tmp_path, *server))) as cm:
        health = {h.source: h for h in cm.health}
        assert health["up"].status == "ok", health["up"]
        # The 900-level schema: that tool is set aside, with the bound named; the rest stay.
        skipped = {s.name: s.reason for s in cm.catalog.skipped}
        assert f"{MAX_NESTING} levels" in skipped.get("deep", ""), cm.catalog.skipped
        for name in ("echo", "nest", "huge", "bomb", "stall", "corrupt"):
            assert cm.catalog.get("up", name) is not None, name
        await _still_serving(cm, "listing")
        for depth in (MAX_NESTING + 5, 200, 300, 980, 3000, 20000):
            result = await cm.run(f"return await tools.up.nest({{depth: {depth}}});")
            assert result.diagnostic is not None, depth
            assert result.diagnostic.code == "TOOL_RESULT_INVALID", (depth, result.diagnostic)
            await _still_serving(cm, depth)
        # Below the reply bound (the provider's result bound answers), past it, far past it.
        for megabytes in (3, 20, 40):
            result = await cm.run(f"return await tools.up.huge({{mb: {megabytes}}});")
            assert result.diagnostic is not None, megabytes
            assert result.diagnostic.code == "TOOL_RESULT_TOO_LARGE", result.diagnostic
            await _still_serving(cm, megabytes)
        # A compressed body that expands past every bound is never expanded whole.
        result = await cm.run("return await tools.up.bomb({mb: 64});")
        assert result.diagnostic is not None
        assert result.diagnostic.code == "TOOL_RESULT_TOO_LARGE", result.diagnostic
        await _still_serving(cm, "bomb")
        # A body that does not decompress (legacy SSE: a message cut short) fails its call.
        result = await cm.run("return await tools.up.corrupt({});")
        assert result.diagnostic is not None
        assert result.diagnostic.code == "TOOL_RESULT_INVALID", result.diagnostic
        await _still_serving(cm, "corrupt")
        assert {h.source: h for h in cm.health}["up"].status == "ok"


async def test_a_stalled_large_http_reply_shows_the_source_degraded(
    tmp_path: Path, server: tuple[str, str]
) -> None:
    await assert_a_stalled_large_reply_degrades(_spec(tmp_path, *server), tmp_path / "go")


async def test_a_reply_cut_short_fails_its_own_call_only(
    tmp_path: Path, server: tuple[str, str]
) -> None:
    async with CodeMode.from_spec(load_spec(_spec(tmp_path, *server))) as cm:
        for _ in range(2):
            result = await cm.run("return await tools.up.cut({});")
            if server[1] == "sse" and result.ok:
                continue  # legacy SSE: the broken message is dropped, the honest one answers
            assert result.diagnostic is not None
            assert result.diagnostic.code != "SOURCE_UNAVAILABLE", result.diagnostic
            await _still_serving(cm, "cut")
