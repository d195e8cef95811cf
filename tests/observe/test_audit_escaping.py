"""The audit log keeps one record per line whatever names the model chooses (issue 23, item 9).

A model-chosen tool name (or caller) holding U+2028, U+2029, U+0085 or any C0/C1 control
must not split a record for any common reader: Python's ``str.splitlines`` (which splits
on all of them), a byte-level ``\\n`` split, JavaScript's line terminators.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemodekit import CodeMode, allow_all_tool_calls, define_tool, local
from codemodekit.observe.audit import AuditSink, audit_line

BREAKS = ["\u2028", "\u2029", "\u0085", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
CONTROLS = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))]
SURROGATES = ["\ud800", "\udfff"]

PING = define_tool(
    description="Ping",
    input_schema={"type": "object"},
    execute=lambda args: {},
)


def _clean(line: str) -> None:
    assert len(line.splitlines()) == 1
    for ch in (*BREAKS, *CONTROLS, *SURROGATES):
        assert ch not in line[:-1], repr(ch)
    line.encode("utf-8")  # writable as UTF-8 (a lone surrogate is not)


def _name_literal(name: str) -> str:
    # A JS string literal for any text (JSON escapes everything, lone surrogates included).
    return json.dumps(name, ensure_ascii=True)


async def test_model_chosen_names_never_split_an_audit_record(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = AuditSink(path)
    names = [f"a{ch}b" for ch in (*BREAKS, *CONTROLS, *SURROGATES)]
    program = (
        "const out = [];\n"
        f"for (const n of [{', '.join(_name_literal(n) for n in names)}]) {{\n"
        "  try { await tools.app[n]({}); } catch (e) { out.push(e.code); }\n"
        "}\n"
        "return out.length;"
    )
    async with CodeMode(
        sources=[local("app", {"ping": PING})], policy=allow_all_tool_calls(), observers=[sink]
    ) as cm:
        result = await cm.run(program, caller="client\u2028two\x85three")
    sink.close()
    assert result.ok, result.diagnostic
    raw = path.read_bytes()
    lines = raw.decode("utf-8").split("\n")[:-1]
    records = [json.loads(line) for line in lines]
    calls = [r for r in records if r["type"] == "tool_call"]
    assert len(calls) == len(names)
    text = raw.decode("utf-8")
    assert len(text.splitlines()) == len(records)  # no reader sees more lines
    for line in text.splitlines(keepends=True):
        _clean(line)
    assert records[-1]["caller"] == "client\u2028two\x85three"  # still readable as JSON


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=40))
def test_any_text_gives_one_line_that_reads_back(text: str) -> None:
    record = {"tool": text, "caller": text[::-1], "n": 1}
    line = audit_line(record)
    assert line.endswith("\n") and line.count("\n") == 1
    _clean(line)
    assert json.loads(line) == record


def test_printable_text_is_written_as_it_is(tmp_path: Path) -> None:
    line = audit_line({"a": "plain ascii", "b": "é ü 漢字"})
    assert line == '{"a":"plain ascii","b":"é ü 漢字"}\n'  # printable text stays as it is


async def test_an_audit_file_that_cannot_be_written_never_fails_a_run_or_the_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # /dev/full takes every write and fails every flush: as a full disk would at exit
    # (closing raised OSError, a traceback as `codemode serve` ended; found by a review
    # helper).
    sink = AuditSink("/dev/full")
    echo = define_tool(description="e", input_schema={"type": "object"}, execute=lambda a: 1)
    cm = CodeMode(sources=[local("app", {"e": echo})], policy=allow_all_tool_calls())
    cm.add_observer(sink)
    async with cm:
        assert (await cm.run("return await tools.app.e({});")).ok
    sink.close()
    sink.close()  # once closed, closing again is nothing
    assert any("could not be flushed" in r.getMessage() for r in caplog.records)
