"""A worker's rehearsal (``R``, at a quiet moment: ADR 0036, ADR 0037) is a whole run in a
context of its own: the run that follows on the same worker starts from the pristine
context it inherited, exactly as on a worker that never rehearsed.

Each case forks a child of this process that serves one socket with the worker's own code
(what a worker does after its lockdown), so the frames compared are the real ones.
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
from codemodekit.sandbox import _lockdown, _worker
from codemodekit.sandbox._protocol import frame

PROGRAM = (
    "console.log('mine', typeof globalThis.x);\n"
    "const a = await tools.app.first({ k: 1 });\n"
    "return [a, Math.random() < 2];"
)
NO_LAYERS = _lockdown.ZygoteLayers(
    namespaces=None, landlock=0, program=b"", offsets=(), seccomp_error="", vm_bytes=0
)


@pytest.fixture(scope="module")
def zygote() -> Iterator[tuple[CodeCompiler, tuple[object, object], tuple[object, object]]]:
    compiler = CodeCompiler()
    prepared = _worker._warm_up(compiler)
    yield compiler, prepared, _worker._prepared_context()


def _frames(sock: socket.socket) -> Iterator[tuple[bytes, bytes]]:
    reader = sock.makefile("rb")
    while head := reader.read(4):
        body = reader.read(int.from_bytes(head, "big"))
        yield body[:1], body[1:]


def _worker_on(sock: socket.socket, zygote: Any) -> Any:
    """A worker serving ``sock`` in this (forked) process, as ``_serve_worker`` makes one."""
    compiler, prepared, spare = zygote
    return _worker._Worker(sock, compiler, prepared, layers=NO_LAYERS, rss=0, spare=spare)


def _serve(zygote: Any, *requests: bytes) -> list[tuple[bytes, bytes]]:
    """The frames a forked worker sends for ``requests`` (then the start of the run)."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ours.close()
            _worker_on(theirs, zygote).serve()
        finally:
            os._exit(0)
    theirs.close()
    try:
        for request in requests:
            ours.sendall(request)
        frames = _frames(ours)
        got = [next(frames)]  # hello
        while got[-1][0] not in (b"C", b"P"):
            got.append(next(frames))
        ours.sendall(frame(b"T", b"[1,1,7]"))
        got.append(next(frames))
        return got
    finally:
        ours.close()
        os.waitpid(pid, 0)


def _start(source: str) -> bytes:
    return frame(b"S", json.dumps({"limits": Limits().to_json(), "source": source}).encode())


def test_a_run_after_the_rehearsal_sees_none_of_it(zygote: object) -> None:
    plain = _serve(zygote, _start(PROGRAM))
    rehearsed = _serve(zygote, frame(b"R", b""), _start(PROGRAM))
    kinds = [kind for kind, _ in rehearsed]
    assert kinds == [kind for kind, _ in plain] == [b"H", b"P", b"P"]
    # The first step: the same call (id 1, its arguments) and nothing logged by anyone else.
    assert rehearsed[1][1].split(b"\n")[2:] == plain[1][1].split(b"\n")[2:]
    assert rehearsed[1][1].split(b"\n")[2] == b'[1,"app","first",{"k":1}]'
    last = json.loads(rehearsed[2][1].split(b"\n")[0])
    assert last["o"] is True and last["g"] is None
    assert last["l"] == [["log", "mine undefined"]]
    assert rehearsed[2][1].split(b"\n")[1] == b"[7,true]"


def test_the_rehearsal_runs_once_and_a_second_one_is_ignored(zygote: object) -> None:
    twice = _serve(zygote, frame(b"R", b""), frame(b"R", b""), _start(PROGRAM))
    assert [kind for kind, _ in twice] == [b"H", b"P", b"P"]
    assert twice[2][1].split(b"\n")[1] == b"[7,true]"


def test_the_rehearsal_runs_its_program_to_the_end(zygote: object) -> None:
    # A rehearsal that failed would go unnoticed by its runs (they only lose the speed-up):
    # its own program must complete, its tool call settled and its value returned.
    read_end, write_end = os.pipe()
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            worker = _worker_on(theirs, zygote)
            step = worker._rehearse_in(worker._spare)
            os.write(write_end, json.dumps([step.done, step.ok, step.value_json]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        report = json.loads(os.read(read_end, 4096) or b"null")
    finally:
        os.close(read_end)
        ours.close()
        theirs.close()
        os.waitpid(pid, 0)
    assert report == [True, True, "1"]
