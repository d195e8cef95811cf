"""CodeModeKit: a large tool catalog behind sandboxed TypeScript.

from codemodekit import CodeMode, load_spec
async with CodeMode.from_spec(load_spec("codemode.toml")) as cm:
    result = await cm.run("return await tools.app.lookup({ id: '1' })")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public names resolve on first access (PEP 562): `import codemodekit` must stay cheap so that
# `codemode --version` and sandbox worker processes do not pay for pydantic, jsonschema,
# tree-sitter or the MCP SDK they may never use. The TYPE_CHECKING block below mirrors this
# table for mypy and IDEs; tests/test_lazy_imports.py keeps the two and __all__ in step.
_LAZY: dict[str, str] = {
    "Catalog": "codemodekit.catalog.catalog",
    "ToolDefinition": "codemodekit.catalog.catalog",
    "CodeModeError": "codemodekit.errors",
    "Diagnostic": "codemodekit.errors",
    "ErrorCode": "codemodekit.errors",
    "Location": "codemodekit.errors",
    "Phase": "codemodekit.errors",
    "SecretUnavailable": "codemodekit.errors",
    "SourceUnavailable": "codemodekit.errors",
    "ToolError": "codemodekit.errors",
    "Limits": "codemodekit.limits",
    "register_code_mode_tools": "codemodekit.server.tools",
    "BaseObserver": "codemodekit.observe",
    "RunObserver": "codemodekit.observe",
    "RunStart": "codemodekit.observe",
    "ToolCallEvent": "codemodekit.observe",
    "AuditSink": "codemodekit.observe.audit",
    "CodeModeMetrics": "codemodekit.observe.metrics",
    "TracingObserver": "codemodekit.observe.tracing",
    "PolicyDecision": "codemodekit.bridge.policy",
    "ToolCallRequest": "codemodekit.bridge.policy",
    "ToolContext": "codemodekit.providers.python.local",
    "allow_all_tool_calls": "codemodekit.bridge.policy",
    "deny_all_tool_calls": "codemodekit.bridge.policy",
    "rules_policy": "codemodekit.bridge.policy",
    "SourceHealth": "codemodekit.providers.base",
    "ToolProvider": "codemodekit.providers.base",
    "define_tool": "codemodekit.providers.python.local",
    "local": "codemodekit.providers.python.local",
    "tool": "codemodekit.providers.python.decorator",
    "CodeMode": "codemodekit.run",
    "ProgressEvent": "codemodekit.run",
    "RunResult": "codemodekit.run",
    "CodeSandbox": "codemodekit.sandbox.base",
    "LogEntry": "codemodekit.sandbox.base",
    "RuntimeStats": "codemodekit.sandbox.base",
    "QuickJsSandbox": "codemodekit.sandbox.quickjs",
    "ProcessSandbox": "codemodekit.sandbox.process",
    "RuntimeOptions": "codemodekit.runtime",
    "SearchResponse": "codemodekit.search.search",
    "search_catalog": "codemodekit.search.search",
    "SpecError": "codemodekit.spec",
    "load_spec": "codemodekit.spec",
    "Spec": "codemodekit.spec.model",
}

if TYPE_CHECKING:
    from codemodekit.bridge.policy import (
        PolicyDecision,
        ToolCallRequest,
        allow_all_tool_calls,
        deny_all_tool_calls,
        rules_policy,
    )
    from codemodekit.catalog.catalog import Catalog, ToolDefinition
    from codemodekit.errors import (
        CodeModeError,
        Diagnostic,
        ErrorCode,
        Location,
        Phase,
        SecretUnavailable,
        SourceUnavailable,
        ToolError,
    )
    from codemodekit.limits import Limits
    from codemodekit.observe import BaseObserver, RunObserver, RunStart, ToolCallEvent
    from codemodekit.observe.audit import AuditSink
    from codemodekit.observe.metrics import CodeModeMetrics
    from codemodekit.observe.tracing import TracingObserver
    from codemodekit.providers.base import SourceHealth, ToolProvider
    from codemodekit.providers.python.decorator import tool
    from codemodekit.providers.python.local import ToolContext, define_tool, local
    from codemodekit.run import CodeMode, ProgressEvent, RunResult
    from codemodekit.runtime import RuntimeOptions
    from codemodekit.sandbox.base import CodeSandbox, LogEntry, RuntimeStats
    from codemodekit.sandbox.process import ProcessSandbox
    from codemodekit.sandbox.quickjs import QuickJsSandbox
    from codemodekit.search.search import SearchResponse, search_catalog
    from codemodekit.server.tools import register_code_mode_tools
    from codemodekit.spec import SpecError, load_spec
    from codemodekit.spec.model import Spec


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codemodekit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AuditSink",
    "BaseObserver",
    "Catalog",
    "CodeMode",
    "CodeModeError",
    "CodeModeMetrics",
    "CodeSandbox",
    "Diagnostic",
    "ErrorCode",
    "Limits",
    "Location",
    "LogEntry",
    "Phase",
    "PolicyDecision",
    "ProcessSandbox",
    "ProgressEvent",
    "QuickJsSandbox",
    "RunObserver",
    "RunResult",
    "RunStart",
    "RuntimeOptions",
    "RuntimeStats",
    "SearchResponse",
    "SecretUnavailable",
    "SourceHealth",
    "SourceUnavailable",
    "Spec",
    "SpecError",
    "ToolCallEvent",
    "ToolCallRequest",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolProvider",
    "TracingObserver",
    "__version__",
    "allow_all_tool_calls",
    "define_tool",
    "deny_all_tool_calls",
    "load_spec",
    "local",
    "register_code_mode_tools",
    "rules_policy",
    "search_catalog",
    "tool",
]
