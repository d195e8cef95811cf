"""``generate_plugin``: an Agent Plugin whose companion skill snapshots the catalog.

Three kinds of file, so regeneration never destroys what a person wrote:

- ``generated``: owned by the generator, replaced on every run (``mcp.json``, references).
- ``seed``: written once when absent, then the author's (``plugin.json``, ``examples.md``).
- ``block``: ``SKILL.md``; only the text between the generated markers is replaced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from codemodekit.catalog.catalog import Catalog, ToolDefinition, thaw
from codemodekit.codegen.artifacts import ALL_TOOLS_FILE, LOCK_FILE, generate, source_layouts
from codemodekit.codegen.contract import RESULT_CONTRACT
from codemodekit.codegen.editor import EDITOR_FILES
from codemodekit.codegen.layout import slug
from codemodekit.codegen.lockfile import dump_json
from codemodekit.limits import Limits

ArtifactKind = Literal["generated", "seed", "block"]

BLOCK_BEGIN = "<!-- codemode:generated:begin: `codemode generate` rewrites this block -->"
BLOCK_END = "<!-- codemode:generated:end -->"
METADATA_FILE = "catalog-metadata.json"
_SEED_NAMES = ("plugin.json", "examples.md")
_INLINE_TOOL_LIST = 40
"""Up to this many tools, SKILL.md lists every address; beyond, only sources and files."""
PLUGIN_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
_NAME_CHARS = 64
"""Agent Plugins and Agent Skills both cap a name at 64 characters."""
_DESCRIPTION_CHARS = 1024
"""Agent Skills cap a skill's description at 1,024 characters."""


def _bounded_slug(name: str, room: int) -> str:
    """``slug(name)`` in at most ``room`` characters; a cut one ends in a short hash, so two
    long names that share a prefix still differ."""
    base = slug(name)
    if len(base) <= room:
        return base
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return base[: room - 7].rstrip("-") + "-" + digest


def skill_name(name: str) -> str:
    """``use-<name>-codemode``: lower-case letters, digits and single hyphens, ≤ 64
    characters, as Agent Skills require (the skill's folder has the same name)."""
    return f"use-{_bounded_slug(name, _NAME_CHARS - len('use--codemode'))}-codemode"


def plugin_name(name: str) -> str:
    return f"{_bounded_slug(name, _NAME_CHARS - len('-codemode'))}-codemode"


def skill_dir(name: str) -> str:
    return f"skills/{skill_name(name)}"


def artifact_kind(path: str) -> ArtifactKind:
    """How the writer treats a plugin path (``generate`` output is all ``generated``)."""
    base = path.rsplit("/", 1)[-1]
    if base == "SKILL.md":
        return "block"
    if base in _SEED_NAMES:
        return "seed"
    return "generated"


def merge_generated_block(existing: str | None, generated: str) -> str:
    """``existing`` with its generated block replaced by the one in ``generated``.

    Text outside the markers is the author's and is kept byte for byte. A file whose markers
    were removed gets the block appended, so the catalog summary is never silently lost.
    """
    if existing is None:
        return generated
    new_block = _block(generated)
    if new_block is None:
        return existing
    begin = existing.find(BLOCK_BEGIN)
    end = existing.find(BLOCK_END, begin + 1) if begin >= 0 else -1
    if begin < 0 or end < 0:
        return existing.rstrip("\n") + "\n\n" + new_block + "\n"
    return existing[:begin] + new_block + existing[end + len(BLOCK_END) :]


def _block(text: str) -> str | None:
    begin = text.find(BLOCK_BEGIN)
    end = text.find(BLOCK_END, begin + 1) if begin >= 0 else -1
    if begin < 0 or end < 0:
        return None
    return text[begin : end + len(BLOCK_END)]


def _first_sentence(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    cut = flat.find(". ")
    if 0 <= cut < limit:
        return flat[: cut + 1]
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _example_value(schema: Any, root: Any, depth: int = 0) -> Any:
    """A placeholder value of the right shape for a worked example."""
    if not isinstance(schema, Mapping) or depth > 6:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for token in ref[2:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            target = target.get(token) if isinstance(target, Mapping) else None
        return _example_value(target, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    if "default" in schema:
        return schema["default"]
    for keyword in ("oneOf", "anyOf", "allOf"):
        options = schema.get(keyword)
        if isinstance(options, list) and options and "type" not in schema:
            return _example_value(options[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = schema.get("required")
        required = required if isinstance(required, list) else []
        return {
            k: _example_value(props.get(k), root, depth + 1) for k in required if isinstance(k, str)
        }
    return {"string": "...", "integer": 1, "number": 1, "boolean": False, "array": []}.get(
        str(kind)
    )


def _examples_md(catalog: Catalog, name: str) -> str:
    tools = [t for t in catalog.available_tools if not t.deprecated][:3]
    out = [
        f"# Worked examples for {name}",
        "",
        "Generated once as a starting point; this file is yours now (regeneration keeps it).",
        "Each program is the body of an async function: `await` tool calls, `return` the answer.",
        "",
    ]
    for tool in tools:
        schema = thaw(tool.input_schema)
        args = json.dumps(_example_value(schema, schema) or {}, ensure_ascii=False)
        out += [
            f"## {tool.address}",
            "",
            _first_sentence(tool.description) or "(no description)",
            "",
            "```ts",
            f"const r = await {tool.address}({args});",
            "if (r.structuredContent !== undefined) return r.structuredContent;",
            'const text = r.content.find((b) => b.type === "text");',
            'return text && text.type === "text" ? text.text : r.content;',
            "```",
            "",
        ]
    if not tools:
        out += ["(The catalog had no callable tools when this file was generated.)", ""]
    return "\n".join(out)


def _runtime_md(limits: Limits) -> str:
    rows = "\n".join(f"| `{k}` | {v} |" for k, v in limits.to_json().items())
    return f"""\
# Code Mode runtime

Send one TypeScript program to the `run_typescript` MCP tool. It runs in a QuickJS sandbox:

- The program is the body of an `async` function: use `await`, finish with `return value`.
  The returned value must be JSON-serializable; `console.log` output comes back as logs.
- The only way out is `tools.<source>.<tool>(input)`; it returns a `Promise<ToolResult>`
  (see result-contract.md). There is no `fetch`, timers, `import`, `require` or file access.
- Types are erased, not checked: the declarations in `tools*.d.ts` are for reading. Inputs
  are validated against the tool's JSON Schema before the call; a bad input fails with
  `TOOL_INPUT_INVALID`.
- Calls may be denied by policy (`TOOL_DENIED`). A failed call is never retried for you.
- `enum`, `namespace`, decorators and module syntax are rejected (`UNSUPPORTED_SYNTAX`).
- Use `search_tools` (detail `"typescript"`) when a tool is missing from these references.

## Limits (defaults; a deployment may override them)

| limit | value |
|---|---|
{rows}
"""


def _result_contract_md() -> str:
    return (
        "# Tool results\n\n"
        "Every tool call resolves to a `ToolResult`; read `structuredContent` first and fall\n"
        "back to `content` (text blocks often hold JSON: parse it inside try/catch).\n\n"
        "```ts\n" + RESULT_CONTRACT + "```\n"
    )


def _tool_entry(tool: ToolDefinition, declared_in: str) -> dict[str, Any]:
    return {
        "address": tool.address,
        "declared_in": declared_in,
        "deprecated": tool.deprecated,
        "description": _first_sentence(tool.description),
        "read_only": tool.read_only,
    }


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _skill_description(catalog: Catalog, name: str) -> str:
    """What the skill is for, within the Agent Skills limit (sources beyond it are counted)."""
    tail = (
        " through Code Mode: write one TypeScript program that calls tools.* and run it with "
        "the run_typescript MCP tool."
    )
    shown = list(catalog.sources)
    while True:
        more = len(catalog.sources) - len(shown)
        listed = ", ".join(shown) + (f" and {more} more" if more else "")
        text = f"Use the {name} tools ({listed or 'no sources'})" + tail
        if len(text) <= _DESCRIPTION_CHARS:
            return text
        if not shown:
            return text[: _DESCRIPTION_CHARS - 1] + "…"
        shown.pop()


def _references_list(files: list[str], source_files: set[str]) -> list[str]:
    """A line per reference file, so a reader (and the skill loader) knows each one."""
    purpose = {
        "runtime.md": "how programs run, and the limits",
        "result-contract.md": "the `ToolResult` every call resolves to",
        "examples.md": "worked example programs",
        METADATA_FILE: "every tool with its declaration file, quarantined and skipped tools",
        ALL_TOOLS_FILE: "declarations of every tool",
    }
    out = ["", "Reference files:", ""]
    for path in files:
        base = path.removeprefix("references/")
        if base in purpose:
            what = purpose[base]
        elif base in source_files:
            what = "declarations of one source's tools"
        else:
            what = "a shard of a large source's declarations (see its source file)"
        out.append(f"- `{path}`: {what}")
    return out


def _inert(text: str) -> str:
    """An upstream's text inside the generated block, unable to open or close a comment:
    its own ``<!-- codemode:generated:end -->`` ended the block early at the next merge, so
    the rest of the old block was kept as the author's and the drift went unseen."""
    return text.replace("<!--", "&lt;!--").replace("-->", "--&gt;")


def _skill_md(catalog: Catalog, name: str, references: list[str]) -> str:
    description = _skill_description(catalog, name)
    layouts = source_layouts(catalog)
    block = [
        BLOCK_BEGIN,
        "## Catalog (generated)",
        "",
        f"Catalog revision `{catalog.revision}`: "
        f"{_plural(len(catalog.available_tools), 'callable tool', 'callable tools')}.",
        "",
        "To act, send one TypeScript program to the `run_typescript` MCP tool: it is the body",
        "of an async function that awaits `tools.<source>.<tool>(input)` calls and `return`s",
        "the answer. Read `references/runtime.md` and `references/result-contract.md` before",
        "the first program. When a tool you need is not listed here, ask `search_tools`",
        '(with `detail: "typescript"`) for its exact call and types.',
        "",
        f"`references/{ALL_TOOLS_FILE}` declares every tool; per-source files are smaller:",
        "",
        "| source | tools | declarations |",
        "|---|---|---|",
    ]
    for layout in layouts:
        count = sum(1 for t in catalog.source_tools(layout.source) if t.available)
        where = f"`references/{layout.file}`"
        if layout.shards:
            where += f" (index of {len(layout.shards)} shards)"
        block.append(f"| `{layout.source}` | {count} | {where} |")
    tools = catalog.available_tools
    if tools and len(tools) <= _INLINE_TOOL_LIST:
        block += ["", "Tools:", ""]
        for tool in tools:
            summary = _inert(_first_sentence(tool.description, 100))
            block.append(f"- `{_inert(tool.address)}`" + (f": {summary}" if summary else ""))
    if catalog.quarantined:
        block += [
            "",
            f"{_plural(len(catalog.quarantined), 'tool is', 'tools are')} quarantined "
            f"(not callable); see `references/{METADATA_FILE}`.",
        ]
    block += _references_list(references, {layout.file for layout in layouts})
    block.append(BLOCK_END)
    return (
        "---\n"
        f"name: {skill_name(name)}\n"
        f"description: {dump_json(description).strip()}\n"
        "---\n\n"
        f"# Use {name} through Code Mode\n\n"
        "<!-- Authored guidance goes here: when to use these tools, workflows, safety\n"
        "     decisions, worked compositions. Text outside the generated block survives\n"
        "     regeneration. -->\n\n" + "\n".join(block) + "\n"
    )


def generate_plugin(
    catalog: Catalog,
    *,
    name: str,
    config: str | None = None,
    command: str = "codemode",
    limits: Limits | None = None,
    server: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The plugin tree as ``{relative path: text}``. ``server``, when given, is the whole
    ``mcp.json`` server entry (the CLI passes what ``codemode install`` writes: this
    installation's ``codemode`` by absolute path, ``serve -c /abs/codemode.toml``, and each
    ``${VAR}`` the spec reads). Otherwise ``config``, when given, is passed verbatim to
    ``codemode serve -c``; without it ``codemode serve`` finds the nearest
    ``codemode.toml`` from the MCP host's working directory upward. Use ``artifact_kind`` /
    ``merge_generated_block`` when writing."""
    skill = skill_dir(name)
    refs = f"{skill}/references"
    declarations = {
        k: v
        for k, v in generate(catalog, name=name).items()
        if k != LOCK_FILE and k not in EDITOR_FILES  # an agent reads, it opens no editor
    }
    files: dict[str, str] = {}
    # Agent Plugins 1.0 finds mcp.json and skills/ by convention: plugin.json names neither.
    files["plugin.json"] = dump_json(
        {
            "$schema": PLUGIN_SCHEMA,
            "name": plugin_name(name),
            "version": "0.1.0",
            "description": f"Code Mode access to the {name} tool catalog.",
        }
    )
    files["mcp.json"] = dump_json(
        {
            "$schema": MCP_SCHEMA,
            "mcpServers": {
                slug(name): dict(server)
                if server is not None
                else {
                    "type": "stdio",
                    "command": command,
                    "args": ["serve"] if config is None else ["serve", "-c", config],
                }
            },
        }
    )
    files[f"{refs}/runtime.md"] = _runtime_md(limits or Limits())
    files[f"{refs}/result-contract.md"] = _result_contract_md()
    files[f"{refs}/examples.md"] = _examples_md(catalog, name)
    for path, text in declarations.items():
        files[f"{refs}/{path}"] = text
    layouts = {layout.source: layout for layout in source_layouts(catalog)}
    entries = []
    for tool in catalog.available_tools:
        layout = layouts[tool.source]
        declared = next((p for p, n in layout.shards.items() if tool.name in n), layout.file)
        entries.append(_tool_entry(tool, f"references/{declared}"))
    generated = sorted(p for p in files if artifact_kind(p) == "generated")
    files[f"{refs}/{METADATA_FILE}"] = dump_json(
        {
            "catalog_revision": catalog.revision,
            "files": generated,
            "name": name,
            "quarantined": [
                {"address": t.address, "reason": t.quarantine} for t in catalog.quarantined
            ],
            "skipped": [
                {"source": s.source, "name": s.name, "reason": s.reason} for s in catalog.skipped
            ],
            "tools": entries,
        }
    )
    references = sorted(p.removeprefix(f"{skill}/") for p in files if p.startswith(f"{refs}/"))
    files[f"{skill}/SKILL.md"] = _skill_md(catalog, name, references)
    return dict(sorted(files.items()))
