"""Start-up cost of the command line, measured as a user feels it: whole processes.

    python -m benchmarks.bench_cli

Prints medians (ms) of `codemode --version`, `codemode --help`, a cold `codemode run` of a
trivial script (`return 1 + 1`) and of the starter `hello.ts` on the demo spec written by
`codemode init`, each a fresh interpreter. Targets (issue 14): --version and --help under
150 ms, the trivial run well under 500 ms. Also the bare `python -c pass` floor.
"""

from __future__ import annotations

import os
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


def median_process_ms(argv: list[str], cwd: Path, *, repeat: int = REPEAT) -> float:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)  # warm the disk cache
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    codemode = _codemode()
    folder = Path(tempfile.mkdtemp(prefix="codemode-bench-"))
    try:
        subprocess.run([*codemode, "init", str(folder)], capture_output=True, check=True)
        (folder / "trivial.ts").write_text("return 1 + 1;\n", encoding="utf-8")
        print(f"command-line start-up (median of {REPEAT} fresh processes)")
        row(
            "python -c pass (interpreter floor)",
            median_process_ms([sys.executable, "-c", "pass"], folder),
            "ms",
        )
        row(
            "codemode --version",
            median_process_ms([*codemode, "--version"], folder),
            "ms",
            "target < 150",
        )
        row(
            "codemode --help",
            median_process_ms([*codemode, "--help"], folder),
            "ms",
            "target < 150",
        )
        row(
            "codemode run trivial.ts (demo spec, cold)",
            median_process_ms([*codemode, "run", "trivial.ts"], folder),
            "ms",
            "target < 500",
        )
        row(
            "codemode run hello.ts (demo spec, cold)",
            median_process_ms([*codemode, "run", "hello.ts"], folder),
            "ms",
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
