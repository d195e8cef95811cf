"""Every reply of `codemode serve` is text UTF-8 can encode, whatever the model, a tool or an
upstream put in it.

JSON allows a lone surrogate (``"\\ud800"``); UTF-8 does not. Such a character in a reply
failed its serialization after the handler had returned: over stdio the MCP SDK's writer
task died, and the whole server with it. Each way one could get in is tried here over a
real stdio server, and the server must answer every call and then answer the next.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from tests.conftest import tools_project

from codemodekit import Diagnostic, ErrorCode, RunResult
from codemodekit.server.tools import run_result_to_mcp

TOOLS_MODULE = '''
"""Tools whose errors carry a lone surrogate, as text from an upstream could."""
from codemodekit import ToolError, define_tool

__all__ = ["boom", "echo", "bad_detail"]


def _boom(args):
    raise ToolError("upstream said \\ud800 and stopped")


def _bad_detail(args):
    raise ToolError("see details", details={"why\\udfff": "\\udc80 broken"})


boom = define_tool(description="Fail with a lone surrogate in the message.",
                   input_schema={"type": "object"}, execute=_boom)
bad_detail = define_tool(description="Fail with lone surrogates in its details.",
                         input_schema={"type": "object"}, execute=_bad_detail)
echo = define_tool(description="Echo.", input_schema={"type": "object"},
                   execute=lambda args: args)
'''

CONFIG = """
version = 1
name = "well-formed-test"

[policy]
default = "allow"

[sources.app]
type = "python"
module = "surrogatetools"
"""

#: Model code whose reply would carry a lone surrogate, each by another way in.
CASES = {
    # A tool's own error text (an upstream's JSON error body reaches it the same way).
    "a tool's error message": "await tools.app.boom({});\nreturn 1;",
    "a tool's error details": "await tools.app.bad_detail({});\nreturn 1;",
    # Arguments nested past Python's JSON decoder: the call's names are decoded apart.
    "a deep call's tool name": (
        "let a: any = [];\nfor (let i = 0; i < 1500; i++) a = [a];\n"
        'await (tools.app as any)["\\uD800"]({ a });\nreturn 1;'
    ),
    "a deep call's source name": (
        "let a: any = [];\nfor (let i = 0; i < 1500; i++) a = [a];\n"
        'await (tools as any)["\\uDBFF"].echo({ a });\nreturn 1;'
    ),
    # What the sandbox already replaced: must stay so.
    "a thrown message": 'throw new Error("bad \\uD800 text");',
    "a returned value": 'return { ["k\\uDC00"]: "v\\uD800" };',
    "a console line": 'console.log("x\\uD800");\nreturn 1;',
}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tools_project(tmp_path, "surrogatetools", TOOLS_MODULE, CONFIG)


def _all_text(result: types.CallToolResult) -> str:
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return "\n".join(texts) + repr(result.structured_content)


async def test_no_reply_carries_a_lone_surrogate_and_the_server_lives_on(config: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemodekit", "serve", "-c", str(config)],
        cwd=str(config.parent),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        replies = {
            name: await client.call_tool("run_typescript", {"code": code})
            for name, code in CASES.items()
        }
        after = await client.call_tool("run_typescript", {"code": "return 'still here';"})
    for name, reply in replies.items():
        text = _all_text(reply)
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text), name
    assert replies["a tool's error message"].is_error
    assert "upstream said \ufffd and stopped" in _all_text(replies["a tool's error message"])
    assert after.is_error is False and after.structured_content["value"] == "still here"


SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "a\ud83dz"]


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_a_diagnostic_is_well_formed_in_every_field(surrogate: str) -> None:
    diagnostic = Diagnostic(
        ErrorCode.TOOL_ERROR,
        f"message {surrogate}",
        tool=f"app.t{surrogate}",
        source=f"s{surrogate}",
        details=((f"k{surrogate}", f"v{surrogate}"),),
    )
    fields = [diagnostic.message, diagnostic.tool, diagnostic.source]
    fields += [text for pair in diagnostic.details for text in pair if isinstance(text, str)]
    for text in fields:
        assert text is not None
        text.encode("utf-8")  # raises on a lone surrogate
        assert "\ufffd" in text


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_a_reply_echoing_the_clients_own_code_is_well_formed(surrogate: str) -> None:
    # A client's code with a lone surrogate (stdio's JSON allows it) quoted in a
    # diagnostic's excerpt; and a host-made result with one in its value.
    code = f"const x = '{surrogate}';\nreturn x +;"
    failed = RunResult(
        ok=False,
        execution_id="e",
        diagnostic=Diagnostic(ErrorCode.COMPILE_ERROR, "unexpected token"),
    )
    for result in (failed, RunResult(ok=True, execution_id="e", value={surrogate: surrogate})):
        reply = run_result_to_mcp(result, code)
        reply.model_dump_json()  # what the SDK does with it: must not raise
