"""Request bodies: which media type is sent, and its exact encoding.

Preference: JSON (``application/json``, then any ``*+json``), then
``application/x-www-form-urlencoded``, then ``text/plain`` for a string schema. Form
bodies follow the Encoding Object: each top-level property is serialized like a query
parameter with its ``style`` (default ``form``), ``explode`` (default true for ``form``)
and ``allowReserved``; RFC 3986 percent-encoding (a space is ``%20``, which every form
decoder reads as a space). Nested objects, per-property ``contentType`` and headers,
multipart, XML and raw binary bodies are refused with the reason (binary arguments would
need an explicit tagged shape: seed 002).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemodekit.errors import ToolError
from codemodekit.providers.openapi import parameters as params
from codemodekit.providers.openapi.document import OpenApiDocument, UnresolvedRef
from codemodekit.providers.openapi.parameters import ParamPlan, Unsupported
from codemodekit.providers.openapi.schemas import SchemaConverter, schema_kinds

FORM = "application/x-www-form-urlencoded"
_BODY_KEYS = ("body", "requestBody", "request_body")


@dataclass(frozen=True, slots=True)
class BodyPlan:
    key: str
    """Property of the input object that holds the body."""
    media_type: str
    required: bool
    kind: str
    """``json``, ``form`` or ``text``."""
    fields: tuple[ParamPlan, ...] = ()
    """Form bodies: how each declared property is serialized."""


def is_json(media: str) -> bool:
    base = media.split(";", 1)[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


def _choose(content: Mapping[str, Any]) -> tuple[str, str]:
    media_types = [m for m in content if isinstance(m, str)]
    json_types = [m for m in media_types if is_json(m)]
    if json_types:
        return ("application/json" if "application/json" in json_types else json_types[0]), "json"
    for media in media_types:
        if media.split(";", 1)[0].strip().lower() == FORM:
            return media, "form"
    for media in media_types:
        if media.split(";", 1)[0].strip().lower() == "text/plain":
            return media, "text"
    kinds = ", ".join(sorted(media_types))
    raise Unsupported(
        f"request body media type {kinds} is not supported "
        "(JSON, form-urlencoded and text/plain only)"
    )


def plan_body(
    document: OpenApiDocument,
    converter: SchemaConverter,
    raw: Any,
    base: Path,
    taken: Mapping[str, Any],
) -> tuple[BodyPlan, Any, set[str]] | None:
    """(plan, converted schema, $defs used) for an operation's ``requestBody``."""
    if raw is None:
        return None
    try:
        body, base = document.deref(raw, base)
    except UnresolvedRef as exc:
        raise Unsupported(f"request body: {exc.reason}") from None
    if not isinstance(body, Mapping):
        raise Unsupported("request body is not an object")
    content = body.get("content")
    if not isinstance(content, Mapping) or not content:
        raise Unsupported("request body declares no media type")
    media, kind = _choose(content)
    media_obj = content[media] if isinstance(content[media], Mapping) else {}
    raw_schema = media_obj.get("schema", {})
    fields: tuple[ParamPlan, ...] = ()
    if kind == "form":
        fields = _form_fields(converter, raw_schema, base, media_obj.get("encoding"))
    elif kind == "text":
        kinds = schema_kinds(raw_schema, converter, base)
        if kinds != {"primitive"}:
            raise Unsupported("text/plain request body needs a string schema")
    schema, used = converter.convert(raw_schema, base)
    schema = dict(schema) if isinstance(schema, Mapping) else ({} if schema else {"not": {}})
    description = body.get("description")
    if isinstance(description, str) and description.strip() and "description" not in schema:
        schema["description"] = description.strip()
    key = next((k for k in _BODY_KEYS if k not in taken), None)
    if key is None:
        key, n = "body_2", 2
        while key in taken:
            n += 1
            key = f"body_{n}"
    required = body.get("required") is True
    plan = BodyPlan(key, media.split(";", 1)[0].strip(), required, kind, fields)
    return plan, schema, used


def _form_fields(
    converter: SchemaConverter, schema: Any, base: Path, encoding: Any
) -> tuple[ParamPlan, ...]:
    try:
        target, target_base = converter.document.deref(schema, base)
    except UnresolvedRef as exc:
        raise Unsupported(f"form request body: {exc.reason}") from None
    properties = target.get("properties") if isinstance(target, Mapping) else None
    if not isinstance(properties, Mapping) or not properties:
        raise Unsupported("form request body needs an object schema with properties")
    encodings = encoding if isinstance(encoding, Mapping) else {}
    fields: list[ParamPlan] = []
    for name, prop in properties.items():
        rule = encodings.get(name, {})
        rule = rule if isinstance(rule, Mapping) else {}
        label = f"form field {name!r}"
        if "contentType" in rule or "headers" in rule:
            raise Unsupported(f"{label}: per-field contentType/headers are not supported")
        style = rule.get("style", "form")
        if style not in ("form", "spaceDelimited", "pipeDelimited", "deepObject"):
            raise Unsupported(f"{label}: style {style!r} is not defined for form bodies")
        explode = rule.get("explode", style == "form")
        if not isinstance(explode, bool):
            raise Unsupported(f"{label}: 'explode' must be a boolean")
        kinds = schema_kinds(prop, converter, target_base)
        if style != "deepObject" and kinds is not None and "object" in kinds:
            raise Unsupported(f"{label}: objects inside form bodies are not supported")
        params.check_style(label, "query", style, explode, kinds, prop, converter, target_base)
        allow_reserved = rule.get("allowReserved") is True
        fields.append(ParamPlan(name, name, "query", style, explode, False, allow_reserved))
    return tuple(fields)


def encode_body(plan: BodyPlan, value: Any) -> bytes:
    if plan.kind == "json":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if plan.kind == "text":
        if not isinstance(value, str):
            raise ToolError(f"{plan.key}: a text/plain body must be a string")
        return value.encode()
    if not isinstance(value, Mapping):
        raise ToolError(f"{plan.key}: a form body must be an object")
    by_name = {f.name: f for f in plan.fields}
    pairs: list[str] = []
    for name, item in value.items():
        if item is None:
            continue
        field = by_name.get(name) or ParamPlan(name, name, "query", "form", True, False)
        if isinstance(item, Mapping) and field.style != "deepObject":
            raise ToolError(f"form field {name!r}: objects cannot be form-encoded")
        wire = params.Wire(path_values={}, query=pairs, headers=[], cookies=[])
        params.serialize(field, item, wire)
    return "&".join(pairs).encode()
