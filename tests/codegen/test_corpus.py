"""Real third-party schemas nobody here wrote: every projection must satisfy tsc --strict.

The catalogs come from real OpenAPI documents through the OpenAPI provider: the
@readme/oas-examples set (dozens of small documents exercising odd schema features) and
GitHub's REST description from @octokit/openapi (about 1,200 operations).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen import generate
from codemodekit.providers.base import Discovery, ToolSpec
from codemodekit.providers.factory import providers_from_spec
from codemodekit.spec import parse_spec
from tests.codegen.helpers import assert_typechecks
from tests.conftest import NODE_MODULES, missing, node_package


def _discover(documents: dict[str, Path]) -> Catalog:
    lines = ['version = 1\nname = "corpus"\n[policy]\ndefault = "deny"\n']
    for name, path in documents.items():
        lines.append(f'[sources."{name}"]\ntype = "openapi"\ndocument = {json.dumps(str(path))}\n')
    spec = parse_spec("".join(lines))

    async def run() -> dict[str, Discovery]:
        found: dict[str, Discovery] = {}
        for provider in providers_from_spec(spec):
            try:
                found[provider.name] = await provider.start(lambda _d: None)
            except Exception:  # a document the provider rejects is not this test's subject
                continue
            finally:
                await provider.aclose()
        return found

    return Catalog.build(asyncio.run(run()))


def _write_and_check(catalog: Catalog, tmp_path: Path) -> dict[str, str]:
    files = generate(catalog, name="corpus")
    for path, text in files.items():
        (tmp_path / path).write_text(text, encoding="utf-8")
    assert_typechecks([[tmp_path / p] for p in sorted(files) if p.endswith(".d.ts")])
    return files


def test_readme_oas_examples_project_to_strict_typescript(tmp_path: Path) -> None:
    root = node_package("@readme/oas-examples")
    documents = {
        f"v{version.replace('.', '')}-{path.stem}": path
        for version in ("3.0", "3.1")
        for path in sorted((root / version / "json").glob("*.json"))
    }
    catalog = _discover(documents)
    assert len(catalog.sources) >= 20 and len(catalog.available_tools) >= 150
    files = _write_and_check(catalog, tmp_path)
    assert "declare const tools" in files["tools.d.ts"]


@pytest.mark.slow
def test_github_rest_api_projects_to_strict_typescript(tmp_path: Path) -> None:
    document = node_package("@octokit/openapi") / "generated" / "api.github.com.json"
    catalog = _discover({"github": document})
    assert len(catalog.available_tools) > 1000
    files = _write_and_check(catalog, tmp_path)
    lock = json.loads(files["catalog.json"])
    shards = lock["sources"]["github"]["shards"]
    assert shards and all(len(names) <= 100 for names in shards.values())
    assert sum(len(names) for names in shards.values()) == len(catalog.available_tools)


def _schema_files() -> list[Path]:
    """Real JSON Schemas that ship inside installed packages (each with many definitions)."""
    import importlib.util

    found: list[Path] = []
    for package, relative in (
        ("openapi_spec_validator", "resources/schemas/v2.0/schema.json"),
        ("openapi_spec_validator", "resources/schemas/v3.0/schema.json"),
        ("openapi_spec_validator", "resources/schemas/v3.1/schema.json"),
        ("jsonschema_specifications", "schemas/draft7/metaschema.json"),
        ("jsonschema_specifications", "schemas/draft4/metaschema.json"),
    ):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin is not None:
            path = Path(spec.origin).parent / relative
            if path.is_file():
                found.append(path)
    mcp_apps = NODE_MODULES / "@modelcontextprotocol/ext-apps/dist/src/generated/schema.json"
    if mcp_apps.is_file():
        found.append(mcp_apps)
    return found


def test_every_definition_of_real_json_schemas_projects_to_strict_typescript(
    tmp_path: Path,
) -> None:
    """Each definition of the OpenAPI 2/3.0/3.1 meta-schemas, two JSON Schema meta-schemas
    (recursive through ``$ref: "#"``) and the MCP Apps schema becomes a tool."""
    discoveries: dict[str, Discovery] = {}
    for path in _schema_files():
        document = json.loads(path.read_text("utf-8"))
        key = "definitions" if "definitions" in document else "$defs"
        context = {k: v for k, v in document.items() if k in ("$schema", "$id", "id", key)}
        tools = [ToolSpec(name="root", input_schema=document)]
        for name in document.get(key, {}):
            schema = {**context, "$ref": f"#/{key}/{name}"}
            tools.append(ToolSpec(name=name, input_schema=schema, output_schema=schema))
        discoveries[f"{path.parent.name}-{path.stem}"] = Discovery(tools=tuple(tools))
    if not discoveries:
        missing(
            "the JSON Schemas packaged in openapi_spec_validator and jsonschema_specifications",
            "pip install -e '.[dev]'",
        )
    catalog = Catalog.build(discoveries)
    assert len(catalog.available_tools) >= 90
    _write_and_check(catalog, tmp_path)
