"""Console entries stream to a host with ``on_log`` while the run goes (issue 14).

The stream is bounded like the logs, and the final logs are the same with or without it.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemodekit.sandbox.base import CodeSandbox, LogEntry
from tests.conformance.sandbox.harness import HostDouble, run


class StreamingHost(HostDouble):
    """A host double that takes console entries as they come."""

    def __init__(self, wait_for: str | None = None) -> None:
        super().__init__()
        self.streamed: list[LogEntry] = []
        self.calls_when_streamed: list[int] = []
        self._wait_for = wait_for

    def on_log(self, entry: LogEntry) -> None:
        self.streamed.append(entry)
        self.calls_when_streamed.append(len(self.calls))
        if entry.message == self._wait_for:
            self.release.set()  # `t.wait` returns only once this entry was seen


async def test_an_entry_arrives_while_the_run_awaits_a_tool(sandbox: CodeSandbox) -> None:
    host = StreamingHost(wait_for="before the call")
    code = """
    console.log('before the call');
    const r = await tools.t.wait({});
    console.warn('after the call', r.structuredContent);
    return 1;
    """
    outcome = await asyncio.wait_for(run(sandbox, code, host), 60)  # hang guard only
    assert outcome.ok, outcome.diagnostic
    assert host.streamed == [
        LogEntry("log", "before the call"),
        LogEntry("warn", "after the call released"),
    ]
    assert outcome.logs == tuple(host.streamed)


async def test_every_entry_once_in_order_across_slices(sandbox: CodeSandbox) -> None:
    code = """
    for (let i = 0; i < 5; i++) {
      console.log('slice', i);
      console.info('again', i);
      await tools.t.echo({ i });
    }
    console.error('last');
    """
    host = StreamingHost()
    outcome = await run(sandbox, code, host)
    assert outcome.ok
    assert tuple(host.streamed) == outcome.logs
    assert len(outcome.logs) == 11
    # Each slice's entries were handed over before that slice's call was dispatched.
    assert host.calls_when_streamed[:4] == [0, 0, 1, 1]
    plain = await run(sandbox, code)
    assert plain.logs == outcome.logs


async def test_a_failed_run_streams_what_it_logged(sandbox: CodeSandbox) -> None:
    host = StreamingHost()
    outcome = await run(
        sandbox, "console.log('a'); await tools.t.echo({}); throw new Error('x')", host
    )
    assert not outcome.ok
    assert host.streamed == [LogEntry("log", "a")]
    host = StreamingHost()
    outcome = await run(sandbox, "console.log('spin'); for (;;) {}", host, compute_time_ms=100)
    assert not outcome.ok
    assert host.streamed == [LogEntry("log", "spin")]


def _check_stream(
    streamed: list[LogEntry], written: list[str], final: tuple[LogEntry, ...]
) -> None:
    """The stream is the written entries in order, each at most once, with markers for gaps;
    it ends with the final logs' last entries (nothing the final logs keep is missing)."""
    messages = [e.message for e in streamed if e.level != "truncated"]
    positions = [written.index(m) for m in messages]
    assert positions == sorted(set(positions)), "out of order or repeated"
    for before, after in itertools.pairwise(streamed):
        gaps = before.level == after.level == "truncated"
        assert not (gaps and "omitted" in before.message and "omitted" in after.message)
    kept = [e.message for e in final if e.level != "truncated"]
    assert set(kept) <= set(messages), "an entry of the final logs was never streamed"


@pytest.mark.parametrize(
    "per_slice",
    [[3], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [40, 2, 40], [0, 0, 25, 0, 1]],
)
async def test_floods_are_bounded_and_complete(sandbox: CodeSandbox, per_slice: list[int]) -> None:
    code = f"""
    let n = 0;
    for (const count of {per_slice}) {{
      for (let i = 0; i < count; i++) console.log('entry ' + n++);
      await tools.t.echo({{}});
    }}
    """
    host = StreamingHost()
    outcome = await run(sandbox, code, host, log_entries=8)
    assert outcome.ok
    written = [f"entry {i}" for i in range(sum(per_slice))]
    plain = await run(sandbox, code, log_entries=8)
    assert outcome.logs == plain.logs
    _check_stream(host.streamed, written, outcome.logs)
    # While the run goes at most the budget (plus one marker); its end adds the retained rest.
    assert len(host.streamed) <= 2 * 8 + 2
    if sum(per_slice) <= 8:
        assert tuple(host.streamed) == outcome.logs


async def test_the_stream_is_bounded_in_bytes(sandbox: CodeSandbox) -> None:
    code = """
    for (let i = 0; i < 30; i++) {
      console.log(i + ':' + 'x'.repeat(1000));
      await tools.t.echo({});
    }
    """
    host = StreamingHost()
    outcome = await run(sandbox, code, host, log_bytes=4096)
    assert outcome.ok
    streamed_bytes = sum(len(e.message.encode()) for e in host.streamed)
    assert streamed_bytes <= 2 * 4096 + 1024
    assert host.streamed[-1] == outcome.logs[-1]
    assert any("log limits" in e.message for e in host.streamed if e.level == "truncated")


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    per_slice=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=6),
    entries=st.integers(min_value=1, max_value=9),
)
async def test_any_pattern_of_writes_streams_in_order(per_slice: list[int], entries: int) -> None:
    from codemodekit.sandbox.quickjs import QuickJsSandbox

    code = f"""
    let n = 0;
    for (const count of {per_slice}) {{
      for (let i = 0; i < count; i++) console.log('entry ' + n++);
      await tools.t.echo({{}});
    }}
    """
    host = StreamingHost()
    sandbox = QuickJsSandbox(offload="inline", prewarm=0)
    outcome = await run(sandbox, code, host, log_entries=entries)
    assert outcome.ok
    written = [f"entry {i}" for i in range(sum(per_slice))]
    _check_stream(host.streamed, written, outcome.logs)
    assert outcome.logs == (await run(sandbox, code, log_entries=entries)).logs
