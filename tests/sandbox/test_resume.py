"""``ResumingFuture``: the awaiting task resumes inside the callback that wakes it, and
every other way of completing the future behaves as asyncio's own (ADR 0037)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemodekit.sandbox._resume import ResumingFuture


async def _awaiting(future: ResumingFuture[Any]) -> asyncio.Task[Any]:
    async def wait() -> Any:
        return await future

    task = asyncio.ensure_future(wait())
    await asyncio.sleep(0)  # the task takes its first step and awaits the future
    return task


async def test_wake_from_a_loop_callback_resumes_the_task_inside_that_callback() -> None:
    loop = asyncio.get_running_loop()
    future: ResumingFuture[int] = ResumingFuture(loop=loop)
    task = await _awaiting(future)
    seen: list[bool] = []
    handled = asyncio.Event()

    def callback() -> None:
        future.resolve(7)
        seen.append(task.done())  # resolved, not yet woken
        future.wake()
        seen.append(task.done())  # the task ran to its end in this callback
        handled.set()

    loop.call_soon(callback)
    await handled.wait()
    assert seen == [False, True]
    assert task.result() == 7


async def test_wake_inside_a_task_schedules_the_step_instead() -> None:
    future: ResumingFuture[int] = ResumingFuture(loop=asyncio.get_running_loop())
    task = await _awaiting(future)
    future.resolve(3)
    future.wake()  # this test is a task: the awaiting task cannot step inside it
    assert not task.done()
    assert await task == 3


@pytest.mark.parametrize("how", ["set_result", "set_exception", "cancel", "reject"])
async def test_every_other_completion_wakes_the_task_as_asyncio_does(how: str) -> None:
    future: ResumingFuture[int] = ResumingFuture(loop=asyncio.get_running_loop())
    task = await _awaiting(future)
    if how == "set_result":
        future.set_result(5)
        assert await task == 5
    elif how == "set_exception":
        future.set_exception(KeyError("k"))
        with pytest.raises(KeyError):
            await task
    elif how == "reject":
        future.reject(KeyError("k"))
        future.wake()  # from a task: scheduled
        with pytest.raises(KeyError):
            await task
    else:
        task.cancel()  # cancels the future it awaits, whose kept callback is scheduled
        with pytest.raises(asyncio.CancelledError):
            await task
        assert future.cancelled()


async def test_callbacks_after_the_first_and_removal_behave_as_usual() -> None:
    future: ResumingFuture[int] = ResumingFuture(loop=asyncio.get_running_loop())
    calls: list[str] = []
    first = lambda f: calls.append("first")  # noqa: E731
    second = lambda f: calls.append("second")  # noqa: E731
    future.add_done_callback(first)
    future.add_done_callback(second)
    assert future.remove_done_callback(first) == 1
    future.set_result(1)
    await asyncio.sleep(0)
    assert calls == ["second"]
    late: asyncio.Event = asyncio.Event()
    future.add_done_callback(lambda f: late.set())  # already done: scheduled at once
    await late.wait()
