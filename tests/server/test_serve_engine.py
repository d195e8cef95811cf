"""`codemode serve` over HTTP under concurrent load: hostile runs are stopped at their limits
while innocent runs succeed, and the server keeps serving after its workers were killed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.server.test_serve import TOKEN, _authorized, _env, _start_http

CONFIG = """
version = 1
name = "engine-under-load"

[limits]
compute_time_ms = 400

[runtime]
max_runs = 12

[policy]
default = "allow"

[sources.app]
type = "python"
module = "enginetools"
"""

TOOLS = """
from codemodekit import define_tool

echo = define_tool(description="Echo.", input_schema={"type": "object"}, execute=lambda a: a)
"""

HOSTILE = [
    "const rev = Array.prototype.reverse; const o = {length: 2**31 - 1}; for (;;) rev.call(o);",
    "while (true) {}",
    "for (;;) { try { while (true) {} } catch (e) {} }",
    "const x: any = 1;\nreturn x" + "!" * 20_000 + ";",
]


async def test_hostile_runs_end_at_their_limits_while_innocent_runs_succeed(tmp_path: Path) -> None:
    (tmp_path / "enginetools.py").write_text(TOOLS)
    config = tmp_path / "codemode.toml"
    config.write_text(CONFIG)
    served = _start_http(config, "--auth-token-env", "CM_TEST_TOKEN", env=_env(CM_TEST_TOKEN=TOKEN))
    try:
        async with _authorized(served.url) as client:

            async def run(code: str) -> dict[str, object]:
                result = await client.call_tool("run_typescript", {"code": code})
                assert result.structured_content is not None
                return result.structured_content

            innocent = (
                "const r = await tools.app.echo({ n: 7 });\nreturn r.structuredContent.n * 6;"
            )
            async with asyncio.timeout(300):  # a hang guard only
                outcomes = await asyncio.gather(
                    *(run(code) for code in HOSTILE * 2), *(run(innocent) for _ in range(12))
                )
                after = await run("return 'still serving';")
        hostile, kind = outcomes[: len(HOSTILE) * 2], outcomes[len(HOSTILE) * 2 :]
        for outcome in kind:
            assert outcome["ok"] is True and outcome["value"] == 42, outcome
        for outcome in hostile:
            diagnostic = outcome["diagnostic"]
            assert isinstance(diagnostic, dict)
            # The non-null chain is past the nesting bound: refused while compiling.
            assert diagnostic["code"] in ("COMPUTE_LIMIT", "MEMORY_LIMIT", "COMPILE_ERROR")
        assert after["ok"] is True and after["value"] == "still serving"
    finally:
        code, _ = served.stop()
        assert code == 0
