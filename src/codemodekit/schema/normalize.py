"""Schema normalization: one self-contained, plain-JSON document per schema.

``normalize_schema`` (and ``prepare_schema``, which also returns the JSON text) is the
single entry point every projection shares: validators, TypeScript declarations, search.
It never fetches anything:

- ``$schema`` is kept when explicit (equivalent spellings of a known dialect are
  canonicalized), otherwise set to ``default_dialect`` or draft 2020-12. Accepted
  dialects: 2020-12, 2019-09, draft-07, draft-06, draft-04 (docs/adr/0007).
- With ``require_object`` (tool input schemas: ``normalize_input_schema``, the catalog)
  the root must describe an object, since MCP passes named arguments.
- ``$ref`` / ``$dynamicRef`` / ``$recursiveRef`` must resolve inside the document
  (``$defs``, ``definitions``, embedded ``$id`` resources, anchors) or to a standard
  meta-schema that validators ship with. A remote reference is never fetched: the
  schema is rejected with ``remote $ref <uri> is not fetched``; a dangling local
  reference is rejected too. References stay in place (recursive ones included), so the
  document remains self-contained and every consumer reads the same thing.

The input is serialized once by the C encoder (which also proves it is JSON data); the
slow Python walks run only for inputs that need converting or references that are not
plain ``#/...`` pointers.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

DRAFT202012 = "https://json-schema.org/draft/2020-12/schema"
DRAFT201909 = "https://json-schema.org/draft/2019-09/schema"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT6 = "http://json-schema.org/draft-06/schema#"
DRAFT4 = "http://json-schema.org/draft-04/schema#"

SUPPORTED_DIALECTS: tuple[str, ...] = (DRAFT202012, DRAFT201909, DRAFT7, DRAFT6, DRAFT4)

# Dialects whose `$ref` makes sibling keywords (including `$id`) ignored.
_LEGACY_REF = frozenset({DRAFT7, DRAFT6, DRAFT4})


def _spellings(canonical: str) -> list[str]:
    bare = canonical.rstrip("#")
    out = {bare, bare + "#"}
    for uri in list(out):
        if uri.startswith("http://"):
            out.add("https://" + uri[len("http://") :])
        elif uri.startswith("https://"):
            out.add("http://" + uri[len("https://") :])
    return sorted(out)


_CANONICAL_DIALECT: dict[str, str] = {
    spelling: canonical for canonical in SUPPORTED_DIALECTS for spelling in _spellings(canonical)
}

# Meta-schemas (and 2019-09/2020-12 vocabulary meta-schemas) that both validators bundle;
# a `$ref` to one of them needs no retrieval.
_BUNDLED_PREFIXES = (
    "https://json-schema.org/draft/2020-12/",
    "https://json-schema.org/draft/2019-09/",
)
_BUNDLED = frozenset(
    uri.rstrip("#") for canonical in SUPPORTED_DIALECTS for uri in _spellings(canonical)
)

# Keywords whose values are instance data, never subschemas: `$id`/`$ref` inside them are
# plain data and must not be interpreted.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})

_MAX_REASON = 300
# Below Python's smallest integer-to-text limit (640 digits): only longer ints are tried.
_LONG_INT_BITS = 2000
# Base URI of a document without `$id`: hierarchical so relative references resolve.
_DEFAULT_BASE = "https://codemodekit.invalid/schema.json"
_DEFAULT_ORIGIN = "https://codemodekit.invalid/"


class SchemaUnsupported(Exception):
    """The schema is invalid or cannot be enforced; ``reason`` is model-safe and bounded."""

    def __init__(self, reason: str) -> None:
        reason = bound_text(reason)
        super().__init__(reason)
        self.reason = reason


def bound_text(text: str, limit: int = _MAX_REASON) -> str:
    """``text`` cut to ``limit`` characters, marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the form hashes and revisions are taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_hash(schema: Mapping[str, Any] | None) -> str:
    return hashlib.sha256(canonical_json(schema).encode()).hexdigest()[:16]


def dialect_of(schema: Mapping[str, Any]) -> str:
    """The canonical dialect URI of a normalized schema."""
    value = schema.get("$schema", DRAFT202012)
    return _CANONICAL_DIALECT.get(value, value) if isinstance(value, str) else DRAFT202012


def shown_uri(uri: str) -> str:
    """``uri`` as it may appear in a model-visible reason: no userinfo, no query string
    (either may carry a credential), bounded."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return bound_text(uri, 120)
    netloc = parts.netloc.rpartition("@")[2]
    query = "?…" if parts.query else ""
    fragment = "#" + parts.fragment if parts.fragment else ""
    if parts.scheme or netloc:
        rebuilt = f"{parts.scheme}:" if parts.scheme else ""
        rebuilt += f"//{netloc}" if netloc or uri.startswith(f"{parts.scheme}://") else ""
        rebuilt += parts.path + query + fragment
    else:
        rebuilt = parts.path + query + fragment
    return bound_text(rebuilt, 160)


def _canonical_dialect(value: Any, what: str) -> str:
    canonical = _CANONICAL_DIALECT.get(value) if isinstance(value, str) else None
    if canonical is None:
        shown = repr(shown_uri(value)) if isinstance(value, str) else bound_text(repr(value), 80)
        raise SchemaUnsupported(
            f"unsupported JSON Schema dialect in {what}: {shown}; use draft 2020-12, 2019-09, "
            "draft-07, draft-06 or draft-04"
        )
    return canonical


def json_path(parts: Iterable[str | int]) -> str:
    """``$.a[1].b``; keys that are not identifiers use ``["odd key"]``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += "." + part
        else:
            out += "[" + json.dumps(part, ensure_ascii=False) + "]"
    return out


class _Plain:
    """Conversion to plain JSON (dict/list/str/int/float/bool/None) with precise errors.

    Only used when the C encoder refused the input (a ``Mapping`` that is not a dict, a
    non-string key, NaN, an arbitrary object): returns the same objects where nothing
    had to change.
    """

    __slots__ = ()

    def convert(self, value: Any, path: list[str | int]) -> Any:
        if isinstance(value, int) and value.bit_length() > _LONG_INT_BITS:
            try:
                str(value)
            except ValueError:  # longer than sys.get_int_max_str_digits(): no JSON text
                raise SchemaUnsupported(
                    f"{json_path(path)}: an integer of more than "
                    f"{sys.get_int_max_str_digits()} digits is not supported"
                ) from None
            return value
        if isinstance(value, str | bool | int) or value is None:
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise SchemaUnsupported(f"{json_path(path)}: {value} is not a JSON number")
            return value
        if isinstance(value, Mapping):
            changed = type(value) is not dict
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise SchemaUnsupported(
                        f"{json_path(path)}: object key {key!r} is not a string"
                    )
                path.append(key)
                new = self.convert(item, path)
                path.pop()
                changed = changed or new is not item
                out[key] = new
            return out if changed else value
        if isinstance(value, list | tuple):
            changed = type(value) is not list
            items: list[Any] = []
            for index, item in enumerate(value):
                path.append(index)
                new = self.convert(item, path)
                path.pop()
                changed = changed or new is not item
                items.append(new)
            return items if changed else value
        raise SchemaUnsupported(f"{json_path(path)}: {type(value).__name__} is not JSON data")


class _Refs:
    """Collects resources, anchors and references of one document (no retrieval)."""

    def __init__(self, dialect: str) -> None:
        self.legacy = dialect in _LEGACY_REF
        self.id_keyword = "id" if dialect == DRAFT4 else "$id"
        self.resources: dict[str, Any] = {}
        self.anchors: dict[str, set[str]] = {}
        self.refs: list[tuple[str, str, str]] = []  # (keyword, as written, absolute)

    def walk(self, node: Any, base: str) -> None:
        if isinstance(node, list | tuple):
            for item in node:
                self.walk(item, base)
            return
        if not isinstance(node, dict):
            return
        has_ref = isinstance(node.get("$ref"), str)
        ident = node.get(self.id_keyword)
        if isinstance(ident, str) and not (self.legacy and has_ref):
            if ident.startswith("#"):
                # draft-07 and older: `"$id": "#name"` is a plain-name anchor.
                self.anchors.setdefault(base, set()).add(ident[1:])
            else:
                uri, fragment = urldefrag(_join(base, ident))
                base = uri
                self.resources.setdefault(uri, node)
                if fragment and not fragment.startswith("/"):
                    self.anchors.setdefault(uri, set()).add(fragment)
        for keyword in ("$anchor", "$dynamicAnchor"):
            anchor = node.get(keyword)
            if isinstance(anchor, str):
                self.anchors.setdefault(base, set()).add(anchor)
        for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
            ref = node.get(keyword)
            if isinstance(ref, str):
                self.refs.append((keyword, ref, _join(base, ref)))
        for key, value in node.items():
            if key not in _DATA_KEYWORDS and isinstance(value, dict | list | tuple):
                self.walk(value, base)


def _join(base: str, ref: str) -> str:
    """RFC 3986 resolution that also handles fragment-only references against URNs."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if urlsplit(ref).scheme:
        return ref
    return urljoin(base, ref)


def _pointer_target(document: Any, pointer: str) -> bool:
    node = document
    for raw in pointer.split("/")[1:]:
        token = (unquote(raw) if "%" in raw else raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list | tuple) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


# A `"$ref": "<string>"` member in compact JSON text (json.dumps escapes `"` and `\`).
_REF_IN_TEXT = re.compile(r'"(\$ref|\$dynamicRef|\$recursiveRef)":"((?:[^"\\]|\\.)*)"')
_IDENTIFIERS_IN_TEXT = ('"$id":', '"$anchor":', '"$dynamicAnchor":')


def _refs_resolve_trivially(document: dict[str, Any], text: str, dialect: str) -> bool:
    """True when every reference is a JSON pointer into this document without `$id`s.

    The common shape (``#/$defs/X``) costs a regex scan instead of a tree walk; anything
    else (identifiers, anchors, relative URIs, a pointer that misses) takes the precise
    walk, which also gives the exact reason.
    """
    if any(marker in text for marker in _IDENTIFIERS_IN_TEXT):
        return False
    if dialect == DRAFT4 and '"id":' in text:
        return False
    for raw in {match.group(2) for match in _REF_IN_TEXT.finditer(text)}:  # each ref once
        ref = json.loads(f'"{raw}"') if "\\" in raw else raw
        if not (ref == "#" or ref.startswith("#/")) or not _pointer_target(document, ref[1:]):
            return False
    return True


def _check_refs(schema: dict[str, Any], dialect: str, text: str = "") -> None:
    if text and _refs_resolve_trivially(schema, text, dialect):
        return
    refs = _Refs(dialect)
    root_id = schema.get(refs.id_keyword)
    base = _DEFAULT_BASE
    if isinstance(root_id, str) and not root_id.startswith("#"):
        base = urldefrag(_join(_DEFAULT_BASE, root_id))[0]
    refs.resources[base] = schema
    refs.walk(schema, base)
    for keyword, written, absolute in refs.refs:
        resource, fragment = urldefrag(absolute)
        if resource not in refs.resources:
            if resource in _BUNDLED or resource.startswith(_BUNDLED_PREFIXES):
                continue  # a standard meta-schema: bundled by the validators, never fetched
            shown = shown_uri(written if resource.startswith(_DEFAULT_ORIGIN) else resource)
            raise SchemaUnsupported(f"remote {keyword} {shown} is not fetched")
        document = refs.resources[resource]
        if fragment == "" or fragment.startswith("/"):
            if not _pointer_target(document, fragment):
                raise SchemaUnsupported(
                    f"{keyword} {shown_uri(written)} does not resolve within the schema"
                )
        elif fragment not in refs.anchors.get(resource, ()):
            raise SchemaUnsupported(f"{keyword} {shown_uri(written)} names no anchor in the schema")


def _describes_object(schema: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    seen = 0
    node: Any = schema
    while isinstance(node, Mapping) and seen < 8:
        kind = node.get("type")
        if kind == "object" or (isinstance(kind, list | tuple) and list(kind) == ["object"]):
            return True
        ref = node.get("$ref")
        if kind is not None or not isinstance(ref, str) or not ref.startswith("#/"):
            return False
        target: Any = root
        for raw in ref[2:].split("/"):
            token = unquote(raw).replace("~1", "/").replace("~0", "~")
            target = target.get(token) if isinstance(target, Mapping) else None
        node = target
        seen += 1
    return False


@dataclass(frozen=True, slots=True)
class PreparedSchema:
    """A normalized schema and its compact JSON text (what hashes and validators read)."""

    document: dict[str, Any]
    """The normalized document. Nested values may be shared with the input: read it,
    never mutate it (``json.loads(text)`` gives a private copy)."""
    text: str
    """``json.dumps`` of ``document``, key order kept, no whitespace."""
    dialect: str


# Cycles still fail (as RecursionError); skipping the id bookkeeping saves a quarter.
_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)


def compact_json(value: Any) -> str:
    """Compact JSON, keys in their own order; ``TypeError``/``ValueError`` if not JSON."""
    return _ENCODER.encode(value)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def prepare_schema(
    schema: Mapping[str, Any] | bool,
    *,
    default_dialect: str | None = None,
    require_object: bool = False,
) -> PreparedSchema:
    """``normalize_schema`` plus the document's JSON text, serialized exactly once."""
    if isinstance(schema, bool) and not require_object:
        schema = {} if schema else {"not": {}}
    if not isinstance(schema, Mapping):
        raise SchemaUnsupported(f"schema must be a JSON object, got {type(schema).__name__}")
    explicit = schema.get("$schema")
    if explicit is not None:
        dialect = _canonical_dialect(explicit, "$schema")
    else:
        dialect = _canonical_dialect(default_dialect or DRAFT202012, "default dialect")
    out: dict[str, Any] = {"$schema": dialect}
    out.update((k, v) for k, v in schema.items() if k != "$schema")
    document = out
    try:
        # The C encoder both checks that this is JSON data and serializes it; the slow,
        # precise walk runs only to explain a failure or to convert Mapping/tuple inputs.
        text = _dumps(out)
    except (TypeError, ValueError, RecursionError):
        try:
            document = _Plain().convert(out, [])
            text = _dumps(document)
        except RecursionError:
            raise SchemaUnsupported("schema nests too deeply") from None
        except (TypeError, ValueError) as exc:  # what the walk above did not foresee
            raise SchemaUnsupported(f"schema is not JSON data: {bound_text(str(exc))}") from None
    if require_object and not _describes_object(document, document):
        kind = document.get("type")
        shown = "none" if kind is None else json.dumps(kind)
        raise SchemaUnsupported(
            'input schema root must have "type": "object" (tools take named arguments); '
            f"got type {bound_text(shown, 60)}"
        )
    if '"$ref"' in text or '"$dynamicRef"' in text or '"$recursiveRef"' in text:
        try:
            _check_refs(document, dialect, text)
        except RecursionError:
            raise SchemaUnsupported("schema nests too deeply") from None
    return PreparedSchema(document, text, dialect)


def normalize_schema(
    schema: Mapping[str, Any] | bool,
    *,
    default_dialect: str | None = None,
    require_object: bool = False,
) -> dict[str, Any]:
    """The normalized, self-contained form of ``schema`` or ``SchemaUnsupported``.

    Any JSON Schema root is accepted (boolean schemas become ``{}`` / ``{"not": {}}``);
    ``require_object=True`` (what ``normalize_input_schema`` and the catalog use for tool
    input schemas) also demands a root that describes an object. The result is a fresh
    plain-JSON document: the input is never mutated and later changes to it do not reach
    the result.
    """
    prepared = prepare_schema(
        schema, default_dialect=default_dialect, require_object=require_object
    )
    fresh: dict[str, Any] = json.loads(prepared.text)
    return fresh


def normalize_input_schema(
    schema: Mapping[str, Any], *, default_dialect: str | None = None
) -> dict[str, Any]:
    """``normalize_schema`` for a tool input schema: the root must describe an object."""
    return normalize_schema(schema, default_dialect=default_dialect, require_object=True)


__all__ = [
    "DRAFT4",
    "DRAFT6",
    "DRAFT7",
    "DRAFT201909",
    "DRAFT202012",
    "SUPPORTED_DIALECTS",
    "PreparedSchema",
    "SchemaUnsupported",
    "bound_text",
    "canonical_json",
    "compact_json",
    "dialect_of",
    "json_path",
    "normalize_input_schema",
    "normalize_schema",
    "prepare_schema",
    "schema_hash",
    "shown_uri",
]
