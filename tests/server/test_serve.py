"""`codemode serve` as a subprocess, driven by real clients over stdio and Streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from tests.conftest import node_tool, tools_project

TOOLS_MODULE = '''
"""Test tools for `codemode serve`: an echo and a tool that sleeps until cancelled."""
import asyncio
from pathlib import Path

from codemodekit import define_tool

MARKERS = Path(__file__).parent

__all__ = ["echo", "slow"]

# Stray output at import and call time must never reach the MCP wire on stdout.
print("stray output while importing servetools")


def _echo(args):
    print("stray output from a tool call")
    return {"text": args["text"]}


echo = define_tool(
    description="Echo the text argument back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                  "required": ["text"]},
    execute=_echo,
)


async def _slow(args):
    (MARKERS / "slow.started").write_text("started")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        (MARKERS / "slow.cancelled").write_text("cancelled")
        raise
    return {"done": True}


slow = define_tool(description="Sleep for a minute.",
                   input_schema={"type": "object", "properties": {}}, execute=_slow)
'''

CONFIG = """
version = 1
name = "serve-test"

[limits]
tool_call_time_ms = 120000
wall_time_ms = 120000

[policy]
default = "allow"

[sources.app]
type = "python"
module = "servetools"
"""

TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tools_project(tmp_path, "servetools", TOOLS_MODULE, CONFIG)


def _serve_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "codemodekit", "serve", "-c", str(config), *extra]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear within {timeout} s")
        await asyncio.sleep(0.05)


# -- stdio -------------------------------------------------------------------------------------
def _stdio(config: Path) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemodekit", "serve", "-c", str(config)],
        cwd=str(config.parent),
    )
    return Client(params, read_timeout_seconds=60)


async def test_stdio_lists_runs_and_searches(config: Path) -> None:
    async with _stdio(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        ran = await client.call_tool(
            "run_typescript",
            {
                "code": "const r = await tools.app.echo({ text: 'hi' });\nreturn r.structuredContent;"
            },
        )
        failed = await client.call_tool("run_typescript", {"code": "const x = ;\nreturn x;"})
        found = await client.call_tool("search_tools", {"query": "echo text"})
    assert names == {"run_typescript", "search_tools"}
    assert ran.is_error is False and ran.structured_content["value"] == {"text": "hi"}
    assert failed.is_error is True
    assert _text(failed).startswith("COMPILE_ERROR at 1:")
    assert "1 | const x = ;" in _text(failed)
    assert found.structured_content["tools"][0]["address"] == "tools.app.echo"


async def test_stdio_progress_token_gets_increasing_progress(config: Path) -> None:
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    code = "let n = 0;\nfor (let i = 0; i < 5; i++) { await tools.app.echo({ text: 'x' }); n++; }\nreturn n;"
    async with _stdio(config) as client:
        with_token = await client.call_tool(
            "run_typescript", {"code": code}, progress_callback=on_progress
        )
        count_with_token = len(updates)
        without = await client.call_tool("run_typescript", {"code": code})
    assert with_token.structured_content["value"] == 5
    assert without.structured_content["value"] == 5
    assert count_with_token >= 1
    assert len(updates) == count_with_token  # no token: no progress
    values = [u[0] for u in updates]
    assert values == sorted(set(values))
    assert all(total is None for _, total, _ in updates)


async def test_stdio_cancellation_reaches_the_tool(config: Path) -> None:
    async with _stdio(config) as client:
        call = asyncio.ensure_future(
            client.call_tool("run_typescript", {"code": "await tools.app.slow({});\nreturn 1;"})
        )
        await _wait_for(config.parent / "slow.started")
        call.cancel()
        await _wait_for(config.parent / "slow.cancelled")
        after = await client.call_tool("run_typescript", {"code": "return 'still serving';"})
    assert after.structured_content["value"] == "still serving"


# -- HTTP --------------------------------------------------------------------------------------
class Served:
    def __init__(self, process: subprocess.Popen[str], url: str, lines: queue.Queue[str]) -> None:
        self.process = process
        self.url = url
        self.lines = lines

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return code, "".join(rest)


def _start_http(config: Path, *extra: str, env: dict[str, str] | None = None) -> Served:
    process = subprocess.Popen(
        _serve_command(config, "--transport", "http", "--port", "0", *extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
        env=env or _env(),
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        if " at http://" in line:
            return Served(process, line.rsplit(" at ", 1)[1].strip(), lines)
    process.kill()
    raise AssertionError("codemode serve did not come up:\n" + "".join(seen))


@pytest.fixture
def http_server(config: Path) -> Iterator[Served]:
    served = _start_http(config, "--auth-token-env", "CM_TEST_TOKEN", env=_env(CM_TEST_TOKEN=TOKEN))
    try:
        yield served
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()


def _authorized(url: str, token: str = TOKEN) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60)


async def test_http_with_token_lists_runs_and_cancels(http_server: Served, config: Path) -> None:
    assert http_server.url.startswith("http://127.0.0.1:") and http_server.url.endswith("/mcp")
    updates: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        assert total is None
        updates.append(progress)

    async with _authorized(http_server.url) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        ran = await client.call_tool(
            "run_typescript",
            {
                "code": "const r = await tools.app.echo({ text: 'ok' });\nreturn r.structuredContent.text;"
            },
            progress_callback=on_progress,
        )
        thrown = await client.call_tool("run_typescript", {"code": "\n  throw new Error('no');"})
        call = asyncio.ensure_future(
            client.call_tool("run_typescript", {"code": "await tools.app.slow({});"})
        )
        await _wait_for(config.parent / "slow.started")
        call.cancel()
        await _wait_for(config.parent / "slow.cancelled")
    assert names == {"run_typescript", "search_tools"}
    assert ran.structured_content["value"] == "ok"
    assert updates and updates == sorted(set(updates))
    assert thrown.is_error and _text(thrown).startswith("UNCAUGHT_EXCEPTION at 2:")
    assert "2 |   throw new Error('no');" in _text(thrown)


def test_http_requires_the_bearer_token(http_server: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(http_server.url, json=body, headers=headers, timeout=10)
    wrong = httpx.post(
        http_server.url,
        json=body,
        headers={**headers, "Authorization": "Bearer not-the-token"},
        timeout=10,
    )
    scheme = httpx.post(
        http_server.url, json=body, headers={**headers, "Authorization": TOKEN}, timeout=10
    )
    basic = httpx.post(
        http_server.url, json=body, headers={**headers, "Authorization": f"Basic {TOKEN}"}
    )
    lower = httpx.post(
        http_server.url, json=body, headers={**headers, "Authorization": f"bearer {TOKEN}"}
    )
    assert lower.status_code != 401  # the scheme is case-insensitive
    for response in (missing, wrong, scheme, basic):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in response.text
    code, stderr = http_server.stop()
    assert code == 0 and "stopped" in stderr
    assert TOKEN not in stderr


async def test_http_wrong_token_fails_for_the_sdk_client(http_server: Served) -> None:
    with pytest.raises(BaseException):  # noqa: B017 - the SDK surfaces a 401 as an error group
        async with _authorized(http_server.url, token="wrong") as client:
            await client.list_tools()


def test_sigterm_stops_gracefully(http_server: Served) -> None:
    code, stderr = http_server.stop()
    assert code == 0
    assert "codemode serve: stopped" in stderr


# -- refusing to start -------------------------------------------------------------------------
def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemodekit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env or _env(),
    )


def test_non_loopback_host_requires_a_token(config: Path) -> None:
    result = _run_cli(
        "serve", "-c", str(config), "--transport", "http", "--host", "0.0.0.0", "--port", "0"
    )
    assert result.returncode == 2
    assert "--auth-token-env" in result.stderr


def test_missing_token_variable_is_named_not_shown(config: Path) -> None:
    env = _env()
    env.pop("CM_ABSENT_TOKEN", None)
    result = _run_cli(
        "serve",
        "-c",
        str(config),
        "--transport",
        "http",
        "--auth-token-env",
        "CM_ABSENT_TOKEN",
        env=env,
    )
    assert result.returncode == 2 and "CM_ABSENT_TOKEN" in result.stderr


def test_missing_config_is_a_usage_error(tmp_path: Path) -> None:
    result = _run_cli("serve", "-c", str(tmp_path / "nope.toml"))
    assert result.returncode == 2 and "does not exist" in result.stderr


# -- codemode search ---------------------------------------------------------------------------
def test_search_cli(config: Path) -> None:
    text = _run_cli("search", "echo", "-c", str(config))
    assert text.returncode == 0, text.stderr
    assert "stray output while importing" in text.stderr
    assert text.stdout.startswith("1 of 1 matching tools (catalog: 2 tools)")
    assert "tools.app.echo" in text.stdout
    as_json = _run_cli("search", "sleep", "-c", str(config), "--json", "--detail", "typescript")
    data = json.loads(as_json.stdout)
    assert data["tools"][0]["address"] == "tools.app.slow" and data["resultContract"]
    unknown = _run_cli("search", "echo", "-c", str(config), "--source", "apx")
    assert unknown.returncode == 1 and "did you mean app" in unknown.stdout
    bad = _run_cli("search", "echo", "-c", str(config), "--limit", "0")
    assert bad.returncode == 2 and "limit" in bad.stderr


# -- MCP Inspector CLI (a third-party client) ----------------------------------------------------
def _inspector(tmp_path: Path, *args: str) -> dict[str, Any]:
    inspector = node_tool("mcp-inspector")
    result = subprocess.run(
        [str(inspector), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(MCP_CATALOG_PATH=str(tmp_path / "inspector-catalog.json")),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.mark.npm
def test_inspector_cli_over_stdio(config: Path, tmp_path: Path) -> None:
    command = _serve_command(config)
    listed = _inspector(tmp_path, *command, "--method", "tools/list")
    assert {t["name"] for t in listed["tools"]} == {"run_typescript", "search_tools"}
    called = _inspector(
        tmp_path,
        *command,
        "--method",
        "tools/call",
        "--tool-name",
        "run_typescript",
        "--tool-arg",
        "code=const r = await tools.app.echo({ text: 'from inspector' }); return r.structuredContent;",
    )
    assert called.get("isError") in (None, False)
    assert called["structuredContent"]["value"] == {"text": "from inspector"}


@pytest.mark.npm
def test_inspector_cli_over_http(http_server: Served, tmp_path: Path) -> None:
    auth = f"Authorization: Bearer {TOKEN}"
    listed = _inspector(
        tmp_path, http_server.url, "--transport", "http", "--header", auth, "--method", "tools/list"
    )
    assert {t["name"] for t in listed["tools"]} == {"run_typescript", "search_tools"}
    called = _inspector(
        tmp_path,
        http_server.url,
        "--transport",
        "http",
        "--header",
        auth,
        "--method",
        "tools/call",
        "--tool-name",
        "search_tools",
        "--tool-arg",
        "query=echo",
    )
    assert called["structuredContent"]["tools"][0]["address"] == "tools.app.echo"


# -- graceful shutdown closes sources and their child processes ------------------------------------
CHILD_SERVER = '''
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

Path(sys.argv[1]).write_text(str(os.getpid()))
server = MCPServer("child")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


server.run("stdio")
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; it has exited all the same.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.fixture
def child_config(config: Path) -> Path:
    server = config.parent / "child_server.py"
    server.write_text(CHILD_SERVER)
    pid_file = config.parent / "child.pid"
    config.write_text(
        CONFIG
        + f"""
[sources.child]
type = "mcp"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(server))}, {json.dumps(str(pid_file))}]
"""
    )
    return config


def _wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_sigterm_over_http_closes_child_sources(child_config: Path) -> None:
    served = _start_http(child_config)
    try:
        # `initialize` is answered at once; the sources join as they come (issue 20 item 11).
        while "sources settled" not in served.lines.get(timeout=60):
            pass
        pid = int((child_config.parent / "child.pid").read_text())
        assert _alive(pid)
        response = httpx.post(
            served.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}},
            headers={"Accept": "application/json, text/event-stream"},
            timeout=10,
        )
        assert response.status_code != 401  # loopback without a token: no auth required
        code, stderr = served.stop()
    finally:
        if served.process.poll() is None:
            served.process.kill()
    assert code == 0 and "stopped" in stderr
    assert _wait_gone(pid), "the child MCP server outlived codemode serve"


def test_sigterm_over_stdio_closes_child_sources(child_config: Path) -> None:
    process = subprocess.Popen(
        _serve_command(child_config),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=child_config.parent,
    )
    try:
        assert process.stderr is not None
        seen = [process.stderr.readline()]
        while "sources settled" not in seen[-1]:  # they join after `initialize` is answered
            seen.append(process.stderr.readline())
        # Diverted to stderr, not the wire:
        assert any("stray output while importing" in line for line in seen), seen
        assert any("over stdio" in line for line in seen), seen
        assert "3 tools from 2 sources" in seen[-1], seen
        assert any(line.startswith("codemode serve: sandbox contained: ") for line in seen), seen
        pid = int((child_config.parent / "child.pid").read_text())
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        rest = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0, rest
    assert "stopped" in rest
    assert _wait_gone(pid), "the child MCP server outlived codemode serve"


async def test_no_search_flag_serves_only_run_typescript(config: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemodekit", "serve", "-c", str(config), "--no-search"],
        cwd=str(config.parent),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["run_typescript"]
    assert "search_tools" not in (tools[0].description or "")


def test_token_with_stdio_is_a_usage_error(config: Path) -> None:
    result = _run_cli(
        "serve",
        "-c",
        str(config),
        "--auth-token-env",
        "CM_TEST_TOKEN",
        env=_env(CM_TEST_TOKEN=TOKEN),
    )
    assert result.returncode == 2 and "--transport http" in result.stderr


def test_stdin_eof_ends_stdio_serving_cleanly(child_config: Path) -> None:
    process = subprocess.Popen(
        _serve_command(child_config),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=child_config.parent,
    )
    try:
        assert process.stdin is not None and process.stderr is not None
        for line in process.stderr:
            if "sources settled" in line:  # after "over stdio": sources join as they come
                break
        else:
            raise AssertionError("codemode serve exited before serving")
        pid = int((child_config.parent / "child.pid").read_text())
        process.stdin.close()
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0
    assert _wait_gone(pid), "the child MCP server outlived codemode serve"


def test_port_in_use_is_a_clear_error(config: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run_cli("serve", "-c", str(config), "--transport", "http", "--port", str(port))
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
