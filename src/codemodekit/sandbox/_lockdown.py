"""The kernel walls around a process that runs model code (ADR 0028).

QuickJS is C: a memory-safety bug turns the model's JavaScript into native code in the
worker process, so the process is the last wall. Each layer here is a kernel mechanism,
applied in two places:

- the **zygote**, once at start: a user + network namespace with no interface (before any
  thread exists), every capability dropped, no-new-privs and a deny-list seccomp filter
  (no exec, no ptrace, no new socket, no file opened) once it has loaded everything;
- each **worker**, right after the fork and before it reads its run: every descriptor but
  its socket closed, not dumpable, a landlock domain of its own (no file, no TCP, no signal
  or abstract socket outside itself), an allow-list seccomp filter (its socket, memory,
  futex, clocks, exit; no thread, no process; signals only to itself), and rlimits (no
  core, no process, no file growth, few descriptors, a bounded address space).

The allow-list is built with libseccomp once, in the zygote, and exported as BPF with a
placeholder where the worker's own pid goes; a worker patches its pid in and loads it with
one ``seccomp(2)`` call (no libseccomp work per fork). A call outside the list fails with
``EPERM`` (``clone3`` with ``ENOSYS``, so the C library falls back to ``clone``, whose flags
are checked): nothing is killed by the filter, the run simply cannot reach anything.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import math
import os
import resource
import struct
import time
from dataclasses import dataclass
from typing import Any

MANDATORY = ("clean-environment", "single-use", "no-new-privs", "seccomp")
"""Layers without which process mode refuses to start (unless explicitly allowed)."""
OPTIONAL = ("namespaces", "landlock")
"""Layers applied where the kernel allows them, reported either way."""

PID_PLACEHOLDER = 0x7A5E_C0DE
"""Stands for the worker's pid in the exported filter (patched per worker)."""
ADDRESS_HEADROOM_BYTES = 512 * 1024 * 1024
"""Address space a worker may map beyond the zygote's size and its run's heap limit."""
CPU_HEADROOM_S = 4.0
"""CPU time a worker may use beyond its run's compute budget before the kernel ends it:
the server's compile allowance (2 s) and kill grace (0.25 s), with room to spare."""
MAX_FDS = 8
"""RLIMIT_NOFILE of a worker (it holds 0-2 on /dev/null and its socket)."""

_PR_SET_DUMPABLE = 4
_PR_SET_NAME = 15
_PR_GET_NAME = 16
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SYS_SECCOMP = 317
_SYS_CAPSET = 126
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PROT_EXEC = 0x4

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


class LockdownError(OSError):
    """A layer could not be applied."""


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise LockdownError(err, f"{what}: {os.strerror(err)}")
    return result


def _prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


def name_process(name: bytes) -> None:
    """The name ``ps`` and ``top`` show (the command line stays the zygote's)."""
    with contextlib.suppress(OSError):
        _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


# -- the zygote ----------------------------------------------------------------------------


def enter_namespaces() -> str | None:
    """A new user namespace (this user mapped to itself) with a network namespace that has
    no interface but a down loopback. Must run before any thread exists. ``None`` when
    applied, else why not."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return f"unshare: {os.strerror(ctypes.get_errno())}"
    try:
        for path, text in (
            ("/proc/self/setgroups", "deny"),
            ("/proc/self/uid_map", f"{uid} {uid} 1"),
            ("/proc/self/gid_map", f"{gid} {gid} 1"),
        ):
            with open(path, "w") as file:
                file.write(text)
    except OSError as exc:
        # The namespaces hold anyway; only the ids show as the overflow id.
        return f"id maps: {exc.strerror}"
    return None


def drop_capabilities() -> None:
    """Effective, permitted and inheritable capability sets emptied (root included)."""
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)
    _check(
        _libc.syscall(_SYS_CAPSET, ctypes.c_char_p(header), ctypes.c_char_p(data)),
        "capset",
    )


def landlock_abi() -> int:
    """The kernel's landlock ABI version (0: none)."""
    result = _libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _LANDLOCK_CREATE_RULESET_VERSION
    )
    return max(int(result), 0)


def _landlock_ruleset(abi: int) -> bytes:
    """A ruleset that handles every right the ABI knows, with no rule: nothing allowed."""
    fs_rights = (1 << 13) - 1  # ABI 1: execute … make_sym
    if abi >= 2:
        fs_rights |= 1 << 13  # refer
    if abi >= 3:
        fs_rights |= 1 << 14  # truncate
    if abi >= 5:
        fs_rights |= 1 << 15  # ioctl_dev
    net_rights = 0b11 if abi >= 4 else 0  # bind_tcp, connect_tcp
    scoped = 0b11 if abi >= 6 else 0  # abstract unix sockets, signals
    if abi >= 6:
        return struct.pack("QQQ", fs_rights, net_rights, scoped)
    if abi >= 4:
        return struct.pack("QQ", fs_rights, net_rights)
    return struct.pack("Q", fs_rights)


_SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}
"""The libraries ``pyseccomp`` looks up when imported, by their Linux sonames."""


@functools.cache
def _seccomp_binding() -> Any:
    """``pyseccomp``, imported without its library lookups' cost: it resolves libc and
    libseccomp with ``ctypes.util.find_library``, which runs ``ldconfig -p`` once per name
    (≈3 ms each, on the zygote's start and so on a fresh process's first run). Names the
    dynamic loader already knows are answered directly; anything else is looked up as
    before."""
    import ctypes.util

    lookup = ctypes.util.find_library

    def find_library(name: str) -> str | None:
        soname = _SONAMES.get(name)
        if soname is not None:
            with contextlib.suppress(OSError):
                ctypes.CDLL(soname)
                return soname
        return lookup(name)

    ctypes.util.find_library = find_library
    try:
        import pyseccomp
    finally:
        ctypes.util.find_library = lookup
    return pyseccomp


def zygote_filter() -> Any:
    """The zygote's filter: everything but what no part of a pool ever needs once warm
    (it is trusted code, but its workers inherit this filter under their own)."""
    sc = _seccomp_binding()

    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in (
        *("execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev"),
        *("pidfd_open", "pidfd_getfd", "pidfd_send_signal", "process_madvise"),
        *("socket", "connect", "bind", "listen", "accept", "accept4", "socketpair"),
        *("open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at"),
        *("io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "bpf"),
        *("unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount"),
        *("open_tree", "move_mount", "perf_event_open", "keyctl", "add_key", "request_key"),
        *("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load"),
        *("setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "capset"),
    ):
        f.add_rule(deny, name)
    return f


def worker_filter_bpf() -> bytes:
    """The worker's allow-list as BPF, with ``PID_PLACEHOLDER`` for its pid."""
    sc = _seccomp_binding()

    allow = sc.ALLOW
    f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    # The rules as a binary tree rather than a list: the same verdicts, and the kernel's
    # attach (which runs the filter for every system call number to cache the constant
    # ones) costs ≈ 40 µs less per worker. libseccomp before 2.5 keeps the list.
    with contextlib.suppress(OSError):
        f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)
    for name in (
        # its socket (and 0-2 on /dev/null)
        *("read", "readv", "write", "writev", "recvfrom", "recvmsg", "sendto", "sendmsg"),
        *("poll", "ppoll", "close", "fstat", "lseek", "fcntl", "shutdown"),
        # memory
        *("munmap", "mremap", "madvise", "brk"),
        # futexes, clocks, signals to itself, exit
        *("futex", "set_robust_list", "get_robust_list", "rseq", "sched_yield"),
        *("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday"),
        *("getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid"),
        *("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall"),
        *("getrusage", "times", "getrandom", "uname", "sched_getaffinity", "membarrier"),
        *("exit", "exit_group"),
    ):
        f.add_rule(allow, name)
    # Mappings never executable: no injected code gets an executable page.
    for name in ("mmap", "mprotect"):
        f.add_rule(allow, name, sc.Arg(2, sc.MASKED_EQ, _PROT_EXEC, 0))
    # No clone, clone3, fork or vfork: a worker has one thread and starts neither a
    # thread nor a process (ADR 0036).
    # Signals to itself only; its own rlimits only; naming its threads.
    f.add_rule(allow, "kill", sc.Arg(0, sc.EQ, PID_PLACEHOLDER))
    f.add_rule(allow, "tgkill", sc.Arg(0, sc.EQ, PID_PLACEHOLDER))
    f.add_rule(allow, "prlimit64", sc.Arg(0, sc.EQ, 0))
    for option in (_PR_SET_NAME, _PR_GET_NAME):
        f.add_rule(allow, "prctl", sc.Arg(0, sc.EQ, option))
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb", closefd=True) as sink:
            f.export_bpf(sink)
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read_end)
    program = b"".join(chunks)
    if not program or len(program) % 8 or _placeholder_offsets(program) == []:
        raise LockdownError(errno.EINVAL, "the exported seccomp program is not usable")
    return program


def _placeholder_offsets(program: bytes) -> list[int]:
    """Where the pid placeholder is the ``k`` operand of an instruction."""
    needle = struct.pack("<I", PID_PLACEHOLDER)
    return [i + 4 for i in range(0, len(program), 8) if program[i + 4 : i + 8] == needle]


@dataclass(frozen=True, slots=True)
class ZygoteLayers:
    """What the zygote prepared for its workers."""

    namespaces: str | None
    """``None``: applied; else why not."""
    landlock: int
    """The landlock ABI applied per worker (0: none)."""
    program: bytes
    """The worker filter (empty when seccomp is unavailable)."""
    offsets: tuple[int, ...]
    """Where the worker's pid goes in ``program``."""
    seccomp_error: str | None
    vm_bytes: int
    """The zygote's address-space size, which every fork starts with."""
    loadable: tuple[Any, Any] = (None, None)
    """``program`` in C memory and the ``sock_fprog`` pointing at it, made once: a worker
    only writes its pid in (a copy-on-write page) and loads it."""

    def __post_init__(self) -> None:
        if self.program and self.loadable[0] is None:
            buffer = ctypes.create_string_buffer(self.program, len(self.program))
            fprog = ctypes.create_string_buffer(
                struct.pack("HxxxxxxQ", len(self.program) // 8, ctypes.addressof(buffer)), 16
            )
            object.__setattr__(self, "loadable", (buffer, fprog))

    def report(self) -> dict[str, str]:
        """Each layer: ``on`` or why it is off (``single-use`` and ``clean-environment``
        are the pool's, added there)."""
        on = "on"
        return {
            "no-new-privs": on,
            "seccomp": on if self.program else f"off ({self.seccomp_error})",
            "namespaces": on if self.namespaces is None else f"off ({self.namespaces})",
            "landlock": on if self.landlock else "off (not in this kernel)",
            "rlimits": on,
            "fds": on,
        }


def prepare_zygote(namespaces: str | None) -> ZygoteLayers:
    """After warm-up: build the worker filter, drop capabilities, then lock the zygote."""
    try:
        program = worker_filter_bpf()
        error = None
    except (OSError, ImportError, AttributeError) as exc:
        program, error = b"", f"{type(exc).__name__}: {exc}"
    vm_bytes = 0
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/self/statm", "rb") as statm,
    ):
        vm_bytes = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError):
        drop_capabilities()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    # Inherited by every fork, so no worker pays for them: not dumpable (no ptrace, no
    # /proc/PID/mem of it), the landlock domain, the limits that hold for the zygote too.
    _prctl(_PR_SET_DUMPABLE, 0)
    abi = landlock_abi()
    if abi:
        try:
            _restrict_landlock(abi)
        except OSError:
            abi = 0
    for limit, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_NOFILE, MAX_FDS),
    ):
        resource.setrlimit(limit, (value, value))
    if program:
        try:
            zygote_filter().load()
        except OSError as exc:
            program, error = b"", f"zygote filter: {exc}"
    return ZygoteLayers(
        namespaces=namespaces,
        landlock=abi,
        program=program,
        offsets=tuple(_placeholder_offsets(program)),
        seccomp_error=error,
        vm_bytes=vm_bytes,
    )


# -- a worker --------------------------------------------------------------------------------


def keep_only(sock_fd: int) -> int:
    """In the child right after the fork: the socket becomes fd 3 and every other
    descriptor above 2 (0-2 are /dev/null) is closed. Returns 3."""
    if sock_fd != 3:
        os.dup2(sock_fd, 3, inheritable=False)
        os.close(sock_fd)
    os.closerange(4, 1 << 20)
    return 3


def _restrict_landlock(abi: int) -> None:
    attr = _landlock_ruleset(abi)
    ruleset = _check(
        _libc.syscall(
            _SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0
        ),
        "landlock_create_ruleset",
    )
    try:
        _check(_libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock")
    finally:
        os.close(ruleset)


def lock_down_worker(layers: ZygoteLayers) -> None:
    """The allow-list filter, with this worker's pid in it (threads started afterwards
    inherit it; everything else it inherited from the zygote)."""
    if layers.program:
        buffer, fprog = layers.loadable
        pid = struct.pack("<I", os.getpid())
        for offset in layers.offsets:
            ctypes.memmove(ctypes.addressof(buffer) + offset, pid, 4)
        _check(_libc.syscall(_SYS_SECCOMP, _SECCOMP_SET_MODE_FILTER, 0, fprog), "seccomp")


def limit_worker(layers: ZygoteLayers) -> None:
    """No new process or thread (RLIMIT_NPROC counts both) and an address-space bound
    until its run says how much heap it has."""
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = layers.vm_bytes + ADDRESS_HEADROOM_BYTES + 4 * 1024 * 1024 * 1024
    if layers.vm_bytes and (hard == resource.RLIM_INFINITY or bound < hard):
        resource.setrlimit(resource.RLIMIT_AS, (bound, hard))


def bound_cpu(compute_s: float) -> None:
    """The most CPU time this worker may use in its whole life: its run's compute budget
    plus ``CPU_HEADROOM_S``. Past it the kernel ends the process (SIGXCPU, whose default
    action ends it, then SIGKILL a second later). The server kills a worker long before
    (``process.py``: the budget, a compile allowance and a grace); this bound holds when
    the server is gone and nothing else would stop a slice stuck in a native."""
    soft = math.ceil(time.thread_time() + compute_s + CPU_HEADROOM_S)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))


def bound_address_space(layers: ZygoteLayers, heap_bytes: int) -> None:
    """The run's address-space bound: the zygote's size, its heap limit and headroom."""
    if not layers.vm_bytes:
        return
    bound = layers.vm_bytes + heap_bytes + ADDRESS_HEADROOM_BYTES
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (bound, bound))
