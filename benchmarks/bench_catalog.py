"""Catalog build and validation cost on generated, realistic tool schemas.

    python benchmarks/bench_catalog.py [--runs 5] [--sizes 1000 10000] [--before DIR]

Prints, per catalog size: the median build time (normalize + prove enforceable + freeze +
revision), the share of it spent normalizing and proving schemas, what compiling every
validator would add (done lazily, on each tool's first call: docs/adr/0026), and the
per-call validation cost for a valid and an invalid instance (median µs). Target: 10,000
tools in under 1 s. Ends with the JSON-Schema-Test-Suite pass rate when the suite has been
fetched.

``--before DIR`` also times the same builds with the ``codemodekit`` package found in
``DIR`` (e.g. ``git archive <rev> src | tar -x -C /tmp/before`` then ``--before
/tmp/before/src``), in a subprocess, interleaved with this tree's runs, and prints the ratio.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from codemodekit.catalog.catalog import Catalog
from codemodekit.providers.base import Discovery, ToolSpec
from codemodekit.schema import (
    DRAFT7,
    DRAFT202012,
    SchemaUnsupported,
    compile_validator,
    normalize_schema,
)
from codemodekit.schema.normalize import prepare_schema

try:
    from codemodekit.schema.enforce import surely_compiles
except ImportError:  # imported by --before from a tree that predates it
    surely_compiles = None  # type: ignore[assignment]

_WORDS = [
    "repository",
    "issue",
    "label",
    "milestone",
    "comment",
    "author",
    "branch",
    "commit",
    "release",
    "deployment",
    "environment",
    "project",
    "member",
    "team",
    "token",
    "pipeline",
    "artifact",
    "status",
    "priority",
    "owner",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def tool_schema(rng: random.Random, index: int) -> dict[str, Any]:
    """An input schema shaped like real MCP/OpenAPI tools: nested, enums, arrays, $defs."""
    properties: dict[str, Any] = {
        "owner": {"type": "string", "description": _text(rng, 8), "minLength": 1},
        "repo": {"type": "string", "description": _text(rng, 6), "pattern": "^[A-Za-z0-9_.-]+$"},
        "state": {
            "type": "string",
            "enum": ["open", "closed", "all"],
            "default": "open",
            "description": _text(rng, 5),
        },
        "labels": {
            "type": "array",
            "items": {"type": "string", "maxLength": 50},
            "maxItems": 20,
            "description": _text(rng, 7),
        },
        "page": {"type": "integer", "minimum": 1, "maximum": 100, "description": _text(rng, 4)},
        "filter": {
            "type": "object",
            "description": _text(rng, 9),
            "properties": {
                "since": {"type": "string", "format": "date-time"},
                "assignee": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "sort": {"type": "string", "enum": ["created", "updated", "comments"]},
            },
            "additionalProperties": False,
        },
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": ["owner"]}
    if index % 2 == 0:
        properties["author"] = {"$ref": "#/$defs/User"}
        properties["reviewers"] = {"type": "array", "items": {"$ref": "#/$defs/User"}}
        schema["$defs"] = {
            "User": {
                "type": "object",
                "description": _text(rng, 5),
                "properties": {
                    "login": {"type": "string"},
                    "id": {"type": "integer"},
                    "manager": {"$ref": "#/$defs/User"},
                },
                "required": ["login"],
            }
        }
    for extra in range(rng.randint(0, 4)):
        properties[f"option_{extra}"] = {"type": "boolean", "description": _text(rng, 5)}
    return schema


def discoveries(count: int, sources: int = 10) -> dict[str, Discovery]:
    rng = random.Random(count)
    per_source: dict[str, list[ToolSpec]] = {f"source_{s}": [] for s in range(sources)}
    for i in range(count):
        spec = ToolSpec(
            name=f"tool_{i}",
            description=_text(rng, 20),
            input_schema=tool_schema(rng, i),
            annotations={"readOnlyHint": i % 3 == 0},
        )
        per_source[f"source_{i % sources}"].append(spec)
    return {name: Discovery(tools=tuple(tools)) for name, tools in per_source.items()}


def _median_ms(fn: Any, runs: int) -> float:
    """Median CPU time of this process (ms): other work on a shared machine inflates wall
    time but not this; ``_median_wall_ms`` reports wall time beside it."""
    samples = []
    for _ in range(runs):
        gc.collect()
        start = time.process_time()
        fn()
        samples.append((time.process_time() - start) * 1000)
    return statistics.median(samples)


def _median_wall_ms(fn: Any, runs: int) -> float:
    samples = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _median_us(fn: Any, repeat: int = 2000, rounds: int = 7) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(samples)


SUITE = Path(__file__).resolve().parents[1] / ".cache" / "corpora" / "JSON-Schema-Test-Suite"


def suite_report() -> None:
    """Pass rate of the JSON-Schema-Test-Suite required tests through the validator layer."""
    if not (SUITE / "tests").is_dir():
        print("JSON-Schema-Test-Suite: missing (python tests/corpora/fetch_jsonschema_suite.py)")
        return
    for folder, dialect in (("draft2020-12", DRAFT202012), ("draft7", DRAFT7)):
        cases = tests = passed = quarantined_cases = quarantined_tests = 0
        for path in sorted((SUITE / "tests" / folder).glob("*.json")):
            for case in json.loads(path.read_text(encoding="utf-8")):
                cases += 1
                tests += len(case["tests"])
                try:
                    validator = compile_validator(
                        normalize_schema(case["schema"], default_dialect=dialect)
                    )
                except SchemaUnsupported:
                    quarantined_cases += 1
                    quarantined_tests += len(case["tests"])
                    continue
                passed += sum(validator.is_valid(t["data"]) is t["valid"] for t in case["tests"])
        runnable = tests - quarantined_tests
        print(
            f"JSON-Schema-Test-Suite {folder}: {passed}/{runnable} runnable tests pass "
            f"({passed / runnable:.1%}); quarantined (remote $ref / remote meta-schema): "
            f"{quarantined_cases} of {cases} cases, {quarantined_tests} of {tests} tests; "
            f"overall {passed / tests:.1%}"
        )


def _build_samples(size: int, runs: int) -> list[float]:
    """CPU ms of ``runs`` builds of a ``size``-tool catalog (after one warm-up build)."""
    found = discoveries(size)
    Catalog.build(found)
    samples = []
    for _ in range(runs):
        gc.collect()
        start = time.process_time()
        Catalog.build(found)
        samples.append((time.process_time() - start) * 1000)
    return samples


def _before_samples(source_dir: str, size: int, runs: int) -> list[float]:
    """The same builds with the package in ``source_dir``, in a fresh interpreter."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([source_dir, root]))
    code = (
        "import json, sys; from benchmarks.bench_catalog import _build_samples; "
        f"print(json.dumps(_build_samples({size}, {runs})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    samples: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="catalog build and validation benchmark")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--before", metavar="DIR", help="also time the package found in DIR")
    args = parser.parse_args(argv)
    for size in args.sizes:
        found = discoveries(size)
        catalog = Catalog.build(found)
        assert len(catalog.available_tools) == size, catalog.quarantined[:1]
        if args.before:
            # Interleaved, one build at a time, so that a change of load hits both sides.
            now: list[float] = []
            before: list[float] = []
            for _ in range(args.runs):
                now += _build_samples(size, 1)
                before += _before_samples(args.before, size, 1)
            build = statistics.median(now)
            old = statistics.median(before)
            print(
                f"catalog build, {size:>6} tools: median {build:7.1f} ms CPU here, "
                f"{old:7.1f} ms CPU with {args.before}: {old / build:.2f}x faster"
            )
        build = _median_ms(lambda found=found: Catalog.build(found), args.runs)
        wall = _median_wall_ms(lambda found=found: Catalog.build(found), args.runs)
        specs = [spec for d in found.values() for spec in d.tools]
        prepared = [prepare_schema(spec.input_schema) for spec in specs]
        compile_ms = _median_ms(
            lambda prepared=prepared: [compile_validator(p) for p in prepared], args.runs
        )
        normalize_ms = _median_ms(
            lambda specs=specs: [prepare_schema(spec.input_schema) for spec in specs], args.runs
        )
        prove_ms = _median_ms(
            lambda prepared=prepared: [surely_compiles(p) for p in prepared], args.runs
        )
        print(
            f"catalog build, {size:>6} tools: median {build:7.1f} ms CPU ({wall:.1f} ms wall, "
            f"{build / size * 1000:.1f} µs/tool); normalize {normalize_ms:.1f} ms "
            f"({normalize_ms / build:.0%}), prove enforceable {prove_ms:.1f} ms "
            f"({prove_ms / build:.0%}) [target 10,000 < 1000 ms]; compiling every validator "
            f"(lazily, at first call) would add {compile_ms:.1f} ms"
        )
    catalog = Catalog.build(discoveries(1000))
    pair = catalog.validators("source_0", "tool_0")
    assert pair is not None
    validator = pair[0]
    valid = {
        "owner": "octo",
        "repo": "kit",
        "state": "open",
        "labels": ["bug", "p1"],
        "filter": {"sort": "updated", "assignee": None},
        "author": {"login": "a", "manager": {"login": "b"}},
    }
    invalid = dict(valid, state="merged", labels=["x" * 60])
    assert validator.first_error(valid) is None and validator.first_error(invalid) is not None
    print(
        f"validation per call: valid {_median_us(lambda: validator.first_error(valid)):.2f} µs, "
        f"invalid (first_error) {_median_us(lambda: validator.first_error(invalid)):.2f} µs, "
        f"is_valid(invalid) {_median_us(lambda: validator.is_valid(invalid)):.2f} µs"
    )
    suite_report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
