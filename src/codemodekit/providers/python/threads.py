"""The threads a source runs its sync tools on (tools that may block).

``run_in_executor`` costs two futures chained across threads (a ``concurrent.futures``
future with its lock and condition, wrapped in an asyncio one) and an executor that checks
its thread count on every submit. A tool call needs less: a queue the threads take calls
from, and one ``call_soon_threadsafe`` that hands the outcome to the caller's future, which
resumes the awaiting run in that same turn of the event loop (``ResumingFuture``).

Threads start on demand, up to ``limit``, and stay. A tool that hangs keeps its thread
(threads cannot be stopped); the source's other calls use the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from codemodekit.sandbox._resume import ResumingFuture

_Job = tuple[asyncio.AbstractEventLoop, "ResumingFuture[Any]", Callable[[], Any]]


def _settle(future: ResumingFuture[Any], ok: bool, outcome: Any) -> None:
    if future.done():
        return  # cancelled while the tool ran: its outcome goes nowhere
    if ok:
        future.resolve(outcome)
    else:
        future.reject(outcome)
    future.wake()  # a loop callback: the awaiting run goes on now


class ToolThreads:
    """Up to ``limit`` daemon threads named ``prefix-N``, started when calls need them."""

    def __init__(self, prefix: str, limit: int) -> None:
        self._prefix = prefix
        self._limit = limit
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def run(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        """``fn()`` on one of the threads; its outcome arrives in the returned future.
        Cancelling the future drops a call no thread has taken yet."""
        loop = asyncio.get_running_loop()
        future: ResumingFuture[Any] = ResumingFuture(loop=loop)
        with self._lock:
            if self._closed:
                raise RuntimeError("the source's tool threads are closed")
            self._jobs.put((loop, future, fn))
            if self._idle > 0:
                self._idle -= 1
            elif self._threads < self._limit:
                self._threads += 1
                threading.Thread(
                    target=self._serve, name=f"{self._prefix}-{self._threads}", daemon=True
                ).start()
        return future

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            loop, future, fn = job
            if not future.cancelled():  # a plain read; a late cancel is handled by _settle
                try:
                    outcome, ok = fn(), True
                except BaseException as exc:  # delivered to the awaiting call
                    outcome, ok = exc, False
                # A closed loop (RuntimeError): nobody awaits the call any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_settle, future, ok, outcome)
                del outcome, fn, future, job
            with self._lock:
                if self._closed:
                    return
                self._idle += 1

    def close(self) -> None:
        """Cancel the calls no thread has taken; threads end after their current call."""
        with self._lock:
            self._closed = True
            threads = self._threads
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                loop, future, _fn = job
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(future.cancel)
        for _ in range(threads):
            self._jobs.put(None)
