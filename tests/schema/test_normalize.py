"""normalize_schema: dialects, object roots, local references, no retrieval, no mutation."""

from __future__ import annotations

import copy
import json
import socket
from types import MappingProxyType
from typing import Any

import pytest

from codemodekit.schema import (
    DRAFT4,
    DRAFT7,
    DRAFT201909,
    DRAFT202012,
    SchemaUnsupported,
    compile_validator,
    normalize_input_schema,
    normalize_schema,
)

OBJ: dict[str, Any] = {"type": "object", "properties": {"id": {"type": "string"}}}


def reason(schema: Any, **kwargs: Any) -> str:
    with pytest.raises(SchemaUnsupported) as caught:
        normalize_schema(schema, **kwargs)
    assert len(caught.value.reason) <= 300
    return caught.value.reason


# --- dialects --------------------------------------------------------------------------


def test_default_dialect_is_2020_12() -> None:
    assert normalize_schema(OBJ)["$schema"] == DRAFT202012


def test_default_dialect_argument_applies_only_without_explicit_schema() -> None:
    assert normalize_schema(OBJ, default_dialect=DRAFT7)["$schema"] == DRAFT7
    explicit = {"$schema": DRAFT201909, **OBJ}
    assert normalize_schema(explicit, default_dialect=DRAFT7)["$schema"] == DRAFT201909


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("http://json-schema.org/draft-07/schema", DRAFT7),
        ("https://json-schema.org/draft-07/schema#", DRAFT7),
        ("https://json-schema.org/draft/2020-12/schema#", DRAFT202012),
        ("http://json-schema.org/draft-04/schema#", DRAFT4),
    ],
)
def test_equivalent_spellings_of_a_dialect_are_canonicalized(written: str, canonical: str) -> None:
    assert normalize_schema({"$schema": written, **OBJ})["$schema"] == canonical


@pytest.mark.parametrize(
    "dialect",
    ["http://json-schema.org/draft-03/schema#", "https://example.com/my-meta-schema", 7],
)
def test_unknown_dialects_are_rejected_with_the_supported_list(dialect: Any) -> None:
    text = reason({"$schema": dialect, **OBJ})
    assert "2020-12" in text


def test_draft4_schema_is_enforced_with_draft4_rules() -> None:
    # draft-04: exclusiveMaximum is a boolean modifier of maximum
    schema = {
        "$schema": DRAFT4,
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}},
    }
    validator = compile_validator(normalize_schema(schema))
    assert validator.is_valid({"n": 4})
    assert not validator.is_valid({"n": 5})


# --- the root must describe an object ---------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [{"type": "string"}, {"type": ["object", "null"]}, {}, {"properties": {"a": {}}}],
)
def test_input_root_must_be_an_object(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaUnsupported) as caught:
        normalize_input_schema(schema)
    assert '"type": "object"' in caught.value.reason
    assert '"type": "object"' in reason(schema, require_object=True)


def test_root_reference_to_an_object_definition_is_an_object() -> None:
    schema = {"$ref": "#/definitions/Args", "definitions": {"Args": OBJ}}
    normalized = normalize_input_schema(schema, default_dialect=DRAFT7)
    assert normalized["$ref"] == "#/definitions/Args"


def test_any_root_is_fine_for_a_general_schema() -> None:
    assert normalize_schema({"type": "array"})["type"] == "array"
    assert normalize_schema(True) == {"$schema": DRAFT202012}
    assert not compile_validator(normalize_schema(False)).is_valid(1)


def test_a_schema_that_is_not_a_mapping_is_rejected() -> None:
    assert "JSON object" in reason(["type", "object"])
    assert "JSON object" in reason(True, require_object=True)


# --- JSON data only --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        (
            {"type": "object", "properties": {"n": {"maximum": float("nan")}}},
            "properties.n.maximum",
        ),
        ({"type": "object", "default": {1, 2}}, "set is not JSON data"),
        ({"type": "object", "properties": {"a": {"const": b"x"}}}, "bytes is not JSON data"),
    ],
)
def test_non_json_values_are_rejected_with_their_path(
    schema: dict[str, Any], fragment: str
) -> None:
    assert fragment in reason(schema)


def test_mapping_and_tuple_inputs_become_plain_json() -> None:
    schema = MappingProxyType(
        {"type": "object", "required": ("id",), "properties": MappingProxyType({"id": {}})}
    )
    normalized = normalize_schema(schema)
    assert normalized["required"] == ["id"]
    assert type(normalized["properties"]) is dict


def test_cyclic_python_structures_are_rejected_not_crashing() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["self"] = schema
    assert "nests too deeply" in reason(schema)


def test_input_is_not_mutated_and_the_result_is_independent() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "$schema": DRAFT7}
    before = copy.deepcopy(schema)
    normalized = normalize_schema(schema)
    assert schema == before
    normalized["properties"]["a"]["type"] = "number"
    assert schema == before


def test_key_order_is_kept_and_dialect_comes_first() -> None:
    schema = {"type": "object", "properties": {"zeta": {}, "alpha": {}}, "required": ["zeta"]}
    normalized = normalize_schema(schema)
    assert list(normalized) == ["$schema", "type", "properties", "required"]
    assert list(normalized["properties"]) == ["zeta", "alpha"]


# --- references ------------------------------------------------------------------------


def test_recursive_local_reference_is_kept_and_enforced() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["value"],
            }
        },
    }
    normalized = normalize_schema(schema)
    assert normalized["$defs"]["Node"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }
    validator = compile_validator(normalized)
    assert validator.is_valid({"root": {"value": 1, "children": [{"value": 2, "children": []}]}})
    issue = validator.first_error({"root": {"value": 1, "children": [{"value": "x"}]}})
    assert issue is not None and issue.path == "$.root.children[0].value"


def test_draft7_definitions_and_ids_resolve_locally() -> None:
    schema = {
        "$schema": DRAFT7,
        "$id": "https://example.com/root.json",
        "type": "object",
        "properties": {"a": {"$ref": "item.json"}, "b": {"$ref": "#/definitions/b"}},
        "definitions": {
            "item": {"$id": "item.json", "type": "integer"},
            "b": {"$ref": "#anchor"},
            "c": {"$id": "#anchor", "type": "string"},
        },
    }
    validator = compile_validator(normalize_schema(schema))
    assert validator.is_valid({"a": 1, "b": "x"})
    assert not validator.is_valid({"a": "1"})


def test_anchor_and_escaped_pointer_references_resolve() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#thing"},
            "b": {"$ref": "#/$defs/a~1b"},
            "c": {"$ref": "#/$defs/with%20space"},
        },
        "$defs": {
            "x": {"$anchor": "thing", "type": "integer"},
            "a/b": {"type": "string"},
            "with space": {"type": "boolean"},
        },
    }
    validator = compile_validator(normalize_schema(schema))
    assert validator.is_valid({"a": 1, "b": "s", "c": True})


@pytest.mark.parametrize(
    ("ref", "shown"),
    [
        ("https://schemas.example.com/user.json", "https://schemas.example.com/user.json"),
        ("http://127.0.0.1:9/x.json#/defs/a", "http://127.0.0.1:9/x.json"),
        ("other.json", "other.json"),
    ],
)
def test_remote_references_are_never_fetched(
    ref: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("normalization tried to open a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    schema = {"type": "object", "properties": {"user": {"$ref": ref}}}
    assert reason(schema) == f"remote $ref {shown} is not fetched"


def test_remote_reference_resolved_against_the_document_id() -> None:
    schema = {
        "$id": "https://example.com/schemas/root.json",
        "type": "object",
        "properties": {"a": {"$ref": "common.json#/defs/a"}},
    }
    assert reason(schema) == "remote $ref https://example.com/schemas/common.json is not fetched"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("#/$defs/Missing", "$ref #/$defs/Missing does not resolve within the schema"),
        (
            "#/properties/a/items/9",
            "$ref #/properties/a/items/9 does not resolve within the schema",
        ),
        ("#nowhere", "$ref #nowhere names no anchor in the schema"),
    ],
)
def test_dangling_local_references_are_rejected(ref: str, expected: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array"}, "b": {"$ref": ref}}}
    assert reason(schema) == expected


def test_ref_shaped_data_is_not_a_reference() -> None:
    schema = {
        "type": "object",
        "properties": {
            "doc": {"const": {"$ref": "https://example.com/not-a-ref"}},
            "$ref": {"type": "string"},
        },
        "examples": [{"$ref": "#/nowhere"}],
    }
    validator = compile_validator(normalize_schema(schema))
    assert validator.is_valid({"doc": {"$ref": "https://example.com/not-a-ref"}, "$ref": "x"})


def test_references_to_standard_meta_schemas_need_no_retrieval() -> None:
    schema = {"type": "object", "properties": {"schema": {"$ref": DRAFT202012}}}
    validator = compile_validator(normalize_schema(schema))
    assert validator.is_valid({"schema": {"type": "string"}})
    assert not validator.is_valid({"schema": {"type": 12}})


def test_normalized_schema_is_json_serializable() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {}}}
    text = json.dumps(normalize_schema(schema))
    assert json.loads(text)["$defs"] == {"A": {}}


def test_credentials_in_a_remote_reference_never_reach_the_reason() -> None:
    ref = "https://deploy:s3cr3t-token@schemas.example.com/user.json?api_key=k3y#/defs/u"
    text = reason({"type": "object", "properties": {"u": {"$ref": ref}}})
    assert text == "remote $ref https://schemas.example.com/user.json?… is not fetched"
    assert "s3cr3t" not in text and "k3y" not in text
    dialect = reason({"$schema": "https://me:pw@example.com/meta?token=t", "type": "object"})
    assert "pw" not in dialect and "token=t" not in dialect
