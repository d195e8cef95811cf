"""`codemode serve`: a client cancelling busy-looping programs, over stdio and Streamable HTTP."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from tests.servers import free_port

pytestmark = pytest.mark.slow

CONFIG = """
version = 1
name = "cancel-test"
[limits]
wall_time_ms = 600000
compute_time_ms = 600000
[policy]
default = "allow"
"""


@asynccontextmanager
async def _stdio(config: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemodekit", "serve", "-c", str(config)],
        cwd=str(config.parent),
    )
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


@asynccontextmanager
async def _http(config: Path) -> AsyncIterator[Client]:
    port = free_port()
    command = [sys.executable, "-m", "codemodekit", "serve", "-c", str(config)]
    process = subprocess.Popen(
        [*command, "--transport", "http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:  # the "serving at" line comes once it listens
            if " at http://" in line:
                break
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(streamable_http_client(url), read_timeout_seconds=120) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancelled_busy_loops_free_the_server(tmp_path: Path, transport: str) -> None:
    config = tmp_path / "codemode.toml"
    config.write_text(CONFIG)
    connect: Callable[[Path], AbstractAsyncContextManager[Client]] = (
        _stdio if transport == "stdio" else _http
    )
    async with connect(config) as client:
        # More cancelled infinite loops than a small worker pool has threads: if a
        # cancelled program kept its worker (until the 10-minute limits), the last
        # run below could not start.
        for _ in range(6):
            started = asyncio.Event()

            async def on_progress(_p: float, _t: float | None, _m: str | None) -> None:
                started.set()  # noqa: B023 - each loop awaits its own event before moving on

            call = asyncio.ensure_future(
                client.call_tool(
                    "run_typescript", {"code": "while (true) {}"}, progress_callback=on_progress
                )
            )
            await asyncio.wait_for(started.wait(), 60)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        after = await client.call_tool(
            "run_typescript", {"code": "return 6 * 7;"}, read_timeout_seconds=30
        )
    assert after.is_error is False
    assert after.structured_content is not None and after.structured_content["value"] == 42
