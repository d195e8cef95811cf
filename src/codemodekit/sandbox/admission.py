"""Fair admission of runs between callers (ADR 0030).

The pool has ``slots`` runs in flight at most and a memory budget they share; beyond that
runs wait. A plain FIFO lets one caller that sends hundreds of slow runs take every slot
and the whole queue, so everybody else's trivial run waits out the queue timeout. Here:

- a caller has at most ``per_caller_runs`` runs in flight (by default three quarters of
  the slots), so one flood always leaves slots for the others;
- a caller has at most ``per_caller_queued`` runs waiting; when the whole queue is full, a
  newcomer with fewer runs waiting takes the place of the newest run of the caller with
  the most (that run is refused ``SERVER_BUSY``);
- a freed slot goes to the waiting caller with the fewest runs in flight (earliest
  arrival among equals); if that run does not fit the memory budget, nothing jumps ahead
  of it (a big run is never starved by small ones).

A caller is a string the host names (``CodeMode.run(caller=...)``; ``serve`` always passes
one: the authenticated client, else the MCP session, else the peer). Runs without a caller
(a library that names none) have no share of their own: they may use the whole pool, and
are ordered with the others as one caller.

Thread-safe and bound to no event loop: a waiter is woken on its own loop.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
from dataclasses import dataclass, field


class AdmissionRefused(Exception):
    """The run was not admitted: its caller's share or the queue is full, or it waited
    past the queue timeout. The message is safe to show."""


@dataclass(slots=True)
class _Waiter:
    caller: str
    need: int
    seq: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    admitted: bool = False
    refused: str | None = None


@dataclass(slots=True)
class _Caller:
    anonymous: bool
    in_flight: int = 0
    waiting: collections.deque[_Waiter] = field(default_factory=collections.deque)


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    slots: int
    memory_budget: int
    max_queued: int
    per_caller_runs: int
    per_caller_queued: int
    queue_timeout_s: float


class FairAdmission:
    """Runs in flight and waiting, per caller (see the module doc)."""

    def __init__(self, policy: AdmissionPolicy) -> None:
        self.policy = policy
        self._lock = threading.Lock()
        self._callers: dict[str, _Caller] = {}
        self._in_flight = 0
        self._reserved = 0
        self._queued = 0
        self._rejected = 0
        self._seq = itertools.count()

    # -- views -------------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def rejected(self) -> int:
        return self._rejected

    # -- admission ---------------------------------------------------------------------------
    async def admit(self, caller: str | None, need: int) -> None:
        """Wait until the run is admitted; ``AdmissionRefused`` when it is not."""
        key = caller or ""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._callers.get(key)
            if state is None:
                state = self._callers[key] = _Caller(anonymous=not key)
            waiter = _Waiter(key, need, next(self._seq), loop, loop.create_future())
            refusal = self._enqueue_locked(state, waiter)
            if refusal is not None:
                self._rejected += 1
                self._forget_locked(key)
                raise AdmissionRefused(refusal)
            self._dispatch_locked(waiter)
            if waiter.admitted:
                return
            if self._queued > self.policy.max_queued and not self._evict_for_locked(state):
                # It might have run now, but a run ahead of it waits for memory: it waits
                # too, and the queue's bound holds for it like any other.
                self._unqueue_locked(waiter)
                self._rejected += 1
                raise AdmissionRefused(self._queue_full())
        try:
            async with asyncio.timeout(self.policy.queue_timeout_s):
                await waiter.future
        except BaseException as exc:
            with self._lock:
                if waiter.admitted:
                    self._release_locked(key, need)
                elif waiter.refused is None:
                    self._unqueue_locked(waiter)
                    if isinstance(exc, TimeoutError):
                        self._rejected += 1
            if isinstance(exc, TimeoutError):
                raise AdmissionRefused(
                    f"the server is busy: the run waited {round(self.policy.queue_timeout_s * 1000)}"
                    " ms for a sandbox worker (queue_timeout_ms); retry later"
                ) from None
            raise
        if waiter.refused is not None:
            raise AdmissionRefused(waiter.refused)

    def release(self, caller: str | None, need: int) -> None:
        """A run admitted for ``caller`` ended: its slot goes to the next fair waiter."""
        with self._lock:
            self._release_locked(caller or "", need)

    # -- inside the lock -----------------------------------------------------------------------
    def _enqueue_locked(self, state: _Caller, waiter: _Waiter) -> str | None:
        policy = self.policy
        if not state.waiting and self._may_run_now(state, waiter.need):
            state.waiting.append(waiter)
            self._queued += 1
            return None
        if len(state.waiting) >= self._queue_share(state):
            return (
                f"the server is busy: this client already has {state.in_flight} run(s) in "
                f"flight and {len(state.waiting)} waiting (its share); retry later"
            )
        if self._queued >= policy.max_queued and not self._evict_for_locked(state):
            return self._queue_full()
        state.waiting.append(waiter)
        self._queued += 1
        return None

    def _queue_full(self) -> str:
        return (
            f"the server is busy: {self._in_flight} runs are in flight and "
            f"{self._queued} are queued (max_queued_runs); retry later"
        )

    def _run_share(self, state: _Caller) -> int:
        return self.policy.slots if state.anonymous else self.policy.per_caller_runs

    def _queue_share(self, state: _Caller) -> int:
        return self.policy.max_queued if state.anonymous else self.policy.per_caller_queued

    def _may_run_now(self, state: _Caller, need: int) -> bool:
        return state.in_flight < self._run_share(state) and self._fits(need)

    def _fits(self, need: int) -> bool:
        if self._in_flight >= self.policy.slots:
            return False
        # A run bigger than the whole budget still runs, alone.
        return self._in_flight == 0 or self._reserved + need <= self.policy.memory_budget

    def _evict_for_locked(self, newcomer: _Caller) -> bool:
        """Make room in a full queue by refusing the newest run of the caller with the most
        waiting, if that caller has clearly more than the newcomer."""
        heaviest = max(self._callers.values(), key=lambda c: len(c.waiting))
        if len(heaviest.waiting) <= len(newcomer.waiting) + 1:
            return False
        victim = heaviest.waiting.pop()
        self._queued -= 1
        self._rejected += 1
        victim.refused = (
            "the server is busy: this client has the most runs queued and another client's "
            "run took this one's place; retry later"
        )
        _wake_on(victim.loop, victim.future)
        return True

    def _dispatch_locked(self, arriving: _Waiter | None = None) -> None:
        """Admit waiters, fairest first, while they fit; each is woken on its loop, except
        ``arriving``, whose ``admit`` is still running and sees it admitted."""
        while True:
            best: _Caller | None = None
            for state in self._callers.values():
                if not state.waiting or state.in_flight >= self._run_share(state):
                    continue
                if best is None or (state.in_flight, state.waiting[0].seq) < (
                    best.in_flight,
                    best.waiting[0].seq,
                ):
                    best = state
            if best is None or not self._fits(best.waiting[0].need):
                return
            waiter = best.waiting.popleft()
            self._queued -= 1
            # Woken before it is counted, under the lock its ``admit`` takes to look.
            if waiter is not arriving and not _wake_on(waiter.loop, waiter.future):
                # Its loop was closed while it waited: nobody awaits it, and a slot given
                # to it would never come back.
                self._forget_locked(waiter.caller)
                continue
            best.in_flight += 1
            self._in_flight += 1
            self._reserved += waiter.need
            waiter.admitted = True

    def _release_locked(self, key: str, need: int) -> None:
        state = self._callers.get(key)
        if state is not None:
            state.in_flight -= 1
        self._in_flight -= 1
        self._reserved -= need
        self._forget_locked(key)
        self._dispatch_locked()

    def _unqueue_locked(self, waiter: _Waiter) -> None:
        state = self._callers.get(waiter.caller)
        if state is not None and waiter in state.waiting:
            state.waiting.remove(waiter)
            self._queued -= 1
        self._forget_locked(waiter.caller)
        self._dispatch_locked()

    def _forget_locked(self, key: str) -> None:
        state = self._callers.get(key)
        if state is not None and state.in_flight <= 0 and not state.waiting:
            del self._callers[key]


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _wake_on(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> bool:
    """Wake ``future`` on its loop; ``False`` when that loop is closed."""
    try:
        loop.call_soon_threadsafe(_wake, future)
    except RuntimeError:
        return False
    return True


__all__ = ["AdmissionPolicy", "AdmissionRefused", "FairAdmission"]
