"""Turn ``[sources.NAME]`` entries of a ``Spec`` into providers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from codemodekit.limits import Limits
from codemodekit.providers.base import ToolProvider
from codemodekit.providers.python.local import PythonModuleProvider
from codemodekit.spec.model import (
    McpHttpSource,
    McpStdioSource,
    OpenApiSource,
    PythonSource,
    SourceSpec,
    Spec,
)


def build_provider(
    source: SourceSpec,
    *,
    limits: Limits,
    root: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ToolProvider:
    # Protocol adapters are imported lazily: a spec without MCP sources never loads the SDK.
    if isinstance(source, McpStdioSource | McpHttpSource):
        from codemodekit.providers.mcp.provider import McpToolProvider

        return McpToolProvider(source, limits=limits, environ=environ)
    if isinstance(source, OpenApiSource):
        from codemodekit.providers.openapi import OpenApiToolProvider

        return OpenApiToolProvider(source, limits=limits, environ=environ)
    if isinstance(source, PythonSource):
        paths = (*source.path, *((root,) if root else ()))
        return PythonModuleProvider(source.name, source.module, paths=paths)
    raise TypeError(f"unknown source type: {type(source).__name__}")


def providers_from_spec(
    spec: Spec, *, environ: Mapping[str, str] | None = None
) -> list[ToolProvider]:
    return [
        build_provider(source, limits=spec.limits, root=spec.root, environ=environ)
        for source in spec.sources.values()
    ]
