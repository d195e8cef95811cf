"""``generate``: the declaration files and the lock for one catalog (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from codemodekit.catalog.catalog import Catalog, ToolDefinition
from codemodekit.codegen.declarations import (
    GENERATED_HEADER,
    AnalysisCache,
    quarantine_comment,
    render_declarations,
    skipped_comment,
)
from codemodekit.codegen.editor import editor_files
from codemodekit.codegen.layout import SourceLayout, plan
from codemodekit.codegen.lockfile import dump_json, lock_document
from codemodekit.schema.typescript import one_line, ts_string

LOCK_FILE = "catalog.json"
ALL_TOOLS_FILE = "tools.d.ts"


def source_layouts(catalog: Catalog) -> list[SourceLayout]:
    return plan(
        catalog.sources,
        {s: [t.name for t in catalog.source_tools(s) if t.available] for s in catalog.sources},
    )


def plugin_of(tools: tuple[ToolDefinition, ...]) -> dict[str, str | None] | None:
    """The Agent Plugin a source's tools came from (their provenance says), if any."""
    for tool in tools:
        plugin = tool.provenance.get("plugin")
        if isinstance(plugin, Mapping):
            return {k: v if isinstance(v, str) else None for k, v in plugin.items()}
    return None


def _from_plugin(tools: tuple[ToolDefinition, ...]) -> str:
    plugin = plugin_of(tools)
    if plugin is None:
        return ""
    version = f" {plugin['version']}" if plugin.get("version") else ""
    return f" From Agent Plugin {plugin.get('name')}{version}, server {plugin.get('server')}."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _shard_index(layout: SourceLayout, tools: tuple[ToolDefinition, ...]) -> str:
    """A large source's ``tools.<source>.d.ts``: which shard declares which tool."""
    available = sum(1 for t in tools if t.available)
    lines = [
        GENERATED_HEADER,
        f"// Source {ts_string(layout.source)}: {_count(available, 'tool')} in "
        f"{_count(len(layout.shards), 'shard')}.",
        "// Each shard file below declares its tools completely (with the result contract);",
        "// read the one whose names fit the task. tools.d.ts declares every tool at once.",
    ]
    for path, names in layout.shards.items():
        lines.append("//")
        lines.append(f"// {one_line(path)}:")
        row = "//  "
        for name in map(one_line, names):  # an upstream's names: no line ends the comment
            if len(row) + len(name) + 1 > 96:
                lines.append(row)
                row = "//  "
            row += " " + name
        lines.append(row)
    comment = quarantine_comment(tools)
    return "\n".join(lines) + "\n" + ("\n" + comment if comment else "")


def generate(catalog: Catalog, *, name: str, scripts: str = "..") -> dict[str, str]:
    """``tools.d.ts``, one ``tools.<source>.d.ts`` per source, prefix shards of sources with
    more than ``SHARD_THRESHOLD`` tools, the editor files (``globals.d.ts``, a
    ``tsconfig.json`` that checks the ``.ts`` files below ``scripts``, relative to the output
    folder) and ``catalog.json``. Same inputs, same bytes."""
    files: dict[str, str] = {}
    cache: AnalysisCache = {}
    total = len(catalog.available_tools)
    files[ALL_TOOLS_FILE] = render_declarations(
        catalog.tools,
        header=[
            f"{name}: {_count(total, 'tool')} from {_count(len(catalog.sources), 'source')}, "
            f"catalog revision {catalog.revision}."
        ],
        skipped=catalog.skipped,
        cache=cache,
    )
    layouts = source_layouts(catalog)
    for layout in layouts:
        tools = catalog.source_tools(layout.source)
        if not layout.shards:
            files[layout.file] = render_declarations(
                tools,
                header=[f"Source {ts_string(layout.source)}.{_from_plugin(tools)}"],
                skipped=[s for s in catalog.skipped if s.source == layout.source],
                cache=cache,
            )
            continue
        skipped = [s for s in catalog.skipped if s.source == layout.source]
        files[layout.file] = _shard_index(layout, tools) + (
            "\n" + skipped_comment(skipped) if skipped else ""
        )
        for path, names in layout.shards.items():
            members = set(names)
            files[path] = render_declarations(
                [t for t in tools if t.name in members],
                header=[
                    f"Source {ts_string(layout.source)}, shard {path}: "
                    f"{_count(len(names), 'tool')}."
                ],
                cache=cache,
            )
    files.update(editor_files(scripts=scripts))
    files[LOCK_FILE] = dump_json(
        lock_document(catalog, name=name, layouts=layouts, files=files.keys())
    )
    return dict(sorted(files.items()))
