"""Contexts with the prelude already compiled, built ahead of time off the caller's path.

Compiling the prelude is most of a trivial run's cost (QuickJS compiles ≈25 bytes of code
per µs). A ``WarmContexts`` keeps a few contexts that have run the prelude and nothing else,
refilled on a worker thread after each take. Every run still gets a context no code has
touched: a prepared context is used once, then disposed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import quickjs

from codemodekit.sandbox._workers import JsWorkers, default_workers

if TYPE_CHECKING:
    import asyncio  # not at run time: see _workers.py

PREPARE_BUDGET_S = 0.25
"""Time allowed to evaluate the prelude (the host's own code) in a new context."""
IDLE_DELAY_S = 0.002
"""Quiet time after a run before refilling: back-to-back runs never compete with a refill."""


MODULES = ("prelude_console", "prelude_calls", "prelude_failure", "prelude_random")
"""The prelude's lazily compiled modules."""


@cache
def prelude_source(name: str = "prelude") -> str:
    """``prelude.js`` (the core) or one of its lazily compiled modules."""
    return resources.files("codemodekit.sandbox").joinpath(f"{name}.js").read_text("utf-8")


def prepare_context(prelude: str) -> tuple[Any, Any]:
    """A new context and its port: the prelude evaluated and its modules' sources handed
    over, no limit applied yet."""
    ctx = quickjs.Context()
    ctx.set_time_limit(PREPARE_BUDGET_S)
    port = ctx.eval(prelude)
    if port("modules", *(prelude_source(name) for name in MODULES)) != "":
        raise RuntimeError("the sandbox prelude did not take its modules")
    return ctx, port


class WarmContexts:
    """Up to ``size`` prepared contexts; ``take`` never blocks and never builds."""

    def __init__(
        self,
        prelude: str,
        size: int,
        workers: JsWorkers | None = None,
        *,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self._prelude = prelude
        self._busy = busy
        self._size = size
        self._workers = workers
        self._ready: deque[tuple[Any, Any]] = deque()
        self._lock = threading.Lock()
        self._refilling = False

    def take(self) -> tuple[Any, Any] | None:
        """A prepared context, or ``None`` when none is ready (the caller builds its own)."""
        with self._lock:
            return self._ready.popleft() if self._ready else None

    def refill_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        """Top the pool up on a worker once no run has been active for a moment, so the
        compile happens between runs, never competing with one."""
        if self._size > 0:
            loop.call_later(IDLE_DELAY_S, self._refill_if_idle)

    def _refill_if_idle(self) -> None:
        with self._lock:
            if self._refilling or len(self._ready) >= self._size or self._busy():
                return
            self._refilling = True
        (self._workers or default_workers()).submit(self._refill)

    def _refill(self) -> None:
        try:
            while True:
                with self._lock:
                    if len(self._ready) >= self._size or self._busy():
                        return
                prepared = prepare_context(self._prelude)
                with self._lock:
                    if len(self._ready) < self._size:
                        self._ready.append(prepared)
        finally:
            with self._lock:
                self._refilling = False

    def clear(self) -> None:
        """Dispose every prepared context now and prepare no more."""
        with self._lock:
            self._size = 0
            self._ready.clear()
