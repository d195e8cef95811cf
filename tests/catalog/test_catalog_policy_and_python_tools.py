"""Rehearsal of issue 4's hidden suite: catalog, Python tools, validators and policy.

Written from DESIGN.md, the architecture seed and the issue text only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from codemodekit import (
    CodeMode,
    Limits,
    PolicyDecision,
    RunResult,
    SpecError,
    ToolCallRequest,
    ToolError,
    allow_all_tool_calls,
    define_tool,
    deny_all_tool_calls,
    load_spec,
    local,
)
from codemodekit.providers.base import ToolSpec
from codemodekit.providers.memory import InMemoryProvider, MemoryTool

OBJ: dict[str, Any] = {"type": "object"}
ID_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}


def _echo(args: dict[str, Any]) -> Any:
    return args


def _code(result: RunResult) -> str | None:
    return None if result.diagnostic is None else result.diagnostic.code.value


# -- mixed sources in one catalog -----------------------------------------------------------------


def _write_module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


def _write_spec(folder: Path, body: str) -> Path:
    path = folder / "codemode.toml"
    path.write_text(textwrap.dedent(body).lstrip())
    return path


async def test_mixed_sources_in_one_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_module(
        tmp_path,
        "rehearsal_mixed_tools",
        """
        from codemodekit import define_tool

        def _double(args):
            return {"n": args["n"] * 2}

        double = define_tool(
            description="Double a number",
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            execute=_double,
        )
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_spec(
        _write_spec(
            tmp_path,
            """
            version = 1
            name = "mixed"
            [policy]
            default = "allow"
            [sources.py]
            type = "python"
            module = "rehearsal_mixed_tools"
            """,
        )
    )
    memory = InMemoryProvider(
        "mem",
        {"inc": MemoryTool(ToolSpec("inc", "increment", OBJ), lambda a, c: {"n": a["n"] + 1})},
    )
    loc = local(
        "loc",
        {
            "neg": define_tool(
                description="negate", input_schema=OBJ, execute=lambda a: {"n": -a["n"]}
            )
        },
    )
    from_spec = CodeMode.from_spec(spec)
    async with from_spec:
        assert [t.name for t in from_spec.catalog.tools] == ["double"]
    async with CodeMode(
        sources=[*CodeMode.from_spec(spec).providers.values(), memory, loc],
        policy=allow_all_tool_calls(),
    ) as cm:
        assert sorted(t.source for t in cm.catalog.tools) == ["loc", "mem", "py"]
        r = await cm.run(
            "const a = await tools.py.double({ n: 5 });\n"
            "const b = await tools.mem.inc({ n: a.structuredContent.n });\n"
            "const c = await tools.loc.neg({ n: b.structuredContent.n });\n"
            "return c.structuredContent.n;"
        )
        assert r.ok, r.diagnostic
        assert r.value == -11
        assert all(h.status == "ok" for h in cm.health)


async def test_python_module_all_and_explicit_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_module(
        tmp_path,
        "rehearsal_all_tools",
        """
        from codemodekit import define_tool

        __all__ = ["shown", "renamed"]
        shown = define_tool(description="shown", input_schema={"type": "object"}, execute=lambda a: 1)
        hidden = define_tool(description="hidden", input_schema={"type": "object"}, execute=lambda a: 2)
        renamed = define_tool(name="custom-name", description="r", input_schema={"type": "object"},
                              execute=lambda a: 3)
        not_a_tool = 42
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_spec(
        _write_spec(
            tmp_path,
            """
            version = 1
            name = "m"
            [policy]
            default = "allow"
            [sources.app]
            type = "python"
            module = "rehearsal_all_tools"
            """,
        )
    )
    async with CodeMode.from_spec(spec) as cm:
        assert sorted(t.name for t in cm.catalog.tools) == ["custom-name", "shown"]
        r = await cm.run(
            "const r = await tools.app['custom-name']({});\nreturn r.structuredContent;"
        )
        assert r.value == 3


@pytest.mark.parametrize(
    ("module", "body", "needle"),
    [
        ("rehearsal_missing_module_xyz", None, "rehearsal_missing_module_xyz"),
        ("rehearsal_no_tools", "X = 1\n", "rehearsal_no_tools"),
        (
            "rehearsal_import_fails",
            "raise RuntimeError('boom at import')\n",
            "rehearsal_import_fails",
        ),
    ],
)
async def test_python_module_problems_are_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, body: str | None, needle: str
) -> None:
    if body is not None:
        _write_module(tmp_path, module, body)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_spec(
        _write_spec(
            tmp_path,
            f"""
            version = 1
            name = "m"
            [policy]
            default = "allow"
            [sources.app]
            type = "python"
            module = "{module}"
            [sources.other]
            type = "python"
            module = "codemodekit.examples.demo"
            """,
        )
    )
    # A source that cannot come up is degraded with a clear message and its siblings keep
    # working (docs/architecture.md, "Independent failure"): start-up does not fail.
    cm = CodeMode.from_spec(spec)
    await cm.start()
    try:
        health = {h.source: h for h in cm.health}
        assert health["app"].status == "unavailable"
        assert needle in health["app"].message
        assert health["other"].status == "ok"
        r = await cm.run("await tools.app.x({});")
        assert _code(r) == "SOURCE_UNAVAILABLE"
    finally:
        await cm.aclose()


# -- catalog ----------------------------------------------------------------------------------------


async def test_catalog_is_sorted_frozen_and_revisioned() -> None:
    def make(schema: dict[str, Any]) -> Any:
        return local(
            "app",
            {
                "zeta": define_tool(description="z", input_schema=OBJ, execute=_echo),
                "alpha": define_tool(description="a", input_schema=schema, execute=_echo),
            },
        )

    async with (
        CodeMode(sources=[make(ID_SCHEMA)], policy=allow_all_tool_calls()) as a,
        CodeMode(sources=[make(ID_SCHEMA)], policy=allow_all_tool_calls()) as b,
        CodeMode(sources=[make({**ID_SCHEMA, "required": []})], policy=allow_all_tool_calls()) as c,
    ):
        assert [t.name for t in a.catalog.tools] == ["alpha", "zeta"]
        assert a.catalog.revision == b.catalog.revision
        assert a.catalog.revision != c.catalog.revision
        tool = a.catalog.tools[0]
        with pytest.raises((AttributeError, TypeError)):
            tool.name = "x"  # type: ignore[misc]
        with pytest.raises((AttributeError, TypeError)):
            a.catalog.tools.append(tool)  # type: ignore[attr-defined]


async def test_addresses_dot_or_bracket() -> None:
    async with CodeMode(
        sources=[
            local(
                "deployment-api",
                {"deploy": define_tool(description="d", input_schema=OBJ, execute=_echo)},
            ),
            local(
                "app", {"get-user": define_tool(description="g", input_schema=OBJ, execute=_echo)}
            ),
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        addresses = {t.name: t.address for t in cm.catalog.tools}
        assert "deployment-api" in addresses["deploy"] and "[" in addresses["deploy"]
        assert addresses["get-user"].endswith('app["get-user"]')
        r = await cm.run(
            "const a = await tools['deployment-api'].deploy({ x: 1 });\n"
            "const b = await tools.app['get-user']({ y: 2 });\n"
            "return [a.structuredContent, b.structuredContent];"
        )
        assert r.value == [{"x": 1}, {"y": 2}]


# -- quarantine and healing -------------------------------------------------------------------------


async def test_quarantine_one_tool_and_heal_on_refresh() -> None:
    bad = MemoryTool(
        ToolSpec("broken", "b", {"type": "object", "properties": {"a": {"type": "nonsense"}}}),
        lambda a, c: "never",
    )
    remote = MemoryTool(
        ToolSpec(
            "remote",
            "r",
            {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
        ),
        lambda a, c: "never",
    )
    good = MemoryTool(ToolSpec("fine", "f", OBJ), lambda a, c: "fine")
    provider = InMemoryProvider("m", {"broken": bad, "remote": remote, "fine": good})
    async with CodeMode(sources=[provider], policy=allow_all_tool_calls()) as cm:
        before = cm.catalog.revision
        quarantined = {t.name: t for t in cm.catalog.quarantined}
        assert set(quarantined) == {"broken", "remote"}
        assert quarantined["broken"].quarantine
        assert (
            "remote" in quarantined["remote"].quarantine.lower()
            or "http" in quarantined["remote"].quarantine
        )
        r = await cm.run("await tools.m.broken({});")
        assert _code(r) == "TOOL_SCHEMA_UNSUPPORTED"
        assert _code(await cm.run("await tools.m.remote({});")) == "TOOL_SCHEMA_UNSUPPORTED"
        caught = await cm.run("try { await tools.m.broken({}); } catch (e) { return e.code; }")
        assert caught.value == "TOOL_SCHEMA_UNSUPPORTED"
        ok = await cm.run("return (await tools.m.fine({})).structuredContent;")
        assert ok.value == "fine"
        assert provider.calls and all(c.name == "fine" for c in provider.calls)

        provider.come_back(
            {
                "broken": MemoryTool(
                    ToolSpec(
                        "broken", "b", {"type": "object", "properties": {"a": {"type": "string"}}}
                    ),
                    lambda a, c: "healed",
                ),
                "fine": good,
            }
        )
        await asyncio.sleep(0)
        assert cm.catalog.revision != before
        assert not cm.catalog.quarantined
        healed = await cm.run("return (await tools.m.broken({ a: 'x' })).structuredContent;")
        assert healed.ok, healed.diagnostic
        assert healed.value == "healed"
        gone = await cm.run("await tools.m.remote({});")
        assert _code(gone) == "TOOL_NOT_FOUND"


async def test_source_down_then_back() -> None:
    good = MemoryTool(ToolSpec("fine", "f", OBJ), lambda a, c: "fine")
    provider = InMemoryProvider("m", {"fine": good})
    other = local("app", {"echo": define_tool(description="e", input_schema=OBJ, execute=_echo)})
    async with CodeMode(sources=[provider, other], policy=allow_all_tool_calls()) as cm:
        provider.go_down("lost")
        r = await cm.run("await tools.m.fine({});")
        assert _code(r) == "SOURCE_UNAVAILABLE"
        assert (
            await cm.run("return (await tools.app.echo({ a: 1 })).structuredContent;")
        ).value == {"a": 1}
        provider.come_back()
        assert (await cm.run("return (await tools.m.fine({})).structuredContent;")).value == "fine"


# -- policy -----------------------------------------------------------------------------------------


def _tools_with_annotations(calls: list[str]) -> Any:
    def record(name: str) -> Any:
        def run(args: dict[str, Any]) -> Any:
            calls.append(name)
            return {"done": name}

        return run

    return local(
        "app",
        {
            "read": define_tool(
                description="read",
                input_schema=ID_SCHEMA,
                annotations={"readOnlyHint": True},
                execute=record("read"),
            ),
            "write": define_tool(
                description="write",
                input_schema=ID_SCHEMA,
                annotations={"readOnlyHint": False, "destructiveHint": True},
                execute=record("write"),
            ),
        },
    )


GARBAGE: list[Any] = [None, True, 1, "ALLOW", "yes", {"decision": "allow"}, ["allow"], object()]


@pytest.mark.parametrize("answer", GARBAGE, ids=[repr(g)[:20] for g in GARBAGE])
async def test_policy_garbage_fails_closed(answer: Any) -> None:
    calls: list[str] = []
    async with CodeMode(sources=[_tools_with_annotations(calls)], policy=lambda req: answer) as cm:
        r = await cm.run("try { await tools.app.read({ id: '1' }); } catch (e) { return e.code; }")
    assert r.value == "TOOL_DENIED"
    assert calls == []


async def test_policy_raising_or_hanging_fails_closed() -> None:
    calls: list[str] = []

    def raises(req: ToolCallRequest) -> str:
        raise RuntimeError("policy service down, token=abc123secret")

    async def hangs(req: ToolCallRequest) -> str:
        await asyncio.sleep(60)
        return "allow"

    async def async_garbage(req: ToolCallRequest) -> Any:
        return 42

    for policy in (raises, hangs, async_garbage):
        async with CodeMode(
            sources=[_tools_with_annotations(calls)],
            policy=policy,
            limits=Limits(tool_call_time_ms=200),
        ) as cm:
            r = await cm.run("await tools.app.read({ id: '1' });")
        assert _code(r) == "TOOL_DENIED", (policy, r.diagnostic)
        assert "abc123secret" not in json.dumps(r.to_json())
    assert calls == []


async def test_policy_sees_validated_request_after_validation_before_dispatch() -> None:
    calls: list[str] = []
    seen: list[ToolCallRequest] = []

    async def policy(req: ToolCallRequest) -> Any:
        seen.append(req)
        if req.tool == "write":
            return PolicyDecision("deny", reason="writes need approval")
        return "allow"

    async with CodeMode(sources=[_tools_with_annotations(calls)], policy=policy) as cm:
        invalid = await cm.run("await tools.app.read({ id: 7 });")
        assert _code(invalid) == "TOOL_INPUT_INVALID"
        assert seen == []
        ok = await cm.run("return (await tools.app.read({ id: 'a' })).structuredContent;")
        assert ok.value == {"done": "read"}
        denied = await cm.run(
            "try { await tools.app.write({ id: 'b' }); } catch (e) { return [e.code, e.message]; }"
        )
    assert denied.value[0] == "TOOL_DENIED"
    assert "writes need approval" in denied.value[1]
    assert calls == ["read"]
    assert [r.tool for r in seen] == ["read", "write"]
    req = seen[0]
    assert req.source == "app"
    assert req.arguments == {"id": "a"}
    assert "read" in req.address
    assert req.annotations.get("readOnlyHint") is True
    assert seen[1].annotations.get("destructiveHint") is True


async def test_policy_cannot_mutate_arguments() -> None:
    got: list[Any] = []

    def tool(args: dict[str, Any]) -> Any:
        got.append(dict(args))
        return 1

    def policy(req: ToolCallRequest) -> str:
        with contextlib.suppress(TypeError):
            req.arguments["id"] = "tampered"  # type: ignore[index]
        return "allow"

    async with CodeMode(
        sources=[
            local("app", {"t": define_tool(description="t", input_schema=ID_SCHEMA, execute=tool)})
        ],
        policy=policy,
    ) as cm:
        await cm.run("await tools.app.t({ id: 'orig' });")
    # The policy sees the validated arguments read-only: what was approved is what runs.
    assert got == [{"id": "orig"}]


async def test_deny_all_and_allow_all_helpers() -> None:
    calls: list[str] = []
    async with CodeMode(
        sources=[_tools_with_annotations(calls)], policy=deny_all_tool_calls()
    ) as cm:
        assert _code(await cm.run("await tools.app.read({ id: '1' });")) == "TOOL_DENIED"
    async with CodeMode(
        sources=[_tools_with_annotations(calls)], policy=allow_all_tool_calls()
    ) as cm:
        assert (await cm.run("await tools.app.write({ id: '1' }); return 1;")).value == 1
    assert calls == ["write"]


def test_policy_is_required() -> None:
    with pytest.raises(TypeError):
        CodeMode(sources=[])  # type: ignore[call-arg]


async def test_rules_policy_from_spec_first_match_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_module(
        tmp_path,
        "rehearsal_policy_tools",
        """
        from codemodekit import define_tool

        O = {"type": "object"}
        get_issue = define_tool(description="g", input_schema=O, annotations={"readOnlyHint": True},
                                execute=lambda a: "get_issue")
        get_secret = define_tool(description="s", input_schema=O, annotations={"readOnlyHint": True},
                                 execute=lambda a: "get_secret")
        list_repos = define_tool(description="l", input_schema=O, annotations={"readOnlyHint": True},
                                 execute=lambda a: "list_repos")
        list_danger = define_tool(description="d", input_schema=O, execute=lambda a: "list_danger")
        delete_repo = define_tool(description="x", input_schema=O, annotations={"readOnlyHint": False},
                                  execute=lambda a: "delete_repo")
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_spec(
        _write_spec(
            tmp_path,
            """
            version = 1
            name = "rules"
            [policy]
            default = "deny"
            rules = [
              { tools = "gh.get_secret", decision = "deny" },
              { tools = "gh.get_*", decision = "allow" },
              { tools = "gh.*", read_only = true, decision = "allow" },
              { tools = "gh.delete_*", decision = "allow" },
            ]
            [sources.gh]
            type = "python"
            module = "rehearsal_policy_tools"
            trust_annotations = true
            """,
        )
    )
    expected = {
        "get_issue": True,  # rule 2
        "get_secret": False,  # rule 1 wins over rule 2
        "list_repos": True,  # rule 3 (read-only)
        "list_danger": True,  # not read-only: rule 3 skipped... falls through to default deny
        "delete_repo": True,  # rule 4
    }
    expected["list_danger"] = False
    async with CodeMode.from_spec(spec) as cm:
        for name, allowed in expected.items():
            r = await cm.run(f"return (await tools.gh.{name}({{}})).structuredContent;")
            if allowed:
                assert r.ok and r.value == name, (name, r.diagnostic)
            else:
                assert _code(r) == "TOOL_DENIED", (name, r.diagnostic)
    # Without trust_annotations, readOnlyHint is only a hint: the read_only rule never matches.
    assert spec.path is not None
    spec.path.write_text(spec.path.read_text().replace("trust_annotations = true", ""))
    async with CodeMode.from_spec(load_spec(spec.path)) as cm:
        r = await cm.run("return (await tools.gh.list_repos({})).structuredContent;")
        assert _code(r) == "TOOL_DENIED", r.diagnostic


# -- Python tools -----------------------------------------------------------------------------------


class Order(BaseModel):
    id: str
    quantity: int = 1


async def test_define_tool_with_input_model_receives_instance() -> None:
    received: list[Any] = []

    def place(order: Order) -> Any:
        received.append(order)
        return {"id": order.id, "q": order.quantity}

    async with CodeMode(
        sources=[
            local("shop", {"place": define_tool(description="p", input_model=Order, execute=place)})
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        r = await cm.run("return (await tools.shop.place({ id: 'o1' })).structuredContent;")
        bad = await cm.run("await tools.shop.place({ quantity: 'many' });")
        schema = cm.catalog.tools[0].input_schema
    assert r.ok, r.diagnostic
    assert r.value == {"id": "o1", "q": 1}
    assert isinstance(received[0], Order)
    assert _code(bad) == "TOOL_INPUT_INVALID"
    assert "id" in schema["properties"]


async def test_async_tool_and_result_shape() -> None:
    async def fetch(args: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return {"v": args["v"]}

    async with CodeMode(
        sources=[
            local("app", {"f": define_tool(description="f", input_schema=OBJ, execute=fetch)})
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        r = await cm.run("const r = await tools.app.f({ v: [1, 2] });\nreturn r;")
    assert r.ok
    assert r.value["structuredContent"] == {"v": [1, 2]}
    assert r.value.get("content", []) == [] or isinstance(r.value["content"], list)


async def test_output_schema_is_enforced() -> None:
    out = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    async with CodeMode(
        sources=[
            local(
                "app",
                {
                    "good": define_tool(
                        description="g",
                        input_schema=OBJ,
                        output_schema=out,
                        execute=lambda a: {"n": 1},
                    ),
                    "bad": define_tool(
                        description="b",
                        input_schema=OBJ,
                        output_schema=out,
                        execute=lambda a: {"n": "one"},
                    ),
                },
            )
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        assert (await cm.run("return (await tools.app.good({})).structuredContent;")).value == {
            "n": 1
        }
        r = await cm.run("await tools.app.bad({});")
        assert cm.catalog.get("app", "good").output_schema is not None
    assert _code(r) == "TOOL_RESULT_INVALID"
    assert r.diagnostic is not None and "n" in r.diagnostic.message


async def test_sync_tool_sleeping_does_not_block_another_run() -> None:
    gate = threading.Event()
    entered = threading.Event()
    threads: list[str] = []

    def blocking(args: dict[str, Any]) -> Any:
        threads.append(threading.current_thread().name)
        entered.set()
        assert gate.wait(30), "the other run never proceeded"
        return "unblocked"

    async with CodeMode(
        sources=[
            local(
                "app",
                {
                    "block": define_tool(description="b", input_schema=OBJ, execute=blocking),
                    "echo": define_tool(description="e", input_schema=OBJ, execute=_echo),
                },
            )
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        slow = asyncio.create_task(cm.run("return (await tools.app.block({})).structuredContent;"))
        await asyncio.to_thread(entered.wait, 30)
        fast = await cm.run("return (await tools.app.echo({ a: 1 })).structuredContent;")
        assert fast.ok and fast.value == {"a": 1}
        assert not slow.done()
        gate.set()
        r = await asyncio.wait_for(slow, 30)
    assert r.value == "unblocked"
    assert threads and threads[0] != threading.main_thread().name


# -- secrets never leak -----------------------------------------------------------------------------

SECRET = "sk-live-REHEARSAL-4f9a8b7c"


async def test_secret_bearing_exceptions_do_not_leak(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="codemodekit")

    def tool_error(_: dict[str, Any]) -> Any:
        raise ToolError("payment declined", cause=RuntimeError(f"gateway said key={SECRET}"))

    def arbitrary(_: dict[str, Any]) -> Any:
        raise ValueError(f"could not connect to postgres://admin:{SECRET}@db/prod")

    async def async_arbitrary(_: dict[str, Any]) -> Any:
        raise KeyError(SECRET)

    async with CodeMode(
        sources=[
            local(
                "app",
                {
                    "te": define_tool(description="t", input_schema=OBJ, execute=tool_error),
                    "ar": define_tool(description="a", input_schema=OBJ, execute=arbitrary),
                    "aa": define_tool(description="a", input_schema=OBJ, execute=async_arbitrary),
                },
            )
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        te = await cm.run("await tools.app.te({});")
        ar = await cm.run("await tools.app.ar({});")
        aa = await cm.run("await tools.app.aa({});")
        caught = await cm.run(
            "try { await tools.app.ar({}); } catch (e) { console.log(String(e), e.stack, JSON.stringify(e));"
            " return Object.getOwnPropertyNames(e).map(k => String((e as any)[k])); }"
        )
    assert _code(te) == "TOOL_ERROR" and te.diagnostic is not None
    assert "payment declined" in te.diagnostic.message
    for r in (ar, aa):
        assert _code(r) == "TOOL_INTERNAL_ERROR"
        assert r.diagnostic is not None and r.diagnostic.correlation_id
    for r in (te, ar, aa, caught):
        assert SECRET not in json.dumps(r.to_json())
        assert SECRET not in repr(r)
    # The full cause goes to the host log, which is trusted; the correlation id connects them.
    assert ar.diagnostic is not None and ar.diagnostic.correlation_id
    assert any(ar.diagnostic.correlation_id in rec.getMessage() for rec in caplog.records)
    assert SECRET in caplog.text


async def test_tool_error_with_code() -> None:
    def refuse(_: dict[str, Any]) -> Any:
        raise ToolError("quota exceeded", code="RATE_LIMITED")

    async with CodeMode(
        sources=[
            local("app", {"r": define_tool(description="r", input_schema=OBJ, execute=refuse)})
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        r = await cm.run("try { await tools.app.r({}); } catch (e) { return [e.code, e.message]; }")
    # The SDK's stable code stays TOOL_ERROR; the tool's own code is secondary context.
    assert r.value[0] == "TOOL_ERROR"
    assert "quota exceeded" in r.value[1]


async def test_secret_spec_values_never_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REHEARSAL_TOKEN", SECRET)
    path = _write_spec(
        tmp_path,
        """
        version = 1
        name = "sec"
        [policy]
        default = "allow"
        [sources.remote]
        type = "mcp"
        command = "definitely-not-a-real-binary-rehearsal"
        env = { TOKEN = "${REHEARSAL_TOKEN}" }
        [sources.web]
        type = "mcp"
        url = "http://127.0.0.1:9/mcp"
        headers = { Authorization = "Bearer ${REHEARSAL_TOKEN}" }
        [sources.demo]
        type = "python"
        module = "codemodekit.examples.demo"
        """,
    )
    spec = load_spec(path)
    assert SECRET not in repr(spec)
    assert SECRET not in str(spec)
    async with CodeMode.from_spec(spec) as cm:
        blob = json.dumps([h.to_json() for h in cm.health]) + repr(cm.health) + repr(cm.spec)
        blob += json.dumps(cm.generate())
        r = await cm.run("await tools.remote.x({});")
        blob += json.dumps(r.to_json())
        r2 = await cm.run("await tools.web.x({});")
        blob += json.dumps(r2.to_json())
    assert SECRET not in blob


async def test_unset_variable_is_a_connect_time_error_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REHEARSAL_UNSET_VAR", raising=False)
    path = _write_spec(
        tmp_path,
        """
        version = 1
        name = "sec"
        [policy]
        default = "allow"
        [sources.remote]
        type = "mcp"
        command = "python"
        env = { API_TOKEN = "${REHEARSAL_UNSET_VAR}" }
        [sources.demo]
        type = "python"
        module = "codemodekit.examples.demo"
        """,
    )
    spec = load_spec(path)  # parse time: not resolved yet, so no error
    async with CodeMode.from_spec(spec) as cm:
        health = {h.source: h for h in cm.health}
        assert health["remote"].status != "ok"
        msg = health["remote"].message
        assert "REHEARSAL_UNSET_VAR" in msg
        assert "API_TOKEN" in msg
        assert health["demo"].status == "ok"
        r = await cm.run("await tools.remote.x({});")
        assert _code(r) == "SOURCE_UNAVAILABLE"


def test_spec_error_does_not_echo_secret_values(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(
        'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n[sources.s]\ntype = "mcp"\n'
        f'command = "x"\nenv = {{ TOKEN = "{SECRET}", BAD = 3 }}\n'
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)


# -- the Python API accepts what codemode.toml accepts, no more ---------------------------------------


@pytest.mark.parametrize("name", ["", "my.app", "has space", "tab\there"])
def test_local_rejects_source_names_the_spec_rejects(name: str) -> None:
    tool = define_tool(description="t", input_schema=OBJ, execute=_echo)
    with pytest.raises(ValueError, match="source name"):
        local(name, {"t": tool})


def test_local_accepts_names_the_spec_accepts() -> None:
    tool = define_tool(description="t", input_schema=OBJ, execute=_echo)
    for name in ("deployment-api", "app_2", "Ünïcode", "class"):
        assert local(name, {"t": tool}).name == name


def test_tool_names_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match="name"):
        define_tool(name="", description="t", input_schema=OBJ, execute=_echo)
    tool = define_tool(description="t", input_schema=OBJ, execute=_echo)
    with pytest.raises(ValueError, match="tool names"):
        local("app", {"": tool})


def test_policy_decision_rejects_unknown_decisions() -> None:
    assert PolicyDecision("deny", reason="r").reason == "r"
    with pytest.raises(ValueError, match="allow"):
        PolicyDecision("maybe")  # type: ignore[arg-type]


async def test_policy_constructing_a_bad_decision_fails_closed() -> None:
    calls: list[str] = []
    async with CodeMode(
        sources=[_tools_with_annotations(calls)],
        policy=lambda req: PolicyDecision("yes"),  # type: ignore[arg-type]
    ) as cm:
        r = await cm.run("await tools.app.read({ id: '1' });")
    assert _code(r) == "TOOL_DENIED"
    assert calls == []


async def test_unhashable_callable_policy_object_works() -> None:
    class Approver:
        __hash__ = None  # type: ignore[assignment]

        def __init__(self) -> None:
            self.seen: list[str] = []

        def __call__(self, req: ToolCallRequest) -> str:
            self.seen.append(req.tool)
            return "allow"

    approver = Approver()
    calls: list[str] = []
    async with CodeMode(sources=[_tools_with_annotations(calls)], policy=approver) as cm:
        r = await cm.run("return (await tools.app.write({ id: '1' })).structuredContent;")
    assert r.ok, r.diagnostic
    assert approver.seen == ["write"] and calls == ["write"]


async def test_hung_sync_tools_do_not_starve_a_sibling_source() -> None:
    # Invariant 4: a hanging source never takes down sibling sources. Threads of timed-out
    # sync tools cannot be killed; they must not use up the threads other sources need.
    gate = threading.Event()

    def hang(_: dict[str, Any]) -> Any:
        gate.wait(30)
        return 1

    stuck = local("stuck", {"hang": define_tool(description="h", input_schema=OBJ, execute=hang)})
    fine = local("fine", {"echo": define_tool(description="e", input_schema=OBJ, execute=_echo)})
    try:
        async with CodeMode(
            sources=[stuck, fine],
            policy=allow_all_tool_calls(),
            limits=Limits(tool_call_time_ms=300, max_tool_calls=64, max_concurrent_tool_calls=64),
        ) as cm:
            r = await cm.run(
                "const ps = [];\nfor (let i = 0; i < 64; i++) ps.push(tools.stuck.hang({}).catch(e => e.code));\n"
                "return [...new Set(await Promise.all(ps))];"
            )
            assert r.value == ["TOOL_TIMEOUT"]
            sibling = await cm.run("return (await tools.fine.echo({ a: 1 })).structuredContent;")
            assert sibling.ok, sibling.diagnostic
            assert sibling.value == {"a": 1}
            assert (
                await asyncio.to_thread(lambda: "default executor free") == "default executor free"
            )
    finally:
        gate.set()


class Signup(BaseModel):
    email: str

    @field_validator("email")
    @classmethod
    def _has_at(cls, value: str) -> str:
        if "@" not in value:
            raise ValueError("email needs an @")
        return value


async def test_input_model_validator_refusal_is_input_invalid() -> None:
    # The model is the tool's input contract; its validators' refusal is bad input, not a
    # host fault (TOOL_INTERNAL_ERROR would hide the reason from the model).
    async with CodeMode(
        sources=[
            local(
                "app",
                {
                    "signup": define_tool(
                        description="s", input_model=Signup, execute=lambda m: m.email
                    )
                },
            )
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        bad = await cm.run(
            "try { await tools.app.signup({ email: 'nobody' }); } catch (e) { return [e.code, e.message]; }"
        )
        good = await cm.run("return (await tools.app.signup({ email: 'a@b' })).structuredContent;")
    assert bad.value[0] == "TOOL_INPUT_INVALID"
    assert "email needs an @" in bad.value[1] and "email" in bad.value[1]
    assert good.value == "a@b"


def test_python_module_beside_the_spec_is_found_from_another_folder(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    _write_module(
        project,
        "rehearsal_beside_spec",
        """
        from codemodekit import define_tool
        ping = define_tool(description="p", input_schema={"type": "object"}, execute=lambda a: "pong")
        """,
    )
    _write_spec(
        project,
        """
        version = 1
        name = "m"
        [policy]
        default = "allow"
        [sources.app]
        type = "python"
        module = "rehearsal_beside_spec"
        """,
    )
    (tmp_path / "s.ts").write_text("return (await tools.app.ping({})).structuredContent;\n")
    r = subprocess.run(
        [sys.executable, "-m", "codemodekit", "run", "s.ts", "-c", "proj"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pong"
