"""Spec loading cost: parse + validate + resolve, and the error path with positions.

    python -m benchmarks.bench_spec

Prints medians (ms) for: the full example spec (every key), the starter template, a spec
with 200 sources, a file with one error (position scan + message), and the same with
eight errors. Loading happens once per process start, so the target is "unnoticeable"
(well under 10 ms for realistic files).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks._util import median_ms, row
from codemodekit.spec import SpecError, parse_spec

ROOT = Path(__file__).resolve().parents[1]


def _many_sources(count: int) -> str:
    parts = ['version = 1\nname = "big"\n[policy]\ndefault = "deny"\n']
    for index in range(count):
        parts.append(
            f'[sources.s{index}]\ntype = "mcp"\ncommand = "server-{index}"\n'
            f'args = ["--port", "{index}"]\nenv = {{ TOKEN = "${{TOKEN_{index}}}" }}\n'
        )
    return "".join(parts)


def _load_failing(text: str) -> None:
    try:
        parse_spec(text)
    except SpecError as exc:
        str(exc)
    else:  # pragma: no cover - the inputs are malformed on purpose
        raise AssertionError("expected a SpecError")


def main() -> None:
    example = (ROOT / "codemode.toml.example").read_text(encoding="utf-8")
    template = (ROOT / "src/codemodekit/examples/codemode.toml").read_text(encoding="utf-8")
    big = _many_sources(200)
    one_error = example.replace("compute_time_ms = 5000", "comptue_time_ms = 5000")
    eight_errors = one_error.replace("= 100", "= -1").replace("= 8 ", "= 0 ")
    eight_errors = eight_errors.replace('type = "python"', 'type = "pyhton"')
    eight_errors = eight_errors.replace("stack_bytes = 1048576", 'stack_bytes = "1"')
    print("spec loading (median of 200)")
    row("codemode.toml.example (every key)", median_ms(lambda: parse_spec(example)), "ms")
    row("starter template", median_ms(lambda: parse_spec(template)), "ms")
    row("200 mcp sources", median_ms(lambda: parse_spec(big), repeat=50), "ms")
    row("example with 1 error (scan + message)", median_ms(lambda: _load_failing(one_error)), "ms")
    row("example with several errors", median_ms(lambda: _load_failing(eight_errors)), "ms")


if __name__ == "__main__":
    main()
