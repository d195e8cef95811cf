"""The first issue names the deepest failing location for every kind of subschema.

Issues are found by a bounded walk (``schema.locate``), not by ``jsonschema-rs``'s error
trees; these cases pin that the walk enters each applicator the way the validator applies
it, in every dialect, and words the locations it cannot enter like the validator does.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from codemodekit.schema import DRAFT4, DRAFT7, DRAFT201909, compile_validator, normalize_schema

DEFS = {"S": {"type": "string"}, "N": {"type": "integer", "minimum": 0}}

CASES: list[tuple[str, dict[str, Any], Any, str, str]] = [
    # (case, schema, instance, path, keyword)
    ("property", {"properties": {"a": {"type": "string"}}}, {"a": 1}, "$.a", "type"),
    ("ref", {"properties": {"a": {"$ref": "#/$defs/N"}}}, {"a": -1}, "$.a", "minimum"),
    (
        "root ref",
        {"properties": {"a": {"$ref": "#"}}, "required": ["b"]},
        {"a": {}, "b": 1},
        "$.a",
        "required",
    ),
    (
        "allOf",
        {"allOf": [{"type": "object"}, {"properties": {"a": {"$ref": "#/$defs/S"}}}]},
        {"a": 2},
        "$.a",
        "type",
    ),
    (
        "patternProperties",
        {"patternProperties": {"^x-": {"type": "integer"}}},
        {"x-a": "s"},
        '$["x-a"]',
        "type",
    ),
    (
        "additionalProperties schema",
        {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}},
        {"a": 1, "b": "s"},
        "$.b",
        "type",
    ),
    (
        "additionalProperties false",
        {"properties": {"a": {}}, "additionalProperties": False},
        {"a": 1, "b": 2},
        "$",
        "additionalProperties",
    ),
    (
        "beside patterns",
        {"patternProperties": {"^a": {}}, "additionalProperties": False},
        {"ab": 1, "b": 2},
        "$",
        "additionalProperties",
    ),
    (
        "items",
        {"properties": {"l": {"items": {"$ref": "#/$defs/N"}}}},
        {"l": [1, 2, -3]},
        "$.l[2]",
        "minimum",
    ),
    (
        "prefixItems",
        {"properties": {"l": {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}}},
        {"l": ["a", 1, "b"]},
        "$.l[2]",
        "type",
    ),
    (
        "items false",
        {"properties": {"l": {"prefixItems": [{}], "items": False}}},
        {"l": [1, 2]},
        "$.l[1]",
        "falseSchema",
    ),
    (
        "anyOf",
        {"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
        {"a": 1},
        "$.a",
        "anyOf",
    ),
    (
        "oneOf none",
        {"properties": {"a": {"oneOf": [{"type": "string"}, {"type": "null"}]}}},
        {"a": 1},
        "$.a",
        "oneOf",
    ),
    (
        "oneOf two",
        {"properties": {"a": {"oneOf": [{"type": "string"}, {"minLength": 1}]}}},
        {"a": "x"},
        "$.a",
        "oneOf",
    ),
    ("not", {"properties": {"a": {"not": {"type": "string"}}}}, {"a": "x"}, "$.a", "not"),
    ("false", {"properties": {"a": False}}, {"a": 1}, "$.a", "falseSchema"),
    (
        "required first",
        {"properties": {"a": {"type": "string"}}, "required": ["b"]},
        {"a": 1},
        "$",
        "required",
    ),
    ("propertyNames", {"propertyNames": {"maxLength": 2}}, {"abc": 1}, "$", "propertyNames"),
    ("dependentRequired", {"dependentRequired": {"a": ["b"]}}, {"a": 1}, "$", "required"),
    (
        "if/else",
        {"properties": {"a": {"if": {"type": "string"}, "else": {"minimum": 2}}}},
        {"a": 1},
        "$.a",
        "minimum",
    ),
    (
        "dependentSchemas",
        {"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
        {"a": 1, "b": 2},
        "$.b",
        "type",
    ),
    (
        "if/then",
        {"properties": {"a": {"if": {"type": "string"}, "then": {"minLength": 2}}}},
        {"a": "x"},
        "$.a",
        "minLength",
    ),
]


@pytest.mark.parametrize(
    ("schema", "instance", "path", "keyword"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_first_issue_names_the_failing_location(
    schema: dict[str, Any], instance: Any, path: str, keyword: str
) -> None:
    validator = compile_validator(normalize_schema({"type": "object", **schema, "$defs": DEFS}))
    assert not validator.is_valid(instance)
    issue = validator.first_error(instance)
    assert issue is not None
    assert (issue.path, issue.keyword) == (path, keyword), issue
    assert issue.message


@pytest.mark.parametrize(
    ("dialect", "schema", "instance", "path", "keyword"),
    [
        # Beside $ref, older dialects ignore every keyword.
        (
            DRAFT7,
            {"properties": {"a": {"$ref": "#/definitions/S", "maxLength": 1}}},
            {"a": 1},
            "$.a",
            "type",
        ),
        (
            DRAFT4,
            {"properties": {"a": {"$ref": "#/definitions/S", "maxLength": 1}}},
            {"a": 1},
            "$.a",
            "type",
        ),
        (
            DRAFT7,
            {
                "properties": {
                    "l": {"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}
                }
            },
            {"l": ["a", "b"]},
            "$.l[1]",
            "type",
        ),
        (
            DRAFT201909,
            {"properties": {"l": {"items": {"type": "integer"}}}},
            {"l": [1, "b"]},
            "$.l[1]",
            "type",
        ),
        (
            DRAFT7,
            {"dependencies": {"a": {"properties": {"b": {"type": "string"}}}}},
            {"a": 1, "b": 2},
            "$.b",
            "type",
        ),
        (
            DRAFT7,
            {"properties": {"a": {"if": {"type": "string"}, "then": {"minLength": 2}}}},
            {"a": "x"},
            "$.a",
            "minLength",
        ),
        (
            DRAFT201909,
            {"properties": {"a": {"$ref": "#/$defs/S", "maxLength": 1}}},
            {"a": "long"},
            "$.a",
            "maxLength",
        ),
    ],
)
def test_each_dialect_is_walked_with_its_own_rules(
    dialect: str, schema: dict[str, Any], instance: Any, path: str, keyword: str
) -> None:
    document = {"type": "object", **schema, "definitions": DEFS, "$defs": DEFS}
    validator = compile_validator(normalize_schema(document, default_dialect=dialect))
    issue = validator.first_error(instance)
    assert issue is not None and (issue.path, issue.keyword) == (path, keyword), issue


def _instance(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice(["a", "long text", 1, -1, None, True])
    if roll < 0.7:
        return {rng.choice(["a", "b", "c", "x-1"]): _instance(rng, depth + 1) for _ in range(3)}
    return [_instance(rng, depth + 1) for _ in range(rng.randrange(4))]


SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"anyOf": [{"$ref": "#/$defs/T"}, {"type": "null"}]},
        "b": {"type": "array", "items": {"$ref": "#"}},
        "c": {"allOf": [{"$ref": "#/$defs/T"}, {"oneOf": [{"type": "object"}, {"maxLength": 3}]}]},
    },
    "patternProperties": {"^x-": {"type": "integer"}},
    "additionalProperties": False,
    "$defs": {"T": {"type": ["string", "object"], "properties": {"a": {"type": "string"}}}},
}


def test_every_issue_points_into_the_instance() -> None:
    validator = compile_validator(normalize_schema(SCHEMA))
    rng = random.Random(7)
    invalid = 0
    for _ in range(2000):
        instance = _instance(rng)
        issues = validator.issues(instance)
        if validator.is_valid(instance):
            assert issues == () and validator.first_error(instance) is None
            continue
        invalid += 1
        assert issues and issues[0] == validator.first_error(instance)
        for issue in issues:
            assert _resolve(instance, issue.path) and issue.message
    assert invalid > 500


def _resolve(instance: Any, path: str) -> bool:
    """Whether the JSON path names a value of ``instance`` (``$``, ``.k``, ``["k"]``, ``[i]``)."""
    import json
    import re

    node = instance
    for name, quoted, index in re.findall(r'\.(\w+)|\[("(?:[^"\\]|\\.)*")\]|\[(\d+)\]', path[1:]):
        key: Any = name or (json.loads(quoted) if quoted else int(index))
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return False
    return True


@pytest.mark.parametrize("size", [600, 5_000, 200_000])
def test_one_bad_value_among_many_is_found_wherever_it_is(size: int) -> None:
    schema = {
        "type": "object",
        "properties": {"l": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
        "additionalProperties": {"type": "string"},
        "$defs": DEFS,
    }
    validator = compile_validator(normalize_schema(schema))
    for bad in (0, size // 3, size - 1):
        values: list[Any] = list(range(size))
        values[bad] = -1
        issue = validator.first_error({"l": values})
        assert issue is not None and (issue.path, issue.keyword) == (f"$.l[{bad}]", "minimum")
        extra: dict[str, Any] = {f"k{i}": "v" for i in range(size // 10)}
        extra[f"k{bad // 10}"] = 1
        issue = validator.first_error(extra)
        assert issue is not None and issue.path == f"$.k{bad // 10}", issue
    issues = validator.issues({"l": [-1] * size})
    assert [i.path for i in issues] == [f"$.l[{i}]" for i in range(5)]
