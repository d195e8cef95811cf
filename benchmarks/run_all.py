"""Every benchmark in one run: `python -m benchmarks.run_all` (medians and ratios)."""

from __future__ import annotations

import importlib
import sys
import traceback

MODULES = [
    "benchmarks.bench_core",
    "benchmarks.bench_spec",
    "benchmarks.bench_compiler",
    "benchmarks.bench_sandbox",
    "benchmarks.bench_catalog",
    "benchmarks.bench_codegen",
    "benchmarks.bench_search",
    "benchmarks.bench_mcp",
    "benchmarks.bench_openapi",
]


def main() -> int:
    only = sys.argv[1:]
    failed = 0
    for name in MODULES:
        if only and not any(o in name for o in only):
            continue
        print(f"== {name}")
        try:
            importlib.import_module(name).main()
        except Exception:
            failed += 1
            traceback.print_exc()
        print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
