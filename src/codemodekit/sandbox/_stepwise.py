"""Awaiting a coroutine step by step from inside another task, without a task of its own.

The bridge runs a tool's coroutine up to its first suspension before it decides to arm a
timer (ADR 0029), and the run loop runs a lone tool call in a copied context instead of a
task: both then need to go on awaiting that coroutine as if it were awaited directly.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any

_NOT_STARTED: Any = object()


@types.coroutine
def stepwise(
    work: Coroutine[Any, Any, Any],
    *,
    context: contextvars.Context | None = None,
    awaited: Any = _NOT_STARTED,
) -> Generator[Any, Any, Any]:
    """Await ``work``: what it awaits is handed up to the awaiting task, and what that task
    receives (cancellation included) is passed down. ``context``: each step runs in it.
    ``awaited``: ``work`` already ran up to its first suspension and awaits this."""
    send: Callable[[Any], Any] = work.send
    throw: Callable[[BaseException], Any] = work.throw
    if context is not None:
        run = context.run

        def send(value: Any) -> Any:
            return run(work.send, value)

        def throw(error: BaseException) -> Any:
            return run(work.throw, error)

    value: Any = None
    error: BaseException | None = None
    started = awaited is not _NOT_STARTED
    while True:
        if not started:
            try:
                awaited = send(value) if error is None else throw(error)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
        started = False
        try:
            value = yield awaited
        except GeneratorExit:
            work.close()
            raise
        except BaseException as exc:
            error = exc
