"""CodeModeKit: a large tool catalog behind sandboxed TypeScript."""

from __future__ import annotations

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

__all__ = [
    "Catalog",
    "CodeModeError",
    "Diagnostic",
    "ErrorCode",
    "Limits",
    "Location",
    "Phase",
    "SecretUnavailable",
    "SourceUnavailable",
    "ToolDefinition",
    "ToolError",
    "__version__",
]
