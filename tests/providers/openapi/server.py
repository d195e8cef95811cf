"""A real HTTP server on 127.0.0.1 (uvicorn, raw ASGI) that records what it receives.

Routes (any method):
  /status/{code}     reply {code} with a JSON body echoing the request headers and query
  /text              text/plain reply;  /binary  image/png bytes;  /blob  application/zip
  /html-error        502 with a large HTML page
  /empty             204 without a body;  /sleep  answers after 2 s
  /huge              an endless-looking stream (no Content-Length); ``huge_sent`` counts bytes
  /redirect/same     302 to /landed on this server;  /redirect/other  302 to another host
  /redirect/loop     302 to itself
  anything else      200 JSON: {"method", "path", "query", "headers", "body"}
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn


@dataclass
class Recorded:
    method: str
    raw_path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k == name.lower()]
        return values[0] if values else None


@dataclass
class RecordingApp:
    requests: list[Recorded] = field(default_factory=list)
    huge_sent: int = 0
    huge_finished: bool = False
    huge_disconnected: bool = False

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        raw_path = scope["raw_path"].decode("latin-1")
        query = scope["query_string"].decode("latin-1")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        self.requests.append(Recorded(scope["method"], raw_path, query, headers, body))
        path = scope["path"].removeprefix("/api")  # routes work with or without a prefix

        async def reply(
            status: int,
            content: bytes,
            ctype: str | None,
            extra: tuple[tuple[bytes, bytes], ...] = (),
        ) -> None:
            hdrs = list(extra)
            if ctype:
                hdrs.append((b"content-type", ctype.encode()))
            hdrs.append((b"content-length", str(len(content)).encode()))
            await send({"type": "http.response.start", "status": status, "headers": hdrs})
            await send({"type": "http.response.body", "body": content})

        echo = {
            "method": scope["method"],
            "path": raw_path,
            "query": query,
            "headers": dict(headers),
            "body": body.decode("utf-8", "replace"),
        }
        if path.startswith("/status/"):
            await reply(int(path.rsplit("/", 1)[1]), json.dumps(echo).encode(), "application/json")
        elif path == "/html-error":
            page = "<html><head><style>p {}</style></head><body><h1>Bad gateway</h1>"
            page += "<p>upstream down</p>" + "<!-- padding -->" * 4000 + "</body></html>"
            await reply(502, page.encode(), "text/html; charset=utf-8")
        elif path == "/sleep":
            await asyncio.sleep(2)
            await reply(200, b"{}", "application/json")
        elif path == "/text":
            await reply(200, "héllo\nworld".encode(), "text/plain; charset=utf-8")
        elif path == "/binary":
            await reply(200, b"\x89PNG\r\n\x1a\n\x00\x01", "image/png")
        elif path == "/blob":
            await reply(200, b"PK\x03\x04\x00\xff", "application/zip")
        elif path == "/empty":
            await reply(204, b"", None)
        elif path == "/huge":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            hung_up = asyncio.Event()

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                hung_up.set()

            watcher = asyncio.ensure_future(watch())
            chunk = b"[" + b"1," * 32767
            for _ in range(4000):  # 256 MiB unless the client hangs up
                if hung_up.is_set():
                    self.huge_disconnected = True
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self.huge_sent += len(chunk)
                await asyncio.sleep(0)
            else:
                await send({"type": "http.response.body", "body": b"1]"})
                self.huge_finished = True
            watcher.cancel()
        elif path == "/redirect/same":
            await reply(302, b"", None, [(b"location", b"/landed?from=redirect")])
        elif path == "/redirect/other":
            await reply(302, b"", None, [(b"location", b"http://other.invalid/steal")])
        elif path == "/redirect/loop":
            await reply(302, b"", None, [(b"location", b"/redirect/loop")])
        else:
            await reply(200, json.dumps(echo).encode(), "application/json")


class ServerThread:
    """Starts uvicorn on a free 127.0.0.1 port in a daemon thread."""

    def __init__(self, app: RecordingApp) -> None:
        self.app = app
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="error", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
