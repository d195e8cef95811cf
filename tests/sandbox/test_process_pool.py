"""The execution engine in sandbox worker processes, through the public API.

Every attack here pinned the server (or charged the wrong run) when QuickJS ran inside the
server's process. Hang guards are generous ``asyncio.timeout`` bounds that only stop a
broken build from hanging the suite; nothing here times the engine.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    ErrorCode,
    Limits,
    ProcessSandbox,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    local,
)
from codemodekit.sandbox._protocol import frame

HANG_GUARD_S = 120

#: Built-ins that never poll QuickJS's time limit, or catch-all loops around slow natives.
NON_POLLING = {
    "reverse-2^31": "const rev = Array.prototype.reverse; const o = {length: 2**31 - 1};\n"
    "for (;;) rev.call(o);",
    "reverse-once": "Array.prototype.reverse.call({length: 2**31 - 1});",
    "lastIndexOf": "for (;;) Array.prototype.lastIndexOf.call({length: 2**31 - 1}, 1);",
    "includes": "for (;;) Array.prototype.includes.call({length: 2**31 - 1}, 1);",
    "catch-all-bigint": "const a = 7n ** 90000n; const b = 3n ** 60000n;\n"
    "for (;;) { try { a % b; } catch (e) {} }",
    "catch-all-loop": "for (;;) { try { while (true) {} } catch (e) {} }",
    "huge-compare": "const a = 'x'.repeat(2**26); const b = 'x'.repeat(2**26);\n"
    "for (;;) { try { a < b; } catch (e) {} }",
}

ENDINGS = {ErrorCode.COMPUTE_LIMIT, ErrorCode.MEMORY_LIMIT}


def _tools(
    gate: asyncio.Event | None = None,
    started: asyncio.Event | None = None,
    echoed: asyncio.Event | None = None,
    burning: threading.Event | None = None,
    stop_burning: threading.Event | None = None,
) -> Any:
    """``burn`` sets ``burning`` and burns CPU until ``stop_burning`` is set (or for
    ``seconds`` of it)."""

    async def echo(args: dict[str, Any]) -> dict[str, Any]:
        if echoed is not None:
            echoed.set()
        return args

    async def wait(args: dict[str, Any]) -> dict[str, Any]:
        if started is not None:
            started.set()
        if gate is not None:
            await gate.wait()
        return {"ok": True}

    def burn(args: dict[str, Any]) -> dict[str, Any]:
        # CPU in the server's process (a sync tool runs on a thread of the host).
        deadline = time.process_time() + float(args.get("seconds", 0))
        if burning is not None:
            burning.set()
        n = 0
        while (
            not stop_burning.is_set()
            if stop_burning is not None
            else time.process_time() < deadline
        ):
            n += 1
        return {"n": n}

    obj = {"type": "object"}
    return local(
        "app",
        {
            "wait": define_tool(description="wait for the test", input_schema=obj, execute=wait),
            "burn": define_tool(description="burn host CPU", input_schema=obj, execute=burn),
            "echo": define_tool(description="echo", input_schema=obj, execute=echo),
        },
    )


async def _until(predicate: Callable[[], bool]) -> None:
    """Wait for a state change of the engine (a hang guard, not a timing assertion)."""
    async with asyncio.timeout(HANG_GUARD_S):
        while not predicate():
            await asyncio.sleep(0.005)


@pytest.fixture
async def sandbox() -> AsyncIterator[ProcessSandbox]:
    box = ProcessSandbox(RuntimeOptions(max_runs=8, warm_workers=2), shared=False)
    try:
        yield box
    finally:
        box.close()


def _code_mode(sandbox: ProcessSandbox, tools: Any = None, **limits: int) -> CodeMode:
    return CodeMode(
        sources=[tools or _tools()],
        policy=allow_all_tool_calls(),
        limits=Limits(**limits) if limits else None,
        sandbox=sandbox,
    )


@pytest.mark.parametrize("name", sorted(NON_POLLING))
async def test_a_slice_that_never_polls_its_limit_still_ends_and_an_innocent_run_succeeds(
    sandbox: ProcessSandbox, name: str
) -> None:
    async with _code_mode(sandbox, compute_time_ms=300) as cm:
        async with asyncio.timeout(HANG_GUARD_S):
            hostile = asyncio.ensure_future(cm.run(NON_POLLING[name]))
            innocent = await cm.run("return 6 * 7;")
            result = await hostile
        assert innocent.ok and innocent.value == 42
        assert not result.ok and result.diagnostic is not None
        assert result.diagnostic.code in ENDINGS, result.diagnostic
        after = await cm.run("return 'still serving';")
        assert after.ok and after.value == "still serving"
        assert cm.runtime_stats().busy_workers == 0


async def test_cancelled_busy_runs_free_their_workers_at_once(sandbox: ProcessSandbox) -> None:
    programs = [NON_POLLING["reverse-2^31"], "while (true) {}"] * 8  # 16 runs
    async with _code_mode(sandbox, compute_time_ms=600_000, wall_time_ms=600_000) as cm:
        cancels = [asyncio.Event() for _ in programs]
        runs = [
            asyncio.ensure_future(cm.run(code, cancel=event))
            for code, event in zip(programs, cancels, strict=True)
        ]
        restarts = cm.runtime_stats().worker_restarts
        fds = len(os.listdir("/proc/self/fd"))
        for batch in range(0, len(runs), 8):  # max_runs = 8: the rest wait in the queue
            expected = min(8, len(runs) - batch)
            await _until(lambda n=expected: cm.runtime_stats().busy_workers >= n)
            for event in cancels[batch : batch + 8]:
                event.set()
            for run in runs[batch : batch + 8]:
                result = await run
                assert result.diagnostic is not None
                assert result.diagnostic.code == ErrorCode.CANCELLED
        stats = cm.runtime_stats()
        assert stats.busy_workers == 0 and stats.runs_in_flight == 0
        assert stats.worker_restarts >= restarts + len(programs)  # each was killed, not waited on
        # The killed workers' sockets are closed (their replacements hold about as many).
        assert len(os.listdir("/proc/self/fd")) <= fds + 4
        trivial = await cm.run("return 1;")
        assert trivial.ok and trivial.value == 1


async def test_a_run_cancelled_while_awaiting_a_tool_keeps_its_worker(
    sandbox: ProcessSandbox,
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    async with _code_mode(sandbox, _tools(gate, started)) as cm:
        cancel = asyncio.Event()
        run = asyncio.ensure_future(cm.run("await tools.app.wait({}); return 1;", cancel=cancel))
        await started.wait()
        (pid,) = sandbox.busy_pids()
        restarts = sandbox.stats().worker_restarts
        cancel.set()
        result = await run
        assert result.diagnostic is not None and result.diagnostic.code == ErrorCode.CANCELLED
        stats = sandbox.stats()
        assert stats.busy_workers == 0 and stats.runs_in_flight == 0
        assert stats.worker_restarts == restarts  # JavaScript was not running: no kill
        # A worker hosts one run (ADR 0028): it is gone now, without counting as a restart.
        await _until(lambda: not _alive(pid))
        assert (await cm.run("return 'next';")).value == "next"


async def test_a_run_stopped_by_its_wall_limit_is_killed_not_left_running(
    sandbox: ProcessSandbox,
) -> None:
    async with _code_mode(sandbox, compute_time_ms=600_000, wall_time_ms=200) as cm:
        await _until(lambda: sandbox.stats().workers >= 1)  # the wall limit is the code's alone
        before = cm.runtime_stats().worker_restarts
        result = await cm.run(NON_POLLING["reverse-once"])
        assert result.diagnostic is not None and result.diagnostic.code == ErrorCode.WALL_LIMIT
        stats = cm.runtime_stats()
        assert stats.busy_workers == 0 and stats.worker_restarts == before + 1


@pytest.mark.parametrize("when", ["awaiting-a-tool", "running-javascript"])
async def test_a_crashed_worker_fails_only_its_own_run(sandbox: ProcessSandbox, when: str) -> None:
    gate, started, echoed = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with _code_mode(sandbox, _tools(gate, started, echoed)) as cm:
        # An innocent run parked on its own worker the whole time.
        innocent = asyncio.ensure_future(
            cm.run("return (await tools.app.wait({})).structuredContent;")
        )
        await started.wait()
        pids_before = set(sandbox.busy_pids())
        # The victim's first tool call shows its worker has taken the run: a worker killed
        # before that hands the run to another (by design), which then runs it to the end.
        started.clear()
        code = (
            "await tools.app.wait({}); return 1;"
            if when == "awaiting-a-tool"
            else "await tools.app.echo({}); while (true) {}"
        )
        victim = asyncio.ensure_future(cm.run(code))
        if when == "awaiting-a-tool":
            await started.wait()
        else:
            await echoed.wait()
        (pid,) = set(sandbox.busy_pids()) - pids_before
        if when == "running-javascript":
            # Past its tool call, the worker's only CPU use is the endless loop.
            ticks = _cpu_ticks(pid)
            await _until(lambda: _cpu_ticks(pid) >= ticks + 5)
        restarts = sandbox.stats().worker_restarts
        os.kill(pid, signal.SIGSEGV)
        gate.set()
        async with asyncio.timeout(HANG_GUARD_S):
            crashed = await victim
        gate.set()
        assert not crashed.ok and crashed.diagnostic is not None
        assert crashed.diagnostic.code == ErrorCode.SANDBOX_CRASHED
        assert crashed.diagnostic.correlation_id
        assert crashed.diagnostic.correlation_id in crashed.diagnostic.message
        kept = await innocent
        assert kept.ok and kept.value == {"ok": True}
        again = await cm.run("return 'respawned';")
        assert again.ok and again.value == "respawned"
        assert sandbox.stats().worker_restarts == restarts + 1


def _children(parent: int) -> set[int]:
    """Live processes whose parent is ``parent`` (a zygote's workers)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent and fields[0] != "Z":
                found.add(int(entry))
    return found


async def _zygote_of(box: ProcessSandbox, cm: CodeMode) -> int:
    """The zygote's pid, learnt through a run's worker."""
    gate, started = asyncio.Event(), asyncio.Event()
    async with _code_mode(box, _tools(gate, started)) as probe:
        run = asyncio.ensure_future(probe.run("await tools.app.wait({}); return 1;"))
        await started.wait()
        (pid,) = box.busy_pids()
        with open(f"/proc/{pid}/status") as status:
            zygote = int(next(line for line in status if line.startswith("PPid:")).split()[1])
        gate.set()
        assert (await run).ok
    return zygote


async def test_an_idle_worker_that_died_is_replaced_before_a_run_uses_it() -> None:
    box = ProcessSandbox(RuntimeOptions(max_runs=2, warm_workers=2), shared=False)
    try:
        async with _code_mode(box) as cm:
            zygote = await _zygote_of(box, cm)
            await _until(lambda: cm.runtime_stats().workers == 2)
            await _until(lambda: len(_children(zygote)) == 2)  # the worker of the probe left
            pids = _children(zygote)
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            for pid in pids:
                # Gone from /proc, not merely a zombie: a killed worker's thread group may
                # still be closing its files while its leader already shows as a zombie.
                await _until(lambda pid=pid: not os.path.exists(f"/proc/{pid}"))
            results = [await cm.run("return 'fine';") for _ in range(3)]
        assert [r.value for r in results] == ["fine"] * 3, [r.diagnostic for r in results]
    finally:
        box.close()


async def test_a_worker_killed_before_it_takes_a_run_hands_the_run_to_another() -> None:
    """The residual race of the idle check: a worker killed from outside whose socket has
    not closed yet when a run is handed to it. A stopped worker makes the window as wide as
    the test needs: it is handed out (its socket is open), then killed before it read the
    start request. One run slot: the stopped worker is the only one a run can get."""
    box = ProcessSandbox(RuntimeOptions(max_runs=1, warm_workers=1), shared=False)
    try:
        async with _code_mode(box) as cm:
            zygote = await _zygote_of(box, cm)
            await _until(lambda: cm.runtime_stats().workers == 1)
            await _until(lambda: len(_children(zygote)) == 1)
            (pid,) = _children(zygote)
            os.kill(pid, signal.SIGSTOP)
            try:
                run = asyncio.ensure_future(cm.run("console.log('ran once'); return 'fine';"))
                await _until(lambda: pid in box.busy_pids())
            finally:
                os.kill(pid, signal.SIGKILL)
            result = await run
        assert result.ok, result.diagnostic
        assert result.value == "fine"
        assert [e.message for e in result.logs] == ["ran once"]
        assert pid not in box.busy_pids()
    finally:
        box.close()


async def test_a_dead_zygote_takes_no_run_with_it_and_comes_back(sandbox: ProcessSandbox) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    async with _code_mode(sandbox, _tools(gate, started)) as cm:
        run = asyncio.ensure_future(cm.run("await tools.app.wait({}); return 'survived';"))
        await started.wait()
        (pid,) = sandbox.busy_pids()
        with open(f"/proc/{pid}/status") as status:
            zygote = int(next(line for line in status if line.startswith("PPid:")).split()[1])
        os.kill(zygote, signal.SIGKILL)
        await _until(lambda: not _alive(zygote))
        gate.set()
        assert (await run).value == "survived"
        # New workers come from a new zygote.
        results = await asyncio.gather(*(cm.run("return 2;") for _ in range(4)))
        assert [r.value for r in results] == [2, 2, 2, 2]


async def test_compute_time_is_the_runs_own_under_a_cpu_burning_host_tool(
    sandbox: ProcessSandbox,
) -> None:
    # About 0.1-0.3 s of JavaScript on its own, under a 1.5 s budget, while a host tool burns
    # CPU in the server's process the whole time. Charged by process CPU, this run would fail.
    # No wall-clock bound: the tool burns until the runs are done, however long they take.
    loop_code = "let x = 0; for (let i = 0; i < 3e6; i++) { x = (x + i * 7) % 1000003; } return x;"
    burning, stop_burning = threading.Event(), threading.Event()
    tools = _tools(burning=burning, stop_burning=stop_burning)
    patient = {"wall_time_ms": 600_000, "tool_call_time_ms": 600_000}
    async with _code_mode(sandbox, tools, compute_time_ms=1500, **patient) as cm:
        burner = asyncio.ensure_future(
            cm.run("return (await tools.app.burn({})).structuredContent.n > 0;")
        )
        try:
            await _until(burning.is_set)
            results = [await cm.run(loop_code) for _ in range(3)]
        finally:
            stop_burning.set()
        assert (await burner).value is True
    for result in results:
        assert result.ok, result.diagnostic
        assert 0 < result.compute_ms < 1500


async def test_admission_refuses_with_server_busy_and_a_cancelled_queued_run_leaves_the_queue() -> (
    None
):
    options = RuntimeOptions(
        max_runs=1, max_queued_runs=1, queue_timeout_ms=100_000, warm_workers=1
    )
    box = ProcessSandbox(options, shared=False)
    gate, started = asyncio.Event(), asyncio.Event()
    try:
        async with _code_mode(box, _tools(gate, started)) as cm:
            holder = asyncio.ensure_future(cm.run("await tools.app.wait({}); return 'held';"))
            await started.wait()
            cancel = asyncio.Event()
            queued = asyncio.ensure_future(cm.run("return 'queued';", cancel=cancel))
            await _until(lambda: cm.runtime_stats().runs_queued == 1)
            refused = await cm.run("return 'refused';")  # the queue (1) is full
            assert refused.diagnostic is not None
            assert refused.diagnostic.code == ErrorCode.SERVER_BUSY
            assert refused.diagnostic.phase == "host"
            cancel.set()
            cancelled = await queued
            assert cancelled.diagnostic is not None
            assert cancelled.diagnostic.code == ErrorCode.CANCELLED
            assert cm.runtime_stats().runs_queued == 0
            gate.set()
            assert (await holder).value == "held"
            assert (await cm.run("return 'next';")).value == "next"
            assert cm.runtime_stats().runs_rejected == 1
    finally:
        box.close()


async def test_a_run_that_waits_past_the_queue_timeout_is_refused() -> None:
    options = RuntimeOptions(max_runs=1, max_queued_runs=4, queue_timeout_ms=50, warm_workers=1)
    box = ProcessSandbox(options, shared=False)
    gate, started = asyncio.Event(), asyncio.Event()
    try:
        async with _code_mode(box, _tools(gate, started)) as cm:
            holder = asyncio.ensure_future(cm.run("await tools.app.wait({}); return 1;"))
            await started.wait()
            waited = await cm.run("return 2;")
            gate.set()
            await holder
        assert waited.diagnostic is not None and waited.diagnostic.code == ErrorCode.SERVER_BUSY
        assert "queue_timeout_ms" in waited.diagnostic.message
        assert waited.queue_ms > 0
    finally:
        box.close()


async def test_the_memory_budget_holds_runs_back_instead_of_overcommitting() -> None:
    # Each run reserves its heap (8 MiB) plus a worker's overhead (16 MiB): two fit in 56 MiB.
    options = RuntimeOptions(max_runs=8, memory_budget_bytes=56 * 1024 * 1024, warm_workers=1)
    box = ProcessSandbox(options, shared=False)
    gate = asyncio.Event()
    entered = 0

    async def wait(args: dict[str, Any]) -> dict[str, Any]:
        nonlocal entered
        entered += 1
        await gate.wait()
        return {}

    tools = local(
        "app", {"wait": define_tool(description="w", input_schema={"type": "object"}, execute=wait)}
    )
    try:
        async with CodeMode(
            sources=[tools],
            policy=allow_all_tool_calls(),
            limits=Limits(memory_bytes=8 * 1024 * 1024),
            sandbox=box,
        ) as cm:
            runs = [
                asyncio.ensure_future(cm.run("await tools.app.wait({}); return 1;"))
                for _ in range(4)
            ]
            await _until(lambda: entered == 2 and cm.runtime_stats().runs_queued == 2)
            assert cm.runtime_stats().runs_in_flight == 2
            gate.set()
            assert [(await r).value for r in runs] == [1, 1, 1, 1]
    finally:
        box.close()


async def test_memory_a_run_used_is_handed_back_when_it_ends() -> None:
    box = ProcessSandbox(RuntimeOptions(max_runs=4, warm_workers=4), shared=False)
    hog = "const keep = []; for (let i = 0; i < 400; i++) keep.push('x'.repeat(100000) + i);\nreturn keep.length;"
    try:
        async with _code_mode(box, memory_bytes=128 * 1024 * 1024) as cm:
            await _until(lambda: cm.runtime_stats().workers == 4)
            idle = cm.runtime_stats().worker_rss_bytes
            results = await asyncio.gather(*(cm.run(hog) for _ in range(4)))
            assert [r.value for r in results] == [400] * 4  # about 40 MB each
            await _until(lambda: cm.runtime_stats().workers == 4)  # fresh ones replace them
            after = cm.runtime_stats()
        assert after.workers == 4
        # Each worker held about 40 MB; afterwards each is back within a few MiB of idle.
        assert after.worker_rss_bytes < idle + 4 * 12 * 1024 * 1024
    finally:
        box.close()


async def test_every_run_gets_a_worker_process_of_its_own() -> None:
    """Single use (ADR 0028): nothing of one run is in the process of the next. The old
    recycling settings are accepted, with a warning, and change nothing."""
    with pytest.warns(DeprecationWarning, match="worker_max_runs"):
        options = RuntimeOptions(max_runs=1, warm_workers=1, worker_max_runs=2)
    box = ProcessSandbox(options, shared=False)
    pids: list[int] = []

    def record(args: dict[str, Any]) -> dict[str, Any]:
        pids.extend(box.busy_pids())
        return {}

    tools = local(
        "app",
        {"pid": define_tool(description="p", input_schema={"type": "object"}, execute=record)},
    )
    try:
        async with CodeMode(sources=[tools], policy=allow_all_tool_calls(), sandbox=box) as cm:
            for _ in range(6):
                assert (await cm.run("await tools.app.pid({}); return 1;")).ok
        assert len(pids) == len(set(pids)) == 6
        assert box.stats().worker_restarts == 0  # ended with their runs, never killed early
    finally:
        box.close()


async def test_a_worker_told_a_run_is_coming_serves_whatever_comes_next(
    sandbox: ProcessSandbox,
) -> None:
    """ADR 0043: a run's start tells the idle worker it will be handed to poll for the
    request (``N``). Told many times, told with no run following, or told in the middle of
    its run (another run's start picked it just before this one took it), a worker serves
    its run as if never told."""
    gate, started = asyncio.Event(), asyncio.Event()
    async with _code_mode(sandbox, _tools(gate, started)) as cm:
        pool = sandbox._pool
        for _ in range(3):
            pool.expect_run()
        assert (await cm.run("return 1;")).value == 1
        pool.expect_run()  # no run follows this one at once
        await _until(lambda: (s := sandbox.stats()).workers - s.busy_workers >= 2)
        run = asyncio.ensure_future(cm.run("await tools.app.wait({}); return 2;"))
        await started.wait()
        (busy,) = pool._busy
        busy.sock.send(frame(b"N", b""))  # while its run awaits a tool, with settings or not
        sandbox.expect_run(Limits(log_entries=1), stream=True)
        busy.sock.send(frame(b"N", json.dumps({"limits": {}, "stream": True}).encode()))
        gate.set()
        result = await run
        assert result.ok and result.value == 2
        assert sandbox.stats().worker_restarts == 0


async def test_code_modes_sharing_workers_each_run_under_their_own_limits(
    sandbox: ProcessSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0046: every run announces its settings to the worker it will be handed, and
    rehearsals at quiet moments carry the latest ones; a worker that made its engine for
    one ``CodeMode``'s limits and is taken by another's run uses that run's limits."""
    monkeypatch.setattr(sandbox._pool, "cpu_to_spare", lambda: True)  # always announce
    source = "for (let i = 0; i < 5; i++) console.log(i);\nreturn 1;"
    lines: list[str] = []
    async with _code_mode(sandbox, log_entries=2) as few, _code_mode(sandbox) as many:
        for round_ in range(6):
            terse = await few.run(source)
            full = await many.run(source, on_log=lambda entry: lines.append(entry.message))
            assert terse.ok and full.ok
            assert [e.level for e in terse.logs] == ["log", "truncated"]
            assert [e.message for e in full.logs] == ["0", "1", "2", "3", "4"]
            assert lines[-5:] == ["0", "1", "2", "3", "4"] and len(lines) == 5 * (round_ + 1)
            if round_ % 2:  # a quiet moment: idle workers rehearse with the latest settings
                sandbox._pool._last_active = 0.0
                sandbox._pool._at_quiet_moment()
    assert sandbox.stats().worker_restarts == 0


async def test_compiling_a_pathological_source_never_holds_the_event_loop(
    sandbox: ProcessSandbox,
) -> None:
    # A chain of non-null assertions compiled quadratically on the server's event loop.
    hostile = "const x: any = 1;\nreturn x" + "!" * 32_000 + ";"
    async with _code_mode(sandbox) as cm:
        async with asyncio.timeout(HANG_GUARD_S):
            slow = asyncio.ensure_future(cm.run(hostile))
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while not slow.done():
                    ticks += 1
                    await asyncio.sleep(0.001)

            ticker = asyncio.ensure_future(tick())
            innocent = await cm.run("return 'fast';")
            result = await slow
            await ticker
        assert innocent.ok and innocent.value == "fast"
        # Refused at the nesting bound, or compiled; either way the loop kept turning.
        assert result.ok or (
            result.diagnostic is not None
            and result.diagnostic.code in {*ENDINGS, ErrorCode.COMPILE_ERROR}
        )
        assert ticks > 1  # the loop kept turning while the worker compiled


async def test_a_user_made_stack_of_700000_lines_is_read_as_a_bounded_head(
    sandbox: ProcessSandbox,
) -> None:
    code = (
        "const e = new Error('deep');\n"
        "e.stack = '    at f (<input>:2:1)\\n'.repeat(700000);\n"
        "throw e;"
    )
    async with _code_mode(sandbox, compute_time_ms=5000) as cm:
        async with asyncio.timeout(HANG_GUARD_S):
            result = await cm.run(code)
    assert result.diagnostic is not None
    assert result.diagnostic.code == ErrorCode.UNCAUGHT_EXCEPTION
    assert "deep" in result.diagnostic.message


def test_the_server_process_survives_and_leaves_no_worker_behind(tmp_path: Any) -> None:
    """A server killed with SIGKILL takes its zygote and workers with it (busy or idle)."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "server.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, sys
            from codemodekit import CodeMode, ProcessSandbox, RuntimeOptions, allow_all_tool_calls, local
            async def main():
                box = ProcessSandbox(RuntimeOptions(max_runs=4, warm_workers=2))
                async with CodeMode(sources=[local("app", {})], policy=allow_all_tool_calls(), sandbox=box) as cm:
                    busy = asyncio.ensure_future(cm.run("Array.prototype.reverse.call({length: 2**31-1});"))
                    while len(box.busy_pids()) < 1:
                        await asyncio.sleep(0.01)
                    print(" ".join(map(str, box.busy_pids())), flush=True)
                    await busy
            asyncio.run(main())
            """
        )
    )
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        pids = [int(p) for p in server.stdout.readline().split()]
        assert pids
        server.kill()
        server.wait(timeout=HANG_GUARD_S)
        deadline = time.monotonic() + HANG_GUARD_S
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(_alive(pid) for pid in pids)
    finally:
        server.kill()


def _cpu_ticks(pid: int) -> int:
    """User and system CPU time of a process, in clock ticks (from /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_runtime_options_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="mode"):
        RuntimeOptions(mode="thread")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="queue_timeout_ms"):
        RuntimeOptions(queue_timeout_ms=0)
    with pytest.raises(TypeError, match="max_runs"):
        RuntimeOptions(max_runs=1.5)  # type: ignore[arg-type]
