"""Behaviour specific to the QuickJS adapter: threads, disposal, stack, accounting."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
import quickjs

from codemodekit.errors import ErrorCode
from codemodekit.limits import Limits
from codemodekit.sandbox import _engine, _warm, _watchdog
from codemodekit.sandbox._workers import JsWorkers
from codemodekit.sandbox.base import CompiledProgram
from codemodekit.sandbox.quickjs import QuickJsSandbox
from tests.conformance.sandbox.harness import HostDouble, code_of, compile_code, run


class ContextTracker:
    """Records every context the adapter creates; ``alive`` counts those still referenced
    by anything but this tracker (no gc.collect(): disposal must be by refcount)."""

    def __init__(self) -> None:
        self.created: list[Any] = []
        self.Context = self._make  # the attribute the adapter calls
        self.JSException = quickjs.JSException
        self.StackOverflow = quickjs.StackOverflow

    def _make(self) -> Any:
        ctx = quickjs.Context()
        self.created.append(ctx)
        return ctx

    def alive(self) -> int:
        # getrefcount sees: the list, the loop variable, its own argument.
        return sum(1 for ctx in self.created if sys.getrefcount(ctx) > 3)


@pytest.fixture
def contexts(monkeypatch: pytest.MonkeyPatch) -> ContextTracker:
    tracker = ContextTracker()
    monkeypatch.setattr(_warm, "quickjs", tracker)
    return tracker


@pytest.fixture
def workers() -> object:
    pool = JsWorkers(2, name="test-js")
    yield pool
    pool.shutdown()


def test_offload_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="offload"):
        QuickJsSandbox(offload="process")  # type: ignore[arg-type]


@pytest.mark.parametrize("offload", ["thread", "inline"])
async def test_contexts_are_disposed_after_every_kind_of_end(
    offload: str, contexts: ContextTracker
) -> None:
    sandbox = QuickJsSandbox(offload=offload, prewarm=0)  # type: ignore[arg-type]
    codes = [
        "return 1",
        "throw new Error('x')",
        "for (;;) {}",
        "const a = []; for (;;) a.push('x' + a.length)",
        "function f() { return f() } f()",
        "await new Promise(() => {})",
        "return 10n",
        "await tools.t.fail({})",
        "console.log('x'); return await tools.t.echo({})",
    ]
    for code in codes:
        await run(sandbox, code, compute_time_ms=100, memory_bytes=8 * 1024 * 1024)
        assert contexts.created and contexts.alive() == 0, code
    assert len(contexts.created) == len(codes)


async def test_cancelled_run_disposes_its_context(contexts: ContextTracker) -> None:
    sandbox = QuickJsSandbox(prewarm=0)
    host = HostDouble()
    task = asyncio.ensure_future(
        sandbox.run(compile_code("await tools.t.wait({})"), host, Limits())
    )
    while not host.calls:
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(contexts.created) == 1 and contexts.alive() == 0


async def test_cancelled_slice_disposes_when_it_ends(contexts: ContextTracker) -> None:
    workers = JsWorkers(1, name="test-js-single")  # so the probe below queues behind the slice
    sandbox = QuickJsSandbox(workers=workers, prewarm=0)
    program = compile_code("for (;;) {}")
    task = asyncio.ensure_future(sandbox.run(program, HostDouble(), Limits(compute_time_ms=200)))
    async with asyncio.timeout(60):  # a hang guard: wait until the run is on the worker
        while not contexts.created:
            await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The slice cannot be interrupted from outside; it ends at its compute budget and the
    # worker disposes the context right after. Wait for that without timing it.
    await asyncio.wrap_future(workers.submit(lambda: None))
    workers.shutdown()
    assert len(contexts.created) == 1 and contexts.alive() == 0


async def test_event_loop_stays_responsive_during_a_long_slice(workers: JsWorkers) -> None:
    sandbox = QuickJsSandbox(workers=workers)
    ticks = 0
    stop = False

    async def ticker() -> None:
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0.001)

    ticking = asyncio.ensure_future(ticker())
    outcome = await run(
        sandbox,
        "let x = 0; for (let i = 0; i < 5e6; i++) x += i; return x > 0",
        compute_time_ms=60000,
    )
    stop = True
    await ticking
    assert outcome.ok
    assert ticks > 5  # the loop kept turning while JavaScript ran on a worker


async def test_slices_of_one_run_may_move_between_threads(workers: JsWorkers) -> None:
    sandbox = QuickJsSandbox(workers=workers)
    code = """
    let depth = 0;
    for (let i = 0; i < 20; i++) {
      await tools.t.echo({ i });
      function f(n) { try { return f(n + 1) } catch (e) { return n } }
      depth = Math.max(depth, f(0));
    }
    return depth;
    """
    outcomes = await asyncio.gather(*(run(sandbox, code) for _ in range(8)))
    assert all(o.ok and isinstance(o.value, int) and o.value > 100 for o in outcomes)


async def test_stack_limit_follows_limits() -> None:
    sandbox = QuickJsSandbox()
    code = "function f(n) { try { return f(n + 1) } catch (e) { return n } } return f(0)"
    small = await run(sandbox, code, stack_bytes=128 * 1024)
    large = await run(sandbox, code, stack_bytes=2 * 1024 * 1024)
    assert small.ok and large.ok
    assert isinstance(small.value, int) and isinstance(large.value, int)
    assert small.value < large.value


async def test_compute_is_reported_and_bounded() -> None:
    sandbox = QuickJsSandbox()
    outcome = await run(sandbox, "return 1")
    assert 0 < outcome.compute_ms < Limits().compute_time_ms
    limited = await run(sandbox, "for (;;) {}", compute_time_ms=50)
    assert limited.diagnostic is not None and limited.diagnostic.code is ErrorCode.COMPUTE_LIMIT
    assert limited.compute_ms == pytest.approx(50, rel=0.5)


async def test_code_containing_nul_characters() -> None:
    source = 'return "a\x00b".length'
    program = CompiledProgram("(async () => {\n" + source + "\n})()", 1, source)
    outcome = await run(QuickJsSandbox(), program)
    assert outcome.ok and outcome.value == 3


async def test_prelude_frames_never_become_the_location() -> None:
    code = "\n\nconst r = await tools.t.fail({ why: 'x' })"
    outcome = await run(QuickJsSandbox(), code)
    assert outcome.diagnostic is not None and outcome.diagnostic.location is not None
    assert outcome.diagnostic.location.line == 3
    # Within `tools.t.fail(`: QuickJS points at the property name of the call.
    assert 17 <= outcome.diagnostic.location.column <= 29


async def test_a_flood_of_calls_reaches_the_host_in_bounded_batches() -> None:
    from codemodekit.sandbox._engine import MAX_CALLS_PER_SLICE

    host = HostDouble()
    program = compile_code(
        "const all = await Promise.all(Array.from({ length: 3000 }, () => tools.t.wait({})));"
        " return all.length"
    )
    task = asyncio.ensure_future(QuickJsSandbox().run(program, host, Limits()))
    while len(host.calls) < MAX_CALLS_PER_SLICE:
        await asyncio.sleep(0.001)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(host.calls) == MAX_CALLS_PER_SLICE  # the rest wait inside the sandbox
    host.release.set()
    outcome = await task
    assert outcome.ok and outcome.value == 3000
    assert len(host.calls) == 3000


async def test_tiny_limits_fail_cleanly() -> None:
    sandbox = QuickJsSandbox()
    tiny_heap = await run(sandbox, "return [1, 2, 3].map(String)", memory_bytes=1024)
    assert tiny_heap.diagnostic is not None
    assert tiny_heap.diagnostic.code is ErrorCode.MEMORY_LIMIT
    tiny_stack = await run(sandbox, "function f() { return 1 } return f()", stack_bytes=1)
    assert not tiny_stack.ok
    assert (await run(sandbox, "return 'fine'")).value == "fine"


class HostClock:
    """The in-process compute clock, moved only by the test: a busy machine cannot spend
    a budget measured on it (on the real clock, wall time in this process, it can)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _charged_clock(monkeypatch: pytest.MonkeyPatch, charges: dict[str, float]) -> list[str]:
    """Each new context costs an hour of the clock to prepare, and each port command in
    ``charges`` that many seconds; returns the commands seen, in order."""
    clock = HostClock()
    monkeypatch.setattr(_watchdog.WATCHDOG, "clock", clock)
    real_prepare = _engine.prepare_context
    seen: list[str] = []

    def prepare(prelude: str) -> tuple[Any, Any]:
        ctx, real_port = real_prepare(prelude)
        clock.now += 3600.0
        seen.append("prepare")

        def port(command: str, *args: Any) -> Any:
            seen.append(command)
            clock.now += charges.get(command, 0.0)
            return real_port(command, *args)

        return ctx, port

    monkeypatch.setattr(_engine, "prepare_context", prepare)
    return seen


async def test_prelude_time_is_not_user_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    # Preparing the context takes an hour and the prelude's `init` 1.5 s (within the
    # prelude's own budget); the user's code takes no time: a 1 s budget is enough.
    seen = _charged_clock(monkeypatch, {"init": 1.5})
    outcome = await run(QuickJsSandbox(prewarm=0), "return 1", compute_time_ms=1000)
    assert outcome.ok and outcome.value == 1, outcome.diagnostic
    assert seen[:3] == ["prepare", "init", "start"]
    assert outcome.compute_ms == 0


async def test_the_same_time_in_the_users_slice_is_the_compute_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The control of the test above: 1.5 s of the same clock in the user's own slice.
    seen = _charged_clock(monkeypatch, {"start": 1.5})
    outcome = await run(QuickJsSandbox(prewarm=0), "return 1", compute_time_ms=1000)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT, outcome.diagnostic
    assert seen[:3] == ["prepare", "init", "start"]


async def test_prepared_contexts_are_used_once_and_can_be_dropped(
    contexts: ContextTracker,
) -> None:
    sandbox = QuickJsSandbox(prewarm=2)
    seen = []
    for _ in range(6):
        outcome = await run(
            sandbox, "const was = typeof globalThis.mark; globalThis.mark = 1; return was"
        )
        seen.append(outcome.value)
        await asyncio.sleep(0.01)  # idle time: the pool refills between runs
    assert seen == ["undefined"] * 6
    assert len(contexts.created) >= 6  # one per run, plus what is prepared
    sandbox.close()
    await asyncio.sleep(0.01)
    for _ in range(2000):  # a refill may still be finishing on a worker (a hang guard: 20 s)
        if contexts.alive() == 0:
            break
        await asyncio.sleep(0.01)
    assert contexts.alive() == 0


def test_prewarm_is_checked() -> None:
    with pytest.raises(ValueError, match="prewarm"):
        QuickJsSandbox(prewarm=-1)


class BigResultHost(HostDouble):
    async def call_tool(self, source: str, tool: str, arguments: Any) -> Any:
        return {"content": [], "structuredContent": "x" * (8 * 1024 * 1024)}


async def test_a_tool_result_too_big_for_the_heap_is_the_memory_limit() -> None:
    outcome = await run(
        QuickJsSandbox(),
        "await tools.t.big({}); return 1",
        BigResultHost(),
        memory_bytes=4 * 1024 * 1024,
    )
    assert outcome.diagnostic is not None
    assert outcome.diagnostic.code is ErrorCode.MEMORY_LIMIT
