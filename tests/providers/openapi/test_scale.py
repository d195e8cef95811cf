"""GitHub's REST description (1,223 operations) loads into a catalog and generates artifacts."""

from __future__ import annotations

import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen.artifacts import generate
from tests.conftest import node_package
from tests.providers.openapi.conftest import make_provider, started


@pytest.mark.slow
async def test_github_rest_description() -> None:
    document = node_package("@octokit/openapi") / "generated" / "api.github.com.json"
    provider = make_provider(document, auth={"bearer": "token"}, name="github")
    discovery = await started(provider)
    await provider.aclose()
    assert len(discovery.tools) + len(discovery.skipped) == 1223
    # A raw binary upload needs an explicit binary argument shape: skipped with the reason.
    assert {s.name for s in discovery.skipped} == {"repos/upload-release-asset"}
    catalog = Catalog.build({"github": discovery})
    assert len(catalog.tools) == len(discovery.tools)
    assert catalog.quarantined == ()
    repo = catalog.get("github", "repos/get")
    assert repo is not None and repo.output_schema is not None
    files = generate(catalog, name="github")
    assert files and all(text for text in files.values())
