"""Hosting the Code Mode MCP server: stdio and Streamable HTTP (behind ``codemode serve``).

``create_server(code_mode)`` builds a low-level ``mcp`` server with the two Code Mode tools;
``serve_stdio`` and ``serve_http`` run it until cancelled. Binding a non-loopback address
requires a bearer token, checked in constant time on every HTTP request (``server.bearer``).
The caller owns signals and the ``CodeMode`` lifecycle (see ``cli/cmd_serve.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from codemodekit import __version__
from codemodekit.server.bearer import BearerAuth
from codemodekit.server.http_guard import LoopbackGuard, is_loopback
from codemodekit.server.http_limits import HttpLimits, SessionCap, guarded_protocol
from codemodekit.server.tools import register_code_mode_tools, server_instructions

if TYPE_CHECKING:
    from codemodekit.run import CodeMode
    from codemodekit.server.operations import Operations

HTTP_PATH = "/mcp"
StdioWire = tuple[Any, Any]
"""(stdin lines, stdout file) for ``stdio_server``; ``(None, None)`` means the SDK's own."""
SHUTDOWN_GRACE_S = 0.3
"""Once drained, how long uvicorn waits for open connections (session streams) to end."""
MAX_STDIO_LINE = 64 * 1024 * 1024
"""Longest JSON-RPC line read from stdin (a run's source alone may be 128 KiB)."""


def create_server(
    code_mode: CodeMode, *, search: bool = True, instructions: str | None = None
) -> Server[Any]:
    """A new low-level ``mcp`` server named after ``code_mode`` with the Code Mode tools.

    Its ``instructions`` name the sources as they are now (enter ``code_mode`` first), each
    with its description and tool count; ``serverInfo.version`` is this package's version.
    """
    server: Server[Any] = Server(
        code_mode.name,
        version=__version__,
        instructions=instructions or server_instructions(code_mode, search=search),
    )
    register_code_mode_tools(server, code_mode, search=search)
    return server


def http_app(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    auth_token: str | None = None,
    path: str = HTTP_PATH,
    stateless: bool = False,
    ops: Operations | None = None,
    limits: HttpLimits | None = None,
) -> ASGIApp:
    """The server's Streamable HTTP app, behind ``BearerAuth`` when a token is given.

    ``stateless`` uses the SDK's stateless mode: no session, every request self-contained,
    so any replica can answer any request (see docs/operations.md). ``ops`` adds ``/healthz``,
    ``/readyz``, ``/metrics`` and drain accounting (``codemodekit.server.operations``).

    A loopback ``host`` (any address of 127.0.0.0/8, ``::1`` in any spelling, ``localhost``)
    is also behind ``LoopbackGuard`` (Host/Origin validation against DNS rebinding); the
    SDK's own check, which knows only three spellings, is replaced by it.
    """
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        stateless_http=stateless,
    )
    if stateless:
        app = _NoSessionHeader(app)
    else:
        cap = (limits or HttpLimits()).max_sessions_per_client
        app = SessionCap(app, server, cap)  # behind auth: only callers that got in count

    def auth(inner: ASGIApp) -> ASGIApp:
        return BearerAuth(inner, auth_token) if auth_token else inner

    app = ops.wrap(app, auth=auth) if ops is not None else auth(app)
    return LoopbackGuard(app) if is_loopback(host) else app


class _NoSessionHeader:
    """Stateless HTTP: a request's ``Mcp-Session-Id`` header is dropped before the SDK and
    the handlers see it. No session exists to check it against, so a client could name a
    new one per request, and be a new caller per request: a fair share of its own each
    time (ADR 0030) and any name in the audit trail. Without it, the caller is the peer."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"mcp-session-id"]
            if len(headers) != len(scope["headers"]):
                scope = {**scope, "headers": headers}
        await self._app(scope, receive, send)


class _Lines:
    """Async iterator of text lines over an ``asyncio.StreamReader`` (cancellable reads)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


@contextlib.asynccontextmanager
async def stdio_wire() -> AsyncIterator[StdioWire]:
    """The process's stdin/stdout as the wire, with fd 0/1 diverted while it is open.

    Enter it before starting sources (``codemode serve`` does) so that nothing a source
    prints while importing or connecting can reach the wire.

    The SDK's default stdin reader blocks a worker thread that cannot be cancelled, so a
    SIGTERM would hang until the client sends a byte. Reading through an asyncio pipe keeps
    shutdown prompt. Tools' stray reads see EOF and stray prints go to stderr, as with the
    SDK's own transport. Falls back to ``(None, None)`` (the SDK default) when stdin is not
    a pipe, socket or terminal.
    """
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    reader = asyncio.StreamReader(limit=MAX_STDIO_LINE)
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
        )
    except (ValueError, OSError):
        for fd in (wire_in, wire_out, saved_in, saved_out):
            with contextlib.suppress(OSError):
                os.close(fd)
        yield None, None
        return
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(wire_out, "wb"), encoding="utf-8"))
    try:
        yield _Lines(reader), stdout
    finally:
        transport.close()
        with contextlib.suppress(Exception):
            await stdout.aclose()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


async def serve_stdio(server: Server[Any], wire: StdioWire | None = None) -> None:
    """Serve over stdin/stdout until the client closes the stream or the task is cancelled.

    ``wire`` is an open ``stdio_wire()``; without one, this opens its own.
    """
    if wire is None:
        async with stdio_wire() as own:
            await serve_stdio(server, own)
        return
    stdin, stdout = wire
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Uvicorn(uvicorn.Server):
    # The caller owns signals (so it can close CodeMode first); uvicorn must not re-raise them.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket; bind failures raise ``OSError`` naming the address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


async def serve_http(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    auth_token: str | None = None,
    path: str = HTTP_PATH,
    on_ready: Callable[[str], None] | None = None,
    stateless: bool = False,
    ops: Operations | None = None,
    limits: HttpLimits | None = None,
) -> None:
    """Serve Streamable HTTP at ``http://host:port{path}`` until cancelled.

    A non-loopback ``host`` requires ``auth_token`` (``ValueError`` otherwise); an address
    that cannot be bound raises ``OSError``. ``on_ready(url)`` is called once the socket
    listens (``port=0`` picks a free port).
    """
    if not is_loopback(host) and not auth_token:
        raise ValueError(f"binding {host} (not loopback) requires a bearer token")
    limits = limits or HttpLimits()
    app = http_app(
        server,
        host=host,
        auth_token=auth_token,
        path=path,
        stateless=stateless,
        ops=ops,
        limits=limits,
    )
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host=host,
        port=bound,
        log_level="warning",
        lifespan="on",
        http=guarded_protocol(limits),  # read deadlines and a connection cap
        # Requests in flight were drained (or cancelled) before this: what is left are idle
        # connections and session streams, which must not hold the exit.
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,  # type: ignore[arg-type]  # a float works
    )
    web = _Uvicorn(config)
    if ops is not None:
        ops.stop_listening = lambda: _stop_listening(web, sock)
    serving = asyncio.ensure_future(_run_uvicorn(web, sock))
    try:
        while not web.started:
            if serving.done():
                await serving
                raise OSError(f"the HTTP server on {host}:{bound} did not start")
            await asyncio.sleep(0.02)
        if on_ready is not None:
            shown = f"[{host}]" if ":" in host else host
            on_ready(f"http://{shown}:{bound}{path}")
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        web.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(serving, timeout=10)
        raise
    finally:
        sock.close()


def _stop_listening(web: uvicorn.Server, sock: socket.socket) -> None:
    # New connections are refused (a load balancer retries them elsewhere); the open ones
    # finish their requests.
    for listener in getattr(web, "servers", ()):
        listener.close()
    sock.close()


async def _run_uvicorn(web: uvicorn.Server, sock: socket.socket) -> None:
    try:
        await web.serve(sockets=[sock])
    except SystemExit as exc:  # uvicorn exits the process on startup failures
        raise OSError(f"the HTTP server did not start (uvicorn exit {exc.code})") from None


__all__ = [
    "HTTP_PATH",
    "BearerAuth",
    "create_server",
    "http_app",
    "is_loopback",
    "serve_http",
    "serve_stdio",
    "stdio_wire",
]
