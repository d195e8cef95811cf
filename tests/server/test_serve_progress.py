"""Issue 13, item 10: over stdio a fast run's last progress event ("run finished") arrives,
and progress text names the tool once. A real MCP client drives ``codemode serve``."""

from __future__ import annotations

from pathlib import Path

from tests.server.test_serve import _stdio, config

from codemodekit.run import ProgressEvent
from codemodekit.server.tools import ProgressRelay

__all__ = ["config"]


async def test_stdio_fast_run_delivers_run_finished(config: Path) -> None:
    for _ in range(3):  # the loss was a race; a few fast runs make it visible
        updates: list[str | None] = []

        async def on_progress(
            progress: float,
            total: float | None,
            message: str | None,
            updates: list[str | None] = updates,
        ) -> None:
            updates.append(message)

        async with _stdio(config) as client:
            result = await client.call_tool(
                "run_typescript", {"code": "return 1;"}, progress_callback=on_progress
            )
        assert result.structured_content is not None
        assert result.structured_content["value"] == 1
        assert updates == ["run started", "run finished"]


async def test_progress_text_names_the_tool_once() -> None:
    sent: list[str] = []
    now = [0.0]

    async def send(progress: float, message: str) -> None:
        sent.append(message)

    relay = ProgressRelay(send, max_events=10, per_second=10, clock=lambda: now[0])
    address = "tools.app.echo"
    for step, (kind, message) in enumerate(
        [
            ("tool_call_started", f"calling {address}"),
            ("tool_progress", "50% done"),
            ("tool_call_finished", f"{address} finished"),
        ]
    ):
        now[0] = step * 1.0  # far apart: nothing is held back by the rate bound
        await relay(ProgressEvent("run", step + 1, kind, message, tool=address))
    await relay.close()
    assert sent == [f"calling {address}", f"50% done ({address})", f"{address} finished"]
