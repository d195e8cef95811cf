"""Secrets an upstream echoes into its tool metadata reach no consumer (issue 23, item 4).

A real stdio MCP server is handed a credential through ``${VAR}`` and puts it, in every
encoding ``Scrubber`` knows, into tool descriptions, schema ``default``/``description``/
``title``/``enum``/``examples``, an output schema, annotations and ``_meta``. Search (the
API and ``codemode search``), the lock, the ``.d.ts`` files and ``catalog.json`` must all
show masked text; a tool whose name holds the credential is set aside.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec
from codemodekit.cli import main
from tests.security.test_secret_leaks import SECRET, assert_clean, encodings

LEAKY_SERVER = """
import os, sys
import mcp_types as types
from mcp.server.mcpserver import MCPServer

sys.path.insert(0, {tests!r})
from test_secret_leaks import encodings

SECRET = os.environ["LEAKED"]
FORMS = encodings(SECRET)


class Leaky(MCPServer):
    async def _handle_list_tools(self, ctx, params):
        tools = []
        for index, (form, text) in enumerate(sorted(FORMS.items())):
            tools.append(
                types.Tool(
                    name=f"tool_{{index}}",
                    title=f"title {{text}}",
                    description=f"Look up things. Your token is {{text}} (form {{form}}).",
                    input_schema={{
                        "type": "object",
                        "title": text,
                        "properties": {{
                            "q": {{
                                "type": "string",
                                "default": text,
                                "description": "token " + text,
                                "examples": [text],
                            }},
                            "mode": {{"type": "string", "enum": ["a", text]}},
                        }},
                    }},
                    output_schema={{
                        "type": "object",
                        "properties": {{"r": {{"type": "string", "const": text}}}},
                    }},
                    annotations=types.ToolAnnotations(title=text),
                    _meta={{"leak": text}},
                )
            )
        tools.append(types.Tool(name="named_" + SECRET,
                                input_schema={{"type": "object"}}))
        return types.ListToolsResult(tools=tools)


Leaky("leaky").run()
"""


@pytest.fixture
def leaky_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    server = tmp_path / "leaky_server.py"
    server.write_text(LEAKY_SERVER.format(tests=str(Path(__file__).parent)))
    config = tmp_path / "codemode.toml"
    config.write_text(
        'version = 1\nname = "leaks"\n[policy]\ndefault = "allow"\n'
        '[sources.up]\ntype = "mcp"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(server))}]\n"
        'env = { LEAKED = "${LEAK_TOKEN}" }\n'
    )
    monkeypatch.setenv("LEAK_TOKEN", SECRET)
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return config


async def test_search_and_the_catalog_show_masked_metadata(leaky_spec: Path) -> None:
    async with CodeMode.from_spec(load_spec(leaky_spec)) as cm:
        assert len(cm.catalog.tools) == len(encodings(SECRET))
        for tool in cm.catalog.tools:
            assert "***" in tool.description
        for query in ("token", "look up things", "title"):
            response = cm.search(query, detail="typescript", limit=50)
            assert_clean(response.to_text())
            assert_clean(json.dumps(response.to_json()))
        files = cm.generate()
        result = await cm.run("return typeof tools.up.tool_0;")
    assert result.ok and result.value == "function", result.diagnostic
    for path, text in files.items():
        if path.endswith(".d.ts") or path.endswith(".json"):
            assert_clean(text)


def test_the_cli_lock_generate_and_search_show_masked_metadata(
    leaky_spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lock"]) == 0
    lock = (leaky_spec.parent / "codemode.lock.json").read_text()
    assert_clean(lock)
    assert "its name contains a credential" in lock
    assert main(["generate"]) == 0
    out = leaky_spec.parent / "codemode"
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".ts" for p in written)
    for path in written:
        assert_clean(path.read_text())
    capsys.readouterr()
    assert main(["search", "token", "--detail", "typescript", "--limit", "50"]) == 0
    shown = capsys.readouterr()
    assert "tool_" in shown.out
    assert_clean(shown.out + shown.err)
