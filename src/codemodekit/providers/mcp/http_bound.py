"""Bounded reading of MCP replies over HTTP (Streamable HTTP and legacy SSE).

The SDK reads a plain JSON reply body whole (``response.aread()``, no bound), bounds an SSE
event only by failing the whole stream (legacy SSE: the source is lost), and hands every
message to a parser that refuses what is only deeply nested, so one tool with a deep schema
costs a source its whole ``tools/list``. ``bound_replies`` is an httpx response hook that
swaps the body stream of every response for one read here first, with the same rules and
the same outcomes as the stdio reader (``providers.mcp.stdio``):

- a JSON body or one SSE event larger than ``max_reply_bytes`` is dropped while it is read
  and replaced by a JSON-RPC error ``REPLY_TOO_LARGE`` for the request it answers;
- a message the SDK's parser refuses is parsed again (``providers.mcp.stdio.parse_line``): a listed
  tool nested deeper than ``MAX_NESTING`` is set aside, a too-deep result becomes
  ``REPLY_TOO_DEEP`` for its request; the other tools and calls go on;
- ``gzip``/``deflate`` bodies are decompressed here with the same bound (a small compressed
  body may expand a thousandfold); any other content coding fails its request;
- a reply past ``LARGE_REPLY_BYTES`` in progress is reported through ``on_large``.

A message the SDK reads as it is passes through byte for byte.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

import httpx2
import mcp_types as types
from mcp.shared.message import SessionMessage

from codemodekit.nesting import NESTING_HINT
from codemodekit.providers.mcp.stdio import (
    _ID,
    LARGE_REPLY_BYTES,
    OWN_ERROR_MARK,
    REPLY_TOO_DEEP,
    REPLY_TOO_LARGE,
    parse_line,
)

logger = logging.getLogger("codemodekit.providers.mcp")

_EDGE = 256
_CHUNK = 64 * 1024
_MAX_REQUEST_SCAN = 1024 * 1024
"""Request bodies up to this size are read for their JSON-RPC id (ours are small)."""

_Frames = Callable[[AsyncIterator[bytes]], AsyncGenerator[bytes, None]]


class LargeReplies:
    """Reports the bytes of large replies in progress (any stream), ``None`` once none is."""

    def __init__(self, on_large: Callable[[int | None], None]) -> None:
        self._on_large = on_large
        self._pending: dict[int, int] = {}

    def update(self, key: int, size: int) -> None:
        if size > LARGE_REPLY_BYTES:
            self._pending[key] = size
            self._on_large(sum(self._pending.values()))
        elif self._pending.pop(key, None) is not None and not self._pending:
            self._on_large(None)


def _error_bytes(message_id: Any, code: int, text: str) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": message_id,
            "error": {"code": code, "message": text, "data": OWN_ERROR_MARK},
        }
    ).encode()


def checked(
    data: bytes, fallback_id: Any, on_set_aside: Callable[[str, str], None]
) -> bytes | None:
    """``data`` if the SDK can read it; else a repaired message, an error for its request,
    or ``None`` when nothing can be made of it (no request to answer)."""
    try:
        types.jsonrpc_message_adapter.validate_json(data, by_name=False)
        return data
    except ValueError:
        pass
    item = parse_line(data, on_set_aside=on_set_aside)
    if isinstance(item, SessionMessage):
        return item.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
    if fallback_id is not None:
        text = f"the reply could not be read (it {NESTING_HINT}, or is malformed)"
        return _error_bytes(fallback_id, REPLY_TOO_DEEP, text)
    return None


def _id_at_edges(head: bytes, tail: bytes) -> Any:
    for edge in (head, tail):
        match = _ID.search(edge)
        if match is not None:
            return json.loads(match.group(1))
    return None


class _Decoder:
    """Content decoding in bounded pieces (``None`` coding: identity), so a small
    compressed body never expands in memory all at once."""

    def __init__(self, coding: str | None) -> None:
        self._zlib = None
        if coding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)

    def pieces(self, chunk: bytes) -> Iterator[bytes]:
        if self._zlib is None:
            yield chunk
            return
        while chunk:
            out = self._zlib.decompress(chunk, _CHUNK)
            if out:
                yield out
            chunk = self._zlib.unconsumed_tail


class _Body(httpx2.AsyncByteStream):
    """The response body as the SDK will see it."""

    def __init__(self, inner: httpx2.AsyncByteStream, frames: _Frames) -> None:
        self._inner = inner
        self._frames = frames

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raw = self._raw()
        frames = self._frames(raw)
        try:
            async for piece in frames:
                yield piece
        finally:
            await frames.aclose()
            await raw.aclose()

    async def _raw(self) -> AsyncGenerator[bytes, None]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Reader:
    """One response: its request's id, the bound, the decoder and the large-reply report."""

    def __init__(
        self,
        *,
        request_id: Any,
        limit: int,
        coding: str | None,
        large: LargeReplies,
        on_set_aside: Callable[[str, str], None],
        repair: bool = True,
    ) -> None:
        self.request_id = request_id
        self.limit = limit
        self.decoder = _Decoder(coding)
        self.large = large
        self.on_set_aside = on_set_aside
        self.repair = repair
        """Messages the SDK refuses are re-read (only 2xx: an error body is the SDK's
        to interpret, e.g. the fallback from a probe the server does not know)."""

    def _unreadable(self, exc: Exception) -> bytes | None:
        """An error for this POST's request when its body breaks off or does not decompress.

        Raised out of the body, either would end the SDK's whole transport (the source)."""
        if isinstance(exc, zlib.error):
            why = "its compressed body is corrupt"
        else:
            why = f"the body broke off ({type(exc).__name__})"
        logger.error("An MCP server's reply could not be read: %s", why)
        if self.request_id is None:
            return None
        return _error_bytes(self.request_id, REPLY_TOO_DEEP, f"the reply could not be read: {why}")

    def _too_large(self, message_id: Any) -> bytes:
        text = f"the reply was larger than {self.limit} bytes; it was dropped while being read"
        return _error_bytes(message_id, REPLY_TOO_LARGE, text)

    async def json_body(self, raw: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        body = bytearray()
        over = False
        try:
            async for chunk in raw:
                for data in self.decoder.pieces(chunk):
                    body += data
                    if len(body) > self.limit:
                        over = True
                        break
                self.large.update(id(self), len(body))
                if over:
                    break
        except (zlib.error, httpx2.TransportError) as exc:
            unreadable = self._unreadable(exc)
            if unreadable is None:
                raise
            yield unreadable
            return
        finally:
            self.large.update(id(self), 0)
        if over:
            message_id = self.request_id
            if message_id is None:
                message_id = _id_at_edges(bytes(body[:_EDGE]), b"")
            if message_id is not None:
                yield self._too_large(message_id)
            return
        if not self.repair:
            yield bytes(body)
            return
        out = checked(bytes(body), self.request_id, self.on_set_aside)
        yield bytes(body) if out is None else out

    async def events(self, raw: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        splitter = _EventSplitter(self.limit)
        try:
            async for chunk in raw:
                out: list[bytes] = []
                for data in self.decoder.pieces(chunk):
                    for event in splitter.feed(data):
                        piece = self._event(event)
                        if piece:
                            out.append(piece)
                    if splitter.skipping and self.request_id is not None:
                        # The reply to this POST is over the bound: answer now, read no more.
                        out.append(self._as_event(self._too_large(self.request_id)))
                        yield b"".join(out)
                        return
                self.large.update(id(self), splitter.pending)
                if out:
                    yield b"".join(out)
        except (zlib.error, httpx2.TransportError) as exc:
            unreadable = self._unreadable(exc)
            if unreadable is None:
                raise  # a GET stream: the SDK reconnects
            yield self._as_event(unreadable)
        finally:
            self.large.update(id(self), 0)

    @staticmethod
    def _as_event(message: bytes) -> bytes:
        return b"event: message\ndata: " + message + b"\n\n"

    def _event(self, event: list[bytes] | _Oversized) -> bytes | None:
        if isinstance(event, _Oversized):
            return self._oversized(event.head, event.tail)
        out = self._message(event)
        if out is None:
            return None
        try:
            out.decode("utf-8")
        except UnicodeDecodeError:
            # The SDK counts an event's size after decoding, where a bad byte becomes three.
            out = out.decode("utf-8", errors="replace").encode("utf-8")
            if len(out) > self.limit:
                return self._oversized(out[:_EDGE], out[-_EDGE:])
        return out

    def _oversized(self, head: bytes, tail: bytes) -> bytes | None:
        message_id = _id_at_edges(head, tail)
        if message_id is None:
            logger.error("An MCP server sent an event of over %d bytes; dropped", self.limit)
            return None
        return self._as_event(self._too_large(message_id))

    def _message(self, event: list[bytes]) -> bytes | None:
        kind = b"message"
        data: list[bytes] = []
        other: list[bytes] = []
        for line in event:
            name, colon, value = line.partition(b":")
            if colon and value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
                continue
            if name == b"event":
                kind = value
            other.append(line)
        original = b"".join(line + b"\n" for line in event) + b"\n"
        payload = b"\n".join(data)
        if kind != b"message" or not payload:
            return original  # an empty message is a priming event (resumability), not a reply
        out = checked(payload, self.request_id, self.on_set_aside)
        if out is None or out is payload:
            return original
        return b"".join(line + b"\n" for line in other) + b"data: " + out + b"\n\n"


class _Oversized:
    def __init__(self, head: bytes, tail: bytes) -> None:
        self.head = head
        self.tail = tail


class _EventSplitter:
    """Server-sent events (lines ended by CRLF, LF or CR; an empty line ends an event),
    each bounded while read: past ``limit`` bytes the rest of the event is skipped."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._cr = False
        self._reset()

    def _reset(self) -> None:
        self._lines: list[bytes] = []
        self._partial = bytearray()
        self._size = 0
        self.skipping = False
        self._line_len = 0
        self._head = b""
        self._tail = b""

    @property
    def pending(self) -> int:
        """Bytes of the event being read so far."""
        return self._size + len(self._partial)

    def _skip(self) -> None:
        joined = b"\n".join([*self._lines, bytes(self._partial)])
        self._head = joined[:_EDGE]
        self._tail = joined[-_EDGE:]
        self._size = self.pending
        self._line_len = len(self._partial)
        self._lines = []
        self._partial = bytearray()
        self.skipping = True

    def feed(self, chunk: bytes) -> list[list[bytes] | _Oversized]:
        if not chunk:
            return []
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the rest of a CRLF cut between two chunks
        self._cr = chunk.endswith(b"\r")
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        out: list[list[bytes] | _Oversized] = []
        pieces = chunk.split(b"\n")
        for index, piece in enumerate(pieces):
            complete = index < len(pieces) - 1
            if not self.skipping:
                self._partial += piece
                if piece and self.pending > self._limit:
                    self._skip()
                    if complete:
                        self._line_len = 0
                    continue
                if complete:
                    line = bytes(self._partial)
                    self._partial = bytearray()
                    if line:
                        self._lines.append(line)
                        self._size += len(line) + 1
                    else:
                        if self._lines:
                            out.append(self._lines)
                        self._reset()
                continue
            self._tail = (self._tail + piece)[-_EDGE:]
            self._size += len(piece) + (1 if complete else 0)
            self._line_len += len(piece)
            if complete:
                if self._line_len == 0:
                    out.append(_Oversized(self._head, self._tail))
                    self._reset()
                else:
                    self._line_len = 0
        return out


def _request_id(request: httpx2.Request) -> Any:
    """The JSON-RPC id of a request POST (``None`` for a GET stream or a notification)."""
    if request.method != "POST":
        return None
    try:
        content = request.content
    except httpx2.RequestNotRead:
        return None
    if len(content) > _MAX_REQUEST_SCAN:
        return None
    try:
        message = json.loads(content)
    except ValueError:
        return None
    if isinstance(message, dict) and "method" in message:
        return message.get("id")
    return None


def bound_replies(
    max_reply_bytes: int,
    *,
    on_large: Callable[[int | None], None],
    on_set_aside: Callable[[str, str], None],
) -> Callable[[httpx2.Response], Any]:
    """An httpx ``response`` event hook bounding every MCP reply body (module doc)."""
    large = LargeReplies(on_large)

    async def hook(response: httpx2.Response) -> None:
        content_type = response.headers.get("content-type", "").partition(";")[0]
        content_type = content_type.strip().lower()
        codings = [
            value.strip().lower()
            for value in response.headers.get_list("content-encoding", split_commas=True)
            if value.strip().lower() not in ("", "identity")
        ]
        request_id = _request_id(response.request)
        reader = _Reader(
            request_id=request_id,
            limit=max_reply_bytes,
            coding=codings[0] if codings else None,
            large=large,
            on_set_aside=on_set_aside,
            repair=response.is_success,
        )
        inner = response.stream
        if not isinstance(inner, httpx2.AsyncByteStream):
            return
        frames: _Frames
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            frames = _refused(request_id, ", ".join(codings))
            content_type = "application/json"
            response.headers["content-type"] = content_type
        elif content_type == "text/event-stream":
            frames = reader.events
        else:
            # JSON, and any other body: never read past the bound either.
            frames = reader.json_body
        for name in ("content-encoding", "content-length"):
            if name in response.headers:
                del response.headers[name]
        response.stream = _Body(inner, frames)

    return hook


def _refused(request_id: Any, codings: str) -> _Frames:
    async def frames(raw: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        del raw  # never read: the body is in a coding this client did not ask for
        if request_id is not None:
            text = f"the reply was sent with content coding {codings!r}, which is not accepted"
            yield _error_bytes(request_id, REPLY_TOO_DEEP, text)

    return frames


__all__ = ["LargeReplies", "bound_replies", "checked"]
