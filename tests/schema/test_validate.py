"""compile_validator / Validator: paths, bounded messages, invalid schemas, no network."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from codemodekit.schema import (
    DRAFT7,
    MAX_ISSUES,
    MAX_MESSAGE,
    SchemaUnsupported,
    Validator,
    compile_validator,
    normalize_schema,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"b": {"type": "integer", "minimum": 0}},
                "required": ["b"],
            },
        },
        "odd key": {"type": "string"},
        "state": {"enum": ["open", "closed"]},
    },
    "additionalProperties": False,
}


def validator(schema: dict[str, Any] = SCHEMA) -> Validator:
    return compile_validator(normalize_schema(schema))


def test_valid_instance_has_no_error() -> None:
    v = validator()
    assert v.is_valid({"a": [{"b": 1}], "state": "open"})
    assert v.first_error({"a": [{"b": 1}], "state": "open"}) is None
    assert v.issues({"a": []}) == ()


@pytest.mark.parametrize(
    ("instance", "path", "keyword"),
    [
        ({"a": [{"b": 1}, {"b": -1}]}, "$.a[1].b", "minimum"),
        ({"a": [{"b": 1}, {}]}, "$.a[1]", "required"),
        ({"odd key": 3}, '$["odd key"]', "type"),
        ({"state": "merged"}, "$.state", "enum"),
        ({"extra": 1}, "$", "additionalProperties"),
        ([], "$", "type"),
    ],
)
def test_first_error_names_the_json_path(instance: Any, path: str, keyword: str) -> None:
    issue = validator().first_error(instance)
    assert issue is not None
    assert (issue.path, issue.keyword) == (path, keyword)
    assert str(issue).startswith(path + ": ")


def test_issues_are_bounded_in_number_and_size() -> None:
    many = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(20)}}
    instance = {f"p{i}": i for i in range(20)}
    issues = validator(many).issues(instance)
    assert len(issues) == MAX_ISSUES
    huge_enum = {"type": "object", "properties": {"x": {"enum": [f"v{i:04}" for i in range(500)]}}}
    issue = validator(huge_enum).first_error({"x": "y" * 10_000})
    assert issue is not None and len(issue.message) <= MAX_MESSAGE
    assert "\n" not in issue.message


@pytest.mark.parametrize("instance", [{"a": {1, 2}}, {"a": b"x"}, {1: "x"}, {"a": object()}])
def test_non_json_instances_are_invalid_not_exceptions(instance: Any) -> None:
    v = validator({"type": "object"})
    assert not v.is_valid(instance)
    issue = v.first_error(instance)
    assert issue is not None and issue.path == "$"


def test_instances_nested_beyond_the_depth_bound_are_invalid() -> None:
    v = validator({"type": "object", "properties": {"a": {"$ref": "#"}}})
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(50_000):  # jsonschema-rs alone overflows the C stack on this
        node["a"] = {}
        node = node["a"]
    assert not v.is_valid(deep)
    issue = v.first_error(deep)
    assert issue is not None and "deeper" in issue.message


def test_invalid_schema_reason_comes_from_the_reference_meta_schema_check() -> None:
    with pytest.raises(SchemaUnsupported) as caught:
        validator({"type": "object", "properties": {"a": {"type": "strin"}}})
    assert caught.value.reason.startswith("invalid schema at $.properties.a.type:")
    with pytest.raises(SchemaUnsupported) as caught:
        validator({"type": "object", "properties": {"a": {"minLength": -1}}})
    assert "$.properties.a.minLength" in caught.value.reason
    assert len(caught.value.reason) <= 300


def test_invalid_regex_pattern_is_unsupported() -> None:
    with pytest.raises(SchemaUnsupported) as caught:
        validator({"type": "object", "properties": {"a": {"pattern": "(unclosed"}}})
    assert caught.value.reason.startswith("invalid schema at $.properties.a.pattern:")


def test_compile_refuses_remote_references_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the validator tried to open a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    # compile_validator on a hand-made schema that skipped normalization still fails closed
    with pytest.raises(SchemaUnsupported) as caught:
        compile_validator({"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/a"}}})
    assert caught.value.reason == "remote $ref http://127.0.0.1:9/a is not fetched"


def test_draft7_dialect_rules_apply() -> None:
    # In draft-07, keywords beside $ref are ignored; in 2020-12 they apply.
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}},
        "definitions": {"s": {"type": "string"}},
    }
    old = compile_validator(normalize_schema(schema, default_dialect=DRAFT7))
    new = compile_validator(normalize_schema(schema))
    assert old.is_valid({"a": "long"})
    assert not new.is_valid({"a": "long"})


def test_formats_are_annotations_not_assertions() -> None:
    v = validator({"type": "object", "properties": {"when": {"type": "string", "format": "date"}}})
    assert v.is_valid({"when": "not a date"})
