"""Real third-party Python MCP servers from PyPI (``mcp-server-time``, ``mcp-server-git``).

Each is installed once into its own virtual environment under ``.cache/pyservers/`` (so its
dependencies never touch this project's venv). The tests skip only when the package index
cannot be reached; any other failure to install (pip broken, the package gone, no
command installed) fails them, with pip's own output.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemodekit.errors import ToolError
from codemodekit.providers.base import HealthStatus
from codemodekit.spec.model import McpStdioSource
from tests.conftest import http_handler_server
from tests.providers.mcp.helpers import Changes, context, provider

pytestmark = pytest.mark.slow  # the first run installs the servers from PyPI

CACHE = Path(__file__).resolve().parents[3] / ".cache" / "pyservers"
PYPI = "https://pypi.org/simple"


def index_url() -> str:
    """The index pip installs from: ``PIP_INDEX_URL``, pip's configuration, or PyPI."""
    configured = os.environ.get("PIP_INDEX_URL")
    if configured:
        return configured
    found = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else PYPI


def unreachable(url: str) -> str | None:
    """Why ``url`` cannot be reached (no connection, no answer, a server error), or
    ``None`` when it answers: then the index is up, whatever the answer says."""
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            reply.read(1)
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}" if exc.code >= 500 else None
    except (urllib.error.URLError, OSError) as exc:
        return f"{url}: {exc}"
    return None


def pypi_server(package: str) -> Path:
    """The console script of ``package`` in its own cached venv (installed on first use)."""
    venv = CACHE / package
    script = venv / "bin" / package
    if script.exists():
        return script
    subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120
    )
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", package],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if install.returncode != 0:
        page = f"{index_url().rstrip('/')}/{package}/"
        why = unreachable(page)
        if why is not None:
            pytest.skip(f"cannot reach the package index to install {package}: {why}")
        pytest.fail(
            f"pip could not install {package} into {venv} although {page} answers:\n"
            + (install.stdout + install.stderr)[-4000:],
            pytrace=False,
        )
    assert script.exists(), f"{package} installed no `{package}` command"
    return script


async def test_mcp_server_time() -> None:
    command = pypi_server("mcp-server-time")
    config = McpStdioSource(
        name="time", command=str(command), args=("--local-timezone", "UTC"), timeout_ms=30_000
    )
    async with provider(config) as mcp:
        discovery = await mcp.start(Changes())
        assert mcp.health().status == HealthStatus.OK
        tools = {tool.name: tool for tool in discovery.tools}
        assert {"get_current_time", "convert_time"} <= set(tools)
        assert tools["convert_time"].output_schema is not None
        now = await mcp.call_tool("get_current_time", {"timezone": "Europe/Paris"}, context())
        assert now.structured_content["timezone"] == "Europe/Paris"
        with pytest.raises(ToolError) as caught:
            await mcp.call_tool("get_current_time", {"timezone": "Mars/Olympus"}, context())
        assert "Mars/Olympus" in caught.value.message


async def test_mcp_server_git(tmp_path: Path) -> None:
    command = pypi_server("mcp-server-git")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("hello\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit"], check=True)
    config = McpStdioSource(
        name="git", command=str(command), args=("--repository", str(repo)), timeout_ms=30_000
    )
    async with provider(config) as mcp:
        discovery = await mcp.start(Changes())
        names = {tool.name for tool in discovery.tools}
        assert {"git_status", "git_log"} <= names
        log = await mcp.call_tool("git_log", {"repo_path": str(repo)}, context())
        assert "first commit" in log.content[0]["text"]


class _NoPackages(http.server.BaseHTTPRequestHandler):
    """A package index that is up and knows no package."""

    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def empty_index() -> Iterator[str]:
    with http_handler_server(_NoPackages) as url:
        yield f"{url}/simple"


@pytest.fixture
def closed_index() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/simple"


@pytest.mark.parametrize("reachable", [True, False], ids=["index-up", "index-down"])
def test_a_failed_install_skips_only_when_the_index_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    empty_index: str,
    closed_index: str,
    reachable: bool,
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CACHE", tmp_path)
    monkeypatch.setenv("PIP_INDEX_URL", empty_index if reachable else closed_index)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    outcome = pytest.fail.Exception if reachable else pytest.skip.Exception
    with pytest.raises(outcome) as caught:
        pypi_server("codemodekit-test-no-such-package")
    if reachable:
        assert "answers" in str(caught.value) and "no-such-package" in str(caught.value)
    else:
        assert "cannot reach the package index" in str(caught.value)
