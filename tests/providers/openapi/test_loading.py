"""Loading documents: validation, schema conversion, references, naming, filters, corpora."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import Discovery, ToolSpec
from tests.conftest import node_package
from tests.providers.openapi.conftest import make_provider, started


async def discover(document: str | Path, **kwargs: Any) -> Discovery:
    provider = make_provider(
        document, base_url=kwargs.pop("base_url", "http://127.0.0.1:9"), **kwargs
    )
    try:
        return await started(provider)
    finally:
        await provider.aclose()


def tool(discovery: Discovery, name: str) -> ToolSpec:
    return next(t for t in discovery.tools if t.name == name)


async def test_openapi_30_schemas_become_2020_12() -> None:
    discovery = await discover("schemas30.yaml")
    get = tool(discovery, "get_nodes_nodeId")  # no operationId: method + path
    assert get.input_schema["properties"]["nodeId"] == {"type": "string", "examples": ["n1"]}
    assert get.output_schema is not None
    out = json.loads(json.dumps(get.output_schema))
    assert out["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert out["$ref"] == "#/$defs/Node"
    node = out["$defs"]["Node"]
    assert node["properties"]["name"] == {"type": "string", "examples": ["root"]}
    assert node["properties"]["weight"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 10}
    assert node["properties"]["note"] == {"type": ["string", "null"]}
    assert node["properties"]["legacy"] == {"type": ["integer", "null"]}
    assert node["properties"]["kind"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert node["properties"]["parent"] == {
        "anyOf": [{"allOf": [{"$ref": "#/$defs/Node"}]}, {"type": "null"}]
    }
    assert node["properties"]["children"] == {"type": "array", "items": {"$ref": "#/$defs/Node"}}
    assert "discriminator" not in node and "x-vendor" not in node
    # A required readOnly property is required only in responses (writeOnly: requests only).
    assert node["required"] == ["name", "id"]
    assert "x-internal" in node["properties"]  # a property named x-… is data, not an extension


async def test_put_merges_path_and_body_and_marks_deprecated() -> None:
    discovery = await discover("schemas30.yaml")
    put = tool(discovery, "putNode")
    assert put.deprecated is True
    assert put.description == "Replace a node\n\nReplaces the node entirely."
    assert put.annotations == {
        "title": "Replace a node",
        "readOnlyHint": False,
        "idempotentHint": True,
    }
    schema = put.input_schema
    assert schema["properties"]["nodeId"] == {"type": "string"}
    assert schema["properties"]["body"] == {"$ref": "#/$defs/Node"}
    assert schema["required"] == ["nodeId"]
    assert schema["additionalProperties"] is False
    assert set(schema["$defs"]) == {"Node"}
    assert schema["$defs"]["Node"]["required"] == ["name", "secret"]
    assert put.provenance == {"operation": "PUT /nodes/{nodeId}", "operationId": "putNode"}


async def test_sibling_file_refs_and_refused_refs_are_unknown() -> None:
    discovery = await discover("schemas30.yaml")
    shared = json.loads(json.dumps(tool(discovery, "shared").output_schema))
    name = shared["$ref"].rsplit("/", 1)[1]
    assert shared["$defs"][name]["properties"]["id"] == {"type": "integer"}
    tag = shared["$defs"][name]["properties"]["tag"]["$ref"].rsplit("/", 1)[1]
    assert shared["$defs"][tag] == {"type": ["string", "null"]}
    # Remote and outside-the-folder references are never fetched: they are unknown ({}),
    # inline, so no named type is invented for them.
    for name in ("remote", "escape"):
        out = tool(discovery, name).output_schema
        assert out == {"$schema": "https://json-schema.org/draft/2020-12/schema"}


async def test_openapi_31_schemas_keep_type_arrays_and_ref_siblings() -> None:
    discovery = await discover("schemas31.yaml")
    items = tool(discovery, "listItems")
    assert items.input_schema["properties"]["tag"] == {"type": ["string", "null"]}
    out = json.loads(json.dumps(items.output_schema))
    item = out["$defs"]["Item"]
    assert "$id" not in item  # would re-base the rewritten references
    assert item["properties"]["id"] == {"type": "integer", "exclusiveMinimum": 0}
    assert item["properties"]["next"] == {
        "$ref": "#/$defs/Item",
        "description": "the following item",
    }


async def test_catalog_compiles_every_converted_schema() -> None:
    discoveries = {
        name: await discover(f"{name}.yaml") for name in ("schemas30", "schemas31", "wire")
    }
    catalog = Catalog.build(discoveries)
    assert catalog.quarantined == ()
    validators = catalog.validators("schemas30", "putNode")
    assert validators is not None
    body = {"name": "n", "secret": "s", "note": None}
    assert validators[0].first_error({"nodeId": "1", "body": body}) is None
    assert validators[0].first_error({"nodeId": "1", "extra": 1}) is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n"
            "      parameters: [{name: q, in: query, schema: {type: string}, style: 12}]\n"
            "      responses: {'200': {description: ok}}\n",
            "bad.yaml: invalid OpenAPI 3.0 document at paths./a.get.parameters[0].style: "
            "12 is not of type 'string'",
        ),
        ("swagger: '2.0'\n", "Swagger/OpenAPI 2.0 is not supported"),
        ("openapi: 4.0.0\n", "OpenAPI version '4.0.0' is not supported"),
        ("openapi: 3.1.0\ninfo: [\n", "bad.yaml:3:1: cannot parse the document"),
        ("- just a list\n", "must be a mapping at the top level"),
    ],
)
async def test_invalid_documents_are_unavailable_with_a_reason(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SourceUnavailable) as caught:
        await discover(path)
    assert message in str(caught.value)


async def test_missing_document(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="cannot read the OpenAPI document"):
        await discover(tmp_path / "nope.yaml")


async def test_names_collisions_and_filters(tmp_path: Path) -> None:
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a": {"get": {"operationId": "list", "responses": {"200": {"description": "ok"}}}},
            "/b": {"get": {"operationId": "list", "responses": {"200": {"description": "ok"}}}},
            "/c": {"get": {"operationId": "list_2", "responses": {"200": {"description": "ok"}}}},
            "/d": {
                "post": {"operationId": "make thing", "responses": {"200": {"description": "ok"}}}
            },
            "/pets/{petId}/toys": {
                "get": {
                    "parameters": [
                        {
                            "name": "petId",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
    }
    path = tmp_path / "names.json"
    path.write_text(json.dumps(document))
    discovery = await discover(path)
    provenance = {t.name: t.provenance["operation"] for t in discovery.tools}
    assert provenance == {
        "list": "GET /a",
        "list_3": "GET /b",  # list_2 is owned by /c
        "list_2": "GET /c",
        "make_thing": "POST /d",
        "get_pets_petId_toys": "GET /pets/{petId}/toys",
    }
    filtered = await discover(path, include=("list*",), exclude=("list_3",))
    assert sorted(t.name for t in filtered.tools) == ["list", "list_2"]


async def test_unsupported_operations_are_skipped_with_precise_reasons(tmp_path: Path) -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/xml": {
                "post": {
                    "operationId": "xml",
                    "requestBody": {"content": {"application/xml": {"schema": {}}}},
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/multi": {
                "post": {
                    "operationId": "multi",
                    "requestBody": {
                        "content": {
                            "multipart/form-data": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"f": {"type": "string", "format": "binary"}},
                                }
                            }
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/formobj": {
                "post": {
                    "operationId": "formobj",
                    "requestBody": {
                        "content": {
                            "application/x-www-form-urlencoded": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"o": {"type": "object"}},
                                }
                            }
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/textobj": {
                "post": {
                    "operationId": "textobj",
                    "requestBody": {"content": {"text/plain": {"schema": {"type": "object"}}}},
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/undeclared/{id}": {
                "get": {"operationId": "undeclared", "responses": {"200": {"description": "ok"}}}
            },
            "/space": {
                "get": {
                    "operationId": "space",
                    "parameters": [
                        {
                            "name": "o",
                            "in": "query",
                            "style": "spaceDelimited",
                            "schema": {"type": "object"},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/deep": {
                "get": {
                    "operationId": "deep",
                    "parameters": [
                        {
                            "name": "o",
                            "in": "query",
                            "style": "deepObject",
                            "explode": True,
                            "schema": {"type": "object", "properties": {"n": {"type": "object"}}},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/spacex": {
                "get": {
                    "operationId": "spacex",
                    "parameters": [
                        {
                            "name": "a",
                            "in": "query",
                            "style": "spaceDelimited",
                            "explode": True,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/deepflat": {
                "get": {
                    "operationId": "deepflat",
                    "parameters": [
                        {
                            "name": "o",
                            "in": "query",
                            "style": "deepObject",
                            "schema": {"type": "object"},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/twice": {
                "get": {
                    "operationId": "twice",
                    "parameters": [
                        {"name": "a", "in": "query", "schema": {"type": "string"}},
                        {"name": "a", "in": "query", "schema": {"type": "integer"}},
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/content": {
                "get": {
                    "operationId": "content",
                    "parameters": [
                        {"name": "a", "in": "query", "content": {"text/csv": {"schema": {}}}}
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
    }
    path = tmp_path / "skips.json"
    path.write_text(json.dumps(document))
    discovery = await discover(path)
    # multipart/form-data is callable with the tagged binary shape (issue 13).
    assert [t.name for t in discovery.tools] == ["multi"]
    assert {s.name: s.reason for s in discovery.skipped} == {
        "xml": "POST /xml: request body media type application/xml is not supported "
        "(JSON, form-urlencoded, text/plain, multipart/form-data and binary only)",
        "formobj": "POST /formobj: form field 'o': objects inside form bodies are not supported",
        "textobj": "POST /textobj: text/plain request body needs a string schema",
        "undeclared": "GET /undeclared/{id}: path parameter {id} is not declared",
        "space": "GET /space: parameter 'o' (query): spaceDelimited objects are not supported",
        "deep": "GET /deep: parameter 'o' (query): deepObject with nested objects or arrays is undefined",
        "spacex": "GET /spacex: parameter 'a' (query): spaceDelimited with explode=true is undefined",
        "deepflat": "GET /deepflat: parameter 'o' (query): deepObject needs explode=true "
        "(explode=false is undefined)",
        "twice": "GET /twice: parameter 'a' (query) is declared twice",
        "content": "GET /content: parameter 'a' (query): content media type 'text/csv' is not supported",
    }


def _corpus() -> list[Path]:
    root = node_package("@readme/oas-examples")
    return sorted(
        [
            *root.glob("3.0/*/*.json"),
            *root.glob("3.0/*/*.yaml"),
            *root.glob("3.1/*/*.json"),
            *root.glob("3.1/*/*.yaml"),
        ]
    )


async def test_readme_corpus_loads_and_every_skip_has_a_reason() -> None:
    documents = _corpus()
    assert len(documents) >= 100
    loaded = 0
    for document in documents:
        try:
            discovery = await discover(document)
        except SourceUnavailable as exc:
            assert str(exc), document  # a precise reason, never a crash
            continue
        loaded += 1
        for skipped in discovery.skipped:
            assert skipped.name and len(skipped.reason) > 10, (document, skipped)
        catalog = Catalog.build({"api": discovery})
        assert len(catalog.tools) == len({t.name for t in discovery.tools})
    assert loaded == len(documents)


async def test_petstore_30_and_31() -> None:
    root = node_package("@readme/oas-examples")
    for version in ("3.0", "3.1"):
        discovery = await discover(
            root / version / "json" / "petstore.json", auth={"api_key": "k", "bearer": "t"}
        )
        names = {t.name for t in discovery.tools}
        assert {"addPet", "getPetById", "findPetsByStatus", "deletePet", "placeOrder"} <= names
        assert tool(discovery, "findPetsByTags").deprecated is True
        get_pet = tool(discovery, "getPetById")
        assert get_pet.input_schema["required"] == ["petId"]
        assert get_pet.output_schema is not None and get_pet.output_schema["$ref"] == "#/$defs/Pet"
        # application/octet-stream is callable with the tagged binary shape (issue 13).
        assert {s.name for s in discovery.skipped} == set()
        upload = json.dumps(tool(discovery, "uploadFile").input_schema)
        assert '"$bytes"' in upload and '"contentEncoding": "base64"' in upload
