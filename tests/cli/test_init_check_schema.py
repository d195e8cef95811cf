"""`codemode init`, `check` and `schema` through the CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

from codemodekit.cli import main
from codemodekit.errors import ToolError
from codemodekit.examples import demo
from tests.conftest import node_tool

ROOT = Path(__file__).resolve().parents[2]
FILES = ("tools.d.ts", "check.ts")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("init", "check", "schema"):
        assert command in out


def test_init_then_check_passes_in_an_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "init")
    assert (code, err) == (0, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "codemode.schema.json",
        "codemode.toml",
        "hello.ts",
        "tsconfig.json",
    ]
    spec_text = (tmp_path / "codemode.toml").read_text(encoding="utf-8")
    assert spec_text.startswith("#:schema ./codemode.schema.json\n")
    schema = json.loads((tmp_path / "codemode.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(tomllib.loads(spec_text), schema)
    assert "wrote codemode.toml" in out

    code, out, err = run(capsys, "check")
    assert (code, err) == (0, ""), err
    assert "codemode.toml: spec is valid" in out
    assert "demo  ok" in out
    # Which walls the processes that run model code are under (ADR 0028).
    sandbox = next(line for line in out.splitlines() if line.startswith("sandbox: "))
    assert sandbox.startswith("sandbox: contained: "), sandbox
    for layer in ("clean-environment", "single-use", "no-new-privs", "seccomp"):
        assert layer in sandbox.split(";")[0], sandbox
    assert "4 tools" in out


def test_init_into_a_new_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "a" / "b"
    code, out, _ = run(capsys, "init", str(target))
    assert code == 0
    assert (target / "codemode.toml").is_file()
    assert f"cd {target} && codemode check" in out
    code, _, err = run(capsys, "check", "--offline", "-c", str(target / "codemode.toml"))
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("folder", "name"),
    [("shop-agent", "shop-agent"), ("My Project", "My-Project"), ("  ", "code-mode")],
)
def test_init_names_the_project_after_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str, name: str
) -> None:
    # The name becomes the MCP server's (and the generated plugin's): not "demo-code-mode".
    target = tmp_path / folder
    code, _, _ = run(capsys, "init", str(target))
    assert code == 0
    spec = tomllib.loads((target / "codemode.toml").read_text("utf-8"))
    assert spec["name"] == name
    code, _, err = run(capsys, "check", "--offline", "-c", str(target / "codemode.toml"))
    assert (code, err) == (0, "")


def test_init_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "codemode.toml"
    spec.write_text("# mine\n", encoding="utf-8")
    code, out, err = run(capsys, "init", str(tmp_path))
    assert code == 1
    assert out == ""
    assert "already exists" in err and "--force" in err
    assert spec.read_text(encoding="utf-8") == "# mine\n"
    assert not (tmp_path / "hello.ts").exists()

    code, _, _ = run(capsys, "init", str(tmp_path), "--force")
    assert code == 0
    assert "[sources.demo]" in spec.read_text(encoding="utf-8")


def test_check_without_a_spec_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "check")
    assert code == 2
    assert out == ""
    assert "codemode.toml not found" in err and "codemode init" in err


def test_check_reports_a_missing_document_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "codemode.toml"
    spec.write_text(
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.pets]\ntype = "openapi"\ndocument = "pets.yaml"\n',
        encoding="utf-8",
    )
    code, _, err = run(capsys, "check", "--offline", "-c", str(spec))
    assert code == 0  # offline: this machine lacking a file is a warning
    assert err.startswith(f"warning: {spec}:7:12: sources.pets.document: file not found: pets.yaml")
    code, out, err = run(capsys, "check", "-c", str(spec))
    assert code == 1
    assert err.startswith(f"{spec}:7:12: sources.pets.document: file not found: pets.yaml")
    assert "unavailable" in out


def test_check_reports_unavailable_sources_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "codemode.toml"
    spec.write_text(
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.demo]\ntype = "python"\nmodule = "codemodekit.examples.demo"\n'
        '[sources.missing]\ntype = "python"\nmodule = "no_such_module_for_codemode_check"\n',
        encoding="utf-8",
    )
    code, out, err = run(capsys, "check", "-c", str(spec))
    assert code == 1
    lines = out.splitlines()
    assert any(line.split()[:2] == ["demo", "ok"] for line in lines), out
    assert any(line.split()[:2] == ["missing", "unavailable"] for line in lines), out
    assert "no_such_module_for_codemode_check" in out
    assert "unavailable: missing" in err
    assert "Traceback" not in err


def test_check_lists_quarantined_tools_with_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = f"cm_check_quarantine_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(
        "from codemodekit.providers.python.local import define_tool\n"
        "good = define_tool(description='ok', execute=lambda a: 1,\n"
        "    input_schema={'type': 'object'})\n"
        "broken = define_tool(description='bad schema', execute=lambda a: 1,\n"
        "    input_schema={'type': 'object', 'properties': {'x': {'$ref': '#/$defs/nope'}}})\n",
        encoding="utf-8",
    )
    spec = tmp_path / "codemode.toml"
    spec.write_text(
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        f'[sources.local]\ntype = "python"\nmodule = "{module}"\n',
        encoding="utf-8",
    )
    code, out, _ = run(capsys, "check", "-c", str(spec))
    assert code == 0
    assert "quarantined tools" in out
    assert "local.broken:" in out
    assert "1 callable tool," in out


def test_schema_prints_the_committed_schema_and_it_validates_the_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "schema")
    assert code == 0
    assert out == (ROOT / "schema" / "codemode.schema.json").read_text(encoding="utf-8")
    schema = json.loads(out)
    example = tomllib.loads((ROOT / "codemode.toml.example").read_text(encoding="utf-8"))
    jsonschema.validate(example, schema, cls=jsonschema.Draft202012Validator)


def test_demo_tools_are_deterministic_and_refuse_clearly() -> None:
    first = demo.search_products.execute({"query": "coffee", "in_stock_only": True})
    again = demo.search_products.execute({"query": "coffee", "in_stock_only": True})
    assert first == again
    assert [p["sku"] for p in first["items"]] == ["MUG-001", "MUG-002", "KTL-010"]
    assert demo.get_product.execute({"sku": "TEA-100"})["price_cents"] == 950
    with pytest.raises(ToolError, match="no product with sku"):
        demo.get_product.execute({"sku": "NOPE"})
    assert demo.search_products.annotations["readOnlyHint"] is True
    assert demo.add_to_cart.annotations["readOnlyHint"] is False


async def test_starter_script_runs_against_the_starter_spec(tmp_path: Path) -> None:
    from codemodekit.run import CodeMode
    from codemodekit.spec import load_spec

    assert main(["init", str(tmp_path)]) == 0
    async with CodeMode.from_spec(load_spec(tmp_path / "codemode.toml")) as cm:
        result = await cm.run((tmp_path / "hello.ts").read_text(encoding="utf-8"))
    assert result.ok, result.diagnostic
    assert result.value["cheapest"] == "Stoneware mug"


def test_console_entry_point_prints_the_pinned_error_without_traceback() -> None:
    case = ROOT / "tests" / "golden" / "bad_spec_limit_misspelt"
    done = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check"],
        cwd=case / "input",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2  # a spec error, as in every command
    assert done.stdout == ""
    assert done.stderr == (case / "expected" / "stderr.txt").read_text(encoding="utf-8")


async def test_starter_script_type_checks_against_the_generated_declarations(
    tmp_path: Path,
) -> None:
    tsc = node_tool("tsc")
    from codemodekit.run import CodeMode
    from codemodekit.spec import load_spec

    assert main(["init", str(tmp_path)]) == 0
    async with CodeMode.from_spec(load_spec(tmp_path / "codemode.toml")) as cm:
        declarations = cm.generate()["tools.d.ts"]
    (tmp_path / "tools.d.ts").write_text(declarations, encoding="utf-8")
    # The script is the body of an async function, as the sandbox runs it.
    body = (tmp_path / "hello.ts").read_text(encoding="utf-8")
    (tmp_path / "check.ts").write_text(
        "declare const console: { log(...args: unknown[]): void };\n"
        f"async function main() {{\n{body}\n}}\nvoid main;\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [str(tsc), "--noEmit", "--strict", "--target", "es2022", "--lib", "es2022", *FILES],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_warns_about_policy_rules_that_match_no_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "codemode.toml"
    spec.write_text(
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\nrules = [\n'
        '  { tools = "demo.get_*", decision = "allow" },\n'
        '  { tools = "demo.delete_*", decision = "deny" },\n'
        '  { tools = "dmeo.*", decision = "allow" },\n]\n'
        '[sources.demo]\ntype = "python"\nmodule = "codemodekit.examples.demo"\n',
        encoding="utf-8",
    )
    code, _, err = run(capsys, "check", "-c", str(spec))
    assert code == 0  # warnings do not fail the check
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {spec}:8:13: policy.rules[2].tools: matches no tool: there is no source "
        "`dmeo`; did you mean `demo`?",
        f"warning: {spec}:7:13: policy.rules[1].tools: matches none of the 4 tools of the "
        "sources that are up",
    ]
