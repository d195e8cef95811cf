"""``SchemaDeclarations``: one schema document → named TypeScript declarations."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codemodekit.schema.typescript.refs import (
    LEGACY_DIALECTS,
    AnalyzedSchema,
    resolve,
    split_pointer,
)
from codemodekit.schema.typescript.text import (
    TypeNames,
    jsdoc,
    pascal_case,
    property_name,
    schema_doc_lines,
    ts_string,
)

_MAX_DEPTH = 40
_INDENT = "  "

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


_OBJECT_MEMBERS = frozenset(
    {
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    }
)
"""Names every object has through Object.prototype: TypeScript checks an optional property
of that name against the inherited member, so ``{}`` would not fit ``{ toString?: number }``."""
_MAX_KEY_NODES = 10_000
"""In-place subschemas ``_key_reach`` walks for one schema before answering "any key"."""
_OPAQUE_APPLICATORS = ("dependentSchemas", "if", "then", "else", "$dynamicRef")
"""Keywords that can evaluate properties but have no TypeScript form here."""

_UNKNOWN = _T("unknown")
_NEVER = _T("never")


@dataclass(slots=True)
class _Decl:
    name: str
    pointer: str
    schema: Any
    text: str = ""
    is_alias: bool = False
    edges: frozenset[str] = frozenset()
    """Pointers referenced outside any object/array (where alias cycles are illegal)."""


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
        self._legacy_ref = analysis.dialect in LEGACY_DIALECTS
        self._decls: dict[str, _Decl] = {}
        self._external: set[str] = set()
        """Targets declared by an earlier document of the same file."""
        self._broken: set[tuple[str, str]] = set()
        self._current = ""
        self._edges: set[str] = set()
        self._reach: dict[int, int | None] = {}
        """``_key_reach`` of schemas already walked, by object identity."""
        self._decls[""] = _Decl(root_name, "", document)
        # Allocate every reference target up front, in pointer order, so names never depend
        # on traversal order.
        targets = sorted({p for _, p in self._index.refs if p})
        for pointer in targets:
            target = resolve(document, split_pointer(pointer))
            if target is None:
                continue
            signature = analysis.signature(pointer) if shared is not None else None
            if shared is not None and signature is not None and signature in shared:
                self._decls[pointer] = _Decl(shared[signature], pointer, target)
                self._external.add(pointer)
                continue
            tokens = split_pointer(pointer)
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
        unevaluated = schema.get("unevaluatedProperties")
        if extra is None and unevaluated is not None:
            # Beside no additionalProperties, unevaluatedProperties types the keys nothing
            # else evaluated; a subschema that may evaluate any key leaves nothing to close.
            extra = True if self._evaluates_any_key(schema, depth) else unevaluated
        elif extra is None and patterns:
            extra = True  # keys matching no pattern may be anything

        lines: list[str] = []
        prop_types: list[tuple[_T, bool]] = []
        for key, sub in props.items():
            t = self._type(sub, indent + 1, guarded=True, depth=depth + 1)
            optional = key not in required
            if optional and key in _OBJECT_MEMBERS and t.text != "unknown":
                # ``{}`` has Object.prototype's member: it must stay assignable.
                t = _union([t, _T(f"Object[{ts_string(str(key))}]")])
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

    def _evaluates_any_key(self, schema: Any, depth: int) -> bool:
        """Whether an in-place subschema of ``schema`` (allOf/anyOf/oneOf, $ref, or one the
        projection cannot see into) may evaluate keys ``schema``'s own type does not name.

        Beyond ``_MAX_DEPTH`` nested in-place subschemas the answer is yes."""
        if depth > _MAX_DEPTH:
            return True
        if not isinstance(schema, Mapping):
            return schema is True
        height = self._key_reach(schema)
        return height is None or depth + height > _MAX_DEPTH

    def _in_place(self, schema: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
        """The in-place subschemas ``_evaluates_any_key`` walks into, or ``None`` when
        ``schema`` itself already may evaluate any key."""
        if any(k in schema for k in _OPAQUE_APPLICATORS):
            return None
        subs: list[Any] = []
        for keyword in ("allOf", "anyOf", "oneOf"):
            branches = schema.get(keyword)
            if isinstance(branches, list | tuple):
                subs.extend(branches)
        if isinstance(schema.get("$ref"), str):
            pointer = self._index.targets.get(id(schema))
            if pointer is None or pointer not in self._decls:
                return None
            subs.append(self._decls[pointer].schema)
        out: list[Mapping[str, Any]] = []
        for sub in subs:
            if sub is True or not isinstance(sub, Mapping):
                continue  # ``true`` evaluates nothing; ``false`` admits nothing
            for keyword in ("additionalProperties", "unevaluatedProperties"):
                if keyword in sub and sub[keyword] is not False:
                    return None
            if "patternProperties" in sub:
                return None
            out.append(sub)
        return out

    def _key_reach(self, root: Mapping[str, Any]) -> int | None:
        """How many in-place levels lie below ``root`` (its longest chain of
        ``_in_place`` steps), or ``None`` when a subschema reachable from it may evaluate
        any key, the chain is cyclic, or it spans more than ``_MAX_KEY_NODES`` schemas.

        Memoized per schema object: walking every path instead is exponential in a chain of
        definitions each naming the next more than once (a 1.5 KB schema took minutes)."""
        memo = self._reach
        if id(root) in memo:
            return memo[id(root)]
        seen = 0
        on_path: set[int] = set()
        # Frames: (schema, its subschemas, [index of the next one, height so far]).
        frames: list[tuple[Mapping[str, Any], list[Mapping[str, Any]], list[int]]] = []
        result: int | None = 0

        def enter(node: Mapping[str, Any]) -> bool:
            nonlocal seen
            seen += 1
            subs = self._in_place(node) if seen <= _MAX_KEY_NODES else None
            if subs is None:
                memo[id(node)] = None
                return False
            on_path.add(id(node))
            frames.append((node, subs, [0, 0]))
            return True

        if not enter(root):
            return None
        while frames:
            node, subs, state = frames[-1]
            if state[0] < len(subs):
                sub = subs[state[0]]
                state[0] += 1
                key = id(sub)
                if key in on_path:
                    result = None
                elif key in memo:
                    result = memo[key]
                elif enter(sub):
                    continue
                else:
                    result = None
                if result is None:
                    break
                state[1] = max(state[1], result + 1)
                continue
            frames.pop()
            on_path.discard(id(node))
            memo[id(node)] = result = state[1]
            if frames:
                parent = frames[-1][2]
                parent[1] = max(parent[1], result + 1)
        if result is None:
            for node, _, _ in frames:
                memo[id(node)] = None
            return None
        return memo[id(root)]

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
    seen: set[str] = set()
    for option in options:
        if option.text == "unknown":
            return _UNKNOWN
        if option.text == "never":
            continue
        for member in option.members or (option,):
            if member.text not in seen:
                seen.add(member.text)
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
