"""Sandbox worker processes: a zygote that forks workers, and the loop each worker runs.

``python -m codemodekit.sandbox._worker FD`` starts the zygote. It imports the engine and
the compiler once, warms them, freezes its heap for the garbage collector, and then only
forks: for every request on its control socket (FD) it receives one end of a socket pair,
forks, and answers the child's pid. A fork costs about 0.4 ms and shares the zygote's
memory copy-on-write, so a killed worker is replaced at once. The zygote starts no thread,
which keeps fork safe.

A worker hosts one run at a time: it compiles the TypeScript, runs each slice in a fresh
QuickJS context under the run's limits, measures compute as its own CPU time, and answers
each request with one step. Between runs it prepares the next context. It exits when the
server's end of its socket closes (a thread watches for that while a slice runs); the server
kills it whenever a run must stop at once. A zygote that dies takes no worker with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections import OrderedDict
from typing import Any, BinaryIO, cast

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.errors import CompileFailure
from codemodekit.limits import Limits
from codemodekit.sandbox._engine import Engine, internal_failure, prelude_source
from codemodekit.sandbox._protocol import decode_diagnostic, encode_step, frame
from codemodekit.sandbox._step import Step
from codemodekit.sandbox._warm import prepare_context
from codemodekit.sandbox._watchdog import Watchdog
from codemodekit.sandbox._workers import main_thread_stack_cap
from codemodekit.sandbox.base import CompiledProgram

COMPILE_CACHE = 64
"""Compiled programs kept per worker (agents often resend the same script)."""
TRIM_GROWTH_BYTES = 8 * 1024 * 1024
"""After a run, a worker grown this much past its size at start hands freed heap back."""
PRELUDE_MODULES = ("prelude", "prelude_console", "prelude_calls", "prelude_failure")


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _trim_heap() -> None:
    """Return freed malloc arenas to the system (glibc keeps them otherwise)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _name_process(name: bytes) -> None:
    """Linux: the process name `ps`, `top` and `psutil.Process.name()` show (the command line
    stays the zygote's, since workers are forked)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME


def _exit_with_server(conn: socket.socket) -> None:
    """End this worker as soon as the server's end of its socket closes, even while the
    main thread is inside a slice that never returns: a thread waits for the hang-up.
    Tied to the server rather than to the zygote, so a zygote that dies (or is killed)
    takes no run with it."""

    def watch() -> None:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLRDHUP)
        while True:
            try:
                if poller.poll():
                    os._exit(0)
            except InterruptedError:
                continue
            except OSError:
                os._exit(0)

    threading.Thread(target=watch, name="codemode-worker-hangup", daemon=True).start()


class _Worker:
    def __init__(
        self, conn: socket.socket, compiler: CodeCompiler, prepared: tuple[Any, Any]
    ) -> None:
        self._conn = conn
        self._reader = cast(BinaryIO, conn.makefile("rb", buffering=1 << 16))
        self._compiler = compiler
        self._compiled: OrderedDict[str, CompiledProgram] = OrderedDict()
        self._watchdog = Watchdog(clock=time.process_time)
        self._stack_cap = main_thread_stack_cap()
        self._engine: Engine | None = None
        self._prepared: tuple[Any, Any] | None = prepared
        """The next run's context: the first is the zygote's own, inherited copy-on-write."""

    def _send(self, kind: bytes, payload: bytes) -> None:
        self._conn.sendall(frame(kind, payload))

    def _read(self) -> tuple[bytes, bytes] | None:
        head = self._reader.read(4)
        if len(head) < 4:
            return None
        size = int.from_bytes(head, "big")
        body = self._reader.read(size)
        if len(body) < size or size < 1:
            return None
        return body[:1], body[1:]

    def serve(self) -> None:
        baseline = _rss_bytes()
        hello = {"pid": os.getpid(), "u": time.process_time(), "r": baseline}
        self._send(b"H", json.dumps(hello).encode())
        while True:
            message = self._read()
            if message is None or message[0] == b"Q":
                return
            kind, payload = message
            if kind == b"X":  # the run ended while it awaited tools
                if self._engine is not None:
                    self._engine.close()
                    self._engine = None
                if self._prepared is None:
                    self._prepared = prepare_context(prelude_source())
                continue
            if kind == b"S":
                # Taken: from now on a death of this process is its run's (see process.py).
                self._send(b"K", b"")
            try:
                step = self._handle(kind, payload)
            except Exception:
                step = self._internal_failure()
            rss = 0
            if step.done:
                self._engine = None
                rss = _rss_bytes()
                if rss > baseline + TRIM_GROWTH_BYTES:
                    _trim_heap()
                    rss = _rss_bytes()
            engine = self._engine
            cpu_s = time.process_time() if engine is None else engine.clock_at_exit
            self._send(*encode_step(step, cpu_s, rss))
            if step.done and self._prepared is None:
                self._prepared = prepare_context(prelude_source())

    def _handle(self, kind: bytes, payload: bytes) -> Step:
        if kind == b"S":
            return self._start(json.loads(payload))
        engine = self._engine
        if engine is None:
            raise RuntimeError(f"no run in progress for {kind!r}")
        if kind == b"T":
            return engine.settle(payload.decode("utf-8", "surrogatepass"))
        if kind == b"A":
            return engine.abandon(decode_diagnostic(json.loads(payload)))
        raise RuntimeError(f"unknown request {kind!r}")

    def _start(self, request: dict[str, Any]) -> Step:
        limits = Limits(**request["limits"])
        started = time.process_time()
        if "source" in request:
            try:
                program = self._compile(request["source"], limits.source_bytes)
            except CompileFailure as failure:
                compile_ms = (time.process_time() - started) * 1000
                return Step(done=True, diagnostic=failure.diagnostic, compile_ms=compile_ms)
            compile_ms = (time.process_time() - started) * 1000
        else:
            javascript, line_offset, source = request["program"]
            program = CompiledProgram(javascript, int(line_offset), source)
            compile_ms = 0.0
        prepared, self._prepared = self._prepared, None
        self._engine = Engine(
            limits,
            stack_cap=self._stack_cap,
            prepared=prepared,
            watchdog=self._watchdog,
            stream_logs=request.get("stream") is True,
        )
        step = self._engine.start(program)
        step.compile_ms = compile_ms
        return step

    def _compile(self, source: str, max_source_bytes: int) -> CompiledProgram:
        program = self._compiled.get(source)
        if program is not None:
            self._compiled.move_to_end(source)
            return program
        program = self._compiler.compile(source, max_source_bytes=max_source_bytes)
        self._compiled[source] = program
        if len(self._compiled) > COMPILE_CACHE:
            self._compiled.popitem(last=False)
        return program

    def _internal_failure(self) -> Step:
        # The worker has no log handler: logging's last resort writes to stderr, which is
        # the server's.
        self._engine = None
        why = f"worker {os.getpid()}: {traceback.format_exc()}"
        return Step(done=True, diagnostic=internal_failure(why))


def _warm_up(compiler: CodeCompiler) -> tuple[Any, Any]:
    """Load and compile what every run needs, and prepare the context that every worker
    forked from here starts its first run in (the prelude compile is most of a trivial
    run's cost; a fork copies the finished context for free). The zygote never runs user
    code, so that context stays pristine for every fork."""
    for name in PRELUDE_MODULES:
        prelude_source(name)
    compiler.compile("const x: number = 1;\nreturn x;", max_source_bytes=1024)
    return prepare_context(prelude_source())


def zygote_main(control_fd: int) -> None:
    control = socket.socket(fileno=control_fd)
    _name_process(b"codemode-zygote")
    compiler = CodeCompiler()
    prepared = _warm_up(compiler)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.collect()
    gc.freeze()  # no GC pass in a child touches (and so copies) the zygote's objects
    control.sendall(b"R")
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 16, 1)
        except OSError:
            break
        if not message:
            break
        if not fds:
            continue
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                control.close()
                _name_process(b"codemode-worker")
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                conn = socket.socket(fileno=fds[0])
                _exit_with_server(conn)
                _Worker(conn, compiler, prepared).serve()
            finally:
                os._exit(0)
        os.close(fds[0])
        control.sendall(pid.to_bytes(4, "big"))
    # The server is gone; each worker notices the same on its own socket.


if __name__ == "__main__":
    zygote_main(int(sys.argv[1]))
