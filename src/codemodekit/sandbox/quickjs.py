"""``QuickJsSandbox``: the ``CodeSandbox`` adapter over ``quickjs-ng``.

A run is a sequence of slices in one fresh QuickJS context: start the program, run pending
jobs, drain the queued tool calls; start those calls on the host as asyncio tasks; when some
finish, settle their promises in the next slice; repeat until the top-level promise settles.
Each slice runs under the remaining compute budget, so time spent awaiting tools is free.
No Python callable is ever installed in the context (see ``prelude.js`` and ADR 0005/0006).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Literal

from codemodekit.errors import Diagnostic
from codemodekit.limits import Limits
from codemodekit.sandbox._drive import drive, streams_logs
from codemodekit.sandbox._engine import Engine, prelude_source
from codemodekit.sandbox._step import Step
from codemodekit.sandbox._warm import WarmContexts
from codemodekit.sandbox._workers import JsWorkers, default_workers, main_thread_stack_cap
from codemodekit.sandbox.base import CompiledProgram, SandboxHost, SandboxOutcome

__all__ = ["QuickJsSandbox"]

log = logging.getLogger("codemodekit.sandbox")


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
            return main_thread_stack_cap()
        return (self._workers or default_workers()).stack_limit

    async def run(
        self, program: CompiledProgram, host: SandboxHost, limits: Limits
    ) -> SandboxOutcome:
        self._active += 1
        try:
            channel = _InProcessChannel(self, program, limits, stream_logs=streams_logs(host))
            return await drive(channel, host, limits)
        finally:
            self._active -= 1
            self._warm.refill_soon(asyncio.get_running_loop())


class _InProcessChannel:
    """Slices of one run's engine, on a worker thread (or inline) of this process."""

    def __init__(
        self,
        sandbox: QuickJsSandbox,
        program: CompiledProgram,
        limits: Limits,
        *,
        stream_logs: bool = False,
    ) -> None:
        self._sandbox = sandbox
        self._program = program
        self._limits = limits
        self._stream_logs = stream_logs
        self._session = _Session()

    async def _op(self, fn: Callable[[], Step]) -> Step:
        if self._session.engine is None and self._session.close_requested:
            raise asyncio.CancelledError  # pragma: no cover - closed only on cancellation
        return await self._sandbox._op(self._session, fn)

    async def start(self) -> Step:
        session, stack_cap = self._session, self._sandbox._stack_cap()

        def start() -> Step:
            session.engine = Engine(
                self._limits,
                stack_cap=stack_cap,
                prepared=self._sandbox._warm.take(),
                stream_logs=self._stream_logs,
            )
            if session.close_requested:
                # Closed while the context was built: there was no engine to interrupt then.
                return Step(done=True)
            return session.engine.start(self._program)

        return await self._sandbox._op(session, start)

    def _engine(self) -> Engine:
        engine = self._session.engine
        if engine is None:  # pragma: no cover - closed only on cancellation
            raise asyncio.CancelledError
        return engine

    async def settle(self, batch: str) -> Step:
        return await self._op(partial(self._engine().settle, batch))

    async def abandon(self, diagnostic: Diagnostic) -> Step:
        return await self._op(partial(self._engine().abandon, diagnostic))

    def stop(self) -> None:
        self._session.request_close()
