"""CodeMode.run and the facade's lifecycle, through the public API."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from codemodekit import (
    CodeMode,
    ErrorCode,
    Limits,
    ProgressEvent,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    deny_all_tool_calls,
    local,
)
from codemodekit.compiler.compile import CodeCompiler
from codemodekit.providers.base import CallContext
from codemodekit.providers.memory import InMemoryProvider
from codemodekit.providers.python.local import PythonModuleProvider
from codemodekit.sandbox.base import CompiledProgram
from tests.core.helpers import code_mode, const, source, tool


async def test_explicit_return_and_no_implicit_last_expression() -> None:
    async with code_mode() as cm:
        returned = await cm.run("const a = 20;\nreturn a + 22;")
        fell_off = await cm.run("const a = 20;\na + 22;")
    assert returned.ok and returned.value == 42
    assert fell_off.ok and fell_off.value is None


async def test_every_run_has_its_own_execution_id() -> None:
    async with code_mode() as cm:
        ids = {(await cm.run("return 1;")).execution_id for _ in range(5)}
    assert len(ids) == 5


async def test_local_tools_sync_and_async_with_a_pydantic_model() -> None:
    class Order(BaseModel):
        item: str
        quantity: int = 1

    seen: list[Any] = []

    def place(order: Order) -> dict[str, Any]:
        seen.append(order)
        return {"item": order.item, "total": order.quantity * 3}

    async def stock(args: dict[str, Any]) -> int:
        return len(args["item"])

    shop = local(
        "shop",
        {
            "place": define_tool(description="Place an order", input_model=Order, execute=place),
            "stock": define_tool(
                description="Units in stock",
                input_schema={"type": "object", "properties": {"item": {"type": "string"}}},
                execute=stock,
            ),
        },
    )
    async with CodeMode(sources=[shop], policy=allow_all_tool_calls()) as cm:
        result = await cm.run(
            "const a = await tools.shop.place({ item: 'tea', quantity: 2 });\n"
            "const b = await tools.shop.stock({ item: 'tea' });\n"
            "return [a.structuredContent, b.structuredContent];"
        )
        invalid = await cm.run("await tools.shop.place({ item: 'tea', quantity: 'two' });")
    assert result.value == [{"item": "tea", "total": 6}, 3]
    assert isinstance(seen[0], Order)
    assert (
        invalid.diagnostic is not None and invalid.diagnostic.code == ErrorCode.TOOL_INPUT_INVALID
    )


async def test_a_sleeping_sync_tool_does_not_block_another_run() -> None:
    release = threading.Event()
    order: list[str] = []

    def blocking(_args: dict[str, Any]) -> str:
        release.wait(10)
        return "slow"

    app = local(
        "app",
        {
            "blocking": define_tool(
                description="blocks", input_schema={"type": "object"}, execute=blocking
            ),
            "quick": define_tool(
                description="quick", input_schema={"type": "object"}, execute=lambda _a: "quick"
            ),
        },
    )
    async with CodeMode(sources=[app], policy=allow_all_tool_calls()) as cm:

        async def slow_run() -> None:
            await cm.run("return await tools.app.blocking({});")
            order.append("slow")

        async def quick_run() -> None:
            result = await cm.run("return (await tools.app.quick({})).structuredContent;")
            assert result.value == "quick"
            order.append("quick")
            release.set()

        await asyncio.gather(slow_run(), quick_run())
    assert order == ["quick", "slow"]


async def test_progress_events_are_ordered_bounded_and_end_with_finished() -> None:
    events: list[ProgressEvent] = []
    src = source("app", tool("ping", const("pong")))
    async with code_mode(src, progress_events=6, max_tool_calls=20) as cm:
        await cm.run(
            "for (let i = 0; i < 10; i++) await tools.app.ping({});\nreturn 1;",
            on_progress=events.append,
        )
    assert len(events) == 6
    assert [e.sequence for e in events] == list(range(1, 7))
    assert events[0].kind == "started" and events[-1].kind == "finished"
    assert events[1].kind == "tool_call_started" and events[1].tool == "tools.app.ping"


async def test_an_async_progress_consumer_receives_events_in_order() -> None:
    seen: list[int] = []

    async def consume(event: ProgressEvent) -> None:
        await asyncio.sleep(0)
        seen.append(event.sequence)

    src = source("app", tool("ping", const("pong")))
    async with code_mode(src) as cm:
        await cm.run("await tools.app.ping({});\nawait tools.app.ping({});", on_progress=consume)
    assert seen == sorted(seen) and len(seen) >= 4


async def test_cancelling_the_run_cancels_in_flight_tool_calls() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def hang(_args: dict[str, Any], _ctx: CallContext) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    src = source("app", tool("hang", hang))
    async with code_mode(src) as cm:
        task = asyncio.ensure_future(
            cm.run("await Promise.all([tools.app.hang({}), tools.app.hang({})]);")
        )
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cancelled.is_set()
        after = await cm.run("return 'still alive';")
    assert after.value == "still alive"


async def test_the_wall_limit_ends_a_run_awaiting_a_slow_tool() -> None:
    async def slow(_args: dict[str, Any], _ctx: CallContext) -> None:
        await asyncio.sleep(3600)

    src = source("app", tool("slow", slow))
    async with code_mode(src, wall_time_ms=200) as cm:
        result = await cm.run("await tools.app.slow({});")
    assert result.diagnostic is not None and result.diagnostic.code == ErrorCode.WALL_LIMIT


async def test_a_deny_all_policy_denies_every_call() -> None:
    src = source("app", tool("ping", const("pong")))
    async with code_mode(src, policy=deny_all_tool_calls()) as cm:
        result = await cm.run("return await tools.app.ping({});")
    assert result.diagnostic is not None and result.diagnostic.code == ErrorCode.TOOL_DENIED


def test_a_policy_is_required() -> None:
    with pytest.raises(TypeError, match="allow_all_tool_calls"):
        CodeMode(sources=[], policy=None)  # type: ignore[arg-type]


def test_limits_reject_unknown_names_and_non_positive_values() -> None:
    with pytest.raises(TypeError):
        Limits(compute_tim_ms=5)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="max_tool_calls"):
        Limits(max_tool_calls=0)
    with pytest.raises(ValueError):
        Limits(memory_bytes=-1)
    assert Limits(max_tool_calls=3).max_tool_calls == 3
    with pytest.raises(AttributeError):
        Limits().max_tool_calls = 4  # type: ignore[misc]


async def test_run_before_start_is_a_clear_error() -> None:
    cm = CodeMode(sources=[], policy=allow_all_tool_calls())
    with pytest.raises(RuntimeError, match="async with"):
        await cm.run("return 1;")


async def test_a_python_module_source_exposes_its_define_tool_attributes(tmp_path: Path) -> None:
    (tmp_path / "shop_tools_mod.py").write_text(
        textwrap.dedent(
            """
            from codemodekit import define_tool
            __all__ = ["price", "renamed"]
            price = define_tool(description="Price of an item",
                                input_schema={"type": "object", "properties": {"item": {"type": "string"}}},
                                execute=lambda args: {"item": args["item"], "cents": 250})
            renamed = define_tool(name="stock_level", description="Stock",
                                  input_schema={"type": "object"}, execute=lambda args: 9)
            hidden = define_tool(description="not exported", input_schema={"type": "object"},
                                 execute=lambda args: 0)
            """
        )
    )
    provider = PythonModuleProvider("shop", "shop_tools_mod", paths=[tmp_path])
    missing = PythonModuleProvider("gone", "no_such_module_xyz")
    try:
        async with CodeMode(sources=[provider, missing], policy=allow_all_tool_calls()) as cm:
            names = [t.name for t in cm.catalog.source_tools("shop")]
            result = await cm.run(
                "return (await tools.shop.price({ item: 'pen' })).structuredContent;"
            )
            health = {h.source: h for h in cm.health}
    finally:
        sys.modules.pop("shop_tools_mod", None)
    assert names == ["price", "stock_level"]
    assert result.value == {"item": "pen", "cents": 250}
    assert health["gone"].status == "unavailable"
    assert "no_such_module_xyz" in health["gone"].message


async def test_leaving_the_context_closes_every_source() -> None:
    src = source("app", tool("ping", const("pong")))
    async with code_mode(src):
        pass
    assert src.health().status == "closed"


async def test_many_concurrent_runs_share_one_code_mode() -> None:
    async def slow(args: dict[str, Any], _ctx: CallContext) -> int:
        await asyncio.sleep(0.05)
        return int(args["n"])

    src = source("app", tool("slow", slow))
    async with code_mode(src) as cm:
        results = await asyncio.gather(
            *(
                cm.run(f"return (await tools.app.slow({{ n: {n} }})).structuredContent;")
                for n in range(30)
            )
        )
    assert [r.value for r in results] == list(range(30))


async def test_setting_the_cancel_event_ends_the_run_with_cancelled() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def hang(_args: dict[str, Any], _ctx: CallContext) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stop = asyncio.Event()
    src = source("app", tool("hang", hang))
    async with code_mode(src) as cm:
        task = asyncio.ensure_future(cm.run("await tools.app.hang({});", cancel=stop))
        await started.wait()
        stop.set()
        result = await task
        after = await cm.run("return 1;", cancel=asyncio.Event())
    assert result.diagnostic is not None and result.diagnostic.code == ErrorCode.CANCELLED
    assert result.diagnostic.phase == "sandbox"
    assert cancelled.is_set()
    assert after.value == 1


async def test_progress_is_bounded_in_rate_and_still_ends_with_finished() -> None:
    events: list[ProgressEvent] = []
    src = source("app", tool("ping", const("pong")))
    async with code_mode(src, max_tool_calls=50) as cm:
        await cm.run(
            "for (let i = 0; i < 40; i++) await tools.app.ping({});\nreturn 1;",
            on_progress=events.append,
        )
    # 40 calls would make 82 events; a burst of 10 plus a trickle is all that passes.
    assert 2 <= len(events) < 40
    assert events[-1].kind == "finished"
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))


async def test_a_large_source_compiles_off_the_loop_with_the_same_locations() -> None:
    filler = "// padding\n" * 1_000  # over the inline-compile size
    async with code_mode() as cm:
        ok = await cm.run(filler + "return 'big';")
        bad = await cm.run(filler + "return 1 +;")
    assert ok.value == "big"
    assert bad.diagnostic is not None and bad.diagnostic.code == ErrorCode.COMPILE_ERROR
    assert bad.diagnostic.location is not None and bad.diagnostic.location.line == 1_001


class _CountingCompiler(CodeCompiler):
    def __init__(self) -> None:
        super().__init__()
        self.compiled: list[str] = []

    def compile(self, source: str, *, max_source_bytes: int) -> CompiledProgram:
        self.compiled.append(source)
        return super().compile(source, max_source_bytes=max_source_bytes)


@pytest.mark.parametrize("filler", [0, 1_000], ids=["small", "off the loop"])
async def test_inline_a_source_seen_before_is_not_compiled_again(filler: int) -> None:
    """ADR 0044: where this process compiles (inline mode), a program is a function of its
    source; one seen before runs its program again, with the same error locations, and a
    source that failed is compiled (and fails) again."""
    compiler = _CountingCompiler()
    pad = "// padding\n" * filler
    good, bad = pad + "const x: number = 2;\nreturn x * 21;", pad + "return 1 +;"
    async with CodeMode(
        sources=[],
        policy=allow_all_tool_calls(),
        runtime=RuntimeOptions(mode="inline"),
        compiler=compiler,
    ) as cm:
        results = [await cm.run(code) for code in (good, bad, good, bad, good)]
    assert [r.value for r in results[::2]] == [42, 42, 42]
    for failed in results[1::2]:
        assert failed.diagnostic is not None and failed.diagnostic.code == ErrorCode.COMPILE_ERROR
        assert failed.diagnostic.location is not None
        assert failed.diagnostic.location.line == filler + 1
    assert compiler.compiled.count(good) == 1 and compiler.compiled.count(bad) == 2


class _SlowStart(InMemoryProvider):
    def __init__(self, *args: Any, gate: asyncio.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = gate

    async def start(self, on_change: Any) -> Any:
        await self._gate.wait()
        return await super().start(on_change)


async def test_by_default_start_waits_for_every_source_to_settle() -> None:
    gate = asyncio.Event()
    slow = _SlowStart("slow", dict([tool("ping", const("pong"))]), gate=gate)
    cm = CodeMode(sources=[slow], policy=allow_all_tool_calls())
    starting = asyncio.ensure_future(cm.start())
    await asyncio.sleep(0.05)
    assert not starting.done()
    gate.set()
    await starting
    try:
        assert cm.catalog.get("slow", "ping") is not None
    finally:
        await cm.aclose()


async def test_with_a_start_grace_a_slow_source_joins_the_catalog_later() -> None:
    gate = asyncio.Event()
    slow = _SlowStart("slow", dict([tool("ping", const("pong"))]), gate=gate)
    async with CodeMode(sources=[slow], policy=allow_all_tool_calls(), start_grace_s=0.05) as cm:
        assert cm.catalog.get("slow", "ping") is None
        # A run that does not name it does not wait for it.
        other = await cm.run("return 1;")
        assert cm.catalog.get("slow", "ping") is None
        seen: list[str] = []

        def on_progress(event: ProgressEvent) -> None:
            seen.append(event.kind)
            if event.kind == "source_connecting":
                gate.set()  # the run is waiting for it: let it come up

        # A run that names it waits for it (issue 20 item 11), within its wall limit.
        late = await cm.run(
            "return (await tools.slow.ping({})).structuredContent;", on_progress=on_progress
        )
    assert other.value == 1
    assert late.ok, late.diagnostic
    assert late.value == "pong"
    assert "source_connecting" in seen


async def test_a_run_waiting_for_a_source_ends_at_its_wall_limit() -> None:
    never = _SlowStart("never", dict([tool("ping", const("pong"))]), gate=asyncio.Event())
    async with CodeMode(
        sources=[never],
        policy=allow_all_tool_calls(),
        start_grace_s=0,
        limits=Limits(wall_time_ms=50),
    ) as cm:
        result = await cm.run("return await tools.never.ping({});")
        broken = await cm.run("return (;")  # a compile error waits for nothing
    assert result.diagnostic is not None
    assert result.diagnostic.code == ErrorCode.WALL_LIMIT
    assert "waiting for source 'never' to connect" in result.diagnostic.message
    assert broken.diagnostic is not None
    assert broken.diagnostic.code == ErrorCode.COMPILE_ERROR
