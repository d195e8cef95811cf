"""Regular expressions that need backtracking are never run on input.

A backreference or lookaround runs on ``fancy-regex``'s backtracking engine: up to a
million steps per string and no bound per call, so 84 KB of arguments (an array of short
strings) held the event loop for 30 s (found by a review helper). Such a ``pattern`` is left
to the upstream, which checks its own input: the tool stays callable (an MCP server's
zod email field carries a lookahead). Such a ``patternProperties`` name makes the schema
unsupported: leaving it out would hand its properties to ``additionalProperties``. Every
other expression runs on the linear-time engine, as before.
"""

from __future__ import annotations

from typing import Any

import pytest

from codemodekit import CodeMode, ErrorCode, allow_all_tool_calls, define_tool, local
from codemodekit.schema import SchemaUnsupported, compile_validator, normalize_schema

BACKTRACKING = [
    "^(?:(a|aa)+\\1c|a*b)$",  # a backreference
    "(a)\\1",
    "^(\\w)\\1{2}$",  # a repeated backreference
    "^(?=.*[A-Z]).{8,}$",  # lookahead
    "^(?!admin$).*",  # negative lookahead
    "(?<=a)b",  # lookbehind
    "(?<!a)b",  # negative lookbehind
]
LINEAR = ["^[a-z]+$", "^\\d{3}-\\d{4}$", "^(a+)+$", "\\p{L}+", "(?i)^abc$", "^[\\w.-]+@[\\w.-]+$"]


def placements(pattern: str) -> list[dict[str, Any]]:
    """``pattern`` wherever a schema can hold an expression the validator runs."""
    return [
        {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}},
        {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"pattern": pattern}}},
        },
        {"type": "object", "patternProperties": {pattern: {"type": "string"}}},
        {
            "type": "object",
            "properties": {"s": {"$ref": "#/$defs/S"}},
            "$defs": {"S": {"type": "string", "pattern": pattern}},
        },
        {
            "type": "object",
            "properties": {"s": {"anyOf": [{"type": "null"}, {"pattern": pattern}]}},
        },
    ]


@pytest.mark.parametrize("pattern", BACKTRACKING)
def test_a_backtracking_pattern_is_left_to_the_upstream(pattern: str) -> None:
    for schema in placements(pattern):
        if "patternProperties" in schema:
            with pytest.raises(SchemaUnsupported) as caught:
                compile_validator(normalize_schema(schema))
            assert "needs backtracking" in caught.value.reason, schema
            continue
        validator = compile_validator(normalize_schema(schema))
        # Not run: a value no such expression matches passes.
        assert validator.is_valid({"s": "", "tags": [""]}), schema


@pytest.mark.parametrize("pattern", LINEAR)
def test_a_linear_expression_is_still_enforced(pattern: str) -> None:
    for schema in placements(pattern):
        compile_validator(normalize_schema(schema))


async def test_tools_with_backtracking_patterns_serve_and_are_not_held_up() -> None:
    tools = {
        f"free{i}": define_tool(description="t", input_schema=schema, execute=lambda a: "ran")
        for i, schema in enumerate(
            s for p in BACKTRACKING for s in placements(p) if "patternProperties" not in s
        )
    }
    tools["keys"] = define_tool(
        description="t",
        input_schema={"type": "object", "patternProperties": {"(?=x)x": {"type": "string"}}},
        execute=lambda a: "ran",
    )
    tools["out"] = define_tool(
        description="t",
        input_schema={"type": "object"},
        output_schema={"type": "string", "pattern": "(?=x)x"},
        execute=lambda a: "y",
    )
    tools["code"] = define_tool(
        description="t",
        input_schema={
            "type": "object",
            "properties": {"c": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        },
        execute=lambda a: a["c"],
    )
    # The amplified call: an array of short strings, each a worst case for the expression.
    amplified = "Array.from({length: 3000}, () => 'a'.repeat(25) + 'x')"
    async with CodeMode(sources=[local("app", tools)], policy=allow_all_tool_calls()) as cm:
        quarantined = {t.name: t.quarantine for t in cm.catalog.quarantined}
        assert set(quarantined) == {"keys"}
        assert quarantined["keys"] and "needs backtracking" in quarantined["keys"]
        free = [name for name in tools if name.startswith("free")]
        for name in free:  # every placement serves
            result = await cm.run(
                f"return (await tools.app.{name}({{s: 'a'.repeat(25) + 'b', tags: {amplified}}}))"
                ".structuredContent;"
            )
            assert result.ok and result.value == "ran", (name, result.diagnostic)
        out = await cm.run("return (await tools.app.out({})).structuredContent;")
        good = await cm.run('return (await tools.app.code({c: "ABC"})).structuredContent;')
        bad = await cm.run('try { await tools.app.code({c: "abc"}); } catch (e) { return e.code; }')
    assert out.ok and out.value == "y"
    assert good.value == "ABC"
    assert bad.value == ErrorCode.TOOL_INPUT_INVALID
