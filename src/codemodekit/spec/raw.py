"""Raw pydantic models that mirror ``codemode.toml`` key for key.

They forbid unknown keys, are strict about TOML types (``"5000"`` is not an integer) and
carry every field's default, description and a TOML example: the JSON Schema
(``schema/codemode.schema.json``) and the reference (``docs/spec.md``) are generated from
them. ``loader.py`` turns a validated ``RawSpec`` into the frozen ``Spec``.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    create_model,
    field_validator,
)
from pydantic_core import PydanticCustomError

from codemodekit import limits as limits_module
from codemodekit import runtime as runtime_module
from codemodekit.limits import Limits
from codemodekit.runtime import MAY_BE_ZERO, RuntimeOptions

TOML_EXAMPLE = "x-toml-example"
"""JSON Schema extension keyword holding a field's TOML example (used by ``docs/spec.md``)."""

_VAR_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ANY_REFERENCE = re.compile(r"\$\{[^}]*\}?")


def _no_env_references(value: str) -> str:
    # ${VAR} is expanded only in env/headers/auth; elsewhere it would silently stay literal.
    match = _ANY_REFERENCE.search(value)
    if match is not None:
        raise PydanticCustomError(
            "env_reference_not_allowed",
            "`{reference}` is not expanded here: environment variables are read only in "
            "`env`, `headers` and `auth` values",
            {"reference": match.group(0)},
        )
    return value


def _well_formed_references(value: str) -> str:
    for match in _ANY_REFERENCE.finditer(value):
        if _VAR_REFERENCE.fullmatch(match.group(0)) is None:
            raise PydanticCustomError(
                "env_reference_malformed",
                "malformed environment reference: write `${NAME}` where NAME is letters, "
                "digits and `_` and does not start with a digit",
            )
    return value


PlainStr = Annotated[str, AfterValidator(_no_env_references)]
"""A string that must not contain ``${...}`` (only secret-bearing values are expanded)."""
SecretValue = Annotated[str, AfterValidator(_well_formed_references)]
"""A string in ``env``/``headers``/``auth``: may use ``${VAR}``, never shown in errors."""
SourceName = Annotated[str, StringConstraints(min_length=1, pattern=r"^[^.\s]+$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[^=\x00]+$")]
"""An environment variable name: non-empty, no ``=`` or NUL (the OS cannot carry them)."""
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
"""An HTTP header name (an RFC 9110 token)."""
PositiveInt = Annotated[int, Field(gt=0)]


def _field(default: Any, description: str, example: str, **kwargs: Any) -> Any:
    """A field with its default, description and TOML example in one place."""
    return Field(
        default,
        description=description,
        json_schema_extra={TOML_EXAMPLE: example},
        **kwargs,
    )


class _Raw(BaseModel):
    # defer_build: one validator, RawSpec's, is built when a file is first validated,
    # instead of one per model at import (the nested ones were built twice). Defaults below
    # are made with model_construct() so that importing builds none. (CLI start-up.)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


# --- [limits] ---------------------------------------------------------------------------


def _attribute_docs(module: Any, cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the single place its fields are documented)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):  # no source shipped (a .pyc-only install): names suffice
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            body = node.body
            for current, following in itertools.pairwise(body):
                if (
                    isinstance(current, ast.AnnAssign)
                    and isinstance(current.target, ast.Name)
                    and isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    found[current.target.id] = " ".join(following.value.value.split())
    return found


def _model_of(
    name: str, cls: type, module: Any, doc: str, kind: Callable[[str], Any]
) -> type[BaseModel]:
    """A raw table built from a frozen dataclass (``Limits``, ``RuntimeOptions``), so names,
    defaults and descriptions cannot drift from the runtime."""
    descriptions = _attribute_docs(module, cls)
    definitions: dict[str, Any] = {}
    for item in dataclass_fields(cls):
        default = item.default
        example = f"{item.name} = {json.dumps(default)}"
        described = descriptions.get(item.name, item.name.replace("_", " "))
        definitions[item.name] = (kind(item.name), _field(default, described, example))
    model: type[BaseModel] = create_model(name, __base__=_Raw, __doc__=doc, **definitions)
    return model


RawLimits = _model_of(
    "RawLimits",
    Limits,
    limits_module,
    "Bounds of one run. Every key is optional; all must be positive integers.",
    lambda _name: PositiveInt,
)


# --- [runtime] --------------------------------------------------------------------------


def _runtime_kind(name: str) -> Any:
    if name == "mode":
        return Literal["process", "inline"]
    if name == "unsafe_allow_uncontained":
        return StrictBool
    return Annotated[int, Field(ge=0)] if name in MAY_BE_ZERO else PositiveInt


RawRuntime = _model_of(
    "RawRuntime",
    RuntimeOptions,
    runtime_module,
    "How runs execute: sandbox worker processes (default) or in this process.",
    _runtime_kind,
)


def _trust_annotations_field() -> Any:
    """The same `trust_annotations` key on every kind of source."""
    return _field(
        False,
        "Trust this source's tool annotations (`readOnlyHint`...) as facts: only then can a "
        "`read_only = true` policy rule match its tools. Annotations are the server's own "
        "claims; set this only for a server you trust not to lie.",
        "trust_annotations = true",
    )


def _description_field() -> Any:
    """The same `description` key on every kind of source."""
    return _field(
        None,
        "What this source offers, in one line, told to the model with the source's name "
        "when it connects. Absent: the upstream's own (MCP server info, OpenAPI "
        "`info.title`, the Python module's docstring).",
        'description = "Issues, pull requests and code of our GitHub organization"',
        min_length=1,
        max_length=500,
    )


# --- [policy] ---------------------------------------------------------------------------

Decision = Literal["allow", "deny"]


class RawPolicyRule(_Raw):
    """One policy rule; the first rule whose `tools` glob (and `read_only`) matches decides."""

    tools: PlainStr = _field(
        ...,
        "Glob over `source.tool` addresses (`*` matches any run of characters).",
        'tools = "github.get_*"',
        min_length=1,
    )
    decision: Decision = _field(
        ..., "What a matching call gets: `allow` or `deny`.", 'decision = "allow"'
    )
    read_only: bool | None = _field(
        None,
        "When true, the rule matches only tools annotated `readOnlyHint: true` by a source "
        "with `trust_annotations = true` (an untrusted annotation never matches); "
        "false or absent: any tool.",
        "read_only = true",
    )


class RawPolicy(_Raw):
    """Which tool calls may run. Required: there is no implicit allow-all."""

    default: Decision = _field(
        ...,
        "Decision for a call that no rule matches: `allow` or `deny`.",
        'default = "deny"',
    )
    rules: list[RawPolicyRule] = _field(
        [],
        "Ordered rules; the first match decides.",
        'rules = [{ tools = "github.get_*", decision = "allow" }]',
    )


# --- [sources.NAME] ---------------------------------------------------------------------


class RawMcpSource(_Raw):
    """An MCP server: a local process over stdio (`command`) or a remote one (`url`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["command"]}, {"required": ["url"]}],
            "allOf": [
                {
                    "if": {"required": ["command"]},
                    "then": {"properties": {"transport": False, "headers": False}},
                },
                {
                    "if": {"required": ["url"]},
                    "then": {"properties": {"args": False, "env": False, "cwd": False}},
                },
            ],
        }
    )

    type: Literal["mcp"] = _field(..., "Source type.", 'type = "mcp"')
    command: PlainStr | None = _field(
        None,
        "Executable of a stdio server, started directly (never through a shell). "
        "Set either `command` or `url`.",
        'command = "github-mcp-server"',
        min_length=1,
    )
    args: list[PlainStr] = _field(
        [],
        "Arguments passed to `command` as written (stdio only); a relative path among them "
        "resolves against the server's working folder (`cwd`, default this file's folder).",
        'args = ["stdio"]',
    )
    env: dict[EnvName, SecretValue] = _field(
        {},
        "Environment of the server process (stdio only). Values may use `${VAR}`, read "
        "from the host environment when the source connects.",
        'env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }',
    )
    cwd: PlainStr | None = _field(
        None,
        "Working directory of the server process (stdio only), relative to this file; "
        "default: this file's folder. Relative paths in `command` and `args` resolve there, "
        "whichever folder codemode is started from.",
        'cwd = "tools/github"',
        min_length=1,
    )
    url: PlainStr | None = _field(
        None,
        "Endpoint of a remote server (`http://` or `https://`). Set either `command` or `url`.",
        'url = "https://deploy.example.com/mcp"',
        min_length=1,
    )
    transport: Literal["streamable-http", "sse"] = _field(
        "streamable-http",
        "HTTP transport (url only): `streamable-http`, or `sse` for legacy SSE servers.",
        'transport = "sse"',
    )
    headers: dict[HeaderName, SecretValue] = _field(
        {},
        "HTTP headers sent with every request (url only). Values may use `${VAR}`.",
        'headers = { Authorization = "Bearer ${DEPLOY_TOKEN}" }',
    )
    timeout_ms: PositiveInt | None = _field(
        None,
        "Connect and tool-discovery timeout in milliseconds; absent means the library default.",
        "timeout_ms = 10000",
    )
    description: PlainStr | None = _description_field()
    trust_annotations: bool = _trust_annotations_field()

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not _is_http_url(value):
            raise PydanticCustomError(
                "url_scheme", "expected an http:// or https:// URL with a host (and a valid port)"
            )
        return value


def _is_http_url(value: str) -> bool:
    """``http(s)://host[:port]...``, readable by ``urlsplit`` as such: a port out of range,
    a port that is not a number or an unclosed IPv6 bracket passed the pattern and then
    raised wherever the URL was read (a traceback from ``codemode check``)."""
    if not re.match(r"^https?://[^\s/]+", value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return False
    return bool(parts.hostname)


class RawOpenApiAuth(_Raw):
    """Credentials applied per the document's security schemes. Values may use `${VAR}`."""

    model_config = ConfigDict(
        json_schema_extra={
            "dependentRequired": {"username": ["password"], "password": ["username"]}
        }
    )

    api_key: SecretValue | None = _field(
        None, "Value for an `apiKey` security scheme.", 'api_key = "${PETSTORE_KEY}"'
    )
    bearer: SecretValue | None = _field(
        None, "Token for an HTTP `bearer` security scheme.", 'bearer = "${PETSTORE_TOKEN}"'
    )
    username: SecretValue | None = _field(
        None, "User name for an HTTP `basic` security scheme.", 'username = "${PETSTORE_USER}"'
    )
    password: SecretValue | None = _field(
        None,
        "Password for an HTTP `basic` security scheme.",
        'password = "${PETSTORE_PASSWORD}"',
    )


class RawOpenApiSource(_Raw):
    """An OpenAPI 3.x document; each operation becomes a tool."""

    # A credential goes only to a server this file names (see `base_url`).
    model_config = ConfigDict(json_schema_extra={"dependentRequired": {"auth": ["base_url"]}})

    type: Literal["openapi"] = _field(..., "Source type.", 'type = "openapi"')
    document: PlainStr = _field(
        ...,
        "Path of the OpenAPI document (JSON or YAML), relative to this file. "
        "Read from disk, never fetched.",
        'document = "specs/petstore.yaml"',
        min_length=1,
    )
    base_url: PlainStr | None = _field(
        None,
        "Server URL requests are sent to; absent means the document's first `servers` entry. "
        "Required with `auth`: a credential is sent only to a server this file names, never "
        "to one the document chooses.",
        'base_url = "https://petstore.example.com/v3"',
        min_length=1,
    )
    auth: RawOpenApiAuth = _field(
        RawOpenApiAuth.model_construct(),
        "Credentials for the document's security schemes.",
        'auth = { api_key = "${PETSTORE_KEY}" }',
    )
    include: list[PlainStr] = _field(
        [],
        "Globs over operation names to keep; empty keeps every operation.",
        'include = ["pet*"]',
    )
    exclude: list[PlainStr] = _field(
        [],
        "Globs over operation names to drop (applied after `include`).",
        'exclude = ["deletePet"]',
    )
    timeout_ms: PositiveInt | None = _field(
        None,
        "Timeout in milliseconds for reading and checking the document at start; absent "
        "means the library default (60000).",
        "timeout_ms = 120000",
    )
    description: PlainStr | None = _description_field()
    trust_annotations: bool = _trust_annotations_field()


class RawPythonSource(_Raw):
    """A Python module whose attributes made with `define_tool` become tools."""

    type: Literal["python"] = _field(..., "Source type.", 'type = "python"')
    module: PlainStr = _field(
        ...,
        "Dotted module name; its `define_tool` attributes are the tools (`__all__` respected).",
        'module = "myapp.tools"',
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
    )
    path: list[PlainStr] = _field(
        [],
        "Extra import roots, relative to this file (this file's folder is always one).",
        'path = ["src"]',
    )
    description: PlainStr | None = _description_field()
    trust_annotations: bool = _trust_annotations_field()


class RawPluginSource(_Raw):
    """An installed Agent Plugin: each server of its `mcp.json` becomes an MCP source."""

    type: Literal["plugin"] = _field(..., "Source type.", 'type = "plugin"')
    path: PlainStr = _field(
        ...,
        "The plugin's root folder (holding `plugin.json` and `mcp.json`, Agent Plugins "
        "1.0), relative to this file. A plugin with one server is the source `NAME`; with "
        "several, each server `S` is the source `NAME-S`. In `mcp.json`, `${PLUGIN_ROOT}` "
        "and `${PLUGIN_DATA}` work anywhere, any other `${VAR}` only in `env` and `headers`.",
        'path = "plugins/github-tools"',
        min_length=1,
    )
    timeout_ms: PositiveInt | None = _field(
        None,
        "Connect and tool-discovery timeout of each server, in milliseconds.",
        "timeout_ms = 10000",
    )
    trust_annotations: bool = _trust_annotations_field()


RawSource = Annotated[
    RawMcpSource | RawOpenApiSource | RawPythonSource | RawPluginSource,
    Field(discriminator="type"),
]
SOURCE_MODELS: dict[str, type[_Raw]] = {
    "mcp": RawMcpSource,
    "openapi": RawOpenApiSource,
    "python": RawPythonSource,
    "plugin": RawPluginSource,
}


# --- the file ---------------------------------------------------------------------------


class RawSpec(_Raw):
    """`codemode.toml`: tool sources, limits and policy of one code-mode server."""

    model_config = ConfigDict(title="codemode.toml")

    version: int = Field(
        ...,
        description="Version of this file format; must be 1.",
        json_schema_extra={"const": 1, TOML_EXAMPLE: "version = 1"},
    )
    name: PlainStr = _field(
        ...,
        "Name of this code-mode server (shown to MCP clients).",
        'name = "work-code-mode"',
        min_length=1,
    )
    limits: RawLimits = _field(  # type: ignore[valid-type]
        RawLimits.model_construct(),
        "Bounds of one run; every key is optional.",
        "[limits]\ncompute_time_ms = 5000",
    )
    runtime: RawRuntime = _field(  # type: ignore[valid-type]
        RawRuntime.model_construct(),
        "How runs execute; every key is optional. `codemode serve` and the library use "
        'sandbox worker processes; `mode = "inline"` runs QuickJS in the server process.',
        "[runtime]\nmax_runs = 32",
    )
    policy: RawPolicy = _field(
        ...,
        "Which tool calls may run. Required: there is no implicit allow-all.",
        '[policy]\ndefault = "deny"',
    )
    sources: dict[SourceName, RawSource] = _field(
        {},
        "Tool sources; the table key is the namespace (`tools.NAME.tool`), preserved exactly. "
        'Quote names with `-` or other characters: `[sources."deployment-api"]`.',
        '[sources.app]\ntype = "python"\nmodule = "myapp.tools"',
    )

    @field_validator("version")
    @classmethod
    def _supported_version(cls, value: int) -> int:
        if value != 1:
            raise PydanticCustomError(
                "unsupported_version",
                "unsupported version {version}: this codemodekit reads `version = 1`",
                {"version": value},
            )
        return value
