"""``QuickJsSandbox``: the ``CodeSandbox`` adapter over ``quickjs-ng``.

A run is a sequence of slices in one fresh QuickJS context: start the program, run pending
jobs, drain the queued tool calls; start those calls on the host as asyncio tasks; when some
finish, settle their promises in the next slice; repeat until the top-level promise settles.
Each slice runs under the remaining compute budget, so time spent awaiting tools is free.
No Python callable is ever installed in the context (see ``prelude.js`` and ADR 0005/0006).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from codemodekit.errors import Diagnostic, ErrorCode, new_correlation_id
from codemodekit.limits import Limits
from codemodekit.sandbox._engine import Engine, Step, ToolCall, prelude_source
from codemodekit.sandbox._warm import WarmContexts
from codemodekit.sandbox._workers import STACK_MARGIN_BYTES, JsWorkers, default_workers
from codemodekit.sandbox.base import CompiledProgram, SandboxHost, SandboxOutcome, ToolCallRejected

__all__ = ["QuickJsSandbox"]

log = logging.getLogger("codemodekit.sandbox")

NEVER_SETTLES = (
    "the code awaited a promise that can never settle: no tool call is in flight and no "
    "JavaScript is left to run (a Promise whose resolve is never called?)"
)


def _inline_stack_cap() -> int:
    """The stack QuickJS may use on the calling thread (inline mode)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
        if soft != resource.RLIM_INFINITY and soft > 2 * STACK_MARGIN_BYTES:
            return int(soft) - 2 * STACK_MARGIN_BYTES
    except (ImportError, ValueError, OSError):
        pass
    return 6 * 1024 * 1024


class _Session:
    """One run's engine, entered by one thread at a time, closable from the loop thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.engine: Engine | None = None
        self.close_requested = False

    def op(self, fn: Callable[[], Step]) -> Step:
        try:
            with self.lock:
                try:
                    if self.close_requested:
                        return Step(done=True)
                    return fn()
                finally:
                    if self.close_requested:
                        self._close_locked()
        finally:
            # A close requested while we held the lock found it busy: do it now.
            self._recheck()

    def _close_locked(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def _recheck(self) -> None:
        if self.close_requested and self.lock.acquire(blocking=False):
            try:
                self._close_locked()
            finally:
                self.lock.release()

    def request_close(self) -> None:
        """Dispose now if idle, else right after the running slice, which is tripped so it
        ends soon rather than at the end of its compute budget (see _watchdog.py)."""
        self.close_requested = True
        engine = self.engine
        if engine is not None:
            engine.interrupt()
        self._recheck()


class QuickJsSandbox:
    """Runs compiled programs in fresh ``quickjs-ng`` contexts.

    ``offload="thread"`` (default) runs every slice on a shared pool of worker threads, so
    a long slice never blocks the event loop (QuickJS releases the GIL while it runs).
    ``offload="inline"`` runs slices on the event-loop thread: about 60 µs faster per slice
    on the reference machine, but a slice may hold the loop for up to ``compute_time_ms``;
    use it only where nothing else shares the loop (the CLI, benchmarks). See ADR 0006.

    ``prewarm`` contexts are kept with the prelude compiled, refilled on a worker when a
    run ends, so a run rarely pays that compile itself; each is used by one run only.
    ``prewarm=0`` builds every context on demand.
    """

    def __init__(
        self,
        *,
        offload: Literal["thread", "inline"] = "thread",
        workers: JsWorkers | None = None,
        prewarm: int = 2,
    ) -> None:
        if offload not in ("thread", "inline"):
            raise ValueError("offload must be 'thread' or 'inline'")
        if prewarm < 0:
            raise ValueError("prewarm must be 0 or more")
        self._offload = offload
        self._workers = workers
        self._active = 0  # runs in progress; the pool refills only when there are none
        self._warm = WarmContexts(prelude_source(), prewarm, workers, busy=lambda: self._active > 0)

    def close(self) -> None:
        """Dispose the prepared contexts and prepare no more; runs keep working (each
        builds its own context) and runs in progress are not affected."""
        self._warm.clear()

    async def _op(self, session: _Session, fn: Callable[[], Step]) -> Step:
        if self._offload == "inline":
            return session.op(fn)
        workers = self._workers or default_workers()
        return await workers.run(lambda: session.op(fn))

    def _stack_cap(self) -> int:
        if self._offload == "inline":
            return _inline_stack_cap()
        return (self._workers or default_workers()).stack_limit

    async def run(
        self, program: CompiledProgram, host: SandboxHost, limits: Limits
    ) -> SandboxOutcome:
        session = _Session()
        stack_cap = self._stack_cap()

        def start() -> Step:
            session.engine = Engine(limits, stack_cap=stack_cap, prepared=self._warm.take())
            return session.engine.start(program)

        loop = asyncio.get_running_loop()
        tasks: dict[asyncio.Future[Any], ToolCall] = {}
        finished: list[asyncio.Future[Any]] = []
        waker: list[asyncio.Future[None]] = []

        # Cheaper than asyncio.wait per slice: each call reports itself when it ends.
        def on_done(task: asyncio.Future[Any]) -> None:
            finished.append(task)
            if waker and not waker[0].done():
                waker[0].set_result(None)

        rejected: dict[int, Diagnostic] = {}
        self._active += 1
        try:
            step = await self._op(session, start)
            while not step.done:
                for call in step.calls:
                    task: asyncio.Future[Any]
                    try:
                        if call.problem is not None:
                            raise _undecodable(call)
                        task = asyncio.ensure_future(
                            host.call_tool(call.source, call.tool, call.arguments)
                        )
                    except Exception as exc:  # a host that fails before awaiting
                        task = loop.create_future()
                        task.set_exception(exc)
                    tasks[task] = call
                    task.add_done_callback(on_done)
                engine = session.engine
                if engine is None:  # pragma: no cover - closed only on cancellation
                    raise asyncio.CancelledError
                if not tasks:
                    diagnostic = Diagnostic(ErrorCode.UNCAUGHT_EXCEPTION, NEVER_SETTLES)
                    step = await self._op(session, partial(engine.abandon, diagnostic))
                    break
                if not finished:
                    waker[:] = [loop.create_future()]
                    await waker[0]
                parts = [_settlement(done, tasks.pop(done), rejected) for done in finished]
                finished.clear()
                batch = "\n".join(parts)
                step = await self._op(session, partial(engine.settle, batch))
        except BaseException:
            session.request_close()
            raise
        finally:
            self._active -= 1
            self._warm.refill_soon(loop)
            for pending in tasks:
                pending.remove_done_callback(on_done)
                pending.cancel()
                # Retrieve the outcome later so a late failure is never reported as lost.
                pending.add_done_callback(_consume)
        return _outcome(step, rejected)


def _undecodable(call: ToolCall) -> ToolCallRejected:
    """A call whose arguments the host cannot decode: rejected without reaching the host."""
    from codemodekit.catalog import tool_address

    address = tool_address(call.source, call.tool)
    return ToolCallRejected(
        Diagnostic(
            ErrorCode.TOOL_INPUT_INVALID,
            f"{address}: {call.problem}",
            tool=address,
            source=call.source,
        )
    )


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _settlement(task: asyncio.Future[Any], call: ToolCall, rejected: dict[int, Diagnostic]) -> str:
    """One ``[id, 1, value]`` / ``[id, 0, error]`` line of a settle batch, as JSON text."""
    try:
        value = task.result()
    except ToolCallRejected as rejection:
        diagnostic = rejection.diagnostic
    except asyncio.CancelledError:
        diagnostic = Diagnostic(ErrorCode.TOOL_INTERNAL_ERROR, "the tool call was cancelled")
    except Exception:
        correlation_id = new_correlation_id()
        log.exception(
            "tool call %s.%s raised (correlation %s)", call.source, call.tool, correlation_id
        )
        diagnostic = Diagnostic(
            ErrorCode.TOOL_INTERNAL_ERROR,
            f"the tool call failed inside the host (correlation id {correlation_id})",
            correlation_id=correlation_id,
        )
    else:
        try:
            # ensure_ascii keeps lone surrogates as escapes, which cross into JS intact.
            return f"[{call.call_id},1,{json.dumps(value, allow_nan=False)}]"
        except (TypeError, ValueError, RecursionError) as exc:
            correlation_id = new_correlation_id()
            log.error(
                "host returned a non-JSON tool result (correlation %s): %s", correlation_id, exc
            )
            diagnostic = Diagnostic(
                ErrorCode.TOOL_RESULT_INVALID,
                f"the tool result is not JSON (correlation id {correlation_id})",
                correlation_id=correlation_id,
            )
    if diagnostic.tool is None or diagnostic.source is None:
        from codemodekit.catalog import tool_address

        diagnostic = dataclasses.replace(
            diagnostic,
            tool=diagnostic.tool or tool_address(call.source, call.tool),
            source=diagnostic.source or call.source,
        )
    rejected[call.call_id] = diagnostic
    info = {
        "code": str(diagnostic.code),
        "message": diagnostic.message,
        "tool": diagnostic.tool,
        "source": diagnostic.source,
    }
    return f"[{call.call_id},0,{json.dumps(info)}]"


def _outcome(step: Step, rejected: dict[int, Diagnostic]) -> SandboxOutcome:
    diagnostic = step.diagnostic
    if step.tool_call_id is not None and diagnostic is not None:
        original = rejected.get(step.tool_call_id)
        if original is not None:
            # The host's own diagnostic (details, correlation id), at the user's call site.
            diagnostic = dataclasses.replace(original, location=diagnostic.location)
    if not step.ok and diagnostic is None:
        diagnostic = Diagnostic(ErrorCode.CANCELLED, "the run was cancelled")
    return SandboxOutcome(
        ok=step.ok,
        value=step.value if step.ok else None,
        diagnostic=None if step.ok else diagnostic,
        logs=step.logs,
        compute_ms=step.compute_ms,
    )
