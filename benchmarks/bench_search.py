"""Search quality and latency on real tool descriptions.

    python benchmarks/bench_search.py [--misses] [--no-latency] [--fit-only]

Prints recall@1, recall@5 and MRR@10 over the fixture catalog (GitHub REST operations +
petstore) for the two kinds of query sets (docs/adr/0031):

- FIT: every set the ranking was designed or tuned on (``queries.json`` with its
  development and validation parts, ``queries_heldout.json``,
  ``queries_heldout_2026_12.json``, ``queries_fit_h20c.json``,
  ``queries_fit_h20c_b.json``, ``queries_fit_h20d.json``,
  ``queries_fit_h20d_b.json``); weights and rules are chosen on these only;
- FLOOR: ``queries_heldout_h20.json``, written before the ranking changes of issue 20 and
  never used to choose anything; the figure to believe;
- FLOOR h20c: ``queries_heldout_h20c.json``, a second never-tuned set, committed before the
  ranking changes of ADR 0034 and scored only after them.

``--fit-only`` prints the fit rows alone: the switch to use while changing the ranking, so
that no floor figure is seen, let alone chosen on.

Then how often the response admits a weak match: on needs no tool answers (should be
high) and on real needs (should be low). ``--misses`` lists the fit needs whose expected
tool is not first (never the floor set's: looking at those would be tuning on them).
Then the median query latency over catalogs of about 10,000 and 47,000 tools (the fixture
replicated under distinct source names), with the one-off index build time, warm index.
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
    FIT_FILES,
    FLOOR_FILES,
    copies_for,
    fixture_catalog,
    fixture_queries,
)

from codemodekit.search.search import index_for, search_catalog  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "search"


def _load(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text("utf-8"))
    return cases


def _score(catalog: Any, cases: list[dict[str, Any]]) -> tuple[float, float, float, list[Any]]:
    at1 = at5 = 0
    reciprocal = 0.0
    misses = []
    for case in cases:
        keys = [f"{h.source}.{h.name}" for h in search_catalog(catalog, case["query"]).hits]
        ranks = [keys.index(e) + 1 for e in case["expected"] if e in keys]
        best = min(ranks) if ranks else None
        at1 += best == 1
        at5 += best is not None and best <= 5
        reciprocal += 1.0 / best if best else 0.0
        if best != 1:
            misses.append((case["query"], case["expected"], keys[:5]))
    n = len(cases)
    return at1 / n, at5 / n, reciprocal / n, misses


def quality(show_misses: bool = False, fit_only: bool = False) -> None:
    catalog = fixture_catalog()
    print(f"catalog: {len(catalog.available_tools)} tools")
    fit_parts: list[tuple[str, list[dict[str, Any]]]] = []
    by_set: dict[str, list[dict[str, Any]]] = {}
    for case in fixture_queries():
        by_set.setdefault(case.get("set", "development"), []).append(case)
    fit_parts += [(f"queries.json {name}", cases) for name, cases in by_set.items()]
    fit_parts += [(n, _load(n)) for n in FIT_FILES]
    fit = [c for _, cases in fit_parts for c in cases]
    floor_all = _load(FLOOR_FILES[0])
    floor = [c for c in floor_all if c["expected"]]
    floor_c = _load(FLOOR_FILES[1])
    rows = [*(("  fit: " + n, c) for n, c in fit_parts), ("FIT (all)", fit)]
    if not fit_only:
        rows += [("FLOOR (h20)", floor), ("FLOOR (h20c)", floor_c)]
    for name, cases in rows:
        at1, at5, mrr, misses = _score(catalog, cases)
        print(
            f"{name:>40} ({len(cases):>3} needs): recall@1 {at1:.3f}  recall@5 {at5:.3f}  "
            f"MRR@10 {mrr:.3f}"
        )
        if show_misses and name == "FIT (all)":
            for query, expected, got in misses:
                print(f"    miss: {query!r}: expected {expected}, top 5 {got}")
    weak_rows = [("fit", _load("queries_misses_fit.json"), fit)]
    if not fit_only:
        weak_rows.append(("floor", [c for c in floor_all if not c["expected"]], floor))
    for name, misses_set, real in weak_rows:
        caught = sum(search_catalog(catalog, c["query"]).weak for c in misses_set)
        wrong = sum(search_catalog(catalog, c["query"]).weak for c in real)
        print(
            f"{'weak match (' + name + ')':>40}: {caught} of {len(misses_set)} needs no tool "
            f"answers flagged; {wrong} of {len(real)} real needs flagged"
        )


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
    quality(show_misses="--misses" in sys.argv, fit_only="--fit-only" in sys.argv)
    if "--no-latency" not in sys.argv:
        latency(10_000)
        latency(47_000)
