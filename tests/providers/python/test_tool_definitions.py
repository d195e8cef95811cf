"""What a Python source is defined with: each tool under a name of its own, as JSON.

Two different Python tools never share a name (found by a review helper: a read-only
``list_records`` declared ``name="delete_all"`` silently replaced the destructive
``delete_all``, and with it what a policy rule for that name allows).

Every way two tools can meet under one name is refused with both named: a module's
attributes (``define_tool(name=...)`` against another attribute's name, or two explicit
names) and a list given to ``local()``. The same tool under two attributes is one tool.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from codemodekit import CodeMode, allow_all_tool_calls, define_tool, local
from tests.conftest import codemode_cli

TOOL = "define_tool(description={text!r}, input_schema={{'type': 'object'}}, execute=lambda a: {text!r}{named})"

MODULES = {
    "named like another attribute": [
        ("delete_all", "drops everything", ""),
        ("list_records", "lists", "delete_all"),
    ],
    "two explicit names": [("a", "first", "same"), ("b", "second", "same")],
}


def _module(tmp_path: Path, tools: list[tuple[str, str, str]]) -> str:
    module = f"cm_dupes_{tmp_path.name.replace('-', '_')}"
    lines = ["from codemodekit import define_tool"]
    for attr, text, named in tools:
        lines.append(
            f"{attr} = " + TOOL.format(text=text, named=f", name={named!r}" if named else "")
        )
    (tmp_path / f"{module}.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return module


def _check(project: Path, module: str) -> subprocess.CompletedProcess[str]:
    """``codemode check`` of a project whose one source is ``module``."""
    (project / "codemode.toml").write_text(
        'version = 1\nname = "n"\n[policy]\ndefault = "allow"\n'
        f'[sources.app]\ntype = "python"\nmodule = "{module}"\n',
        encoding="utf-8",
    )
    return codemode_cli(project, "check")


@pytest.mark.parametrize("case", list(MODULES), ids=list(MODULES))
def test_a_module_whose_tools_share_a_name_is_unavailable_with_both_named(
    tmp_path: Path, case: str
) -> None:
    tools = MODULES[case]
    module = _module(tmp_path, tools)
    done = _check(tmp_path, module)
    shown = done.stdout + done.stderr
    assert done.returncode != 0, shown
    for attr, _text, _named in tools:
        assert repr(attr) in shown, shown


def test_one_tool_under_two_attributes_is_one_tool(tmp_path: Path) -> None:
    module = _module(tmp_path, [("lookup", "finds", "")])
    path = tmp_path / f"{module}.py"
    path.write_text(path.read_text() + "also = lookup\n", encoding="utf-8")
    done = _check(tmp_path, module)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_list_of_tools_sharing_a_name_is_refused() -> None:
    first = define_tool(
        name="x", description="first", input_schema={"type": "object"}, execute=lambda a: 1
    )
    second = define_tool(
        name="x", description="second", input_schema={"type": "object"}, execute=lambda a: 2
    )
    with pytest.raises(ValueError, match="'x'"):
        local("app", [first, second])
    assert local("app", [first, first])  # the same tool twice is one tool


async def test_distinct_names_still_make_distinct_tools() -> None:
    first = define_tool(
        name="x", description="first", input_schema={"type": "object"}, execute=lambda a: 1
    )
    second = define_tool(
        name="y", description="second", input_schema={"type": "object"}, execute=lambda a: 2
    )
    async with CodeMode(
        sources=[local("app", [first, second])], policy=allow_all_tool_calls()
    ) as cm:
        result = await cm.run(
            "return [(await tools.app.x({})).structuredContent,"
            " (await tools.app.y({})).structuredContent];"
        )
    assert result.ok and result.value == [1, 2], result


# -- what a tool is defined with must be JSON ------------------------------------------------
# The catalog, the lock and every generated file hold a tool's schemas as JSON: a value JSON
# cannot hold ended `codemode lock` in a traceback (found by a review helper), far from the
# define_tool call that made it.
NOT_JSON = {
    "a set": {"type": "string", "enum": {"a", "b"}},
    "bytes": {"type": "string", "default": b"x"},
    "NaN": {"type": "number", "maximum": float("nan")},
    "a tuple key": {"type": "object", "properties": {("a", "b"): {}}},
    "a 5000-digit integer": {"type": "integer", "maximum": 10**5000},
    "an object": {"type": "string", "default": object()},
}


@pytest.mark.parametrize("where", ["input_schema", "output_schema", "annotations"])
@pytest.mark.parametrize("case", list(NOT_JSON), ids=list(NOT_JSON))
def test_define_tool_refuses_what_json_cannot_hold(case: str, where: str) -> None:
    value = NOT_JSON[case]
    fields: dict[str, object] = {"input_schema": {"type": "object"}, where: value}
    with pytest.raises(TypeError, match=f"{where} is not JSON data"):
        define_tool(description="d", execute=lambda a: 1, **fields)  # type: ignore[arg-type]
