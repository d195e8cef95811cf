"""Red-team findings specific to the QuickJS adapter: workers are never pinned by a run
that has already ended."""

from __future__ import annotations

import asyncio

import pytest

from codemodekit.errors import ErrorCode
from codemodekit.sandbox._workers import JsWorkers
from codemodekit.sandbox.quickjs import QuickJsSandbox
from tests.conformance.sandbox.harness import code_of, run

SLOW_LOOP = "const x = 3n ** 600000n, y = 7n ** 150000n; let z;\nfor (;;) z = x % y"


@pytest.fixture
def one_worker() -> object:
    pool = JsWorkers(1, name="test-redteam")
    yield pool
    pool.shutdown()


async def test_a_cancelled_run_gives_its_worker_back(one_worker: JsWorkers) -> None:
    sandbox = QuickJsSandbox(workers=one_worker, prewarm=0)
    # A long budget: only the cancellation can end this run early.
    stuck = asyncio.create_task(run(sandbox, SLOW_LOOP, compute_time_ms=600_000))
    await asyncio.sleep(0.3)  # let the slice start on the only worker
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck
    # The next run needs the same worker; a guard, not a timing assertion.
    outcome = await asyncio.wait_for(run(sandbox, "return 1"), 60)
    assert outcome.ok and outcome.value == 1


async def test_the_wall_limit_of_the_facade_frees_the_worker(one_worker: JsWorkers) -> None:
    from codemodekit import CodeMode, Limits, allow_all_tool_calls

    sandbox = QuickJsSandbox(workers=one_worker, prewarm=0)
    limits = Limits(compute_time_ms=600_000, wall_time_ms=300)
    async with CodeMode(
        sources=[], policy=allow_all_tool_calls(), limits=limits, sandbox=sandbox
    ) as cm:
        first = await cm.run(SLOW_LOOP)
        assert first.diagnostic is not None and first.diagnostic.code is ErrorCode.WALL_LIMIT
        second = await asyncio.wait_for(cm.run("return 2"), 60)
        assert second.ok and second.value == 2


async def test_a_tripped_slice_reports_the_compute_limit_not_memory() -> None:
    outcome = await run(QuickJsSandbox(offload="thread"), SLOW_LOOP, compute_time_ms=200)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT
