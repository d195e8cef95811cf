"""The audit trail: one JSON line per tool call and one per run, to a file or stdout.

A tool-call record says who (``caller``, when the transport has one), what (``tool``
address), why it was allowed or not (``decision`` and the policy ``rule``), how it ended
(``outcome`` code, ``duration_ms``, byte counts) and a hash of the arguments, never the
arguments themselves. The run record ties a run's calls together by ``execution_id``.

The hash is SHA-256 of the arguments' canonical JSON (sorted keys, no spaces), so equal
arguments hash equally across runs and replicas. Low-entropy arguments can be guessed
back from a plain hash; set a key (``hash_key``) to make it an HMAC only holders of the
key can test guesses against.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import sys
import threading
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from codemodekit.errors import MAX_NAME_CHARS, clip
from codemodekit.observe import BaseObserver, RunStart, ToolCallEvent, run_outcome

if TYPE_CHECKING:
    from codemodekit.run_result import RunResult

AUDIT_VERSION = 1


def _now(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")


# JSON escapes C0 controls itself; these it leaves raw with ensure_ascii=False: DEL, every
# C1 control (U+0085 NEL among them), the Unicode line and paragraph separators (which
# str.splitlines, JavaScript and many log shippers treat as line breaks) and lone
# surrogates (which cannot be written as UTF-8 at all).
_RAW = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _name(text: str | None) -> str | None:
    return None if text is None else clip(text, MAX_NAME_CHARS)


def audit_line(record: dict[str, Any]) -> str:
    """One record as one line: no character any common reader splits lines on, no control
    character, whatever model-chosen text (tool names) it holds."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    # Outside strings JSON has none of these characters, so escaping in place stays JSON.
    return _RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


class AuditSink(BaseObserver):
    """A ``RunObserver`` writing JSON lines to ``path`` (appended) or, for ``"-"``, stdout.

    Each record is written and flushed at once, one ``write`` per line, so concurrent
    writers on one file (replicas sharing a volume) do not interleave within a line.
    """

    def __init__(
        self, path: str | os.PathLike[str] = "-", *, hash_key: bytes | None = None
    ) -> None:
        self.path = os.fspath(path)
        self._key = hash_key or None
        self._lock = threading.Lock()
        self._own: IO[str] | None = None
        if self.path == "-":
            self._stream: IO[str] = sys.stdout
        else:
            self._own = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
            self._stream = self._own

    def __repr__(self) -> str:
        return f"AuditSink({self.path!r})"

    def digest(self, value: Any) -> str:
        """``sha256:<hex>`` (or ``hmac-sha256:<hex>`` with a key) of ``value``'s canonical JSON."""
        try:
            data = json.dumps(
                value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode("utf-8")
        except (TypeError, ValueError, RecursionError):
            data = repr(type(value)).encode()
        if self._key is not None:
            return "hmac-sha256:" + hmac.new(self._key, data, hashlib.sha256).hexdigest()
        return "sha256:" + hashlib.sha256(data).hexdigest()

    def _write(self, record: dict[str, Any]) -> None:
        line = audit_line(record)
        with self._lock:
            self._stream.write(line)
            self._stream.flush()

    def on_tool_call(self, call: ToolCallEvent) -> None:
        self._write(
            {
                "v": AUDIT_VERSION,
                "type": "tool_call",
                "time": _now(call.started_at),
                "execution_id": call.execution_id,
                "call_id": call.call_id,
                "correlation_id": call.correlation_id,
                "caller": _name(call.caller),
                "tool": _name(call.address),
                "source": _name(call.source),
                "decision": call.decision,
                "rule": call.rule,
                "outcome": call.outcome,
                "duration_ms": round(call.duration_ms, 3),
                "queue_ms": round(call.queue_ms, 3),
                "request_bytes": call.request_bytes,
                "response_bytes": call.response_bytes,
                "arguments_hash": self.digest(call.arguments),
            }
        )

    def on_run_end(self, run: RunStart, result: RunResult | None) -> None:
        diagnostic = result.diagnostic if result is not None else None
        record: dict[str, Any] = {
            "v": AUDIT_VERSION,
            "type": "run",
            "time": _now(run.started_at),
            "execution_id": run.execution_id,
            "correlation_id": diagnostic.correlation_id if diagnostic is not None else None,
            "caller": _name(run.caller),
            "outcome": run_outcome(result),
            "catalog_revision": run.catalog_revision,
            "code_hash": self.digest(run.code),
            "code_bytes": len(run.code.encode("utf-8", errors="replace")),
        }
        if result is not None:
            record.update(
                tool_calls=result.tool_calls,
                duration_ms=round(result.duration_ms, 3),
                compile_ms=round(result.compile_ms, 3),
                compute_ms=round(result.compute_ms, 3),
                tool_ms=round(result.tool_ms, 3),
                queue_ms=round(result.queue_ms, 3),
            )
        self._write(record)

    def close(self) -> None:
        """Close the file; lines it could not write were logged as they failed, and a
        failure to flush them once more is logged too, never raised (it runs as the
        server exits)."""
        if self._own is not None:
            with self._lock:
                try:
                    self._own.close()
                except OSError as exc:
                    logging.getLogger("codemodekit.observe").warning(
                        "the audit file %s could not be flushed as it closed: %s", self.path, exc
                    )
            self._own = None


__all__ = ["AUDIT_VERSION", "AuditSink", "audit_line"]
