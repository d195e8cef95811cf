"""The projection's contract through the public API: tool_typescript, RESULT_CONTRACT, generate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen import RESULT_CONTRACT, generate, tool_typescript
from codemodekit.providers.base import Discovery, ToolSpec
from tests.codegen.helpers import assert_typechecks, catalog_from_json, one_tool_catalog
from tests.golden import GOLDEN_ROOT


def _ts(input_schema: dict[str, object], **fields: object) -> str:
    catalog = one_tool_catalog(input_schema, **fields)
    tool = catalog.get("app", "call")
    assert tool is not None
    return tool_typescript(tool)


def test_tool_typescript_has_types_and_the_exact_call() -> None:
    catalog = Catalog.build(
        {
            "deployment-api": Discovery(
                tools=(
                    ToolSpec(
                        name="search-issues",
                        description="Search issues.",
                        input_schema={
                            "type": "object",
                            "properties": {"q": {"type": "string"}},
                            "required": ["q"],
                        },
                        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                        deprecated=True,
                    ),
                )
            )
        }
    )
    tool = catalog.get("deployment-api", "search-issues")
    assert tool is not None
    text = tool_typescript(tool)
    assert "interface DeploymentApiSearchIssuesInput {\n  q: string;\n}" in text
    assert "interface DeploymentApiSearchIssuesOutput {" in text
    assert text.endswith(
        'tools["deployment-api"]["search-issues"](input: DeploymentApiSearchIssuesInput): '
        "Promise<ToolResult<DeploymentApiSearchIssuesOutput>>;\n"
    )
    assert "Search issues.\n * @deprecated" in text


def test_result_contract_declares_the_result_shape_and_the_fallback() -> None:
    assert "interface ToolResult<T = unknown>" in RESULT_CONTRACT
    assert (
        "structuredContent?: T;" in RESULT_CONTRACT
        and "content: ContentBlock[];" in RESULT_CONTRACT
    )
    for block in ('"text"', '"image"', '"audio"', '"resource_link"', '"resource"'):
        assert f"type: {block}" in RESULT_CONTRACT
    assert "JSON.parse" in RESULT_CONTRACT and "catch" in RESULT_CONTRACT


def test_search_snippets_type_check_with_the_contract(tmp_path: Path) -> None:
    catalog = catalog_from_json(
        json.loads((GOLDEN_ROOT / "ts_refs" / "input" / "codegen.json").read_text("utf-8"))
    )
    snippets = []
    for tool in catalog.available_tools:
        text = tool_typescript(tool)
        # The call line documents the signature; as TypeScript it is a declared function.
        *types, call = text.rstrip("\n").rsplit("\n", 1)
        signature = call.split("(input:", 1)[1]
        snippets.append("\n".join(types) + f"\ndeclare function call(input:{signature}\n")
    path = tmp_path / "snippets.d.ts"
    path.write_text(RESULT_CONTRACT + "\n".join(snippets))
    assert_typechecks([[path]])


def test_comment_closers_in_descriptions_are_escaped() -> None:
    text = _ts(
        {
            "type": "object",
            "description": "a */ b",
            "properties": {"x": {"type": "string", "description": "*/"}},
        },
        description="ends */ here",
    )
    assert "*/ b" not in text and "a *\\/ b" in text
    assert text.count("*/") == text.count("/**")


def test_identifier_and_non_identifier_property_names() -> None:
    text = _ts(
        {
            "type": "object",
            "properties": {
                "plain": {"type": "string"},
                "$dollar_ok": {"type": "string"},
                "kebab-case": {"type": "string"},
                "with space": {"type": "string"},
                "1st": {"type": "string"},
                'quote"d': {"type": "string"},
                "ünïcode": {"type": "string"},
            },
        }
    )
    for line in (
        "  plain?: string;",
        "  $dollar_ok?: string;",
        '  "kebab-case"?: string;',
        '  "with space"?: string;',
        '  "1st"?: string;',
        '  "quote\\"d"?: string;',
        '  "ünïcode"?: string;',
    ):
        assert line in text


def test_incoherent_index_signatures_widen_to_unknown() -> None:
    text = _ts(
        {
            "type": "object",
            "properties": {"n": {"type": "number"}, "s": {"type": "string"}},
            "required": ["n"],
            "additionalProperties": {"type": "string"},
        }
    )
    assert "[key: string]: unknown;" in text
    coherent = _ts(
        {
            "type": "object",
            "properties": {"s": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        }
    )
    assert "[key: string]: string | undefined;" in coherent


def test_inexpressible_schemas_become_unknown_never_an_invented_name() -> None:
    text = _ts(
        {
            "type": "object",
            "properties": {
                "a": {"not": {"type": "string"}},
                "b": {"if": {"type": "string"}, "then": {"minLength": 2}},
                "c": {"$dynamicRef": "#node"},
            },
            "$defs": {"node": {"$dynamicAnchor": "node", "type": "string"}},
        }
    )
    assert "  a?: unknown;" in text and "  b?: unknown;" in text and "  c?: unknown;" in text
    assert "AppNode" not in text  # no declaration for a target nothing references by $ref


def test_deeply_nested_schemas_are_bounded() -> None:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(60):
        schema = {"type": "object", "properties": {"x": schema}}
    text = _ts(schema)
    assert "unknown" in text and text.count("{") < 60


def test_generation_is_byte_identical_across_python_processes(tmp_path: Path) -> None:
    # Different hash seeds: nothing may depend on set or dict-of-set iteration order.
    script = (
        "import json, sys\n"
        "from tests.codegen.helpers import catalog_from_json\n"
        "from tests.golden import GOLDEN_ROOT\n"
        "from codemodekit.codegen import generate, generate_plugin\n"
        "out = {}\n"
        "for case in ('ts_refs', 'catalog_name_collisions', 'catalog_large_source', 'plugin_basic'):\n"
        "    doc = json.loads((GOLDEN_ROOT / case / 'input' / 'codegen.json').read_text())\n"
        "    cat = catalog_from_json(doc)\n"
        "    out[case] = generate_plugin(cat, name='x') if doc.get('plugin') else generate(cat, name='x')\n"
        "sys.stdout.write(json.dumps(out, sort_keys=True))\n"
    )
    root = Path(__file__).parents[2]
    outputs = []
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == outputs[2]


def test_large_sources_are_sharded_with_bounded_shards() -> None:
    tools = tuple(
        ToolSpec(name=f"{noun}_{verb}_{i}", input_schema={"type": "object", "properties": {}})
        for noun in ("issues", "pulls", "repos")
        for verb in ("get", "list")
        for i in range(60)
    )
    catalog = Catalog.build({"gh": Discovery(tools=tools), "tiny": Discovery(tools=tools[:3])})
    files = generate(catalog, name="x")
    lock = json.loads(files["catalog.json"])
    shards = lock["sources"]["gh"]["shards"]
    assert shards and all(len(v) <= 100 for v in shards.values())
    assert sorted(n for v in shards.values() for n in v) == sorted(t.name for t in tools)
    assert set(shards) <= set(files) and lock["sources"]["tiny"]["shards"] == {}
    index = files["tools.gh.d.ts"]
    assert "declare const tools" not in index and all(path in index for path in shards)
    assert "issues_get_0: (input" in files["tools.d.ts"]


def test_references_resolve_against_embedded_resources_and_full_uris() -> None:
    text = _ts(
        {
            "$id": "https://example.com/root.json",
            "type": "object",
            "properties": {
                "item": {"$ref": "item.json"},
                "self_by_uri": {"$ref": "https://example.com/root.json#/$defs/tag"},
                "by_anchor": {"$ref": "#top"},
            },
            "$defs": {
                "tag": {"type": "boolean"},
                "top": {"$anchor": "top", "enum": ["a", "b"]},
                "item": {
                    "$id": "https://example.com/item.json",
                    "type": "object",
                    "properties": {"tag": {"$ref": "#/$defs/tag"}},
                    "required": ["tag"],
                    "$defs": {"tag": {"type": "string", "format": "uuid"}},
                },
            },
        }
    )

    def alias_of(prop: str, body: str) -> str:
        name = body.split(f"{prop}: ", 1)[1].split(";", 1)[0]
        return text.split(f"type {name} = ", 1)[1].split(";", 1)[0]

    root = text.split("interface AppCallInput {", 1)[1].split("}", 1)[0]
    assert "  item?: AppItem;" in root and alias_of("by_anchor?", root) == '"a" | "b"'
    assert alias_of("self_by_uri?", root) == "boolean"
    # Inside item.json, "#/$defs/tag" is item's own string definition, not the root's boolean.
    item = text.split("interface AppItem {", 1)[1].split("}", 1)[0]
    assert alias_of("tag", item) == "string"
