"""Sources declared together fail independently: one source's failure never harms another's."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec
from codemodekit.providers.base import HealthStatus

TOOLS = """
from codemodekit import define_tool

__all__ = ["echo"]

echo = define_tool(
    description="Echo the text argument back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    execute=lambda args: {"text": args.get("text", "")},
)
"""


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts TCP connections (the kernel backlog) but never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


async def test_a_missing_command_does_not_break_a_sibling_http_connection(
    tmp_path: Path, silent_port: int
) -> None:
    # Regression: the failed stdio source closed its stderr pipe's descriptor twice; the
    # second close hit whatever reused the number -- the sibling's fresh TCP socket.
    (tmp_path / "cmtools.py").write_text(TOOLS)
    (tmp_path / "codemode.toml").write_text(
        "version = 1\n"
        'name = "independent"\n'
        '[policy]\ndefault = "allow"\n'
        '[sources.app]\ntype = "python"\nmodule = "cmtools"\n'
        "[sources.silent]\n"
        'type = "mcp"\n'
        f'url = "http://127.0.0.1:{silent_port}/mcp"\n'
        "timeout_ms = 1500\n"
        '[sources.missing]\ntype = "mcp"\ncommand = "/nonexistent/codemode-test-server"\n'
    )
    async with CodeMode.from_spec(load_spec(tmp_path / "codemode.toml")) as cm:
        health = {h.source: h for h in cm.health}
        ran = await cm.run("return (await tools.app.echo({ text: 'up' })).structuredContent;")
        down = await cm.run("return await tools.silent.anything({});")
    assert ran.ok and ran.value == {"text": "up"}
    assert health["app"].status == HealthStatus.OK
    assert health["missing"].status == HealthStatus.UNAVAILABLE
    assert "command was not found" in health["missing"].message
    assert health["silent"].status == HealthStatus.UNAVAILABLE
    # The silent server was reached: it timed out, it was not refused.
    assert "no answer" in health["silent"].message
    assert "cannot connect" not in health["silent"].message
    assert down.diagnostic is not None
    assert down.diagnostic.code in ("SOURCE_UNAVAILABLE", "TOOL_NOT_FOUND")
