"""Sandbox worker processes: a zygote that forks workers, and the one run each worker hosts.

The pool starts the zygote with ``python -I`` and an empty environment (see ``pool.py``).
The zygote enters a user + network namespace before anything else, imports the engine and
the compiler, compiles the compiler's core query (the rarer ones after its first fork:
ADR 0041), evaluates the prelude into a QuickJS context (and into
a spare one, where a worker rehearses at a quiet moment: ADR 0039), builds the
workers' seccomp filter, drops its capabilities, locks itself (no-new-privs, a deny-list
filter: no exec, no socket, no file opened) and then only forks: for every request on its
control socket (FD) it receives one end of a socket pair, forks, and answers the child's
pid. The zygote never runs model code and starts no thread, which keeps fork safe.

A worker locks itself down right after the fork (``_lockdown.py``: descriptors, not
dumpable, landlock, the allow-list filter, rlimits) and then hosts exactly one run in the
context it inherited: it compiles the TypeScript, runs each slice under the run's limits,
measures compute as its own CPU time, answers each request with one step, and exits when
the run ends or the server's end of its socket closes. It has one thread and may start
none: the server kills it whenever a run must stop at once (past its CPU budget too),
and when the run is over; the kernel's CPU limit ends it if the server is gone. A zygote
that dies takes no worker with it. ADR 0019, ADR 0028, ADR 0036, ADR 0039.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import quickjs

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.compiler.query import compile_core_query, compile_next_group
from codemodekit.errors import CompileFailure
from codemodekit.limits import Limits
from codemodekit.sandbox import _lockdown
from codemodekit.sandbox._engine import Engine, internal_failure, prelude_source
from codemodekit.sandbox._inbox import Inbox
from codemodekit.sandbox._protocol import decode_diagnostic, encode_step, frame
from codemodekit.sandbox._step import Step
from codemodekit.sandbox._warm import prepare_context
from codemodekit.sandbox._watchdog import CpuOnly
from codemodekit.sandbox._workers import main_thread_stack_cap
from codemodekit.sandbox.base import CompiledProgram

cpu_time = time.thread_time
"""The worker's CPU clock. It has one thread, so its thread's clock is the process's; and
unlike the process clock, it stays exact once ``RLIMIT_CPU`` is set (``_lockdown.bound_cpu``:
with a process CPU timer armed, Linux samples the process clock at scheduler ticks)."""
PRELUDE_MODULES = (
    "prelude",
    "prelude_console",
    "prelude_calls",
    "prelude_failure",
    "prelude_random",
)
LATE_QUERY_FORKS = 8
"""Forks after which the zygote compiles a rarer query per fork even when requests wait."""
REHEARSAL = (
    "const x: number = (await tools.rehearsal.one({ n: 1 })) as number;\nconsole.log(x);\nreturn x;"
)
"""The rehearsal's program: what most runs do (a tool call, a console line, a result)."""
REHEARSAL_REQUEST = json.dumps(
    {"limits": Limits().to_json(), "source": REHEARSAL, "share": True}
).encode()
"""As a start request arrives: bytes (``json.loads`` of bytes takes a path of its own)."""


def _rss_bytes() -> int:
    """Resident size (read before the lockdown: afterwards no path can be opened)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(frozen=True, slots=True)
class _Ready:
    """The run's engine, made when a run's settings were announced (``N`` or ``R``, ADR
    0046): the prelude told them, the heap and stack bounded. Taken by a start request
    with those settings."""

    settings: tuple[Any, bool]
    """The announced limits (as the start request carries them) and whether logs stream."""
    limits: Limits
    engine: Engine


class _Worker:
    """One run, in the context inherited from the zygote; the process exits when it ends."""

    def __init__(
        self,
        conn: socket.socket,
        compiler: CodeCompiler,
        prepared: tuple[Any, Any],
        *,
        layers: _lockdown.ZygoteLayers,
        rss: int,
        spare: tuple[Any, Any] | None = None,
    ) -> None:
        self._conn = conn
        self._inbox = Inbox(conn)
        self._spin = False
        """The server has a CPU to spare: poll for its next answer (``_inbox.py``)."""
        self._compiler = compiler
        self._watchdog = CpuOnly()
        self._layers = layers
        self._rss = rss
        self._stack_cap = main_thread_stack_cap()
        self._engine: Engine | None = None
        self._prepared: tuple[Any, Any] | None = prepared
        """The run's context: the zygote's own, inherited copy-on-write."""
        self._spare = spare
        """A second context prepared like the run's, for the rehearsal alone."""
        self._ready: _Ready | None = None

    def _send(self, kind: bytes, payload: bytes) -> None:
        self._conn.sendall(frame(kind, payload))

    def rehearse(self) -> None:
        """Off any run's path, when the pool says so (``R``, at a quiet moment): a whole run
        of ``REHEARSAL`` (compile, start, a tool call settled, console, result, the step
        frames) through the code a run takes, in the spare context, so that the
        copy-on-write faults of a fresh fork are paid here rather than by the run. A
        collection then marks every object of the run's inherited context, which copies
        its pages now rather than at the run's first writes. A worker taken under a stream
        of runs skips it (ADR 0036): the CPU goes to the next workers (ADR 0039). A
        rehearsal that fails costs nothing but its own speed-up: the run's context was not
        entered."""
        spare, self._spare = self._spare, None
        if spare is None or self._prepared is None:
            return
        try:
            self._rehearse_in(spare)
        except Exception:  # the worker's stderr is /dev/null; its run goes on as usual
            return
        self._prepared[0].gc()

    def _rehearse_in(self, spare: tuple[Any, Any]) -> Step:
        """The rehearsal's run in ``spare``; its last step."""
        taken_s = cpu_time()
        engine, step = self._begin(json.loads(REHEARSAL_REQUEST), spare, rehearsal=True)
        encode_step(step, cpu_time(), self._rss, taken_s)
        if engine is not None and not step.done:
            ids = [line[1 : line.index(",")] for line in step.call_lines]
            step = engine.settle("\n".join(f"[{call_id},1,1]" for call_id in ids))
        encode_step(step, cpu_time(), self._rss)
        return step

    def serve(self) -> None:
        hello = {"pid": os.getpid(), "u": cpu_time(), "r": self._rss}
        self._send(b"H", json.dumps(hello).encode())
        expect = False
        while True:
            message = self._inbox.read(spin=self._spin, expect=expect)
            if message is None or message[0] in (b"Q", b"X"):
                return  # X: the run ended while it awaited tools
            kind, payload = message
            expect = kind == b"N"  # a run is coming: poll for its request (ADR 0043)
            if kind in (b"N", b"R"):
                if kind == b"R":
                    self.rehearse()
                self._get_ready(payload)  # with the settings they carry (ADR 0046)
                continue
            # The run is charged from here: what this process spent before (starting,
            # rehearsing) is nobody's. Sent with the first step (``_protocol.py``).
            taken_s = cpu_time() if kind == b"S" else None
            try:
                step = self._handle(kind, payload)
            except Exception:
                step = self._internal_failure()
            engine = self._engine
            cpu_s = cpu_time() if engine is None else engine.clock_at_exit
            self._send(*encode_step(step, cpu_s, self._rss, taken_s))
            if step.done:
                return  # one run per process

    def _get_ready(self, payload: bytes) -> None:
        """A run with these settings is coming (``N``), or the latest run had them (``R``):
        make its engine now, before the request (ADR 0046). Once, and only in the context
        no run has entered; none given, or anything amiss, leaves it to the start request,
        as before."""
        if not payload or self._prepared is None or self._ready is not None:
            return
        try:
            settings = json.loads(payload)
            stream = settings["stream"]
            if not isinstance(stream, bool):
                return
            limits = Limits(**settings["limits"])
            engine = self._new_engine(limits, self._prepared, stream)
        except Exception:
            return
        self._ready = _Ready((settings["limits"], stream), limits, engine)

    def _new_engine(self, limits: Limits, prepared: tuple[Any, Any], stream: bool) -> Engine:
        return Engine(
            limits,
            stack_cap=self._stack_cap,
            prepared=prepared,
            watchdog=self._watchdog,
            stream_logs=stream,
        )

    def _handle(self, kind: bytes, payload: bytes) -> Step:
        if kind == b"S":
            prepared, self._prepared = self._prepared, None
            ready, self._ready = self._ready, None
            if prepared is None:
                raise RuntimeError("a worker hosts one run")
            request = json.loads(payload)
            self._spin = request.get("spin") is True
            self._engine, step = self._begin(request, prepared, ready)
            return step
        engine = self._engine
        if engine is None:
            raise RuntimeError(f"no run in progress for {kind!r}")
        if kind in (b"T", b"W"):
            self._spin = kind == b"W"
            return engine.settle(payload.decode("utf-8", "surrogatepass"))
        if kind == b"A":
            return engine.abandon(decode_diagnostic(json.loads(payload)))
        raise RuntimeError(f"unknown request {kind!r}")

    def _begin(
        self,
        request: dict[str, Any],
        prepared: tuple[Any, Any],
        ready: _Ready | None = None,
        *,
        rehearsal: bool = False,
    ) -> tuple[Engine | None, Step]:
        """A run's start in ``prepared`` (with the engine made for it if the run was
        announced with the same settings); the rehearsal's bounds nothing and shares nothing
        (an rlimit, once lowered, cannot be raised again)."""
        stream = request.get("stream") is True
        engine: Engine | None = None
        if ready is not None and ready.settings == (request["limits"], stream):
            limits, engine = ready.limits, ready.engine
        else:
            limits = Limits(**request["limits"])
        if not rehearsal:
            _lockdown.bound_address_space(self._layers, limits.memory_bytes)
            _lockdown.bound_cpu(limits.compute_time_ms / 1000)
        started = cpu_time()
        if "source" in request:
            try:
                program = self._compile(request["source"], limits.source_bytes)
            except CompileFailure as failure:
                compile_ms = (cpu_time() - started) * 1000
                return None, Step(done=True, diagnostic=failure.diagnostic, compile_ms=compile_ms)
            compile_ms = (cpu_time() - started) * 1000
            if request.get("share") is True and not rehearsal:
                # Sent before any model code runs in this process: the program is a
                # function of the source alone, so the host may reuse it for the same
                # source (ADR 0028, the compile cache).
                shared = [program.javascript, program.line_offset]
                self._send(b"J", json.dumps(shared).encode("utf-8", "surrogatepass"))
        else:
            javascript, line_offset, source = request["program"]
            program = CompiledProgram(javascript, int(line_offset), source)
            compile_ms = 0.0
        if engine is None:
            # Announced with other settings, or not at all: the prelude is told this run's
            # (its settings are values it keeps, replaced as a whole).
            engine = self._new_engine(limits, prepared, stream)
        step = engine.start(program)
        step.compile_ms = compile_ms
        return engine, step

    def _compile(self, source: str, max_source_bytes: int) -> CompiledProgram:
        return self._compiler.compile(source, max_source_bytes=max_source_bytes)

    def _internal_failure(self) -> Step:
        # The worker has no log handler: logging's last resort writes to its stderr, which
        # is /dev/null (the diagnostic's correlation id is what the server logs).
        self._engine = None
        why = f"worker {os.getpid()}: {traceback.format_exc()}"
        return Step(done=True, diagnostic=internal_failure(why))


def _warm_up(compiler: CodeCompiler) -> tuple[Any, Any]:
    """Load and compile what a run needs (after its lockdown a worker opens no path, so
    nothing may be left to load lazily: modules, data files) and prepare the context every
    worker forked from here hosts its run in (the prelude compile is most of a trivial
    run's cost; a fork copies the finished context for free). The zygote never runs user
    code, so that context stays pristine for every fork. The compiler's rarer queries are
    compiled later, between fork requests (``_requests``); a worker that needs one before
    then compiles it itself (no path is opened for that)."""
    for name in PRELUDE_MODULES:
        prelude_source(name)
    compile_core_query()
    compiler.compile("const x: number = 1;\nreturn x;", max_source_bytes=1024)
    # What an error path imports on first use (tracebacks, unicode data for messages).
    import linecache
    import unicodedata

    _ = (linecache, unicodedata, traceback.format_exc)
    return _prepared_context()


def _prepared_context() -> tuple[Any, Any]:
    """A context with the prelude evaluated and its lazily compiled modules loaded: the
    calls module, which a run compiles at its first tool call otherwise (≈0.3 ms of QuickJS
    compile per run), and the random module (Math.random's generator, seeded per run at
    init). Their state is per context, untouched here; each fork has its own copy."""
    ctx, port = prepare_context(prelude_source())
    for module in ("calls", "random"):
        if port("preload", module) != "":
            raise RuntimeError(f"the sandbox prelude did not load its {module} module")
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
    spare: tuple[Any, Any],
    layers: _lockdown.ZygoteLayers,
    rss: int,
) -> None:
    """In the child right after the fork: lockdown, then its one run."""
    _lockdown.name_process(b"codemode-worker")
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    conn = socket.socket(fileno=_lockdown.keep_only(fd))
    _lockdown.lock_down_worker(layers)
    _lockdown.limit_worker(layers)
    _Worker(conn, compiler, prepared, layers=layers, rss=rss, spare=spare).serve()


_libc = ctypes.CDLL(None, use_errno=True)


def _single_threaded() -> bool:
    """Stop the engine binding's idle thread (the ``quickjs`` package starts an executor
    for its ``Function`` helper when imported; nothing here uses it), then say whether
    this process has exactly one thread. Read before the zygote's lockdown, which forbids
    opening ``/proc``."""
    executor = getattr(getattr(quickjs, "Function", None), "_threadpool", None)
    if executor is not None:
        executor.shutdown(wait=True)
    try:
        return threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _return_free_heap() -> None:
    """Give the C heap's free pages back to the kernel (glibc's ``malloc_trim``; elsewhere
    nothing): warming up frees about 3 MB (15.6 to 12.5 MB of anonymous memory here), which
    every fork would map and every exit unmap, and which a worker's allocations would copy
    rather than find zeroed (ADR 0049)."""
    trim = getattr(_libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def _bare_fork() -> int:
    """fork(2) without Python's at-fork work (ADR 0036): the C library's ``fork``, called
    with the GIL released (ctypes), in a process with one thread. Python's work in the
    child re-creates thread states and locks for the threads that did not survive the fork
    (with one thread there are none) and runs the ``os.register_at_fork`` callbacks, one of
    which reseeds ``random``: every worker of a zygote has the same ``random`` state, and
    no code a worker runs uses it (ADR 0035). Skipping that work saves most of a fork's
    cost in the child (≈0.8 ms of CPU and ≈180 copy-on-write faults per worker,
    ``benchmarks/bench_containment.py``)."""
    pid = int(_libc.fork())
    if pid < 0:
        raise OSError(ctypes.get_errno(), "fork")
    return pid


def _requests(control: socket.socket) -> Iterator[list[int]]:
    """The server's fork requests (each a socket for the worker) until it is gone. The
    compiler's rarer queries (≈55 ms) are compiled in between: from the first fork on,
    while no request waits, and one per fork from the ``LATE_QUERY_FORKS``-th on, so a
    steady stream of requests cannot put them off for ever. Neither the zygote's start nor
    its first forks wait for them (a fresh process's first run); a worker forked before a
    query is compiled compiles it if its source needs it."""
    compiling, served = True, 0

    def compile_one() -> bool:
        more = compile_next_group()
        if not more:
            gc.freeze()  # the queries, like everything before them
            _return_free_heap()
        return more

    while True:
        try:
            if compiling and served >= LATE_QUERY_FORKS:
                compiling = compile_one()
            if compiling and served:
                try:
                    message, fds, _flags, _addr = socket.recv_fds(
                        control, 16, 1, socket.MSG_DONTWAIT
                    )
                except BlockingIOError:
                    compiling = compile_one()
                    continue
            else:
                message, fds, _flags, _addr = socket.recv_fds(control, 16, 1)
        except OSError:
            return
        if not message:
            return
        if fds:
            yield fds
            served += 1


def zygote_main(control_fd: int, namespaces: str | None = "not requested") -> None:
    """``namespaces``: ``None`` when the pool's bootstrap entered them (it must, before
    anything starts a thread), else why not."""
    control = socket.socket(fileno=control_fd)
    _lockdown.name_process(b"codemode-zygote")
    compiler = CodeCompiler()
    prepared = _warm_up(compiler)
    spare = _prepared_context()  # the workers' rehearsal runs here, never in ``prepared``
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rss = _rss_bytes()
    fork = _bare_fork if _single_threaded() else os.fork
    _quiet_stderr()
    layers = _lockdown.prepare_zygote(namespaces)
    gc.collect()
    gc.freeze()  # no GC pass in a child touches (and so copies) the zygote's objects
    _return_free_heap()
    control.sendall(b"R" + json.dumps(layers.report()).encode() + b"\n")
    for fds in _requests(control):
        pid = fork()
        if pid == 0:  # the worker
            try:
                control.close()
                _serve_worker(fds[0], compiler, prepared, spare, layers, rss)
            finally:
                os._exit(0)
        os.close(fds[0])
        control.sendall(pid.to_bytes(4, "big"))
    # The server is gone; each worker notices the same on its own socket.
