"""Pure generators: the catalog in, ``{relative path: text}`` out. Writing is the CLI's job.

- ``generate(catalog, name=...)``: ``tools.d.ts``, ``tools.<source>.d.ts``, prefix shards
  for large sources and the ``catalog.json`` lock.
- ``generate_plugin(catalog, name=..., config=...)``: an Agent Plugin with a companion skill.
- ``tool_typescript(tool)`` and ``RESULT_CONTRACT``: what ``search_tools`` shows in
  ``detail="typescript"`` mode.
"""

from __future__ import annotations

from codemodekit.codegen.contract import RESULT_CONTRACT
from codemodekit.codegen.declarations import render_declarations, tool_typescript

__all__ = ["RESULT_CONTRACT", "render_declarations", "tool_typescript"]
