"""McpToolProvider overhead against a direct ``mcp.Client`` on the same local server.

    python benchmarks/bench_mcp.py [--connects 10] [--calls 300]

For stdio (the test server as a child process) and Streamable HTTP (the same server on a
free 127.0.0.1 port), in one run:

- connect+list: ``provider.start()`` vs ``async with Client(...)`` + ``list_tools()``
  (closing is not timed);
- per call: ``provider.call_tool("echo")`` vs ``client.call_tool("echo")`` on one
  connection.

Prints medians and the provider/direct ratio. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from tests.servers import SERVER_SCRIPT, http_server, http_source, stdio_source

from codemodekit.limits import Limits
from codemodekit.providers.base import CallContext
from codemodekit.providers.mcp.provider import McpToolProvider
from codemodekit.spec.model import McpHttpSource, McpStdioSource

CONTEXT = CallContext(execution_id="bench", call_id=1, timeout_s=30.0, max_result_bytes=1 << 20)
ARGS = {"text": "hello"}


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


def direct_target(config: McpStdioSource | McpHttpSource) -> Any:
    if isinstance(config, McpStdioSource):
        return StdioServerParameters(command=sys.executable, args=[str(SERVER_SCRIPT)])
    return config.url


async def connect_list(
    config: McpStdioSource | McpHttpSource, rounds: int
) -> tuple[list[float], list[float]]:
    ours: list[float] = []
    direct: list[float] = []
    for _ in range(rounds):
        provider = McpToolProvider(config, limits=Limits())
        ours.append(await timed(lambda p=provider: p.start(lambda _d: None)))
        await provider.aclose()

        client = Client(direct_target(config), cache=None)

        async def enter_and_list(c: Client = client) -> None:
            await c.__aenter__()
            await c.list_tools()

        direct.append(await timed(enter_and_list))
        await client.__aexit__(None, None, None)
    return ours, direct


async def calls(
    config: McpStdioSource | McpHttpSource, rounds: int
) -> tuple[list[float], list[float]]:
    provider = McpToolProvider(config, limits=Limits())
    await provider.start(lambda _d: None)
    ours: list[float] = []
    direct: list[float] = []
    async with Client(direct_target(config), cache=None) as client:
        await client.list_tools()
        for _ in range(20):  # warm both paths
            await provider.call_tool("echo", ARGS, CONTEXT)
            await client.call_tool("echo", ARGS)
        for _ in range(rounds):
            ours.append(await timed(lambda: provider.call_tool("echo", ARGS, CONTEXT)))
            direct.append(await timed(lambda: client.call_tool("echo", ARGS)))
    await provider.aclose()
    return ours, direct


def report(label: str, ours: list[float], direct: list[float]) -> None:
    a, b = statistics.median(ours), statistics.median(direct)
    print(f"{label:<28} provider {a:8.3f} ms   direct mcp.Client {b:8.3f} ms   ratio {a / b:5.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connects", type=int, default=10)
    parser.add_argument("--calls", type=int, default=300)
    options = parser.parse_args()

    stdio = stdio_source("bench")
    report("stdio connect+list", *await connect_list(stdio, options.connects))
    report("stdio call (echo)", *await calls(stdio, options.calls))
    with http_server() as server:
        http = http_source("bench", f"http://127.0.0.1:{server.port}/mcp")
        report("http connect+list", *await connect_list(http, options.connects))
        report("http call (echo)", *await calls(http, options.calls))


if __name__ == "__main__":
    asyncio.run(main())
