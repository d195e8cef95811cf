"""`codemode serve --transport http` bounds what clients hold open (issue 23, items 7, 11, 1).

Slow clients on 127.0.0.1 that trickle headers or a body are closed at their deadline;
connections over the cap are closed at once; one client cannot hold more stateful sessions
than its share; and one client's flood of slow runs leaves another client's `return 1`
its turn. Socket timeouts here are hang guards only; the assertions are on events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.server.test_serve import CONFIG, Served, _start_http, _wait_for
from tests.server.test_serve_ops import GATE_MODULE

HANG_GUARD_S = 60.0


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "servetools.py").write_text(GATE_MODULE)
    path = tmp_path / "codemode.toml"
    path.write_text(CONFIG + "\n[runtime]\nmax_runs = 4\nqueue_timeout_ms = 600000\n")
    return path


@pytest.fixture
def served(config: Path) -> Iterator[Served]:
    server = _start_http(
        config,
        "--header-timeout",
        "1",
        "--body-timeout",
        "1",
        "--max-connections",
        "40",
        "--max-sessions-per-client",
        "3",
    )
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


def _address(served: Served) -> tuple[str, int]:
    parts = urlsplit(served.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _closed_by_server(sock: socket.socket) -> bool:
    """Block until the server closes the connection (True) or the hang guard ends (False)."""
    sock.settimeout(HANG_GUARD_S)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


SLOW_CLIENTS = {
    "nothing sent": b"",
    "half a request line": b"POST /mc",
    "headers never end": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a",
    "body never ends": (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"jsonrpc"'
    ),
}


@pytest.mark.parametrize("kind", list(SLOW_CLIENTS))
def test_a_slow_client_is_closed_at_its_deadline(served: Served, kind: str) -> None:
    clients = []
    for _ in range(10):
        sock = socket.create_connection(_address(served))
        sock.sendall(SLOW_CLIENTS[kind])
        clients.append(sock)
    try:
        assert all(_closed_by_server(sock) for sock in clients)
        assert httpx2.get(served.url.removesuffix("/mcp") + "/healthz", timeout=30).status_code
    finally:
        for sock in clients:
            sock.close()


def test_connections_over_the_cap_are_closed_and_the_server_still_answers(served: Served) -> None:
    held = [socket.create_connection(_address(served)) for _ in range(60)]
    try:
        # Over the cap (40): closed at once. The others are closed at the header deadline.
        assert all(_closed_by_server(sock) for sock in held[40:])
        for sock in held:
            sock.close()
        held = []
        response = httpx2.get(served.url.removesuffix("/mcp") + "/healthz", timeout=30)
        assert response.status_code in (200, 401)
    finally:
        for sock in held:
            sock.close()


def _client(url: str) -> Client:
    """A client on the 2025-11-25 protocol, which has stateful sessions (the 2026 protocol
    has none: its caller is the client's address)."""
    http = httpx2.AsyncClient(timeout=60)
    return Client(
        streamable_http_client(url, http_client=http), read_timeout_seconds=60, mode="legacy"
    )


def _initialize(url: str) -> httpx2.Response:
    """Open a stateful session the way a 2025-11-25 client does (its first request)."""
    return httpx2.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        headers={"Accept": "application/json, text/event-stream"},
        timeout=30,
    )


def test_one_client_holds_at_most_its_sessions(served: Served) -> None:
    opened = [_initialize(served.url) for _ in range(3)]
    assert all(r.status_code == 200 and r.headers.get("mcp-session-id") for r in opened)
    refused = _initialize(served.url)
    assert refused.status_code == 429
    assert refused.json()["error"] == "too_many_sessions"
    ended = httpx2.delete(
        served.url,
        headers={
            "mcp-session-id": opened[0].headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        },
        timeout=30,
    )
    assert ended.status_code in (200, 204)
    assert _initialize(served.url).status_code == 200  # room again
    assert "Traceback" not in "".join(served.lines.queue)


def test_a_burst_of_session_opens_sent_at_once_still_holds_the_limit(served: Served) -> None:
    # Checked when each answer starts, the count let every open of a burst pass (40 of 40).
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        replies = list(pool.map(_initialize, [served.url] * 24))
    codes = [r.status_code for r in replies]
    assert codes.count(200) <= 3, codes
    assert set(codes) <= {200, 429}, codes
    assert "Traceback" not in "".join(served.lines.queue)


async def test_one_sessions_flood_leaves_another_session_its_turn(
    served: Served, config: Path
) -> None:
    """Item 1 through `serve`: the caller is the MCP session."""
    async with _client(served.url) as flood, _client(served.url) as innocent:
        calls = [
            asyncio.ensure_future(
                flood.call_tool("run_typescript", {"code": "return await tools.app.gate({});"})
            )
            for _ in range(12)
        ]
        await _wait_for(config.parent / "gate.started")
        async with asyncio.timeout(HANG_GUARD_S):
            result = await innocent.call_tool("run_typescript", {"code": "return 1;"})
        assert not result.is_error, result.content
        assert result.structured_content is not None and result.structured_content["value"] == 1
        assert not any(call.done() for call in calls)  # the flood is still held, queued
        (config.parent / "gate.open").write_text("open")
        done = await asyncio.wait_for(asyncio.gather(*calls), HANG_GUARD_S)
        assert all(not r.is_error for r in done)
