"""Search quality on real tool descriptions and scale (fixture: tests/fixtures/search)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import node_package
from tests.fixtures.search.catalog_fixture import (
    FIT_FILES,
    FLOOR_FILES,
    copies_for,
    fixture_catalog,
    fixture_catalog_built,
    fixture_queries,
    fixture_tools,
)

from codemodekit import CodeMode, load_spec
from codemodekit.search.search import search_catalog

FIXTURES = Path(__file__).parents[1] / "fixtures" / "search"
# Two kinds of query sets (tests/fixtures/search/README.md, docs/adr/0031):
# - the FIT set: every set the ranking was ever designed or tuned on (queries.json,
#   queries_heldout.json, queries_heldout_2026_12.json, queries_fit_h20c.json,
#   queries_fit_h20c_b.json, queries_fit_h20d.json, queries_fit_h20d_b.json) and
#   queries_misses_fit.json;
# - the FLOOR sets, queries_heldout_h20.json and queries_heldout_h20c.json: each written
#   before a ranking change (issue 20's; ADR 0034's) and committed on its own first; never
#   used to choose a rule, a word or a weight.
FLOOR_FILE, FLOOR_FILE_2 = (FIXTURES / name for name in FLOOR_FILES)
RECALL_AT_5_FLOOR = 0.85
"""Recall@5 of the needs through the real OpenAPI provider (full descriptions)."""


def _load(name: str | Path) -> list[dict[str, Any]]:
    path = name if isinstance(name, Path) else FIXTURES / name
    cases: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))
    return cases


def _fit_needs() -> list[dict[str, Any]]:
    return [*fixture_queries(), *(c for f in FIT_FILES for c in _load(f))]


def _recall(cases: list[dict[str, Any]]) -> tuple[float, float]:
    ranks = _ranks(cases)
    at1 = sum(r == 1 for r in ranks) / len(ranks)
    at5 = sum(r is not None and r <= 5 for r in ranks) / len(ranks)
    return at1, at5


def test_fixture_is_real_and_large_enough() -> None:
    tools = fixture_tools()
    assert len(tools) >= 1000
    assert len({(t["source"], t["name"]) for t in tools}) == len(tools)
    queries = fixture_queries()
    assert len(queries) >= 50
    names = {f"{t['source']}.{t['name']}" for t in tools}
    for case in queries:
        assert set(case["expected"]) <= names, case


def _ranks(cases: list[dict[str, Any]]) -> list[int | None]:
    catalog = fixture_catalog_built()
    out: list[int | None] = []
    for case in cases:
        keys = [f"{h.source}.{h.name}" for h in search_catalog(catalog, case["query"]).hits]
        out.append(next((i + 1 for i, k in enumerate(keys) if k in case["expected"]), None))
    return out


def test_recall_on_the_fit_set() -> None:
    # 297 needs; measured recall@1 0.801, recall@5 0.946 (0.731 / 0.902 before docs/adr/0034).
    # The 161 older needs: 0.882 / 0.975 (0.870 / 0.969 before ADR 0034; 0.839 / 0.963
    # before issue 20's changes, with the one-query vocabulary that issue 22 removed). The
    # 71 of queries_fit_h20c.json and 65 of queries_fit_h20c_b.json were each scored blind
    # first (0.648 / 0.845 and 0.538 / 0.831), then used to choose ADR 0034's rules: after,
    # 0.803 / 0.944 and 0.600 / 0.877.
    # docs/adr/0038 added 100 needs scored blind first (queries_fit_h20d.json 0.600 /
    # 0.883, queries_fit_h20d_b.json 0.425 / 0.800 on the ranking before it) and its rules:
    # the 297 needs above 0.832 / 0.953 after, all 397 0.766 / 0.927.
    needs = _fit_needs()
    assert len(needs) == 397
    at1, at5 = _recall(needs)
    assert at1 >= 0.76, f"recall@1 {at1:.3f}"
    assert at5 >= 0.92, f"recall@5 {at5:.3f}"


def _floor_recall(path: str | Path, count: int) -> tuple[float, float]:
    """Recall@1 and @5 over the ``count`` needs of a floor set (each names catalog tools)."""
    cases = _load(path)
    names = {f"{t['source']}.{t['name']}" for t in fixture_tools()}
    assert all(set(c["expected"]) <= names for c in cases)
    needs = [c for c in cases if c["expected"]]
    assert len(needs) == count
    return _recall(needs)


def test_recall_on_the_floor_set_never_tuned_on() -> None:
    # 44 needs, never tuned on. Measured before the changes of issue 20: recall@1 0.659,
    # recall@5 0.864; after ADR 0031: 0.682 / 0.864; after ADR 0034: 0.773 / 0.932. Issue
    # 20 asks for 0.85 / 0.95: NOT met. This floor catches a regression; raise it only
    # with a change chosen on the fit sets.
    at1, at5 = _floor_recall(FLOOR_FILE, 44)
    assert at1 >= 0.77, f"recall@1 {at1:.3f}"
    assert at5 >= 0.93, f"recall@5 {at5:.3f}"


def test_recall_on_the_second_floor_set_never_tuned_on() -> None:
    # 115 needs, committed before any change of ADR 0034 and scored once, after it:
    # recall@1 0.557, recall@5 0.843 (the ranking before ADR 0034: 0.478 / 0.800, measured
    # afterwards). Issue 20's 0.85 / 0.95: NOT met. A floor against regressions.
    at1, at5 = _floor_recall(FLOOR_FILE_2, 115)
    assert at1 >= 0.55, f"recall@1 {at1:.3f}"
    assert at5 >= 0.84, f"recall@5 {at5:.3f}"


def test_a_need_no_tool_answers_is_reported_as_a_weak_match() -> None:
    catalog = fixture_catalog_built()
    misses = _load("queries_misses_fit.json")
    flagged = [c["query"] for c in misses if search_catalog(catalog, c["query"]).weak]
    # Measured on the fit side: 6 of 8 misses flagged, 15 of 297 real needs (16 before
    # docs/adr/0034; the rule itself is unchanged); with the 100 needs of docs/adr/0038,
    # freer in their words, 28 of 397.
    assert len(flagged) >= 6, flagged
    real = [c["query"] for c in _fit_needs() if search_catalog(catalog, c["query"]).weak]
    assert len(real) <= 28, real
    picture = search_catalog(catalog, "show a picture", limit=3)
    assert picture.weak and picture.note is not None
    closest = ", ".join(h.address for h in picture.hits)
    assert picture.note.startswith(f"no tool matches 'show a picture' well; closest: {closest}.")
    assert picture.to_json()["weak"] is True


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
