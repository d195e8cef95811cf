"""Fair admission between callers (issue 23, item 1; ADR 0030).

One caller flooding the pool with runs that await a slow tool must not delay another
caller's trivial run: a caller's share of the runs in flight and of the queue is bounded,
and a freed slot goes to the waiting caller with the fewest runs in flight. Assertions are
on the order of events (which run was admitted first), never on time; the timeouts are
generous hang guards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    ErrorCode,
    ProcessSandbox,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    local,
)

HANG_GUARD_S = 120


class Gates:
    """A tool per run: ``mark`` records admission order, ``wait`` blocks until released."""

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.events: dict[str, asyncio.Event] = {}
        self.all = asyncio.Event()

    def event(self, key: str) -> asyncio.Event:
        return self.events.setdefault(key, asyncio.Event())

    def source(self) -> Any:
        async def mark(args: dict[str, Any]) -> dict[str, Any]:
            self.marks.append(str(args["who"]))
            return {}

        async def wait(args: dict[str, Any]) -> dict[str, Any]:
            gate = self.event(str(args["key"]))
            done = asyncio.ensure_future(gate.wait())
            everything = asyncio.ensure_future(self.all.wait())
            await asyncio.wait({done, everything}, return_when=asyncio.FIRST_COMPLETED)
            done.cancel()
            everything.cancel()
            return {}

        obj = {"type": "object"}
        return local(
            "app",
            {
                "mark": define_tool(description="mark", input_schema=obj, execute=mark),
                "wait": define_tool(description="wait", input_schema=obj, execute=wait),
            },
        )


def flood_code(who: str, key: str) -> str:
    return f"await tools.app.mark({{ who: '{who}' }}); await tools.app.wait({{ key: '{key}' }}); return 1;"


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD_S):
        while not predicate():
            await asyncio.sleep(0.005)


def code_mode(box: ProcessSandbox, gates: Gates) -> CodeMode:
    return CodeMode(sources=[gates.source()], policy=allow_all_tool_calls(), sandbox=box)


async def test_an_innocent_run_goes_through_while_another_caller_floods() -> None:
    options = RuntimeOptions(
        max_runs=4, max_queued_runs=256, queue_timeout_ms=600_000, warm_workers=2
    )
    box = ProcessSandbox(options, shared=False)
    gates = Gates()
    try:
        async with code_mode(box, gates) as cm:
            flood = [
                asyncio.ensure_future(cm.run(flood_code("flood", "f"), caller="flood"))
                for _ in range(40)
            ]
            # The flood's share: 3 of the 4 slots; the rest of its runs wait.
            await until(lambda: len(gates.marks) == 3 and cm.runtime_stats().runs_queued == 37)
            async with asyncio.timeout(HANG_GUARD_S):
                innocent = await cm.run("return 1;", caller="innocent")
            assert innocent.ok and innocent.value == 1, innocent.diagnostic
            # Admitted ahead of the flood's whole queue: nothing of it has run yet.
            assert cm.runtime_stats().runs_queued == 37
            assert gates.marks == ["flood"] * 3
            gates.all.set()
            results = await asyncio.gather(*flood)
            assert all(r.ok for r in results), [r.diagnostic for r in results if not r.ok]
    finally:
        box.close()


async def test_a_freed_slot_goes_to_the_caller_with_the_fewest_runs_in_flight() -> None:
    options = RuntimeOptions(
        max_runs=4,
        max_runs_per_caller=2,
        max_queued_runs=256,
        queue_timeout_ms=600_000,
        warm_workers=2,
    )
    box = ProcessSandbox(options, shared=False)
    gates = Gates()
    try:
        async with code_mode(box, gates) as cm:
            runs = [
                asyncio.ensure_future(cm.run(flood_code(who, f"{who}{i}"), caller=who))
                for i in range(10)
                for who in ("a", "b")
            ]
            await until(lambda: len(gates.marks) == 4 and cm.runtime_stats().runs_queued == 16)
            innocent = asyncio.ensure_future(
                cm.run("await tools.app.mark({ who: 'innocent' }); return 1;", caller="c")
            )
            await until(lambda: cm.runtime_stats().runs_queued == 17)
            gates.event("a0").set()  # one of a's runs ends: a has 1 in flight, c has 0
            async with asyncio.timeout(HANG_GUARD_S):
                result = await innocent
            assert result.ok and result.value == 1, result.diagnostic
            assert gates.marks[4] == "innocent"  # before a's and b's older queued runs
            gates.all.set()
            await asyncio.gather(*runs)
    finally:
        box.close()


async def test_a_callers_queue_share_is_bounded_and_a_full_queue_makes_room() -> None:
    options = RuntimeOptions(
        max_runs=1, max_queued_runs=4, queue_timeout_ms=600_000, warm_workers=1
    )
    box = ProcessSandbox(options, shared=False)
    gates = Gates()
    try:
        async with code_mode(box, gates) as cm:
            flood = [
                asyncio.ensure_future(cm.run(flood_code("flood", "f"), caller="flood"))
                for _ in range(4)
            ]
            await until(lambda: len(gates.marks) == 1 and cm.runtime_stats().runs_queued == 3)
            over = await cm.run("return 'over';", caller="flood")  # past its queue share (3)
            assert over.diagnostic is not None
            assert over.diagnostic.code == ErrorCode.SERVER_BUSY
            assert "its share" in over.diagnostic.message
            first = asyncio.ensure_future(cm.run("return 'b';", caller="b"))
            await until(lambda: cm.runtime_stats().runs_queued == 4)  # the queue is full
            second = asyncio.ensure_future(cm.run("return 'c';", caller="c"))
            # c takes the place of flood's newest queued run, which is refused.
            async with asyncio.timeout(HANG_GUARD_S):
                done, _ = await asyncio.wait(flood, return_when=asyncio.FIRST_COMPLETED)
            evicted = done.pop().result()
            assert evicted.diagnostic is not None
            assert evicted.diagnostic.code == ErrorCode.SERVER_BUSY
            assert cm.runtime_stats().runs_queued == 4
            gates.all.set()
            assert (await first).value == "b"
            assert (await second).value == "c"
            results = await asyncio.gather(*flood)
            assert sum(r.ok for r in results) == 3
    finally:
        box.close()


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_the_per_caller_options_are_checked(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        RuntimeOptions(max_runs_per_caller=value)
    with pytest.raises((TypeError, ValueError)):
        RuntimeOptions(max_queued_per_caller=value)


def test_the_default_share_leaves_room_for_others() -> None:
    assert RuntimeOptions(max_runs=64).caller_run_slots == 48
    assert RuntimeOptions(max_runs=1).caller_run_slots == 1
    assert RuntimeOptions(max_queued_runs=256).caller_queue == 192
    assert RuntimeOptions(max_queued_runs=0).caller_queue == 0
    assert RuntimeOptions(max_runs=4, max_runs_per_caller=9).caller_run_slots == 4


async def test_cancel_all_runs_ends_running_and_queued_runs_with_cancelled() -> None:
    """What `serve` does at its drain deadline (issue 23, item 13), through the API."""
    options = RuntimeOptions(max_runs=1, queue_timeout_ms=600_000, warm_workers=1)
    box = ProcessSandbox(options, shared=False)
    gates = Gates()
    try:
        async with code_mode(box, gates) as cm:
            running = asyncio.ensure_future(cm.run(flood_code("a", "a"), caller="a"))
            queued = asyncio.ensure_future(cm.run(flood_code("b", "b"), caller="b"))
            await until(lambda: gates.marks == ["a"] and cm.runtime_stats().runs_queued == 1)
            assert cm.cancel_all_runs("stopping for the test") == 2
            for result in await asyncio.gather(running, queued):
                assert result.diagnostic is not None
                assert result.diagnostic.code == ErrorCode.CANCELLED
                assert result.diagnostic.message == "stopping for the test"
            assert gates.marks == ["a"]  # the queued run never started
            assert (await cm.run("return 3;")).value == 3  # the capacity came back
    finally:
        box.close()


async def test_runs_without_a_caller_may_use_the_whole_pool() -> None:
    options = RuntimeOptions(max_runs=4, queue_timeout_ms=600_000, warm_workers=2)
    box = ProcessSandbox(options, shared=False)
    gates = Gates()
    try:
        async with code_mode(box, gates) as cm:
            runs = [asyncio.ensure_future(cm.run(flood_code("x", "x"))) for _ in range(6)]
            await until(lambda: len(gates.marks) == 4 and cm.runtime_stats().runs_queued == 2)
            gates.all.set()
            assert all(r.ok for r in await asyncio.gather(*runs))
    finally:
        box.close()


async def test_the_queue_bound_holds_for_runs_that_could_have_run_at_once() -> None:
    # A run that fits the budget and its caller's share is queued without the full-queue
    # check; while a bigger run ahead of it waits for memory, it waits too, and the bound
    # must hold for it like any other: one per caller, any number of callers.
    from codemodekit.sandbox.admission import AdmissionPolicy, AdmissionRefused, FairAdmission

    admission = FairAdmission(
        AdmissionPolicy(
            slots=8,
            memory_budget=100,
            max_queued=1,
            per_caller_runs=8,
            per_caller_queued=1,
            queue_timeout_s=HANG_GUARD_S,
        )
    )
    await admission.admit("running", 60)
    big = asyncio.ensure_future(admission.admit("big", 60))  # waits for memory: queue full
    await asyncio.sleep(0)
    small = [asyncio.ensure_future(admission.admit(f"small-{i}", 10)) for i in range(6)]
    await asyncio.wait(small, timeout=HANG_GUARD_S, return_when=asyncio.ALL_COMPLETED)
    try:
        assert admission.queued <= 1
        assert all(isinstance(t.exception(), AdmissionRefused) for t in small)
    finally:
        for task in (big, *small):
            task.cancel()
