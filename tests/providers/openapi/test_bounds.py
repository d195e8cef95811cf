"""Densely linked descriptions: each tool carries a bounded set of ``$defs``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen.artifacts import generate
from codemodekit.providers.openapi.schemas import MAX_TOOL_DEFS
from tests.providers.openapi.conftest import make_provider, started

CHAIN = MAX_TOOL_DEFS * 2


def _chained_document() -> dict[str, Any]:
    """``Node0`` -> ``Node1`` -> ... one component per hop, plus a small one beside it."""
    schemas: dict[str, Any] = {
        f"Node{i}": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                **(
                    {"next": {"$ref": f"#/components/schemas/Node{i + 1}"}} if i + 1 < CHAIN else {}
                ),
            },
        }
        for i in range(CHAIN)
    }
    schemas["Small"] = {"type": "object", "properties": {"name": {"type": "string"}}}

    def op(operation_id: str, schema: str) -> dict[str, Any]:
        return {
            "operationId": operation_id,
            "requestBody": {
                "content": {
                    "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}
                }
            },
            "responses": {
                "200": {
                    "description": "ok",
                    "content": {
                        "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}
                    },
                }
            },
        }

    return {
        "openapi": "3.0.3",
        "info": {"title": "chain", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": {"/deep": {"post": op("deep", "Node0")}, "/small": {"post": op("small", "Small")}},
        "components": {"schemas": schemas},
    }


async def test_a_deep_closure_is_cut_to_the_nearest_components(tmp_path: Path) -> None:
    document = tmp_path / "chain.json"
    document.write_text(json.dumps(_chained_document()))
    provider = make_provider(document)
    try:
        discovery = await started(provider)
    finally:
        await provider.aclose()
    tools = {tool.name: tool for tool in discovery.tools}
    deep, small = tools["deep"], tools["small"]
    for schema in (deep.input_schema, deep.output_schema):
        assert schema is not None
        defs = schema["$defs"]
        assert len(defs) == MAX_TOOL_DEFS
        # Breadth-first from the tool: the nearest hops are kept ...
        assert {f"Node{i}" for i in range(MAX_TOOL_DEFS)} == set(defs)
        # ... and the reference past the bound is an unknown value, not a dangling $ref.
        assert defs[f"Node{MAX_TOOL_DEFS - 1}"]["properties"]["next"] == {}
        assert "$ref" in defs["Node0"]["properties"]["next"]
    assert small.input_schema["$defs"] == {
        "Small": {"type": "object", "properties": {"name": {"type": "string"}}}
    }
    catalog = Catalog.build({"api": discovery})
    assert catalog.quarantined == ()
    files = generate(catalog, name="api")
    assert files and all(files.values())
