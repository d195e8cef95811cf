"""``catalog.json``: the lock that pins what the generated declarations were made from.

It doubles as the writer's commit marker and manifest: ``files`` lists every generated file
it covers, so a later run knows which files are its own (stale ones are removed, anything
else is a person's and is left alone).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen.layout import SourceLayout

LOCK_FORMAT = 1


def dump_json(value: Any) -> str:
    """Deterministic JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def lock_document(
    catalog: Catalog, *, name: str, layouts: Sequence[SourceLayout], files: Iterable[str]
) -> dict[str, Any]:
    by_source: Mapping[str, SourceLayout] = {layout.source: layout for layout in layouts}
    sources: dict[str, Any] = {}
    for source in catalog.sources:
        layout = by_source[source]
        tools: dict[str, Any] = {}
        quarantined: dict[str, str] = {}
        for tool in catalog.source_tools(source):
            if not tool.available:
                quarantined[tool.name] = tool.quarantine or ""
                continue
            tools[tool.name] = {
                "address": tool.address,
                "deprecated": tool.deprecated,
                "input_schema_hash": tool.input_schema_hash,
                "output_schema_hash": tool.output_schema_hash,
            }
        plugin = next(
            (
                t.provenance["plugin"]
                for t in catalog.source_tools(source)
                if isinstance(t.provenance.get("plugin"), Mapping)
            ),
            None,
        )
        sources[source] = {
            **({"plugin": dict(plugin)} if plugin is not None else {}),
            "file": layout.file,
            "quarantined": quarantined,
            "shards": {path: list(names) for path, names in layout.shards.items()},
            "skipped": [
                {"name": s.name, "reason": s.reason} for s in catalog.skipped if s.source == source
            ],
            "tools": tools,
        }
    return {
        "catalog_revision": catalog.revision,
        "files": sorted(files),
        "format": LOCK_FORMAT,
        "generator": "codemodekit",
        "name": name,
        "sources": sources,
    }


def manifest_files(text: str | None) -> frozenset[str]:
    """The ``files`` a previous lock or plugin manifest claimed; empty if unreadable."""
    if not text:
        return frozenset()
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return frozenset()
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list):
        return frozenset()
    return frozenset(f for f in files if isinstance(f, str))
