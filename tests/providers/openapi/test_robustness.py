"""Damaged documents: every mutation either loads (skips carry reasons) or is unavailable."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.errors import SourceUnavailable
from tests.conftest import node_package
from tests.providers.openapi.conftest import make_provider, started

REPLACEMENTS: list[Any] = [
    None,
    0,
    -1,
    "x",
    "",
    True,
    [],
    {},
    [1, "a"],
    {"$ref": "#/nope"},
    {"$ref": "https://example.invalid/x.json"},
    {"$ref": "#/components"},
    {"type": "bogus"},
    {"$ref": "#"},
]


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_nodes(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.extend(_nodes(child, (*path, index)))
    return out


def _mutated(document: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        nodes = [p for p in _nodes(out) if p]
        target = rng.choice(nodes)
        parent = out
        for key in target[:-1]:
            parent = parent[key]
        parent[target[-1]] = copy.deepcopy(rng.choice(REPLACEMENTS))
    return out


@pytest.mark.parametrize("name", ["petstore.json", "parameters-style.json", "security.json"])
async def test_mutated_documents_never_crash(name: str, tmp_path: Path) -> None:
    root = node_package("@readme/oas-examples")
    rng = random.Random(name)
    loaded = 0
    for version in ("3.0", "3.1"):
        original = json.loads((root / version / "json" / name).read_text())
        for index in range(40):
            path = tmp_path / f"{version}-{index}.json"
            path.write_text(json.dumps(_mutated(original, rng)))
            provider = make_provider(path, base_url="http://127.0.0.1:9", auth={"api_key": "k"})
            try:
                discovery = await started(provider)
            except SourceUnavailable as exc:
                assert str(exc)
                continue
            finally:
                await provider.aclose()
            loaded += 1
            assert all(s.reason for s in discovery.skipped)
            Catalog.build({"api": discovery})
    assert loaded > 0
