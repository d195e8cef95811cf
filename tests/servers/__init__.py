"""Real MCP servers for the tests: the script in this folder and npm's server-everything.

``stdio_source(...)`` builds the ``McpStdioSource`` that launches the test server;
``http_server(...)`` runs a server in a subprocess on a free 127.0.0.1 port and stops it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from codemodekit.spec.model import McpHttpSource, McpStdioSource, SecretTemplate

SERVER_SCRIPT = Path(__file__).parent / "mcp_test_server.py"


def stdio_source(
    name: str = "up",
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout_ms: int | None = 20_000,
) -> McpStdioSource:
    templates = {
        key: SecretTemplate(value, key=f"sources.{name}.env.{key}")
        for key, value in (env or {}).items()
    }
    return McpStdioSource(
        name=name,
        command=sys.executable,
        args=(str(SERVER_SCRIPT), *args),
        env=templates,
        timeout_ms=timeout_ms,
    )


def http_source(
    name: str,
    url: str,
    *,
    transport: str = "streamable-http",
    headers: Mapping[str, str] | None = None,
    timeout_ms: int | None = 20_000,
) -> McpHttpSource:
    templates = {
        key: SecretTemplate(value, key=f"sources.{name}.headers.{key}")
        for key, value in (headers or {}).items()
    }
    return McpHttpSource(
        name=name,
        url=url,
        transport=transport,  # type: ignore[arg-type]
        headers=templates,
        timeout_ms=timeout_ms,
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode} before listening on {port}"
            )
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.5),
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"server did not listen on 127.0.0.1:{port} within {timeout_s}s")


class ServerProcess:
    """A server subprocess that can be stopped and started again on the same port."""

    def __init__(
        self, argv: Sequence[str], port: int, env: Mapping[str, str] | None = None
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.port, self.process)

    def kill(self) -> None:
        """SIGKILL the whole group: no graceful shutdown, in-flight requests just die."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        # The whole group: npm's bin shims start node as a child.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextlib.contextmanager
def http_server(*args: str, transport: str = "http") -> Iterator[ServerProcess]:
    """The test server over Streamable HTTP (``/mcp``) or SSE (``/sse``) on a free port."""
    port = free_port()
    server = ServerProcess(
        [sys.executable, str(SERVER_SCRIPT), "--transport", transport, "--port", str(port), *args],
        port,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def everything_server(binary: Path, mode: str) -> Iterator[ServerProcess]:
    """``mcp-server-everything streamableHttp|sse`` on a free port."""
    port = free_port()
    server = ServerProcess([str(binary), mode], port, env={"PORT": str(port)})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
