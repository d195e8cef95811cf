"""DNS rebinding: every loopback bind of ``codemode serve --transport http`` validates Host
and Origin, whatever the spelling of the address; other addresses require the token."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CONFIG = """
version = 1
name = "rebinding"

[policy]
default = "allow"

[sources.app]
type = "python"
module = "rebindtools"
"""

TOOLS = """
from codemodekit import define_tool

echo = define_tool(description="Echo.", input_schema={"type": "object"},
                   execute=lambda args: {"echo": args})
"""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "rebinding-test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

# Binds the SDK did not protect (only 127.0.0.1, localhost and ::1 were) and those it did.
LOOPBACK_BINDS = [
    "127.0.0.1",
    "127.0.0.2",
    "127.255.255.254",
    "::1",
    "0:0:0:0:0:0:0:1",
    "0000:0000:0000:0000:0000:0000:0000:0001",
    "localhost",
]

HOSTILE_HOSTS = [
    "evil.example",
    "evil.example:{port}",
    "127.0.0.1.evil.example:{port}",
    "localhost.evil.example:{port}",
    "evil.example#@127.0.0.1:{port}",
    "127.0.0.1@evil.example:{port}",
    "[::1].evil.example:{port}",
    "0x7f000001.evil.example",
    "10.0.0.1:{port}",
    "[::ffff:10.0.0.1]:{port}",
    "",
]

HOSTILE_ORIGINS = [
    "http://evil.example",
    "https://evil.example:{port}",
    "http://127.0.0.1.evil.example:{port}",
    "http://localhost.evil.example",
    "null",
    "file://",
    "http://evil.example@127.0.0.1:{port}",
    "ftp://127.0.0.1:{port}",
    "http://10.0.0.1:{port}",
]


class Served:
    def __init__(self, process: subprocess.Popen[str], url: str, port: int) -> None:
        self.process = process
        self.url = url
        self.port = port


def _start(tmp_path: Path, host: str, env: dict[str, str] | None = None) -> Served:
    (tmp_path / "rebindtools.py").write_text(TOOLS)
    (tmp_path / "codemode.toml").write_text(CONFIG)
    command = [sys.executable, "-m", "codemodekit", "serve", "-c", str(tmp_path / "codemode.toml")]
    command += ["--transport", "http", "--port", "0", "--host", host]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 90  # hang guard only
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        if " at http://" in line:
            url = line.rsplit(" at ", 1)[1].strip()
            return Served(process, url, int(url.rsplit(":", 1)[1].split("/")[0]))
    process.kill()
    process.wait()
    raise AssertionError("codemode serve did not come up:\n" + "".join(seen))


@pytest.fixture(params=LOOPBACK_BINDS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    server = _start(tmp_path, request.param)
    try:
        yield server
    finally:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def _post(url: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, headers={**ACCEPT, **headers}, timeout=30)


async def test_loopback_bind_refuses_foreign_host_and_origin(served: Served) -> None:
    for template in HOSTILE_HOSTS:
        host = template.format(port=served.port)
        response = _post(served.url, {"Host": host})
        assert response.status_code == 421, (host, response.status_code, response.text)
    for template in HOSTILE_ORIGINS:
        origin = template.format(port=served.port)
        response = _post(served.url, {"Origin": origin})
        assert response.status_code == 403, (origin, response.status_code, response.text)

    # The legitimate spellings are served: the URL the server printed, localhost, and a
    # same-origin browser page.
    assert _post(served.url, {}).status_code == 200
    assert _post(served.url, {"Host": f"localhost:{served.port}"}).status_code == 200
    origin = served.url.rsplit("/", 1)[0]
    assert _post(served.url, {"Origin": origin}).status_code == 200
    async with Client(
        streamable_http_client(served.url, http_client=httpx2.AsyncClient(timeout=60)),
        read_timeout_seconds=60,
    ) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "run_typescript" in names


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "127.1", "::ffff:127.0.0.1", "ip6-localhost"])
def test_address_the_guard_does_not_cover_requires_a_token(tmp_path: Path, host: str) -> None:
    (tmp_path / "codemode.toml").write_text(CONFIG)
    config = str(tmp_path / "codemode.toml")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemodekit",
            "serve",
            "-c",
            config,
            "--transport",
            "http",
            "--port",
            "0",
            "--host",
            host,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "--auth-token-env" in result.stderr
