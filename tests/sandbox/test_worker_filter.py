"""The worker's seccomp allow-list is exported by libseccomp as a binary tree of rules
(``CTL_OPTIMIZE`` = 2, which the kernel attaches faster). The tree must give every system
call the verdict the plain, rule-by-rule program gives: both programs are run here on every
system call number, for the native and a foreign architecture, with argument values on both
sides of each rule's constants (the containment tests show what those verdicts do to an
attacker in a real worker).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator

import pytest

from codemodekit.sandbox import _lockdown

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
X32_SYSCALL_BIT = 0x40000000
VALUES = (
    0,
    1,
    _lockdown._PROT_EXEC,
    _lockdown._PROT_EXEC | 3,
    _lockdown._PR_SET_NAME,
    _lockdown._PR_GET_NAME,
    _lockdown.PID_PLACEHOLDER,
    _lockdown.PID_PLACEHOLDER + 1,
    2**32 - 1,
    2**32 + _lockdown.PID_PLACEHOLDER,  # the same low word, another high word
)


def _seccomp_data(nr: int, arch: int, args: tuple[int, ...]) -> bytes:
    return struct.pack("<IIQ6Q", nr, arch, 0x1000, *args)


def _run(program: bytes, data: bytes) -> int:
    """The classic BPF a seccomp filter is, run on ``data`` (the kernel's semantics for the
    instructions libseccomp emits; any other instruction fails the test)."""
    a = x = 0
    memory = [0] * 16
    pc = 0
    while True:
        code, jt, jf, k = struct.unpack_from("<HBBI", program, pc * 8)
        pc += 1
        if code == 0x20:  # ld [k]
            a = struct.unpack_from("<I", data, k)[0]
        elif code == 0x00:  # ld #k
            a = k
        elif code == 0x01:  # ldx #k
            x = k
        elif code == 0x60:  # ld M[k]
            a = memory[k]
        elif code == 0x61:  # ldx M[k]
            x = memory[k]
        elif code == 0x02:  # st M[k]
            memory[k] = a
        elif code == 0x03:  # stx M[k]
            memory[k] = x
        elif code == 0x54:  # and #k
            a &= k
        elif code == 0x07:  # tax
            x = a
        elif code == 0x87:  # txa
            a = x
        elif code == 0x05:  # ja k
            pc += k
        elif code in (0x15, 0x25, 0x35, 0x45, 0x1D, 0x2D, 0x3D, 0x4D):
            operand = k if code & 0x08 == 0 else x
            test = {0x10: a == operand, 0x20: a > operand, 0x30: a >= operand}.get(
                code & 0xF0, a & operand != 0
            )
            pc += jt if test else jf
        elif code == 0x06:  # ret #k
            return int(k)
        elif code == 0x16:  # ret a
            return a
        else:
            raise AssertionError(f"an instruction this check does not know: {code:#x}")


@pytest.fixture(scope="module")
def programs(monkeypatch_module: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    tree = _lockdown.worker_filter_bpf()
    sc = _lockdown._seccomp_binding()
    monkeypatch_module.setattr(sc.SyscallFilter, "set_attr", lambda *_args: None)
    plain = _lockdown.worker_filter_bpf()
    return tree, plain


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_the_tree_is_not_the_plain_program(programs: tuple[bytes, bytes]) -> None:
    tree, plain = programs
    assert tree != plain  # else the comparison below proves nothing


@pytest.mark.parametrize("arch", [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386], ids=["x86_64", "i386"])
def test_every_system_call_gets_the_verdict_of_the_plain_program(
    programs: tuple[bytes, bytes], arch: int
) -> None:
    tree, plain = programs
    numbers = [*range(512), *(X32_SYSCALL_BIT | n for n in range(0, 512, 7)), 2**32 - 1]
    allowed = 0
    for nr in numbers:
        for first, third in itertools.product(VALUES, VALUES):
            data = _seccomp_data(nr, arch, (first, 0, third, 0, 0, 0))
            verdict = _run(tree, data)
            assert verdict == _run(plain, data), (nr, arch, first, third)
            allowed += verdict == 0x7FFF0000  # SECCOMP_RET_ALLOW
    if arch == AUDIT_ARCH_X86_64:
        assert allowed > 0
    else:
        assert allowed == 0  # no system call of another architecture gets through


ALLOW, EPERM = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
KNOWN = [
    # (system call, number, first argument, third argument, verdict)
    ("read", 0, 3, 0, ALLOW),
    ("mmap without PROT_EXEC", 9, 0, 3, ALLOW),
    ("mmap with PROT_EXEC", 9, 0, 7, EPERM),
    ("mprotect with PROT_EXEC", 10, 0, _lockdown._PROT_EXEC, EPERM),
    ("socket", 41, 2, 0, EPERM),
    ("connect", 42, 3, 0, EPERM),
    ("clone", 56, 0, 0, EPERM),
    ("fork", 57, 0, 0, EPERM),
    ("execve", 59, 0, 0, EPERM),
    ("kill itself", 62, _lockdown.PID_PLACEHOLDER, 0, ALLOW),
    ("kill another", 62, _lockdown.PID_PLACEHOLDER + 1, 0, EPERM),
    ("kill another, same low word", 62, 2**32 + _lockdown.PID_PLACEHOLDER, 0, EPERM),
    ("ptrace", 101, 16, 0, EPERM),
    ("prctl PR_SET_NAME", 157, _lockdown._PR_SET_NAME, 0, ALLOW),
    ("prctl PR_SET_DUMPABLE", 157, _lockdown._PR_SET_DUMPABLE, 0, EPERM),
    ("openat", 257, 0, 0, EPERM),
    ("prlimit64 of itself", 302, 0, 0, ALLOW),
    ("prlimit64 of another", 302, 1, 0, EPERM),
    ("pidfd_getfd", 438, 3, 0, EPERM),
]


@pytest.mark.parametrize(
    ("call", "nr", "first", "third", "verdict"), KNOWN, ids=[k[0] for k in KNOWN]
)
def test_both_programs_say_what_the_allow_list_says(
    programs: tuple[bytes, bytes], call: str, nr: int, first: int, third: int, verdict: int
) -> None:
    data = _seccomp_data(nr, AUDIT_ARCH_X86_64, (first, 0, third, 0, 0, 0))
    assert [_run(p, data) for p in programs] == [verdict, verdict], call
