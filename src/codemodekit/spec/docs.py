"""``docs/spec.md``: the ``codemode.toml`` reference, generated from the raw spec models.

Descriptions, defaults and examples come from the same fields as the JSON Schema, so the
reference cannot drift from what ``load_spec`` accepts. Regenerate with::

    python -m codemodekit.spec.docs > docs/spec.md
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel

from codemodekit.spec.jsonschema import build_json_schema
from codemodekit.spec.raw import (
    TOML_EXAMPLE,
    RawLimits,
    RawMcpSource,
    RawOpenApiAuth,
    RawOpenApiSource,
    RawPluginSource,
    RawPolicy,
    RawPolicyRule,
    RawPythonSource,
    RawRuntime,
    RawSpec,
)

REGENERATE_COMMAND = "python -m codemodekit.spec.docs > docs/spec.md"

_INTRO = """\
# `codemode.toml` reference

<!-- Generated from src/codemodekit/spec/raw.py; do not edit by hand.
     Regenerate: python -m codemodekit.spec.docs > docs/spec.md -->

One TOML file declares the tool **sources**, the **limits** of a run and the **policy**
for tool calls. `codemode init` writes a commented starter; `codemode.toml.example` at the
repository root shows every key; `codemode check` validates a file and
`codemode schema` prints its JSON Schema (`schema/codemode.schema.json`, usable by editors
through a first line `#:schema ./schema/codemode.schema.json`).

```toml
version = 1
name = "work-code-mode"

[policy]
default = "deny"
rules = [{ tools = "app.*", read_only = true, decision = "allow" }]

[sources.app]
type = "python"
module = "myapp.tools"
trust_annotations = true   # our own code: its readOnlyHint may match read_only rules
```

Rules that hold for the whole file:

- Unknown keys are errors (with a "did you mean" when a valid key is close).
- Values are strictly typed: `compute_time_ms = "5000"` is an error, not a number.
- Relative paths (`document`, `cwd`, `path`) resolve against the folder of the file. A
  stdio server starts in that folder too (or in its `cwd`), so `args = ["server.py"]` works
  whatever folder `codemode` is started from (`codemode serve -c /abs/codemode.toml`).
- `${VAR}` is expanded **only** in `env`, `headers` and `auth` values, from the host
  environment, when the source connects (never when the file is loaded). A missing variable
  is an error naming the key. `${VAR}` anywhere else is rejected rather than kept literally,
  so a value that looks interpolated never silently is not. Secret values are never printed.
- Errors point at the file: `codemode.toml:LINE:COL: key.path: message`, then the line.
"""

_ENDING = """\
## Errors

`load_spec` raises `SpecError` (a `CodeModeError`) with `file`, `line`, `column`, `key`,
`message` and every problem found in `issues`; `codemode check` prints it and exits 2
(as every command does on a spec error):

```text
codemode.toml:6:1: limits.comptue_time_ms: unknown key; did you mean `compute_time_ms`?
 6 | comptue_time_ms = 5000
   | ^^^^^^^^^^^^^^^
```
"""


def render_spec_reference() -> str:
    """The committed ``docs/spec.md`` text; same models → same text."""
    schema = build_json_schema()
    defs = schema["$defs"]
    parts = [
        _INTRO,
        _section("## Top level", RawSpec, schema),
        _section(
            "## `[limits]`",
            RawLimits,
            defs["Limits"],
            "Sizes are bytes, times milliseconds. A run that exceeds a limit ends with the "
            "limit's own error code; nothing is silently truncated.",
            header="[limits]",
        ),
        _section(
            "## `[runtime]`",
            RawRuntime,
            defs["Runtime"],
            "`codemode serve` and `CodeMode` run each run in a sandbox worker process that the "
            "server can always stop; `codemode run` runs one script in its own process "
            "(`inline`). Admission control bounds the runs in flight and the queue; a run "
            "refused by it ends with `SERVER_BUSY`.",
            header="[runtime]",
        ),
        _section("## `[policy]`", RawPolicy, defs["Policy"], header="[policy]"),
        _section(
            "### Each rule in `policy.rules`",
            RawPolicyRule,
            defs["PolicyRule"],
            "Written as inline tables in `rules = [...]` or as `[[policy.rules]]` tables.",
        ),
        "## `[sources.NAME]`\n\n"
        + _doc(RawSpec.model_fields["sources"].description or "")
        + " A name must be non-empty and contain no `.` or whitespace. "
        "`type` selects one of the kinds below.\n",
        _section(
            '### `type = "mcp"`',
            RawMcpSource,
            defs["McpSource"],
            "Set exactly one of `command` (stdio: `args`, `env`, `cwd` apply) and `url` "
            "(HTTP: `transport`, `headers` apply).",
            header="[sources.NAME]",
            groups=(
                (
                    "A local server over stdio:",
                    ("type", "command", "args", "env", "cwd", "description", "trust_annotations"),
                ),
                (
                    "A remote server over HTTP:",
                    (
                        "type",
                        "url",
                        "transport",
                        "headers",
                        "timeout_ms",
                        "description",
                        "trust_annotations",
                    ),
                ),
            ),
        ),
        _section(
            '### `type = "openapi"`',
            RawOpenApiSource,
            defs["OpenApiSource"],
            header="[sources.NAME]",
        ),
        _section(
            "#### `auth` of an openapi source",
            RawOpenApiAuth,
            defs["OpenApiAuth"],
            "`username` and `password` go together.",
            header="[sources.NAME.auth]",
        ),
        _section(
            '### `type = "python"`',
            RawPythonSource,
            defs["PythonSource"],
            header="[sources.NAME]",
        ),
        _section(
            '### `type = "plugin"`',
            RawPluginSource,
            defs["PluginSource"],
            "`plugin.json` and `mcp.json` are checked against the Agent Plugins 1.0 schemas "
            "when the file is loaded. Each server is a managed MCP source that keeps the "
            "plugin's name, version and server key: `codemode check`, health, search notes, "
            "the generated declarations and `codemode.lock.json` name them. A stdio server "
            "starts in the plugin's root (a `cwd` in `mcp.json` may point elsewhere inside "
            "it, or inside `${PLUGIN_DATA}`, which is `.codemode/plugin-data/<plugin name>/` "
            "beside this file); its environment also holds `PLUGIN_ROOT` and `PLUGIN_DATA`. "
            "A plugin made by `codemode generate --plugin` loads this way too.",
            header="[sources.NAME]",
        ),
        _ENDING,
    ]
    return "\n".join(part.rstrip("\n") + "\n" for part in parts)


def _section(
    title: str,
    model: type[BaseModel],
    schema: dict[str, Any],
    note: str = "",
    *,
    header: str = "",
    groups: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> str:
    lines = [title, ""]
    summary = _doc(model.__doc__ or "")
    if summary:
        lines += [summary, ""]
    if note:
        lines += [note, ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    examples: dict[str, str] = {}
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    for name, field in model.model_fields.items():
        prop = properties.get(name, {})
        default = "**required**" if name in required else _default(name, field.default)
        lines.append(
            f"| `{name}` | {_cell(_type(prop))} | {_cell(default)} "
            f"| {_cell(_doc(field.description or ''))} |"
        )
        extra = field.json_schema_extra
        example = extra.get(TOML_EXAMPLE) if isinstance(extra, dict) else None
        if isinstance(example, str):
            examples[name] = example
    for caption, names in groups or (("", tuple(examples)),):
        if caption:
            lines += ["", caption]
        block = [header] if header else []
        lines += ["", "```toml", *block, *(examples[n] for n in names if n in examples), "```"]
    return "\n".join([*lines, ""])


def _doc(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _type(prop: dict[str, Any]) -> str:
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " | ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    kind = prop.get("type")
    if kind == "integer":
        return "positive integer" if prop.get("exclusiveMinimum") == 0 else "integer"
    if kind == "array":
        items = prop.get("items", {})
        if "$ref" in items:
            return "array of tables"
        return f"array of {items.get('type', 'value')}s"
    if kind == "object":
        values = prop.get("additionalProperties")
        patterned = list(prop.get("patternProperties", {}).values())
        if isinstance(values, dict):
            patterned.append(values)
        if patterned and all(v.get("type") == "string" for v in patterned):
            return "table of strings"
        return "table"
    if "$ref" in prop:
        return "table"
    if isinstance(kind, str):
        return kind
    return "value"


def _default(name: str, value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, BaseModel):
        return "`{}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int):
        return f"`{value}`{_human_size(value) if name.endswith('_bytes') else ''}"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    if value == [] or value == {}:
        return "`[]`" if value == [] else "`{}`"
    return f"`{value}`"


def _human_size(value: int) -> str:
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if value >= size and value % size == 0:
            return f" ({value // size} {unit})"
    return ""


def main() -> int:
    sys.stdout.write(render_spec_reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
