"""Issue 13, item 6: a trusted per-run context reaches local tools and the policy, never the
model's code; local tools report progress and observe cancellation through it."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

from codemodekit import (
    CodeMode,
    ErrorCode,
    Limits,
    ProgressEvent,
    ToolCallRequest,
    ToolContext,
    allow_all_tool_calls,
    define_tool,
    local,
)

OBJ: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class Caller:
    user: str
    tenant: str
    request_id: str


async def test_context_reaches_tools_and_policy_but_not_model_code() -> None:
    seen_by_policy: list[Any] = []

    def policy(request: ToolCallRequest) -> str:
        seen_by_policy.append(request.context)
        if isinstance(request.context, Caller) and request.context.tenant == "blocked":
            return "deny"
        return "allow"

    def whoami(_args: dict[str, Any], context: ToolContext) -> dict[str, str]:
        caller = context.context
        return {"user": caller.user, "tenant": caller.tenant, "call": str(context.call_id)}

    async def whoami_async(_args: dict[str, Any], *, context: ToolContext) -> str:
        return str(context.context.request_id)

    def plain(args: dict[str, Any]) -> str:  # a one-parameter tool is called as before
        return "plain"

    tools = {
        "whoami": define_tool(description="w", input_schema=OBJ, execute=whoami),
        "request": define_tool(description="r", input_schema=OBJ, execute=whoami_async),
        "plain": define_tool(description="p", input_schema=OBJ, execute=plain),
    }
    caller = Caller("ada", "acme", "req-42")
    async with CodeMode(sources=[local("app", tools)], policy=policy) as cm:
        r = await cm.run(
            "const a = (await tools.app.whoami({})).structuredContent;\n"
            "const b = (await tools.app.request({})).structuredContent;\n"
            "const c = (await tools.app.plain({})).structuredContent;\n"
            "const visible = [typeof context, typeof globalThis.context,\n"
            "  Object.getOwnPropertyNames(globalThis).filter((n) => /context|caller/i.test(n))];\n"
            "return { a, b, c, visible };",
            context=caller,
        )
        assert r.ok, r.diagnostic
        assert r.value == {
            "a": {"user": "ada", "tenant": "acme", "call": "1"},
            "b": "req-42",
            "c": "plain",
            "visible": ["undefined", "undefined", []],
        }
        assert seen_by_policy == [caller] * 3
        denied = await cm.run(
            "return await tools.app.plain({});", context=Caller("eve", "blocked", "r2")
        )
        assert denied.diagnostic is not None
        assert denied.diagnostic.code is ErrorCode.TOOL_DENIED
        assert "blocked" not in denied.diagnostic.message  # the context never reaches the model
        none = await cm.run("return (await tools.app.whoami({})).structuredContent;")
        assert none.diagnostic is not None  # context is None: the tool's own failure
        assert none.diagnostic.code is ErrorCode.TOOL_INTERNAL_ERROR


async def test_tools_report_progress_from_a_thread_and_see_cancellation() -> None:
    started = threading.Event()
    cancelled_seen = threading.Event()

    def steps(_args: dict[str, Any], context: ToolContext) -> str:
        for i in range(3):
            context.report_progress(f"step {i + 1} of 3")
        return "done"

    def stuck(_args: dict[str, Any], context: ToolContext) -> str:
        started.set()
        if context.wait_cancelled(timeout=60):
            cancelled_seen.set()
        return "late"

    tools = {
        "steps": define_tool(description="s", input_schema=OBJ, execute=steps),
        "stuck": define_tool(description="s", input_schema=OBJ, execute=stuck),
    }
    events: list[ProgressEvent] = []
    async with CodeMode(
        sources=[local("app", tools)],
        policy=allow_all_tool_calls(),
        limits=Limits(tool_call_time_ms=60_000),
    ) as cm:
        r = await cm.run(
            "return (await tools.app.steps({})).structuredContent;", on_progress=events.append
        )
        assert r.ok and r.value == "done"
        progress = [e.message for e in events if e.kind == "tool_progress"]
        assert progress == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
        assert all(e.tool == "tools.app.steps" for e in events if e.kind == "tool_progress")

        cancel = asyncio.Event()
        run = asyncio.ensure_future(cm.run("return await tools.app.stuck({});", cancel=cancel))
        await asyncio.wait_for(asyncio.to_thread(started.wait, 60), 90)
        cancel.set()
        stopped = await run
        assert stopped.diagnostic is not None and stopped.diagnostic.code is ErrorCode.CANCELLED
        assert await asyncio.to_thread(cancelled_seen.wait, 60)
