"""Real third-party MCP servers declared in one codemode.toml, killed and restarted mid-run.

npm: ``@modelcontextprotocol/server-memory``, ``server-filesystem`` (stdio) and
``server-everything`` (Streamable HTTP and SSE); PyPI: ``mcp-server-time`` and
``mcp-server-git`` (stdio, cached venvs). One more source never comes up.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec
from codemodekit.providers.base import HealthStatus
from tests.conftest import node_tool
from tests.providers.mcp.helpers import eventually
from tests.providers.mcp.test_pypi_servers import pypi_server
from tests.servers import ServerProcess, everything_server, free_port, pid_alive

pytestmark = [pytest.mark.slow, pytest.mark.npm]


def _descendants_matching(word: str) -> set[int]:
    """Live processes below this one whose command line mentions ``word``."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        cmdlines[pid] = cmdline
    mine = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                changed = True
    return {p for p in mine if word in cmdlines.get(p, "") and pid_alive(p)}


def _stdio_servers() -> set[int]:
    words = ("server-memory", "server-filesystem", "mcp-server-time", "mcp-server-git")
    return set().union(*(_descendants_matching(word) for word in words))


@pytest.fixture
def everything_http() -> Iterator[ServerProcess]:
    with everything_server(node_tool("mcp-server-everything"), "streamableHttp") as server:
        yield server


@pytest.fixture
def spec(tmp_path: Path, everything_http: ServerProcess) -> Path:
    memory = node_tool("mcp-server-memory")
    filesystem = node_tool("mcp-server-filesystem")
    time_server = pypi_server("mcp-server-time")
    git_server = pypi_server("mcp-server-git")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "hello.txt").write_text("hello from the filesystem server\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    dead_port = free_port()
    path = tmp_path / "codemode.toml"
    path.write_text(
        "version = 1\n"
        'name = "third-party"\n'
        '[policy]\ndefault = "allow"\n'
        f'[sources.memory]\ntype = "mcp"\ncommand = {json.dumps(str(memory))}\n'
        f"env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / 'memory.jsonl'))} }}\n"
        f'[sources.files]\ntype = "mcp"\ncommand = {json.dumps(str(filesystem))}\n'
        f"args = [{json.dumps(str(shared))}]\n"
        f'[sources.clock]\ntype = "mcp"\ncommand = {json.dumps(str(time_server))}\n'
        'args = ["--local-timezone", "UTC"]\n'
        f'[sources.git]\ntype = "mcp"\ncommand = {json.dumps(str(git_server))}\n'
        f'args = ["--repository", {json.dumps(str(repo))}]\n'
        f'[sources.everything]\ntype = "mcp"\n'
        f'url = "http://127.0.0.1:{everything_http.port}/mcp"\n'
        f'[sources.never]\ntype = "mcp"\nurl = "http://127.0.0.1:{dead_port}/mcp"\n'
    )
    return path


async def test_third_party_servers_fail_and_heal_independently(spec: Path) -> None:
    shared = spec.parent / "shared"
    async with CodeMode.from_spec(load_spec(spec)) as cm:
        health = {h.source: h.status for h in cm.health}
        assert health == {
            "memory": HealthStatus.OK,
            "files": HealthStatus.OK,
            "clock": HealthStatus.OK,
            "git": HealthStatus.OK,
            "everything": HealthStatus.OK,
            "never": HealthStatus.UNAVAILABLE,
        }
        everyone = await cm.run(
            "await tools.memory.create_entities({ entities: [\n"
            "  { name: 'Ada', entityType: 'person', observations: ['wrote programs'] }] });\n"
            "const graph = await tools.memory.read_graph({});\n"
            f"const file = await tools.files.read_text_file({{ path: {json.dumps(str(shared / 'hello.txt'))} }});\n"
            "const now = await tools.clock.get_current_time({ timezone: 'Europe/Paris' });\n"
            f"const status = await tools.git.git_status({{ repo_path: {json.dumps(str(spec.parent / 'repo'))} }});\n"
            "const echo = await tools.everything.echo({ message: 'hi' });\n"
            "let never;\n"
            "try { await tools.never.anything({}); } catch (e) { never = e.code; }\n"
            "return { graph: JSON.stringify(graph), file: file.content[0].text,\n"
            "  tz: now.structuredContent.timezone, status: status.content[0].text,\n"
            "  echo: echo.content[0].text, never };"
        )
        assert everyone.ok, everyone.diagnostic
        value = everyone.value
        assert "Ada" in value["graph"]
        assert "hello from the filesystem server" in value["file"]
        assert value["tz"] == "Europe/Paris"
        assert value["echo"] == "Echo: hi"
        assert value["never"] == "SOURCE_UNAVAILABLE"

        # SIGKILL the memory server while a program is running; siblings keep answering.
        (victim,) = _descendants_matching("server-memory")
        gate = asyncio.Event()

        async def kill_when_started(event: object) -> None:
            if getattr(event, "kind", "") == "tool_call_started" and not gate.is_set():
                gate.set()
                os.kill(victim, signal.SIGKILL)

        mid = await cm.run(
            "const before = await tools.clock.get_current_time({ timezone: 'UTC' });\n"
            "let lost = null;\n"
            "for (let i = 0; i < 50 && lost === null; i++) {\n"
            "  try { await tools.memory.read_graph({}); } catch (e) { lost = e.code; }\n"
            "}\n"
            "const after = await tools.files.list_allowed_directories({});\n"
            "return [lost, after.content.length > 0];",
            on_progress=kill_when_started,
        )
        assert mid.ok, mid.diagnostic
        assert mid.value == ["SOURCE_UNAVAILABLE", True]
        await eventually(
            lambda: {h.source: h.status for h in cm.health}["memory"] == HealthStatus.OK,
            "the memory server restarts",
            timeout_s=60,
        )
        healed = await cm.run("return JSON.stringify(await tools.memory.read_graph({}));")
        assert healed.ok, healed.diagnostic
        assert "Ada" in healed.value  # the restarted server re-read its file
        assert not pid_alive(victim)
        servers = _stdio_servers()
        assert len(servers) >= 4
    # Shutdown terminates every child it started: no orphans, no zombies.
    assert not {p for p in servers if pid_alive(p)}
    assert not _stdio_servers()


def test_codemode_check_and_run_against_third_party_servers(spec: Path) -> None:
    env = dict(os.environ)
    checked = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(spec)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert checked.returncode == 1  # one source never comes up
    rows = {
        line.split()[0]: line
        for line in checked.stdout.split("connecting...")[-1].splitlines()
        if line.startswith("  ")
    }
    for name in ("memory", "files", "clock", "git", "everything"):
        assert "ok" in rows[name].split(), checked.stdout
    assert "unavailable" in rows["never"].split() and "cannot connect" in rows["never"]
    code = spec.parent / "program.ts"
    code.write_text(
        "const t = await tools.clock.get_current_time({ timezone: 'Asia/Tokyo' });\n"
        "return t.structuredContent.timezone;"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "codemodekit", "run", "-c", str(spec), str(code)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Asia/Tokyo" in ran.stdout
