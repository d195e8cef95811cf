"""Transports for ``McpToolProvider``: stdio, Streamable HTTP and legacy SSE.

Each transport is the SDK's own, wrapped for two things the SDK does not expose:

- the end of the server's message stream (a crashed child, a dropped HTTP stream), so the
  provider notices a lost connection even when no call is in flight;
- the child's stderr, kept in a bounded ring buffer for sanitized health messages.

Nothing here is public; ``providers/mcp.py`` is the only user.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from types import TracebackType
from typing import Any, Self, TextIO
from urllib.parse import urlsplit, urlunsplit

import httpx2
import mcp_types as types
from mcp.client._transport import ReadStream, Transport, TransportStreams, WriteStream
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import sse_within_origin

from codemodekit.providers.mcp.http_bound import bound_replies
from codemodekit.providers.mcp.stdio import bounded_stdio_client
from codemodekit.scrub import Scrubber
from codemodekit.spec.model import McpHttpSource, McpStdioSource, resolve_all

MIN_LINE_BOUND = 16 * 1024 * 1024
"""Smallest bound on one reply (a stdout line, an HTTP body, an SSE event): a large
``tools/list`` page."""
LEGACY_SSE_EVENT_BYTES: int = (
    inspect.signature(sse_within_origin).parameters["max_event_size"].default or 1024 * 1024
)
"""The SDK's fixed bound on one legacy SSE event (past it the whole stream fails)."""
STDERR_TAIL_BYTES = 8 * 1024
"""How much of a child's stderr is kept (the newest bytes win)."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
"""Terminal colour and cursor sequences: servers colour their logs."""


class _NoPayloadInParseErrors(logging.Filter):
    """The SDK logs an unparseable stdout line with its traceback, and the traceback quotes
    the line. A server can print anything there (its environment included), so the record
    keeps the event and drops the content."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Failed to parse JSONRPC message"):
            record.msg = "Failed to parse a JSON-RPC message from the server (content not logged)"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


_SDK_STDIO_LOGGER = logging.getLogger("mcp.client.stdio")
if not any(isinstance(f, _NoPayloadInParseErrors) for f in _SDK_STDIO_LOGGER.filters):
    _SDK_STDIO_LOGGER.addFilter(_NoPayloadInParseErrors())


class _TailProtocol(asyncio.Protocol):
    def __init__(self, tail: StderrTail) -> None:
        self._tail = tail

    def data_received(self, data: bytes) -> None:
        self._tail.feed(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._tail.closed.set()


class StderrTail:
    """The last ``limit`` bytes a child wrote to stderr, read through a pipe.

    The child gets the write end; the parent reads the other end on the event loop, so a
    chatty server can never block on a full pipe and memory stays bounded.
    """

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self._limit = limit
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._cut = False
        """The oldest bytes were dropped: the buffer may start inside a secret."""
        self.closed = asyncio.Event()
        self._read_fd, self._write_fd = os.pipe()
        self._writer: TextIO | None = os.fdopen(self._write_fd, "w", closefd=True)
        self._transport: asyncio.ReadTransport | None = None

    @property
    def child_end(self) -> TextIO:
        assert self._writer is not None, "the child end is given away once"
        return self._writer

    async def start_reading(self) -> None:
        loop = asyncio.get_running_loop()
        # The file object (and, once connected, the pipe transport) owns the descriptor
        # from here on: closing the raw number again later could close an unrelated
        # socket or pipe that reused it, such as a sibling source's connection.
        reader = os.fdopen(self._read_fd, "rb", buffering=0)
        self._read_fd = -1
        try:
            transport, _ = await loop.connect_read_pipe(lambda: _TailProtocol(self), reader)
        except BaseException:
            reader.close()
            raise
        self._transport = transport

    def release_child_end(self) -> None:
        """Close the parent's copy of the write end, so EOF arrives when the child exits."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        while self._size > self._limit and self._chunks:
            head = self._chunks[0]
            excess = self._size - self._limit
            self._cut = True
            if len(head) <= excess:
                self._chunks.popleft()
                self._size -= len(head)
            else:
                self._chunks[0] = head[excess:]
                self._size -= excess

    def text(self, scrub: Scrubber, *, max_lines: int = 6, max_chars: int = 600) -> str:
        """The newest lines, decoded leniently, secrets masked, control characters removed.

        Secrets are masked in the whole buffer before any line or character is cut; a
        piece of a secret at a start the ring buffer cut off is masked too.
        """
        raw = b"".join(self._chunks).decode("utf-8", errors="replace")
        raw = scrub.mask_edges(scrub(raw), start=self._cut)
        lines = [_CONTROL.sub("", _ANSI.sub("", line)).rstrip() for line in raw.splitlines()]
        lines = [line for line in lines if line.strip()][-max_lines:]
        out = " | ".join(lines)
        return out[-max_chars:]

    def close(self) -> None:
        self.release_child_end()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        elif self._read_fd >= 0:  # never started reading: the descriptor is still ours
            with suppress(OSError):
                os.close(self._read_fd)
        self._read_fd = -1


class ListingTap:
    """Keeps the raw body of the latest ``tools/list`` answer.

    The SDK validates a whole listing against the negotiated protocol's schema, so one tool
    with a malformed definition fails every tool of the page. With the raw body the provider
    can keep the well-formed tools and set the broken one aside on its own.
    """

    def __init__(self) -> None:
        self._ids: set[Any] = set()
        self.last_result: dict[str, Any] | None = None
        self.set_aside: list[tuple[str, str]] = []
        """(name, reason) of listed tools the transport dropped (schema nested too deep)."""

    def sent(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCRequest) and message.method == "tools/list":
            self._ids.add(message.id)

    def received(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse) and message.id in self._ids:
            self._ids.discard(message.id)
            self.last_result = message.result


class _StreamWrapper:
    """Delegates to the SDK's stream: closing, the context protocol and any attribute the
    dispatcher duck-types for (``last_context``); subclasses watch what passes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        suppressed: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return suppressed


class _TappedWriteStream(_StreamWrapper):
    def __init__(self, inner: WriteStream[Any], tap: ListingTap) -> None:
        super().__init__(inner)
        self._tap = tap

    async def send(self, item: Any) -> None:
        self._tap.sent(item)
        await self._inner.send(item)


class _WatchedReadStream(_StreamWrapper):
    """A read stream that reports when the server's side ends."""

    def __init__(self, inner: ReadStream[Any], on_end: Callable[[], None], tap: ListingTap) -> None:
        super().__init__(inner)
        self._on_end = on_end
        self._tap = tap

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError) and not _is_cancel(exc):
                self._on_end()
            raise
        self._tap.received(item)
        return item

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._inner.__anext__()
            self._tap.received(item)
            return item
        except StopAsyncIteration:
            self._on_end()
            raise
        except BaseException as exc:
            if not _is_cancel(exc):
                self._on_end()
            raise


def _is_cancel(exc: BaseException) -> bool:
    import anyio

    return isinstance(exc, anyio.get_cancelled_exc_class())


@asynccontextmanager
async def _watched(
    inner: Transport, on_end: Callable[[], None], tap: ListingTap
) -> AsyncIterator[TransportStreams]:
    async with inner as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_end, tap), _TappedWriteStream(write_stream, tap)


@asynccontextmanager
async def _stdio(
    config: McpStdioSource,
    env: Mapping[str, str],
    tail: StderrTail,
    max_line_bytes: int,
    on_large: Callable[[int | None], None],
    tap: ListingTap,
) -> AsyncIterator[TransportStreams]:
    extra: dict[str, str] = {}
    if config.plugin is not None:
        # What an Agent Plugins host gives its servers; the data folder exists once used.
        config.plugin.data.mkdir(parents=True, exist_ok=True)
        extra = {"PLUGIN_ROOT": str(config.plugin.root), "PLUGIN_DATA": str(config.plugin.data)}
    params = StdioServerParameters(
        command=config.command,
        args=list(config.args),
        env={**extra, **env},
        cwd=config.cwd,
        encoding_error_handler="replace",
    )
    await tail.start_reading()
    inner = bounded_stdio_client(
        params,
        tail.child_end,
        max_line_bytes=max_line_bytes,
        on_large=on_large,
        on_set_aside=lambda name, why: tap.set_aside.append((name, why)),
    )
    try:
        streams = await inner.__aenter__()
    finally:
        # Spawned (or failed to): the child holds its own copy of the write end.
        tail.release_child_end()
    try:
        yield streams
    except BaseException as exc:
        if not await inner.__aexit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        await inner.__aexit__(None, None, None)


@asynccontextmanager
async def _http(
    config: McpHttpSource,
    headers: Mapping[str, str],
    on_status: Callable[[int], None],
    max_reply_bytes: int,
    on_large: Callable[[int | None], None],
    tap: ListingTap,
) -> AsyncIterator[TransportStreams]:
    async def record_status(response: httpx2.Response) -> None:
        # The SDK folds a non-2xx answer into a generic JSON-RPC error; keep the status
        # so "HTTP 401" can reach the health message.
        if response.status_code >= 400:
            on_status(response.status_code)

    # Every reply body is read through ``bound_replies`` first: bounded while read, deep
    # messages repaired or failed per request (ADR 0025). Asking for no compression keeps
    # the bytes on the wire the bytes counted; a server that compresses anyway is decoded
    # there with the same bound.
    if config.transport == "sse":
        # The legacy client's own event bound is fixed and fails the whole stream: stay
        # below it, so an oversized reply fails only its own call.
        max_reply_bytes = min(max_reply_bytes, LEGACY_SSE_EVENT_BYTES - 4096)
    bound = bound_replies(
        max_reply_bytes,
        on_large=on_large,
        on_set_aside=lambda name, why: tap.set_aside.append((name, why)),
    )
    hooks = {"response": [record_status, bound]}
    sent = {"accept-encoding": "identity", **headers}

    def client_factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0),
            auth=auth,
            event_hooks=hooks,
        )

    if config.transport == "sse":
        async with sse_client(
            config.url, headers=sent, httpx_client_factory=client_factory
        ) as streams:
            yield streams
        return

    async with (
        client_factory(headers=sent) as http,
        # The SDK's own per-event bound stays as a backstop behind ours.
        streamable_http_client(
            config.url, http_client=http, max_sse_event_size=max_reply_bytes + 64 * 1024
        ) as streams,
    ):
        yield streams


def open_transport(
    config: McpStdioSource | McpHttpSource,
    secrets: Mapping[str, str],
    *,
    on_end: Callable[[], None],
    tail: StderrTail | None,
    on_status: Callable[[int], None] = lambda _status: None,
    max_result_bytes: int = 2 * 1024 * 1024,
    tap: ListingTap | None = None,
    on_large: Callable[[int | None], None] = lambda _size: None,
) -> Transport:
    """The SDK transport for ``config``; ``secrets`` are the resolved env or headers.

    ``on_large(n)`` reports a large reply being read (``None`` once it is done).
    """
    tap = tap if tap is not None else ListingTap()
    # One reply may hold the result twice (content text and structuredContent), and a
    # tools/list page may be larger than one result: both stay bounded while read.
    max_reply = max(2 * max_result_bytes + 64 * 1024, MIN_LINE_BOUND)
    if isinstance(config, McpStdioSource):
        assert tail is not None
        inner: Transport = _stdio(config, secrets, tail, max_reply, on_large, tap)
    else:
        inner = _http(config, secrets, on_status, max_reply, on_large, tap)
    return _watched(inner, on_end, tap)


def resolve_secrets(
    config: McpStdioSource | McpHttpSource, environ: Mapping[str, str] | None
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The resolved ``env`` (stdio) or ``headers`` (HTTP), and every string to mask.

    The mask list holds each resolved value and each ``${VAR}``'s own value (an upstream may
    echo the bare token of ``Bearer ${TOKEN}``), longest first. Raises ``SecretUnavailable``.
    """
    templates = config.env if isinstance(config, McpStdioSource) else config.headers
    resolved = resolve_all(templates, environ)
    env = os.environ if environ is None else environ
    values = set(resolved.values())
    for template in templates.values():
        values.update(env[name] for name in template.variables if name in env)
    masks = tuple(sorted((v for v in values if len(v) >= 3), key=len, reverse=True))
    return resolved, masks


def describe_target(config: McpStdioSource | McpHttpSource) -> str:
    """Where the source lives, safe to show: the command name, or the URL without
    credentials, query or fragment."""
    if isinstance(config, McpStdioSource):
        return f"command {os.path.basename(config.command)!r}"
    parts = urlsplit(config.url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
