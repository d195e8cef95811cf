"""The compile cache of process mode (ADR 0028): a source compiled before runs its cached
program, with the same values, errors and locations, and under the same limits."""

from __future__ import annotations

from codemodekit import CodeMode, ErrorCode, Limits, ProcessSandbox, allow_all_tool_calls, local

FAILING = "const a: number = 1;\nconst b: number = 2;\nthrow new Error('line three ' + (a + b));"


def _code_mode(box: ProcessSandbox, **limits: int) -> CodeMode:
    return CodeMode(
        sources=[local("app", {})],
        policy=allow_all_tool_calls(),
        sandbox=box,
        limits=Limits(**limits) if limits else None,
    )


async def test_a_source_run_again_runs_its_cached_program_with_the_same_result() -> None:
    box = ProcessSandbox(shared=False)
    try:
        async with _code_mode(box) as cm:
            first = await cm.run("const x: number = 20;\nreturn x + 22;")
            again = await cm.run("const x: number = 20;\nreturn x + 22;")
            assert first.value == again.value == 42
            assert first.compile_ms > 0 and again.compile_ms == 0  # compiled once
            failed = [await cm.run(FAILING) for _ in range(2)]
        assert failed[1].compile_ms == 0
        one, two = (r.diagnostic for r in failed)
        assert one is not None and two is not None
        assert one.to_json() == two.to_json()
        assert one.location is not None and one.location.line == 3
    finally:
        box.close()


async def test_a_cached_source_still_meets_a_smaller_source_limit() -> None:
    box = ProcessSandbox(shared=False)
    code = "return '" + "x" * 200 + "';"
    try:
        async with _code_mode(box) as cm:
            assert (await cm.run(code)).ok
            assert (await cm.run(code)).compile_ms == 0
        async with _code_mode(box, source_bytes=100) as small:
            refused = await small.run(code)
        assert refused.diagnostic is not None
        assert refused.diagnostic.code == ErrorCode.SOURCE_TOO_LARGE
    finally:
        box.close()
