"""The ``ToolProvider`` protocol: one source of tools behind one catalog contract.

A provider discovers tools (``start``), performs calls (``call_tool``), reports its
health and closes. Everything protocol-specific (MCP sessions, HTTP clients, imports)
stays behind it. The bridge validates arguments before a provider sees them and checks
results after; a provider only turns arguments into a call and a reply into a
``ToolOutput``.

A provider fails by raising:

- ``ToolError``: the tool refused (MCP ``isError``, HTTP 4xx/5xx); message is model-visible.
- ``SourceUnavailable``: the source cannot be reached now (sanitized message).
- anything else: an unexpected host failure; the bridge sanitizes it.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from codemodekit.errors import has_surrogates, well_formed
from codemodekit.scrub import Scrubber

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a provider discovered it, before the catalog normalizes it."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """Untrusted hints (``readOnlyHint``, ``destructiveHint``, ``title``...)."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Opaque sideband (MCP ``_meta``). Host-side only: never shown to the sandbox."""
    provenance: Mapping[str, Any] = field(default_factory=dict)
    """Where the tool came from (``{"operation": "GET /pets/{id}"}``); host-side only."""
    default_dialect: str | None = None
    """``$schema`` to assume when the schema declares none (e.g. draft-07 for old MCP)."""
    deprecated: bool = False


@dataclass(frozen=True, slots=True)
class SkippedTool:
    """A tool the provider saw but will not expose, with the precise reason."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Discovery:
    tools: tuple[ToolSpec, ...] = ()
    skipped: tuple[SkippedTool, ...] = ()
    description: str = ""
    """What the upstream says it is (MCP server info, OpenAPI title, module docstring); told
    to the model with the source's name unless ``codemode.toml`` gives a description."""


_SMALL_TEXTS = ("name", "description", "annotations", "meta", "provenance")
_SCHEMAS = ("input_schema", "output_schema")


def well_formed_discovery(discovery: Discovery, *, schemas: bool = True) -> Discovery:
    """``discovery`` with every lone surrogate replaced by U+FFFD. JSON allows ``"\\ud800"``
    and UTF-8 does not: an upstream (or a lock) that sends one in a tool's name, text or
    schema would make every digest, lock and file of the catalog fail to encode. A name
    changed here reaches no upstream tool, and calling it fails there.

    ``schemas=False`` leaves the schemas as they are (the catalog encodes their canonical
    text anyway, and makes a tool well-formed only when that fails: ``well_formed_spec``),
    so that a build pays for the small texts alone."""
    fields = _SMALL_TEXTS + _SCHEMAS if schemas else _SMALL_TEXTS
    tools = tuple(well_formed_spec(spec, fields) for spec in discovery.tools)
    skipped = tuple(
        SkippedTool(well_formed(s.name), well_formed(s.reason))
        if has_surrogates([s.name, s.reason])
        else s
        for s in discovery.skipped
    )
    description = well_formed(discovery.description)
    unchanged = (
        *zip(tools, discovery.tools, strict=True),
        *zip(skipped, discovery.skipped, strict=True),
    )
    if description == discovery.description and all(a is b for a, b in unchanged):
        return discovery
    return Discovery(tools=tools, skipped=skipped, description=description)


def well_formed_spec(spec: ToolSpec, fields: tuple[str, ...] = _SMALL_TEXTS + _SCHEMAS) -> ToolSpec:
    """``spec`` with every lone surrogate of ``fields`` replaced by U+FFFD (``spec`` itself
    when there is none)."""
    try:
        if not has_surrogates([getattr(spec, f) for f in fields]):
            return spec
        return replace(spec, **{f: well_formed(getattr(spec, f)) for f in fields})
    except Exception:  # nested too deep, or not JSON-like: the catalog quarantines it
        return replace(spec, name=well_formed(spec.name)) if isinstance(spec.name, str) else spec


def scrub_discovery(discovery: Discovery, scrub: Scrubber) -> Discovery:
    """``discovery`` with every piece of tool metadata masked by the source's ``Scrubber``.

    Done once, where a source lists its tools, so every consumer (the catalog, search, the
    lock, ``.d.ts`` files, ``catalog.json``) gets the same masked text: an upstream that
    echoes a credential it was handed into a description or a schema ``default`` reveals
    nothing. A tool whose name holds a credential cannot be renamed without breaking its
    calls: it is set aside (its name masked in the reason).
    """
    if not scrub:
        return discovery
    tools: list[ToolSpec] = []
    skipped = [SkippedTool(scrub(s.name), scrub(s.reason)) for s in discovery.skipped]
    for tool in discovery.tools:
        if scrub(tool.name) != tool.name:
            skipped.append(SkippedTool(scrub(tool.name), "its name contains a credential"))
            continue
        tools.append(
            replace(
                tool,
                description=scrub(tool.description),
                input_schema=scrub.value(tool.input_schema),
                output_schema=scrub.value(tool.output_schema),
                annotations=scrub.value(tool.annotations),
                meta=scrub.value(tool.meta),
                provenance=scrub.value(tool.provenance),
                default_dialect=scrub(tool.default_dialect) if tool.default_dialect else None,
            )
        )
    return Discovery(tuple(tools), tuple(skipped), scrub(discovery.description))


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A successful reply, in the computation-facing shape the sandbox receives.

    ``content`` holds normalized blocks::

        {"type": "text", "text": str}
        {"type": "image" | "audio", "mimeType": str, "data": <base64 str>}
        {"type": "resource_link", "uri": str, "name": str, "mimeType"?: str, ...}
        {"type": "resource", "resource": {"uri": str, "mimeType"?: str,
                                          "text": str | "blob": <base64 str>}}

    ``structured_content`` is the tool's JSON value; ``None`` means absent.
    """

    content: tuple[JsonObject, ...] = ()
    structured_content: Any = None


class HealthStatus(enum.StrEnum):
    CONNECTING = "connecting"
    OK = "ok"
    DEGRADED = "degraded"
    """Up, but something is wrong (some tools quarantined, a reconnect under way)."""
    UNAVAILABLE = "unavailable"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class SourceHealth:
    source: str
    kind: str
    status: HealthStatus
    message: str = ""
    """Sanitized: never a secret, header or environment value, nor an upstream's stderr."""
    tools: int = 0
    detail: str = ""
    """Host-only diagnostics (an MCP child's scrubbed stderr tail): for logs and
    ``codemode check``, never shown to the model and not part of ``to_json``."""
    plugin: str = ""
    """The Agent Plugin this source is a server of (``plugin NAME VERSION, server S``)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "kind": self.kind,
            "status": str(self.status),
            "message": self.message,
            "tools": self.tools,
        }
        if self.plugin:
            out["plugin"] = self.plugin
        return out


ProgressCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a provider knows about the call it is serving."""

    execution_id: str
    call_id: int
    timeout_s: float
    """The provider should give up (and cancel upstream) after this; the bridge also enforces it."""
    max_result_bytes: int
    """Stop reading a reply larger than this and raise ``ResultTooLarge``."""
    report_progress: ProgressCallback = field(default=lambda _message: None)
    """Sanitized, short upstream progress text; the bridge bounds count and rate."""
    run_context: Any = None
    """The host's trusted per-run context (``CodeMode.run(code, context=...)``): user
    identity, tenant, request id. Never shown to model code; ``None`` when not given."""


class ResultTooLarge(Exception):
    """A provider stopped reading a reply over ``CallContext.max_result_bytes``."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"tool result exceeds {limit} bytes")
        self.limit = limit


class ResultInvalid(Exception):
    """A reply that cannot be a result (nested past ``MAX_NESTING``...); the message is
    model-safe. The bridge reports it as ``TOOL_RESULT_INVALID``."""


DiscoveryListener = Callable[[Discovery], None]


def closed_message(source: str) -> str:
    """Why ``start()`` refuses after ``aclose()``: a provider has one lifetime."""
    return (
        f"source {source!r} is closed and cannot be started again; "
        "create a new provider (or a new CodeMode) instead"
    )


@runtime_checkable
class ToolProvider(Protocol):
    """One source of tools. ``name`` is the namespace, preserved exactly."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    async def start(self, on_change: DiscoveryListener) -> Discovery:
        """Connect and discover. Raise ``SourceUnavailable`` when the source cannot come up.

        A provider that reconnects later (or sees its tool list change) calls ``on_change``
        with the complete new discovery; the catalog swaps that source's tools atomically.
        """
        ...

    def call_tool(
        self, name: str, arguments: JsonObject, context: CallContext
    ) -> Awaitable[ToolOutput]:
        """Perform one call with validated arguments. Never replays a failed call."""
        ...

    def health(self) -> SourceHealth: ...

    async def aclose(self) -> None:
        """Cancel reconnects, close sessions, terminate child processes. Idempotent."""
        ...
