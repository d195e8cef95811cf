"""How a run ends early: ``CodeMode.cancel_all_runs`` and a caller's own cancel event.

A run's sandbox work is awaited in the run's own task. ``cancel_all_runs`` sets the run's
``RunStop``, which cancels that task (no waiter task per run, ADR 0036); a caller's cancel
event is raced against the work in a task of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any

from codemodekit.sandbox.base import SandboxOutcome


class RunStop(asyncio.Event):
    """Set by ``CodeMode.cancel_all_runs``: ends one run with ``CANCELLED`` and a reason.
    While the run's sandbox work is awaited, setting it cancels the run's task itself
    (``until_cancelled``): no waiter task per run."""

    reason = ""
    task: asyncio.Task[Any] | None = None

    def set(self) -> None:
        super().set()
        if self.task is not None:
            self.task.cancel()


async def until_cancelled(
    work: Awaitable[SandboxOutcome], cancel: asyncio.Event | None, stop: RunStop
) -> SandboxOutcome | None:
    """``work``'s outcome, or ``None`` once ``cancel`` or ``stop`` is set (``work`` is
    then cancelled: its worker killed, its tool calls cancelled)."""
    # Set before the work starts: it never does (a run that answers in the turn its reply
    # is read could otherwise finish before the cancel is noticed).
    if stop.is_set() or (cancel is not None and cancel.is_set()):
        _drop(work)
        return None
    if cancel is not None:
        return await _until_set(work, cancel, stop)
    task = asyncio.current_task()
    if task is None:
        _drop(work)
        return None
    cancelling = task.cancelling()
    stop.task = task
    try:
        outcome = await work
    except asyncio.CancelledError:
        # Ours only when no one else cancelled the task as well.
        if stop.is_set() and task.uncancel() <= cancelling:
            return None
        raise
    finally:
        stop.task = None
    if stop.is_set() and task.cancelling() > cancelling:
        task.uncancel()  # set as the work ended: the run is over, nothing to cancel
    return outcome


def _drop(work: Awaitable[SandboxOutcome]) -> None:
    if isinstance(work, Coroutine):
        work.close()
    else:
        asyncio.ensure_future(work).cancel()


async def _until_set(
    work: Awaitable[SandboxOutcome], *events: asyncio.Event
) -> SandboxOutcome | None:
    """``until_cancelled`` with an event of the caller's: the work in a task of its own,
    raced against a waiter per event."""
    task = asyncio.ensure_future(work)
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait((task, *waiters), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        if not task.done():
            task.cancel()
        # Wait for the sandbox to dispose its context and cancel its tool calls.
        await asyncio.gather(task, *waiters, return_exceptions=True)
    if task.cancelled():
        return None
    return task.result()
