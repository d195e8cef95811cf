"""The stdio transport for MCP servers, reading the child's stdout with bounds.

The SDK's own stdio client rebuilds its line buffer for every chunk (a 64 MB reply took
28 s to reassemble while every other call of the source waited) and hands each line to a
parser that gives up on nesting deeper than some hundreds of levels, dropping the whole
message: one tool with a deep schema then cost the source its entire ``tools/list``.

Here the child's stdout is split into lines in linear time, and a line is bounded while it
is read (``max_line_bytes``): past the bound the rest of the line is skipped and, when its
JSON-RPC id can be seen, the waiting request gets an error at once (``REPLY_TOO_LARGE``).
``on_large(n)`` reports a large reply in progress (``None`` once it is done) so the
provider can show the source as degraded meanwhile. A line the SDK's parser refuses is
parsed again with Python's own decoder, and the one bound on nesting (``MAX_NESTING``) is
applied: a listed tool whose schema is too deep is set aside (``on_set_aside``); a result
too deep becomes an error (``REPLY_TOO_DEEP``). Process start and shutdown are the SDK's.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.client import stdio as sdk_stdio
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage

from codemodekit.nesting import MAX_NESTING, NESTING_HINT, depth_exceeds

logger = logging.getLogger("codemodekit.providers.mcp")

REPLY_TOO_LARGE = -32098
"""JSON-RPC error code given to a request whose reply was over the line bound."""
REPLY_TOO_DEEP = -32099
"""JSON-RPC error code given to a request whose result nests deeper than ``MAX_NESTING``."""
OWN_ERROR_MARK = {"codemodekit": secrets.token_hex(16)}
"""The ``data`` of the errors above: they are ours only with it. An upstream may answer
with the same codes (JSON-RPC leaves -32000..-32099 to servers); it cannot know this
process's mark, so its errors stay its own (``is_own_error``)."""


def is_own_error(error: types.ErrorData, code: int) -> bool:
    """``error`` is the bound's error ``code``, made in this process, not an upstream's."""
    return error.code == code and error.data == OWN_ERROR_MARK


LARGE_REPLY_BYTES = 1024 * 1024
"""A reply in progress past this size is reported through ``on_large``."""
_EDGE = 256
_DECODE_RECURSION = 5_000
"""Recursion allowed to Python's JSON decoder for a line the SDK refused (C stack safe)."""
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
# A result nests its value a few levels below the message: {result: {structuredContent: ...}}.
_RESULT_LEVELS = 3


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line past the bound: its first and last bytes (to find its id) and its size."""

    head: bytes
    tail: bytes
    size: int


class LineSplitter:
    """Newline-delimited frames from chunks, in linear time, each bounded while read."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._skipping = False
        self._head = b""
        self._tail = b""
        self.pending = 0
        """Bytes of the line being read so far."""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            piece = chunk[start:] if newline < 0 else chunk[start:newline]
            self.pending += len(piece)
            if self._skipping:
                self._tail = (self._tail + piece)[-_EDGE:]
            else:
                self._buffer += piece
                if len(self._buffer) > self._limit:
                    self._skipping = True
                    self._head = bytes(self._buffer[:_EDGE])
                    self._tail = bytes(self._buffer[-_EDGE:])
                    self._buffer = bytearray()
            if newline < 0:
                return out
            if self._skipping:
                out.append(Oversized(self._head, self._tail, self.pending))
                self._skipping = False
            elif self._buffer.strip():
                out.append(bytes(self._buffer))
            self._buffer = bytearray()
            self.pending = 0
            start = newline + 1


def _error(message_id: Any, code: int, message: str) -> SessionMessage:
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=message_id,
        error=types.ErrorData(code=code, message=message, data=OWN_ERROR_MARK),
    )
    return SessionMessage(error)


def _oversized(item: Oversized, limit: int) -> SessionMessage | Exception:
    for edge in (item.head, item.tail):
        match = _ID.search(edge)
        if match is not None:
            message_id = json.loads(match.group(1))
            text = f"the reply was larger than {limit} bytes; it was dropped while being read"
            return _error(message_id, REPLY_TOO_LARGE, text)
    return ValueError(f"a message of over {limit} bytes without a visible id was dropped")


def parse_line(
    line: bytes, *, on_set_aside: Callable[[str, str], None]
) -> SessionMessage | Exception:
    """One stdout line as a message, or the parse error (as the SDK reports them)."""
    text = line.decode("utf-8", errors="replace")
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError as first:
        refused: Exception = first
    # The SDK's parser also refuses what is only deeply nested: look again with Python's,
    # allowing a deeper (still bounded) recursion than its default.
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(max(limit, _DECODE_RECURSION))
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _unreadable(line, refused)
    finally:
        sys.setrecursionlimit(limit)
    if not isinstance(data, dict):
        return _unreadable(line, refused)
    result = data.get("result")
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        kept = []
        for tool in result["tools"]:
            if isinstance(tool, dict) and depth_exceeds(tool, MAX_NESTING + 1):
                name = tool.get("name")
                on_set_aside(name if isinstance(name, str) else "?", f"its schema {NESTING_HINT}")
            else:
                kept.append(tool)
        data["result"] = {**result, "tools": kept}
    elif "id" in data and depth_exceeds(result, MAX_NESTING + _RESULT_LEVELS):
        return _error(data["id"], REPLY_TOO_DEEP, f"the reply {NESTING_HINT}")
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(data, by_name=False))
    except (ValueError, RecursionError):
        return _unreadable(line, refused)


def _unreadable(line: bytes, refused: Exception) -> SessionMessage | Exception:
    """A reply no parser can read fails its request now, rather than at its timeout."""
    for edge in (line[:_EDGE], line[-_EDGE:]):
        match = _ID.search(edge)
        if match is not None and b'"method"' not in line[:_EDGE]:
            text = f"the reply could not be read (it {NESTING_HINT}, or is malformed)"
            return _error(json.loads(match.group(1)), REPLY_TOO_DEEP, text)
    return refused


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters,
    errlog: TextIO,
    *,
    max_line_bytes: int,
    on_large: Callable[[int | None], None] = lambda _size: None,
    on_set_aside: Callable[[str, str], None] = lambda _name, _why: None,
) -> AsyncIterator[TransportStreams]:
    """Like the SDK's ``stdio_client``, with bounded, linear-time reads (module doc)."""
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk_stdio.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # No await between the spawn and the task group: a cancellation there would leak it.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout is not None
        splitter = LineSplitter(max_line_bytes)
        reporting = False
        try:
            async with read_writer:
                try:
                    async for chunk in process.stdout:
                        for frame in splitter.feed(chunk):
                            if isinstance(frame, Oversized):
                                item = _oversized(frame, max_line_bytes)
                            else:
                                item = parse_line(frame, on_set_aside=on_set_aside)
                            if isinstance(item, Exception):
                                # Never the line itself: a server may print anything there.
                                logger.error(
                                    "Failed to parse a JSON-RPC message from the server "
                                    "(content not logged)"
                                )
                            try:
                                await read_writer.send(item)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                        large = splitter.pending > LARGE_REPLY_BYTES
                        if large or reporting:
                            on_large(splitter.pending if large else None)
                            reporting = large
                finally:
                    if reporting:
                        on_large(None)
                    await sdk_stdio._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # shutdown closed the pipe under the read; the session sees the end

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    payload = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((payload + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the end instead of hanging
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(0.5):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        await sdk_stdio._aclose_all(read_stream, write_stream, read_writer, write_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stdout_reader)
        tasks.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await shutdown()
            tasks.cancel_scope.cancel()


__all__ = [
    "REPLY_TOO_DEEP",
    "REPLY_TOO_LARGE",
    "LineSplitter",
    "bounded_stdio_client",
    "parse_line",
]
