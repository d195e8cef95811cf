"""Request bodies: which media type is sent, and its exact encoding.

Preference: JSON (``application/json``, then any ``*+json``), then
``application/x-www-form-urlencoded``, then ``text/plain`` for a string schema, then
``multipart/form-data``, then raw binary (``application/octet-stream``, ``image/*``… or a
``format: binary`` string). Form bodies follow the Encoding Object: each top-level property
is serialized like a query parameter with its ``style`` (default ``form``), ``explode``
(default true for ``form``) and ``allowReserved``; RFC 3986 percent-encoding (a space is
``%20``, which every form decoder reads as a space). Binary data is the tagged shape
``{ $bytes: "<base64>", mediaType }`` (ADR 0023): a raw body is one such value, a multipart
body an object whose ``format: binary`` fields are. Nested objects in form bodies,
per-property ``contentType`` and headers, and XML bodies are refused with the reason.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemodekit.binary import BYTES_SCHEMA, BytesValueError, decode_bytes_value, is_bytes_value
from codemodekit.errors import ToolError
from codemodekit.providers.openapi import parameters as params
from codemodekit.providers.openapi.document import OpenApiDocument, UnresolvedRef
from codemodekit.providers.openapi.parameters import ParamPlan, Unsupported
from codemodekit.providers.openapi.schemas import SchemaConverter, schema_kinds

FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
_BODY_KEYS = ("body", "requestBody", "request_body")


@dataclass(frozen=True, slots=True)
class BodyPlan:
    key: str
    """Property of the input object that holds the body."""
    media_type: str
    required: bool
    kind: str
    """``json``, ``form``, ``text``, ``multipart`` or ``binary``."""
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
    for media in media_types:
        if media.split(";", 1)[0].strip().lower() == MULTIPART:
            return media, "multipart"
    for media in media_types:
        if _is_binary(media, content[media]):
            return media, "binary"
    kinds = ", ".join(sorted(media_types))
    raise Unsupported(
        f"request body media type {kinds} is not supported "
        "(JSON, form-urlencoded, text/plain, multipart/form-data and binary only)"
    )


def _binary_schema(schema: Any) -> bool:
    return (
        isinstance(schema, Mapping)
        and schema.get("type") == "string"
        and (schema.get("format") == "binary" or "contentMediaType" in schema)
    )


def _is_binary(media: str, media_obj: Any) -> bool:
    base = media.split(";", 1)[0].strip().lower()
    schema = media_obj.get("schema") if isinstance(media_obj, Mapping) else None
    if base == "application/octet-stream" or _binary_schema(schema):
        return True
    # An image, audio, video or PDF body without a schema is raw bytes (OpenAPI 3.1).
    return base.split("/", 1)[0] in ("image", "audio", "video") or base == "application/pdf"


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
    used: set[str] = set()
    if kind == "binary":
        schema: Any = dict(BYTES_SCHEMA)
    elif kind == "multipart":
        schema, used = _multipart_schema(converter, raw_schema, base)
    else:
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


def _multipart_schema(
    converter: SchemaConverter, raw_schema: Any, base: Path
) -> tuple[Any, set[str]]:
    """The object schema of a multipart body, its ``format: binary`` fields (and arrays of
    them) turned into the tagged ``$bytes`` shape."""
    try:
        target, target_base = converter.document.deref(raw_schema, base)
    except UnresolvedRef as exc:
        raise Unsupported(f"multipart request body: {exc.reason}") from None
    properties = target.get("properties") if isinstance(target, Mapping) else None
    if not isinstance(properties, Mapping) or not properties:
        raise Unsupported("multipart request body needs an object schema with properties")
    schema, used = converter.convert(target, target_base)
    schema = dict(schema) if isinstance(schema, Mapping) else {}
    converted = dict(schema.get("properties") or {})
    for name, prop in properties.items():
        try:
            prop, _ = converter.document.deref(prop, target_base)
        except UnresolvedRef:
            continue
        if _binary_schema(prop):
            converted[name] = dict(BYTES_SCHEMA)
        elif (
            isinstance(prop, Mapping)
            and prop.get("type") == "array"
            and _binary_schema(converter.document.deref(prop.get("items"), target_base)[0])
        ):
            converted[name] = {"type": "array", "items": dict(BYTES_SCHEMA)}
    schema["properties"] = converted
    return schema, used


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


def body_request(plan: BodyPlan, value: Any) -> tuple[bytes, str]:
    """The body's bytes and its ``Content-Type`` header."""
    if plan.kind == "binary":
        data, media = _decode(plan.key, value)
        return data, media or plan.media_type
    if plan.kind == "multipart":
        return _multipart(plan, value)
    content = encode_body(plan, value)
    return content, plan.media_type + "; charset=utf-8" if plan.kind == "text" else plan.media_type


def _decode(label: str, value: Any) -> tuple[bytes, str | None]:
    try:
        return decode_bytes_value(value)
    except BytesValueError as exc:
        raise ToolError(f"{label}: {exc}") from None


def _disposition_name(name: str) -> str:
    # RFC 7578: the field name is a quoted string; quotes and line breaks are escaped.
    return name.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def _multipart(plan: BodyPlan, value: Any) -> tuple[bytes, str]:
    if not isinstance(value, Mapping):
        raise ToolError(f"{plan.key}: a multipart body must be an object")
    boundary = "codemode-" + uuid.uuid4().hex
    parts: list[bytes] = []
    for name, item in value.items():
        items = item if isinstance(item, list) and all(map(is_bytes_value, item)) else [item]
        for one in items:
            if one is None:
                continue
            field = _disposition_name(str(name))
            if is_bytes_value(one):
                data, media = _decode(f"{plan.key}.{name}", one)
                head = (
                    f'Content-Disposition: form-data; name="{field}"; filename="{field}"\r\n'
                    f"Content-Type: {media or 'application/octet-stream'}\r\n"
                )
            elif isinstance(one, Mapping | list):
                data = json.dumps(one, separators=(",", ":"), ensure_ascii=False).encode()
                head = (
                    f'Content-Disposition: form-data; name="{field}"\r\n'
                    "Content-Type: application/json\r\n"
                )
            else:
                text = ("true" if one else "false") if isinstance(one, bool) else str(one)
                data = text.encode()
                head = f'Content-Disposition: form-data; name="{field}"\r\n'
            parts.append(f"--{boundary}\r\n{head}\r\n".encode() + data + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return body, f"{MULTIPART}; boundary={boundary}"


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
