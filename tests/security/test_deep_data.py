"""Deep data: one nesting bound (``MAX_NESTING`` = 100 levels) with a stable outcome at every
boundary, in-process and through `codemode serve` with a real MCP client; a tool whose
schema nests too deeply is set aside, never its source."""

from __future__ import annotations

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

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from codemodekit import CodeMode, load_spec
from codemodekit.nesting import MAX_NESTING

DEPTHS = [1, MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 150, 201, 300, 500, 980]

TOOLS = """
from codemodekit import define_tool


def _nest(args):
    value = "leaf"
    for _ in range(args["depth"]):
        value = [value]
    return {"v": value}


def _deep_schema(depth):
    schema = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


nest = define_tool(description="Nested result.", input_schema={
    "type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"]},
    execute=_nest)
take = define_tool(description="Takes anything.", input_schema={"type": "object"},
                   execute=lambda args: {"ok": True})
deep_schema = define_tool(description="Deep schema.", input_schema=_deep_schema(900),
                          execute=lambda args: {"ok": True})
"""

SPEC = """
version = 1
name = "deep"
[policy]
default = "allow"
[sources.app]
type = "python"
module = "deeptools"
"""


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    (tmp_path / "deeptools.py").write_text(TOOLS)
    (tmp_path / "codemode.toml").write_text(SPEC)
    return tmp_path / "codemode.toml"


def _nested_js(depth: int) -> str:
    return f"(() => {{ let v = 'leaf'; for (let i = 0; i < {depth}; i++) v = [v]; return v; }})()"


async def test_one_bound_everywhere_in_process(spec_path: Path) -> None:
    async with CodeMode.from_spec(load_spec(spec_path)) as cm:
        # One bad schema sets that tool aside; the source and its other tools stay.
        deep = cm.catalog.get("app", "deep_schema")
        assert deep is not None and not deep.available
        assert f"{MAX_NESTING} levels" in (deep.quarantine or "")
        assert cm.catalog.get("app", "take") is not None
        for depth in DEPTHS:
            # A tool result: {"v": <depth levels>} is depth + 1 levels.
            result = await cm.run(
                f"return (await tools.app.nest({{depth: {depth}}})).structuredContent.v;"
            )
            if depth + 1 <= MAX_NESTING:
                assert result.ok, (depth, result.diagnostic)
            else:
                assert result.diagnostic is not None, depth
                assert result.diagnostic.code == "TOOL_RESULT_INVALID", (depth, result.diagnostic)
                assert f"{MAX_NESTING} levels" in result.diagnostic.message
            # Arguments: {"x": <depth levels>} is depth + 1 levels.
            result = await cm.run(f"return await tools.app.take({{x: {_nested_js(depth)}}});")
            if depth + 1 <= MAX_NESTING:
                assert result.ok, (depth, result.diagnostic)
            else:
                assert result.diagnostic is not None, depth
                assert result.diagnostic.code == "TOOL_INPUT_INVALID", (depth, result.diagnostic)
                assert f"{MAX_NESTING} levels" in result.diagnostic.message
            # The run's own returned value.
            result = await cm.run(f"return {_nested_js(depth)};")
            if depth <= MAX_NESTING:
                assert result.ok, (depth, result.diagnostic)
            else:
                assert result.diagnostic is not None, depth
                assert result.diagnostic.code == "RESULT_NOT_SERIALIZABLE", depth
                assert f"{MAX_NESTING} levels" in result.diagnostic.message


# -- through `codemode serve` with a real MCP client ------------------------------------------
@pytest.fixture
def served(spec_path: Path) -> Iterator[str]:
    command = [sys.executable, "-m", "codemodekit", "serve", "-c", str(spec_path)]
    process = subprocess.Popen(
        [*command, "--transport", "http", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=spec_path.parent,
        env=dict(os.environ),
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 90  # hang guard only
    url = None
    while url is None and time.monotonic() < deadline and process.poll() is None:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if " at http://" in line:
            url = line.rsplit(" at ", 1)[1].strip()
    try:
        assert url is not None, "codemode serve did not come up"
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_deep_results_through_serve_are_a_diagnostic_not_a_crash(served: str) -> None:
    http = httpx2.AsyncClient(timeout=60)
    async with Client(
        streamable_http_client(served, http_client=http), read_timeout_seconds=60
    ) as client:
        for depth in DEPTHS:
            for code in (
                f"return {_nested_js(depth)};",
                f"return (await tools.app.nest({{depth: {depth}}})).structuredContent.v;",
            ):
                reply = await client.call_tool("run_typescript", {"code": code})
                text = "\n".join(getattr(block, "text", "") for block in reply.content)
                assert "Internal server error" not in text, (depth, text)
                if reply.is_error:
                    assert f"{MAX_NESTING} levels" in text, (depth, text)
                    assert depth >= MAX_NESTING, (depth, text)
                else:
                    assert depth <= MAX_NESTING, depth
                    assert reply.structured_content is not None
        # The server is still serving normally afterwards.
        ok = await client.call_tool("run_typescript", {"code": "return 1 + 1;"})
        assert not ok.is_error and json.loads(ok.content[0].text) == 2  # type: ignore[union-attr]
