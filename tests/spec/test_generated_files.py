"""The committed JSON Schema and reference are what the models generate, and every example
and golden spec validates against that schema."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from codemodekit.spec import SpecError, load_spec
from codemodekit.spec.docs import REGENERATE_COMMAND as DOCS_COMMAND
from codemodekit.spec.docs import render_spec_reference
from codemodekit.spec.jsonschema import REGENERATE_COMMAND as SCHEMA_COMMAND
from codemodekit.spec.jsonschema import render_json_schema
from tests.golden import GOLDEN_ROOT

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "schema" / "codemode.schema.json"
DOCS_FILE = ROOT / "docs" / "spec.md"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "codemodekit" / "examples"


def test_committed_schema_is_current() -> None:
    committed = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    if committed != render_json_schema():
        pytest.fail(
            f"{SCHEMA_FILE.relative_to(ROOT)} is out of date with the spec models; "
            f"regenerate it: {SCHEMA_COMMAND}",
            pytrace=False,
        )


def test_committed_reference_is_current() -> None:
    committed = DOCS_FILE.read_text(encoding="utf-8") if DOCS_FILE.exists() else ""
    if committed != render_spec_reference():
        pytest.fail(
            f"{DOCS_FILE.relative_to(ROOT)} is out of date with the spec models; "
            f"regenerate it: {DOCS_COMMAND}",
            pytrace=False,
        )


def test_generation_is_deterministic() -> None:
    assert render_json_schema() == render_json_schema()
    assert render_spec_reference() == render_spec_reference()


@pytest.fixture(scope="module")
def validator() -> Any:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid_specs() -> list[Path]:
    candidates = [ROOT / "codemode.toml.example", EXAMPLES / "codemode.toml"]
    candidates += sorted(GOLDEN_ROOT.glob("*/input/**/codemode.toml"))
    found = []
    for path in candidates:
        try:
            load_spec(path)
        except SpecError:
            continue
        found.append(path)
    return found


VALID = valid_specs()


def test_example_and_template_are_valid_specs() -> None:
    assert ROOT / "codemode.toml.example" in VALID
    assert EXAMPLES / "codemode.toml" in VALID


@pytest.mark.parametrize("path", VALID, ids=[str(p.relative_to(ROOT)) for p in VALID])
def test_valid_spec_validates_against_committed_schema(path: Path, validator: Any) -> None:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]
    assert errors == []


@pytest.mark.parametrize(
    "case",
    [
        "bad_spec_limit_misspelt",
        "bad_spec_limit_negative",
        "bad_spec_limit_string",
        "bad_spec_missing_policy",
        "bad_spec_mcp_command_and_url",
        "bad_spec_mcp_neither_command_nor_url",
        "bad_spec_unknown_source_type",
        "bad_spec_source_name_with_dot",
        "bad_spec_http_keys_on_stdio_source",
    ],
)
def test_schema_rejects_what_the_loader_rejects(case: str, validator: Any) -> None:
    data = tomllib.loads((GOLDEN_ROOT / case / "input" / "codemode.toml").read_text("utf-8"))
    assert list(validator.iter_errors(data)), f"{case} passes the JSON Schema"


def test_example_shows_every_key_of_every_section() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    text = (ROOT / "codemode.toml.example").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    seen: set[str] = set(data) | {f"limits.{k}" for k in data["limits"]}
    seen |= {f"runtime.{k}" for k in data["runtime"]}
    seen |= {f"policy.{k}" for k in data["policy"]}
    for rule in data["policy"]["rules"]:
        seen |= {f"rule.{k}" for k in rule}
    for source in data["sources"].values():
        seen |= {f"{source['type']}.{k}" for k in source}
        seen |= {f"auth.{k}" for k in source.get("auth", {})}
    defs = schema["$defs"]
    expected = set(schema["properties"])
    for prefix, name in [
        ("limits", "Limits"),
        ("runtime", "Runtime"),
        ("policy", "Policy"),
        ("rule", "PolicyRule"),
        ("mcp", "McpSource"),
        ("openapi", "OpenApiSource"),
        ("python", "PythonSource"),
        ("auth", "OpenApiAuth"),
    ]:
        expected |= {f"{prefix}.{k}" for k in defs[name]["properties"]}
    assert expected - seen == set()
