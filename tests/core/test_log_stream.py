"""`CodeMode.run(on_log=)` and `codemode run`: console lines arrive while the run goes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    Limits,
    ProcessSandbox,
    QuickJsSandbox,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    local,
)
from codemodekit.sandbox.base import LogEntry

HANG_GUARD_S = 60.0


@pytest.mark.parametrize("mode", ["process", "inline"])
async def test_on_log_sees_a_line_before_the_tool_it_precedes_returns(mode: str) -> None:
    seen = asyncio.Event()
    streamed: list[LogEntry] = []

    async def gate(_args: dict[str, Any]) -> str:
        await asyncio.wait_for(seen.wait(), HANG_GUARD_S)
        return "open"

    def on_log(entry: LogEntry) -> None:
        streamed.append(entry)
        if entry.message == "waiting for the gate":
            seen.set()

    tools = local(
        "g",
        {"gate": define_tool(description="gate", input_schema={"type": "object"}, execute=gate)},
    )
    box: Any = (
        ProcessSandbox(RuntimeOptions(max_runs=2, warm_workers=1), shared=False)
        if mode == "process"
        else QuickJsSandbox()
    )
    code = """
    console.log('waiting for the gate');
    const r = await tools.g.gate({});
    console.log('gate', r.structuredContent ?? r.content[0].text);
    return 'done';
    """
    try:
        async with CodeMode(sources=[tools], policy=allow_all_tool_calls(), sandbox=box) as cm:
            result = await cm.run(code, on_log=on_log)
            assert result.ok, result.diagnostic
            assert result.value == "done"
            assert tuple(streamed) == result.logs
            assert streamed[0].message == "waiting for the gate"
            # Without on_log the logs are the same.
            seen.set()
            assert (await cm.run(code)).logs == result.logs
    finally:
        box.close()


async def test_a_failing_callback_loses_nothing_from_the_result() -> None:
    def on_log(entry: LogEntry) -> None:
        raise RuntimeError("consumer broke")

    async with CodeMode(
        sources=[], policy=allow_all_tool_calls(), sandbox=QuickJsSandbox(), limits=Limits()
    ) as cm:
        result = await cm.run("console.log('a'); console.log('b'); return 1", on_log=on_log)
    assert result.ok
    assert [e.message for e in result.logs] == ["a", "b"]


# -- the CLI -------------------------------------------------------------------------------
GATE_API = """openapi: 3.1.0
info: {title: gate, version: "1"}
paths:
  /gate:
    get:
      operationId: gate
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: object}
"""


@pytest.fixture
def gate_server() -> Iterator[tuple[str, threading.Event]]:
    opened = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            opened.wait(HANG_GUARD_S)
            body = json.dumps({"gate": "open" if opened.is_set() else "timed out"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", opened
    finally:
        opened.set()
        server.shutdown()
        server.server_close()


def test_codemode_run_prints_a_console_line_while_the_run_goes(
    tmp_path: Path, gate_server: tuple[str, threading.Event]
) -> None:
    base_url, opened = gate_server
    (tmp_path / "gate.yaml").write_text(GATE_API, encoding="utf-8")
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "t"\n[policy]\ndefault = "allow"\n'
        f'[sources.g]\ntype = "openapi"\ndocument = "gate.yaml"\nbase_url = "{base_url}"\n',
        encoding="utf-8",
    )
    (tmp_path / "script.ts").write_text(
        "console.log('waiting for the gate');\n"
        "const r = await tools.g.gate({});\n"
        "console.info('after', JSON.stringify(r.structuredContent));\n"
        "return 'done';\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k != "CODEMODE_CONFIG"}
    child = subprocess.Popen(
        [sys.executable, "-m", "codemodekit", "run", "script.ts"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stderr is not None and child.stdout is not None
        before: list[str] = []
        for line in child.stderr:  # the gate stays shut until the line was read here
            before.append(line)
            if line.strip() == "[log] waiting for the gate":
                break
        assert not opened.is_set()
        assert child.poll() is None, "the run ended before its tool call returned"
        opened.set()
        rest = child.stderr.read()
        out = child.stdout.read()
        assert child.wait(HANG_GUARD_S) == 0, "".join(before) + rest
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    err = "".join(before) + rest
    assert out == "done\n"
    assert err.count("waiting for the gate") == 1  # printed as it came, not again at the end
    assert '[info] after {"gate":"open"}' in rest
    assert rest.strip().splitlines()[-1].startswith("codemode run: compile ")
