"""Every benchmark in one run: `python -m benchmarks.run_all [NAME ...]` (medians and ratios).

Each module runs as its own `__main__` block, in this one process, one after another, so the
figures come from one run on one machine state.
"""

from __future__ import annotations

import runpy
import sys
import traceback

MODULES = [
    "benchmarks.bench_core",
    "benchmarks.bench_engine",
    "benchmarks.profile_call",
    "benchmarks.bench_spec",
    "benchmarks.bench_compiler",
    "benchmarks.bench_sandbox",
    "benchmarks.bench_catalog",
    "benchmarks.bench_codegen",
    "benchmarks.bench_search",
    "benchmarks.bench_mcp",
    "benchmarks.bench_openapi",
    "benchmarks.bench_yaml_load",
    "benchmarks.bench_http_replies",
    "benchmarks.bench_cli",
    "benchmarks.bench_operations",
]


def main() -> int:
    only = sys.argv[1:]
    failed = 0
    for name in MODULES:
        if only and not any(o in name for o in only):
            continue
        print(f"== {name}", flush=True)
        saved = sys.argv
        sys.argv = [name]
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            if stop.code not in (0, None):
                failed += 1
        except Exception:
            failed += 1
            traceback.print_exc()
        finally:
            sys.argv = saved
        print(flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
