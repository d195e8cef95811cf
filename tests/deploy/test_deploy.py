"""The container and Kubernetes examples: their flags, probes and paths match the server."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import tools_project
from tests.server.test_serve import CONFIG, TOKEN, TOOLS_MODULE, _env, _start_http

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
KUBERNETES = ROOT / "deploy" / "kubernetes" / "codemode.yaml"


def _entrypoint() -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.MULTILINE)
    assert match, "the Dockerfile has no exec-form ENTRYPOINT"
    return list(json.loads(match.group(1)))


def _documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(KUBERNETES.read_text()) if d]


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tools_project(tmp_path, "servetools", TOOLS_MODULE, CONFIG)


def test_the_image_flags_and_the_kubernetes_probes_work_against_a_real_server(
    config: Path,
) -> None:
    entry = _entrypoint()
    assert entry[:2] == ["codemode", "serve"]
    documents = _documents()
    container = _container(documents)
    token_env = _flag(entry, "--auth-token-env")
    (env,) = [e for e in container["env"] if e["name"] == token_env]
    assert env["valueFrom"]["secretKeyRef"]["key"] == "token"
    port = int(_flag(entry, "--port"))
    assert container["ports"][0]["containerPort"] == port
    service = next(d for d in documents if d["kind"] == "Service")
    assert service["spec"]["selector"] == {"app": "codemode"}
    grace = documents[0]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(_flag(entry, "--drain-timeout"))

    # The image's own flags, bound to loopback on a free port, with the token set.
    flags = entry[2:]
    flags = [a for a in flags if a not in ("-c", "/config/codemode.toml", "--transport", "http")]
    for name in ("--host", "--port"):
        index = flags.index(name)
        del flags[index : index + 2]
    served = _start_http(config, *flags, env=_env(**{token_env: TOKEN}))
    try:
        base = served.url.removesuffix("/mcp")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            path = container[probe]["httpGet"]["path"]
            assert httpx.get(base + path, timeout=10).status_code == 200, probe
        assert httpx.post(served.url, json={}, timeout=10).status_code == 401
        assert httpx.get(base + "/metrics", timeout=10).status_code == 401
        scraped = httpx.get(
            base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        assert scraped.status_code == 200 and "codemode_runs_in_flight" in scraped.text
    finally:
        code, stderr = served.stop()
    assert code == 0, stderr


def _container_runtime() -> str | None:
    for name in ("docker", "podman"):
        binary = shutil.which(name)
        if binary and subprocess.run([binary, "info"], capture_output=True).returncode == 0:
            return binary
    return None


@pytest.mark.slow
@pytest.mark.skipif(
    _container_runtime() is None,
    reason="no working container runtime (docker or podman with a reachable daemon)",
)
def test_the_container_builds_runs_as_non_root_and_serves(config: Path) -> None:
    runtime = _container_runtime()
    assert runtime is not None
    tag = "codemodekit-test:latest"
    build = subprocess.run(
        [runtime, "build", "-t", tag, str(ROOT)], capture_output=True, text=True, timeout=1800
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    user = subprocess.run(
        [runtime, "run", "--rm", "--entrypoint", "id", tag, "-u"], capture_output=True, text=True
    )
    assert user.stdout.strip() == "10001"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    name = f"codemodekit-test-{port}"
    started = subprocess.run(
        [
            runtime, "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8000",
            "-e", f"CODEMODE_TOKEN={TOKEN}",
            "-v", f"{config.parent}:/config:ro", tag,
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            logs = subprocess.run([runtime, "logs", name], capture_output=True, text=True)
            assert time.monotonic() < deadline, logs.stdout + logs.stderr
            time.sleep(0.5)
        unauthorized = httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=10)
        assert unauthorized.status_code == 401
        stop = subprocess.run([runtime, "stop", "-t", "30", name], capture_output=True)
        assert stop.returncode == 0
        state = subprocess.run(
            [runtime, "inspect", "-f", "{{.State.ExitCode}}", name], capture_output=True, text=True
        )
        assert state.stdout.strip() == "0"
    finally:
        subprocess.run([runtime, "rm", "-f", name], capture_output=True)
