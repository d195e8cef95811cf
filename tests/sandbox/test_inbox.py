"""A worker's inbox (``sandbox/_inbox.py``, ADR 0042): frames however the stream splits
them, and the poll that replaces a sleep while a run awaits a quick answer, which backs
off when answers are slow and stops when the run's polling budget is spent."""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator

import pytest

from codemodekit.sandbox import _inbox
from codemodekit.sandbox._inbox import MAX_BACKOFF, RECEIVE_BYTES, SPIN_S, Inbox
from codemodekit.sandbox._protocol import frame


@pytest.fixture
def ends() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, worker = socket.socketpair()
    try:
        yield server, worker
    finally:
        server.close()
        worker.close()


FRAMES = [
    (b"T", b"[1,1,1]"),
    (b"W", b""),
    (b"S", b"x" * (3 * RECEIVE_BYTES + 17)),  # larger than one receive
    (b"X", b""),
]


@pytest.mark.parametrize("piece", [1, 3, 4, 5, 4096, 1 << 20])
@pytest.mark.parametrize("spin", [False, True])
def test_frames_arrive_whole_however_the_stream_is_split(
    ends: tuple[socket.socket, socket.socket], piece: int, spin: bool
) -> None:
    server, worker = ends
    data = b"".join(frame(kind, payload) for kind, payload in FRAMES)

    def send() -> None:
        for at in range(0, len(data), piece):
            server.sendall(data[at : at + piece])

    sender = threading.Thread(target=send)
    sender.start()
    inbox = Inbox(worker)
    try:
        assert [inbox.read(spin=spin) for _ in FRAMES] == FRAMES
    finally:
        sender.join()


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00\x00", b"\x00\x00\x00\x05T12", (0).to_bytes(4, "big") + b"T"],
    ids=["nothing", "half a length", "half a frame", "empty frame"],
)
@pytest.mark.parametrize("spin", [False, True])
def test_a_closed_or_broken_stream_reads_as_the_end(
    ends: tuple[socket.socket, socket.socket], data: bytes, spin: bool
) -> None:
    server, worker = ends
    server.sendall(data)
    server.close()
    assert Inbox(worker).read(spin=spin) is None


def _wait_for_nothing(inbox: Inbox) -> None:
    """What a wait for a settle's answer does before it blocks, when none comes."""
    inbox._poll(SPIN_S, backs_off=True)


def test_a_poll_finds_an_answer_that_is_there(ends: tuple[socket.socket, socket.socket]) -> None:
    server, worker = ends
    inbox = Inbox(worker)
    for n in range(5):
        server.sendall(frame(b"T", str(n).encode()))
        assert inbox.read(spin=True) == (b"T", str(n).encode())
    assert (inbox.spins, inbox.hits) == (5, 5)


def test_a_poll_that_misses_backs_off_and_a_hit_resets_it(
    ends: tuple[socket.socket, socket.socket],
) -> None:
    server, worker = ends
    inbox = Inbox(worker)
    polled = []
    for _ in range(2 * MAX_BACKOFF + 10):
        before = inbox.spins
        _wait_for_nothing(inbox)  # a miss, or a wait that does not poll
        polled.append(inbox.spins - before)
    assert inbox.hits == 0
    # Polls at waits 0, 2, 5, 10, 19, 36, 69, 134 (gaps 1, 2, 4, ... up to MAX_BACKOFF).
    at = [i for i, p in enumerate(polled) if p]
    gaps = [b - a - 1 for a, b in itertools.pairwise(at)]
    assert gaps == [min(2**k, MAX_BACKOFF) for k in range(len(gaps))]
    assert gaps[-1] == MAX_BACKOFF
    # An answer found ends the back-off: the next waits poll again.
    while inbox._skip:
        _wait_for_nothing(inbox)
    server.sendall(frame(b"T", b"1"))
    assert inbox.read(spin=True) == (b"T", b"1")
    hits = inbox.hits
    for _ in range(3):
        server.sendall(frame(b"T", b"1"))
        assert inbox.read(spin=True) == (b"T", b"1")
    assert inbox.hits == hits + 3


def test_a_run_polls_no_longer_than_its_budget(
    ends: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    _server, worker = ends
    monkeypatch.setattr(_inbox, "MAX_BACKOFF", 0)  # every wait polls while budget is left
    monkeypatch.setattr(_inbox, "SPIN_BUDGET_S", 0.002)
    inbox = Inbox(worker)
    for _ in range(10_000):
        _wait_for_nothing(inbox)
    # Each miss polls SPIN_S of wall time (CPU time at most that): the budget runs out
    # after a few dozen, whatever the machine's speed; none polls after.
    assert 0 < inbox.spins < 10_000
    assert inbox._spin_left_s <= 0.0
    spins = inbox.spins
    _wait_for_nothing(inbox)
    assert inbox.spins == spins


def test_an_expected_start_is_polled_for_apart_from_the_back_off(
    ends: tuple[socket.socket, socket.socket],
) -> None:
    """``N`` (ADR 0043): an idle worker polls for the start request it was told is coming,
    whether or not waits for answers are backing off, and leaves their back-off as it was;
    a start that does not come within ``EXPECT_S`` costs one poll of the shared budget."""
    server, worker = ends
    inbox = Inbox(worker)
    _wait_for_nothing(inbox)
    skip = inbox._skip
    assert skip > 0  # the next wait for an answer would block
    server.sendall(frame(b"S", b"{}"))
    assert inbox.read(expect=True) == (b"S", b"{}")
    assert (inbox.spins, inbox.hits, inbox._skip) == (2, 1, skip)
    budget = inbox._spin_left_s
    inbox._poll(_inbox.EXPECT_S, backs_off=False)  # no start came
    assert (inbox.spins, inbox.hits, inbox._skip) == (3, 1, skip)
    assert inbox._spin_left_s < budget


@pytest.mark.parametrize("waited_s", [0.0001, 0.001], ids=["answered soon", "answered late"])
def test_a_blocking_wait_answered_soon_ends_the_back_off(
    ends: tuple[socket.socket, socket.socket],
    monkeypatch: pytest.MonkeyPatch,
    waited_s: float,
) -> None:
    """A wait that blocked because polls are backing off, and whose answer came within
    ``NEAR_S``, says a poll would have found it: the next wait polls again. One answered
    later leaves the back-off as it was (a slow tool keeps costing one poll now and then)."""
    server, worker = ends
    inbox = Inbox(worker)
    _wait_for_nothing(inbox)
    _wait_for_nothing(inbox)  # skipped: the back-off of one wait is used up
    _wait_for_nothing(inbox)  # a second miss: the next two waits block
    backoff, skip = inbox._backoff, inbox._skip
    assert (backoff, skip) == (2, 2)
    ticks = iter([100.0, 100.0 + waited_s])  # when the wait blocked, when it was answered
    monkeypatch.setattr(_inbox, "_clock", lambda: next(ticks))
    server.sendall(frame(b"T", b"1"))
    assert inbox.read(spin=True) == (b"T", b"1")
    assert inbox.spins == 2  # that wait did not poll
    if waited_s <= _inbox.NEAR_S:
        assert (inbox._backoff, inbox._skip) == (0, 0)
    else:
        assert (inbox._backoff, inbox._skip) == (backoff, skip - 1)


def test_a_poll_gives_the_cpu_away_between_reads(
    ends: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's answer may have to come from the very CPU a worker polls on (the
    scheduler put the server there, or a sync tool's thread is queued there): between two
    reads a poll yields the CPU (``sched_yield``, on the worker's allow-list), so a process
    waiting for that CPU runs within the poll rather than after it. Before, such a poll
    missed every time. What it buys is measured in ``bench_engine`` (ADR 0045)."""
    yields = []
    monkeypatch.setattr(_inbox.os, "sched_yield", lambda: yields.append(1))
    _wait_for_nothing(Inbox(ends[1]))  # a miss: it polled for SPIN_S
    assert len(yields) > 1
