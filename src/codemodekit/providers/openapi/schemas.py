"""OpenAPI Schema Objects → self-contained JSON Schema draft 2020-12.

Every ``$ref`` to a schema becomes ``{"$ref": "#/$defs/<name>"}`` and the target is
converted once per document; a tool's schema then carries only the ``$defs`` it reaches,
so recursive and circular components stay as references (the catalog and the TypeScript
projection see named, shared types). References that cannot be resolved (remote,
missing, outside the document's folder) become ``{}``: an unknown value, never a guess.

OpenAPI 3.0 schema objects are rewritten (ADR 0011): ``nullable`` → a ``"null"`` type or
branch, boolean ``exclusiveMinimum``/``exclusiveMaximum`` → numeric bounds, ``example`` →
``examples``, draft-4 tuple ``items`` → ``prefixItems``. OpenAPI-only keywords
(``discriminator``, ``xml``, ``externalDocs``, ``x-*``) are dropped; so are ``$id``,
``$anchor`` and ``$schema`` inside a schema, which would change how the rewritten
references resolve.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema_rs

from codemodekit.providers.openapi.document import OpenApiDocument, RefKey, UnresolvedRef

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

_SINGLE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
    "additionalItems",
)
_MAP = ("properties", "patternProperties", "dependentSchemas")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_DROPPED = frozenset(
    {
        "discriminator",
        "xml",
        "externalDocs",
        "nullable",
        "example",
        "$id",
        "$schema",
        "$anchor",
        "$dynamicAnchor",
        "$comment",
        "$defs",
        "definitions",
        "$vocabulary",
    }
)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_TOOL_DEFS = 64
"""Most ``$defs`` one tool schema carries. Large, densely linked descriptions (Microsoft
Graph: 11,000 operations over 2,600 interlinked components) otherwise give single tools
closures of hundreds of components and the catalog gigabytes of schema text. The nearest
components (fewest ``$ref`` hops from the tool) are kept; references beyond the bound
become ``{}``, an unknown value, as an unresolved construct would."""


class SchemaConverter:
    """Converts the schemas of one document; shares converted ``$defs`` across tools."""

    def __init__(self, document: OpenApiDocument, *, direction: str | None = None) -> None:
        self.document = document
        self._hidden_flag = {"request": "readOnly", "response": "writeOnly"}.get(direction or "")
        self._names: dict[RefKey, str] = {}
        self._taken: set[str] = set()
        self.defs: dict[str, Any] = {}
        self._deps: dict[str, set[str]] = {}
        self.unresolved: list[str] = []
        self._pending: list[RefKey] = []

    # -- public -------------------------------------------------------------------------

    def convert(self, schema: Any, base: Path) -> tuple[Any, set[str]]:
        """Convert one schema; returns it and the ``$defs`` names it references directly."""
        deps: set[str] = set()
        out = self._convert(schema, base, deps)
        self._drain()
        return out, deps

    def document_schema(self, schema: Any, base: Path) -> dict[str, Any]:
        """A standalone 2020-12 schema (``$schema`` and the reachable ``$defs`` attached)."""
        converted, deps = self.convert(schema, base)
        return self.attach(converted, deps)

    def attach(self, schema: Any, deps: set[str]) -> dict[str, Any]:
        if schema is True:
            schema = {}
        elif schema is False:
            schema = {"not": {}}
        closure = self.closure(deps)
        if len(closure) > MAX_TOOL_DEFS:
            kept = self._nearest(deps, MAX_TOOL_DEFS)
            out: dict[str, Any] = {"$schema": DRAFT_2020_12, **_cut(schema, kept)}
            out["$defs"] = {
                name: _cut(self.defs[name], kept)
                if self._deps.get(name, set()) - kept
                # an untouched component stays shared with the other tools
                else self.defs[name]
                for name in sorted(kept)
            }
            return out
        out = {"$schema": DRAFT_2020_12, **schema}
        if closure:
            out["$defs"] = {name: self.defs[name] for name in sorted(closure)}
        return out

    def _nearest(self, deps: set[str], limit: int) -> set[str]:
        """Up to ``limit`` components, breadth-first from ``deps`` (deterministic order)."""
        kept: set[str] = set()
        level = sorted(deps)
        while level and len(kept) < limit:
            following: set[str] = set()
            for name in level:
                if len(kept) >= limit:
                    break
                if name not in kept:
                    kept.add(name)
                    following.update(self._deps.get(name, ()))
            level = sorted(following - kept)
        return kept

    def closure(self, deps: set[str]) -> set[str]:
        seen: set[str] = set()
        stack = list(deps)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            stack.extend(self._deps.get(name, ()))
        return seen

    # -- references ---------------------------------------------------------------------

    def _def_name(self, key: RefKey) -> str:
        name = self._names.get(key)
        if name is not None:
            return name
        path, pointer = key
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
        if (
            path == self.document.path
            and len(tokens) == 3
            and tokens[:2] == ["components", "schemas"]
        ):
            wanted = tokens[2]
        else:
            tail = [
                t
                for t in tokens
                if t not in ("components", "schemas", "properties", "content", "schema")
            ]
            stem = path.stem if path != self.document.path else ""
            wanted = "_".join([p for p in (stem, *tail[-3:]) if p]) or "Schema"
        base = _SAFE_NAME.sub("_", wanted).strip("_") or "Schema"
        name, n = base, 1
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        self._names[key] = name
        self._pending.append(key)
        return name

    def _drain(self) -> None:
        while self._pending:
            key = self._pending.pop()
            name = self._names[key]
            deps: set[str] = set()
            self.defs[name] = {}  # placeholder: breaks cycles while converting
            try:
                target = self.document.lookup(key)
            except UnresolvedRef as exc:
                self._note(f"{name}: {exc.reason}")
                target = {}
            self.defs[name] = _as_object(self._convert(target, key[0], deps))
            self._deps[name] = deps

    def _note(self, message: str) -> None:
        if len(self.unresolved) < 100:
            self.unresolved.append(message)

    # -- conversion ---------------------------------------------------------------------

    def _convert(self, schema: Any, base: Path, deps: set[str]) -> Any:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, Mapping):
            return {}
        if "$ref" in schema:
            try:
                key = self.document.ref_key(schema["$ref"], base)
                if key not in self._names:
                    self.document.lookup(key)  # unresolvable: inline unknown, never a named type
            except UnresolvedRef as exc:
                self._note(exc.reason)
                ref_out: dict[str, Any] = {}
            else:
                name = self._def_name(key)
                deps.add(name)
                ref_out = {"$ref": f"#/$defs/{name}"}
            if self.document.is_30:
                # 3.0: siblings of $ref are ignored by the specification.
                return ref_out
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if not rest:
                return ref_out
            converted = self._convert(rest, base, deps)
            merged = dict(_as_object(converted))
            if ref_out:
                merged = {**ref_out, **{k: v for k, v in merged.items() if k != "$ref"}}
            return merged
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROPPED or key.startswith("x-"):
                continue
            if key in _SINGLE:
                if key == "items" and isinstance(value, list):
                    out["prefixItems"] = [self._convert(v, base, deps) for v in value]
                    continue
                if isinstance(value, Mapping | bool):
                    out[key] = self._convert(value, base, deps)
                continue
            if key in _MAP:
                if isinstance(value, Mapping):
                    out[key] = {k: self._convert(v, base, deps) for k, v in value.items()}
                continue
            if key in _LIST:
                if isinstance(value, list):
                    out[key] = [self._convert(v, base, deps) for v in value]
                continue
            if key == "examples":
                if isinstance(value, list):
                    out[key] = value
                continue
            if key == "pattern" and not (isinstance(value, str) and usable_pattern(value)):
                # Not a regular expression the validator can run (`{1-70}`, a JS-invalid
                # class range, a number): the constraint is dropped rather than the tool
                # quarantined; the server still checks its own input.
                self._note(f"pattern {str(value)[:60]!r} is not a usable regular expression")
                continue
            out[key] = value
        if "example" in schema and "examples" not in out:
            out["examples"] = [schema["example"]]
        if self._hidden_flag is not None and isinstance(out.get("required"), list):
            out["required"] = self._required(schema, base, out["required"])
        _fix_exclusive(out, schema, "exclusiveMinimum", "minimum")
        _fix_exclusive(out, schema, "exclusiveMaximum", "maximum")
        # ``x-nullable`` is the widespread pre-3.0 vendor spelling of the same thing.
        if self.document.is_30 and (
            schema.get("nullable") is True or schema.get("x-nullable") is True
        ):
            out = _nullable(out)
        return out

    def _required(self, schema: Mapping[str, Any], base: Path, required: list[Any]) -> list[Any]:
        """``required`` without the properties this direction never carries."""
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return required
        flag = self._hidden_flag or ""
        hidden = set()
        for name, prop in props.items():
            target = prop
            if isinstance(prop, Mapping) and "$ref" in prop and prop.get(flag) is None:
                try:
                    target = self.document.lookup(self.document.ref_key(prop["$ref"], base))
                except UnresolvedRef:
                    target = None
            if isinstance(target, Mapping) and target.get(flag) is True:
                hidden.add(name)
            if isinstance(prop, Mapping) and prop.get(flag) is True:
                hidden.add(name)
        return [r for r in required if r not in hidden]


@functools.lru_cache(maxsize=4096)
def usable_pattern(pattern: str) -> bool:
    """Whether the catalog's validator can compile ``pattern`` (ECMA-262 dialect)."""
    try:
        jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    except Exception:
        return False
    return True


def _cut(node: Any, kept: set[str]) -> Any:
    """A copy of ``node`` whose references to components outside ``kept`` are ``{}``."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] not in kept:
            return {}
        return {key: _cut(value, kept) for key, value in node.items()}
    if isinstance(node, list):
        return [_cut(item, kept) for item in node]
    return node


def _as_object(schema: Any) -> dict[str, Any]:
    if schema is True:
        return {}
    if schema is False:
        return {"not": {}}
    return dict(schema) if isinstance(schema, Mapping) else {}


def _fix_exclusive(out: dict[str, Any], schema: Mapping[str, Any], flag: str, bound: str) -> None:
    value = schema.get(flag)
    if not isinstance(value, bool):
        return
    out.pop(flag, None)
    if value and isinstance(schema.get(bound), int | float):
        out[flag] = schema[bound]
        out.pop(bound, None)


def _nullable(out: dict[str, Any]) -> dict[str, Any]:
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    elif isinstance(kind, list):
        if "null" not in kind:
            out["type"] = [*kind, "null"]
    else:
        # No type: a nullable $ref/allOf/oneOf. Widen with a null branch so real
        # responses carrying null are accepted.
        if not out:
            return out
        keep = {
            k: v
            for k, v in out.items()
            if k
            in (
                "description",
                "title",
                "default",
                "deprecated",
                "readOnly",
                "writeOnly",
                "examples",
            )
        }
        body = {k: v for k, v in out.items() if k not in keep}
        return {**keep, "anyOf": [body, {"type": "null"}]}
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def schema_kinds(
    schema: Any, converter: SchemaConverter, base: Path, depth: int = 0
) -> set[str] | None:
    """The JSON types a schema admits (``"object"``, ``"array"``, ``"primitive"``).

    ``None`` means it cannot be told (no ``type``, or composition too deep): callers must
    then decide per value at call time.
    """
    if depth > 8 or not isinstance(schema, Mapping):
        return None
    if "$ref" in schema:
        try:
            key = converter.document.ref_key(schema["$ref"], base)
            target = converter.document.lookup(key)
        except UnresolvedRef:
            return None
        return schema_kinds(target, converter, key[0], depth + 1)
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if kinds is not None:
        out = set()
        for k in kinds:
            if k in ("object", "array"):
                out.add(k)
            elif k != "null":
                out.add("primitive")
        return out
    for combinator in ("allOf", "oneOf", "anyOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list) and branches:
            found: set[str] = set()
            for branch in branches:
                sub = schema_kinds(branch, converter, base, depth + 1)
                if sub is None:
                    if combinator == "allOf":
                        continue
                    return None
                found |= sub
            if found:
                return found
    if "properties" in schema or "additionalProperties" in schema:
        return {"object"}
    if "items" in schema:
        return {"array"}
    return None
