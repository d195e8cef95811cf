"""Red-team findings specific to the QuickJS adapter: workers are never pinned by a run
that has already ended."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from codemodekit.errors import ErrorCode
from codemodekit.sandbox import _engine, _watchdog
from codemodekit.sandbox import quickjs as quickjs_adapter
from codemodekit.sandbox._engine import Engine
from codemodekit.sandbox._workers import JsWorkers
from codemodekit.sandbox.quickjs import QuickJsSandbox
from tests.conformance.sandbox.harness import code_of, run

T = TypeVar("T")

SLOW_LOOP = "const x = 3n ** 600000n, y = 7n ** 150000n; let z;\nfor (;;) z = x % y"


class CountingWorkers(JsWorkers):
    """One worker thread that counts the slices it has begun."""

    def __init__(self) -> None:
        super().__init__(1, name="test-redteam")
        self.begun = 0

    def _counted(self, fn: Callable[[], T]) -> Callable[[], T]:
        def counted() -> T:
            self.begun += 1
            return fn()

        return counted

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        return super().submit(self._counted(fn))

    def run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        return super().run(self._counted(fn))


@pytest.fixture
def one_worker() -> object:
    pool = CountingWorkers()
    yield pool
    pool.shutdown()


async def _until(predicate: Callable[[], bool]) -> None:
    """Wait for a state (a hang guard, not a timing assertion)."""
    async with asyncio.timeout(60):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_a_cancelled_run_gives_its_worker_back(one_worker: CountingWorkers) -> None:
    sandbox = QuickJsSandbox(workers=one_worker, prewarm=0)
    # A long budget: only the cancellation can end this run early. The tool call makes the
    # endless loop a slice of its own: the second one this run begins on the only worker.
    code = "await tools.t.echo({});\n" + SLOW_LOOP
    stuck = asyncio.create_task(run(sandbox, code, compute_time_ms=600_000))
    await _until(lambda: one_worker.begun == 2)
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck
    # The next run needs the same worker; a guard, not a timing assertion.
    outcome = await asyncio.wait_for(run(sandbox, "return 1"), 60)
    assert outcome.ok and outcome.value == 1


async def test_a_run_cancelled_while_its_context_is_built_never_starts(
    one_worker: CountingWorkers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancellation lands while the worker builds the run's context: no engine exists yet
    # to interrupt, so the endless loop must not start once the context is there.
    building, proceed = threading.Event(), threading.Event()
    real_engine = quickjs_adapter.Engine

    def held_engine(*args: Any, **kwargs: Any) -> Engine:
        building.set()
        proceed.wait(60)
        return real_engine(*args, **kwargs)

    monkeypatch.setattr(quickjs_adapter, "Engine", held_engine)
    sandbox = QuickJsSandbox(workers=one_worker, prewarm=0)
    stuck = asyncio.create_task(run(sandbox, SLOW_LOOP, compute_time_ms=600_000))
    await _until(building.is_set)
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck  # the run asked its session to close
    proceed.set()
    monkeypatch.undo()
    outcome = await asyncio.wait_for(run(sandbox, "return 1"), 60)
    assert outcome.ok and outcome.value == 1


@pytest.mark.parametrize("offload", ["thread", "inline"])
@pytest.mark.parametrize(
    "code",
    [
        "while (true) { try { for (;;) {} } catch (e) {} }",
        "const keep = []; for (;;) { try { keep.push(String(keep.length)) } catch (e) {} }",
    ],
    ids=["catch-all", "catch-all-allocating"],
)
async def test_a_tripped_catch_all_loop_still_ends_at_its_compute_limit(
    monkeypatch: pytest.MonkeyPatch, offload: str, code: str
) -> None:
    # Trip every slice at once: the heap must not stay too small for the engine's
    # uncatchable "interrupted" error, or a loop that swallows every error never ends.
    monkeypatch.setattr(_engine, "GRACE_S", -3600.0)
    sandbox = QuickJsSandbox(offload=offload, prewarm=0)  # type: ignore[arg-type]
    outcome = await run(sandbox, code, compute_time_ms=300)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT
    monkeypatch.undo()
    after = await run(sandbox, "return 1")
    assert after.ok and after.value == 1


async def test_the_wall_limit_of_the_facade_frees_the_worker(one_worker: JsWorkers) -> None:
    from codemodekit import CodeMode, Limits, allow_all_tool_calls

    sandbox = QuickJsSandbox(workers=one_worker, prewarm=0)
    limits = Limits(compute_time_ms=600_000, wall_time_ms=3_000)
    async with CodeMode(
        sources=[], policy=allow_all_tool_calls(), limits=limits, sandbox=sandbox
    ) as cm:
        first = await cm.run(SLOW_LOOP)
        assert first.diagnostic is not None and first.diagnostic.code is ErrorCode.WALL_LIMIT
    # The next run needs the only worker: left pinned, it would be busy for ten minutes.
    # The guard is the hang guard, not a timing assertion: a busy machine may take a
    # while to unwind the tripped slice.
    patient = Limits(wall_time_ms=600_000)
    async with CodeMode(
        sources=[], policy=allow_all_tool_calls(), limits=patient, sandbox=sandbox
    ) as cm:
        second = await asyncio.wait_for(cm.run("return 2"), 120)
        assert second.ok and second.value == 2


async def test_a_tripped_slice_reports_the_compute_limit_not_memory() -> None:
    outcome = await run(QuickJsSandbox(offload="thread"), SLOW_LOOP, compute_time_ms=200)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT


@pytest.mark.parametrize("offload", ["thread", "inline"])
async def test_nesting_past_the_host_decoder_has_stable_codes(offload: str) -> None:
    sandbox = QuickJsSandbox(offload=offload)  # type: ignore[arg-type]
    build = "let a = []; for (let i = 0; i < 1200; i++) a = [a];\n"
    caught = await run(
        sandbox,
        build + "try { await tools.t.echo({ a }) } catch (e) { return [e.code, e.tool] }",
    )
    assert caught.value == ["TOOL_INPUT_INVALID", "tools.t.echo"]
    uncaught = await run(sandbox, build + "await tools.t.echo({ a })")
    assert code_of(uncaught) is ErrorCode.TOOL_INPUT_INVALID
    assert uncaught.diagnostic is not None and uncaught.diagnostic.location is not None
    returned = await run(sandbox, build + "return a")
    assert code_of(returned) is ErrorCode.RESULT_NOT_SERIALIZABLE
    # Below the decoder's depth everything still works.
    fine = await run(sandbox, "let a = []; for (let i = 0; i < 500; i++) a = [a]; return a")
    assert fine.ok


CRASH_PROBE = """
import asyncio, json, sys
from codemodekit import CodeMode, Limits, allow_all_tool_calls

async def main():
    async with CodeMode(sources=[], policy=allow_all_tool_calls(), limits=Limits()) as cm:
        out = []
        for code in json.loads(sys.argv[1]):
            result = await cm.run(code)
            out.append([result.ok, result.value, result.diagnostic and result.diagnostic.code])
        print(json.dumps(out))

asyncio.run(main())
"""


@pytest.mark.parametrize(
    "helper",
    [
        "map(x => x)",
        "filter(x => x)",
        "take(5)",
        "drop(0)",
        "flatMap(x => [x])",
        "chunks(1)",
        "windows(1)",
    ],
)
def test_deep_iterator_helper_chains_do_not_crash_the_process(helper: str) -> None:
    # Each helper's next() calls the one below it in C with no stack check: 100,000 of
    # them overflowed the native stack (SIGSEGV) before any limit could fire.
    import json
    import subprocess
    import sys

    code = (
        "let it = [1, 2].values();\n"
        f"try {{ for (let i = 0; i < 100000; i++) it = it.{helper} }}\n"
        "catch (e) { return ['built', e.name] }\n"
        "try { it.next(); return 'ran' } catch (e) { return ['ran', e.name] }"
    )
    done = subprocess.run(
        [sys.executable, "-c", CRASH_PROBE, json.dumps([code, "return 1"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, after = json.loads(done.stdout)
    assert first[0] and first[1] == ["built", "RangeError"]
    assert after[:2] == [True, 1]


async def test_iterator_helpers_still_work_below_the_chain_cap() -> None:
    code = (
        "let it = [1, 2, 3].values();\n"
        "for (let i = 0; i < 900; i++) it = it.map((x) => x + 1);\n"
        "return [it.filter((x) => x % 2).toArray(), [4, 5].values().drop(1).toArray(),\n"
        "  typeof Iterator.prototype.map]"
    )
    outcome = await run(QuickJsSandbox(), code)
    assert outcome.ok, outcome.diagnostic
    assert outcome.value == [[901, 903], [5], "function"]


@pytest.mark.parametrize("offload", ["thread", "inline"])
@pytest.mark.parametrize(
    "code",
    [
        "async function f() { await null; return f() }\nawait f()",
        "async function f() { await null; for (;;) {} }\nawait f()",
        "const spin = async () => { for (;;) {} };\nawait Promise.all([spin(), spin()])",
        "await new Promise((_, reject) => Promise.resolve().then(() => { for (;;) {} }))",
        "async function* g() { for (;;) yield 1 }\nfor await (const x of g()) {}",
    ],
    ids=["async-recursion", "async-loop", "all", "then-loop", "async-generator"],
)
async def test_an_interrupt_that_becomes_a_rejection_is_the_compute_limit(
    monkeypatch: pytest.MonkeyPatch, offload: str, code: str
) -> None:
    # The engine's own interrupt (the binding's time limit) can fire before the host's
    # accounting reaches the budget (in this process its clock is not the binding's). In
    # an async function the engine turns it into a rejection the script cannot handle:
    # the run must still end with COMPUTE_LIMIT, not as the user's uncaught exception.
    # A host clock at a quarter speed makes the binding's interrupt always come first.
    clock = _watchdog.WATCHDOG.clock
    monkeypatch.setattr(_watchdog.WATCHDOG, "clock", lambda: clock() / 4)
    sandbox = QuickJsSandbox(offload=offload, prewarm=0)  # type: ignore[arg-type]
    outcome = await run(sandbox, code, compute_time_ms=150)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT, outcome.diagnostic
    monkeypatch.undo()
    after = await run(sandbox, "return 1")
    assert after.ok and after.value == 1
