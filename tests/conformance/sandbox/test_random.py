"""``Math.random`` is seeded per run: no run sees another run's sequence (ADR 0035).

Every process-mode run is a fork of one zygote whose QuickJS context was prepared before any
run, so the engine's own generator state was the same in every run; an inline run takes a
context prepared ahead of time as well. The statistical checks use bounds many standard
deviations wide: a working generator cannot fail them, a broken one (constant, stuck,
32-bit, skewed) fails them.
"""

from __future__ import annotations

from typing import Any

import pytest

from codemodekit import CodeMode, RuntimeOptions, allow_all_tool_calls, local
from codemodekit.sandbox.base import CodeSandbox
from tests.conformance.sandbox.harness import run

RUNS = 8


@pytest.mark.parametrize("mode", ["process", "inline"])
async def test_every_run_draws_its_own_random_sequence(mode: str) -> None:
    cm = CodeMode(
        sources=[local("b", {})],
        policy=allow_all_tool_calls(),
        runtime=RuntimeOptions(mode=mode),  # type: ignore[arg-type]
    )
    async with cm:
        results = [await cm.run("return [Math.random(), Math.random()];") for _ in range(RUNS)]
    values = [v for result in results for v in result.value]
    assert all(0 <= v < 1 for v in values), values
    assert len(set(values)) == 2 * RUNS, values


async def test_random_draws_look_uniform(sandbox: CodeSandbox) -> None:
    code = (
        "const n = 10000; const bins = new Array(10).fill(0); let sum = 0;\n"
        "let min = 1, max = 0, fine = false; const seen = new Set<number>();\n"
        "for (let i = 0; i < n; i++) {\n"
        "  const v = Math.random();\n"
        "  sum += v; bins[Math.floor(v * 10)]++; seen.add(v);\n"
        "  min = Math.min(min, v); max = Math.max(max, v);\n"
        "  if ((v * 4294967296) % 1 !== 0) fine = true;\n"
        "}\n"
        "return { mean: sum / n, bins, min, max, distinct: seen.size, fine };"
    )
    outcome = await run(sandbox, code)
    assert outcome.ok, outcome.diagnostic
    stats: dict[str, Any] = outcome.value
    # The mean of 10,000 uniform draws has a standard deviation of 0.0029: ±0.05 is 17 of
    # them; each bin expects 1,000 with a standard deviation of 30: 700..1,300 is 10.
    assert 0.45 < stats["mean"] < 0.55, stats
    assert all(700 < count < 1300 for count in stats["bins"]), stats
    assert stats["min"] >= 0 and stats["max"] < 1, stats
    assert stats["distinct"] >= 9990, stats  # 53-bit values: a repeat is a 1-in-10^8 event
    assert stats["fine"], stats  # more than 32 bits of resolution


async def test_math_random_looks_like_the_builtin(sandbox: CodeSandbox) -> None:
    code = (
        "const d = Object.getOwnPropertyDescriptor(Math, 'random')!;\n"
        "const name = Object.getOwnPropertyDescriptor(Math.random, 'name')!;\n"
        "const length = Object.getOwnPropertyDescriptor(Math.random, 'length')!;\n"
        "let constructed = 'no error';\n"
        "try { new (Math.random as any)(); } catch (e) { constructed = (e as Error).name; }\n"
        "return {\n"
        "  property: [typeof d.value, d.writable, d.enumerable, d.configurable],\n"
        "  name: [name.value, name.writable, name.enumerable, name.configurable],\n"
        "  length: [length.value, length.writable, length.enumerable, length.configurable],\n"
        "  keys: Object.getOwnPropertyNames(Math.random).sort(),\n"
        "  proto: Object.getPrototypeOf(Math.random) === Object.getPrototypeOf(() => 0),\n"
        "  text: String(Math.random),\n"
        "  constructed,\n"
        "  unbound: [typeof Math.random.call(null), typeof (0, Math.random)()],\n"
        "};"
    )
    outcome = await run(sandbox, code)
    assert outcome.ok, outcome.diagnostic
    assert outcome.value == {
        "property": ["function", True, False, True],
        "name": ["random", False, False, True],
        "length": [0, False, False, True],
        "keys": ["length", "name"],
        "proto": True,
        "text": "function random() {\n    [native code]\n}",
        "constructed": "TypeError",
        "unbound": ["number", "number"],
    }


async def test_a_run_may_replace_math_random_for_itself_only(sandbox: CodeSandbox) -> None:
    replaced = await run(sandbox, "Math.random = () => 0.25; return Math.random();")
    assert replaced.value == 0.25
    after = await run(sandbox, "return Math.random();")
    assert after.ok and after.value != 0.25


POLLUTE = [
    "Math.imul = () => 0;",
    "Object.defineProperty(Array.prototype, '0', { get() { return 0 }, set() {} });",
    "Object.defineProperty(Object.prototype, 'get', { value: () => 0 });",
    "Object.defineProperty(Object.prototype, 'value', { get() { return () => 0 } });",
    "Object.freeze = (o: any) => o; Object.defineProperty = ((o: any) => o) as any;",
    "const fp: any = Object.getPrototypeOf(() => 0); fp.bind = () => () => 0; fp.call = () => 0;",
    "Reflect.apply = () => 0;",
]


@pytest.mark.parametrize("pollution", POLLUTE)
async def test_math_random_survives_polluted_intrinsics(
    sandbox: CodeSandbox, pollution: str
) -> None:
    """The generator is built at the run's first call, after user code ran: it must use
    only what the prelude captured before."""
    code = (
        f"{pollution}\n"
        "const seen = new Set<number>();\n"
        "for (let i = 0; i < 1000; i++) { const v = Math.random(); if (v >= 0 && v < 1) seen.add(v); }\n"
        "return seen.size;"
    )
    outcome = await run(sandbox, code)
    assert outcome.ok, outcome.diagnostic
    assert outcome.value >= 990
