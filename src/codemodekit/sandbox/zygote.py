"""The zygote: the contained process that forks sandbox workers (ADR 0028).

It is spawned with ``python -I`` from an empty environment, in ``/``, its stdout on
/dev/null and its stderr read only while it starts (bounded); it reports which containment
layers it applies (``_lockdown.py``), and without a mandatory one it is refused unless
``unsafe_allow_uncontained`` is set. The pool (``pool.py``) asks it for workers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from importlib.util import find_spec

from codemodekit.errors import CodeModeError
from codemodekit.sandbox._lockdown import MANDATORY

log = logging.getLogger("codemodekit.sandbox")

ZYGOTE_START_S = 30.0
"""Longest wait for a new zygote to import and warm up (a cold disk on a loaded machine)."""
SPAWN_S = 10.0
"""Longest wait for one fork and the new worker's hello."""
STDERR_BYTES = 64 * 1024
"""Most of a zygote's stderr read when it fails to start (it has none once started)."""


class PoolFailure(Exception):
    """No worker could be started (the zygote does not come up, or a mandatory containment
    layer is missing)."""


class SandboxUncontained(PoolFailure, CodeModeError):
    """Process mode refused to start: a mandatory containment layer is missing."""


ENGINE_MODULES = ("codemodekit", "quickjs", "tree_sitter", "tree_sitter_typescript", "pyseccomp")
"""What the zygote imports: the directories the server found them in go on its sys.path."""
BOOTSTRAP = (
    # The namespaces first, while the process has one thread: importing the engine's
    # binding starts one. _lockdown.py imports nothing of ours, so it runs as a plain file.
    "import runpy, sys; why = runpy.run_path(sys.argv[2])['enter_namespaces'](); "
    "sys.path[:0] = [p for p in sys.argv[3:] if p not in sys.path]; "
    "from codemodekit.sandbox._worker import zygote_main; zygote_main(int(sys.argv[1]), why)"
)
LOCKDOWN_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lockdown.py")


def import_roots() -> list[str]:
    """The sys.path entries our package and its engine came from in this process."""
    roots: list[str] = []
    for name in ENGINE_MODULES:
        spec = find_spec(name)
        if spec is None or not spec.origin:
            continue
        origin = os.path.dirname(os.path.abspath(spec.origin))
        root = os.path.dirname(origin) if spec.submodule_search_locations else origin
        if root not in roots:
            roots.append(root)
    return roots


def describe(layers: dict[str, str]) -> str:
    """One line for banners: the layers in force, then those that are not."""
    if not layers:
        return "inline (this process; no process containment)"
    on = [name for name, state in layers.items() if state == "on"]
    off = [f"{name} {state}" for name, state in layers.items() if state != "on"]
    missing = [name for name in MANDATORY if layers.get(name) != "on"]
    head = "UNCONTAINED (unsafe_allow_uncontained): " if missing else "contained: "
    return head + ", ".join(on) + (f"; not in force: {', '.join(off)}" if off else "")


def refusal(missing: dict[str, str]) -> str:
    """The message of a pool that refuses to start uncontained."""
    layers = "; ".join(f"{name}: {state}" for name, state in missing.items())
    return (
        f"sandbox worker processes refuse to start: a mandatory containment layer is "
        f"missing ({layers}). Model code would run in a process that can reach the rest of "
        "the machine. Fix the machine (Linux with seccomp and libseccomp), or set "
        "`unsafe_allow_uncontained = true` under [runtime] "
        "(RuntimeOptions(unsafe_allow_uncontained=True)) to run without it: unsafe for "
        "untrusted code"
    )


class Zygote:
    """The process that forks workers; restarted if it dies."""

    def __init__(self, allow_uncontained: bool = False) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._allow_uncontained = allow_uncontained
        self.layers: dict[str, str] = {}
        """The containment layers of the running zygote: ``on``, or why not."""

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair()
        process = subprocess.Popen(
            # -I: no PYTHON* variable, no user site, no script or working directory on
            # sys.path; site-packages (and a virtual environment) still work.
            [
                *(sys.executable, "-I", "-X", "utf8", "-c", BOOTSTRAP),
                *(str(theirs.fileno()), LOCKDOWN_FILE, *import_roots()),
            ],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # under `serve --transport stdio` stdout is the protocol
            stderr=subprocess.PIPE,  # read only if it fails to start; then /dev/null
            start_new_session=True,  # a terminal's Ctrl-C goes to the server, which stops runs
            env={},  # nothing of the server's environment (its secrets) reaches a worker
            cwd="/",
        )
        theirs.close()
        self._process = process  # visible to stop() while it is still starting
        ours.settimeout(ZYGOTE_START_S)
        ready = bytearray()
        try:
            while not ready.endswith(b"\n") and len(ready) < STDERR_BYTES:
                chunk = ours.recv(STDERR_BYTES)
                if not chunk:
                    break
                ready += chunk
        except OSError:
            pass
        report: dict[str, str] = {}
        if ready.startswith(b"R") and ready.endswith(b"\n"):
            with contextlib.suppress(ValueError):
                report = {str(k): str(v) for k, v in json.loads(ready[1:]).items()}
        if not report:
            process.kill()
            ours.close()
            self._process = None
            stderr = b""
            if process.stderr is not None:
                with contextlib.suppress(OSError, ValueError):
                    stderr = process.stderr.read(STDERR_BYTES)
                process.stderr.close()
            process.wait()
            tail = stderr.decode("utf-8", "replace").strip()[-2000:]
            log.error("the sandbox zygote process did not start:\n%s", tail)
            raise PoolFailure("the sandbox zygote process did not start")
        if process.stderr is not None:
            process.stderr.close()  # the zygote's stderr is /dev/null from now on
        report = {"clean-environment": "on", "single-use": "on", **report}
        missing = {n: report.get(n, "off") for n in MANDATORY if report.get(n) != "on"}
        self.layers = report
        if missing and not self._allow_uncontained:
            self._control = ours
            self._stop_locked()
            raise SandboxUncontained(refusal(missing))
        if missing:
            log.warning("UNSAFE: %s", refusal(missing))
        self._control = ours
        return ours

    def ensure_started(self) -> dict[str, str]:
        """Start the zygote now if it is not running; its containment layers."""
        with self._lock:
            if self._control is None:
                self._start()
            return dict(self.layers)

    def fork(self) -> tuple[int, socket.socket]:
        """A new worker: its pid and the server's end of its socket."""
        return self.fork_many(1)[0]

    def fork_many(self, count: int) -> list[tuple[int, socket.socket]]:
        """``count`` new workers. The requests are pipelined: all of them are sent, then
        the pids read (one round trip to the zygote per batch, not per worker)."""
        with self._lock:
            for attempt in (1, 2):
                control = self._control or self._start()  # PoolFailure when refused
                pairs = _socket_pairs(count)
                try:
                    control.settimeout(SPAWN_S)
                    for _ours, theirs in pairs:
                        socket.send_fds(control, [b"F"], [theirs.fileno()])
                        theirs.close()
                    pids = recv_exactly(control, 4 * count)
                    return [
                        (int.from_bytes(pids[4 * i : 4 * i + 4], "big"), ours)
                        for i, (ours, _theirs) in enumerate(pairs)
                    ]
                except OSError:
                    for ours, theirs in pairs:
                        ours.close()
                        theirs.close()
                    self._stop_locked()
                    if attempt == 2:
                        raise PoolFailure("the sandbox zygote process failed") from None
            raise AssertionError("unreachable")  # pragma: no cover

    def _stop_locked(self) -> None:
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5)
        self._process = self._control = None

    def stop(self) -> None:
        # Kill first, without the lock: a fork request may hold it while a new zygote is
        # still importing, and exit must not wait for that.
        process = self._process
        if process is not None:
            with contextlib.suppress(OSError):
                process.kill()
        with self._lock:
            self._stop_locked()


def _socket_pairs(count: int) -> list[tuple[socket.socket, socket.socket]]:
    """``count`` socket pairs, or none and ``PoolFailure`` (out of descriptors: the server's
    own state, not the zygote's)."""
    pairs: list[tuple[socket.socket, socket.socket]] = []
    try:
        for _ in range(count):
            pairs.append(socket.socketpair())
    except OSError as exc:
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
        raise PoolFailure(f"no socket for a new sandbox worker: {exc}") from None
    return pairs


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from a blocking socket (``OSError`` if it closes first)."""
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise OSError("closed")
        chunks += chunk
    return bytes(chunks)
