"""What a run meets when the sandbox pool itself fails: it is closed under the run, it runs
out of descriptors, or a run waits on an event loop that is closed. Every run ends with a
result (never hangs), and the pool serves the next run once the cause is gone.

Hang guards are generous ``asyncio.timeout`` bounds that only stop a broken build from
hanging the suite; nothing here times the engine.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    ErrorCode,
    Limits,
    ProcessSandbox,
    RunResult,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    local,
)

HANG_GUARD_S = 120


def _tools(gate: asyncio.Event, started: asyncio.Event) -> Any:
    async def wait(_args: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await gate.wait()
        return {"ok": True}

    obj = {"type": "object"}
    return local(
        "app",
        {"wait": define_tool(description="wait for the test", input_schema=obj, execute=wait)},
    )


def _code_mode(box: ProcessSandbox, tools: Any, **limits: int) -> CodeMode:
    return CodeMode(
        sources=[tools],
        policy=allow_all_tool_calls(),
        limits=Limits(**limits) if limits else None,
        sandbox=box,
    )


async def _until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD_S):
        while not predicate():
            await asyncio.sleep(0.005)


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def test_closing_the_pool_ends_a_running_slice_as_a_crash() -> None:
    box = ProcessSandbox(RuntimeOptions(warm_workers=1), shared=False)
    gate, started = asyncio.Event(), asyncio.Event()
    async with _code_mode(box, _tools(gate, started), compute_time_ms=600_000) as cm:
        run = asyncio.ensure_future(cm.run("await tools.app.wait({});\nfor (;;) {}"))
        await started.wait()  # the worker took the run
        (pid,) = box.busy_pids()
        ticks = _cpu_ticks(pid)
        gate.set()
        await _until(lambda: _cpu_ticks(pid) > ticks + 2)  # its loop is running
        box.close()
        async with asyncio.timeout(HANG_GUARD_S):
            result = await run
    assert not result.ok and result.diagnostic is not None
    assert result.diagnostic.code is ErrorCode.SANDBOX_CRASHED


async def test_runs_waiting_when_the_pool_closes_end_and_later_runs_are_refused() -> None:
    box = ProcessSandbox(RuntimeOptions(max_runs=1, warm_workers=1), shared=False)
    gate, started = asyncio.Event(), asyncio.Event()
    async with _code_mode(box, _tools(gate, started)) as cm:
        first = asyncio.ensure_future(cm.run("await tools.app.wait({}); return 1;"))
        await started.wait()
        queued = asyncio.ensure_future(cm.run("return 2;"))
        await _until(lambda: box.stats().runs_queued == 1)
        box.close()
        gate.set()  # the first run's slot frees: the queued run is admitted to a closed pool
        async with asyncio.timeout(HANG_GUARD_S):
            results: list[RunResult] = [await first, await queued, await cm.run("return 3;")]
    for result in results:
        assert not result.ok and result.diagnostic is not None
    assert results[0].diagnostic is not None
    assert results[0].diagnostic.code is ErrorCode.SANDBOX_CRASHED
    for result in results[1:]:
        assert result.diagnostic is not None
        assert result.diagnostic.code is ErrorCode.INTERNAL_ERROR


async def test_a_refill_that_runs_out_of_descriptors_fails_its_runs_and_the_pool_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="codemodekit.sandbox")
    box = ProcessSandbox(RuntimeOptions(max_runs=2, warm_workers=1), shared=False)
    gate, started = asyncio.Event(), asyncio.Event()
    async with _code_mode(box, _tools(gate, started)) as cm:
        await _until(lambda: box.stats().workers >= 1)
        held: list[int] = []
        try:
            # The server at its descriptor limit: the run takes the warm worker, and the
            # refill behind it cannot open a socket for the next.
            while True:
                try:
                    held.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:
                    break
            first = await cm.run("return 1;")
            await _until(
                lambda: any("start a sandbox worker" in r.getMessage() for r in caplog.records)
            )
        finally:
            for fd in held:
                os.close(fd)
        async with asyncio.timeout(HANG_GUARD_S):
            second = await cm.run("return 2;")
    assert first.ok and first.value == 1
    assert second.ok and second.value == 2, second.diagnostic


async def test_a_run_queued_on_a_loop_that_closed_gives_its_slot_back() -> None:
    box = ProcessSandbox(RuntimeOptions(max_runs=1, warm_workers=1), shared=False)
    gate, started = asyncio.Event(), asyncio.Event()
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        async with _code_mode(box, _tools(gate, started)) as cm:
            first = asyncio.ensure_future(cm.run("await tools.app.wait({}); return 1;"))
            await started.wait()
            # A run from a background loop queues behind it; then that loop is shut down.
            asyncio.run_coroutine_threadsafe(
                box.run_source("return 2;", _NoTools(), Limits()), other
            )
            await _until(lambda: box.stats().runs_queued == 1)
            other.call_soon_threadsafe(other.stop)
            thread.join(HANG_GUARD_S)
            other.close()
            gate.set()
            async with asyncio.timeout(HANG_GUARD_S):
                done = await first
                after = await cm.run("return 3;")
            stats = box.stats()
    finally:
        box.close()
    assert done.ok and done.value == 1
    assert after.ok and after.value == 3, after.diagnostic
    assert stats.runs_in_flight == 0 and stats.runs_queued == 0


class _NoTools:
    """A sandbox host whose runs call no tool."""

    caller = None

    async def call_tool(self, source: str, tool: str, args: Any) -> Any:
        raise AssertionError("no tool is called")
