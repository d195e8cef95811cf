"""A run announced to its worker (``N`` as it starts, ``R`` at a quiet moment, each with
the run's settings: ADR 0046) finds its engine made: the prelude told its settings, the
heap and stack bounded. The run is the same as an unannounced one, and a run whose settings
differ from the announced ones (another ``CodeMode`` sharing the pool took the worker) runs
under its own.

Each case forks a child of this process that serves one socket with the worker's own code
(what a worker does after its lockdown), and reports when it made each engine.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.limits import Limits
from codemodekit.sandbox import _engine, _lockdown, _worker
from codemodekit.sandbox._protocol import frame

LOGGING = "for (let i = 0; i < 5; i++) console.log('line', i);\nreturn Math.random() < 2;"
NO_LAYERS = _lockdown.ZygoteLayers(
    namespaces=None, landlock=0, program=b"", offsets=(), seccomp_error="", vm_bytes=0
)


@pytest.fixture(scope="module")
def zygote() -> Iterator[tuple[CodeCompiler, tuple[object, object]]]:
    compiler = CodeCompiler()
    yield compiler, _worker._warm_up(compiler)


def settings(limits: Limits, *, stream: bool = False) -> bytes:
    """An announcement's payload, as ``ProcessSandbox.expect_run`` makes it."""
    return json.dumps({"limits": limits.to_json(), "stream": stream}).encode()


def start(limits: Limits, *, stream: bool = False) -> bytes:
    request: dict[str, Any] = {"limits": limits.to_json(), "source": LOGGING}
    if stream:
        request["stream"] = True
    return frame(b"S", json.dumps(request).encode())


def _serve(
    zygote: Any, monkeypatch: pytest.MonkeyPatch, *requests: bytes
) -> tuple[dict[str, Any], list[str]]:
    """The final step's header a forked worker sends for ``requests``, and what it did in
    order: ``S`` when it took the start request, ``E <log entries> <stream>`` for each
    engine it made."""
    compiler, prepared = zygote
    ours, theirs = socket.socketpair()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        done: list[str] = []
        try:
            os.close(read_end)
            ours.close()
            made = _engine.Engine

            def engine(limits: Limits, **kwargs: Any) -> Any:
                done.append(f"E {limits.log_entries} {kwargs['stream_logs']}")
                return made(limits, **kwargs)

            worker = _worker._Worker(theirs, compiler, prepared, layers=NO_LAYERS, rss=0)
            handle = worker._handle

            def take(kind: bytes, payload: bytes) -> Any:
                if kind == b"S":
                    done.append("S")
                return handle(kind, payload)

            monkeypatch.setattr(_worker, "Engine", engine)
            monkeypatch.setattr(worker, "_handle", take)
            worker.serve()
        finally:
            os.write(write_end, json.dumps(done).encode())
            os._exit(0)
    os.close(write_end)
    theirs.close()
    try:
        for request in requests:
            ours.sendall(request)
        reader = ours.makefile("rb")
        last = b""
        while head := reader.read(4):
            last = reader.read(int.from_bytes(head, "big"))
        done = json.loads(os.read(read_end, 4096))
    finally:
        os.close(read_end)
        ours.close()
        os.waitpid(pid, 0)
    assert last[:1] == b"P", last[:200]
    header, value = last[1:].split(b"\n")[:2]
    return {**json.loads(header), "value": json.loads(value)}, done


@pytest.mark.parametrize("kind", [b"N", b"R"], ids=["run starting", "quiet moment"])
def test_an_announced_run_finds_its_engine_made(
    zygote: object, kind: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, unannounced = _serve(zygote, monkeypatch, start(Limits()))
    step, done = _serve(zygote, monkeypatch, frame(kind, settings(Limits())), start(Limits()))
    assert unannounced == ["S", "E 100 False"]
    assert done == ["E 100 False", "S"]  # made before the request, and only then
    assert step["o"] is True and step["value"] is True
    assert step["l"] == plain["l"] == [["log", f"line {i}"] for i in range(5)]


@pytest.mark.parametrize(
    ("announced", "stream"),
    [(Limits(log_entries=2), False), (Limits(), True), (Limits(log_entries=2), True)],
    ids=["other limits", "other streaming", "both"],
)
def test_a_run_whose_settings_differ_from_the_announced_runs_under_its_own(
    zygote: object, announced: Limits, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_stream = not stream
    step, done = _serve(
        zygote,
        monkeypatch,
        frame(b"N", settings(announced, stream=stream)),
        start(Limits(), stream=run_stream),
    )
    assert done == [f"E {announced.log_entries} {stream}", "S", f"E 100 {run_stream}"]
    assert step["o"] is True
    assert step["l"] == [["log", f"line {i}"] for i in range(5)]  # 100 entries allowed
    if run_stream:
        assert step["s"] == step["l"]  # streamed, and kept for the result
    else:
        assert "s" not in step


def test_a_second_announcement_keeps_the_first_engine(
    zygote: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two runs starting at once may both announce to the same idle worker.
    step, done = _serve(
        zygote,
        monkeypatch,
        frame(b"N", settings(Limits(log_entries=2))),
        frame(b"R", settings(Limits())),
        frame(b"N", settings(Limits())),
        start(Limits(log_entries=2)),
    )
    assert done == ["E 2 False", "S"]
    assert step["l"][0] == ["log", "line 0"] and step["l"][1][0] == "truncated"
    assert len(step["l"]) == 2  # two entries at most, the marker included


@pytest.mark.parametrize(
    "payload",
    [
        b"{nope",
        b"[]",
        b'{"limits": {}}',
        b'{"stream": false}',
        b'{"limits": {"log_entries": -1}, "stream": false}',
        b'{"limits": {"no_such_limit": 1}, "stream": false}',
        b'{"limits": [], "stream": false}',
        b'{"limits": {}, "stream": "yes"}',
        b"\xff\xfe",
    ],
)
def test_an_announcement_it_cannot_read_leaves_the_run_as_it_was(
    zygote: object, payload: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    step, done = _serve(zygote, monkeypatch, frame(b"N", payload), start(Limits()))
    assert done == ["S", "E 100 False"]
    assert step["o"] is True and len(step["l"]) == 5
