"""A run that ends without the sandbox's outcome keeps the console lines it wrote (found by
a review helper: at a wall limit or a cancellation ``RunResult.logs`` and the MCP reply
were empty, though the lines had reached the host; a timed-out run's lines are what shows
where it hung). Each way is enumerated, in both modes, with and without ``on_log``, and
through ``run_typescript`` as the model sees it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client

from codemodekit import (
    CodeMode,
    Limits,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    local,
)
from codemodekit.server.hosting import create_server

HANG_GUARD_S = 60.0
SCRIPT = "console.log('step 1 done');\nconsole.warn('about to wait');\nawait tools.app.wait({});\nreturn 1;"


def _code_mode(mode: str, wall_ms: int, started: asyncio.Event) -> CodeMode:
    async def wait(_args: dict[str, Any]) -> str:
        started.set()
        await asyncio.sleep(HANG_GUARD_S)
        return "late"

    return CodeMode(
        sources=[
            local(
                "app",
                {
                    "wait": define_tool(
                        description="w", input_schema={"type": "object"}, execute=wait
                    )
                },
            )
        ],
        policy=allow_all_tool_calls(),
        limits=Limits(wall_time_ms=wall_ms),
        runtime=RuntimeOptions(mode=mode),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["no on_log", "on_log"])
@pytest.mark.parametrize("mode", ["process", "inline"])
@pytest.mark.parametrize("ending", ["wall limit", "cancelled"])
async def test_the_lines_written_before_the_end_are_kept(
    mode: str, ending: str, streamed: bool
) -> None:
    started = asyncio.Event()
    seen: list[str] = []
    wall_ms = 3000 if ending == "wall limit" else 60_000
    async with _code_mode(mode, wall_ms, started) as cm:
        cancel = asyncio.Event()
        running = asyncio.ensure_future(
            cm.run(
                SCRIPT,
                cancel=cancel,
                on_log=(lambda entry: seen.append(entry.message)) if streamed else None,
            )
        )
        await asyncio.wait_for(started.wait(), HANG_GUARD_S)
        if ending == "cancelled":
            cancel.set()
        result = await asyncio.wait_for(running, HANG_GUARD_S)
    assert result.diagnostic is not None
    assert result.diagnostic.code == ("WALL_LIMIT" if ending == "wall limit" else "CANCELLED")
    assert [(e.level, e.message) for e in result.logs] == [
        ("log", "step 1 done"),
        ("warn", "about to wait"),
    ]
    if streamed:
        assert seen == ["step 1 done", "about to wait"]


async def test_the_model_sees_the_lines_of_a_run_past_its_wall_limit() -> None:
    started = asyncio.Event()
    async with _code_mode("process", 3000, started) as cm, Client(create_server(cm)) as client:
        reply = await asyncio.wait_for(
            client.call_tool("run_typescript", {"code": SCRIPT}), HANG_GUARD_S
        )
    assert reply.is_error
    text = "\n".join(getattr(block, "text", "") for block in reply.content)
    assert "WALL_LIMIT" in text
    assert "step 1 done" in text and "about to wait" in text, text
