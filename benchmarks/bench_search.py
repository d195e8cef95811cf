"""Search quality and latency on real tool descriptions.

    python benchmarks/bench_search.py

Prints recall@1, recall@5 and MRR of ``tests/fixtures/search/queries.json`` (tuned) and of
the two held-out sets over the fixture catalog (GitHub REST operations + petstore; pass
``--misses`` to list the tuned queries whose expected tool is not first), then the median query latency over
catalogs of about 10,000 and 47,000 tools (the fixture replicated under distinct source
names), with the one-off index build time. Queries run against a warm index: the index is
built once per catalog revision and cached.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.search.catalog_fixture import (  # noqa: E402
    copies_for,
    fixture_catalog,
    fixture_queries,
)

from codemodekit.search.search import index_for, search_catalog  # noqa: E402

HELD_OUT = {
    "held-out-1": ROOT / "tests" / "fixtures" / "search" / "queries_heldout.json",
    "held-out-2": ROOT / "tests" / "fixtures" / "search" / "queries_heldout_2026_12.json",
}


def quality(show_misses: bool = True) -> None:
    catalog = fixture_catalog()
    print(f"catalog: {len(catalog.available_tools)} tools")
    by_set: dict[str, list[dict[str, Any]]] = {}
    for case in fixture_queries():
        by_set.setdefault(case.get("set", "development"), []).append(case)
    sets = [*by_set.items(), ("all tuned", list(fixture_queries()))]
    for name, path in HELD_OUT.items():
        sets.append((name, json.loads(path.read_text("utf-8"))))
    for name, queries in sets:
        at1 = at5 = 0
        reciprocal = 0.0
        misses = []
        for case in queries:
            response = search_catalog(catalog, case["query"], limit=10)
            keys = [f"{h.source}.{h.name}" for h in response.hits]
            ranks = [keys.index(e) + 1 for e in case["expected"] if e in keys]
            best = min(ranks) if ranks else None
            at1 += best == 1
            if best is not None and best <= 5:
                at5 += 1
            if best != 1:
                misses.append((case["query"], case["expected"], keys[:5]))
            reciprocal += 1.0 / best if best else 0.0
        n = len(queries)
        print(
            f"{name:>11} ({n} queries): recall@1 {at1 / n:.3f}  recall@5 {at5 / n:.3f}  "
            f"MRR@10 {reciprocal / n:.3f}"
        )
        if show_misses and name in by_set:
            for query, expected, got in misses:
                print(f"    miss: {query!r}: expected {expected}, top 5 {got}")


def latency(size: int) -> None:
    catalog = fixture_catalog(copies_for(size))
    started = time.perf_counter()
    index_for(catalog)
    build_ms = (time.perf_counter() - started) * 1000
    queries = [case["query"] for case in fixture_queries()]
    samples = []
    for _ in range(3):
        for query in queries:
            started = time.perf_counter()
            search_catalog(catalog, query)
            samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    print(
        f"{len(catalog.available_tools):>6} tools: index build {build_ms:.0f} ms; query median "
        f"{statistics.median(samples):.2f} ms, p90 {samples[int(len(samples) * 0.9)]:.2f} ms, "
        f"max {samples[-1]:.2f} ms ({len(samples)} queries)"
    )


if __name__ == "__main__":
    quality(show_misses="--misses" in sys.argv)
    latency(10_000)
    latency(47_000)
