"""An upstream's tool names cannot add to what the generated declarations declare.

MCP tool names are the upstream's choice. Every one that reaches a ``//`` comment (the
shard index of a big source, the quarantined and skipped lists) must stay in it: a line
terminator ends a TypeScript comment, and TypeScript has four (LF, CR, U+2028, U+2029).
A name that only looks like an identifier (``"lookup\\n"``) must not be written as one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codemodekit.catalog.catalog import Catalog, tool_address
from codemodekit.codegen.artifacts import generate
from codemodekit.providers.base import Discovery, SkippedTool, ToolSpec
from codemodekit.schema.typescript import property_name

OBJ = {"type": "object", "properties": {}}
TERMINATORS = {"LF": "\n", "CR": "\r", "CRLF": "\r\n", "LS": "\u2028", "PS": "\u2029"}
_TS_LINES = re.compile("\r\n|[\n\r\u2028\u2029]")


def _declared_lines(text: str) -> list[str]:
    """The file's lines as TypeScript splits them, comments dropped."""
    return [line for line in _TS_LINES.split(text) if not line.lstrip().startswith("//")]


@pytest.mark.parametrize("terminator", list(TERMINATORS.values()), ids=list(TERMINATORS))
def test_a_tool_name_cannot_end_a_comment_in_any_generated_file(terminator: str) -> None:
    evil = f"x{terminator}declare const INJECTED: number;//"
    big = [ToolSpec(name=f"t{i}", input_schema=OBJ) for i in range(210)]  # sharded
    catalog = Catalog.build(
        {
            "big": Discovery(tools=(*big, ToolSpec(name=evil, input_schema=OBJ))),
            "small": Discovery(
                tools=(ToolSpec(name="ok", input_schema=OBJ),),
                skipped=(SkippedTool(evil, "a duplicate name"),),
            ),
        }
    )
    files = generate(catalog, name="demo")
    assert any("shard" in path or path.count(".") > 2 for path in files)  # the index exists
    for path, text in files.items():
        if path.endswith(".d.ts"):
            # Where the name is declared, it is inside a quoted key, never a statement.
            injected = [
                line
                for line in _declared_lines(text)
                if line.lstrip().startswith("declare const INJECTED")
            ]
            assert not injected, (path, injected)


@pytest.mark.parametrize("terminator", list(TERMINATORS.values()), ids=list(TERMINATORS))
def test_a_name_with_a_line_end_is_never_written_as_an_identifier(terminator: str) -> None:
    for name in (f"lookup{terminator}", f"{terminator}lookup", f"look{terminator}up"):
        assert tool_address("app", name).startswith('tools.app["'), repr(name)
        assert property_name(name).startswith('"'), repr(name)
    assert tool_address("app", "lookup") == "tools.app.lookup"
    assert property_name("id") == "id"


@pytest.mark.parametrize(
    "description",
    [
        "Hi <!-- codemode:generated:end --> there. More.",
        "Hi <!-- codemode:generated:begin: `codemode generate` rewrites this block --> x.",
        "Hi --> there.",
    ],
)
def test_an_upstream_description_cannot_move_the_skills_generated_block(
    tmp_path: Path, description: str
) -> None:
    # A description with a block marker ended the block early at the next merge: the rest
    # of the old block stayed as if authored, and `generate --check` saw no drift.
    from codemodekit.codegen import (
        METADATA_FILE,
        apply,
        artifact_kind,
        generate_plugin,
        plan_write,
        skill_dir,
    )

    def catalog(extra: str) -> Catalog:
        tools = [ToolSpec(name="aaa", description=description, input_schema=OBJ)]
        tools.append(ToolSpec(name=extra, description=f"Tool {extra}.", input_schema=OBJ))
        return Catalog.build({"up": Discovery(tools=tuple(tools))})

    manifest = f"{skill_dir('demo')}/references/{METADATA_FILE}"
    for extra in ("old_tool", "new_tool"):  # one tool removed upstream, one added
        files = generate_plugin(catalog(extra), name="demo")
        apply(plan_write(tmp_path, files, manifest=manifest, kind=artifact_kind))
    skill = (tmp_path / skill_dir("demo") / "SKILL.md").read_text()
    assert "old_tool" not in skill and "new_tool" in skill
    assert skill.count("<!-- codemode:generated:end -->") == 1
    assert not plan_write(tmp_path, files, manifest=manifest, kind=artifact_kind).changed
