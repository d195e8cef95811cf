"""What reading MCP replies over HTTP through ``mcp_http_bound`` costs: a reply body (JSON)
and a stream of small SSE events, read and parsed as the SDK does, with and without the
bounding hook (which validates each message once more to find the ones the SDK refuses).
Run: ``python -m benchmarks.bench_http_replies``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx2
import mcp_types as types

from benchmarks._util import amedian_ms, row
from codemodekit.providers.mcp.http_bound import bound_replies

_CHUNK = 64 * 1024


class _Stream(httpx2.AsyncByteStream):
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self._data), _CHUNK):
            yield self._data[start : start + _CHUNK]


def _response(data: bytes, content_type: str) -> httpx2.Response:
    request = httpx2.Request(
        "POST", "http://127.0.0.1:1/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "x"}
    )
    return httpx2.Response(
        200, headers={"content-type": content_type}, stream=_Stream(data), request=request
    )


async def _json(body: bytes, bounded: bool) -> None:
    response = _response(body, "application/json")
    if bounded:
        await bound_replies(32 << 20, on_large=lambda _n: None, on_set_aside=lambda *_: None)(
            response
        )
    types.jsonrpc_message_adapter.validate_json(await response.aread(), by_name=False)


async def _sse(stream: bytes, bounded: bool) -> None:
    response = _response(stream, "text/event-stream")
    if bounded:
        await bound_replies(32 << 20, on_large=lambda _n: None, on_set_aside=lambda *_: None)(
            response
        )
    async for sse in httpx2.EventSource(response, max_event_size=None):
        types.jsonrpc_message_adapter.validate_json(sse.data, by_name=False)


async def main() -> None:
    print("MCP replies over HTTP: SDK parsing alone vs through the bounding hook (median)")
    for megabytes in (0.01, 1, 8):
        text = "x" * int(megabytes * (1 << 20))
        result = {"content": [{"type": "text", "text": text}], "structuredContent": {"t": 1}}
        body = json.dumps({"jsonrpc": "2.0", "id": 7, "result": result}).encode()
        repeat = 200 if megabytes < 1 else 20
        plain = await amedian_ms(lambda b=body: _json(b, False), repeat=repeat, warmup=3)
        bounded = await amedian_ms(lambda b=body: _json(b, True), repeat=repeat, warmup=3)
        row(f"JSON reply {megabytes} MB: plain", plain, "ms")
        row(f"JSON reply {megabytes} MB: bounded", bounded, "ms", f"x{bounded / plain:.2f}")
    event = json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1},
        }
    ).encode()
    stream = b"".join(b"event: message\ndata: " + event + b"\n\n" for _ in range(2000))
    plain = await amedian_ms(lambda: _sse(stream, False), repeat=20, warmup=2)
    bounded = await amedian_ms(lambda: _sse(stream, True), repeat=20, warmup=2)
    row("SSE, 2000 small events: plain", plain, "ms")
    row("SSE, 2000 small events: bounded", bounded, "ms", f"x{bounded / plain:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
