"""Start-up cost of the command line, measured as a user feels it: whole processes.

    python -m benchmarks.bench_cli

Prints medians (ms) of `codemode --version`, `codemode --help`, a cold `codemode run` of a
trivial script (`return 1 + 1`) and of the starter `hello.ts` on the demo spec written by
`codemode init`, each a fresh interpreter. Targets (issue 14): --version and --help under
150 ms, the trivial run well under 500 ms. Also the bare `python -c pass` floor.

Each row gives the wall-clock median and, after it, the median CPU time (user + system) of
the process: on a shared, loaded machine the wall clock also counts waiting for a core, the
CPU time is what the command itself costs. The load average is printed first.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._util import row

REPEAT = 15


def _codemode() -> list[str]:
    """The installed console script when present (what users run), else `python -m`."""
    script = Path(sys.executable).with_name("codemode")
    return [str(script)] if script.exists() else [sys.executable, "-m", "codemodekit"]


def median_process_ms(argv: list[str], cwd: Path, *, repeat: int = REPEAT) -> tuple[float, float]:
    """(wall, CPU) medians in ms of ``argv`` run as a fresh process."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)  # warm the disk cache
    wall, cpu = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def _row(label: str, argv: list[str], cwd: Path, target: str = "") -> None:
    wall, cpu = median_process_ms(argv, cwd)
    row(label, wall, "ms", f"(CPU {cpu:.0f} ms){'  ' + target if target else ''}")


def main() -> None:
    codemode = _codemode()
    folder = Path(tempfile.mkdtemp(prefix="codemode-bench-"))
    try:
        subprocess.run([*codemode, "init", str(folder)], capture_output=True, check=True)
        (folder / "trivial.ts").write_text("return 1 + 1;\n", encoding="utf-8")
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"command-line start-up (median of {REPEAT} fresh processes; load average {load})")
        _row("python -c pass (interpreter floor)", [sys.executable, "-c", "pass"], folder)
        _row("codemode --version", [*codemode, "--version"], folder, "target < 150")
        _row("codemode --help", [*codemode, "--help"], folder, "target < 150")
        _row(
            "codemode run trivial.ts (demo spec, cold)",
            [*codemode, "run", "trivial.ts"],
            folder,
            "target < 500",
        )
        _row("codemode run hello.ts (demo spec, cold)", [*codemode, "run", "hello.ts"], folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
