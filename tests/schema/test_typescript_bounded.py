"""Projecting a schema to TypeScript costs about the schema's size, whatever its shape.

Two walks of the projection grew faster than the schema: whether ``unevaluatedProperties``
closes an object followed every path through chained ``allOf``/``$ref`` (exponential:
1.5 KB took minutes), and the closure digest that shares declarations between tools was
cubic in a chain of definitions (78 KB took 30 s). Each case runs ``generate`` in a child
process whose timeout only guards against a hang.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

CHILD = r"""
import asyncio, json, sys
from codemodekit import CodeMode, allow_all_tool_calls, define_tool, local

schemas = json.load(sys.stdin)
tools = {
    f"t{i}": define_tool(description=f"tool {i}", input_schema=s, execute=lambda a: a)
    for i, s in enumerate(schemas)
}

async def main():
    async with CodeMode(sources=[local("up", tools)], policy=allow_all_tool_calls()) as cm:
        print(json.dumps(cm.generate()["tools.up.d.ts"]))

asyncio.run(main())
"""


def declarations(*schemas: dict[str, Any]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=json.dumps(schemas),
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: each case takes well under a second
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text: str = json.loads(done.stdout.splitlines()[-1])
    return text


def root_block(text: str, name: str) -> str:
    start = text.index(f"type {name} = {{")
    return text[start : text.index("}", start)]


def closed_by_chain(levels: int, width: int, last: dict[str, Any]) -> dict[str, Any]:
    """``unevaluatedProperties: false`` beside a chain of definitions, each naming the next
    ``width`` times."""
    defs: dict[str, Any] = {
        f"D{i}": {"allOf": [{"$ref": f"#/$defs/D{i + 1}"}] * width} for i in range(levels)
    }
    defs[f"D{levels}"] = last
    return {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "allOf": [{"$ref": "#/$defs/D0"}],
        "unevaluatedProperties": False,
        "$defs": defs,
    }


@pytest.mark.parametrize(("levels", "width"), [(18, 3), (19, 3), (14, 4), (12, 6)])
def test_chained_all_of_beside_unevaluated_properties(levels: int, width: int) -> None:
    closed = closed_by_chain(levels, width, {"type": "object"})
    opened = closed_by_chain(levels, width, {"additionalProperties": {"type": "integer"}})
    looped = closed_by_chain(levels, width, {"allOf": [{"$ref": "#/$defs/D0"}]})
    text = declarations(closed, opened, looped)
    # Nothing in the chain evaluates other keys: the object stays closed.
    assert "[key: string]" not in root_block(text, "UpT0Input")
    # The last definition may evaluate any key, so unevaluatedProperties closes nothing.
    assert "[key: string]: unknown;" in root_block(text, "UpT1Input")
    # A cycle is followed no further than before: the projection gives up, open.
    assert "[key: string]: unknown;" in root_block(text, "UpT2Input")


def linked(length: int, last: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"D{i}": {"type": "object", "properties": {"next": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(length)
    }
    defs[f"D{length}"] = last
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/D0"}}, "$defs": defs}


@pytest.mark.parametrize("length", [60, 3000])
def test_a_long_chain_of_definitions_is_shared_only_where_closures_agree(length: int) -> None:
    same = linked(length, {"type": "string"})
    other = linked(length, {"type": "integer"})
    back = linked(length, {"$ref": "#/$defs/D0"})  # a cycle through every definition
    text = declarations(same, same, other, back, back)
    # Two tools with identical closures share every declaration.
    assert text.count("interface UpD0 {") == 1
    assert "(input: UpD0Input)" not in text
    # A different last definition changes every closure: nothing is shared with it.
    assert text.count("interface UpT2D0 {") == 1
    assert text.count(f"type UpT2D{length} = number;") == 1
    # A cycle is a closure too: shared by the two tools that hold it, declared once.
    assert text.count("interface UpT3D0 {") == 1
    assert "interface UpT4D0 {" not in text
