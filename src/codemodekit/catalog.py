"""The immutable catalog: normalized tools of every source, sorted, with a revision.

Every projection (bridge, search, codegen, MCP server) reads one ``Catalog``. A catalog is
never mutated: a source that reconnects produces a new catalog in which only that source's
contribution changed (``Catalog.with_source``).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from codemodekit.providers.base import Discovery, SkippedTool, ToolSpec
from codemodekit.schema import (
    SchemaUnsupported,
    Validator,
    canonical_json,
    compile_validator,
    normalize_schema,
    schema_hash,
)

log = logging.getLogger("codemodekit.catalog")

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_MAX_DUPLICATE_WARNINGS = 5


def is_identifier(segment: str) -> bool:
    """True when ``segment`` can follow a dot in JavaScript (reserved words included)."""
    return bool(_IDENTIFIER.match(segment))


def accessor(segment: str) -> str:
    """``.name`` for identifiers, ``["odd-name"]`` (a JSON string literal) otherwise."""
    if is_identifier(segment):
        return "." + segment
    return "[" + canonical_json(segment) + "]"


def tool_address(source: str, name: str) -> str:
    """The exact callable expression: ``tools.github.search`` or ``tools["d-api"].deploy``."""
    return "tools" + accessor(source) + accessor(name)


def tool_key(source: str, name: str) -> str:
    """``source.name``: the form policy globs and diagnostics use."""
    return f"{source}.{name}"


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A normalized tool. Schemas are read-only views; never mutate them."""

    source: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Opaque upstream sideband (MCP ``_meta``): host-side only."""
    provenance: Mapping[str, Any] = field(default_factory=dict)
    deprecated: bool = False
    quarantine: str | None = None
    """Why the tool cannot be called (invalid or unenforceable schema); ``None`` if callable."""

    @property
    def address(self) -> str:
        return tool_address(self.source, self.name)

    @property
    def key(self) -> str:
        return tool_key(self.source, self.name)

    @property
    def available(self) -> bool:
        return self.quarantine is None

    @property
    def read_only(self) -> bool:
        return self.annotations.get("readOnlyHint") is True

    @property
    def input_schema_hash(self) -> str:
        return schema_hash(dict(self.input_schema))

    @property
    def output_schema_hash(self) -> str | None:
        return None if self.output_schema is None else schema_hash(dict(self.output_schema))

    def fingerprint(self) -> dict[str, Any]:
        """Everything model-visible that identifies this tool's contract."""
        return {
            "source": self.source,
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": self.annotations,
            "deprecated": self.deprecated,
            "quarantine": self.quarantine,
        }


@dataclass(frozen=True, slots=True)
class SkippedOperation:
    source: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class SourceContribution:
    """One source's tools, compiled validators and skipped operations."""

    source: str
    tools: tuple[ToolDefinition, ...]
    validators: Mapping[str, tuple[Validator, Validator | None]]
    skipped: tuple[SkippedOperation, ...]


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, JSON-ready copy of a frozen schema or annotation mapping."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


def _definition(source: str, spec: ToolSpec) -> tuple[ToolDefinition, tuple[Validator, Validator | None] | None]:
    quarantine: str | None = None
    validators: tuple[Validator, Validator | None] | None = None
    input_schema: Mapping[str, Any] = spec.input_schema
    output_schema: Mapping[str, Any] | None = spec.output_schema
    try:
        input_schema = normalize_schema(spec.input_schema, default_dialect=spec.default_dialect)
        output_validator: Validator | None = None
        if spec.output_schema is not None:
            try:
                output_schema = normalize_schema(
                    spec.output_schema, default_dialect=spec.default_dialect
                )
                output_validator = compile_validator(output_schema)
            except SchemaUnsupported as exc:
                raise SchemaUnsupported(f"output schema: {exc.reason}") from None
        validators = (compile_validator(input_schema), output_validator)
    except SchemaUnsupported as exc:
        quarantine = exc.reason
        validators = None
    definition = ToolDefinition(
        source=source,
        name=spec.name,
        description=spec.description,
        input_schema=_freeze(input_schema if isinstance(input_schema, Mapping) else {}),
        output_schema=None if output_schema is None else _freeze(output_schema),
        annotations=_freeze(dict(spec.annotations)),
        meta=_freeze(dict(spec.meta)),
        provenance=_freeze(dict(spec.provenance)),
        deprecated=spec.deprecated,
        quarantine=quarantine,
    )
    return definition, validators


def build_contribution(source: str, discovery: Discovery) -> SourceContribution:
    """Normalize a source's discovery and compile every validator once."""
    by_name: dict[str, ToolSpec] = {}
    duplicates = 0
    for spec in discovery.tools:
        if spec.name in by_name:
            duplicates += 1
            if duplicates <= _MAX_DUPLICATE_WARNINGS:
                log.warning("source %r lists tool %r more than once; the last wins", source, spec.name)
        by_name[spec.name] = spec
    if duplicates > _MAX_DUPLICATE_WARNINGS:
        log.warning("source %r: %d more duplicate tool names", source, duplicates - _MAX_DUPLICATE_WARNINGS)
    tools: list[ToolDefinition] = []
    validators: dict[str, tuple[Validator, Validator | None]] = {}
    for name in sorted(by_name):
        definition, compiled = _definition(source, by_name[name])
        tools.append(definition)
        if compiled is not None:
            validators[name] = compiled
    skipped = tuple(
        sorted(
            (SkippedOperation(source, s.name, s.reason) for s in discovery.skipped),
            key=lambda s: (s.name, s.reason),
        )
    )
    return SourceContribution(source, tuple(tools), MappingProxyType(validators), skipped)


class Catalog:
    """Frozen, sorted view of every source's tools. Build with ``Catalog.build``."""

    __slots__ = ("_by_source", "_contributions", "_revision", "_sources", "_tools")

    def __init__(self, contributions: Iterable[SourceContribution], sources: Iterable[str] = ()) -> None:
        contribs = {c.source: c for c in contributions}
        self._contributions: Mapping[str, SourceContribution] = MappingProxyType(
            dict(sorted(contribs.items()))
        )
        # Sources that are configured but have contributed nothing (e.g. unavailable).
        self._sources: tuple[str, ...] = tuple(sorted(set(sources) | set(contribs)))
        self._tools: tuple[ToolDefinition, ...] = tuple(
            t for c in self._contributions.values() for t in c.tools
        )
        self._by_source: Mapping[str, Mapping[str, ToolDefinition]] = MappingProxyType(
            {
                s: MappingProxyType({t.name: t for t in c.tools})
                for s, c in self._contributions.items()
            }
        )
        digest = hashlib.sha256()
        for tool in self._tools:
            digest.update(canonical_json(thaw(tool.fingerprint())).encode())
            digest.update(b"\n")
        for skipped in self.skipped:
            digest.update(canonical_json([skipped.source, skipped.name, skipped.reason]).encode())
        self._revision = digest.hexdigest()[:16]

    @classmethod
    def build(
        cls, discoveries: Mapping[str, Discovery], *, sources: Iterable[str] = ()
    ) -> Catalog:
        return cls(
            (build_contribution(name, d) for name, d in discoveries.items()), sources=sources
        )

    def with_source(self, source: str, discovery: Discovery) -> Catalog:
        """A new catalog in which only ``source``'s contribution is replaced."""
        contribs = dict(self._contributions)
        contribs[source] = build_contribution(source, discovery)
        return Catalog(contribs.values(), sources=self._sources)

    @property
    def revision(self) -> str:
        return self._revision

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        """Every tool, quarantined ones included, sorted by (source, name)."""
        return self._tools

    @property
    def available_tools(self) -> tuple[ToolDefinition, ...]:
        return tuple(t for t in self._tools if t.available)

    @property
    def quarantined(self) -> tuple[ToolDefinition, ...]:
        return tuple(t for t in self._tools if not t.available)

    @property
    def skipped(self) -> tuple[SkippedOperation, ...]:
        return tuple(s for c in self._contributions.values() for s in c.skipped)

    @property
    def sources(self) -> tuple[str, ...]:
        return self._sources

    def source_tools(self, source: str) -> tuple[ToolDefinition, ...]:
        contribution = self._contributions.get(source)
        return () if contribution is None else contribution.tools

    def get(self, source: str, name: str) -> ToolDefinition | None:
        return self._by_source.get(source, {}).get(name)

    def validators(self, source: str, name: str) -> tuple[Validator, Validator | None] | None:
        contribution = self._contributions.get(source)
        return None if contribution is None else contribution.validators.get(name)

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"<Catalog revision={self._revision} sources={len(self._sources)} tools={len(self._tools)}>"


__all__ = [
    "Catalog",
    "SkippedOperation",
    "SkippedTool",
    "SourceContribution",
    "ToolDefinition",
    "accessor",
    "build_contribution",
    "is_identifier",
    "thaw",
    "tool_address",
    "tool_key",
]
