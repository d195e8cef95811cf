"""The in-memory span exporter the tracing tests read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemodekit.observe.tracing import disable_upstream_spans

_MEMORY = InMemorySpanExporter()


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    # The mcp SDK's spans use the global provider, which can be set once per process.
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_MEMORY))
        trace.set_tracer_provider(provider)
    _MEMORY.clear()
    yield _MEMORY
    disable_upstream_spans()
    _MEMORY.clear()
