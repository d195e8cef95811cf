"""The resolved, frozen ``Spec`` that ``load_spec`` returns and providers consume.

The raw pydantic models that mirror ``codemode.toml`` live in ``spec/raw.py``; this module
is what the rest of the library sees. Secret-bearing values (``env``, ``headers``,
``auth``) are ``SecretTemplate``s: resolved from the host environment only when a source
connects, and never printed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from codemodekit.errors import SecretUnavailable
from codemodekit.limits import Limits
from codemodekit.runtime import DEFAULT_RUNTIME, RuntimeOptions

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SecretTemplate:
    """A string that may contain ``${VAR}``; its resolved value is never shown.

    ``repr``/``str`` show only the template with variables masked, so a template can be
    logged or put in an error without leaking what the environment holds.
    """

    __slots__ = ("_key", "_template")

    def __init__(self, template: str, *, key: str) -> None:
        self._template = template
        self._key = key

    @property
    def key(self) -> str:
        """Dotted key path in the spec (``sources.github.env.GITHUB_TOKEN``)."""
        return self._key

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(_VAR.findall(self._template))

    @property
    def is_literal(self) -> bool:
        return not self.variables

    def resolve(self, environ: Mapping[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                raise SecretUnavailable(
                    f"{self._key}: environment variable {name} is not set "
                    f"(export {name}=... before starting codemode)"
                )
            return env[name]

        return _VAR.sub(substitute, self._template)

    def __repr__(self) -> str:
        return f"SecretTemplate({self._key}={self.masked!r})"

    __str__ = __repr__

    @property
    def masked(self) -> str:
        """The template with literal text kept only around variables: ``Bearer ${TOKEN}``
        stays readable, a literal secret becomes ``***``."""
        if self.is_literal:
            return "***"
        return _VAR.sub(lambda m: "${" + m.group(1) + "}", self._template)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SecretTemplate)
            and other._template == self._template
            and other._key == self._key
        )

    def __hash__(self) -> int:
        return hash((self._template, self._key))


def resolve_all(
    values: Mapping[str, SecretTemplate], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    return {name: template.resolve(environ) for name, template in values.items()}


@dataclass(frozen=True, slots=True)
class PolicyRule:
    tools: str
    """Glob over ``source.tool`` (``github.get_*``, ``petstore.*``)."""
    decision: Literal["allow", "deny"]
    read_only: bool | None = None
    """When true, the rule matches only tools annotated ``readOnlyHint: true``."""


@dataclass(frozen=True, slots=True)
class PolicySpec:
    default: Literal["allow", "deny"]
    rules: tuple[PolicyRule, ...] = ()


@dataclass(frozen=True, slots=True)
class PluginOrigin:
    """The Agent Plugin an MCP source came from (``type = "plugin"``): kept so the catalog,
    health, search notes and generated files can name it (ADR 0032)."""

    source: str
    """The ``[sources.NAME]`` table of the plugin."""
    name: str
    """``plugin.json``'s ``name``."""
    version: str | None
    root: Path
    data: Path
    """What ``${PLUGIN_DATA}`` names (created when the server starts)."""
    server: str
    """The server's key in ``mcp.json``'s ``mcpServers``."""
    entry: str
    """The entry as written (JSON, without ``env`` and ``headers``): what the lock records."""

    @property
    def label(self) -> str:
        """``plugin github-tools 1.2.0, server github``."""
        version = f" {self.version}" if self.version else ""
        return f"plugin {self.name}{version}, server {self.server}"

    def to_json(self) -> dict[str, str | None]:
        return {"name": self.name, "version": self.version, "server": self.server}


@dataclass(frozen=True, slots=True)
class McpStdioSource:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, SecretTemplate] = field(default_factory=dict)
    cwd: Path | None = None
    """Working folder of the server process. ``load_spec`` resolves it against the spec
    file's folder and defaults it to that folder, so relative ``args`` never depend on where
    codemode was started; ``None`` (built in code) keeps the caller's folder."""
    timeout_ms: int | None = None
    """Connect and discovery timeout; ``None`` means the library default."""
    trust_annotations: bool = False
    description: str | None = None
    """Told to the model with the source's name; ``None``: the upstream's own."""
    """``read_only`` policy rules believe this source's ``readOnlyHint`` (opt-in)."""
    kind: Literal["mcp"] = "mcp"
    plugin: PluginOrigin | None = None
    """Set when the source is a server of an Agent Plugin (``type = "plugin"``)."""


@dataclass(frozen=True, slots=True)
class McpHttpSource:
    name: str
    url: str
    transport: Literal["streamable-http", "sse"] = "streamable-http"
    headers: Mapping[str, SecretTemplate] = field(default_factory=dict)
    timeout_ms: int | None = None
    trust_annotations: bool = False
    description: str | None = None
    """Told to the model with the source's name; ``None``: the upstream's own."""
    kind: Literal["mcp"] = "mcp"
    plugin: PluginOrigin | None = None


@dataclass(frozen=True, slots=True)
class OpenApiSource:
    name: str
    document: Path
    """Resolved against the spec file's folder; read from disk, never fetched."""
    base_url: str | None = None
    auth: Mapping[str, SecretTemplate] = field(default_factory=dict)
    """Keys: ``api_key``, ``bearer``, ``username``, ``password`` (values may use ``${VAR}``)."""
    include: tuple[str, ...] = ()
    """Globs over operation names; empty means every operation."""
    exclude: tuple[str, ...] = ()
    timeout_ms: int | None = None
    """Bound on loading the document at start; ``None`` means 60 s."""
    trust_annotations: bool = False
    description: str | None = None
    """Told to the model with the source's name; ``None``: the upstream's own."""
    kind: Literal["openapi"] = "openapi"


@dataclass(frozen=True, slots=True)
class PythonSource:
    name: str
    module: str
    path: tuple[Path, ...] = ()
    """Extra import roots (the spec file's folder is always one)."""
    trust_annotations: bool = False
    description: str | None = None
    """Told to the model with the source's name; ``None``: the upstream's own."""
    kind: Literal["python"] = "python"


SourceSpec = McpStdioSource | McpHttpSource | OpenApiSource | PythonSource


@dataclass(frozen=True, slots=True)
class Spec:
    path: Path | None
    """The ``codemode.toml`` this came from (``None`` when built in code)."""
    version: int
    name: str
    limits: Limits
    policy: PolicySpec
    sources: Mapping[str, SourceSpec]
    """In file order; the key is the namespace, preserved exactly."""
    runtime: RuntimeOptions = DEFAULT_RUNTIME
    """How runs execute (``[runtime]``)."""

    @property
    def root(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()
