"""Pure generators: the catalog in, ``{relative path: text}`` out. Writing is the CLI's job.

- ``generate(catalog, name=..., scripts="..")``: ``tools.d.ts``, ``tools.<source>.d.ts``,
  prefix shards for large sources, the editor files (``globals.d.ts`` and a ``tsconfig.json``
  that checks the scripts) and the ``catalog.json`` lock.
- ``generate_plugin(catalog, name=..., config=...)``: an Agent Plugin with a companion skill
  (write it with ``artifact_kind`` so authored files and text survive).
- ``tool_typescript(tool)`` and ``RESULT_CONTRACT``: what ``search_tools`` shows in
  ``detail="typescript"`` mode.
- ``writer``: the transactional writer the CLI uses (``plan_write`` then ``apply``).
"""

from __future__ import annotations

from codemodekit.codegen.artifacts import ALL_TOOLS_FILE, LOCK_FILE, generate
from codemodekit.codegen.contract import RESULT_CONTRACT
from codemodekit.codegen.declarations import render_declarations, tool_typescript
from codemodekit.codegen.editor import EDITOR_FILES, GLOBALS_FILE, TSCONFIG_FILE
from codemodekit.codegen.layout import MAX_SHARD_TOOLS, SHARD_THRESHOLD
from codemodekit.codegen.plugin import (
    BLOCK_BEGIN,
    BLOCK_END,
    METADATA_FILE,
    artifact_kind,
    generate_plugin,
    merge_generated_block,
    skill_dir,
)
from codemodekit.codegen.writer import ArtifactConflict, WritePlan, apply, plan_write

__all__ = [
    "ALL_TOOLS_FILE",
    "BLOCK_BEGIN",
    "BLOCK_END",
    "EDITOR_FILES",
    "GLOBALS_FILE",
    "LOCK_FILE",
    "MAX_SHARD_TOOLS",
    "METADATA_FILE",
    "RESULT_CONTRACT",
    "SHARD_THRESHOLD",
    "TSCONFIG_FILE",
    "ArtifactConflict",
    "WritePlan",
    "apply",
    "artifact_kind",
    "generate",
    "generate_plugin",
    "merge_generated_block",
    "plan_write",
    "render_declarations",
    "skill_dir",
    "tool_typescript",
]
