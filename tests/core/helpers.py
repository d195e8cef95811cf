"""Small builders for core tests: a scripted source and a started CodeMode."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from codemodekit import CodeMode, Limits, allow_all_tool_calls
from codemodekit.bridge.policy import ToolPolicy
from codemodekit.providers.base import ToolProvider, ToolSpec
from codemodekit.providers.memory import Handler, InMemoryProvider, MemoryTool

OBJECT: dict[str, Any] = {"type": "object"}


def tool(
    name: str,
    handler: Handler,
    schema: Mapping[str, Any] | None = None,
    **spec: Any,
) -> tuple[str, MemoryTool]:
    return name, MemoryTool(
        ToolSpec(name, spec.pop("description", name), schema or OBJECT, **spec), handler
    )


def source(name: str, *tools: tuple[str, MemoryTool], **kwargs: Any) -> InMemoryProvider:
    return InMemoryProvider(name, dict(tools), **kwargs)


@contextlib.asynccontextmanager
async def code_mode(
    *sources: ToolProvider,
    policy: ToolPolicy | None = None,
    **limits: Any,
) -> AsyncIterator[CodeMode]:
    async with CodeMode(
        sources=list(sources),
        policy=policy or allow_all_tool_calls(),
        limits=Limits(**limits),
    ) as cm:
        yield cm


def const(value: Any) -> Callable[[dict[str, Any], Any], Any]:
    return lambda _args, _ctx: value
