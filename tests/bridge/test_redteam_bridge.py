"""Red-team checks of the tool bridge through ``CodeMode.run``: hostile tool output and
failures keep stable codes and never show host-only text to the sandbox."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from codemodekit import ErrorCode, ToolError
from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import ToolOutput
from tests.core.helpers import code_mode, const, source, tool

SECRET = "sk-live-7f3a9c"


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


async def test_a_result_nested_too_deeply_for_json_is_invalid_not_internal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    src = source("app", tool("deep", const(ToolOutput(structured_content=nested(5000)))))
    async with code_mode(src) as cm:
        caught = await cm.run(
            "try { await tools.app.deep({}) } catch (e) { return [e.code, e.message] }"
        )
        assert caught.ok, caught.diagnostic
        assert caught.value[0] == "TOOL_RESULT_INVALID"
        assert "nest" in caught.value[1]
        after = await cm.run("return 1")
    assert after.ok
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_huge_upstream_code_is_bounded() -> None:
    def refuse(_args: dict[str, Any], _ctx: Any) -> Any:
        raise ToolError("refused", code="E" * 100_000)

    async with code_mode(source("app", tool("refuse", refuse))) as cm:
        result = await cm.run("await tools.app.refuse({})")
    assert result.diagnostic is not None and result.diagnostic.code is ErrorCode.TOOL_ERROR
    upstream = dict(result.diagnostic.details)["upstream_code"]
    assert isinstance(upstream, str) and len(upstream) <= 200


@pytest.mark.parametrize(
    "error",
    [
        ToolError("refused politely", cause=RuntimeError(f"db password {SECRET}")),
        RuntimeError(f"internal detail {SECRET}"),
        KeyError(SECRET),
    ],
    ids=["tool-error-cause", "internal", "key-error"],
)
async def test_host_only_text_never_reaches_the_sandbox(error: Exception) -> None:
    def fail(_args: dict[str, Any], _ctx: Any) -> Any:
        raise error

    async with code_mode(source("app", tool("fail", fail))) as cm:
        caught = await cm.run(
            "try { await tools.app.fail({}) } catch (e) {\n"
            "  console.log(e, e.stack, Object.getOwnPropertyNames(e), JSON.stringify(e));\n"
            "  return [e.message, e.code, String(e)] }"
        )
        uncaught = await cm.run("await tools.app.fail({})")
    for result in (caught, uncaught):
        assert SECRET not in str(result.to_json())


async def test_source_unavailable_at_call_time_keeps_to_its_sanitized_text() -> None:
    def gone(_args: dict[str, Any], _ctx: Any) -> Any:
        raise SourceUnavailable("app: the server exited")

    async with code_mode(source("app", tool("gone", gone))) as cm:
        result = await cm.run("await tools.app.gone({})")
    assert result.diagnostic is not None
    assert result.diagnostic.code is ErrorCode.SOURCE_UNAVAILABLE


async def test_huge_unknown_names_are_not_fuzzy_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    # difflib over a big catalog with a megabyte-long name held the event loop for
    # seconds; no real name is that long, so no suggestion is computed for it.
    import difflib

    seen: list[int] = []
    original = difflib.get_close_matches

    def spy(word: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(word))
        return original(word, *args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", spy)
    tools = [tool(f"tool_{i}", const(ToolOutput())) for i in range(20)]
    async with code_mode(source("app", *tools)) as cm:
        result = await cm.run(
            "const long = 'tool_'.repeat(200000);\n"
            "const codes = [];\n"
            "for (const call of [() => tools.app[long]({}), () => tools[long].x({}),\n"
            "                    () => tools.app.tool_l({})]) {\n"
            "  try { await call() } catch (e) { codes.push([e.code, e.message.length]) } }\n"
            "return codes"
        )
    assert result.ok, result.diagnostic
    assert [c[0] for c in result.value] == ["TOOL_NOT_FOUND", "SOURCE_NOT_FOUND", "TOOL_NOT_FOUND"]
    assert all(length <= 1_000 for _, length in result.value)
    assert seen and max(seen) <= 128  # the short typo still gets its suggestion
