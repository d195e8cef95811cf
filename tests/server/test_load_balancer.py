"""Three `codemode serve --stateless` replicas behind a real HAProxy; one is killed mid-load.

Shows: the other replicas keep answering; the in-flight calls of the killed replica fail
with an error the client sees (none is lost, none hangs, none is replayed); HAProxy's
`/readyz` health checks take the dead replica out.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from tests.conftest import missing
from tests.server.cluster import Cluster, haproxy
from tests.server.test_serve import CONFIG, _authorized

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _haproxy_is_required() -> None:
    if haproxy() is None:
        missing(
            "haproxy",
            "scripts/test.sh installs it with apt-get when run as root; "
            "elsewhere: apt-get install haproxy",
        )


TOOLS = """
import asyncio
import os
import uuid
from pathlib import Path

from codemodekit import define_tool

HERE = Path(__file__).parent
REPLICA = os.environ.get("CM_REPLICA", "?")
__all__ = ["whoami", "hold"]


whoami = define_tool(description="Which replica answers.",
                     input_schema={"type": "object", "properties": {}},
                     execute=lambda args: {"replica": REPLICA})


async def _hold(args):
    (HERE / f"held-{REPLICA}-{uuid.uuid4().hex}").write_text(REPLICA)
    while not (HERE / "release").exists():
        await asyncio.sleep(0.02)
    return {"replica": REPLICA}


hold = define_tool(description="Hold until released.",
                   input_schema={"type": "object", "properties": {}}, execute=_hold)
"""

HOLD = "const r = await tools.app.hold({});\nreturn r.structuredContent.replica;"
WHOAMI = "const r = await tools.app.whoami({});\nreturn r.structuredContent.replica;"
CALLS = 12


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    (tmp_path / "servetools.py").write_text(TOOLS)
    config = tmp_path / "codemode.toml"
    config.write_text(CONFIG)
    running = Cluster(config, 3)
    try:
        yield running.start()
    finally:
        running.stop()


def _held(directory: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for marker in directory.glob("held-*"):
        replica = marker.name.split("-")[1]
        counts[replica] = counts.get(replica, 0) + 1
    return counts


async def _call(url: str, code: str) -> types.CallToolResult:
    async def progress(_p: float, _t: float | None, _m: str | None) -> None:
        return None

    async with _authorized(url) as client:
        return await client.call_tool("run_typescript", {"code": code}, progress_callback=progress)


def _value(result: Any) -> Any:
    assert isinstance(result, types.CallToolResult), repr(result)
    assert not result.is_error and result.structured_content is not None, result
    return result.structured_content["value"]


async def test_killing_a_replica_mid_load(cluster: Cluster) -> None:
    directory = cluster.config.parent
    loop = asyncio.get_running_loop()
    # Warm-up: stateless requests spread over every replica (no session affinity).
    warm = await asyncio.gather(*(_call(cluster.url, WHOAMI) for _ in range(6)))
    assert {_value(r) for r in warm} == {"r1", "r2", "r3"}

    calls = [asyncio.ensure_future(_call(cluster.url, HOLD)) for _ in range(CALLS)]
    deadline = loop.time() + 120
    while sum(_held(directory).values()) < CALLS:
        assert loop.time() < deadline, f"calls never all started: {_held(directory)}"
        assert not any(c.done() for c in calls), [c.result() for c in calls if c.done()]
        await asyncio.sleep(0.05)
    held = _held(directory)
    assert set(held) == {"r1", "r2", "r3"}, held

    victim = cluster.replicas["r2"].process
    os.kill(victim.pid, signal.SIGKILL)
    await asyncio.to_thread(victim.wait, 30)

    # The survivors keep answering new calls while r2's death is being noticed.
    during = await asyncio.gather(
        *(_call(cluster.url, WHOAMI) for _ in range(9)), return_exceptions=True
    )
    assert {_value(r) for r in during} <= {"r1", "r3"}

    (directory / "release").write_text("go")
    outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 120)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    answered = [_value(o) for o in outcomes if not isinstance(o, BaseException)]
    # Exactly the calls that were on r2 failed, each with an error the client saw;
    # every other call was answered by the replica that held it. Nothing was replayed.
    assert len(failed) == held["r2"], (failed, answered)
    assert sorted(answered) == sorted(["r1"] * held["r1"] + ["r3"] * held["r3"])
    for error in failed:
        assert _describes_a_lost_connection(error), repr(error)

    states = await asyncio.to_thread(
        cluster.wait_for, lambda s: s["r2"].startswith("DOWN"), "r2 DOWN"
    )
    assert states["r1"] == "UP" and states["r3"] == "UP"
    after = await asyncio.gather(*(_call(cluster.url, WHOAMI) for _ in range(6)))
    assert {_value(r) for r in after} == {"r1", "r3"}


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _describes_a_lost_connection(error: BaseException) -> bool:
    # The response stream was cut (the SDK says so) or HAProxy answered 502 before any byte.
    texts = [str(leaf) for leaf in _leaves(error)]
    return any("stream ended without a response" in t or "502" in t for t in texts)
