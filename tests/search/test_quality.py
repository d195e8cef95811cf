"""Search quality on real tool descriptions and scale (fixture: tests/fixtures/search)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import node_package
from tests.fixtures.search.catalog_fixture import (
    copies_for,
    fixture_catalog,
    fixture_catalog_built,
    fixture_queries,
    fixture_tools,
)

from codemodekit import CodeMode, load_spec
from codemodekit.search.search import search_catalog

# Measured 0.93 (94 of 101) on the fixture and 0.93 (90 of 97) through the OpenAPI provider
# when this floor was set; see benchmarks/bench_search.py and docs/adr/0012.
RECALL_AT_5_FLOOR = 0.85
# The ranking rules of 2026-12-01 (ADR 0012) were tuned on queries.json and
# queries_heldout.json: recall@1 0.901 (91 of 101) on queries.json.
RECALL_AT_1_FLOOR = 0.90
HELD_OUT = Path(__file__).parents[1] / "fixtures" / "search" / "queries_heldout.json"
HELD_OUT_2 = Path(__file__).parents[1] / "fixtures" / "search" / "queries_heldout_2026_12.json"


def test_fixture_is_real_and_large_enough() -> None:
    tools = fixture_tools()
    assert len(tools) >= 1000
    assert len({(t["source"], t["name"]) for t in tools}) == len(tools)
    queries = fixture_queries()
    assert len(queries) >= 50
    names = {f"{t['source']}.{t['name']}" for t in tools}
    for case in queries:
        assert set(case["expected"]) <= names, case


def test_recall_at_5_on_agent_phrased_queries() -> None:
    catalog = fixture_catalog_built()
    assert len(catalog.available_tools) == len(fixture_tools())
    found = 0
    for case in fixture_queries():
        response = search_catalog(catalog, case["query"], limit=5)
        keys = {f"{hit.source}.{hit.name}" for hit in response.hits}
        found += bool(keys & set(case["expected"]))
    recall = found / len(fixture_queries())
    assert recall >= RECALL_AT_5_FLOOR, f"recall@5 {recall:.3f}"


def _ranks(cases: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> list[int | None]:
    catalog = fixture_catalog_built()
    out: list[int | None] = []
    for case in cases:
        keys = [f"{h.source}.{h.name}" for h in search_catalog(catalog, case["query"]).hits]
        out.append(next((i + 1 for i, k in enumerate(keys) if k in case["expected"]), None))
    return out


def test_recall_at_1_on_the_development_queries() -> None:
    ranks = _ranks(fixture_queries())
    at1 = sum(r == 1 for r in ranks) / len(ranks)
    at5 = sum(r is not None and r <= 5 for r in ranks) / len(ranks)
    assert at1 >= RECALL_AT_1_FLOOR, f"recall@1 {at1:.3f}"
    assert at5 >= 0.95, f"recall@5 {at5:.3f} (0.931 before the recall@1 work)"


def test_the_untuned_held_out_set() -> None:
    # queries_heldout_2026_12.json: 30 needs written before the 2026-12-01 ranking rules and
    # never tuned on. Blind before them: recall@1 0.767, recall@5 0.933; after: 0.700 and
    # 0.900 (reported in docs/adr/0012; this floor only catches a collapse).
    cases = json.loads(HELD_OUT_2.read_text("utf-8"))
    names = {f"{t['source']}.{t['name']}" for t in fixture_tools()}
    assert len(cases) == 30 and all(set(c["expected"]) <= names for c in cases)
    ranks = _ranks(cases)
    assert sum(r is not None and r <= 5 for r in ranks) / len(ranks) >= 0.80


def test_recall_at_5_on_the_second_held_out_set() -> None:
    # queries_heldout.json: 30 needs written after the ranking existed, scored blind at
    # 0.800 (24 of 30); two generic rules followed (a plural or "all/every" need prefers a
    # listing tool; "stop <verb>ing" finds ``un<verb>``), after which it scores 0.900.
    catalog = fixture_catalog_built()
    cases = json.loads((HELD_OUT).read_text("utf-8"))
    names = {f"{t['source']}.{t['name']}" for t in fixture_tools()}
    found = 0
    for case in cases:
        assert set(case["expected"]) <= names, case
        response = search_catalog(catalog, case["query"], limit=5)
        found += bool({f"{hit.source}.{hit.name}" for hit in response.hits} & set(case["expected"]))
    recall = found / len(cases)
    assert len(cases) == 30 and recall >= RECALL_AT_5_FLOOR, f"recall@5 {recall:.3f}"


@pytest.mark.slow
def test_a_47000_tool_catalog_answers() -> None:
    catalog = fixture_catalog(copies_for(47_000))
    assert len(catalog) >= 47_000
    response = search_catalog(catalog, "list open pull requests of a repository", limit=10)
    assert response.total == len(catalog)
    assert len(response.hits) == 10 and response.matched > 10
    # Each replica is its own source: filtering one gives the same ranking as the fixture.
    one = search_catalog(catalog, "list open pull requests of a repository", source="github_7")
    assert "tools.github_7.pulls_list" in [hit.address for hit in one.hits[:5]]
    exact = search_catalog(catalog, "github_30.pulls_list")
    assert exact.hits[0].address == "tools.github_30.pulls_list"


@pytest.mark.slow
async def test_recall_through_the_openapi_provider(tmp_path: Path) -> None:
    """The same needs against the catalog the real OpenAPI provider builds (full descriptions)."""
    document = node_package("@octokit/openapi") / "generated" / "api.github.com.json"
    (tmp_path / "codemode.toml").write_text(
        f"""
version = 1
name = "github"
[policy]
default = "deny"
[sources.github]
type = "openapi"
document = {json.dumps(str(document))}
base_url = "https://api.github.com"
"""
    )
    async with CodeMode.from_spec(load_spec(tmp_path / "codemode.toml")) as cm:
        catalog = cm.catalog
    by_operation = {
        t.provenance.get("operation"): f"{t.source}.{t.name}" for t in catalog.available_tools
    }
    fixture = {f"{t['source']}.{t['name']}": t["operation"] for t in fixture_tools()}
    found = total = 0
    for case in fixture_queries():
        expected = {by_operation.get(fixture[e]) for e in case["expected"]} - {None}
        if not expected:
            continue  # petstore needs: not in this catalog
        total += 1
        hits = search_catalog(catalog, case["query"], limit=5).hits
        found += bool({f"{h.source}.{h.name}" for h in hits} & expected)
    assert total >= 90
    assert found / total >= RECALL_AT_5_FLOOR, f"recall@5 {found / total:.3f}"
