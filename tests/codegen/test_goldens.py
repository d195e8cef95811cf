"""Golden cases: every generated artifact is pinned and every golden ``.d.ts`` type-checks.

A case is ``tests/golden/<case>/input/codegen.json`` (a catalog: sources → tools), an
optional ``input/check.ts`` that uses the declarations (``@ts-expect-error`` lines prove the
types reject what the schema rejects), and ``expected/`` with the generated files.
With ``"plugin": true`` the case pins ``generate_plugin`` output instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemodekit.codegen import ALL_TOOLS_FILE, generate, generate_plugin, skill_dir
from tests.codegen.helpers import assert_typechecks, catalog_from_json
from tests.golden import GOLDEN_ROOT, assert_golden

CASES = sorted(p.name for p in GOLDEN_ROOT.iterdir() if (p / "input" / "codegen.json").is_file())


def _generated(case: str) -> dict[str, str]:
    document = json.loads((GOLDEN_ROOT / case / "input" / "codegen.json").read_text("utf-8"))
    catalog = catalog_from_json(document)
    if document.get("plugin"):
        return generate_plugin(catalog, name=document["name"])
    return generate(catalog, name=document["name"])


@pytest.mark.parametrize("case", CASES)
def test_generated_files_match_golden(case: str) -> None:
    assert_golden(GOLDEN_ROOT / case / "expected", _generated(case))


def test_every_golden_declaration_passes_tsc_strict() -> None:
    groups: list[list[Path]] = []
    for case in CASES:
        expected = GOLDEN_ROOT / case / "expected"
        check = GOLDEN_ROOT / case / "input" / "check.ts"
        for dts in sorted(expected.rglob("*.d.ts")):
            group = [dts]
            if dts.name == ALL_TOOLS_FILE and check.is_file():
                group.append(check)
            groups.append(group)
    assert len(groups) >= len(CASES)
    assert_typechecks(groups)


def test_cases_cover_the_required_constructs() -> None:
    # The issue lists these; a rename should not silently drop one.
    for required in (
        "ts_objects",
        "ts_index_signatures",
        "ts_arrays_tuples",
        "ts_literals",
        "ts_unions",
        "ts_nullable",
        "ts_refs",
        "ts_jsdoc",
        "ts_unknown",
        "catalog_multi_source",
        "catalog_name_collisions",
        "catalog_quarantined",
        "catalog_large_source",
        "plugin_basic",
        "real_server_everything",
    ):
        assert required in CASES


def test_plugin_golden_holds_the_skill_layout() -> None:
    files = _generated("plugin_basic")
    skill = skill_dir("ops")
    for path in (
        "plugin.json",
        "mcp.json",
        f"{skill}/SKILL.md",
        f"{skill}/references/runtime.md",
        f"{skill}/references/result-contract.md",
        f"{skill}/references/examples.md",
        f"{skill}/references/tools.d.ts",
        f"{skill}/references/catalog-metadata.json",
    ):
        assert path in files
