"""Real third-party Python MCP servers from PyPI (``mcp-server-time``, ``mcp-server-git``).

Each is installed once into its own virtual environment under ``.cache/pyservers/`` (so its
dependencies never touch this project's venv); without network access to PyPI the tests skip
with the reason.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from codemodekit.errors import ToolError
from codemodekit.providers.base import HealthStatus
from codemodekit.spec.model import McpStdioSource
from tests.providers.mcp.helpers import Changes, context, provider

pytestmark = pytest.mark.slow  # the first run installs the servers from PyPI

CACHE = Path(__file__).resolve().parents[3] / ".cache" / "pyservers"


def pypi_server(package: str) -> Path:
    """The console script of ``package`` in its own cached venv (installed on first use)."""
    venv = CACHE / package
    script = venv / "bin" / package
    if script.exists():
        return script
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120
        )
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", package],
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        pytest.skip(f"cannot install {package} from PyPI into {venv}: {type(exc).__name__}")
    if not script.exists():
        pytest.skip(f"{package} installed no `{package}` command")
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
