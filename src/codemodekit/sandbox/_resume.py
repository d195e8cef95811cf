"""A future whose awaiting task resumes in the callback that completes it (ADR 0037).

A task that awaits a future registers its wake-up with ``add_done_callback``; an ordinary
future schedules it with ``call_soon`` when it completes, so the task resumes one turn of
the event loop later. On the tool-call path that turn is paid once per call: the callback
that reads a worker's reply (or takes a sync tool's outcome from its thread) completes the
future, and the run goes on in the next turn.

``ResumingFuture`` keeps its first done-callback aside. ``resolve``/``reject`` complete it
without scheduling anything, and ``wake`` then runs that callback at once, in its context:
the awaiting task takes its next step inside the completing callback. ``wake`` must be
called from a plain loop callback (a task step cannot run inside another task's step; if
one is running, the callback is scheduled as usual). Everything else behaves as an asyncio
future: ``set_result``, ``set_exception`` and ``cancel`` schedule every callback, the kept
one included, with ``call_soon``.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Callback = Callable[[Any], object]


class ResumingFuture(asyncio.Future[T]):
    """Built as ``ResumingFuture(loop=loop)``, as an asyncio future."""

    _kept: tuple[_Callback, contextvars.Context | None] | None = None

    def add_done_callback(
        self, fn: _Callback, *, context: contextvars.Context | None = None
    ) -> None:
        if self._kept is None and not self.done():
            self._kept = (fn, context)
        else:
            super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: _Callback) -> int:
        removed = super().remove_done_callback(fn)
        if self._kept is not None and self._kept[0] == fn:
            self._kept = None
            removed += 1
        return removed

    def _schedule_kept(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            super().add_done_callback(kept[0], context=kept[1])  # done: scheduled at once

    def set_result(self, result: T) -> None:
        super().set_result(result)
        self._schedule_kept()

    def set_exception(self, exception: type | BaseException) -> None:
        super().set_exception(exception)
        self._schedule_kept()

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg=msg):
            return False
        self._schedule_kept()
        return True

    def resolve(self, result: T) -> None:
        """Complete with ``result``; the kept callback waits for ``wake``."""
        super().set_result(result)

    def reject(self, exception: BaseException) -> None:
        """Complete with ``exception``; the kept callback waits for ``wake``."""
        super().set_exception(exception)

    def wake(self) -> None:
        """Run the kept callback now, if the future is done (from a loop callback)."""
        kept = self._kept
        if kept is None or not self.done():
            return
        self._kept = None
        if asyncio.current_task(self.get_loop()) is not None:
            super().add_done_callback(kept[0], context=kept[1])  # inside a task: as usual
            return
        fn, context = kept
        if context is None:
            fn(self)
        else:
            context.run(fn, self)
