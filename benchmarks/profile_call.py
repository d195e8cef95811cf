"""Where the server's CPU goes in one awaited tool call (issue 21: "where the remaining time
goes, with the profile that shows it").

python -m benchmarks.profile_call

Runs 200 sequential awaited calls of a coroutine no-op tool through ``CodeMode.run`` with
the default runtime (process mode) under ``cProfile``, and prints the server's own time per
call grouped by layer, from the profiler's per-function time (``tottime``). The profiler
slows every Python call down, so its total is above the real figure; each group is also
shown as a share of the host CPU per call measured without the profiler in the same
process. Time the event loop spends asleep waiting for the worker is left out.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import time
from typing import Any

from codemodekit import CodeMode, Limits, allow_all_tool_calls, define_tool, local

CALLS = 200
RUNS = 10
CODE = f"for (let i = 0; i < {CALLS}; i++) {{ await tools.b.anoop({{}}); }}\nreturn 1;"

GROUPS = (
    (
        "event loop, sockets and the kernel (asyncio, selectors, send, recv)",
        ("asyncio/", "selectors.py", "select.", "socket", "_contextvars", "_asyncio"),
    ),
    (
        "channel to the worker (sandbox/process.py, _protocol, _resume, _step)",
        ("sandbox/process.py", "sandbox/_protocol.py", "sandbox/_resume.py", "sandbox/_step.py"),
    ),
    ("run driver (sandbox/_drive.py, _stepwise)", ("sandbox/_drive.py", "sandbox/_stepwise.py")),
    (
        "bridge: plan, validation, policy, limits, result (bridge/, schema/, nesting)",
        ("bridge/", "schema/", "nesting.py", "catalog/"),
    ),
    ("the tool's provider and the tool (providers/)", ("providers/", "profile_call")),
    (
        "CodeMode.run and the sandbox adapter, per run (run.py, sandbox/pool.py)",
        ("run.py", "sandbox/pool.py", "run_"),
    ),
    ("JSON encoding and decoding", ("json/", "_json")),
)


async def _anoop(_args: dict[str, Any]) -> dict[str, Any]:
    return {}


def _group(filename: str, name: str) -> str:
    where = f"{filename}:{name}"
    for label, needles in GROUPS:
        if any(needle in where for needle in needles):
            return label
    return "other"


async def main() -> None:
    tool = define_tool(description="no-op", input_schema={"type": "object"}, execute=_anoop)
    limits = Limits(max_tool_calls=CALLS + 1)
    async with CodeMode(
        sources=[local("b", {"anoop": tool})], policy=allow_all_tool_calls(), limits=limits
    ) as cm:
        await asyncio.sleep(1.0)  # the warm workers
        for _ in range(3):
            await cm.run(CODE)
        trivial = time.process_time()
        for _ in range(RUNS):
            await cm.run("return 1;")
        trivial = (time.process_time() - trivial) / RUNS
        plain = time.process_time()
        for _ in range(RUNS):
            await cm.run(CODE)
        host_us = ((time.process_time() - plain) / RUNS - trivial) / CALLS * 1e6
        profile = cProfile.Profile(time.process_time)  # CPU time: sleeping in epoll is 0
        profile.enable()
        for _ in range(RUNS):
            await cm.run(CODE)
        profile.disable()
    stats: Any = pstats.Stats(profile).stats
    totals: dict[str, float] = {}
    for (filename, _line, name), (_cc, _nc, tottime, _ct, callers) in stats.items():
        label = _group(filename, name)
        if label == "other" and filename == "~" and callers:
            # A built-in (len, isinstance, dict.get...): its time goes to its callers' layers.
            spent = sum(entry[3] for entry in callers.values()) or 1.0
            for (c_file, _l, c_name), entry in callers.items():
                share = _group(c_file, c_name)
                totals[share] = totals.get(share, 0.0) + tottime * entry[3] / spent
            continue
        totals[label] = totals.get(label, 0.0) + tottime
    profiled_us = sum(totals.values()) / (RUNS * CALLS) * 1e6
    print(
        f"server CPU per awaited no-op call: {host_us:.1f} us measured; "
        f"{profiled_us:.1f} us under the profiler (its own cost inflates every Python call)"
    )
    for label, total in sorted(totals.items(), key=lambda item: -item[1]):
        per_call = total / (RUNS * CALLS) * 1e6
        share = per_call / profiled_us
        print(f"  {share * 100:5.1f} %  ~{share * host_us:5.1f} us  {label}")


if __name__ == "__main__":
    asyncio.run(main())
