"""Parameters: planning (what is supported), the merged input schema, exact serialization.

Serialization follows the OpenAPI style table (RFC 6570 expansions):

=========  ==========  =========================================================
style      in          supported values
=========  ==========  =========================================================
simple     path,header primitive, array, object (explode true/false)
label      path        primitive, array, object (explode true/false)
matrix     path        primitive, array, object (explode true/false)
form       query       primitive, array, object (explode true/false)
form       cookie      primitive (any explode); array/object with explode=false
space/pipe query       arrays with explode=false (``%20``/``%7C``); objects skip
deepObject query       objects of primitives, explode=true (``color%5BR%5D=100``)
=========  ==========  =========================================================

Anything else skips the operation with a reason. Values are percent-encoded as RFC 3986
requires (``allowReserved`` keeps reserved characters other than ``#[]`` and existing
``%XX`` triplets in query values); header values are never percent-encoded (OAS 3.2
appendix D) and are refused when they contain control characters. ``null`` is treated as absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from codemodekit.errors import ToolError
from codemodekit.providers.openapi.document import OpenApiDocument, UnresolvedRef
from codemodekit.providers.openapi.schemas import SchemaConverter, schema_kinds

LOCATIONS = ("path", "query", "header", "cookie")
_DEFAULT_STYLE = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}
_ALLOWED_STYLES = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
# allowReserved keeps RFC 3986 reserved characters, except "#", "[" and "]", which a query
# can never hold unencoded, and keeps existing %XX triplets (reserved expansion).
_RESERVED_IN_QUERY = ":/?@!$&'()*+,;="
_TRIPLET = re.compile(r"%[0-9A-Fa-f]{2}")


class Unsupported(Exception):
    """The operation cannot be exposed; ``reason`` says why, precisely."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ParamPlan:
    key: str
    """Property name in the tool's input object."""
    name: str
    location: str
    style: str
    explode: bool
    required: bool
    allow_reserved: bool = False
    json_content: bool = False
    """Declared with ``content: application/json``: the value is sent as JSON text."""


@dataclass(frozen=True, slots=True)
class RawParam:
    name: str
    location: str
    spec: Mapping[str, Any]
    base: Path


def collect(
    document: OpenApiDocument, path_level: Any, op_level: Any, base: Path, where: str
) -> list[RawParam]:
    """Path-item parameters overridden by operation parameters with the same (name, in)."""
    merged: dict[tuple[str, str], RawParam] = {}
    for level, items in (("path item", path_level), ("operation", op_level)):
        if items is None:
            continue
        if not isinstance(items, list):
            raise Unsupported(f"{where}: {level} 'parameters' is not a list")
        seen: set[tuple[str, str]] = set()
        for index, item in enumerate(items):
            try:
                spec, spec_base = document.deref(item, base)
            except UnresolvedRef as exc:
                raise Unsupported(f"{level} parameter #{index + 1}: {exc.reason}") from None
            if not isinstance(spec, Mapping):
                raise Unsupported(f"{level} parameter #{index + 1} is not an object")
            name, location = spec.get("name"), spec.get("in")
            if not isinstance(name, str) or not isinstance(location, str):
                raise Unsupported(f"{level} parameter #{index + 1} lacks 'name' or 'in'")
            ident = (name, location.lower() if location.lower() == "header" else location)
            if location == "header":
                ident = (name.lower(), "header")
            if ident in seen:
                raise Unsupported(f"parameter {name!r} ({location}) is declared twice")
            seen.add(ident)
            merged[ident] = RawParam(name, location, spec, spec_base)
    return list(merged.values())


def plan(raw: RawParam, converter: SchemaConverter) -> tuple[ParamPlan, Any, set[str]] | None:
    """Plan one parameter: (plan without key, converted schema, $defs used) or ``None``
    when OpenAPI says to ignore it (``Accept``/``Content-Type``/``Authorization`` headers).
    """
    spec, name, location = raw.spec, raw.name, raw.location
    label = f"parameter {name!r} ({location})"
    if location not in LOCATIONS:
        raise Unsupported(f"{label}: location {location!r} is not supported")
    if location == "header" and name.lower() in _IGNORED_HEADERS:
        return None
    required = location == "path" or spec.get("required") is True
    json_content = False
    if "content" in spec:
        content = spec["content"]
        if not isinstance(content, Mapping) or len(content) != 1:
            raise Unsupported(f"{label}: 'content' must hold exactly one media type")
        media, media_obj = next(iter(content.items()))
        if not _is_json(media):
            raise Unsupported(f"{label}: content media type {media!r} is not supported")
        schema = media_obj.get("schema", {}) if isinstance(media_obj, Mapping) else {}
        json_content = True
        style, explode = _DEFAULT_STYLE[location], False
    else:
        if "schema" not in spec:
            raise Unsupported(f"{label}: neither 'schema' nor 'content' is given")
        schema = spec["schema"]
        style = spec.get("style", _DEFAULT_STYLE[location])
        if not isinstance(style, str):
            raise Unsupported(f"{label}: 'style' must be a string")
        if style not in _ALLOWED_STYLES[location]:
            raise Unsupported(f"{label}: style {style!r} is not defined for {location} parameters")
        explode = spec.get("explode", style == "form")
        if not isinstance(explode, bool):
            raise Unsupported(f"{label}: 'explode' must be a boolean")
        kinds = schema_kinds(schema, converter, raw.base)
        check_style(label, location, style, explode, kinds, schema, converter, raw.base)
    converted, deps = converter.convert(schema, raw.base)
    converted = (
        dict(converted) if isinstance(converted, Mapping) else ({} if converted else {"not": {}})
    )
    description = spec.get("description")
    if isinstance(description, str) and description and "description" not in converted:
        converted["description"] = description
    if spec.get("deprecated") is True:
        converted["deprecated"] = True
    if "examples" not in converted:
        examples = _examples(spec)
        if examples:
            converted["examples"] = examples
    allow_reserved = location == "query" and spec.get("allowReserved") is True
    return (
        ParamPlan("", name, location, style, explode, required, allow_reserved, json_content),
        converted,
        deps,
    )


def _examples(spec: Mapping[str, Any]) -> list[Any]:
    """A parameter's ``example`` or inline ``examples`` values: they help a model most."""
    if "example" in spec:
        return [spec["example"]]
    found = spec.get("examples")
    if not isinstance(found, Mapping):
        return []
    values = [e["value"] for e in found.values() if isinstance(e, Mapping) and "value" in e]
    return values[:3]


def check_style(
    label: str,
    location: str,
    style: str,
    explode: bool,
    kinds: set[str] | None,
    schema: Any,
    converter: SchemaConverter,
    base: Path,
) -> None:
    if style in ("spaceDelimited", "pipeDelimited"):
        if explode:
            raise Unsupported(f"{label}: {style} with explode=true is undefined")
        if kinds is not None and "object" in kinds:
            raise Unsupported(f"{label}: {style} objects are not supported")
        if kinds is not None and "array" not in kinds:
            raise Unsupported(f"{label}: {style} applies only to arrays")
    if style == "deepObject":
        if not explode:
            raise Unsupported(
                f"{label}: deepObject needs explode=true (explode=false is undefined)"
            )
        if kinds is not None and kinds != {"object"}:
            raise Unsupported(f"{label}: deepObject applies only to objects")
        if _has_nested_properties(schema, converter, base):
            raise Unsupported(f"{label}: deepObject with nested objects or arrays is undefined")
    if location == "cookie" and explode and kinds is not None and kinds & {"array", "object"}:
        raise Unsupported(
            f"{label}: cookie form style with explode=true is undefined for arrays and objects"
        )
    if kinds is not None and "array" in kinds and style != "deepObject":
        items = _items(schema, converter, base)
        item_kinds = schema_kinds(items, converter, base) if items is not None else None
        if item_kinds is not None and item_kinds & {"array", "object"}:
            raise Unsupported(
                f"{label}: arrays of arrays or objects have no defined serialization in style {style!r}"
            )
    if kinds is not None and "object" in kinds and _has_nested_properties(schema, converter, base):
        raise Unsupported(
            f"{label}: objects with nested objects or arrays have no defined serialization in style {style!r}"
        )


def _resolved(schema: Any, converter: SchemaConverter, base: Path) -> tuple[Any, Path]:
    try:
        return converter.document.deref(schema, base)
    except UnresolvedRef:
        return {}, base


def _items(schema: Any, converter: SchemaConverter, base: Path) -> Any:
    target, _ = _resolved(schema, converter, base)
    return target.get("items") if isinstance(target, Mapping) else None


def _has_nested_properties(schema: Any, converter: SchemaConverter, base: Path) -> bool:
    target, target_base = _resolved(schema, converter, base)
    if not isinstance(target, Mapping):
        return False
    props = target.get("properties")
    values = list(props.values()) if isinstance(props, Mapping) else []
    extra = target.get("additionalProperties")
    if isinstance(extra, Mapping):
        values.append(extra)
    for value in values:
        kinds = schema_kinds(value, converter, target_base)
        if kinds is not None and kinds & {"array", "object"}:
            return True
    return False


def _is_json(media: str) -> bool:
    base = media.split(";", 1)[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


# -- serialization ---------------------------------------------------------------------------


def _scalar(value: Any, label: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return json.dumps(value)
    raise ToolError(f"{label}: nested arrays or objects cannot be serialized in this style")


def _enc(text: str, reserved: bool = False) -> str:
    if not reserved:
        return quote(text, safe="")
    out, last = [], 0
    for match in _TRIPLET.finditer(text):
        out.append(quote(text[last : match.start()], safe=_RESERVED_IN_QUERY))
        out.append(match.group(0))
        last = match.end()
    out.append(quote(text[last:], safe=_RESERVED_IN_QUERY))
    return "".join(out)


@dataclass
class Wire:
    """The serialized parts of one request."""

    path_values: dict[str, str]
    query: list[str]
    headers: list[tuple[str, str]]
    cookies: list[str]


def serialize(param: ParamPlan, value: Any, wire: Wire) -> None:
    label = f"parameter {param.key!r}"
    if param.json_content:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        _place_single(param, text, wire, label)
        return
    if param.location == "path":
        wire.path_values[param.name] = _path_value(param, value, label)
    elif param.location == "query":
        wire.query.extend(_query_pairs(param, value, label))
    elif param.location == "header":
        wire.headers.append(
            (param.name, _header_value(_simple(value, param.explode, label, raw=True), label))
        )
    else:
        wire.cookies.append(_cookie(param, value, label))


def _place_single(param: ParamPlan, text: str, wire: Wire, label: str) -> None:
    if param.location == "path":
        wire.path_values[param.name] = _enc(text)
    elif param.location == "query":
        wire.query.append(f"{_enc(param.name)}={_enc(text, param.allow_reserved)}")
    elif param.location == "header":
        wire.headers.append((param.name, _header_value(text, label)))
    else:
        wire.cookies.append(f"{_enc(param.name)}={_enc(text)}")


def _pairs(value: Mapping[str, Any], label: str) -> list[tuple[str, str]]:
    return [(str(k), _scalar(v, label)) for k, v in value.items() if v is not None]


def _items_of(value: list[Any], label: str) -> list[str]:
    return [_scalar(v, label) for v in value if v is not None]


def _simple(value: Any, explode: bool, label: str, raw: bool = False) -> str:
    enc = (lambda s: s) if raw else _enc
    if isinstance(value, list):
        return ",".join(enc(v) for v in _items_of(value, label))
    if isinstance(value, Mapping):
        pairs = _pairs(value, label)
        if explode:
            return ",".join(f"{enc(k)}={enc(v)}" for k, v in pairs)
        return ",".join(f"{enc(k)},{enc(v)}" for k, v in pairs)
    return enc(_scalar(value, label))


def _path_value(param: ParamPlan, value: Any, label: str) -> str:
    if param.style == "simple":
        return _simple(value, param.explode, label)
    if param.style == "label":
        if isinstance(value, list | Mapping) and param.explode:
            sep_pairs = (
                [f"{_enc(k)}={_enc(v)}" for k, v in _pairs(value, label)]
                if isinstance(value, Mapping)
                else [_enc(v) for v in _items_of(value, label)]
            )
            return "".join("." + part for part in sep_pairs)
        return "." + _simple(value, False, label)
    # matrix
    name = _enc(param.name)
    if isinstance(value, list):
        items = _items_of(value, label)
        if param.explode:
            return "".join(f";{name}={_enc(v)}" for v in items)
        return f";{name}=" + ",".join(_enc(v) for v in items)
    if isinstance(value, Mapping):
        pairs = _pairs(value, label)
        if param.explode:
            return "".join(f";{_enc(k)}={_enc(v)}" if v != "" else f";{_enc(k)}" for k, v in pairs)
        return f";{name}=" + ",".join(f"{_enc(k)},{_enc(v)}" for k, v in pairs)
    text = _scalar(value, label)
    return f";{name}" if text == "" else f";{name}={_enc(text)}"


def _query_pairs(param: ParamPlan, value: Any, label: str) -> list[str]:
    name = _enc(param.name)

    def enc(text: str) -> str:
        return _enc(text, param.allow_reserved)

    if param.style == "deepObject":
        if not isinstance(value, Mapping):
            raise ToolError(f"{label}: deepObject style needs an object")
        # "[" and "]" must be percent-encoded in a query (RFC 3986; OAS 3.1.1 appendix E).
        return [f"{name}%5B{enc(k)}%5D={enc(v)}" for k, v in _pairs(value, label)]
    if param.style in ("spaceDelimited", "pipeDelimited"):
        if not isinstance(value, list):
            raise ToolError(f"{label}: {param.style} style needs an array")
        items = _items_of(value, label)
        if not items:
            return []
        delimiter = "%20" if param.style == "spaceDelimited" else "%7C"
        return [f"{name}=" + delimiter.join(enc(v) for v in items)]
    # form
    if isinstance(value, list):
        items = _items_of(value, label)
        if not items:
            return []  # RFC 6570: an empty list is undefined, so nothing is sent
        if param.explode:
            return [f"{name}={enc(v)}" for v in items]
        return [f"{name}=" + ",".join(enc(v) for v in items)]
    if isinstance(value, Mapping):
        pairs = _pairs(value, label)
        if not pairs:
            return []
        if param.explode:
            return [f"{enc(k)}={enc(v)}" for k, v in pairs]
        return [f"{name}=" + ",".join(f"{enc(k)},{enc(v)}" for k, v in pairs)]
    return [f"{name}={enc(_scalar(value, label))}"]


def _header_value(text: str, label: str) -> str:
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text):
        raise ToolError(f"{label}: header values cannot contain control characters")
    if not text.isascii():
        # Headers are never percent-encoded (OAS appendix D): the caller pre-encodes.
        raise ToolError(f"{label}: header values must be ASCII; encode other text first")
    return text


def _cookie(param: ParamPlan, value: Any, label: str) -> str:
    name = _enc(param.name)
    if isinstance(value, list):
        if param.explode:
            raise ToolError(f"{label}: exploded cookie arrays are undefined")
        return f"{name}=" + ",".join(_enc(v) for v in _items_of(value, label))
    if isinstance(value, Mapping):
        if param.explode:
            raise ToolError(f"{label}: exploded cookie objects are undefined")
        return f"{name}=" + ",".join(f"{_enc(k)},{_enc(v)}" for k, v in _pairs(value, label))
    return f"{name}={_enc(_scalar(value, label))}"
