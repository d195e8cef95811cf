"""`codemode serve` answers `initialize` before its sources are up; they join the catalog as
they come, and a run that names one still connecting waits for it (issue 20 item 11).

A real MCP client drives `codemode serve` over stdio; the upstream is the test server held
at its start by a gate file that only the test opens, and only once the run says it waits."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from tests.servers import SERVER_SCRIPT


def _spec(tmp_path: Path, gate: Path) -> Path:
    config = tmp_path / "codemode.toml"
    config.write_text(
        'version = 1\nname = "at-once"\n[policy]\ndefault = "allow"\n'
        f'[sources.gated]\ntype = "mcp"\ncommand = "{sys.executable}"\n'
        f'args = ["{SERVER_SCRIPT}", "--gate", "{gate}"]\n',
        encoding="utf-8",
    )
    return config


async def test_initialize_is_answered_while_a_source_connects_and_a_run_waits_for_it(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    config = _spec(tmp_path, gate)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemodekit", "serve", "-c", str(config)],
        cwd=str(tmp_path),
        env=dict(os.environ),
    )
    updates: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append(message)
        if message is not None and message.startswith("waiting for source 'gated'"):
            gate.touch()  # only now may the upstream come up

    async with Client(params, read_timeout_seconds=120) as client:
        # The handshake is done while `gated` cannot have started: it waits for the gate.
        assert not gate.exists()
        found = await client.call_tool("search_tools", {"query": "echo"})
        assert not gate.exists()
        ran = await client.call_tool(
            "run_typescript",
            {"code": "return (await tools.gated.echo({ text: 'hi' })).structuredContent;"},
            progress_callback=on_progress,
        )
        after = await client.call_tool("search_tools", {"query": "echo"})
    assert found.structured_content is not None
    assert "connecting" in str(found.structured_content)
    assert ran.is_error is False, ran.content
    assert ran.structured_content is not None
    assert ran.structured_content["value"] == {"result": "hi"}
    assert "waiting for source 'gated' to connect" in updates
    assert after.structured_content is not None
    assert after.structured_content["tools"][0]["address"] == "tools.gated.echo"
