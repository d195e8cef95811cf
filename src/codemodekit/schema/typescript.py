"""JSON Schema → TypeScript: a conservative, readable projection for ``.d.ts`` files.

The projection never invents a type: whatever cannot be expressed faithfully (remote
``$ref``, ``not``, conditional schemas, unknown keywords) becomes ``unknown`` and the
constraints TypeScript cannot carry (``pattern``, ``minimum``, ``format``…) go into JSDoc.
Output depends only on the schema and the names already taken in the file, so the same
catalog always yields the same bytes.

Every ``$ref`` target becomes a named declaration (recursion needs names). Type-alias
cycles that TypeScript rejects (``type A = B | string; type B = A``) are cut by rendering
the offending references as ``unknown``; cycles through object properties, array items
and tuple elements are legal TypeScript and kept.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

__all__ = [
    "RESERVED_TYPE_NAMES",
    "AnalyzedSchema",
    "SchemaDeclarations",
    "TypeNames",
    "jsdoc",
    "pascal_case",
    "property_name",
    "ts_string",
]

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_WORDS = re.compile(r"[A-Za-z0-9]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DEPTH = 40
_INDENT = "  "

# Names the shared result contract declares, plus TypeScript's global types: a projected
# name must never shadow them.
RESERVED_TYPE_NAMES = frozenset(
    {
        "ToolResult",
        "ContentBlock",
        "TextContent",
        "ImageContent",
        "AudioContent",
        "ResourceLinkContent",
        "EmbeddedResource",
        "Array",
        "ArrayBuffer",
        "BigInt",
        "Boolean",
        "Date",
        "Error",
        "Function",
        "JSON",
        "Map",
        "Math",
        "Number",
        "Object",
        "Partial",
        "Pick",
        "Promise",
        "Readonly",
        "Record",
        "RegExp",
        "Required",
        "Set",
        "String",
        "Symbol",
        "WeakMap",
        "WeakSet",
    }
)

# Keywords that describe rather than constrain; a ``$ref`` with only these beside it is
# still just the named type.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$anchor",
        "$comment",
        "$defs",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "example",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
    }
)

# JSDoc tags for constraints TypeScript cannot express, in output order.
_CONSTRAINT_TAGS = (
    "format",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentMediaType",
    "contentEncoding",
)

# Dialects in which keywords beside ``$ref`` are ignored.
_LEGACY_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-04/schema#",
    }
)

_PRIMITIVES = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
}

# Precedence of a rendered type: a union must be parenthesized inside an intersection
# or an array, an intersection inside an array.
_UNION, _INTERSECTION, _ATOM = 0, 1, 2


@dataclass(frozen=True, slots=True)
class _T:
    text: str
    prec: int = _ATOM
    members: tuple[_T, ...] = ()
    """Flattened union members; empty when this is not a union."""
    object_literal: bool = False
    """A ``{ ... }`` body that can be declared as an ``interface``."""

    def member_set(self) -> tuple[str, ...]:
        """Texts of the union members (for index-signature coherence)."""
        return tuple(m.text for m in self.members) if self.members else (self.text,)


_UNKNOWN = _T("unknown")
_NEVER = _T("never")


def pascal_case(text: str) -> str:
    """``search_issues`` → ``SearchIssues``; ASCII only, never empty, never a digit first."""
    words = _WORDS.findall(text)
    name = "".join(w[0].upper() + w[1:] for w in words)
    if not name:
        return "T"
    return "T" + name if name[0].isdigit() else name


def _escape_surrogates(text: str) -> str:
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def ts_string(value: str) -> str:
    """A TypeScript string literal (JSON syntax is valid TypeScript)."""
    return _escape_surrogates(json.dumps(value, ensure_ascii=False))


def property_name(key: str) -> str:
    """An identifier as is; anything else quoted."""
    return key if _IDENTIFIER.match(key) else ts_string(key)


def _doc_text(text: str) -> str:
    # ``*/`` would close the comment early.
    return _escape_surrogates(text.replace("*/", "*\\/").replace("\r\n", "\n").replace("\r", "\n"))


def jsdoc(lines: Sequence[str], indent: str = "") -> str:
    """A JSDoc block (with trailing newline), or ``""`` when there is nothing to say."""
    flat: list[str] = []
    for line in lines:
        flat.extend(_doc_text(line).split("\n"))
    while flat and not flat[-1].strip():
        flat.pop()
    if not flat:
        return ""
    if len(flat) == 1:
        return f"{indent}/** {flat[0].strip()} */\n"
    body = "".join(f"{indent} *{' ' + line.rstrip() if line.strip() else ''}\n" for line in flat)
    return f"{indent}/**\n{body}{indent} */\n"


def _json_value(value: Any) -> str:
    try:
        return _escape_surrogates(json.dumps(value, ensure_ascii=False, sort_keys=True))
    except (TypeError, ValueError):
        return "?"


def schema_doc_lines(schema: Any) -> list[str]:
    """Description, default, constraints and deprecation of one schema, as JSDoc lines."""
    if not isinstance(schema, Mapping):
        return []
    lines: list[str] = []
    description = schema.get("description")
    title = schema.get("title")
    if isinstance(description, str) and description.strip():
        lines.append(description.strip())
    elif isinstance(title, str) and title.strip():
        lines.append(title.strip())
    if schema.get("type") == "integer" or (
        isinstance(schema.get("type"), list | tuple) and "integer" in schema["type"]
    ):
        lines.append("@integer")
    if "default" in schema:
        lines.append(f"@default {_json_value(schema['default'])}")
    for key in _CONSTRAINT_TAGS:
        if key in schema:
            value = schema[key]
            shown = value if isinstance(value, str) else _json_value(value)
            if isinstance(value, bool) and not value:
                continue
            lines.append(f"@{key} {shown}")
    examples = schema.get("examples")
    if isinstance(examples, list | tuple):
        lines.extend(f"@example {_json_value(e)}" for e in list(examples)[:3])
    if schema.get("deprecated") is True:
        lines.append("@deprecated")
    return lines


class TypeNames:
    """The type names taken in one ``.d.ts`` file; allocation is first come, first served."""

    def __init__(self, reserved: Iterable[str] = RESERVED_TYPE_NAMES) -> None:
        self._taken: set[str] = set(reserved)

    def taken(self, name: str) -> bool:
        return name in self._taken

    def allocate(self, *candidates: str) -> str:
        """The first free candidate, else the last one with the smallest free number suffix."""
        for candidate in candidates:
            if candidate not in self._taken:
                self._taken.add(candidate)
                return candidate
        base = candidates[-1]
        n = 2
        while f"{base}{n}" in self._taken:
            n += 1
        self._taken.add(f"{base}{n}")
        return f"{base}{n}"


def _decode_pointer(fragment: str) -> list[str] | None:
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        return None
    return [unquote(p).replace("~1", "/").replace("~0", "~") for p in fragment[1:].split("/")]


def _split_pointer(pointer: str) -> list[str]:
    """An internal (not URI-encoded) JSON pointer → tokens."""
    if not pointer:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _resolve(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list | tuple) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})


def _escape_token(token: str) -> str:
    if "~" in token or "/" in token:
        return token.replace("~", "~0").replace("/", "~1")
    return token


_DOCUMENT_URI = "urn:codemode:document"
_DRAFT4 = "http://json-schema.org/draft-04/schema#"


def _join(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if urlsplit(ref).scheme:
        return ref
    return urljoin(base, ref)


@dataclass(frozen=True, slots=True)
class _Index:
    refs: list[tuple[str, str | None]]
    """(pointer of the schema holding a ``$ref``, pointer of its target or ``None``), sorted."""
    targets: dict[int, str | None]
    """``id()`` of a schema holding a ``$ref`` → target pointer (``None``: not in the document)."""


def _index(document: Any, dialect: str | None) -> _Index:
    """One walk that resolves every ``$ref`` to a JSON pointer inside the document, honouring
    embedded ``$id`` resources (base URIs) and ``$anchor`` / draft-07 ``"$id": "#name"``."""
    legacy = dialect in _LEGACY_DIALECTS
    id_keyword = "id" if dialect == _DRAFT4 else "$id"
    resources: dict[str, str] = {_DOCUMENT_URI: ""}
    anchors: dict[tuple[str, str], str] = {}
    pending: list[tuple[str, int, str]] = []
    stack: list[tuple[Any, str, str]] = [(document, "", _DOCUMENT_URI)]
    while stack:
        node, pointer, base = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            ident = node.get(id_keyword)
            if isinstance(ident, str) and not (legacy and isinstance(ref, str)):
                if ident.startswith("#"):
                    anchors.setdefault((base, ident[1:]), pointer)
                else:
                    uri, fragment = urldefrag(_join(base, ident))
                    base = uri
                    resources.setdefault(uri, pointer)
                    if fragment and not fragment.startswith("/"):
                        anchors.setdefault((uri, fragment), pointer)
            for keyword in ("$anchor", "$dynamicAnchor"):
                anchor = node.get(keyword)
                if isinstance(anchor, str):
                    anchors.setdefault((base, anchor), pointer)
            if isinstance(ref, str):
                pending.append((pointer, id(node), _join(base, ref)))
            for key, value in node.items():
                if isinstance(value, dict | list) and key not in _DATA_KEYWORDS:
                    stack.append((value, pointer + "/" + _escape_token(str(key)), base))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                if isinstance(value, dict | list):
                    stack.append((value, f"{pointer}/{i}", base))
    refs: list[tuple[str, str | None]] = []
    targets: dict[int, str | None] = {}
    for holder, node_id, absolute in pending:
        uri, fragment = urldefrag(absolute)
        target: str | None = None
        resource = resources.get(uri)
        if resource is not None:
            if fragment == "" or fragment.startswith("/"):
                tokens = _decode_pointer(fragment) or []
                candidate = resource + "".join("/" + _escape_token(t) for t in tokens)
                if _resolve(document, _split_pointer(candidate)) is not None:
                    target = candidate
            else:
                target = anchors.get((uri, fragment))
        refs.append((holder, target))
        targets[node_id] = target
    refs.sort(key=lambda r: (r[0], r[1] or ""))
    return _Index(refs, targets)


@dataclass(slots=True)
class _Decl:
    name: str
    pointer: str
    schema: Any
    text: str = ""
    is_alias: bool = False
    edges: frozenset[str] = frozenset()
    """Pointers referenced outside any object/array (where alias cycles are illegal)."""


class AnalyzedSchema:
    """A plain-JSON schema document with every ``$ref`` resolved, independent of naming,
    so one analysis serves every file that declares the same tool."""

    __slots__ = ("dialect", "document", "index", "signatures")

    def __init__(self, document: Any) -> None:
        self.document = document
        dialect = document.get("$schema") if isinstance(document, dict) else None
        self.dialect = dialect if isinstance(dialect, str) else None
        self.index = _index(document, self.dialect)
        self.signatures: dict[str, str | None] = {}
        """Target pointer → digest of its closure (``None``: reaches the root)."""

    def signature(self, pointer: str) -> str | None:
        if pointer not in self.signatures:
            self.signatures[pointer] = self._closure_signature(pointer)
        return self.signatures[pointer]

    def _closure_signature(self, pointer: str) -> str | None:
        seen: set[str] = set()
        queue = [pointer]
        while queue:
            current = queue.pop()
            if current in seen:
                continue
            if current == "":
                return None
            seen.add(current)
            prefix = current + "/"
            for holder, target in self.index.refs:
                if (
                    (holder == current or holder.startswith(prefix))
                    and target is not None
                    and target not in seen
                ):
                    queue.append(target)
        digest = hashlib.sha256(f"{self.dialect}\n{pointer}".encode())
        for current in sorted(seen):
            node = _resolve(self.document, _split_pointer(current))
            text = json.dumps(node, sort_keys=True, ensure_ascii=False, default=str)
            digest.update(f"\n{current}\t{text}".encode())
        return digest.hexdigest()


class SchemaDeclarations:
    """Projects one schema document (a tool's input or output) into named declarations.

    ``root_name`` must already be allocated in ``names``. A ``$ref`` target is named
    ``source_prefix`` + its key (``Github`` + ``SimpleUser``), or, when another tool already
    took that name for a different schema, ``tool_prefix`` + key. ``shared`` (one per file)
    maps a target's closure (its schema and everything it references) to the name already
    declared for it, so identical definitions used by many tools are declared once.
    ``document`` is plain JSON (dicts and lists) or an ``AnalyzedSchema`` of it.
    Call ``render()`` once.
    """

    def __init__(
        self,
        document: Any | AnalyzedSchema,
        *,
        root_name: str,
        names: TypeNames,
        source_prefix: str = "",
        tool_prefix: str = "",
        role: str = "",
        shared: dict[str, str] | None = None,
    ) -> None:
        analysis = document if isinstance(document, AnalyzedSchema) else AnalyzedSchema(document)
        document = analysis.document
        self._doc = document
        self._root_name = root_name
        self._names = names
        self._index = analysis.index
        self._legacy_ref = analysis.dialect in _LEGACY_DIALECTS
        self._decls: dict[str, _Decl] = {}
        self._external: set[str] = set()
        """Targets declared by an earlier document of the same file."""
        self._broken: set[tuple[str, str]] = set()
        self._current = ""
        self._edges: set[str] = set()
        self._decls[""] = _Decl(root_name, "", document)
        # Allocate every reference target up front, in pointer order, so names never depend
        # on traversal order.
        targets = sorted({p for _, p in self._index.refs if p})
        for pointer in targets:
            target = _resolve(document, _split_pointer(pointer))
            if target is None:
                continue
            signature = analysis.signature(pointer) if shared is not None else None
            if shared is not None and signature is not None and signature in shared:
                self._decls[pointer] = _Decl(shared[signature], pointer, target)
                self._external.add(pointer)
                continue
            tokens = _split_pointer(pointer)
            key = pascal_case(tokens[-1]) if tokens else "Root"
            if len(tokens) >= 2 and tokens[-2] not in ("$defs", "definitions"):
                key = pascal_case(tokens[-2]) + key
            name = names.allocate(
                *dict.fromkeys([source_prefix + key, tool_prefix + key, tool_prefix + role + key])
            )
            self._decls[pointer] = _Decl(name, pointer, target)
            if shared is not None and signature is not None:
                shared[signature] = name

    def render(self) -> str:
        """Every declaration, root first, then reference targets in name order."""
        for pointer, decl in self._decls.items():
            if pointer not in self._external:
                self._render_decl(decl)
        # Cut alias cycles (at most once per edge; each pass removes at least one edge).
        for _ in range(len(self._decls) + 1):
            cyclic = self._cyclic_edges()
            if not cyclic:
                break
            self._broken |= cyclic
            for src in sorted({s for s, _ in cyclic}):
                self._render_decl(self._decls[src])
        root = self._decls[""]
        rest = sorted(
            (d for p, d in self._decls.items() if p and p not in self._external),
            key=lambda d: d.name,
        )
        return "\n".join(d.text for d in [root, *rest])

    def _cyclic_edges(self) -> set[tuple[str, str]]:
        """Edges that close an alias cycle; removing them leaves the alias graph acyclic."""
        graph = {
            p: {e for e in d.edges if e in self._decls and (p, e) not in self._broken}
            for p, d in self._decls.items()
            if d.is_alias
        }
        cut: set[tuple[str, str]] = set()
        for start in sorted(graph):
            # Depth-first from ``start``; an edge back to ``start`` closes a cycle.
            stack = [iter(sorted(graph[start]))]
            path = [start]
            seen = {start}
            while stack:
                child = next(stack[-1], None)
                if child is None:
                    stack.pop()
                    path.pop()
                elif child == start:
                    graph[path[-1]].discard(start)
                    cut.add((path[-1], start))
                elif child in graph and child not in seen:
                    seen.add(child)
                    path.append(child)
                    stack.append(iter(sorted(graph[child])))
        return cut

    def _render_decl(self, decl: _Decl) -> None:
        self._current = decl.pointer
        self._edges = set()
        doc = jsdoc(schema_doc_lines(decl.schema))
        t = self._type(decl.schema, 0, guarded=False, depth=0)
        if t.object_literal:
            decl.text = f"{doc}interface {decl.name} {t.text}\n"
            decl.is_alias = False
        else:
            decl.text = f"{doc}type {decl.name} = {t.text};\n"
            decl.is_alias = True
        decl.edges = frozenset(self._edges)

    # -- types ---------------------------------------------------------------------------

    def _type(self, schema: Any, indent: int, *, guarded: bool, depth: int) -> _T:
        if schema is True:
            return _UNKNOWN
        if schema is False:
            return _NEVER
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return _UNKNOWN
        parts: list[_T] = []
        ref = schema.get("$ref")
        if isinstance(ref, str):
            parts.append(self._ref(schema, guarded))
            if self._legacy_ref:
                return parts[0]
        elif ref is not None:
            return _UNKNOWN
        base = self._base(schema, indent, guarded=guarded, depth=depth)
        if base is not None:
            parts.append(base)
        all_of = schema.get("allOf")
        if isinstance(all_of, list | tuple):
            for sub in all_of:
                parts.append(self._type(sub, indent, guarded=guarded, depth=depth + 1))
        for keyword in ("oneOf", "anyOf"):
            options = schema.get(keyword)
            if isinstance(options, list | tuple):
                parts.append(
                    _union(
                        [self._type(s, indent, guarded=guarded, depth=depth + 1) for s in options]
                    )
                )
        return _intersection(parts)

    def _ref(self, holder: Mapping[str, Any], guarded: bool) -> _T:
        pointer = self._index.targets.get(id(holder))
        if pointer is None or pointer not in self._decls:
            return _UNKNOWN
        if not guarded:
            if (self._current, pointer) in self._broken:
                return _UNKNOWN
            self._edges.add(pointer)
        return _T(self._decls[pointer].name)

    def _base(
        self, schema: Mapping[str, Any], indent: int, *, guarded: bool, depth: int
    ) -> _T | None:
        if "const" in schema:
            return _literal(schema["const"])
        enum = schema.get("enum")
        if isinstance(enum, list | tuple):
            return _union([_literal(v) for v in enum]) if enum else _NEVER
        declared = schema.get("type")
        if isinstance(declared, str):
            types: list[str] = [declared]
        elif isinstance(declared, list | tuple):
            types = [t for t in declared if isinstance(t, str)]
            if not types:
                return _UNKNOWN
        else:
            types = []
            if any(
                k in schema
                for k in ("properties", "additionalProperties", "patternProperties", "required")
            ):
                types.append("object")
            if any(k in schema for k in ("items", "prefixItems", "additionalItems")):
                types.append("array")
            if not types:
                return None
        rendered: list[_T] = []
        for name in dict.fromkeys(types):
            if name == "object":
                rendered.append(self._object(schema, indent, depth=depth))
            elif name == "array":
                rendered.append(self._array(schema, indent, depth=depth))
            elif name in _PRIMITIVES:
                rendered.append(_T(_PRIMITIVES[name]))
            else:
                return _UNKNOWN
        if schema.get("nullable") is True and "null" not in types:
            rendered.append(_T("null"))
        return _union(rendered)

    def _object(self, schema: Mapping[str, Any], indent: int, *, depth: int) -> _T:
        pad = _INDENT * (indent + 1)
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required_raw = schema.get("required")
        required = (
            {r for r in required_raw if isinstance(r, str)}
            if isinstance(required_raw, list | tuple)
            else set()
        )
        extra = schema.get("additionalProperties")
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, dict) else {}

        lines: list[str] = []
        prop_types: list[tuple[_T, bool]] = []
        for key, sub in props.items():
            t = self._type(sub, indent + 1, guarded=True, depth=depth + 1)
            optional = key not in required
            prop_types.append((t, optional))
            doc = jsdoc(schema_doc_lines(sub), pad)
            lines.append(
                f"{doc}{pad}{property_name(str(key))}{'?' if optional else ''}: {t.text};\n"
            )
        # ``required`` names without a property schema: present, typed by additionalProperties.
        for key in sorted(required - set(props)):
            if extra is False:
                t = _NEVER
            elif isinstance(extra, dict):
                t = self._type(extra, indent + 1, guarded=True, depth=depth + 1)
            else:
                t = _UNKNOWN
            prop_types.append((t, False))
            lines.append(f"{pad}{property_name(key)}: {t.text};\n")

        index_parts: list[_T] = []
        index_doc: list[str] = []
        for pattern, sub in patterns.items():
            index_parts.append(self._type(sub, indent + 1, guarded=True, depth=depth + 1))
            index_doc.append(f"Keys matching /{pattern}/: {index_parts[-1].text}")
        if extra is True or isinstance(extra, dict):
            index_parts.append(self._type(extra, indent + 1, guarded=True, depth=depth + 1))
            if isinstance(extra, dict):
                index_doc.extend(schema_doc_lines(extra))
        elif extra is None and not patterns and not prop_types:
            index_parts.append(_UNKNOWN)  # a free-form object
        elif extra is False and not patterns and not prop_types:
            index_parts.append(_NEVER)  # exactly ``{}``; TypeScript's ``{}`` would admit anything

        if index_parts:
            index = _union(index_parts)
            if prop_types and index.text != "unknown":
                # tsc --strict requires every property to fit the index signature.
                allowed = set(index.member_set())
                fits = all(set(t.member_set()) <= allowed for t, _ in prop_types)
                if not fits:
                    index = _UNKNOWN
                elif any(opt for _, opt in prop_types):
                    index = _union([index, _T("undefined")])
            if index_doc:
                lines.append(jsdoc(index_doc, pad))
            lines.append(f"{pad}[key: string]: {index.text};\n")
        if not lines:
            return _T("{}", object_literal=True)
        return _T("{\n" + "".join(lines) + _INDENT * indent + "}", object_literal=True)

    def _array(self, schema: Mapping[str, Any], indent: int, *, depth: int) -> _T:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        rest: Any
        if isinstance(prefix, list | tuple):
            rest = items if "items" in schema else True
        elif isinstance(items, list | tuple):
            prefix, rest = items, schema.get("additionalItems", True)
        else:
            if items is None or items is True:
                return _T("unknown[]")
            if items is False:
                return _T("[]")
            element = self._type(items, indent, guarded=True, depth=depth + 1)
            return _T(f"{_paren(element)}[]")
        min_items = schema.get("minItems")
        min_items = (
            min_items if isinstance(min_items, int) and not isinstance(min_items, bool) else 0
        )
        elements: list[str] = []
        for i, sub in enumerate(prefix):
            t = self._type(sub, indent, guarded=True, depth=depth + 1)
            elements.append(t.text if i < min_items else f"{_paren(t)}?")
        if rest is not False:
            rest_t = (
                _UNKNOWN
                if rest is True
                else self._type(rest, indent, guarded=True, depth=depth + 1)
            )
            elements.append(f"...{_paren(rest_t)}[]")
        return _T("[" + ", ".join(elements) + "]")


def _paren(t: _T) -> str:
    return t.text if t.prec == _ATOM else f"({t.text})"


def _literal(value: Any) -> _T:
    if value is None:
        return _T("null")
    if isinstance(value, bool):
        return _T("true" if value else "false")
    if isinstance(value, int):
        return _T(str(value), _INTERSECTION if value < 0 else _ATOM)
    if isinstance(value, float):
        if not math.isfinite(value):
            return _T("number")
        text = repr(value)
        return _T(text, _INTERSECTION if value < 0 else _ATOM)
    if isinstance(value, str):
        return _T(ts_string(value))
    if isinstance(value, list | tuple):
        return _T("[" + ", ".join(_literal(v).text for v in value) + "]")
    if isinstance(value, Mapping):
        if not value:
            return _T("{ [key: string]: never }")
        fields = "; ".join(f"{property_name(str(k))}: {_literal(v).text}" for k, v in value.items())
        return _T("{ " + fields + " }")
    return _UNKNOWN


def _union(options: Sequence[_T]) -> _T:
    members: list[_T] = []
    for option in options:
        if option.text == "unknown":
            return _UNKNOWN
        if option.text == "never":
            continue
        for member in option.members or (option,):
            if all(m.text != member.text for m in members):
                members.append(member)
    if not members:
        return _NEVER
    if len(members) == 1:
        return members[0]
    # Members are atoms or intersections, both fine unparenthesized inside a union.
    return _T(" | ".join(m.text for m in members), _UNION, tuple(members))


def _intersection(parts: Sequence[_T]) -> _T:
    kept: list[_T] = []
    for part in parts:
        if part.text == "never":
            return _NEVER
        if part.text == "unknown" or any(k.text == part.text for k in kept):
            continue
        kept.append(part)
    if not kept:
        return _UNKNOWN
    if len(kept) == 1:
        return kept[0]
    return _T(
        " & ".join(t.text if t.prec != _UNION else f"({t.text})" for t in kept), _INTERSECTION
    )
