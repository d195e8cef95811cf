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
    provider = make_provider(
        document,
        base_url="https://api.github.com",
        auth={"bearer": "ghp_0123456789abcdefTEST"},
        name="github",
    )
    discovery = await started(provider)
    await provider.aclose()
    assert len(discovery.tools) + len(discovery.skipped) == 1223
    # With `auth`, `base_url` is required (a credential goes only where the spec says), and
    # it replaces every `servers` entry: the upload operation (its own server on another
    # host, skipped without base_url) is sent to the base URL like the rest.
    assert {s.name for s in discovery.skipped} == set()
    catalog = Catalog.build({"github": discovery})
    assert len(catalog.tools) == len(discovery.tools)
    assert catalog.quarantined == ()
    repo = catalog.get("github", "repos/get")
    assert repo is not None and repo.output_schema is not None
    files = generate(catalog, name="github")
    assert files and all(text for text in files.values())
