"""The pipe protocol between the server and a sandbox worker process.

A frame is a 4-byte big-endian length, one kind byte, then the payload. Host to worker:
``S`` start a run (JSON: limits and the TypeScript source or a compiled program), ``T``
settle calls (the batch text), ``W`` the same, then poll for the next answer rather than
sleep (the server has a CPU to spare, ADR 0042; a start request says so with ``"spin"``),
``A`` abandon (JSON diagnostic), ``X`` drop the current run, ``Q`` quit, ``R`` rehearse
(at a quiet moment, before any run), ``N`` a run is coming: poll for its start request
(ADR 0043; harmless at any other moment). ``R`` and ``N`` may carry a run's settings
(JSON: limits and whether logs stream): the worker makes the engine of a run with those
settings ahead of its request, and a request with other settings gets an engine of its
own (ADR 0046). Worker to host: ``H`` hello (JSON: pid, CPU seconds), ``J`` the program
it compiled (only when asked, before any model code ran), ``P`` a step, ``C`` a step that
only queues calls. A start request is answered by a ``P`` step whose header carries ``a``,
the worker's CPU seconds when it read the request: the run is charged from there. Whether
the worker read it at all, the kernel says: a worker that dies with the request unread
resets the connection (``ECONNRESET``), one that read it closes it.

A ``P`` step is ``header`` (JSON, one line), the returned value's JSON text (or an empty
line), then one queued call per line. Most steps only queue calls (one per awaited tool
call): those are ``C``, the worker's CPU seconds as an 8-byte big-endian double, then the
queued calls, one per line, with no header to encode or parse. JSON text never contains a
raw line break, so the model's values cross unescaped and are parsed once, by the host. The
host treats every frame as untrusted: the worker runs hostile code, so a malformed frame
ends the run, never the host.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from codemodekit.errors import Diagnostic, ErrorCode, Location
from codemodekit.sandbox._engine import MAX_HINT_CHARS, MAX_HINTS
from codemodekit.sandbox._step import Step
from codemodekit.sandbox.base import LogEntry

MAX_FRAME_BYTES = 256 * 1024 * 1024
"""Far above any bounded payload (results, logs, batches): a larger frame is a protocol fault."""

_LEVELS = frozenset({"log", "info", "warn", "error", "debug", "truncated"})


class ProtocolFault(Exception):
    """A worker sent something the protocol does not allow."""


def frame(kind: bytes, payload: bytes) -> bytes:
    return (len(payload) + 1).to_bytes(4, "big") + kind + payload


_CPU = struct.Struct(">d")


def encode_step(
    step: Step, cpu_s: float, rss: int = 0, taken_s: float | None = None
) -> tuple[bytes, bytes]:
    """The frame kind and payload of ``step``; ``taken_s`` only in a start request's answer."""
    if not step.done and not step.stream and not step.compile_ms and taken_s is None:
        calls = "\n".join(step.call_lines).encode("utf-8", "surrogatepass")
        return b"C", _CPU.pack(cpu_s) + calls
    # A last step, or one with console lines: the header says what there is.
    header: dict[str, Any] = {"u": cpu_s}
    if step.done:
        header.update(
            r=rss,
            d=True,
            o=step.ok,
            t=step.tool_call_id,
            m=step.compute_ms,
            g=step.diagnostic.to_json() if step.diagnostic is not None else None,
            l=[[entry.level, entry.message] for entry in step.logs],
            w=list(step.warnings),
        )
    if step.compile_ms:
        header["k"] = step.compile_ms
    if taken_s is not None:
        header["a"] = taken_s
    if step.stream:
        header["s"] = [[entry.level, entry.message] for entry in step.stream]
    lines = [json.dumps(header), step.value_json or "", *step.call_lines]
    return b"P", "\n".join(lines).encode("utf-8", "surrogatepass")


def decode_calls_step(payload: bytes) -> tuple[Step, float]:
    """A ``C`` step (calls only) and the worker's CPU seconds when it sent it."""
    try:
        (cpu_s,) = _CPU.unpack_from(payload)
        text = payload[8:].decode("utf-8", "surrogatepass")
    except (ValueError, struct.error) as exc:
        raise ProtocolFault(f"malformed step: {exc!r:.200}") from None
    if cpu_s != cpu_s or cpu_s < 0:  # NaN or negative: a worker's clock never says that
        raise ProtocolFault("malformed step: bad CPU time")
    return Step(call_lines=text.split("\n") if text else []), cpu_s


def decode_step(payload: bytes) -> tuple[Step, float, int, float | None]:
    """A ``P`` step from a worker, the worker's CPU seconds when it sent it, (on the last
    step of a run) its resident size in bytes, and (in the answer to a start request) its
    CPU seconds when it read that request."""
    try:
        text = payload.decode("utf-8", "surrogatepass")
        head, value, *calls = text.split("\n")
        header = json.loads(head)
        if not isinstance(header, dict):
            raise ValueError("the step's header is not an object")
        step = Step(
            call_lines=calls,
            done=bool(header.get("d", False)),
            ok=bool(header.get("o", False)),
            value_json=value or None,
            tool_call_id=_optional_int(header.get("t")),
            compute_ms=float(header.get("m", 0.0)),
            compile_ms=float(header.get("k", 0.0)),
            diagnostic=decode_diagnostic(header["g"]) if header.get("g") is not None else None,
            logs=tuple(_log(item) for item in header.get("l") or ()),
            stream=tuple(_log(item) for item in header.get("s") or ()),
            warnings=_warnings(header.get("w") or ()),
        )
        taken = header.get("a")
        if taken is not None and type(taken) not in (int, float):
            raise ValueError("the time the run was taken is not a number")
        taken_s = None if taken is None else float(taken)
        return step, float(header["u"]), int(header.get("r", 0)), taken_s
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
        raise ProtocolFault(f"malformed step: {exc!r:.200}") from None


def _warnings(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list | tuple) or not all(isinstance(w, str) for w in items):
        raise ValueError("bad warnings")
    return tuple(w[:MAX_HINT_CHARS] for w in items[:MAX_HINTS])


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _log(item: Any) -> LogEntry:
    level, message = item
    if level not in _LEVELS or not isinstance(message, str):
        raise ValueError("bad log entry")
    return LogEntry(level, message)


def decode_diagnostic(data: Any) -> Diagnostic:
    location = data.get("location")
    details = data.get("details") or {}
    return Diagnostic(
        ErrorCode(data["code"]),
        str(data["message"]),
        location=Location(int(location["line"]), int(location["column"])) if location else None,
        tool=_optional_str(data.get("tool")),
        source=_optional_str(data.get("source")),
        correlation_id=_optional_str(data.get("correlation_id")),
        details=tuple((str(k), v) for k, v in dict(details).items()),
    )


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
