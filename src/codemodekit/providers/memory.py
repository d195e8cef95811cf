"""A deterministic in-memory provider: the test double of ``ToolProvider``.

It lets tests and embedders script a source precisely: its tools, their handlers, an
outage, a reconnect with a new tool list. It records every call it receives.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import (
    CallContext,
    Discovery,
    DiscoveryListener,
    HealthStatus,
    SkippedTool,
    SourceHealth,
    ToolOutput,
    ToolSpec,
    closed_message,
)

Handler = Callable[[dict[str, Any], CallContext], Any | Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class MemoryTool:
    spec: ToolSpec
    handler: Handler
    """Returns a ``ToolOutput`` or a JSON value (which becomes ``structured_content``)."""


@dataclass(frozen=True, slots=True)
class RecordedCall:
    name: str
    arguments: dict[str, Any]
    call_id: int
    execution_id: str


class InMemoryProvider:
    kind = "memory"

    def __init__(
        self,
        name: str,
        tools: Mapping[str, MemoryTool] | None = None,
        *,
        skipped: tuple[SkippedTool, ...] = (),
        unavailable: str | None = None,
    ) -> None:
        self._name = name
        self._tools = dict(tools or {})
        self._skipped = skipped
        self._unavailable = unavailable
        self._listener: DiscoveryListener | None = None
        self._closed = False
        self.calls: list[RecordedCall] = []

    @property
    def name(self) -> str:
        return self._name

    def discovery(self) -> Discovery:
        return Discovery(
            tools=tuple(
                t.spec if t.spec.name == n else _renamed(t.spec, n) for n, t in self._tools.items()
            ),
            skipped=self._skipped,
        )

    async def start(self, on_change: DiscoveryListener) -> Discovery:
        if self._closed:
            raise SourceUnavailable(closed_message(self._name))
        self._listener = on_change
        if self._unavailable is not None:
            raise SourceUnavailable(self._unavailable)
        return self.discovery()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: CallContext
    ) -> ToolOutput:
        if self._closed:
            raise SourceUnavailable(f"source {self._name!r} is closed")
        if self._unavailable is not None:
            raise SourceUnavailable(self._unavailable)
        self.calls.append(
            RecordedCall(name, dict(arguments), context.call_id, context.execution_id)
        )
        tool = self._tools.get(name)
        if tool is None:
            raise SourceUnavailable(f"source {self._name!r} no longer has tool {name!r}")
        result = tool.handler(arguments, context)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, ToolOutput):
            return result
        return ToolOutput(structured_content=result)

    # -- scripting ------------------------------------------------------------------
    def go_down(self, reason: str = "connection lost") -> None:
        self._unavailable = reason

    def come_back(self, tools: Mapping[str, MemoryTool] | None = None) -> None:
        """Recover (optionally with a new tool list) and announce the new discovery."""
        if tools is not None:
            self._tools = dict(tools)
        self._unavailable = None
        if self._listener is not None:
            self._listener(self.discovery())

    def health(self) -> SourceHealth:
        if self._closed:
            status = HealthStatus.CLOSED
        elif self._unavailable is not None:
            status = HealthStatus.UNAVAILABLE
        else:
            status = HealthStatus.OK
        return SourceHealth(
            self._name, self.kind, status, self._unavailable or "", tools=len(self._tools)
        )

    async def aclose(self) -> None:
        self._closed = True


def _renamed(spec: ToolSpec, name: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=spec.annotations,
        meta=spec.meta,
        provenance=spec.provenance,
        default_dialect=spec.default_dialect,
        deprecated=spec.deprecated,
    )
