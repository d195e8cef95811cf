"""``codemode.toml``: raw models mirror the file, ``Spec`` is the frozen result."""

from codemodekit.spec.errors import SpecError, SpecIssue
from codemodekit.spec.loader import load_spec, parse_spec
from codemodekit.spec.model import (
    McpHttpSource,
    McpStdioSource,
    OpenApiSource,
    PolicyRule,
    PolicySpec,
    PythonSource,
    SecretTemplate,
    SourceSpec,
    Spec,
    resolve_all,
)

__all__ = [
    "McpHttpSource",
    "McpStdioSource",
    "OpenApiSource",
    "PolicyRule",
    "PolicySpec",
    "PythonSource",
    "SecretTemplate",
    "SourceSpec",
    "Spec",
    "SpecError",
    "SpecIssue",
    "load_spec",
    "parse_spec",
    "resolve_all",
]
