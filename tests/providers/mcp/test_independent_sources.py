"""Sources declared together fail independently: one source's failure never harms another's."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemodekit import CodeMode, ProgressEvent, load_spec
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
    assert down.diagnostic.code == "SOURCE_UNAVAILABLE"  # it never came up (docs/api.md)


LATE_WRAPPER = """
import os, sys, time
from pathlib import Path

gate = Path(sys.argv[1])
while not gate.exists():
    time.sleep(0.02)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def _late_spec(folder: Path, extra: str = "") -> Path:
    import json
    import sys

    from tests.servers import SERVER_SCRIPT

    (folder / "cmtools.py").write_text(TOOLS)
    (folder / "late.py").write_text(LATE_WRAPPER)
    args = [str(folder / "late.py"), str(folder / "gate"), str(SERVER_SCRIPT)]
    spec = folder / "codemode.toml"
    spec.write_text(
        "version = 1\n"
        'name = "late"\n'
        '[policy]\ndefault = "allow"\n'
        '[sources.app]\ntype = "python"\nmodule = "cmtools"\n'
        "[sources.late]\n"
        'type = "mcp"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps(args)}\n"
        "timeout_ms = 60000\n" + extra
    )
    return spec


async def test_a_slow_source_does_not_hold_start_and_joins_the_catalog_later(
    tmp_path: Path,
) -> None:
    spec = _late_spec(tmp_path)
    cm = CodeMode.from_spec(load_spec(spec))
    try:
        await cm.start(grace_s=0.2)
        health = {h.source: h for h in cm.health}
        assert health["app"].status == HealthStatus.OK
        assert health["late"].status == HealthStatus.CONNECTING
        # A run that names only the sources that are up does not wait for the late one.
        ok = await cm.run("return (await tools.app.echo({ text: 'a' })).structuredContent;")
        assert ok.ok and ok.value == {"text": "a"}
        assert {h.source: h.status for h in cm.health}["late"] == HealthStatus.CONNECTING

        revision = cm.catalog.revision

        def on_progress(event: ProgressEvent) -> None:
            if event.kind == "source_connecting":  # the run waits for `late`: let it come
                (tmp_path / "gate").write_text("open")

        # One that names it waits for it within its wall limit (issue 20 item 11).
        late = await cm.run(
            "return (await tools.late.echo({ text: 'hi' })).structuredContent;",
            on_progress=on_progress,
        )
        assert late.ok, late.diagnostic
        assert late.value == {"result": "hi"}
        assert cm.catalog.get("late", "echo") is not None
        assert cm.catalog.revision != revision
        assert {h.source: h.status for h in cm.health}["late"] == HealthStatus.OK
    finally:
        await cm.aclose()


def test_codemode_check_reports_the_settled_state_of_a_slow_source(
    tmp_path: Path, silent_port: int
) -> None:
    import subprocess
    import sys

    # The silent source's own connect timeout outlasts the server's start grace: check
    # still waits for it and reports why it failed, never a transient "connecting".
    spec = _late_spec(
        tmp_path,
        f'[sources.silent]\ntype = "mcp"\nurl = "http://127.0.0.1:{silent_port}/mcp"\n'
        "timeout_ms = 6000\n",
    )
    (tmp_path / "gate").write_text("open")
    completed = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(spec)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = completed.stdout.split("connecting...")[-1]
    assert completed.returncode == 1, completed.stdout + completed.stderr
    lines = {line.split()[0]: line for line in report.splitlines() if line.startswith("  ")}
    assert "ok" in lines["late"].split()
    assert "unavailable" in lines["silent"].split() and "no answer" in lines["silent"]
