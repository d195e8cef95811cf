"""A hostile MCP server over HTTP, hand-written (no SDK) so it can send what the SDK would
refuse to build: a tool schema nested 900 levels, results nested far deeper than any
parser goes, replies of tens of megabytes, a gzip bomb, a reply that stalls halfway.

``python hostile_http_mcp.py --port N --style json|sse|sse-crlf`` answers Streamable HTTP
POSTs on ``/mcp`` with a JSON body or an SSE stream; ``--style legacy`` is the legacy SSE
transport (``GET /sse`` + ``POST /messages``).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
from typing import Any

import uvicorn

TOOLS = [
    '{"name":"echo","inputSchema":{"type":"object"}}',
    '{"name":"deep","inputSchema":%s}'
    % ('{"type":"object","properties":{"x":' * 900 + '{"type":"string"}' + "}}" * 900),
    '{"name":"nest","inputSchema":{"type":"object"}}',
    '{"name":"huge","inputSchema":{"type":"object"}}',
    '{"name":"bomb","inputSchema":{"type":"object"}}',
    '{"name":"stall","inputSchema":{"type":"object"}}',
    '{"name":"corrupt","inputSchema":{"type":"object"}}',
    '{"name":"cut","inputSchema":{"type":"object"}}',
]


def reply(mid: Any, result_json: str) -> bytes:
    return ('{"jsonrpc":"2.0","id":' + json.dumps(mid) + ',"result":' + result_json + "}").encode()


def answer(message: dict[str, Any]) -> bytes | tuple[str, Any] | None:
    """The reply body, a ("stall"|"bomb", args) instruction, or None for a notification."""
    method, mid = message.get("method"), message.get("id")
    if mid is None:
        return None
    if method == "initialize":
        return reply(
            mid,
            json.dumps(
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile-http", "version": "1"},
                }
            ),
        )
    if method == "tools/list":
        return reply(mid, '{"tools":[' + ",".join(TOOLS) + "]}")
    if method == "tools/call":
        name, args = message["params"]["name"], message["params"].get("arguments") or {}
        if name == "echo":
            text = json.dumps({"content": [{"type": "text", "text": args.get("text", "")}]})
            return reply(mid, text)
        if name == "nest":
            depth = int(args["depth"])
            value = "[" * depth + '"leaf"' + "]" * depth
            return reply(mid, '{"content":[],"structuredContent":{"v":' + value + "}}")
        if name == "huge":
            # Key order puts the id last: it is found at the end of the message.
            body = '{"content":[{"type":"text","text":"' + "x" * (int(args["mb"]) << 20) + '"}]}'
            return ('{"jsonrpc":"2.0","result":' + body + ',"id":' + json.dumps(mid) + "}").encode()
        if name in ("stall", "bomb", "corrupt", "cut"):
            return (name, (mid, args))
    error = {"code": -32601, "message": "method not found"}
    return json.dumps({"jsonrpc": "2.0", "id": mid, "error": error}).encode()


def stall_parts(mid: Any) -> tuple[bytes, bytes]:
    head = (
        '{"jsonrpc":"2.0","id":' + json.dumps(mid) + ',"result":{"content":[{"type":"text","text":"'
    )
    return head.encode() + b"y" * (3 << 20), b'"}]}}'


def bomb_body(mid: Any, megabytes: int) -> bytes:
    text = b"z" * (megabytes << 20)
    return reply(mid, '{"content":[{"type":"text","text":"' + text.decode() + '"}]}')


async def wait_for(path: str) -> None:
    while not os.path.exists(path):
        await asyncio.sleep(0.02)


class App:
    def __init__(self, style: str) -> None:
        self.style = style
        self.newline = b"\r\n" if style == "sse-crlf" else b"\n"
        self.legacy_queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.tasks: set[asyncio.Future[None]] = set()

    def event(self, data: bytes) -> bytes:
        nl = self.newline
        return b"event: message" + nl + b"data: " + data + nl + nl

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if self.style == "legacy":
            if method == "GET" and path == "/sse":
                await self.legacy_stream(send)
            elif method == "POST" and path == "/messages":
                message = json.loads(await self.body(receive))
                await self.plain(send, 202, b"", "text/plain")
                out = answer(message)
                if out is not None:
                    self.tasks.add(asyncio.ensure_future(self.legacy_reply(out)))
            else:
                await self.plain(send, 404, b"not found", "text/plain")
            return
        if path != "/mcp":
            await self.plain(send, 404, b"not found", "text/plain")
            return
        if method == "DELETE":
            await self.plain(send, 200, b"", "text/plain")
            return
        if method != "POST":
            await self.plain(send, 405, b"", "text/plain")
            return
        message = json.loads(await self.body(receive))
        out = answer(message)
        if out is None:
            await self.plain(send, 202, b"", "text/plain")
        elif isinstance(out, tuple):
            await self.special(send, *out)
        elif self.style == "json":
            await self.plain(send, 200, out, "application/json")
        else:
            await self.start(send, 200, "text/event-stream")
            await self.chunk(send, self.event(out), more=False)

    async def special(self, send: Any, what: str, detail: tuple[Any, dict[str, Any]]) -> None:
        mid, args = detail
        if what == "cut":
            # Promises more than it sends, then closes: the body ends mid-message.
            kind = "application/json" if self.style == "json" else "text/event-stream"
            length = [(b"content-length", b"100000")]
            await self.start(send, 200, kind, length)
            await self.chunk(send, b'{"jsonrpc":"2.0","id":' + json.dumps(mid).encode(), more=False)
            return
        if what == "corrupt":
            # Says gzip, is not: the client's decoder fails on it.
            body = gzip.compress(reply(mid, "{}"))[:12] + b"\x00garbage" * 100
            kind = "application/json" if self.style == "json" else "text/event-stream"
            await self.start(send, 200, kind, [(b"content-encoding", b"gzip")])
            await self.chunk(send, body, more=False)
            return
        if what == "bomb":
            body = gzip.compress(bomb_body(mid, int(args["mb"])), compresslevel=9)
            if self.style == "json":
                await self.start(send, 200, "application/json", [(b"content-encoding", b"gzip")])
                await self.chunk(send, body, more=False)
            else:
                # A gzip stream of SSE: the event inside expands past every bound.
                event = self.event(bomb_body(mid, int(args["mb"])))
                await self.start(send, 200, "text/event-stream", [(b"content-encoding", b"gzip")])
                await self.chunk(send, gzip.compress(event, compresslevel=9), more=False)
            return
        head, tail = stall_parts(mid)
        if self.style == "json":
            await self.start(send, 200, "application/json")
            await self.chunk(send, head)
            await wait_for(args["marker"])
            await self.chunk(send, tail, more=False)
        else:
            await self.start(send, 200, "text/event-stream")
            await self.chunk(send, b"event: message" + self.newline + b"data: " + head)
            await wait_for(args["marker"])
            await self.chunk(send, tail + self.newline + self.newline, more=False)

    async def legacy_stream(self, send: Any) -> None:
        await self.start(send, 200, "text/event-stream")
        await self.chunk(send, b"event: endpoint\ndata: /messages?session_id=1\n\n")
        while True:
            await self.chunk(send, await self.legacy_queue.get())

    async def legacy_reply(self, out: bytes | tuple[str, Any]) -> None:
        if isinstance(out, bytes):
            await self.legacy_queue.put(self.event(out))
            return
        what, (mid, args) = out
        if what == "cut":  # one stream: a message that never ends, then an honest one
            await self.legacy_queue.put(b"event: message\ndata: {")
            await self.legacy_queue.put(b"\n\n" + self.event(reply(mid, '{"content":[]}')))
            return
        if what == "corrupt":  # one stream, no per-reply coding: an unreadable message instead
            await self.legacy_queue.put(
                self.event(
                    b'{"jsonrpc":"2.0","id":' + json.dumps(mid).encode() + b',"result":{"x":'
                )
            )
            return
        if what == "bomb":  # legacy SSE has one stream: a plain oversized event instead
            await self.legacy_queue.put(self.event(bomb_body(mid, int(args["mb"]))))
            return
        head, tail = stall_parts(mid)
        await self.legacy_queue.put(b"event: message\ndata: " + head)
        await wait_for(args["marker"])
        await self.legacy_queue.put(tail + b"\n\n")

    @staticmethod
    async def body(receive: Any) -> bytes:
        parts = []
        while True:
            event = await receive()
            parts.append(event.get("body", b""))
            if not event.get("more_body"):
                return b"".join(parts)

    @staticmethod
    async def start(
        send: Any, status: int, content_type: str, extra: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        headers = [(b"content-type", content_type.encode()), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})

    @staticmethod
    async def chunk(send: Any, data: bytes, *, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})

    async def plain(self, send: Any, status: int, body: bytes, content_type: str) -> None:
        await self.start(send, status, content_type)
        await self.chunk(send, body, more=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--style", choices=("json", "sse", "sse-crlf", "legacy"), required=True)
    args = parser.parse_args()
    uvicorn.run(App(args.style), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
