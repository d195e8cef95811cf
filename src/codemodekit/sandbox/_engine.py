"""One QuickJS context for one run: synchronous, driven slice by slice by ``QuickJsSandbox``.

Every entry into JavaScript goes through the prelude's port (a function handle that is never
stored on ``globalThis``) or ``execute_pending_job``, each under the remaining compute
budget. Values cross as JSON strings only. The engine never calls the host: it returns the
queued tool calls and takes their results in the next slice.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import time
from typing import Any

import quickjs

from codemodekit.compiler.location import user_location
from codemodekit.errors import Diagnostic, ErrorCode, Location, new_correlation_id, well_formed
from codemodekit.limits import Limits
from codemodekit.sandbox._step import Step, loads
from codemodekit.sandbox._warm import prelude_source as prelude_source
from codemodekit.sandbox._warm import prepare_context
from codemodekit.sandbox._watchdog import WATCHDOG, Slice, Watchdog
from codemodekit.sandbox.base import CompiledProgram, LogEntry
from codemodekit.sandbox.hints import missing_global_hint

MAX_CALLS_PER_SLICE = 1024
"""Queued tool calls handed to the host per slice; the rest wait in the sandbox."""
MESSAGE_CHARS = 2000
"""Longest message of a sandbox diagnostic (the user's error text is cut beyond this)."""
HOST_BUDGET_S = 0.25
"""Compute allowed for host-side bookkeeping after the user's budget ran out (log read-out)."""
PRELUDE_BUDGET_S = 2.0
"""Time allowed to install the prelude's modules in a new context: the host's own code, which
must not fail a run because the machine is busy (in-process, the watchdog's clock is wall time)."""
HEADROOM_BYTES = 4 * 1024 * 1024
"""Extra heap granted after an out-of-memory failure, only to read the logs out."""
GRACE_S = 0.1
"""Compute time past a user slice's remaining budget before the watchdog trips it (the
prelude's installation has ``PRELUDE_BUDGET_S`` and no grace of its own)."""
STACK_CHARS = 16_384
STACK_FRAMES = 64
"""How much of an error's stack is searched for the user's location (the stack is model-
controlled text: a thrown object may carry a stack of millions of lines)."""

log = logging.getLogger("codemodekit.sandbox")

_FRAME = re.compile(r"^\s*at (?:(?P<name>.*?) \()?<input>:(?P<line>\d+):(?P<column>\d+)\)?\s*$")
_LEVELS = frozenset({"log", "info", "warn", "error", "debug", "truncated", "hint"})
HINT = "hint"
MAX_HINTS = 8
MAX_HINT_CHARS = 500
"""Entries of this level are the run's warnings (prelude hints), not console output."""


STARTED = '{"k":"started"}'
_RUNNING = '{"s":0}'
"""The drain packet's head while the program runs and no console line is to be streamed."""
"""The port's answer to ``start`` when the program is running (see ``prelude.js``)."""

JS_INT_MAX = 2**31 - 1


def _js_int(limit: int) -> int:
    """A limit as the prelude sees it: QuickJS bit operations are int32, and no run gets
    anywhere near 2 GiB of logs or result anyway (the host keeps checking the real limit)."""
    return min(limit, JS_INT_MAX)


class EngineFault(Exception):
    """A run-ending failure found while JavaScript ran (limit hit, engine refusal)."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def _bounded(message: str) -> str:
    message = message.strip()
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 1] + "…"
    return message


class Engine:
    """A fresh context with the prelude installed; disposed by ``close``."""

    def __init__(
        self,
        limits: Limits,
        *,
        stack_cap: int,
        prepared: tuple[Any, Any] | None = None,
        watchdog: Watchdog = WATCHDOG,
        stream_logs: bool = False,
    ) -> None:
        """``watchdog`` also sets the clock compute time is measured on: wall time in the
        server's process (whose CPU time other threads share), the worker's own CPU time
        in a sandbox worker process (see ``_worker.py``). ``stream_logs``: each step carries
        the console entries written since the previous one (``Step.stream``)."""
        self.limits = limits
        self._stream_logs = stream_logs
        self._streamed_last: tuple[LogEntry, ...] = ()
        """Entries the last slice's drain handed over, sent with the final step."""
        self._watchdog = watchdog
        self._clock = watchdog.clock
        self._cpu_clock = self._clock is time.thread_time or self._clock is time.process_time
        """The compute clock is this process's (or its one thread's) CPU clock."""
        self._budget = PRELUDE_BUDGET_S
        self._used = 0.0
        self._program: CompiledProgram | None = None
        self._ctx: Any = None
        self._port: Any = None
        self._slice: Slice | None = None
        self._interrupted = False
        self._heap_limit = 0  # 0: none yet (the prelude runs before the limits apply)
        self._grace_s = 0.0  # the user's grace applies to the user's slices only
        self.clock_at_exit = 0.0
        """The compute clock when the last slice ended (a worker's CPU time: a worker sends
        it with the step rather than read its clock, a system call, once more)."""
        try:
            # The prelude is the host's code: it runs before the limits apply and its time
            # is not the user's compute.
            self._ctx, self._port = prepared or prepare_context(prelude_source())
            settings = json.dumps(
                {
                    "logEntries": _js_int(limits.log_entries),
                    "logBytes": _js_int(limits.log_bytes),
                    "stream": stream_logs,
                    # Math.random's seed, drawn for this run alone (ADR 0035).
                    "seed": list(struct.unpack("4I", os.urandom(16))),
                }
            )
            if self._enter(self._port, "init", settings) != "":
                raise RuntimeError("the sandbox prelude refused its settings")
        except BaseException:
            self.close()
            raise
        self._ctx.set_memory_limit(limits.memory_bytes)
        self._heap_limit = limits.memory_bytes
        self._ctx.set_max_stack_size(min(limits.stack_bytes, stack_cap))
        self._budget = limits.compute_time_ms / 1000
        self._used = 0.0
        self._grace_s = GRACE_S

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._ctx is None

    def close(self) -> None:
        """Drop every handle so the runtime is freed now (refcounting, not the GC)."""
        self._port = None
        self._ctx = None

    def interrupt(self) -> None:
        """End the running slice soon (from any thread): its run is over."""
        self._interrupted = True
        running = self._slice
        if running is not None:
            self._watchdog.trip(running)

    # -- entering JavaScript --------------------------------------------------------------
    def _enter(self, fn: Any, *args: Any) -> Any:
        remaining = self._budget - self._used
        if remaining <= 0:
            raise EngineFault(self._compute_limit())
        self._ctx.set_time_limit(remaining)
        # Operators and most natives never poll for the time limit: the watchdog ends a
        # slice that overruns its budget from outside (see _watchdog.py).
        watchdog, clock = self._watchdog, self._clock
        # In a worker process the compute clock is this process's CPU clock: read it once
        # at each end of the slice (each read is a system call).
        cpu_clock = self._cpu_clock
        started = clock()
        cpu_started = started if cpu_clock else time.process_time()
        running = watchdog.enter(self._ctx, started + remaining + self._grace_s, self._heap_limit)
        self._slice = running
        if self._interrupted:
            watchdog.trip(running)
        failure: quickjs.JSException | None = None
        try:
            result = fn(*args)
        except quickjs.JSException as exc:
            failure = exc
        finally:
            ended = self.clock_at_exit = clock()
            self._used += ended - started
            self._slice = None
            tripped = watchdog.leave(running)
        # The binding's own time limit is on this process's CPU clock, which in the server's
        # process is not ``self._clock``: once that limit is spent the engine may have
        # interrupted a promise job, which an async function turns into a rejection (or a
        # promise that never settles) instead of an error that reaches us. Either way the
        # run's state is broken by the limit, so the run ends at its compute limit.
        cpu_ended = ended if cpu_clock else time.process_time()
        if not tripped and cpu_ended - cpu_started >= remaining:
            tripped = True
        if tripped:
            # Whatever the slice reported (out of memory, a caught failure), it ran past its
            # budget. Restore the heap limit for the host-side log read-out.
            failure = None  # no frame/traceback cycle may keep the context alive
            self._ctx.set_memory_limit(self.limits.memory_bytes)
            self._used = max(self._used, self._budget)
            raise EngineFault(self._compute_limit())
        if failure is not None:
            diagnostic = self._classify(failure)
            failure = None
            raise EngineFault(diagnostic)
        return result

    def _call(self, command: str, argument: Any = None) -> str:
        result = self._enter(self._port, command, argument)
        if not isinstance(result, str):
            raise EngineFault(self._internal("the sandbox port returned a non-string"))
        return result

    def _run_slice(self, command: str | None, argument: Any, expected: str) -> tuple[Any, Any]:
        """One slice in one entry: ``command`` (unless ``None``), every pending job, then
        ``drain``. Each entry costs the time limit, the watchdog and the accounting, and a
        settled tool call resolves a chain of promise jobs; the watchdog's deadline still
        covers the whole slice. Returns ``(answer, drained)``; ``drained`` is ``None`` when
        ``command`` did not answer ``expected``."""
        port, execute = self._port, self._ctx.execute_pending_job

        def run_slice() -> tuple[Any, Any]:
            if command is not None:
                answer = port(command, argument)
                if answer != expected:
                    return answer, None
            while execute():
                pass
            return expected, port("drain", MAX_CALLS_PER_SLICE)

        result: tuple[Any, Any] = self._enter(run_slice)
        return result

    # -- slices ---------------------------------------------------------------------------
    def start(self, program: CompiledProgram) -> Step:
        self._program = program
        javascript = program.javascript
        try:
            answer, drained = self._run_slice("start", javascript, STARTED)
            if drained is None:
                started = loads(answer) if isinstance(answer, str) else None
                if isinstance(started, dict) and started.get("k") == "syntax":
                    return self._finish_with(self._syntax_error(started))
                raise EngineFault(self._internal("the program could not be started"))
            return self._advance(drained)
        except EngineFault as fault:
            return self._finish_with(fault.diagnostic)

    def settle(self, batch_json: str) -> Step:
        try:
            answer, drained = self._run_slice("settle", batch_json, "")
            if drained is None:
                # The port failed while parsing or settling (a result too big for the heap).
                raise EngineFault(self._port_fault(answer, "settle"))
            return self._advance(drained)
        except EngineFault as fault:
            return self._finish_with(fault.diagnostic)

    def abandon(self, diagnostic: Diagnostic) -> Step:
        """End the run from the host side (a promise that can never settle)."""
        return self._finish_with(diagnostic)

    def _advance(self, drained: Any) -> Step:
        if not isinstance(drained, str):
            raise EngineFault(self._internal("the sandbox port returned a non-string"))
        head, *lines = drained.split("\n")
        if head == _RUNNING:  # most slices: the program goes on, no console lines
            return Step(call_lines=lines)
        packet = loads(head)
        if not isinstance(packet, dict) or "s" not in packet:
            raise EngineFault(self._port_fault(packet, "drain"))
        raw_stream = packet.get("l")
        stream = () if raw_stream is None else self._checked_stream(raw_stream)
        if packet["s"] != 0:
            # The run is over; calls queued in its last slice are never dispatched.
            self._streamed_last = stream
            return self._finish()
        return Step(call_lines=lines, stream=stream)

    # -- the end of a run -----------------------------------------------------------------
    def _finish(self) -> Step:
        try:
            raw = self._call("result", _js_int(self.limits.final_result_bytes))
        except EngineFault as fault:
            return self._finish_with(fault.diagnostic)
        step = Step(done=True)
        if raw.startswith("J"):
            # The returned value's JSON text, made by JSON.stringify inside the sandbox.
            size = len(raw.encode("utf-8", "surrogatepass")) - 1
            if size > self.limits.final_result_bytes:
                step.diagnostic = self._too_large(f"{size} bytes")
            else:
                step.value_json = raw[1:]
                step.ok = True
            return self._with_logs(step)
        report = loads(raw)
        kind = report.get("k")
        if kind == "undefined":
            step.ok = True
        elif kind == "toolarge":
            step.diagnostic = self._too_large(f"at least {report['units']} bytes")
        elif kind == "unserializable":
            step.diagnostic = Diagnostic(
                ErrorCode.RESULT_NOT_SERIALIZABLE,
                _bounded(f"the returned value is not JSON-serializable: {report.get('why', '')}"),
            )
        elif kind == "tool":
            step.diagnostic = self._tool_failure(report)
            if report.get("id"):
                step.tool_call_id = int(report["id"])
        elif kind in ("error", "value"):
            step.diagnostic = self._uncaught(report)
        else:
            step.diagnostic = self._port_fault(report, "result")
        return self._with_logs(step)

    def _finish_with(self, diagnostic: Diagnostic) -> Step:
        return self._with_logs(Step(done=True, diagnostic=diagnostic))

    def _with_logs(self, step: Step) -> Step:
        step.compute_ms = min(self._used, self._budget) * 1000
        entries, stream = self._read_logs()
        step.logs = tuple(e for e in entries if e.level != HINT)
        step.warnings = tuple(e.message for e in entries if e.level == HINT)
        step.stream = self._streamed_last + stream
        self.close()
        return step

    def _checked_stream(self, raw: Any) -> tuple[LogEntry, ...]:
        """Streamed entries, checked again on this side like the final logs."""
        # A drain may add a marker for dropped entries and one for a held-back stream.
        return tuple(e for e in self._checked_logs(raw, markers=2) if e.level != HINT)

    def _read_logs(self) -> tuple[tuple[LogEntry, ...], tuple[LogEntry, ...]]:
        """The run's logs (hints first) and, when streaming, the entries not yet streamed."""
        if self._ctx is None or self._port is None:
            return (), ()
        # The logs were bounded as they were written; reading them out is the host's work,
        # so it gets its own small budget and some heap headroom after an out-of-memory.
        self._heap_limit = self.limits.memory_bytes + HEADROOM_BYTES
        self._ctx.set_memory_limit(self._heap_limit)
        self._budget = self._used + HOST_BUDGET_S
        try:
            text, _, rest = self._call("logs").partition("\n")
            raw = loads(text)
            stream = self._checked_stream(loads(rest)) if self._stream_logs else ()
        except (EngineFault, ValueError):
            lost = LogEntry("truncated", "… the logs could not be read after the failure …")
            return (lost,), ((lost,) if self._stream_logs else ())
        return self._checked_logs(raw), stream

    def _checked_logs(self, raw: Any, markers: int = 0) -> tuple[LogEntry, ...]:
        # The prelude bounds the logs; the host checks again rather than trust the sandbox.
        entries: list[LogEntry] = []
        hints = 0  # hints come first and are bounded on their own, not by the log limits
        budget = 2 * self.limits.log_bytes + 1024  # room for the marker and cut suffixes
        for item in raw if isinstance(raw, list) else ():
            if len(entries) - hints >= self.limits.log_entries + markers:
                break
            if not (
                isinstance(item, list)
                and len(item) == 2
                and item[0] in _LEVELS
                and isinstance(item[1], str)
            ):
                continue
            message = well_formed(item[1])
            if item[0] == HINT:
                if hints < MAX_HINTS:
                    hints += 1
                    entries.append(LogEntry(HINT, message[:MAX_HINT_CHARS]))
                continue
            budget -= len(message.encode("utf-8"))
            if budget < 0:
                break
            entries.append(LogEntry(item[0], message))
        return tuple(entries)

    # -- diagnostics ----------------------------------------------------------------------
    def _location(self, stack: str) -> Location | None:
        """The first frame of the stack that lies in the user's code, in the user's terms."""
        if self._program is None:
            return None
        # The stack is the user's to write (``e.stack = "…"``): read a bounded head only.
        for line in stack[:STACK_CHARS].splitlines()[:STACK_FRAMES]:
            match = _FRAME.match(line)
            if match is None or (match.group("name") or "").startswith("codemode$"):
                continue
            location = user_location(
                self._program, int(match.group("line")), int(match.group("column"))
            )
            if location is not None:
                return location
        return None

    def _compute_limit(self) -> Diagnostic:
        return compute_limit(self.limits)

    def _memory_limit(self) -> Diagnostic:
        return Diagnostic(
            ErrorCode.MEMORY_LIMIT,
            f"the code used more than {self.limits.memory_bytes} bytes of memory (memory_bytes)",
        )

    def _too_large(self, size: str) -> Diagnostic:
        return Diagnostic(
            ErrorCode.RESULT_TOO_LARGE,
            f"the returned value is {size} as JSON; the limit is "
            f"{self.limits.final_result_bytes} bytes (final_result_bytes). Return a smaller "
            "summary instead",
        )

    def _internal(self, why: str) -> Diagnostic:
        return internal_failure(why)

    def _classify(self, exc: quickjs.JSException) -> Diagnostic:
        text = str(exc)
        first, _, stack = text.partition("\n")
        if "interrupted" in first and first.startswith("InternalError"):
            return self._compute_limit()
        if isinstance(exc, quickjs.StackOverflow):
            return Diagnostic(
                ErrorCode.UNCAUGHT_EXCEPTION,
                _bounded(first) + " (stack_bytes)",
                location=self._location(stack),
            )
        if "out of memory" in first or first in ("null", "") or "Failed obtaining" in first:
            # After an out-of-memory the engine may not even manage to build the message.
            return self._memory_limit()
        return Diagnostic(
            ErrorCode.UNCAUGHT_EXCEPTION,
            _bounded(missing_global_hint(first)),
            location=self._location(stack),
        )

    def _syntax_error(self, report: dict[str, Any]) -> Diagnostic:
        location = None
        match = re.search(r"<input>:(\d+):(\d+)", report.get("stack") or "")
        if match and self._program is not None:
            line, column = int(match.group(1)), int(match.group(2))
            location = user_location(self._program, line, column)
            if location is None and line > self._program.line_offset:
                # Found at the wrapper's closing line: it belongs to the end of the user's code.
                last = self._program.source.count("\n") + 1
                location = Location(last, 1)
        return Diagnostic(
            ErrorCode.COMPILE_ERROR,
            _bounded("SyntaxError: " + str(report.get("message", ""))),
            location=location,
        )

    def _port_fault(self, answer: Any, command: str) -> Diagnostic:
        """A port command failed inside JavaScript: out of memory, or a bug of ours."""
        if isinstance(answer, str):
            try:
                answer = json.loads(answer)
            except ValueError:
                answer = None
        if (isinstance(answer, dict) and answer.get("oom")) or self._heap_full():
            return self._memory_limit()
        return self._internal(f"the sandbox port failed in {command!r}: {answer!r:.200}")

    def _heap_full(self) -> bool:
        """Whether the heap is (nearly) at its limit: an out-of-memory may hide behind a
        ``null`` exception, since the engine cannot always allocate the error object."""
        try:
            usage = self._ctx.memory()
        except Exception:  # pragma: no cover - the binding does not raise here
            return False
        return bool(usage.get("malloc_size", 0) >= 0.9 * self.limits.memory_bytes)

    def _uncaught(self, report: dict[str, Any]) -> Diagnostic:
        if report["k"] == "value":
            if report.get("text") == "null":
                # When the heap is exhausted by many small allocations QuickJS cannot even
                # allocate its InternalError and throws null instead.
                return Diagnostic(
                    ErrorCode.MEMORY_LIMIT,
                    self._memory_limit().message
                    + " (the engine reported an uncaught null; if the code threw null itself, "
                    "throw an Error instead)",
                )
            message = "Uncaught " + str(report.get("text", ""))
            return Diagnostic(ErrorCode.UNCAUGHT_EXCEPTION, _bounded(message))
        name = str(report.get("name") or "")
        message = str(report.get("message") or "")
        if first_line_is_oom(name, message):
            return self._memory_limit()
        text = f"{name}: {message}" if name and message else (name or message or "Error")
        return Diagnostic(
            ErrorCode.UNCAUGHT_EXCEPTION,
            _bounded(missing_global_hint(text)),
            location=self._location(str(report.get("stack") or "")),
        )

    def _tool_failure(self, report: dict[str, Any]) -> Diagnostic:
        try:
            error_code = ErrorCode(str(report.get("code")))
        except ValueError:
            error_code = ErrorCode.TOOL_ERROR
        return Diagnostic(
            error_code,
            _bounded(str(report.get("message", ""))),
            location=self._location(str(report.get("site") or "")),
            tool=report.get("tool"),
            source=report.get("source"),
        )


def compute_limit(limits: Limits) -> Diagnostic:
    return Diagnostic(
        ErrorCode.COMPUTE_LIMIT,
        f"the code ran for more than {limits.compute_time_ms} ms of compute time "
        "(compute_time_ms); time spent awaiting tools is not counted",
    )


def internal_failure(why: str) -> Diagnostic:
    """A defect of ours: a safe message for the model, the reason in the host log."""
    correlation_id = new_correlation_id()
    log.error("sandbox failure (correlation %s): %s", correlation_id, why)
    return Diagnostic(
        ErrorCode.INTERNAL_ERROR,
        f"the sandbox failed unexpectedly (correlation id {correlation_id})",
        correlation_id=correlation_id,
    )


def first_line_is_oom(name: str, message: str) -> bool:
    """An uncaught engine out-of-memory error: the heap limit, not a user error."""
    return name == "InternalError" and message == "out of memory"
