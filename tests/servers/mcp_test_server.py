"""A small real MCP server (``mcp.server.mcpserver.MCPServer``) for the provider tests.

Run it as a script; flags pick the transport and the fault to simulate::

    python tests/servers/mcp_test_server.py                       # stdio
    python tests/servers/mcp_test_server.py --transport http --port 8123
    python tests/servers/mcp_test_server.py --legacy              # no server/discover: 2025-11-25 only
    python tests/servers/mcp_test_server.py --fault garbage       # junk lines on stdout first
    python tests/servers/mcp_test_server.py --fault hang          # never answers anything
    python tests/servers/mcp_test_server.py --fault invalid-schema
    python tests/servers/mcp_test_server.py --down-file F         # exit at start while F exists
    python tests/servers/mcp_test_server.py --gate F              # serve only once F exists

Tools: ``echo``, ``add`` (output schema), ``progress``, ``slow`` (writes a marker file when
cancelled), ``fail`` (``isError``), ``media`` (image, audio, resource link, embedded
resources), ``pid``, ``big``, ``crash`` (the process dies mid-call), ``secret_env`` and
``grow`` (adds a tool and announces ``tools/list_changed``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


class Sum(BaseModel):
    total: int
    inputs: list[int]


class TestServer(MCPServer):
    """Paginates ``tools/list`` and can append a tool whose schema is invalid."""

    page_size: int = 0
    invalid_schema: bool = False
    fault: str = "none"

    async def _handle_list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> Any:
        tools = await self.list_tools()
        cursor = params.cursor if params is not None else None
        if self.fault == "hang-list":
            await asyncio.sleep(3600)  # answers the handshake, never tools/list
        if self.fault == "endless-pages":
            # Every page points at a new one: a client must stop on its own.
            return types.ListToolsResult(tools=tools[:1], next_cursor=str(int(cursor or 0) + 1))
        if self.fault == "duplicate":
            second = types.Tool(
                name="echo", description="a second echo", input_schema={"type": "object"}
            )
            tools.append(second)
        if self.invalid_schema:
            tools.append(
                types.Tool(
                    name="broken",
                    description="declares a property type that does not exist",
                    input_schema={"type": "object", "properties": {"x": {"type": "no-such-type"}}},
                )
            )
        if self.page_size <= 0:
            return types.ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        next_cursor = str(end) if end < len(tools) else None
        return types.ListToolsResult(tools=tools[start:end], next_cursor=next_cursor)


def build(args: argparse.Namespace) -> TestServer:
    server = TestServer("codemodekit-test-server", version="1.0.0")
    server.page_size = args.page_size
    server.invalid_schema = args.fault == "invalid-schema"
    server.fault = args.fault
    # A later "release" of this server (lock drift tests): one tool added, one removed, one
    # changed. Read from the environment so the spec's command and args stay the same.
    v2 = os.environ.get("CODEMODE_TEST_SERVER_VARIANT") == "v2"

    @server.tool(
        annotations=types.ToolAnnotations(read_only_hint=True, title="Echo"),
        description="Return the text unchanged, trimmed." if v2 else "Return the text unchanged.",
    )
    def echo(text: str) -> str:
        return text

    if v2:

        @server.tool()
        def ping() -> str:
            """Answer pong."""
            return "pong"

    @server.tool(structured_output=True)
    def add(a: int, b: int) -> Sum:
        """Add two integers."""
        return Sum(total=a + b, inputs=[a, b])

    @server.tool()
    async def progress(steps: int, ctx: Context, note: str = "") -> str:
        """Report progress ``steps`` times (each message followed by ``note``)."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}{note}")
            await asyncio.sleep(0.01)
        return f"done after {steps} steps"

    @server.tool()
    async def slow(seconds: float, marker: str = "", started: str = "") -> str:
        """Sleep; write 'started' to ``started`` first; when cancelled upstream, write
        'cancelled' to ``marker``."""
        if started:
            Path(started).write_text("started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if marker:
                Path(marker).write_text("cancelled")
            raise
        return "slept"

    @server.tool()
    def fail(message: str) -> str:
        """Always refuses with ``message`` (an ``isError`` result)."""
        raise ToolError(message)

    @server.tool()
    def media() -> types.CallToolResult:
        """Every content block kind."""
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="caption"),
                types.ImageContent(
                    type="image", data=base64.b64encode(PNG_1PX).decode(), mime_type="image/png"
                ),
                types.AudioContent(
                    type="audio", data=base64.b64encode(b"RIFF0000").decode(), mime_type="audio/wav"
                ),
                types.ResourceLink(
                    type="resource_link",
                    uri="file:///tmp/report.txt",
                    name="report",
                    mime_type="text/plain",
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="memo://a", mime_type="text/plain", text="hello"
                    ),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="memo://b",
                        mime_type="application/octet-stream",
                        blob=base64.b64encode(b"\x00\x01").decode(),
                    ),
                ),
            ],
            _meta={"upstream/trace": "abc"},
        )

    @server.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    if v2:
        server.remove_tool("pid")

    @server.tool()
    def cwd() -> str:
        """This server's working directory."""
        return os.getcwd()

    @server.tool()
    def big(size: int) -> str:
        """A text block of ``size`` characters."""
        return "x" * size

    @server.tool()
    def crash(marker: str = "") -> str:
        """Die in the middle of the call (after appending one line to ``marker``)."""
        if marker:
            with open(marker, "a") as handle:
                handle.write("called\n")
        sys.stderr.write("fatal: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(7)

    @server.tool()
    def secret_env(name: str) -> bool:
        """Whether an environment variable reached this process (never its value)."""
        return name in os.environ

    @server.tool()
    def has_header(name: str, ctx: Context) -> bool:
        """Whether the HTTP request carried header ``name`` (never its value)."""
        return name.lower() in {key.lower() for key in (ctx.headers or {})}

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Register a new tool named ``name`` and announce the list change."""
        server.add_tool(lambda: name, name=name, description=f"added at run time: {name}")
        if ctx.protocol_version in ("2026-07-28",):
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        return "grown"

    return server


MALFORMED_TOOLS = [
    # Malformed for the protocol itself, not only as JSON Schema: the SDK server would refuse
    # to send them, so they are added to the answer on its way out.
    {"name": "wrong_root", "inputSchema": {"type": "array", "items": {}}},
    {"name": "bad_props", "inputSchema": {"type": "object", "properties": {"x": 5}}},
    {"description": "no name at all", "inputSchema": {"type": "object"}},
]


class _Rewriter:
    """Write stream that edits answers on their way to the client."""

    def __init__(self, inner: Any, announce: str, malformed: bool) -> None:
        self._inner = inner
        self._announce = announce
        self._malformed = malformed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse):
            if self._announce and "protocolVersion" in message.result:
                message.result["protocolVersion"] = self._announce
            if self._malformed and isinstance(message.result.get("tools"), list):
                message.result["tools"] = [*message.result["tools"], *MALFORMED_TOOLS]
        await self._inner.send(item)

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


async def run_stdio(
    server: MCPServer, *, legacy: bool, announce: str = "", malformed: bool = False
) -> None:
    """Serve stdio through the SDK's own loop, with optional edits:

    - ``legacy``: a 2025-era server; ``server/discover`` is answered "method not found"
      before the SDK sees it, so a client in auto mode falls back to ``initialize``;
    - ``announce``: the ``initialize`` answer names that protocol version instead;
    - ``malformed``: every ``tools/list`` answer also carries ``MALFORMED_TOOLS``.
    """
    import anyio
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, raw_write_stream):
        write_stream = _Rewriter(raw_write_stream, announce, malformed)
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)

        async def filter_discover() -> None:
            async with send:
                async for item in read_stream:
                    message = getattr(item, "message", None)
                    if (
                        legacy
                        and isinstance(message, types.JSONRPCRequest)
                        and message.method == "server/discover"
                    ):
                        error = types.JSONRPCError(
                            jsonrpc="2.0",
                            id=message.id,
                            error=types.ErrorData(
                                code=types.METHOD_NOT_FOUND, message="Method not found"
                            ),
                        )
                        await write_stream.send(SessionMessage(error))
                        continue
                    await send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(filter_discover)
            options = lowlevel.create_initialization_options(
                NotificationOptions(tools_changed=True)
            )
            await lowlevel.run(receive, write_stream, options)
            tg.cancel_scope.cancel()


class Echoed(BaseModel):
    message: str


class Slept(BaseModel):
    slept: float


def build_conformance() -> MCPServer:
    """The three tools the shared provider conformance suite expects."""
    server = MCPServer("codemodekit-conformance", version="1.0.0")

    @server.tool(structured_output=True)
    def echo(message: str) -> Echoed:
        """Echo a message back."""
        return Echoed(message=message)

    @server.tool()
    def fail() -> str:
        """Always refuses."""
        raise ToolError("the tool refused: nothing to do")

    @server.tool(structured_output=True)
    async def slow(seconds: float) -> Slept:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return Slept(slept=seconds)

    return server


def serve_with_required_header(server: MCPServer, port: int, requirement: str) -> None:
    """Streamable HTTP that answers 401 unless the request carries ``NAME=VALUE``."""
    import uvicorn
    from starlette.types import Receive, Scope, Send

    name, _, value = requirement.partition("=")
    app = server.streamable_http_app()
    wanted = (name.lower().encode(), value.encode())

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and wanted not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument(
        "--announce-version", default="", help="with --legacy: answer initialize with this version"
    )
    parser.add_argument(
        "--fault",
        choices=[
            "none",
            "garbage",
            "hang",
            "invalid-schema",
            "endless-pages",
            "duplicate",
            "hang-list",
            "malformed-tools",
            "only-garbage",
        ],
        default="none",
    )
    parser.add_argument("--down-file", default="")
    parser.add_argument("--gate", default="", help="start serving only once this file exists")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--profile", choices=["full", "conformance"], default="full")
    parser.add_argument(
        "--stderr-flood", type=int, default=0, help="bytes of stderr noise when down"
    )
    parser.add_argument(
        "--stderr-env", default="", help="print this variable's value to stderr when down"
    )
    parser.add_argument(
        "--require-header", default="", help="NAME=VALUE the HTTP server demands (else 401)"
    )
    args = parser.parse_args()

    if args.down_file and Path(args.down_file).exists():
        if args.stderr_flood:
            sys.stderr.write(("noise " * 20 + "\n") * (args.stderr_flood // 121 + 1))
        if args.stderr_env:
            sys.stderr.write(f"token was {os.environ.get(args.stderr_env, '')}\n")
        sys.stderr.write(f"test server is down: {args.down_file} exists\n")
        sys.exit(3)
    sys.stderr.write("test server starting\n")
    sys.stderr.flush()
    while args.gate and not Path(args.gate).exists():
        time.sleep(0.02)  # a server still connecting, as long as the test wants
    if args.fault == "hang":
        # Read and ignore everything: the client's handshake never gets an answer.
        for _line in sys.stdin:
            pass
        return
    if args.fault == "only-garbage":
        # A server that logs to stdout and never speaks the protocol.
        for line in range(100_000):
            sys.stdout.write(f"INFO starting up, step {line}\n")
            sys.stdout.flush()
            time.sleep(0.05)
        return
    if args.fault == "garbage":
        sys.stdout.write("this is not json\n{broken\n")
        sys.stdout.flush()

    server: MCPServer = build(args) if args.profile == "full" else build_conformance()
    malformed = args.fault == "malformed-tools"
    if args.transport == "stdio" and (args.legacy or malformed):
        asyncio.run(
            run_stdio(
                server, legacy=args.legacy, announce=args.announce_version, malformed=malformed
            )
        )
    elif args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "http" and args.require_header:
        serve_with_required_header(server, args.port, args.require_header)
    elif args.transport == "http":
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        server.run("sse", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
