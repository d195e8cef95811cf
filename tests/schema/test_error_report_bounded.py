"""Reporting why input is invalid costs about what checking it costs, never an error tree.

``jsonschema-rs`` builds every nested error when asked for one (``anyOf`` errors carry the
errors of each branch, ``allOf`` collects all of them): a 1.3 KB schema or 1.3 MB of
arguments took minutes and gigabytes, then aborted the process. Each case runs in a child
process (so a regression cannot take the test runner down) under a 4 GiB address-space
cap; the child's timeout only guards against a hang.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from typing import Any

import pytest

CHILD = r"""
import asyncio, json, sys
from codemodekit import CodeMode, define_tool, local, allow_all_tool_calls

case = json.loads(sys.argv[1])
tool = define_tool(
    description="t",
    input_schema=case["input_schema"],
    output_schema=case.get("output_schema"),
    execute=lambda args: case.get("returns", {}),
)

async def main():
    async with CodeMode(sources=[local("app", {"t": tool})], policy=allow_all_tool_calls()) as cm:
        result = await cm.run(case["code"])
    d = result.diagnostic
    print(json.dumps({"ok": result.ok, "value": result.value,
                      "code": d and str(d.code), "message": d and d.message}))

asyncio.run(main())
"""


def _cap_memory() -> None:
    cap = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(case)],
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: each case takes well under a second
        preexec_fn=_cap_memory,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return out


FILTER = {
    "anyOf": [
        {
            "type": "object",
            "properties": {"and": {"type": "array", "items": {"$ref": "#/$defs/Filter"}}},
            "required": ["and"],
        },
        {
            "type": "object",
            "properties": {"or": {"type": "array", "items": {"$ref": "#/$defs/Filter"}}},
            "required": ["or"],
        },
        {
            "type": "object",
            "properties": {"field": {"type": "string"}, "equals": {"type": "string"}},
            "required": ["field", "equals"],
        },
    ]
}
FILTER_SCHEMA = {
    "type": "object",
    "properties": {"filter": {"$ref": "#/$defs/Filter"}},
    "required": ["filter"],
    "$defs": {"Filter": FILTER},
}


@pytest.mark.parametrize(
    ("wrap", "depth"),
    [
        ("{and: [f], or: [f]}", 17),  # 6 MB of arguments, each level doubling
        ("{and: [f, f, f]}", 10),
        ("{or: [f], and: [f, {field: 'y', equals: 'z'}]}", 14),
        ("{and: [f]}", 45),  # a deep chain (the bridge takes 100 levels)
    ],
)
def test_an_invalid_leaf_deep_in_a_recursive_any_of_schema(wrap: str, depth: int) -> None:
    code = (
        "let f = {field: 'x', equals: 1};\n"
        f"for (let i = 0; i < {depth}; i++) f = {wrap};\n"
        "try { await tools.app.t({filter: f}); } catch (e) { return [e.code, e.message]; }"
    )
    out = run_case({"input_schema": FILTER_SCHEMA, "code": code})
    assert out["ok"], out
    code_, message = out["value"]
    assert code_ == "TOOL_INPUT_INVALID"
    assert "at $.filter: " in message and "'anyOf'" in message
    assert len(message) < 2000


def _chain(keyword: str, length: int, fan: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"D{i}": {keyword: [{"$ref": f"#/$defs/D{i + 1}"}] * fan} for i in range(length)
    }
    defs[f"D{length}"] = {"type": "string"}
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/D0"}}, "$defs": defs}


@pytest.mark.parametrize(
    ("keyword", "length", "fan", "expected"),
    [
        ("anyOf", 22, 2, "not valid under any of the schemas listed in the 'anyOf' keyword"),
        ("oneOf", 22, 2, "not valid under any of the schemas listed in the 'oneOf' keyword"),
        ("allOf", 24, 2, '1 is not of type "string"'),
        ("allOf", 14, 3, '1 is not of type "string"'),
    ],
)
def test_a_small_schema_chaining_applicators_reports_a_small_invalid_argument(
    keyword: str, length: int, fan: int, expected: str
) -> None:
    schema = _chain(keyword, length, fan)
    assert len(json.dumps(schema)) < 4000
    code = "try { await tools.app.t({a: 1}); } catch (e) { return [e.code, e.message]; }"
    out = run_case({"input_schema": schema, "code": code})
    assert out["ok"], out
    assert out["value"][0] == "TOOL_INPUT_INVALID"
    assert "at $.a: " in out["value"][1] and expected in out["value"][1]


@pytest.mark.parametrize("keyword", ["anyOf", "allOf"])
def test_an_invalid_result_against_a_chained_output_schema(keyword: str) -> None:
    out_schema = _chain(keyword, 24, 2)
    out = run_case(
        {
            "input_schema": {"type": "object"},
            "output_schema": out_schema,
            "returns": {"a": 1},
            "code": "try { await tools.app.t({}); } catch (e) { return [e.code, e.message]; }",
        }
    )
    assert out["ok"], out
    assert out["value"][0] == "TOOL_RESULT_INVALID"
    assert "at $.a: " in out["value"][1]
