"""Provider factories for the conformance suite.

Every factory is an async context manager ``factory(name) -> ToolProvider`` whose provider
(not yet started) exposes at least these three tools:

- ``echo``  input ``{"message": string}`` (required); returns structured content
  ``{"message": <same>}``.
- ``fail``  input ``{}``; refuses with a ToolError whose message contains ``refused``.
- ``slow``  input ``{"seconds": number}``; sleeps that long, then returns ``{"slept": seconds}``.

A new provider kind joins the suite by adding its factory to ``FACTORIES``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from codemodekit import ToolError, define_tool, local
from codemodekit.providers.base import CallContext, ToolProvider, ToolSpec
from codemodekit.providers.memory import InMemoryProvider, MemoryTool

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}},
    "required": ["message"],
    "additionalProperties": False,
}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
SLOW_SCHEMA = {
    "type": "object",
    "properties": {"seconds": {"type": "number"}},
    "required": ["seconds"],
}

ProviderFactory = Callable[[str], contextlib.AbstractAsyncContextManager[ToolProvider]]


@contextlib.asynccontextmanager
async def local_factory(name: str) -> AsyncIterator[ToolProvider]:
    def fail(_args: dict[str, Any]) -> None:
        raise ToolError("the tool refused: nothing to do")

    async def slow(args: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(args["seconds"])
        return {"slept": args["seconds"]}

    yield local(
        name,
        {
            "echo": define_tool(
                description="Echo a message back.",
                input_schema=ECHO_SCHEMA,
                execute=lambda args: {"message": args["message"]},
            ),
            "fail": define_tool(
                description="Always refuses.", input_schema=EMPTY_SCHEMA, execute=fail
            ),
            "slow": define_tool(
                description="Sleep, then answer.", input_schema=SLOW_SCHEMA, execute=slow
            ),
        },
    )


@contextlib.asynccontextmanager
async def memory_factory(name: str) -> AsyncIterator[ToolProvider]:
    def fail(_args: dict[str, Any], _ctx: CallContext) -> None:
        raise ToolError("the tool refused: nothing to do")

    async def slow(args: dict[str, Any], _ctx: CallContext) -> dict[str, Any]:
        await asyncio.sleep(args["seconds"])
        return {"slept": args["seconds"]}

    yield InMemoryProvider(
        name,
        {
            "echo": MemoryTool(
                ToolSpec("echo", "Echo a message back.", ECHO_SCHEMA),
                lambda args, _ctx: {"message": args["message"]},
            ),
            "fail": MemoryTool(ToolSpec("fail", "Always refuses.", EMPTY_SCHEMA), fail),
            "slow": MemoryTool(ToolSpec("slow", "Sleep, then answer.", SLOW_SCHEMA), slow),
        },
    )


@contextlib.asynccontextmanager
async def mcp_stdio_factory(name: str) -> AsyncIterator[ToolProvider]:
    """The MCP test server (conformance profile) as a child process over stdio."""
    from codemodekit import Limits
    from codemodekit.providers.mcp.provider import McpToolProvider
    from tests.servers import stdio_source

    yield McpToolProvider(stdio_source(name, "--profile", "conformance"), limits=Limits())


@contextlib.asynccontextmanager
async def mcp_http_factory(name: str) -> AsyncIterator[ToolProvider]:
    """The same server over Streamable HTTP on a free 127.0.0.1 port."""
    from codemodekit import Limits
    from codemodekit.providers.mcp.provider import McpToolProvider
    from tests.servers import http_server, http_source

    with http_server("--profile", "conformance") as server:
        url = f"http://127.0.0.1:{server.port}/mcp"
        yield McpToolProvider(http_source(name, url), limits=Limits())


@contextlib.asynccontextmanager
async def mcp_sse_factory(name: str) -> AsyncIterator[ToolProvider]:
    """The same server over the legacy SSE transport."""
    from codemodekit import Limits
    from codemodekit.providers.mcp.provider import McpToolProvider
    from tests.servers import http_server, http_source

    with http_server("--profile", "conformance", transport="sse") as server:
        url = f"http://127.0.0.1:{server.port}/sse"
        yield McpToolProvider(http_source(name, url, transport="sse"), limits=Limits())


FACTORIES: dict[str, ProviderFactory] = {
    "python": local_factory,
    "memory": memory_factory,
    "mcp-stdio": mcp_stdio_factory,
    "mcp-http": mcp_http_factory,
    "mcp-sse": mcp_sse_factory,
}


def _register_openapi() -> None:
    from tests.conformance.providers.openapi_factory import openapi_factory

    FACTORIES["openapi"] = openapi_factory


_register_openapi()
