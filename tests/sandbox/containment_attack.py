"""Attacker code for ``test_containment.py``: what native code from a QuickJS exploit can do.

This module is not imported by the tests. They copy it into a throwaway virtual environment
whose ``.pth`` imports it at interpreter start, in the server and in the sandbox zygote
alike. It wraps the engine binding (``quickjs.Context``) without changing the product: when
model code that carries the marker enters QuickJS, the probes below run right there, in the
process that runs model code, and their findings replace the marker, so they come back as
the run's value. Every import happens at start (a locked-down worker opens no file).
"""

from __future__ import annotations

import base64
import ctypes
import errno
import json
import os
import re
import resource
import signal
import socket
import threading
from typing import Any

import quickjs

MARKER = re.compile(r"__PROBE__([A-Za-z0-9+/=]*)__END__")
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_RUNS = [0]
"""Probed runs this process hosted (a second one means a worker served two runs)."""


def _errno_result(result: int) -> str:
    if result >= 0:
        return f"ALLOWED (returned {result})"
    return f"denied ({errno.errorcode.get(ctypes.get_errno(), '?')})"


def _try(action: Any) -> str:
    try:
        outcome = action()
    except OSError as exc:
        return f"denied ({errno.errorcode.get(exc.errno or 0, type(exc).__name__)})"
    except Exception as exc:
        return f"denied ({type(exc).__name__})"
    return outcome if isinstance(outcome, str) else f"ALLOWED ({outcome!r:.80})"


def _read(path: str) -> Any:
    with open(path, "rb") as file:
        return file.read(64)


def _write(path: str) -> Any:
    with open(path, "w") as file:
        file.write("print('injected')\n")
    return "ALLOWED (written)"


def _connect(port: int) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return "ALLOWED (connected)"


def _fork() -> Any:
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os._exit(0)
    return f"ALLOWED (child {pid})"


def _thread() -> Any:
    started = threading.Thread(target=lambda: None)
    started.start()
    started.join()
    return "ALLOWED (a thread ran)"


def _spin_unbounded() -> str:
    """Whether a worker whose server is gone could burn CPU for ever (nothing else stops a
    slice stuck in a native once the server cannot kill it)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_CPU)
    if soft == resource.RLIM_INFINITY:
        return "ALLOWED (no CPU time limit)"
    return f"denied (RLIMIT_CPU {soft} s)"


def _execve() -> Any:
    # A path that does not exist: reaching the kernel (ENOENT) means exec is allowed.
    try:
        os.execv("/nonexistent/codemode-probe", ["probe"])
    except FileNotFoundError:
        return "ALLOWED (execve reached the file system)"
    return "ALLOWED"


def _memory(pid: int) -> Any:
    with open(f"/proc/{pid}/maps", "rb") as maps:
        start = int(maps.readline().split(b"-")[0], 16)
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        return mem.read(16)


def _steal_descriptor(pid: int) -> str:
    pidfd = _libc.syscall(434, pid, 0)  # pidfd_open
    if pidfd < 0:
        pidfd = 0x7FFF  # still ask, with a descriptor it does not hold
    return _errno_result(_libc.syscall(438, pidfd, 0, 0))  # pidfd_getfd of its stdin


def _environment(secret: str) -> str:
    leaked = [k for k, v in os.environ.items() if secret in v]
    if leaked:
        return f"ALLOWED (secret in {leaked})"
    return f"denied (environment has {len(os.environ)} variables, no secret)"


def _forge_compiled_program() -> str:
    """Offer the host a compiled program for its compile cache, as a worker that compiled
    the run's source would (a ``J`` frame on its socket, fd 3)."""
    payload = b"J" + json.dumps(["(async () => 'poisoned')()", 0]).encode()
    os.write(3, len(payload).to_bytes(4, "big") + payload)
    return "sent"


def probe(params: dict[str, Any]) -> dict[str, Any]:
    if params.get("poison"):
        return {"pid": os.getpid(), "forged": _forge_compiled_program()}
    server, sibling = int(params["server"]), int(params["sibling"])
    _RUNS[0] += 1
    found: dict[str, Any] = {
        "pid": os.getpid(),
        "runs_in_this_process": _RUNS[0],
        "env_secret": _environment(params["secret"]),
        "server_environ": _try(lambda: _read(f"/proc/{server}/environ")),
        "server_mem": _try(lambda: _memory(server)),
        # PTRACE_SEIZE: attaches without stopping the server (a stopped server would hang
        # the test where tracing is allowed).
        "ptrace_server": _errno_result(_libc.ptrace(0x4206, server, None, None)),
        "pidfd_open_server": _errno_result(_libc.syscall(434, server, 0)),
        "pidfd_getfd_server": _steal_descriptor(server),
        "signal_server": _try(lambda: os.kill(server, 0) or "ALLOWED"),
        "stop_server": _errno_result(_libc.syscall(234, server, server, 0)),  # tgkill, sig 0
        "signal_sibling": _try(lambda: os.kill(sibling, 0) or "ALLOWED"),
        "signal_parent": _try(lambda: os.kill(os.getppid(), 0) or "ALLOWED"),
        "connect": _try(lambda: _connect(int(params["port"]))),
        "read_home": _try(lambda: _read(params["home_file"])),
        "read_project": _try(lambda: _read(params["project_file"])),
        "write_project": _try(lambda: _write(params["write_file"])),
        "fork": _try(_fork),
        "thread": _try(_thread),
        "spin_unbounded": _spin_unbounded(),
        "execve": _try(_execve),
    }
    return found


def _inject(text: str) -> str:
    def run(match: re.Match[str]) -> str:
        params = json.loads(base64.b64decode(match.group(1)))
        findings = json.dumps(probe(params))
        return "__RESULT__" + base64.b64encode(findings.encode()).decode()

    return MARKER.sub(run, text)


class _Port:
    """The prelude's port, as the engine sees it; model code enters QuickJS through it."""

    def __init__(self, port: Any) -> None:
        self._port = port

    def __call__(self, *args: Any) -> Any:
        args = tuple(_inject(a) if isinstance(a, str) and "__PROBE__" in a else a for a in args)
        return self._port(*args)


class _Context:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._ctx = _real_context(*args, **kwargs)

    def eval(self, code: str) -> Any:
        result = self._ctx.eval(code)
        return _Port(result) if callable(result) else result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


_real_context = quickjs.Context
quickjs.Context = _Context
_ = signal
