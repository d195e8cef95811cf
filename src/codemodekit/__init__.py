"""CodeModeKit: a large tool catalog behind sandboxed TypeScript.

from codemodekit import CodeMode, load_spec
async with CodeMode.from_spec(load_spec("codemode.toml")) as cm:
    result = await cm.run("return await tools.app.lookup({ id: '1' })")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from codemodekit.catalog import Catalog, ToolDefinition
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
from codemodekit.policy import (
    PolicyDecision,
    ToolCallRequest,
    allow_all_tool_calls,
    deny_all_tool_calls,
    rules_policy,
)
from codemodekit.providers.base import SourceHealth, ToolProvider
from codemodekit.providers.local import define_tool, local
from codemodekit.run import CodeMode, ProgressEvent, RunResult
from codemodekit.sandbox.base import CodeSandbox, LogEntry, RuntimeStats
from codemodekit.sandbox.quickjs import QuickJsSandbox
from codemodekit.search import SearchResponse, search_catalog
from codemodekit.spec import SpecError, load_spec
from codemodekit.spec.model import Spec

if TYPE_CHECKING:
    from codemodekit.mcp_server import register_code_mode_tools


def __getattr__(name: str) -> Any:
    # The MCP server adapter pulls in the whole MCP SDK (~0.3 s); load it on first use.
    if name == "register_code_mode_tools":
        from codemodekit.mcp_server import register_code_mode_tools

        return register_code_mode_tools
    raise AttributeError(f"module 'codemodekit' has no attribute {name!r}")


__all__ = [
    "Catalog",
    "CodeMode",
    "CodeModeError",
    "CodeSandbox",
    "Diagnostic",
    "ErrorCode",
    "Limits",
    "Location",
    "LogEntry",
    "Phase",
    "PolicyDecision",
    "ProgressEvent",
    "QuickJsSandbox",
    "RunResult",
    "RuntimeStats",
    "SearchResponse",
    "SecretUnavailable",
    "SourceHealth",
    "SourceUnavailable",
    "Spec",
    "SpecError",
    "ToolCallRequest",
    "ToolDefinition",
    "ToolError",
    "ToolProvider",
    "__version__",
    "allow_all_tool_calls",
    "define_tool",
    "deny_all_tool_calls",
    "load_spec",
    "local",
    "register_code_mode_tools",
    "rules_policy",
    "search_catalog",
]
