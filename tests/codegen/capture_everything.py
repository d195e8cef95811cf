"""Re-capture the real_server_everything golden input (run by hand; the result is committed).

    python -m tests.codegen.capture_everything

Starts @modelcontextprotocol/server-everything (MIT) from tests/js/node_modules over stdio,
lists its tools with CodeModeKit's MCP provider and writes their raw schemas to
tests/golden/real_server_everything/input/codegen.json with the package version noted.
"""

from __future__ import annotations

import asyncio
import json
import shutil

from codemodekit.providers.factory import providers_from_spec
from codemodekit.spec import parse_spec
from tests.conftest import NODE_MODULES
from tests.golden import GOLDEN_ROOT

PACKAGE = NODE_MODULES / "@modelcontextprotocol" / "server-everything"


async def main() -> None:
    node = shutil.which("node")
    assert node is not None, "node is required"
    version = json.loads((PACKAGE / "package.json").read_text("utf-8"))["version"]
    spec = parse_spec(
        "version = 1\nname = 'everything'\n[policy]\ndefault = 'deny'\n"
        f"[sources.everything]\ntype = 'mcp'\ncommand = {json.dumps(node)}\n"
        f"args = [{json.dumps(str(PACKAGE / 'dist' / 'index.js'))}, 'stdio']\n"
    )
    (provider,) = providers_from_spec(spec)
    try:
        discovery = await provider.start(lambda _d: None)
    finally:
        await provider.aclose()
    tools = [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": dict(t.input_schema),
            **({"output_schema": dict(t.output_schema)} if t.output_schema is not None else {}),
            **({"annotations": dict(t.annotations)} if t.annotations else {}),
            **({"default_dialect": t.default_dialect} if t.default_dialect else {}),
        }
        for t in discovery.tools
    ]
    document = {
        "origin": f"tools/list of @modelcontextprotocol/server-everything {version} (MIT), "
        "captured by tests/codegen/capture_everything.py",
        "name": "everything",
        "sources": {"everything": {"tools": tools}},
    }
    target = GOLDEN_ROOT / "real_server_everything" / "input" / "codegen.json"
    target.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {len(tools)} tools to {target}")


if __name__ == "__main__":
    asyncio.run(main())
