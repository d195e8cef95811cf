"""Shared helpers for the MCP provider tests (no fixtures hidden elsewhere)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping

from codemodekit.limits import Limits
from codemodekit.providers.base import CallContext, Discovery
from codemodekit.providers.mcp.provider import McpToolProvider, ReconnectPolicy
from codemodekit.spec.model import McpHttpSource, McpStdioSource

FAST_RECONNECT = ReconnectPolicy(initial_s=0.05, max_s=0.5)


def context(
    call_id: int = 1,
    *,
    timeout_s: float = 20.0,
    max_result_bytes: int = 1 << 20,
    progress: list[str] | None = None,
) -> CallContext:
    sink = progress if progress is not None else []
    return CallContext(
        execution_id="test",
        call_id=call_id,
        timeout_s=timeout_s,
        max_result_bytes=max_result_bytes,
        report_progress=sink.append,
    )


class Changes:
    """Collects ``on_change`` discoveries."""

    def __init__(self) -> None:
        self.seen: list[Discovery] = []

    def __call__(self, discovery: Discovery) -> None:
        self.seen.append(discovery)


@contextlib.asynccontextmanager
async def provider(
    config: McpStdioSource | McpHttpSource,
    *,
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[McpToolProvider]:
    mcp = McpToolProvider(config, limits=Limits(), environ=environ, reconnect=FAST_RECONNECT)
    try:
        yield mcp
    finally:
        await mcp.aclose()


async def eventually(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Wait for ``condition``; the timeout only keeps a broken build from hanging."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.02)
    assert condition(), what
