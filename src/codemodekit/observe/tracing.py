"""OpenTelemetry spans for runs, compiles, tool calls and upstream HTTP calls.

``TracingObserver`` is a ``RunObserver`` emitting, through the OpenTelemetry API:

- ``codemode.run`` (execution id, outcome code, tool calls, catalog revision), the child
  of the incoming MCP request's span when the client sent W3C trace context in
  ``params._meta`` (the ``mcp`` SDK's server span extracts it);
- ``codemode.compile``, a child drawn from the run's measured compile time;
- ``codemode.tool_call <address>`` per tool call (source, tool, outcome, decision, rule,
  duration, byte counts; never arguments or results), current while the call runs, so
  upstream spans nest under it: the ``mcp`` SDK's client spans (which also put
  ``traceparent`` into the upstream request's ``_meta``) and ``upstream_span`` for
  OpenAPI requests, which adds ``traceparent``/``tracestate`` headers.

The API is a dependency of ``mcp`` and is a no-op until a ``TracerProvider`` is set;
``codemodekit[otel]`` adds the SDK and the OTLP exporter. Nothing here runs unless a
``TracingObserver`` exists: ``upstream_span`` checks one module flag and returns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from codemodekit.errors import MAX_NAME_CHARS, clip
from codemodekit.observe import OUTCOME_OK, BaseObserver, RunStart, ToolCallEvent, run_outcome

if TYPE_CHECKING:
    import httpx
    from opentelemetry.trace import TracerProvider

    from codemodekit.run_result import RunResult

TRACER_NAME = "codemodekit"
_state: dict[str, Any] = {"tracer": None}
"""The tracer of the most recent ``TracingObserver``; ``None`` keeps upstream calls bare."""


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class TracingObserver(BaseObserver):
    """Spans for runs and tool calls (see the module docstring)."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self._runs: dict[str, tuple[Any, Any, Any]] = {}
        _state["tracer"] = self._tracer

    def on_run_start(self, run: RunStart) -> None:
        from opentelemetry import context

        span = self._tracer.start_span(
            "codemode.run",
            start_time=_ns(run.started_at),
            attributes={
                "codemode.execution_id": run.execution_id,
                "codemode.catalog_revision": run.catalog_revision,
            },
        )
        ctx = self._trace.set_span_in_context(span)
        # Current for the run's task, so spans started inside the run (and tasks it
        # spawns) nest under it.
        self._runs[run.execution_id] = (span, ctx, context.attach(ctx))

    def on_tool_call_start(self, call: ToolCallEvent) -> None:
        from opentelemetry import context

        entry = self._runs.get(call.execution_id)
        span = self._tracer.start_span(
            # Named for its tool once the bridge found it in the catalog (``on_tool_call``):
            # what the model wrote is any text, and a span name must come from a small set.
            "codemode.tool_call",
            # Parent explicitly: the task that performs the call may not descend from the
            # run's task (a sandbox worker's reader, for instance).
            context=entry[1] if entry is not None else None,
            start_time=_ns(call.started_at),
            attributes={
                "codemode.execution_id": call.execution_id,
                "codemode.tool.call_id": call.call_id,
            },
        )
        call.extra["otel"] = (span, context.attach(self._trace.set_span_in_context(span)))

    def on_tool_call(self, call: ToolCallEvent) -> None:
        from opentelemetry import context
        from opentelemetry.trace import StatusCode

        held = call.extra.pop("otel", None)
        if held is None:
            return
        span, token = held
        if call.listed:
            span.update_name(f"codemode.tool_call {call.source}.{call.tool}")
        span.set_attributes(
            {
                "codemode.tool.source": clip(call.source, MAX_NAME_CHARS),
                "codemode.tool.name": clip(call.tool, MAX_NAME_CHARS),
                "codemode.tool.outcome": call.outcome,
                "codemode.tool.duration_ms": round(call.duration_ms, 3),
                "codemode.tool.queue_ms": round(call.queue_ms, 3),
                "codemode.tool.request_bytes": call.request_bytes,
                "codemode.tool.response_bytes": call.response_bytes,
            }
        )
        if call.decision is not None:
            span.set_attribute("codemode.policy.decision", call.decision)
        if call.rule is not None:
            span.set_attribute("codemode.policy.rule", call.rule)
        if call.outcome != OUTCOME_OK:
            span.set_status(StatusCode.ERROR, call.outcome)
            span.set_attribute("error.type", call.outcome)
        span.end()
        context.detach(token)

    def on_run_end(self, run: RunStart, result: RunResult | None) -> None:
        from opentelemetry import context
        from opentelemetry.trace import StatusCode

        entry = self._runs.pop(run.execution_id, None)
        if entry is None:
            return
        span, ctx, token = entry
        outcome = run_outcome(result)
        if result is not None and result.compile_ms > 0:
            compiled = self._tracer.start_span(
                "codemode.compile",
                context=ctx,
                start_time=_ns(run.started_at),
                attributes={"codemode.code_bytes": len(run.code)},
            )
            compiled.end(end_time=_ns(run.started_at) + int(result.compile_ms * 1_000_000))
        span.set_attribute("codemode.outcome", outcome)
        if result is not None:
            span.set_attributes(
                {
                    "codemode.tool_calls": result.tool_calls,
                    "codemode.compute_ms": round(result.compute_ms, 3),
                    "codemode.queue_ms": round(result.queue_ms, 3),
                }
            )
        if outcome != OUTCOME_OK:
            span.set_status(StatusCode.ERROR, outcome)
            span.set_attribute("error.type", outcome)
        span.end()
        context.detach(token)


@contextlib.contextmanager
def upstream_span(method: str, template: str, request: httpx.Request) -> Iterator[None]:
    """A client span around one upstream HTTP request, whose trace context it carries.

    ``template`` is the operation's path template: the concrete URL may hold identifiers
    or a query-placed API key, so it is not recorded. Does nothing unless tracing is on.
    """
    tracer = _state["tracer"]
    if tracer is None:
        yield
        return
    from opentelemetry.propagate import inject
    from opentelemetry.trace import SpanKind, StatusCode

    with tracer.start_as_current_span(
        f"{method} {template}",
        kind=SpanKind.CLIENT,
        attributes={
            "http.request.method": method,
            "url.template": template,
            "server.address": request.url.host,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        carrier: dict[str, str] = {}
        inject(carrier)
        for key, value in carrier.items():
            request.headers[key] = value
        try:
            yield
        except BaseException as exc:
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            span.set_attribute("error.type", type(exc).__name__)
            raise


@contextlib.contextmanager
def incoming_context(meta: Any, headers: Any) -> Iterator[None]:
    """Continue the caller's trace from HTTP ``traceparent`` headers when ``_meta`` has none.

    The ``mcp`` SDK parents its server span from ``params._meta.traceparent``; a client that
    sends W3C trace context as HTTP headers instead is honoured here, for the run only.
    Does nothing unless tracing is on.
    """
    if _state["tracer"] is None or headers is None or _meta_has_traceparent(meta):
        yield
        return
    try:
        carrier = {k.lower(): v for k, v in headers.items() if k.lower() in _TRACE_HEADERS}
    except Exception:
        carrier = {}
    if "traceparent" not in carrier:
        yield
        return
    from opentelemetry import context, trace
    from opentelemetry.propagate import extract

    extracted = extract(carrier)
    if not trace.get_current_span(extracted).get_span_context().is_valid:
        yield
        return
    token = context.attach(extracted)
    try:
        yield
    finally:
        context.detach(token)


_TRACE_HEADERS = frozenset({"traceparent", "tracestate", "baggage"})


def _meta_has_traceparent(meta: Any) -> bool:
    if meta is None:
        return False
    if isinstance(meta, dict):
        return "traceparent" in meta
    extra = getattr(meta, "model_extra", None) or {}
    return "traceparent" in extra or getattr(meta, "traceparent", None) is not None


def disable_upstream_spans() -> None:
    """Stop ``upstream_span`` (tests; a process that turns tracing off again)."""
    _state["tracer"] = None


__all__ = [
    "TRACER_NAME",
    "TracingObserver",
    "disable_upstream_spans",
    "incoming_context",
    "upstream_span",
]
