"""The host side of a run, shared by every adapter: dispatch queued calls, settle them.

A run is a sequence of slices in one QuickJS context, wherever that context lives (this
process or a sandbox worker process): start the program, take the queued tool calls, start
them on the host as asyncio tasks, settle their promises in the next slice when some finish,
repeat until the top-level promise settles. An ``EngineChannel`` runs one slice and returns
its ``Step``; model-controlled data in a step is still JSON text and is decoded here.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import logging
import re
import sys
import types
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from codemodekit.errors import Diagnostic, ErrorCode, bounded_details, new_correlation_id
from codemodekit.limits import Limits
from codemodekit.sandbox._step import Step, ToolCall, decode_calls, decode_value
from codemodekit.sandbox._stepwise import stepwise
from codemodekit.sandbox.base import (
    JsonText,
    LogEntry,
    SandboxHost,
    SandboxOutcome,
    ToolCallRejected,
)

log = logging.getLogger("codemodekit.sandbox")

NEVER_SETTLES = (
    "the code awaited a promise that can never settle: no tool call is in flight and no "
    "JavaScript is left to run (a Promise whose resolve is never called?)"
)


class EngineChannel(Protocol):
    """One run's engine, wherever it runs. Each call runs one slice."""

    async def start(self) -> Step: ...

    async def settle(self, batch: str) -> Step: ...

    async def abandon(self, diagnostic: Diagnostic) -> Step: ...

    def stop(self) -> None:
        """The run is over early (cancelled, wall limit): stop any running slice now."""
        ...


def streams_logs(host: SandboxHost) -> bool:
    """Whether ``host`` takes console entries as they are written (``host.on_log``)."""
    return callable(getattr(host, "on_log", None))


class _LogStream:
    """Hands streamed console entries to ``host.on_log``, bounded again on this side (a
    worker process is untrusted): the prelude sends at most the log budget while the run
    goes and the retained rest at its end."""

    def __init__(self, on_log: Callable[[LogEntry], Any], limits: Limits) -> None:
        self._on_log = on_log
        self._entries = 2 * limits.log_entries + 4
        self._bytes = 2 * (2 * limits.log_bytes + 1024)
        self._failures = 0

    def deliver(self, entries: tuple[LogEntry, ...]) -> None:
        for entry in entries:
            self._entries -= 1
            self._bytes -= len(entry.message)
            if self._entries < 0 or self._bytes < 0:
                return
            try:
                self._on_log(entry)
            except Exception:
                self._failures += 1
                if self._failures == 1:
                    log.exception("on_log callback failed; later entries are still sent")


async def drive(
    channel: EngineChannel, host: SandboxHost, limits: Limits | None = None
) -> SandboxOutcome:
    """Run ``channel``'s program to its end with ``host`` serving its tool calls; when the
    host has ``on_log`` (and ``limits`` are given), console entries reach it as they come."""
    loop = asyncio.get_running_loop()
    on_log = getattr(host, "on_log", None)
    stream = _LogStream(on_log, limits) if callable(on_log) and limits is not None else None
    tasks: dict[asyncio.Future[Any], ToolCall] = {}
    finished: list[asyncio.Future[Any]] = []
    waker: list[asyncio.Future[None]] = []

    # Cheaper than asyncio.wait per slice: each call reports itself when it ends.
    def on_done(task: asyncio.Future[Any]) -> None:
        finished.append(task)
        if waker and not waker[0].done():
            waker[0].set_result(None)

    rejected: dict[int, Diagnostic] = {}
    try:
        step = await channel.start()
        compile_ms = step.compile_ms
        while not step.done:
            if stream is not None and step.stream:
                stream.deliver(step.stream)
            calls = decode_calls(step.call_lines)
            if len(calls) == 1 and not tasks and calls[0].problem is None:
                # The sequential case: the one call in flight is awaited right here.
                step = await channel.settle(await _awaited_here(host, calls[0], rejected))
                continue
            for call in calls:
                task: asyncio.Future[Any]
                try:
                    if call.problem is not None:
                        raise _undecodable(call)
                    task = _start(loop, host.call_tool(call.source, call.tool, call.arguments))
                except Exception as exc:  # a host that fails before awaiting
                    task = loop.create_future()
                    task.set_exception(exc)
                tasks[task] = call
                if task.done():
                    finished.append(task)  # answered at once: settled in the next slice
                else:
                    task.add_done_callback(on_done)
            if not tasks:
                diagnostic = Diagnostic(ErrorCode.UNCAUGHT_EXCEPTION, NEVER_SETTLES)
                step = await channel.abandon(diagnostic)
                break
            if not finished:
                waker[:] = [loop.create_future()]
                await waker[0]
            parts = [_task_settlement(done, tasks.pop(done), rejected) for done in finished]
            finished.clear()
            step = await channel.settle("\n".join(parts))
    except BaseException:
        channel.stop()
        raise
    finally:
        for pending in tasks:
            pending.remove_done_callback(on_done)
            pending.cancel()
            # Retrieve the outcome later so a late failure is never reported as lost.
            pending.add_done_callback(_consume)
    if stream is not None and step.stream:
        stream.deliver(step.stream)
    step.compile_ms = compile_ms
    return _outcome(decode_value(step), rejected)


def _start(loop: asyncio.AbstractEventLoop, call: Awaitable[Any]) -> asyncio.Future[Any]:
    """Start a tool call. From Python 3.12 it runs up to its first suspension at once (an
    eager task): a call that answers without waiting (a policy decision and an in-process
    tool) then costs no turn of the event loop. Earlier versions have no safe way to run a
    coroutine eagerly (``asyncio.timeout`` inside it would bind to the caller's task)."""
    if sys.version_info >= (3, 12) and isinstance(call, types.CoroutineType):
        return asyncio.Task(call, loop=loop, eager_start=True)
    return asyncio.ensure_future(call)


def _undecodable(call: ToolCall) -> ToolCallRejected:
    """A call whose arguments the host cannot decode: rejected without reaching the host."""
    from codemodekit.catalog.catalog import tool_address

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


async def _awaited_here(host: SandboxHost, call: ToolCall, rejected: dict[int, Diagnostic]) -> str:
    """Perform ``call`` in this task (no task of its own, no turn of the event loop when it
    answers at once) but in a context of its own, as a task would; its settle line."""
    try:
        work = host.call_tool(call.source, call.tool, call.arguments)
        if isinstance(work, types.CoroutineType):
            context = contextvars.copy_context()
            try:
                awaited = context.run(work.send, None)
            except StopIteration as stop:  # answered without waiting: no stepping needed
                value = stop.value
            else:
                value = await stepwise(work, context=context, awaited=awaited)
        else:
            value = await work
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the run itself is being stopped
        return _settlement(call, rejected, error=exc)
    except Exception as exc:
        return _settlement(call, rejected, error=exc)
    return _settlement(call, rejected, value=value)


def _task_settlement(
    task: asyncio.Future[Any], call: ToolCall, rejected: dict[int, Diagnostic]
) -> str:
    try:
        value = task.result()
    except (Exception, asyncio.CancelledError) as exc:
        return _settlement(call, rejected, error=exc)
    return _settlement(call, rejected, value=value)


def _settlement(
    call: ToolCall,
    rejected: dict[int, Diagnostic],
    *,
    value: Any = None,
    error: BaseException | None = None,
) -> str:
    """One ``[id, 1, value]`` / ``[id, 0, error]`` line of a settle batch, as JSON text."""
    if error is None and type(value) is JsonText:
        return f"[{call.call_id},1,{value}]"
    if isinstance(error, ToolCallRejected):
        diagnostic = error.diagnostic
    elif isinstance(error, asyncio.CancelledError):
        diagnostic = Diagnostic(ErrorCode.TOOL_INTERNAL_ERROR, "the tool call was cancelled")
    elif error is not None:
        correlation_id = new_correlation_id()
        log.error(
            "tool call %s.%s raised (correlation %s)",
            call.source,
            call.tool,
            correlation_id,
            exc_info=error,
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
        from codemodekit.catalog.catalog import tool_address

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
        **caught_detail(diagnostic),
    }
    return f"[{call.call_id},0,{json.dumps(info)}]"


def caught_detail(diagnostic: Diagnostic) -> dict[str, Any]:
    """What code that catches a failed call sees beyond the message: ``upstreamCode`` (a
    number when the upstream code is an integer: an HTTP status, a JSON-RPC code) and the
    diagnostic's bounded ``details`` (plus its ``correlationId``)."""
    details = dict(bounded_details(dict(diagnostic.details)))
    upstream = details.pop("upstream_code", None)
    if diagnostic.correlation_id:
        details["correlationId"] = diagnostic.correlation_id
    out: dict[str, Any] = {"details": details}
    if isinstance(upstream, str) and re.fullmatch(r"-?\d{1,15}", upstream.strip()):
        out["upstreamCode"] = int(upstream)
    elif upstream is not None:
        out["upstreamCode"] = upstream
    return out


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
        compile_ms=step.compile_ms,
        warnings=step.warnings,
    )
