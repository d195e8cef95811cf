"""Sandbox worker processes: a zygote that forks workers, and the one run each worker hosts.

The pool starts the zygote with ``python -I`` and an empty environment (see ``pool.py``).
The zygote enters a user + network namespace before anything else, imports the engine and
the compiler, compiles every query, evaluates the prelude into a QuickJS context, builds the
workers' seccomp filter, drops its capabilities, locks itself (no-new-privs, a deny-list
filter: no exec, no socket, no file opened) and then only forks: for every request on its
control socket (FD) it receives one end of a socket pair, forks, and answers the child's
pid. The zygote never runs model code and starts no thread, which keeps fork safe.

A worker locks itself down right after the fork (``_lockdown.py``: descriptors, not
dumpable, landlock, the allow-list filter, rlimits) and then hosts exactly one run in the
context it inherited: it compiles the TypeScript, runs each slice under the run's limits,
measures compute as its own CPU time, answers each request with one step, and exits when
the run ends. It also exits when the server's end of its socket closes (a thread watches
for that while a slice runs); the server kills it whenever a run must stop at once, and
when the run is over. A zygote that dies takes no worker with it. ADR 0019, ADR 0028.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import time
import traceback
from typing import Any, BinaryIO, cast

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.compiler.query import compile_all_queries
from codemodekit.errors import CompileFailure
from codemodekit.limits import Limits
from codemodekit.sandbox import _lockdown
from codemodekit.sandbox._engine import Engine, internal_failure, prelude_source
from codemodekit.sandbox._protocol import decode_diagnostic, encode_step, frame
from codemodekit.sandbox._step import Step
from codemodekit.sandbox._warm import prepare_context
from codemodekit.sandbox._watchdog import Watchdog
from codemodekit.sandbox._workers import main_thread_stack_cap
from codemodekit.sandbox.base import CompiledProgram

PRELUDE_MODULES = ("prelude", "prelude_console", "prelude_calls", "prelude_failure")
REHEARSAL = "const x: number = 1;\nreturn x;"


def _rss_bytes() -> int:
    """Resident size (read before the lockdown: afterwards no path can be opened)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _Worker:
    """One run, in the context inherited from the zygote; the process exits when it ends."""

    def __init__(
        self,
        conn: socket.socket,
        compiler: CodeCompiler,
        prepared: tuple[Any, Any],
        *,
        watchdog: Watchdog,
        layers: _lockdown.ZygoteLayers,
        rss: int,
    ) -> None:
        self._conn = conn
        self._reader = cast(BinaryIO, conn.makefile("rb", buffering=1 << 16))
        self._compiler = compiler
        self._watchdog = watchdog
        self._layers = layers
        self._rss = rss
        self._stack_cap = main_thread_stack_cap()
        self._engine: Engine | None = None
        self._prepared: tuple[Any, Any] | None = prepared
        """The run's context: the zygote's own, inherited copy-on-write."""

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

    def rehearse(self) -> None:
        """Before its hello, off any run's path: walk the Python side of a run once (the
        compiler, the request and step codecs), so the copy-on-write faults of a fresh
        fork are paid here rather than by the run."""
        limits = Limits(**Limits().to_json())
        self._compile(REHEARSAL, limits.source_bytes)
        encode_step(Step(done=True, ok=True, value_json="1"), time.process_time())
        json.loads(json.dumps({"limits": limits.to_json(), "source": REHEARSAL}))

    def serve(self) -> None:
        hello = {"pid": os.getpid(), "u": time.process_time(), "r": self._rss}
        self._send(b"H", json.dumps(hello).encode())
        while True:
            message = self._read()
            if message is None or message[0] in (b"Q", b"X"):
                return  # X: the run ended while it awaited tools
            kind, payload = message
            if kind == b"S":
                # Taken: from now on a death of this process is its run's (see process.py).
                self._send(b"K", b"")
            try:
                step = self._handle(kind, payload)
            except Exception:
                step = self._internal_failure()
            engine = self._engine
            cpu_s = time.process_time() if engine is None else engine.clock_at_exit
            self._send(*encode_step(step, cpu_s, self._rss))
            if step.done:
                return  # one run per process

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
        _lockdown.bound_address_space(self._layers, limits.memory_bytes)
        started = time.process_time()
        if "source" in request:
            try:
                program = self._compile(request["source"], limits.source_bytes)
            except CompileFailure as failure:
                compile_ms = (time.process_time() - started) * 1000
                return Step(done=True, diagnostic=failure.diagnostic, compile_ms=compile_ms)
            compile_ms = (time.process_time() - started) * 1000
            if request.get("share") is True:
                # Sent before any model code runs in this process: the program is a
                # function of the source alone, so the host may reuse it for the same
                # source (ADR 0028, the compile cache).
                shared = [program.javascript, program.line_offset]
                self._send(b"J", json.dumps(shared).encode("utf-8", "surrogatepass"))
        else:
            javascript, line_offset, source = request["program"]
            program = CompiledProgram(javascript, int(line_offset), source)
            compile_ms = 0.0
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            raise RuntimeError("a worker hosts one run")
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
        return self._compiler.compile(source, max_source_bytes=max_source_bytes)

    def _internal_failure(self) -> Step:
        # The worker has no log handler: logging's last resort writes to its stderr, which
        # is /dev/null (the diagnostic's correlation id is what the server logs).
        self._engine = None
        why = f"worker {os.getpid()}: {traceback.format_exc()}"
        return Step(done=True, diagnostic=internal_failure(why))


def _warm_up(compiler: CodeCompiler) -> tuple[Any, Any]:
    """Load and compile everything a run can need, and prepare the context that every worker
    forked from here hosts its run in (the prelude compile is most of a trivial run's cost;
    a fork copies the finished context for free). After its lockdown a worker opens no
    path, so nothing may be left to load lazily: modules, data files, the compiler's
    queries. The zygote never runs user code, so that context stays pristine for every fork."""
    for name in PRELUDE_MODULES:
        prelude_source(name)
    compile_all_queries()
    compiler.compile("const x: number = 1;\nreturn x;", max_source_bytes=1024)
    # What an error path imports on first use (tracebacks, unicode data for messages).
    import linecache
    import unicodedata

    _ = (linecache, unicodedata, traceback.format_exc)
    ctx, port = prepare_context(prelude_source())
    # The calls module, which a run compiles at its first tool call otherwise (≈0.3 ms of
    # QuickJS compile per run): compiled here once, inherited by every fork. Its state is
    # per context, untouched here; each fork has its own copy.
    if port("preload", "calls") != "":
        raise RuntimeError("the sandbox prelude did not load its calls module")
    return ctx, port


def _quiet_stderr() -> None:
    """From now on nothing this process writes reaches anyone: the pool reads the zygote's
    stderr only while it starts (bounded), and a worker has no stream of the server's."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def _serve_worker(
    fd: int,
    compiler: CodeCompiler,
    prepared: tuple[Any, Any],
    layers: _lockdown.ZygoteLayers,
    rss: int,
) -> None:
    """In the child right after the fork: lockdown, then its one run."""
    _lockdown.name_process(b"codemode-worker")
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    conn = socket.socket(fileno=_lockdown.keep_only(fd))
    _lockdown.lock_down_worker(layers)
    # Its one thread exists before the rlimits forbid new ones. It also ends the process
    # when the server's end of the socket closes during a slice (between slices the main
    # thread, reading the socket, sees that itself); tied to the server rather than to the
    # zygote, so a zygote that dies takes no run with it.
    watchdog = Watchdog(clock=time.process_time, hangup_fd=conn.fileno())
    watchdog.start()
    _lockdown.limit_worker(layers)
    worker = _Worker(conn, compiler, prepared, watchdog=watchdog, layers=layers, rss=rss)
    worker.rehearse()
    worker.serve()


def zygote_main(control_fd: int, namespaces: str | None = "not requested") -> None:
    """``namespaces``: ``None`` when the pool's bootstrap entered them (it must, before
    anything starts a thread), else why not."""
    control = socket.socket(fileno=control_fd)
    _lockdown.name_process(b"codemode-zygote")
    compiler = CodeCompiler()
    prepared = _warm_up(compiler)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rss = _rss_bytes()
    _quiet_stderr()
    layers = _lockdown.prepare_zygote(namespaces)
    gc.collect()
    gc.freeze()  # no GC pass in a child touches (and so copies) the zygote's objects
    control.sendall(b"R" + json.dumps(layers.report()).encode() + b"\n")
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
                _serve_worker(fds[0], compiler, prepared, layers, rss)
            finally:
                os._exit(0)
        os.close(fds[0])
        control.sendall(pid.to_bytes(4, "big"))
    # The server is gone; each worker notices the same on its own socket.
