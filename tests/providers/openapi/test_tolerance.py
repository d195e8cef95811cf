"""Real-world slips: Schema Object mistakes and extra top-level fields load; others reject."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen.artifacts import generate
from codemodekit.errors import SourceUnavailable
from tests.conftest import node_package
from tests.providers.openapi.conftest import make_provider, started


def _document(**extra: Any) -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "slips", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": {
            "/things/{id}": {
                "get": {
                    "operationId": "getThing",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Thing"}
                                }
                            },
                        }
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "Thing": {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "pattern": 0},
                        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                        "name": {"type": "string", "required": True},
                    },
                }
            }
        },
        **extra,
    }


async def test_schema_object_slips_and_extra_root_fields_still_load(tmp_path: Path) -> None:
    path = tmp_path / "slips.json"
    path.write_text(json.dumps(_document(source="generator metadata")))
    provider = make_provider(path)
    try:
        discovery = await started(provider)
    finally:
        await provider.aclose()
    assert [tool.name for tool in discovery.tools] == ["getThing"]
    catalog = Catalog.build({"api": discovery})
    assert catalog.get("api", "getThing") is not None
    assert generate(catalog, name="api")


async def test_a_broken_operation_structure_still_rejects_the_document(tmp_path: Path) -> None:
    document = _document()
    del document["paths"]["/things/{id}"]["get"]["parameters"][0]["in"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))
    provider = make_provider(path)
    with pytest.raises(SourceUnavailable) as caught:
        await started(provider)
    await provider.aclose()
    assert "invalid OpenAPI 3.0 document at paths./things/{id}.get.parameters[0]" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("package", "relative"),
    [
        ("@figma/rest-api-spec", "openapi/openapi.yaml"),
        ("@blockfrost/openapi", "openapi.yaml"),
    ],
)
async def test_real_descriptions_load_and_every_skip_has_a_reason(
    package: str, relative: str
) -> None:
    provider = make_provider(node_package(package) / relative, name="api")
    try:
        discovery = await started(provider)
    finally:
        await provider.aclose()
    assert discovery.tools or discovery.skipped
    assert all(skipped.reason.strip() for skipped in discovery.skipped)
    catalog = Catalog.build({"api": discovery})
    assert len(catalog.tools) == len(discovery.tools)
    assert generate(catalog, name="api")


async def test_a_pattern_the_validator_cannot_run_is_dropped_not_the_tool(tmp_path: Path) -> None:
    document = _document()
    thing = document["components"]["schemas"]["Thing"]["properties"]
    thing["code"]["pattern"] = "[a-zA-Z]{1-70}"  # meant {1,70}: not a valid ECMA-262 regex
    thing["name"] = {"type": "string", "pattern": "^[a-z]+$"}
    path = tmp_path / "patterns.json"
    path.write_text(json.dumps(document))
    provider = make_provider(path)
    try:
        discovery = await started(provider)
    finally:
        await provider.aclose()
    catalog = Catalog.build({"api": discovery})
    assert catalog.quarantined == ()
    tool = catalog.get("api", "getThing")
    assert tool is not None and tool.output_schema is not None
    props = tool.output_schema["$defs"]["Thing"]["properties"]
    assert "pattern" not in props["code"]
    assert props["name"]["pattern"] == "^[a-z]+$"  # a usable pattern is kept
