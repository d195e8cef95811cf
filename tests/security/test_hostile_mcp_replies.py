"""A hostile stdio MCP server: a tool schema nested 900 levels deep, results nested far
deeper than any parser goes, replies of tens of megabytes, a reply that stalls halfway.
One bad tool is set aside, never its source; one bad reply fails its own call with a
stable code; a large reply in progress shows the source as degraded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from codemodekit import CodeMode, load_spec
from codemodekit.nesting import MAX_NESTING
from tests.security._stall import assert_a_stalled_large_reply_degrades

# Hand-written (no SDK), so it can send what the SDK would refuse to build.
RAW_SERVER = r"""
import json, os, sys, time

def send_text(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()

def reply(mid, result_json):
    send_text('{"jsonrpc":"2.0","id":%s,"result":%s}' % (json.dumps(mid), result_json))

def deep_schema(levels):
    return '{"type":"object","properties":{"x":' * levels + '{"type":"string"}' + "}}" * levels

TOOLS = [
    '{"name":"echo","inputSchema":{"type":"object"}}',
    '{"name":"deep","inputSchema":%s}' % deep_schema(900),
    '{"name":"nest","inputSchema":{"type":"object"}}',
    '{"name":"huge","inputSchema":{"type":"object"}}',
    '{"name":"stall","inputSchema":{"type":"object"}}',
]

for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        reply(mid, json.dumps({
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}))
    elif method == "tools/list":
        reply(mid, '{"tools":[%s]}' % ",".join(TOOLS))
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
        if name == "echo":
            reply(mid, json.dumps({"content": [{"type": "text", "text": args.get("text", "")}]}))
        elif name == "nest":
            d = int(args["depth"])
            reply(mid, '{"content":[],"structuredContent":{"v":' + "[" * d + '"leaf"' + "]" * d + "}}")
        elif name == "huge":
            # Key order puts the id last: it is found at the end of the line.
            body = '{"content":[{"type":"text","text":"' + "x" * (int(args["mb"]) << 20) + '"}]}'
            send_text('{"jsonrpc":"2.0","result":%s,"id":%s}' % (body, json.dumps(mid)))
        elif name == "stall":
            head = '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' % json.dumps(mid)
            sys.stdout.write(head + "y" * (3 << 20))
            sys.stdout.flush()
            while not os.path.exists(args["marker"]):
                time.sleep(0.02)
            send_text('"}]}}')
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid,
                         "error": {"code": -32601, "message": "method not found"}}) + "\n")
        sys.stdout.flush()
"""


def _spec(tmp_path: Path) -> Path:
    (tmp_path / "raw_server.py").write_text(RAW_SERVER)
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "hostile"\n[policy]\ndefault = "allow"\n'
        "[limits]\ntool_call_time_ms = 120000\nwall_time_ms = 120000\n"
        f'[sources.up]\ntype = "mcp"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(tmp_path / 'raw_server.py'))}]\ntimeout_ms = 60000\n"
    )
    return tmp_path / "codemode.toml"


async def test_hostile_replies_fail_their_own_call_only(tmp_path: Path) -> None:
    async with CodeMode.from_spec(load_spec(_spec(tmp_path))) as cm:
        health = {h.source: h for h in cm.health}
        assert health["up"].status == "ok", health["up"]
        # The 900-level schema: that tool is set aside, with the bound named.
        skipped = {s.name: s.reason for s in cm.catalog.skipped}
        assert f"{MAX_NESTING} levels" in skipped.get("deep", ""), cm.catalog.skipped
        assert cm.catalog.get("up", "echo") is not None
        for depth in (MAX_NESTING + 5, 200, 300, 980, 3000, 20000):
            result = await cm.run(f"return await tools.up.nest({{depth: {depth}}});")
            assert result.diagnostic is not None, depth
            assert result.diagnostic.code == "TOOL_RESULT_INVALID", (depth, result.diagnostic)
            ok = await cm.run("return (await tools.up.echo({text: 'still here'})).content[0].text;")
            assert ok.ok and ok.value == "still here", (depth, ok.diagnostic)
        for megabytes in (3, 40):
            result = await cm.run(f"return await tools.up.huge({{mb: {megabytes}}});")
            assert result.diagnostic is not None, megabytes
            assert result.diagnostic.code == "TOOL_RESULT_TOO_LARGE", result.diagnostic
            ok = await cm.run("return (await tools.up.echo({text: 'after'})).content[0].text;")
            assert ok.ok and ok.value == "after", ok.diagnostic
        assert {h.source: h for h in cm.health}["up"].status == "ok"


async def test_a_stalled_large_reply_shows_the_source_degraded(tmp_path: Path) -> None:
    await assert_a_stalled_large_reply_degrades(_spec(tmp_path), tmp_path / "go")
