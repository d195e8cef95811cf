"""Catalog fixtures and the TypeScript checker shared by the codegen tests."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.providers.base import Discovery, SkippedTool, ToolSpec
from tests.conftest import NODE_MODULES, node_tool

HERE = Path(__file__).parent


def catalog_from_json(document: Mapping[str, Any]) -> Catalog:
    """``{"sources": {name: {"tools": [...], "skipped": [...]}}}`` → ``Catalog``."""
    discoveries: dict[str, Discovery] = {}
    for source, body in document["sources"].items():
        tools = tuple(
            ToolSpec(
                name=t["name"],
                description=t.get("description", ""),
                input_schema=t.get("input_schema", {"type": "object", "properties": {}}),
                output_schema=t.get("output_schema"),
                annotations=t.get("annotations", {}),
                deprecated=t.get("deprecated", False),
                default_dialect=t.get("default_dialect"),
                provenance=t.get("provenance", {}),
            )
            for t in body.get("tools", [])
        )
        skipped = tuple(SkippedTool(s["name"], s["reason"]) for s in body.get("skipped", []))
        discoveries[source] = Discovery(tools=tools, skipped=skipped)
    return Catalog.build(discoveries)


def one_tool_catalog(input_schema: Mapping[str, Any], **fields: Any) -> Catalog:
    return Catalog.build(
        {"app": Discovery(tools=(ToolSpec(name="call", input_schema=input_schema, **fields),))}
    )


def typecheck(groups: Sequence[Sequence[Path]]) -> dict[tuple[str, ...], list[str]]:
    """Type-check each group of files as its own program (``tsc --noEmit --strict``)."""
    node_tool("tsc")  # skips with the reason when node or typescript is missing
    node = shutil.which("node")
    assert node is not None
    payload = json.dumps([[str(p) for p in group] for group in groups])
    done = subprocess.run(
        [node, str(HERE / "tsc_check.cjs"), str(NODE_MODULES / "typescript")],
        input=payload,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"tsc_check.cjs failed:\n{done.stderr}")
    return {tuple(r["files"]): r["errors"] for r in json.loads(done.stdout)}


def assert_typechecks(groups: Sequence[Sequence[Path]]) -> None:
    failures = {k: v for k, v in typecheck(groups).items() if v}
    if failures:
        lines = [
            f"{' + '.join(files)}:\n  " + "\n  ".join(errs) for files, errs in failures.items()
        ]
        pytest.fail("tsc --strict rejected generated declarations:\n" + "\n".join(lines))
