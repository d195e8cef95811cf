"""The immutable catalog: normalized tools of every source, sorted, with a revision.

Every projection (bridge, search, codegen, MCP server) reads one ``Catalog``. A catalog is
never mutated: a source that reconnects produces a new catalog in which only that source's
contribution changed (``Catalog.with_source``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from codemodekit.catalog.frozen import EMPTY, FrozenJSON, freeze, json_or_empty, thaw
from codemodekit.nesting import NESTING_HINT, depth_exceeds, text_depth_exceeds
from codemodekit.providers.base import (
    Discovery,
    SkippedTool,
    ToolSpec,
    well_formed_discovery,
    well_formed_spec,
)
from codemodekit.schema import (
    SchemaUnsupported,
    Validator,
    canonical_json,
    compile_validator,
    schema_hash,
)
from codemodekit.schema.cache import VALIDATORS
from codemodekit.schema.enforce import surely_compiles
from codemodekit.schema.normalize import (
    PreparedSchema,
    bound_text,
    prepare_schema,
)
from codemodekit.schema.typescript.text import is_identifier, ts_string

log = logging.getLogger("codemodekit.catalog")

_MAX_DUPLICATE_WARNINGS = 5


def accessor(segment: str) -> str:
    """``.name`` for identifiers, ``["odd-name"]`` (a JSON string literal) otherwise."""
    if is_identifier(segment):
        return "." + segment
    return "[" + ts_string(segment) + "]"


def tool_address(source: str, name: str) -> str:
    """The exact callable expression: ``tools.github.search`` or ``tools["d-api"].deploy``."""
    return "tools" + accessor(source) + accessor(name)


def tool_key(source: str, name: str) -> str:
    """``source.name``: the form policy globs and diagnostics use."""
    return f"{source}.{name}"


DEFAULT_VISIBILITY: tuple[str, ...] = ("model", "app")


def visibility_of(meta: Any) -> tuple[str, ...]:
    """``_meta.ui.visibility`` as a tuple; absent or malformed means the default (both).

    A list that does not name ``"model"`` hides the tool from the model, as MCP Apps
    specifies for app-only tools."""
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    declared = ui.get("visibility") if isinstance(ui, Mapping) else None
    if isinstance(declared, str):
        declared = [declared]
    if not isinstance(declared, list | tuple):
        return DEFAULT_VISIBILITY
    return tuple(sorted({v for v in declared if isinstance(v, str)}))


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A normalized tool. Schemas are read-only views; never mutate them.

    In a built catalog, ``input_schema``/``output_schema``/``annotations`` are
    ``FrozenJSON`` mappings (nested values are mapping proxies and tuples); ``thaw`` gives
    a plain, JSON-ready copy. Schemas are the normalized documents the validators enforce.
    """

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
    visibility: tuple[str, ...] = DEFAULT_VISIBILITY
    """Who may see and call the tool (MCP Apps ``_meta.ui.visibility``): ``"model"`` (search,
    declarations, calls from the sandbox) and/or ``"app"`` (the host's own UI)."""

    @property
    def model_visible(self) -> bool:
        """Whether model-written code may find and call this tool. App-only tools stay in
        the catalog for the host (a direct projection) but are out of the model's reach."""
        return "model" in self.visibility

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
        return schema_hash(thaw(self.input_schema))

    @property
    def output_schema_hash(self) -> str | None:
        return None if self.output_schema is None else schema_hash(thaw(self.output_schema))

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
        } | ({} if self.visibility == DEFAULT_VISIBILITY else {"visibility": self.visibility})


@dataclass(frozen=True, slots=True)
class SkippedOperation:
    source: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class EnforcedSchemas:
    """The normalized schemas a callable tool's validators are compiled from, on first use
    (``Catalog.validators``). The build proved that they compile."""

    input_text: str
    input_dialect: str
    output_text: str | None = None
    output_dialect: str | None = None


@dataclass(frozen=True, slots=True)
class SourceContribution:
    """One source's tools, the schemas enforced for each callable one, skipped operations."""

    source: str
    tools: tuple[ToolDefinition, ...]
    enforced: Mapping[str, EnforcedSchemas]
    skipped: tuple[SkippedOperation, ...]
    digests: tuple[str, ...] = ()
    """One content digest per tool (same order as ``tools``): what the revision hashes."""


def _prepare(
    schema: Mapping[str, Any], dialect: str | None, *, require_object: bool, what: str
) -> tuple[PreparedSchema | None, str | None]:
    # The nesting bound comes first, whatever else is wrong. Normalization survives any
    # depth (its encoder and walks stop at the recursion limit), so the bound is read from
    # its text when it succeeds (cheap), and from the value only when it fails.
    try:
        prepared = prepare_schema(schema, default_dialect=dialect, require_object=require_object)
    except SchemaUnsupported as exc:
        if isinstance(schema, Mapping | list | tuple) and depth_exceeds(schema):
            return None, f"{what}the schema {NESTING_HINT}"
        return None, what + exc.reason
    if text_depth_exceeds(prepared.text):
        return None, f"{what}the schema {NESTING_HINT}"
    return prepared, None


def _prove(prepared: PreparedSchema, proven: dict[str, str | None]) -> None:
    """``SchemaUnsupported`` unless ``prepared`` compiles, mostly without compiling it.

    ``surely_compiles`` proves most schemas with the compiler's own meta-schema and regex
    checks; the rest are compiled now, exactly as before validators were compiled lazily,
    so which tools are quarantined (and why) does not depend on when they are called.
    ``proven`` memoizes by normalized text within a build (and from the previous
    contribution on a refresh): ``None`` for proven, else the reason.
    """
    text = prepared.text
    if text not in proven:
        reason: str | None = None
        if not VALIDATORS.has(text) and not surely_compiles(prepared):
            try:
                VALIDATORS.put(text, compile_validator(prepared))
            except SchemaUnsupported as exc:
                reason = exc.reason
        proven[text] = reason
    reason = proven[text]
    if reason is not None:
        raise SchemaUnsupported(reason)


def _definition(
    source: str, spec: ToolSpec, proven: dict[str, str | None]
) -> tuple[ToolDefinition, EnforcedSchemas | None, str]:
    """The normalized tool, its enforced schemas (``None`` if quarantined), its digest."""
    quarantine: str | None = None
    prepared_in, quarantine = _prepare(
        spec.input_schema, spec.default_dialect, require_object=True, what=""
    )
    if prepared_in is not None:
        try:
            _prove(prepared_in, proven)
        except SchemaUnsupported as exc:
            quarantine = exc.reason
    prepared_out: PreparedSchema | None = None
    if spec.output_schema is not None:
        # MCP requires an object here too, but other sources (a Python function, an
        # OpenAPI response) may legitimately return arrays or scalars.
        prepared_out, problem = _prepare(
            spec.output_schema, spec.default_dialect, require_object=False, what="output schema: "
        )
        if prepared_out is not None:
            try:
                _prove(prepared_out, proven)
            except SchemaUnsupported as exc:
                problem = "output schema: " + exc.reason
        quarantine = quarantine or problem
    input_text = prepared_in.text if prepared_in is not None else json_or_empty(spec.input_schema)
    output_text: str | None = None
    if spec.output_schema is not None:
        output_text = (
            prepared_out.text if prepared_out is not None else json_or_empty(spec.output_schema)
        )
    annotations_text = json_or_empty(spec.annotations)
    visibility = visibility_of(spec.meta)
    description = spec.description if isinstance(spec.description, str) else ""
    definition = ToolDefinition(
        source=source,
        name=spec.name,
        description=description,
        input_schema=FrozenJSON(input_text),
        output_schema=None if output_text is None else FrozenJSON(output_text),
        annotations=EMPTY if annotations_text == "{}" else FrozenJSON(annotations_text),
        meta=freeze(spec.meta),
        provenance=freeze(spec.provenance),
        deprecated=spec.deprecated,
        quarantine=quarantine,
        visibility=visibility,
    )
    # Digest of the model-visible contract. Schemas enter as their JSON text (serialized
    # once by normalization), in declared key order: property order shows in generated
    # declarations, so it is part of the contract.
    digest = hashlib.sha256()
    for part in (
        source,
        spec.name,
        description,
        input_text,
        output_text or "",
        annotations_text,
        "deprecated" if spec.deprecated else "",
        quarantine or "",
        # Only non-default visibility enters, so existing revisions stay the same.
        *(() if visibility == DEFAULT_VISIBILITY else ("visibility:" + ",".join(visibility),)),
    ):
        data = part.encode()
        digest.update(b"%d:" % len(data))  # length-prefixed: parts cannot run together
        digest.update(data)
    enforced = None
    if quarantine is None and prepared_in is not None:
        enforced = EnforcedSchemas(
            prepared_in.text,
            prepared_in.dialect,
            None if prepared_out is None else prepared_out.text,
            None if prepared_out is None else prepared_out.dialect,
        )
    return definition, enforced, digest.hexdigest()


def _safe_definition(
    source: str, spec: ToolSpec, proven: dict[str, str | None]
) -> tuple[ToolDefinition, EnforcedSchemas | None, str]:
    """``_definition``, but an unexpected failure quarantines this tool, not the catalog."""
    try:
        try:
            return _definition(source, spec, proven)
        except UnicodeEncodeError:  # a lone surrogate in a schema: U+FFFD, and once more
            return _definition(source, well_formed_spec(spec), proven)
    except (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError):
        raise
    except BaseException:  # also a Rust panic, which is not an Exception
        log.exception(
            "source %r: tool %r could not be normalized; it is quarantined",
            bound_text(str(source), 80),
            bound_text(str(spec.name), 80),
        )
        reason = "the tool could not be processed (internal error; see the host log)"
        name = str(spec.name)
        definition = ToolDefinition(
            source=source, name=name, description="", input_schema=EMPTY, quarantine=reason
        )
        digest = hashlib.sha256(canonical_json([source, name, reason]).encode()).hexdigest()
        return definition, None, digest


def _proven_before(previous: SourceContribution | None) -> dict[str, str | None]:
    """The schemas a previous contribution proved, by normalized text."""
    proven: dict[str, str | None] = {}
    if previous is not None:
        for schemas in previous.enforced.values():
            proven[schemas.input_text] = None
            if schemas.output_text is not None:
                proven[schemas.output_text] = None
    return proven


def build_contribution(
    source: str, discovery: Discovery, *, previous: SourceContribution | None = None
) -> SourceContribution:
    """Normalize a source's discovery and prove that every schema can be enforced.

    A tool whose schema is invalid or unenforceable is kept, quarantined with the reason;
    its siblings are unaffected. Duplicate names: the last one listed wins. Validators are
    compiled on a tool's first call (``Catalog.validators``); schemas unchanged since
    ``previous`` are not checked again.
    """
    discovery = well_formed_discovery(discovery, schemas=False)
    by_name: dict[str, ToolSpec] = {}
    duplicates = 0
    for spec in discovery.tools:
        if spec.name in by_name:
            duplicates += 1
            if duplicates <= _MAX_DUPLICATE_WARNINGS:
                log.warning(
                    "source %r lists tool %r more than once; the last one wins",
                    bound_text(source, 80),
                    bound_text(spec.name, 80),
                )
        by_name[spec.name] = spec
    if duplicates > _MAX_DUPLICATE_WARNINGS:
        log.warning(
            "source %r: %d more duplicate tool names (the last of each wins)",
            bound_text(source, 80),
            duplicates - _MAX_DUPLICATE_WARNINGS,
        )
    tools: list[ToolDefinition] = []
    digests: list[str] = []
    enforced: dict[str, EnforcedSchemas] = {}
    proven = _proven_before(previous)
    for name in sorted(by_name):
        definition, schemas, digest = _safe_definition(source, by_name[name], proven)
        tools.append(definition)
        digests.append(digest)
        if schemas is not None:
            enforced[name] = schemas
    skipped = tuple(
        sorted(
            (SkippedOperation(source, s.name, s.reason) for s in discovery.skipped),
            key=lambda s: (s.name, s.reason),
        )
    )
    return SourceContribution(
        source, tuple(tools), MappingProxyType(enforced), skipped, tuple(digests)
    )


class Catalog:
    """Frozen, sorted view of every source's tools. Build with ``Catalog.build``."""

    __slots__ = (
        "_available",
        "_by_source",
        "_contributions",
        "_model",
        "_quarantined",
        "_revision",
        "_skipped",
        "_sources",
        "_tools",
    )

    def __init__(
        self, contributions: Iterable[SourceContribution], sources: Iterable[str] = ()
    ) -> None:
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
        self._available = tuple(t for t in self._tools if t.available)
        self._model = tuple(t for t in self._available if t.model_visible)
        self._quarantined = tuple(t for t in self._tools if not t.available)
        self._skipped = tuple(s for c in self._contributions.values() for s in c.skipped)
        # Content-derived: sorted tools' digests, skipped operations and the source list.
        digest = hashlib.sha256()
        for contribution in self._contributions.values():
            digests = contribution.digests
            if len(digests) != len(contribution.tools):  # built by hand, without digests
                digests = tuple(
                    hashlib.sha256(canonical_json(thaw(t.fingerprint())).encode()).hexdigest()
                    for t in contribution.tools
                )
            for tool_digest in digests:
                digest.update(tool_digest.encode() + b"\n")
        for skipped in self._skipped:
            digest.update(canonical_json([skipped.source, skipped.name, skipped.reason]).encode())
        digest.update(canonical_json(self._sources).encode())
        self._revision = digest.hexdigest()[:16]

    @classmethod
    def build(cls, discoveries: Mapping[str, Discovery], *, sources: Iterable[str] = ()) -> Catalog:
        """Normalize every discovery; ``sources`` adds configured sources with no tools."""
        return cls(
            (build_contribution(name, d) for name, d in discoveries.items()), sources=sources
        )

    def with_source(self, source: str, discovery: Discovery) -> Catalog:
        """A new catalog in which only ``source``'s contribution is replaced."""
        contribs = dict(self._contributions)
        contribs[source] = build_contribution(
            source, discovery, previous=self._contributions.get(source)
        )
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
        return self._available

    @property
    def model_tools(self) -> tuple[ToolDefinition, ...]:
        """Callable tools the model may see: what search and the sandbox expose (app-only
        tools, ``_meta.ui.visibility = ["app"]``, are left out)."""
        return self._model

    @property
    def quarantined(self) -> tuple[ToolDefinition, ...]:
        """Listed but not callable (``tool.quarantine`` says why), sorted by (source, name)."""
        return self._quarantined

    @property
    def skipped(self) -> tuple[SkippedOperation, ...]:
        """Operations a source saw but does not expose, with the reason."""
        return self._skipped

    @property
    def sources(self) -> tuple[str, ...]:
        return self._sources

    def source_tools(self, source: str) -> tuple[ToolDefinition, ...]:
        contribution = self._contributions.get(source)
        return () if contribution is None else contribution.tools

    def get(self, source: str, name: str) -> ToolDefinition | None:
        return self._by_source.get(source, {}).get(name)

    def validators(self, source: str, name: str) -> tuple[Validator, Validator | None] | None:
        """The input and output validators of a callable tool; ``None`` if it is unknown or
        quarantined.

        Compiled on first use and shared by every catalog through a bounded process-wide
        cache keyed by the normalized schema. The build proved that they compile; should
        the compiler still refuse one, this raises ``SchemaUnsupported`` (the bridge fails
        that call with ``TOOL_SCHEMA_UNSUPPORTED``).
        """
        contribution = self._contributions.get(source)
        schemas = None if contribution is None else contribution.enforced.get(name)
        if schemas is None:
            return None
        input_validator = VALIDATORS.get(schemas.input_text, schemas.input_dialect)
        output_validator = None
        if schemas.output_text is not None and schemas.output_dialect is not None:
            output_validator = VALIDATORS.get(schemas.output_text, schemas.output_dialect)
        return input_validator, output_validator

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return (
            f"<Catalog revision={self._revision} sources={len(self._sources)} "
            f"tools={len(self._tools)}>"
        )


__all__ = [
    "Catalog",
    "EnforcedSchemas",
    "FrozenJSON",
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
    "visibility_of",
]
