"""Differential: the TypeScript projection admits every schema-valid instance.

Every valid instance of the official JSON-Schema-Test-Suite (required tests of draft2020-12
and draft7) is written as a TypeScript literal and assigned to the projected type of its
schema; the real compiler (``tsc --strict``) must accept it. The only rejections allowed are
the two documented conventions of ADR 0014, recognized structurally by ``_convention``:

1. an object whose ``additionalProperties`` is unset is closed to undocumented keys;
2. ``properties``/``required`` without ``type`` read as an object, ``items``/``prefixItems``
   without ``type`` as an array (so a non-object / non-array instance is refused).

Plus what the projection documents as beyond TypeScript (numbers are ``number``: nothing
distinguishes 1 from 1.0, so no case is lost there).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from codemodekit.schema import DRAFT7, DRAFT202012, SchemaUnsupported, normalize_schema
from codemodekit.schema.typescript import SchemaDeclarations, TypeNames, ts_string
from tests.codegen.helpers import typecheck
from tests.conftest import JSON_SCHEMA_SUITE, jsonschema_suite

SUITE = JSON_SCHEMA_SUITE
DIALECTS = {"draft2020-12": DRAFT202012, "draft7": DRAFT7}
# Files whose schemas only use remote documents or custom meta-schemas.
_REMOTE = {"refRemote", "vocabulary"}
_OBJECT_KEYWORDS = ("properties", "required", "patternProperties", "additionalProperties")
_ARRAY_KEYWORDS = ("items", "prefixItems", "additionalItems")


def ts_literal(value: Any) -> str:
    """``value`` as a TypeScript expression of the same JSON shape (keys as computed
    literals, so ``__proto__`` is an own property, as in JSON)."""
    if isinstance(value, dict):
        body = ", ".join(f"[{ts_string(k)}]: {ts_literal(v)}" for k, v in value.items())
        return "{ " + body + " }" if body else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(ts_literal(v) for v in value) + "]"
    if isinstance(value, str):
        return ts_string(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(value)
    return json.dumps(value)


def _convention(schema: Any, instance: Any, root: Any, depth: int = 0) -> str | None:
    """Which documented convention (if any) makes the projection refuse ``instance``
    somewhere in ``schema``; a conservative structural walk, not a validator."""
    if not isinstance(schema, Mapping) or depth > 20:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and isinstance(root, Mapping) and ref == root.get("$id"):
        ref = "#"
    if isinstance(ref, str) and ref.startswith("#"):
        target: Any = root
        for token in [t for t in ref[1:].split("/") if t]:
            token = token.replace("~1", "/").replace("~0", "~")
            target = target.get(token) if isinstance(target, Mapping) else None
        found = _convention(target, instance, root, depth + 1)
        if found:
            return found
    has_type = "type" in schema
    if (
        not has_type
        and any(k in schema for k in _OBJECT_KEYWORDS)
        and not isinstance(instance, dict)
    ):
        return "object keywords without type read as an object"
    if (
        not has_type
        and any(k in schema for k in _ARRAY_KEYWORDS)
        and not isinstance(instance, list)
    ):
        return "array keywords without type read as an array"
    if isinstance(instance, dict) and isinstance(schema.get("properties"), Mapping):
        props = schema["properties"]
        opened = ("additionalProperties", "unevaluatedProperties", "patternProperties")
        if not any(k in schema for k in opened) and set(instance) - set(props):
            return "additionalProperties unset: the object is closed"
        for key, sub in props.items():
            if key in instance:
                found = _convention(sub, instance[key], root, depth + 1)
                if found:
                    return found
    if isinstance(instance, list) and isinstance(schema.get("items"), Mapping):
        for item in instance:
            found = _convention(schema["items"], item, root, depth + 1)
            if found:
                return found
    for keyword in ("allOf", "anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                found = _convention(branch, instance, root, depth + 1)
                if found:
                    return found
    return None


def _cases() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for folder, dialect in DIALECTS.items():
        for path in sorted((SUITE / "tests" / folder).glob("*.json")):
            if path.stem in _REMOTE:
                continue
            for index, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
                yield f"{folder}/{path.stem}/{index}", dialect, case


def _program(dialect: str, case: dict[str, Any]) -> tuple[str, list[tuple[int, Any]]] | None:
    """A module declaring ``Root`` and one assignment per valid instance (line, instance)."""
    try:
        schema = normalize_schema(case["schema"], default_dialect=dialect)
    except SchemaUnsupported:
        return None  # remote documents: quarantined, never projected
    names = TypeNames()
    root = names.allocate("Root")
    lines = ["export {};", SchemaDeclarations(schema, root_name=root, names=names).render()]
    lines = "\n".join(lines).splitlines()
    checks: list[tuple[int, Any]] = []
    for n, test in enumerate(case["tests"]):
        if not test["valid"] or _convention(schema, test["data"], schema):
            continue
        try:
            literal = ts_literal(test["data"])
        except ValueError:
            continue
        lines.append(f"const v{n}: {root} = {literal};")
        checks.append((len(lines), test))
    return ("\n".join(lines) + "\n", checks) if checks else None


def test_every_schema_valid_instance_is_assignable(tmp_path: Path) -> None:
    jsonschema_suite()
    programs: dict[Path, tuple[str, list[tuple[int, Any]]]] = {}
    for case_id, dialect, case in _cases():
        built = _program(dialect, case)
        if built is None:
            continue
        path = tmp_path / (case_id.replace("/", "__") + ".ts")
        path.write_text(built[0], encoding="utf-8")
        programs[path] = (case_id + ": " + case["description"], built[1])
    assert len(programs) > 300
    checked = {title.split("/")[1] for title, _ in programs.values()}
    assert {"patternProperties", "unevaluatedProperties", "properties", "allOf"} <= checked
    # One program: every file is a module, so their ``Root``s never meet.
    (errors,) = typecheck([list(programs)]).values()
    failures = []
    for error in errors:
        file, _, message = error.partition("(")
        title, _ = programs[Path(file)]
        failures.append(f"{title}\n    {message}")
    assert not failures, f"{len(failures)} rejections:\n" + "\n".join(failures[:60])


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        ({"properties": {"a": {}}}, 1, "object keywords without type read as an object"),
        (
            {"type": "object", "properties": {"a": {}}},
            {"b": 1},
            "additionalProperties unset: the object is closed",
        ),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, {"b": 1}, None),
        ({"items": {"type": "string"}}, "x", "array keywords without type read as an array"),
        ({"type": "array", "items": {"type": "string"}}, ["x"], None),
    ],
)
def test_the_convention_filter_is_narrow(schema: Any, instance: Any, expected: str | None) -> None:
    assert _convention(schema, instance, schema) == expected


def _declare(schema: dict[str, Any]) -> str:
    names = TypeNames()
    root = names.allocate("Root")
    return SchemaDeclarations(
        normalize_schema(schema, default_dialect=DRAFT202012), root_name=root, names=names
    ).render()


# (schema, instance the schema admits, instance it refuses): the projection must take the
# first and still refuse the second where TypeScript can say so.
_OPENED_NOT_WIDE_OPEN = [
    (
        {"type": "object", "patternProperties": {"^n_": {"type": "number"}}},
        {"n_1": 1, "other": "anything"},
        None,  # a key matching no pattern may be anything: TypeScript cannot type by pattern
    ),
    (
        {
            "type": "object",
            "patternProperties": {"^n_": {"type": "number"}},
            "additionalProperties": False,
        },
        {"n_1": 1},
        {"n_1": "x"},
    ),
    (
        {"type": "object", "properties": {"a": {"type": "string"}}, "unevaluatedProperties": True},
        {"a": "x", "b": [1]},
        {"a": 1},
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "unevaluatedProperties": {"type": "string"},
        },
        {"a": "x", "b": "y"},
        {"a": "x", "b": 2},
    ),
    (
        {
            "type": "object",
            "allOf": [{"properties": {"a": {"type": "string"}}}],
            "properties": {"b": {"type": "number"}},
            "unevaluatedProperties": False,
        },
        {"a": "x", "b": 1},
        {"a": "x", "c": 1},
    ),
    (
        {
            "type": "object",
            "allOf": [
                {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "unevaluatedProperties": {"type": "string"},
                }
            ],
        },
        {"a": "x", "b": "y"},
        {"a": 1},
    ),
    (
        {
            "type": "object",
            "properties": {
                "constructor": {"type": "string"},
                "__proto__": {"type": "number"},
                "toString": {"type": "object", "properties": {"length": {"type": "string"}}},
                "valueOf": {"type": "integer"},
            },
        },
        {},
        {"constructor": 1},
    ),
    (
        {
            "type": "object",
            "properties": {"constructor": {"type": "string"}, "__proto__": {"type": "number"}},
            "required": ["constructor", "__proto__"],
        },
        {"constructor": "c", "__proto__": 1},
        {"constructor": "c", "__proto__": "p"},
    ),
]


def test_opened_objects_still_refuse_what_the_schema_refuses(tmp_path: Path) -> None:
    files = []
    for n, (schema, good, bad) in enumerate(_OPENED_NOT_WIDE_OPEN):
        path = tmp_path / f"case{n}.ts"
        text = f"export {{}};\n{_declare(schema)}\nconst good: Root = {ts_literal(good)};\n"
        if bad is not None:
            text += (
                f"// @ts-expect-error the schema refuses it\nconst bad: Root = {ts_literal(bad)};\n"
            )
        path.write_text(text, encoding="utf-8")
        files.append(path)
    (errors,) = typecheck([files]).values()
    assert not errors, "\n".join(errors)
