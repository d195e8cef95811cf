"""The stalled-large-reply check shared by the stdio and HTTP hostile-server tests."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from codemodekit import CodeMode, load_spec


async def assert_a_stalled_large_reply_degrades(spec: Path, marker: Path) -> None:
    """Source ``up``'s ``stall`` tool sends part of a large reply and waits for ``marker``:
    while it waits the source is degraded; the reply then fails its call, and the source
    is ok again."""
    async with CodeMode.from_spec(load_spec(spec)) as cm:
        call = asyncio.ensure_future(
            cm.run(f"return await tools.up.stall({{marker: {json.dumps(str(marker))}}});")
        )
        deadline = time.monotonic() + 60  # hang guard only
        while True:
            up = {h.source: h for h in cm.health}["up"]
            if up.status == "degraded":
                break
            assert time.monotonic() < deadline and not call.done(), up
            await asyncio.sleep(0.02)
        assert "large reply" in up.message
        marker.write_text("go")
        result = await call
        assert result.diagnostic is not None
        assert result.diagnostic.code == "TOOL_RESULT_TOO_LARGE"
        assert {h.source: h for h in cm.health}["up"].status == "ok"
