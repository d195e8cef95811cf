"""The tool bridge as model code sees it: every step of a call and every failure code."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from codemodekit import ErrorCode, PolicyDecision, ToolCallRequest, ToolError
from codemodekit.providers.base import CallContext, ToolOutput
from tests.core.helpers import code_mode, const, source, tool

ID_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}


async def test_a_call_returns_a_tool_result_with_structured_content() -> None:
    src = source(
        "app", tool("lookup", lambda args, _c: {"id": args["id"], "found": True}, ID_SCHEMA)
    )
    async with code_mode(src) as cm:
        result = await cm.run("const r = await tools.app.lookup({ id: '7' });\nreturn r;")
    assert result.ok, result.diagnostic
    assert result.value == {"content": [], "structuredContent": {"id": "7", "found": True}}
    assert result.tool_calls == 1


async def test_content_blocks_reach_the_sandbox_unchanged() -> None:
    blocks = (
        {"type": "text", "text": "hello"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw=="},
    )
    src = source("media", tool("pic", const(ToolOutput(content=blocks))))
    async with code_mode(src) as cm:
        result = await cm.run(
            "const r = await tools.media.pic({});\nreturn r.content.map(b => b.type);"
        )
    assert result.value == ["text", "image"]


async def test_bracket_addressing_reaches_names_that_are_not_identifiers() -> None:
    src = source("deployment-api", tool("deploy-now", const({"deployed": True})))
    async with code_mode(src) as cm:
        result = await cm.run(
            "const r = await tools['deployment-api']['deploy-now']({});\n"
            "return r.structuredContent.deployed;"
        )
    assert result.ok and result.value is True
    assert cm.catalog.tools[0].address == 'tools["deployment-api"]["deploy-now"]'


async def test_unknown_source_and_tool_suggest_the_close_name() -> None:
    src = source("github", tool("search_issues", const([])))
    async with code_mode(src) as cm:
        missing_source = await cm.run("await tools.githb.search_issues({});")
        missing_tool = await cm.run("await tools.github.search_issue({});")
    assert missing_source.diagnostic is not None
    assert missing_source.diagnostic.code == ErrorCode.SOURCE_NOT_FOUND
    assert "`tools.github`" in missing_source.diagnostic.message
    assert missing_tool.diagnostic is not None
    assert missing_tool.diagnostic.code == ErrorCode.TOOL_NOT_FOUND
    assert "`tools.github.search_issues`" in missing_tool.diagnostic.message
    assert missing_tool.diagnostic.tool == "tools.github.search_issue"


async def test_invalid_input_names_the_path_and_never_reaches_policy_or_tool() -> None:
    seen: list[ToolCallRequest] = []

    def policy(request: ToolCallRequest) -> str:
        seen.append(request)
        return "allow"

    src = source("app", tool("lookup", const({}), ID_SCHEMA))
    async with code_mode(src, policy=policy) as cm:
        result = await cm.run("await tools.app.lookup({ id: 5 });")
    assert result.diagnostic is not None
    assert result.diagnostic.code == ErrorCode.TOOL_INPUT_INVALID
    assert "$.id" in result.diagnostic.message
    assert seen == [] and src.calls == []


async def test_denial_is_catchable_and_carries_code_tool_and_reason() -> None:
    def policy(request: ToolCallRequest) -> PolicyDecision:
        if request.tool == "drop":
            return PolicyDecision("deny", "dropping is reserved for humans")
        return PolicyDecision("allow")

    src = source("db", tool("drop", const(None)), tool("read", const({"rows": 1})))
    async with code_mode(src, policy=policy) as cm:
        result = await cm.run(
            "let denied;\n"
            "try { await tools.db.drop({}); } catch (e) { denied = [e.code, e.tool, e.message]; }\n"
            "const r = await tools.db.read({});\n"
            "return { denied, rows: r.structuredContent.rows };"
        )
    assert result.ok, result.diagnostic
    code, address, message = result.value["denied"]
    assert code == "TOOL_DENIED" and address == "tools.db.drop"
    assert "reserved for humans" in message
    assert result.value["rows"] == 1
    assert [c.name for c in src.calls] == ["read"]


@pytest.mark.parametrize(
    "policy",
    [
        lambda _r: "yes",
        lambda _r: None,
        lambda _r: {"decision": "allow"},
        lambda _r: 1 / 0,
    ],
    ids=["garbage-string", "none", "dict", "raises"],
)
async def test_a_policy_that_misbehaves_fails_closed(policy: Any) -> None:
    src = source("app", tool("ping", const("pong")))
    async with code_mode(src, policy=policy) as cm:
        result = await cm.run("return await tools.app.ping({});")
    assert result.diagnostic is not None and result.diagnostic.code == ErrorCode.TOOL_DENIED
    assert src.calls == []


async def test_an_async_policy_that_never_answers_denies() -> None:
    async def policy(_request: ToolCallRequest) -> str:
        await asyncio.sleep(3600)
        return "allow"

    src = source("app", tool("ping", const("pong")))
    async with code_mode(src, policy=policy, tool_call_time_ms=100) as cm:
        result = await cm.run("return await tools.app.ping({});")
    assert result.diagnostic is not None and result.diagnostic.code == ErrorCode.TOOL_DENIED
    assert "in time" in result.diagnostic.message


async def test_concurrency_is_capped_and_call_ids_are_unique() -> None:
    active = 0
    peak = 0
    call_ids: list[int] = []

    async def work(args: dict[str, Any], ctx: CallContext) -> int:
        nonlocal active, peak
        call_ids.append(ctx.call_id)
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return int(args["n"])

    src = source("w", tool("work", work))
    async with code_mode(src, max_concurrent_tool_calls=3, max_tool_calls=50) as cm:
        result = await cm.run(
            "const rs = await Promise.all(Array.from({ length: 20 }, (_, n) => tools.w.work({ n })));\n"
            "return rs.map(r => r.structuredContent);"
        )
    assert result.ok, result.diagnostic
    assert result.value == list(range(20))
    assert peak == 3
    assert sorted(call_ids) == list(range(1, 21))


async def test_the_call_budget_ends_with_its_own_code() -> None:
    src = source("app", tool("ping", const("pong")))
    async with code_mode(src, max_tool_calls=3) as cm:
        result = await cm.run(
            "for (let i = 0; i < 5; i++) await tools.app.ping({});\nreturn 'done';"
        )
    assert result.diagnostic is not None
    assert result.diagnostic.code == ErrorCode.TOOL_CALL_LIMIT
    assert len(src.calls) == 3


async def test_a_slow_tool_times_out_and_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def hang(_args: dict[str, Any], _ctx: CallContext) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    src = source("app", tool("hang", hang))
    async with code_mode(src, tool_call_time_ms=100) as cm:
        result = await cm.run("await tools.app.hang({});")
    assert result.diagnostic is not None
    assert result.diagnostic.code == ErrorCode.TOOL_TIMEOUT
    assert cancelled.is_set()


async def test_a_circular_or_non_json_result_is_rejected_but_shared_references_are_fine() -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    shared = {"x": 1}
    src = source(
        "app",
        tool("circular", const(circular)),
        tool("bytes", const(b"raw")),
        tool("shared", const({"a": shared, "b": shared})),
    )
    async with code_mode(src) as cm:
        circ = await cm.run("await tools.app.circular({});")
        raw = await cm.run("await tools.app.bytes({});")
        ok = await cm.run("const r = await tools.app.shared({});\nreturn r.structuredContent;")
    assert circ.diagnostic is not None and circ.diagnostic.code == ErrorCode.TOOL_RESULT_INVALID
    assert raw.diagnostic is not None and raw.diagnostic.code == ErrorCode.TOOL_RESULT_INVALID
    assert ok.value == {"a": {"x": 1}, "b": {"x": 1}}


async def test_result_and_bridge_size_limits_fail_explicitly() -> None:
    src = source("app", tool("blob", lambda args, _c: "x" * int(args["n"])))
    async with code_mode(src, tool_result_bytes=1000, total_bridge_bytes=2500) as cm:
        too_big = await cm.run("await tools.app.blob({ n: 5000 });")
        budget = await cm.run(
            "for (let i = 0; i < 5; i++) await tools.app.blob({ n: 800 });\nreturn 'done';"
        )
    assert too_big.diagnostic is not None
    assert too_big.diagnostic.code == ErrorCode.TOOL_RESULT_TOO_LARGE
    assert budget.diagnostic is not None and budget.diagnostic.code == ErrorCode.BRIDGE_LIMIT


async def test_output_schema_is_enforced_even_when_structured_content_is_missing() -> None:
    out_schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    src = source(
        "app",
        tool("wrong", const({"n": "one"}), output_schema=out_schema),
        tool(
            "absent",
            const(ToolOutput(content=({"type": "text", "text": "1"},))),
            output_schema=out_schema,
        ),
        tool("right", const({"n": 1}), output_schema=out_schema),
    )
    async with code_mode(src) as cm:
        wrong = await cm.run("await tools.app.wrong({});")
        absent = await cm.run("await tools.app.absent({});")
        right = await cm.run("return (await tools.app.right({})).structuredContent.n;")
    assert wrong.diagnostic is not None and wrong.diagnostic.code == ErrorCode.TOOL_RESULT_INVALID
    assert "$.n" in wrong.diagnostic.message
    assert absent.diagnostic is not None and absent.diagnostic.code == ErrorCode.TOOL_RESULT_INVALID
    assert right.value == 1


async def test_tool_error_shows_its_message_and_hides_its_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(_args: dict[str, Any], _c: CallContext) -> None:
        raise ToolError(
            "quota exceeded, try tomorrow", cause=RuntimeError("token=sk-SECRET-123"), code="quota"
        )

    src = source("app", tool("refuse", refuse))
    async with code_mode(src) as cm:
        with caplog.at_level(logging.INFO, logger="codemodekit"):
            result = await cm.run("await tools.app.refuse({});")
    assert result.diagnostic is not None
    assert result.diagnostic.code == ErrorCode.TOOL_ERROR
    assert result.diagnostic.message == "quota exceeded, try tomorrow"
    assert dict(result.diagnostic.details)["upstream_code"] == "quota"
    assert "sk-SECRET-123" not in str(result.to_json())
    assert "sk-SECRET-123" in caplog.text


async def test_an_unexpected_exception_is_sanitized_with_a_correlation_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def crash(_args: dict[str, Any], _c: CallContext) -> None:
        raise RuntimeError("postgres://admin:hunter2@db/prod refused")

    src = source("app", tool("crash", crash))
    async with code_mode(src) as cm:
        with caplog.at_level(logging.ERROR, logger="codemodekit"):
            result = await cm.run("await tools.app.crash({});")
    diagnostic = result.diagnostic
    assert diagnostic is not None and diagnostic.code == ErrorCode.TOOL_INTERNAL_ERROR
    assert "hunter2" not in str(result.to_json())
    assert diagnostic.correlation_id and diagnostic.correlation_id in diagnostic.message
    assert "hunter2" in caplog.text and diagnostic.correlation_id in caplog.text


async def test_a_quarantined_tool_fails_alone() -> None:
    bad_schema = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}
    src = source("app", tool("broken", const(1), bad_schema), tool("fine", const(2)))
    async with code_mode(src) as cm:
        broken = await cm.run("await tools.app.broken({});")
        fine = await cm.run("return (await tools.app.fine({})).structuredContent;")
    assert broken.diagnostic is not None
    assert broken.diagnostic.code == ErrorCode.TOOL_SCHEMA_UNSUPPORTED
    assert fine.value == 2
    assert [t.name for t in cm.catalog.quarantined] == ["broken"]


async def test_an_unavailable_source_fails_alone_and_heals_when_it_returns() -> None:
    flaky = source("flaky", tool("ping", const("pong")), unavailable="connection refused")
    steady = source("steady", tool("ping", const("pong")))
    async with code_mode(flaky, steady) as cm:
        health = {h.source: h.status for h in cm.health}
        assert health == {"flaky": "unavailable", "steady": "ok"}
        down = await cm.run("await tools.flaky.ping({});")
        up = await cm.run("return (await tools.steady.ping({})).structuredContent;")
        before = cm.catalog.revision
        flaky.come_back()
        healed = await cm.run("return (await tools.flaky.ping({})).structuredContent;")
    assert down.diagnostic is not None and down.diagnostic.code == ErrorCode.SOURCE_UNAVAILABLE
    assert up.value == "pong"
    assert healed.value == "pong"
    assert cm.catalog.revision != before


async def test_a_source_that_goes_down_mid_session_reports_unavailable() -> None:
    src = source("app", tool("ping", const("pong")))
    async with code_mode(src) as cm:
        src.go_down("server went away")
        result = await cm.run("await tools.app.ping({});")
    assert result.diagnostic is not None
    assert result.diagnostic.code == ErrorCode.SOURCE_UNAVAILABLE
    assert "server went away" in result.diagnostic.message


@pytest.mark.parametrize("queued", [1, 2, 3])
async def test_a_queued_call_cancelled_as_a_slot_frees_ends_cancelled_and_keeps_the_count(
    queued: int,
) -> None:
    # The holder releases in the very turn the queued calls are cancelled: release passes
    # the cancelled waiters by, and each must still end with CancelledError (a ValueError
    # replaced it), with every slot back.
    from codemodekit.bridge.bridge import _Slots

    slots = _Slots(1)
    assert slots.take()
    waiting = [asyncio.ensure_future(slots.acquire()) for _ in range(queued)]
    await asyncio.sleep(0)  # each is queued
    for task in waiting:
        task.cancel()
    slots.release()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes), outcomes
    assert slots.take() and not slots.take()  # exactly the one slot, free again
