"""A run's progress events: ordered, bounded in count and rate, the last one always delivered."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger("codemodekit")

ProgressKind = Literal[
    "started",
    "source_connecting",
    "tool_call_started",
    "tool_progress",
    "tool_call_finished",
    "finished",
]
"""``source_connecting``: the run waits for a source it names that is still connecting."""

PROGRESS_BURST = 10
PROGRESS_PER_SECOND = 10.0
"""Progress is bounded in rate as well as count (``Limits.progress_events``); events over
the rate are dropped, never delayed, and ``finished`` is always delivered."""

PROGRESS_CLOSE_S = 1.0
"""How long a run's end waits for a slow progress consumer to take its last events."""


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    execution_id: str
    sequence: int
    """Strictly increasing within a run, starting at 1."""
    kind: ProgressKind
    message: str
    tool: str | None = None
    dropped: int = 0
    """Events the count or rate bound dropped since the previous delivered one (so a
    consumer can say that lines are missing, and how many)."""


ProgressCallback = Callable[[ProgressEvent], "Awaitable[None] | None"]


class RunProgress:
    """Delivers a run's progress events in order, bounded in count.

    A callback that raises loses that one event only (it is logged); later events are still
    delivered. An async callback's events go through an ordered pump, and ``close`` waits
    (bounded by ``PROGRESS_CLOSE_S``) until every queued event, ``finished`` included, has
    been handed over, so a fast run's last event is never cut off.
    """

    def __init__(self, execution_id: str, callback: ProgressCallback | None, limit: int) -> None:
        self._execution_id = execution_id
        self._callback = callback
        self._limit = limit
        # Token bucket: bursts of PROGRESS_BURST, then PROGRESS_PER_SECOND on average.
        self._tokens = float(PROGRESS_BURST)
        self._refilled = time.monotonic()
        self._sequence = 0
        self._failures = 0
        self._dropped = 0
        self._pending: asyncio.Queue[ProgressEvent] | None = None
        self._pump: asyncio.Task[None] | None = None

    def emit(self, kind: ProgressKind, message: str, tool: str | None = None) -> None:
        if self._callback is None:
            return
        # Keep the last slot for "finished" so a consumer always sees the end.
        if self._sequence >= self._limit - (0 if kind == "finished" else 1):
            self._dropped += 1
            return
        if kind != "finished" and not self._take_token():
            self._dropped += 1
            return
        self._sequence += 1
        event = ProgressEvent(
            self._execution_id, self._sequence, kind, message, tool, self._dropped
        )
        self._dropped = 0
        if self._pending is not None:
            self._pending.put_nowait(event)
            return
        try:
            answer = self._callback(event)
        except Exception:
            self._failed()
            return
        if inspect.isawaitable(answer):
            # An async consumer: from now on events go through an ordered pump.
            self._pending = asyncio.Queue()
            self._pump = asyncio.ensure_future(self._drain(answer))

    def _failed(self) -> None:
        self._failures += 1
        if self._failures == 1:
            log.exception("progress callback failed; the event is dropped, later ones are sent")
        else:
            log.debug("progress callback failed again (%d times)", self._failures, exc_info=True)

    def _take_token(self) -> bool:
        now = time.monotonic()
        self._tokens = min(
            float(PROGRESS_BURST), self._tokens + (now - self._refilled) * PROGRESS_PER_SECOND
        )
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    async def _deliver(self, answer: Awaitable[None] | None) -> None:
        try:
            if answer is not None:
                await answer
        except asyncio.CancelledError:
            raise
        except Exception:
            self._failed()

    async def _drain(self, first: Awaitable[None]) -> None:
        await self._deliver(first)
        assert self._pending is not None and self._callback is not None
        while True:
            event = await self._pending.get()
            try:
                try:
                    answer = self._callback(event)
                except Exception:
                    self._failed()
                    continue
                await self._deliver(answer if inspect.isawaitable(answer) else None)
            finally:
                self._pending.task_done()

    async def close(self) -> None:
        if self._pump is None or self._pending is None:
            return
        # Every queued event is handed over (join also waits for the one being sent).
        joined = asyncio.ensure_future(self._pending.join())
        try:
            done, _ = await asyncio.wait(
                (joined, self._pump),
                timeout=PROGRESS_CLOSE_S,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done:
                log.debug("progress consumer too slow; undelivered events are dropped")
        finally:
            # Also when the run itself is cancelled meanwhile: no pump outlives its run.
            joined.cancel()
            self._pump.cancel()
            await asyncio.gather(joined, self._pump, return_exceptions=True)
