"""The bounded console: formatting, head + tail with one marker, floods stay bounded."""

from __future__ import annotations

import pytest

from codemodekit.sandbox.base import CodeSandbox, LogEntry
from tests.conformance.sandbox.harness import run


async def test_levels_and_formatting(sandbox: CodeSandbox) -> None:
    code = """
    console.log('text', 1, true, null, undefined, { a: [1, 'b'] });
    console.info(5n, Symbol('s'));
    console.warn(new TypeError('careful'));
    console.error(function named() {}, () => {});
    console.debug('debug');
    const c = { k: 1 }; c.self = c; console.log(c);
    """
    outcome = await run(sandbox, code)
    assert outcome.ok
    assert outcome.logs == (
        LogEntry("log", 'text 1 true null undefined {"a":[1,"b"]}'),
        LogEntry("info", "5n Symbol(s)"),
        LogEntry("warn", "TypeError: careful"),
        LogEntry("error", "[Function: named] [Function (anonymous)]"),
        LogEntry("debug", "debug"),
        LogEntry("log", '{"k":1,"self":"[Circular]"}'),
    )


async def test_logs_survive_a_failed_run(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "console.log('before'); throw new Error('after')")
    assert not outcome.ok
    assert outcome.logs == (LogEntry("log", "before"),)


async def test_logs_survive_the_compute_limit(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "console.log('spinning'); for (;;) {}", compute_time_ms=100)
    assert not outcome.ok
    assert outcome.logs == (LogEntry("log", "spinning"),)


@pytest.mark.parametrize("count", [10, 11, 50])
async def test_head_and_tail_with_exactly_one_marker(sandbox: CodeSandbox, count: int) -> None:
    code = f"for (let i = 0; i < {count}; i++) console.log('line ' + i)"
    outcome = await run(sandbox, code, log_entries=10)
    messages = [entry.message for entry in outcome.logs]
    if count <= 10:
        assert messages == [f"line {i}" for i in range(count)]
        return
    assert len(outcome.logs) == 10
    markers = [i for i, entry in enumerate(outcome.logs) if entry.level == "truncated"]
    assert len(markers) == 1
    m = markers[0]
    kept_head, kept_tail = messages[:m], messages[m + 1 :]
    assert kept_head == [f"line {i}" for i in range(len(kept_head))]
    assert kept_tail == [f"line {i}" for i in range(count - len(kept_tail), count)]
    omitted = count - len(kept_head) - len(kept_tail)
    assert messages[m].startswith(f"… {omitted} entr")
    assert "omitted" in messages[m]


async def test_byte_budget_is_kept(sandbox: CodeSandbox) -> None:
    code = "for (let i = 0; i < 100; i++) console.log('é'.repeat(50) + i)"
    outcome = await run(sandbox, code, log_bytes=1000, log_entries=1000)
    kept = [e for e in outcome.logs if e.level != "truncated"]
    assert sum(len(e.message.encode()) for e in kept) <= 1000
    assert sum(e.level == "truncated" for e in outcome.logs) == 1
    assert kept[0].message.endswith("0") and kept[-1].message.endswith("99")


async def test_one_huge_message_is_cut_explicitly(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "console.log('x'.repeat(100000))", log_bytes=1000)
    (entry,) = outcome.logs
    assert len(entry.message.encode()) <= 1000
    assert "more characters]" in entry.message


async def test_a_log_flood_stays_bounded(sandbox: CodeSandbox) -> None:
    code = "for (let i = 0; i < 100000; i++) console.log('flood line number ' + i); return 'ok'"
    outcome = await run(sandbox, code, memory_bytes=16 * 1024 * 1024, compute_time_ms=20000)
    assert outcome.ok and outcome.value == "ok"
    assert len(outcome.logs) == 100
    assert outcome.logs[-1].message == "flood line number 99999"
    assert (await run(sandbox, "return 1")).value == 1
