"""`codemode serve` replicas behind a real HAProxy on 127.0.0.1 (tests and benchmarks).

HAProxy comes from the distribution's package (`apt-get install haproxy`; scripts/test.sh
installs it where it can). Its configuration is the one docs/operations.md recommends:
round robin over stateless replicas, `/readyz` health checks, and retries only for
connections that never reached a replica (`retry-on conn-failure`), so a run is never
replayed on another replica after one died with it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.server.test_serve import Served, _env, _start_http

HAPROXY_CONFIG = """\
global
    stats socket {socket} mode 600 level admin
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    # Retry (on another replica) only when the connection failed: the request never
    # arrived, so nothing is replayed. A replica that dies mid-request fails that request.
    retries 3
    retry-on conn-failure
    option redispatch 1

frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect status 200
    default-server check inter 250ms fall 2 rise 1
{servers}
"""


def haproxy() -> str | None:
    return shutil.which("haproxy")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """``count`` replicas of ``codemode serve --stateless`` and one HAProxy in front."""

    def __init__(self, config: Path, count: int = 3, *extra: str) -> None:
        self.config = config
        self.count = count
        self.extra = extra
        self.replicas: dict[str, Served] = {}
        self.proxy: subprocess.Popen[str] | None = None
        self.socket = config.parent / "haproxy.sock"
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> Cluster:
        binary = haproxy()
        assert binary is not None, "haproxy is not installed"
        for index in range(1, self.count + 1):
            name = f"r{index}"
            self.replicas[name] = _start_http(
                self.config,
                "--stateless",
                "--public-health",
                *self.extra,
                env=_env(CM_REPLICA=name),
            )
        servers = "\n".join(
            f"    server {name} {served.url.removeprefix('http://').removesuffix('/mcp')}"
            for name, served in self.replicas.items()
        )
        self.port = _free_port()
        path = self.config.parent / "haproxy.cfg"
        path.write_text(HAPROXY_CONFIG.format(socket=self.socket, port=self.port, servers=servers))
        check = subprocess.run([binary, "-c", "-f", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        self.proxy = subprocess.Popen(
            [binary, "-db", "-f", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.wait_for(lambda states: all(s == "UP" for s in states.values()), "all UP")
        return self

    def states(self) -> dict[str, str]:
        """Each replica's status as HAProxy sees it (``UP``, ``DOWN``, ``UP 1/2``…)."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(self.socket))
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        lines = data.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(","), strict=False))
            if row.get("pxname") == "replicas" and row.get("svname") in self.replicas:
                out[row["svname"]] = row["status"]
        return out

    def wait_for(self, condition: object, what: str, timeout: float = 60.0) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            try:
                states = self.states()
            except OSError:
                states = {}
            if states and condition(states):  # type: ignore[operator]
                return states
            time.sleep(0.05)
        raise AssertionError(f"HAProxy never reported {what}: {states}")

    def stop(self) -> None:
        if self.proxy is not None and self.proxy.poll() is None:
            self.proxy.terminate()
            self.proxy.wait(timeout=30)
        for served in self.replicas.values():
            if served.process.poll() is None:
                served.process.terminate()
        for served in self.replicas.values():
            try:
                served.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                served.process.kill()
                served.process.wait()


__all__ = ["HAPROXY_CONFIG", "Cluster", "haproxy"]
