"""Worker threads that run JavaScript slices off the event loop.

QuickJS releases the GIL while JavaScript runs, so a slice on a worker thread leaves the
asyncio loop free for other runs and for tool calls. The binding re-reads the stack top on
every entry (``JS_UpdateStackTop``), so successive slices of one context may run on
different workers; a context is never entered by two threads at once (the engine's lock).
Workers get an explicit, large stack so QuickJS's own stack limit always fires first.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    # Not at run time: a sandbox worker process imports this module and never asyncio
    # (its zygote starts faster and is smaller for every fork).
    import asyncio

    from codemodekit.sandbox._resume import ResumingFuture

T = TypeVar("T")

WORKER_STACK_BYTES = 16 * 1024 * 1024
"""Native stack of each worker thread (reserved address space, committed on use)."""
STACK_MARGIN_BYTES = 1024 * 1024
"""Kept free below QuickJS's stack limit for the binding and the C library."""


def main_thread_stack_cap() -> int:
    """The stack QuickJS may use on the main thread (inline mode, worker processes)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
        if soft != resource.RLIM_INFINITY and soft > 2 * STACK_MARGIN_BYTES:
            return int(soft) - 2 * STACK_MARGIN_BYTES
    except (ImportError, ValueError, OSError):
        pass
    return 6 * 1024 * 1024


_Job = tuple[Callable[[], Any], "Future[Any] | _LoopFuture"]


class _LoopFuture:
    """A slice's outcome handed straight to an asyncio future on its loop: one
    ``call_soon_threadsafe``, where ``asyncio.wrap_future`` chains two futures with locks."""

    __slots__ = ("future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: ResumingFuture[Any]) -> None:
        self.loop, self.future = loop, future

    def set_running_or_notify_cancel(self) -> bool:
        return not self.future.cancelled()  # a plain read; a late cancel is seen in _deliver

    def set_result(self, result: Any) -> None:
        self._deliver(True, result)

    def set_exception(self, exc: BaseException) -> None:
        self._deliver(False, exc)

    def _deliver(self, ok: bool, outcome: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the slice
            self.loop.call_soon_threadsafe(_settle, self.future, ok, outcome)


def _settle(future: ResumingFuture[Any], ok: bool, outcome: Any) -> None:
    if future.done():
        return
    if ok:
        future.resolve(outcome)
    else:
        future.reject(outcome)
    future.wake()  # a loop callback: the awaiting run goes on in this turn


class JsWorkers:
    """A fixed set of daemon threads taking slices from one queue."""

    def __init__(self, count: int | None = None, *, name: str = "codemode-js") -> None:
        self.count = count if count is not None else min(8, (os.cpu_count() or 1) + 2)
        if self.count < 1:
            raise ValueError("JsWorkers needs at least one thread")
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._name = name
        self._started = False
        self._lock = threading.Lock()

    @property
    def stack_limit(self) -> int:
        """The largest QuickJS stack limit that is safe on these threads."""
        return WORKER_STACK_BYTES - STACK_MARGIN_BYTES

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            # threading.stack_size is process-wide: set it only around our own spawns.
            previous = threading.stack_size()
            try:
                threading.stack_size(WORKER_STACK_BYTES)
                for i in range(self.count):
                    thread = threading.Thread(
                        target=self._loop, name=f"{self._name}-{i}", daemon=True
                    )
                    thread.start()
                    self._threads.append(thread)
            finally:
                threading.stack_size(previous)
            self._started = True

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as exc:  # delivered to the awaiting coroutine
                future.set_exception(exc)
            else:
                future.set_result(result)

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        if not self._started:
            self._start()
        future: Future[T] = Future()
        self._queue.put((fn, future))
        return future

    def run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """``fn()`` on a worker; its outcome in a future of the running loop."""
        if not self._started:
            self._start()
        import asyncio

        from codemodekit.sandbox._resume import ResumingFuture

        future: ResumingFuture[T] = ResumingFuture(loop=asyncio.get_running_loop())
        self._queue.put((fn, _LoopFuture(future.get_loop(), future)))
        return future

    def shutdown(self) -> None:
        """Stop the threads after the queued slices (used by tests and benchmarks)."""
        with self._lock:
            for _ in self._threads:
                self._queue.put(None)
            for thread in self._threads:
                thread.join()
            self._threads.clear()
            self._started = False


_default: JsWorkers | None = None
_default_lock = threading.Lock()


def default_workers() -> JsWorkers:
    """The process-wide pool shared by every ``QuickJsSandbox`` that does not bring one."""
    global _default
    with _default_lock:
        if _default is None:
            _default = JsWorkers()
        return _default
