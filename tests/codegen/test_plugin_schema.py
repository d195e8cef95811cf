"""The generated Agent Plugin against the official Agent Plugins 1.0 schemas and the Agent
Skills rules (schemas: tests/fixtures/agent_plugins, copied from shared/)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.cli import main
from codemodekit.codegen import generate_plugin, skill_dir
from codemodekit.providers.base import Discovery, ToolSpec
from tests.codegen.helpers import catalog_from_json

HERE = Path(__file__).parent
SCHEMAS = HERE.parent / "fixtures" / "agent_plugins"
SHARED = HERE.parents[2] / "shared" / "schemas" / "agent-plugins-1.0.0"
SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _catalog_named(*sources: str, tools: int = 2) -> Catalog:
    return Catalog.build(
        {
            s: Discovery(
                tools=tuple(
                    ToolSpec(name=f"tool_{i}", description=f"Tool {i}.", input_schema=_OBJECT)
                    for i in range(tools)
                )
            )
            for s in sources
        }
    )


def _front_matter(skill: str) -> dict[str, Any]:
    match = re.match(r"---\n(.*?)\n---\n", skill, re.S)
    assert match, skill[:200]
    fields: dict[str, Any] = {}
    for line in match.group(1).splitlines():
        key, _, value = line.partition(": ")
        fields[key] = json.loads(value) if value.startswith('"') else value
    return fields


def _check_plugin(files: dict[str, str], name: str) -> None:
    plugin = json.loads(files["plugin.json"])
    mcp = json.loads(files["mcp.json"])
    for validator, document in (
        (_validator("plugin.schema.json"), plugin),
        (_validator("mcp.schema.json"), mcp),
    ):
        errors = [e.message for e in validator.iter_errors(document)]
        assert not errors, errors
    assert plugin["$schema"] == "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
    assert mcp["$schema"] == "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
    (server,) = mcp["mcpServers"].values()
    assert server["type"] == "stdio" and server["args"][0] == "serve"
    skill = skill_dir(name)
    meta = _front_matter(files[f"{skill}/SKILL.md"])
    assert SKILL_NAME.match(meta["name"]) and len(meta["name"]) <= 64, meta["name"]
    assert skill == f"skills/{meta['name']}"  # the skill's folder carries its name
    assert 0 < len(meta["description"]) <= 1024
    references = [
        p.removeprefix(f"{skill}/") for p in files if p.startswith(f"{skill}/references/")
    ]
    assert "references/examples.md" in references
    assert "references/catalog-metadata.json" in references
    for path in references:
        assert f"`{path}`" in files[f"{skill}/SKILL.md"], path


def test_the_golden_plugin_validates() -> None:
    document = json.loads(
        (HERE.parent / "golden" / "plugin_basic" / "input" / "codegen.json").read_text()
    )
    _check_plugin(
        generate_plugin(catalog_from_json(document), name=document["name"]), document["name"]
    )


@pytest.mark.parametrize(
    "name",
    [
        "ops",
        "Deployment API",
        "--weird..name--",
        "ünïcode tools",
        "x" * 200,
        "a-" * 80,
        "Very Long Product Name " * 6,
    ],
)
def test_names_and_descriptions_respect_the_limits(name: str) -> None:
    sources = [f"source_with_a_rather_long_name_{i}" for i in range(40)]
    _check_plugin(generate_plugin(_catalog_named(*sources), name=name), name)


def test_two_long_names_sharing_a_prefix_get_distinct_skills() -> None:
    first, second = "p" * 100 + "1", "p" * 100 + "2"
    assert skill_dir(first) != skill_dir(second)


def test_a_large_source_lists_its_shards(tmp_path: Path) -> None:
    files = generate_plugin(_catalog_named("big", tools=600), name="big")
    _check_plugin(files, "big")
    shards = sorted(p for p in files if re.search(r"/references/tools\.big\..*d\.ts$", p))
    assert shards[0].endswith("/tools.big.d.ts")
    assert len(shards) > 1
    skill = files[f"{skill_dir('big')}/SKILL.md"]
    for shard in shards[1:]:
        name = shard.rsplit("/", 1)[-1]
        assert f"`references/{name}`: a shard of a large source" in skill, name


def test_codemode_generate_plugin_writes_valid_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cmtools.py").write_text(
        "from codemodekit import define_tool\n__all__ = ['echo']\n"
        "echo = define_tool(description='Echo.', input_schema={'type': 'object'},"
        " execute=lambda a: a)\n"
    )
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "demo"\n[policy]\ndefault = "allow"\n'
        '[sources.app]\ntype = "python"\nmodule = "cmtools"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = tmp_path / "plugin"
    assert main(["generate", "-c", str(tmp_path / "codemode.toml"), "--plugin", str(plugin)]) == 0
    files = {
        str(p.relative_to(plugin)): p.read_text("utf-8") for p in plugin.rglob("*") if p.is_file()
    }
    _check_plugin(files, "demo")


def test_the_copied_schemas_are_the_official_ones() -> None:
    # SHA256SUMS holds the digests of the official files (taken from shared/, see the
    # README there): a copy edited to make a test pass no longer matches them.
    official = dict(
        reversed(line.split()) for line in (SCHEMAS / "SHA256SUMS").read_text().splitlines()
    )
    assert sorted(official) == ["mcp.schema.json", "plugin.schema.json"]
    for name, digest in official.items():
        copy = (SCHEMAS / name).read_bytes()
        assert hashlib.sha256(copy).hexdigest() == digest, name
        assert json.loads(copy)["$id"] == f"https://agent-plugins.org/schemas/1.0.0/{name}"
        if SHARED.is_dir():  # beside the project's shared folder: the same bytes there
            assert (SHARED / name).read_bytes() == copy, name
