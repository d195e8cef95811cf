"""Every field of a diagnostic, and every echo of model-chosen text, is bounded
(issue 23, item 6).

A tool named ``'x'.repeat(1 << 20)`` used to come back as a 1 MiB ``tool`` field, echoed by
``serve`` in text and ``structuredContent`` past the 256 KiB result bound. Each variant
puts a megabyte of model-chosen text somewhere a diagnostic names it; the result, through
``CodeMode.run`` and through a real MCP client of ``codemode serve``, stays small.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from codemodekit import CodeMode, ToolError, allow_all_tool_calls, define_tool, local
from codemodekit.errors import MAX_NAME_CHARS, Diagnostic, ErrorCode
from codemodekit.observe.audit import AuditSink

MIB = 1 << 20
RESULT_BOUND = 256 * 1024
HUGE = "'x'.repeat(1 << 20)"

VARIANTS = {
    "tool name": f"await tools.app[{HUGE}]({{}});",
    "source name": f"await tools[{HUGE}].ping({{}});",
    "source and tool name": f"await tools[{HUGE}][{HUGE}]({{}});",
    "thrown message": f"throw new Error({HUGE});",
    "thrown name": f"const e = new Error('m'); e.name = {HUGE}; throw e;",
    "tool error message": f"await tools.app.refuse({{ text: {HUGE} }});",
    "argument key": f"await tools.app.ping({{ [{HUGE}]: 1 }});",
    "rejected string": f"throw {HUGE};",
}


def _refuse(args: dict[str, Any]) -> Any:
    text = str(args.get("text", ""))
    raise ToolError(text, details={text[:100_000]: text, "n": list(range(100))})


TOOLS = {
    "ping": define_tool(
        description="Ping.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        execute=lambda args: {},
    ),
    "refuse": define_tool(description="Refuse.", input_schema={"type": "object"}, execute=_refuse),
}


def _small(diagnostic: Diagnostic | None) -> None:
    assert diagnostic is not None
    for field in (diagnostic.tool, diagnostic.source):
        assert field is None or len(field) <= MAX_NAME_CHARS
    assert len(json.dumps(diagnostic.to_json())) < 32 * 1024


@pytest.mark.parametrize("variant", list(VARIANTS))
async def test_a_megabyte_of_model_text_gives_a_small_diagnostic(
    variant: str, tmp_path: Path
) -> None:
    sink = AuditSink(tmp_path / "audit.jsonl")
    async with CodeMode(
        sources=[local("app", TOOLS)],
        policy=allow_all_tool_calls(),
        observers=[sink],
    ) as cm:
        result = await cm.run(VARIANTS[variant])
    sink.close()
    assert not result.ok
    _small(result.diagnostic)
    assert len(json.dumps(result.to_json())) < RESULT_BOUND
    for line in (tmp_path / "audit.jsonl").read_text().splitlines():
        assert len(line) < 16 * 1024


def test_a_diagnostic_made_by_a_host_is_bounded_too() -> None:
    diagnostic = Diagnostic(
        ErrorCode.TOOL_ERROR,
        "m" * MIB,
        tool="t" * MIB,
        source="s" * MIB,
        correlation_id="c" * MIB,
        details=tuple((f"k{i}" * 1000, "v" * MIB) for i in range(100)),
    )
    _small(diagnostic)
    assert diagnostic.tool is not None and diagnostic.tool.endswith("characters)")


SERVER = """
import sys
sys.path.insert(0, {tests!r})
from codemodekit import CodeMode, allow_all_tool_calls, local
from codemodekit.server.hosting import create_server, serve_stdio
from test_bounded_echoes import TOOLS
import asyncio

async def main():
    async with CodeMode(sources=[local("app", TOOLS)], policy=allow_all_tool_calls()) as cm:
        await serve_stdio(create_server(cm))

asyncio.run(main())
"""


async def test_serve_echoes_stay_under_the_result_bound(tmp_path: Path) -> None:
    script = tmp_path / "bounded_server.py"
    script.write_text(SERVER.format(tests=str(Path(__file__).parent)))
    params = StdioServerParameters(command=sys.executable, args=[str(script)])
    async with Client(params) as client:
        for variant, code in VARIANTS.items():
            result = await client.call_tool("run_typescript", {"code": code})
            assert result.is_error, variant
            text = "".join(getattr(block, "text", "") for block in result.content)
            assert len(text) < RESULT_BOUND, (variant, len(text))
            structured = json.dumps(result.structured_content)
            assert len(structured) < RESULT_BOUND, (variant, len(structured))
