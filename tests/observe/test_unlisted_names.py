"""A name the model wrote is never a metric label or a span name (a review found a run
that added 3000 series and 125 MB to ``/metrics``, and spans named with megabytes).

Metric labels and span names must come from a small set: the catalog's names. A call that
named no tool of the catalog is labelled ``(unlisted)``, whichever way it failed: an
unknown source, an unknown tool, a name that is no identifier, or the call limit reached
before the name was looked up. Its span keeps the model's names as attributes, clipped.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from codemodekit import CodeMode, Limits, allow_all_tool_calls, define_tool, local
from codemodekit.errors import MAX_NAME_CHARS
from codemodekit.observe import UNLISTED
from codemodekit.observe.metrics import CodeModeMetrics
from codemodekit.observe.tracing import TracingObserver

ECHO = define_tool(description="Echo", input_schema={"type": "object"}, execute=lambda a: a)
LONG = "x" * 5000

# Each way a call can name something the catalog does not list: the call, its outcome and
# the run's max_tool_calls (the two listed calls first, then 50 of these).
UNLISTED_CALLS = {
    "unknown source": (f"tools['s{LONG}'].echo({{}})", "SOURCE_NOT_FOUND", 60),
    "unknown tool": (f"tools.app['t{LONG}']({{}})", "TOOL_NOT_FOUND", 60),
    "line terminators": ("tools.app['echo\\n\\u2028']({})", "TOOL_NOT_FOUND", 60),
    "past the call limit": (f"tools.app['late{LONG}']({{}})", "TOOL_CALL_LIMIT", 2),
}


def _series(metrics: CodeModeMetrics) -> dict[tuple[str, str, str], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name == "codemode_tool_calls_total":
                labels = sample.labels
                out[(labels["source"], labels["tool"], labels["outcome"])] = sample.value
    return out


@pytest.mark.parametrize("case", list(UNLISTED_CALLS), ids=list(UNLISTED_CALLS))
async def test_an_unlisted_name_is_no_label_and_no_span_name(
    case: str, exporter: InMemorySpanExporter
) -> None:
    call, outcome, max_tool_calls = UNLISTED_CALLS[case]
    cm = CodeMode(
        sources=[local("app", {"echo": ECHO})],
        policy=allow_all_tool_calls(),
        limits=Limits(max_tool_calls=max_tool_calls),
    )
    metrics = CodeModeMetrics(cm)
    cm.add_observer(metrics)
    cm.add_observer(TracingObserver())
    async with cm:
        result = await cm.run(
            "await tools.app.echo({}); await tools.app.echo({});\n"
            "let refused = 0;\n"
            f"for (let i = 0; i < 50; i++) {{ try {{ await {call}; }} catch {{ refused++; }} }}\n"
            "return refused;"
        )
    assert result.ok and result.value == 50, result
    series = _series(metrics)
    assert series == {("app", "echo", "ok"): 2, (UNLISTED, UNLISTED, outcome): 50}, series
    calls = [s for s in exporter.get_finished_spans() if s.name.startswith("codemode.tool_call")]
    assert len(calls) == 52
    assert {s.name for s in calls} == {"codemode.tool_call app.echo", "codemode.tool_call"}
    for span in calls:
        for key in ("codemode.tool.source", "codemode.tool.name"):
            assert len(str((span.attributes or {})[key])) <= MAX_NAME_CHARS


async def test_a_listed_tool_past_the_call_limit_keeps_its_labels() -> None:
    cm = CodeMode(
        sources=[local("app", {"echo": ECHO})],
        policy=allow_all_tool_calls(),
        limits=Limits(max_tool_calls=1),
    )
    metrics = CodeModeMetrics(cm)
    cm.add_observer(metrics)
    async with cm:
        result = await cm.run("await tools.app.echo({});\nawait tools.app.echo({});")
    assert not result.ok
    assert _series(metrics) == {("app", "echo", "ok"): 1, ("app", "echo", "TOOL_CALL_LIMIT"): 1}
