"""`@tool` on typed functions, non-JSON results named by path, and tools modules that fail
to import (issue 14, item 6)."""

from __future__ import annotations

import datetime
import json
import textwrap
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from codemodekit import CodeMode, ToolContext, define_tool, local, tool
from codemodekit.bridge.policy import allow_all_tool_calls
from codemodekit.errors import ErrorCode
from codemodekit.providers.base import HealthStatus
from codemodekit.providers.python.local import PythonModuleProvider


class Issue(BaseModel):
    number: int
    title: str
    created_at: datetime.datetime


@tool
def search_issues(
    query: Annotated[str, Field(description="Words to look for")],
    limit: int = 10,
    labels: list[str] | None = None,
) -> list[Issue]:
    """Search issues by text.

    Returns at most `limit` issues, newest first.
    """
    stamp = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    return [
        Issue(number=i, title=f"{query} {labels or []}", created_at=stamp) for i in range(limit)
    ]


class Created(BaseModel):
    id: str
    at: datetime.datetime


@tool(name="create-note", annotations={"destructiveHint": False})
async def create_note(text: str, *, context: ToolContext) -> Created:
    """Create a note."""
    context.report_progress("saving")
    return Created(id=f"n-{len(text)}", at=datetime.datetime(2026, 5, 6, tzinfo=datetime.UTC))


async def test_schema_description_and_keyword_arguments() -> None:
    async with CodeMode(
        sources=[local("gh", [search_issues, create_note])],  # named after the function
        policy=allow_all_tool_calls(),
    ) as cm:
        found = cm.catalog.get("gh", "search_issues")
        assert found is not None
        assert found.description.startswith("Search issues by text.\n\nReturns at most")
        schema = found.input_schema
        assert list(schema["properties"]) == ["query", "limit", "labels"]
        assert list(schema["required"]) == ["query"]
        assert schema["properties"]["query"]["description"] == "Words to look for"
        assert schema["properties"]["limit"]["default"] == 10
        assert schema["additionalProperties"] is False
        result = await cm.run(
            "const r = await tools.gh.search_issues({ query: 'bug', limit: 2, labels: ['x'] });"
            "return r.structuredContent.result;"
        )
        assert result.ok, result.diagnostic
        assert result.value[1] == {
            "number": 1,
            "title": "bug ['x']",
            "created_at": "2026-01-02T03:04:05Z",
        }
        wrong = await cm.run("return await tools.gh.search_issues({ query: 'x', nope: 1 });")
        assert wrong.diagnostic is not None
        assert wrong.diagnostic.code is ErrorCode.TOOL_INPUT_INVALID

        note = cm.catalog.get("gh", "create-note")
        assert note is not None and note.output_schema is not None
        assert note.output_schema["properties"]["at"]["format"] == "date-time"
        assert note.annotations["destructiveHint"] is False
        made = await cm.run(
            'return (await tools.gh["create-note"]({ text: "abc" })).structuredContent;'
        )
        assert made.ok, made.diagnostic
        assert made.value == {"id": "n-3", "at": "2026-05-06T00:00:00Z"}


async def test_a_list_return_is_the_typed_wrapped_output_and_no_automatic_title_leaks() -> None:
    # The README's own example (issue 20 item 13): `-> list[Issue]` was ToolResult<unknown>.
    async with CodeMode(
        sources=[local("gh", [search_issues])], policy=allow_all_tool_calls()
    ) as cm:
        found = cm.catalog.get("gh", "search_issues")
        assert found is not None and found.output_schema is not None
        assert list(found.output_schema["required"]) == ["result"]
        items = found.output_schema["properties"]["result"]
        assert items["type"] == "array"
        declarations = "\n".join(cm.generate().values())
        shown = json.dumps(cm.search("search_issues", detail="typescript").to_json())
        result = await cm.run(
            "const r = await tools.gh.search_issues({ query: 'q', limit: 1 });"
            "return r.structuredContent.result[0].number;"
        )
    assert result.ok and result.value == 0, result.diagnostic
    for text in (declarations, shown):
        assert "result: GhIssue[];" in text
        for automatic in ("/** Query */", "/** Limit */", "/** SearchIssuesInput */", "Issue */"):
            assert automatic not in text


class Note(BaseModel):
    text: str = Field(title="Body text")


def test_an_explicit_title_is_kept() -> None:
    @tool
    def keep(note: Note) -> int:
        """Keep a note."""
        return len(note.text)

    schema = keep.input_schema
    assert "title" not in schema
    [note] = schema["$defs"].values()
    assert "title" not in note
    assert note["properties"]["text"]["title"] == "Body text"
    assert keep.output_schema is not None
    assert keep.output_schema["properties"]["result"] == {"type": "integer"}


def test_a_function_without_docstring_or_hints_is_refused_with_the_fix() -> None:
    def nodoc(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="has no docstring; write one or pass description="):
        tool(nodoc)

    def nohint(x):  # type: ignore[no-untyped-def]
        """Doc."""
        return x

    with pytest.raises(TypeError, match="parameter 'x' needs a type hint"):
        tool(nohint)


async def test_a_result_that_is_not_json_names_the_key_path() -> None:
    def bad(args: dict[str, Any]) -> Any:
        return {"items": [{"ok": 1}, {"created_at": datetime.datetime(2026, 1, 1)}]}

    broken = define_tool(description="d", input_schema={"type": "object"}, execute=bad)
    async with CodeMode(
        sources=[local("app", {"bad": broken})], policy=allow_all_tool_calls()
    ) as cm:
        result = await cm.run("return await tools.app.bad({});")
    assert result.diagnostic is not None
    assert result.diagnostic.code is ErrorCode.TOOL_RESULT_INVALID
    assert result.diagnostic.message == (
        "the result of tools.app.bad is not JSON data: $.items[1].created_at: datetime is not JSON"
    )


async def _start(tmp_path: Path, name: str, text: str) -> PythonModuleProvider:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    provider = PythonModuleProvider("app", name, paths=[tmp_path])
    with pytest.raises(Exception):  # noqa: B017 - SourceUnavailable, checked through health
        await provider.start(lambda _d: None)
    assert provider.health().status == HealthStatus.UNAVAILABLE
    return provider


async def test_a_missing_dependency_names_the_import_and_where(tmp_path: Path) -> None:
    provider = await _start(
        tmp_path, "needs_dep", "import os\nimport codemode_no_such_dependency_xyz\n"
    )
    message = provider.health().message
    assert "python module 'needs_dep' imports 'codemode_no_such_dependency_xyz'" in message
    assert f"{tmp_path / 'needs_dep.py'}:2" in message
    assert "was not found" not in message


async def test_a_syntax_error_gives_file_and_line(tmp_path: Path) -> None:
    provider = await _start(tmp_path, "broken_syntax", "x = 1\ndef f(:\n    pass\n")
    message = provider.health().message
    assert f"syntax error at {tmp_path / 'broken_syntax.py'}:2" in message


async def test_a_failing_import_names_the_place_not_the_message(tmp_path: Path) -> None:
    provider = await _start(tmp_path, "raises_on_import", "\n\nraise RuntimeError('token=abc')\n")
    message = provider.health().message
    assert f"RuntimeError raised at {tmp_path / 'raises_on_import.py'}:3" in message
    assert "token=abc" not in message
