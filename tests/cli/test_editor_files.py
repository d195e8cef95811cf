"""What `codemode generate` writes for editors: scripts type-check with the real `tsc -p`.

A project made by `codemode init` + `codemode generate` is opened the way an editor opens it:
the TypeScript compiler from tests/js/node_modules, run on the generated tsconfig.json (and
on the project's own tsconfig.json, which an editor finds beside the script).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from codemodekit.cli import main
from tests.conftest import NODE_MODULES, node_tool

HERE = Path(__file__).parent


def tsc(project: Path, *args: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [str(node_tool("tsc")), *args, "--pretty", "false"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, [line for line in (done.stdout + done.stderr).splitlines() if line]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    node_tool("tsc")  # skips without Node.js or the compiler
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "."]) == 0
    assert main(["generate"]) == 0
    return tmp_path


def wrong_argument(project: Path, name: str = "bad.ts") -> Path:
    """``hello.ts`` with a number where ``search_products`` takes a string."""
    hello = (project / "hello.ts").read_text(encoding="utf-8")
    assert 'query: "coffee"' in hello
    path = project / name
    path.write_text(hello.replace('query: "coffee"', "query: 42"), encoding="utf-8")
    return path


def test_generate_writes_the_editor_files_and_lists_them_in_its_manifest(project: Path) -> None:
    out = project / "codemode"
    manifest = json.loads((out / "catalog.json").read_text(encoding="utf-8"))
    assert {"globals.d.ts", "tsconfig.json", "tools.d.ts"} <= set(manifest["files"])
    assert "declare const console" in (out / "globals.d.ts").read_text(encoding="utf-8")
    assert "./codemode/tsconfig.json" in (project / "tsconfig.json").read_text(encoding="utf-8")


def test_the_starter_script_has_no_errors_under_the_generated_tsconfig(project: Path) -> None:
    assert tsc(project, "-p", "codemode/tsconfig.json") == (0, [])
    # The project's tsconfig.json (the one an editor finds beside hello.ts) extends it.
    assert tsc(project, "-p", ".") == (0, [])
    # ... and it really covers hello.ts: the compiler lists it.
    code, files = tsc(project, "-p", ".", "--listFilesOnly")
    assert code == 0
    assert str(project / "hello.ts") in files
    assert str(project / "codemode" / "globals.d.ts") in files


def test_a_wrong_argument_type_to_a_tool_is_exactly_the_one_error(project: Path) -> None:
    wrong_argument(project)
    expected = ["bad.ts(4,50): error TS2322: Type 'number' is not assignable to type 'string'."]
    # hello.ts and bad.ts declare the same top-level names: each script is its own module.
    assert tsc(project, "-p", "codemode/tsconfig.json") == (2, expected)
    assert tsc(project, "-p", ".") == (2, expected)


def test_scripts_in_subfolders_and_a_custom_out_folder(project: Path) -> None:
    (project / "jobs").mkdir()
    wrong_argument(project, "jobs/bad.ts")
    assert main(["generate", "--out", "types/gen"]) == 0
    config = json.loads((project / "types/gen/tsconfig.json").read_text(encoding="utf-8"))
    assert config["include"] == ["../../**/*.ts"]
    expected = [
        "jobs/bad.ts(4,50): error TS2322: Type 'number' is not assignable to type 'string'."
    ]
    assert tsc(project, "-p", "types/gen/tsconfig.json") == (2, expected)


def test_a_plugin_folder_under_the_project_does_not_redeclare_tools(project: Path) -> None:
    # The plugin's references hold tools*.d.ts files that each declare `tools`.
    assert main(["generate", "--plugin", "plugin"]) == 0
    assert list((project / "plugin").rglob("tools.d.ts"))
    assert tsc(project, "-p", ".") == (0, [])


def test_generate_check_reports_drift_in_the_editor_files(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = project / "codemode"
    assert main(["generate", "--check"]) == 0
    (out / "tsconfig.json").write_text('{"compilerOptions": {}}\n', encoding="utf-8")
    (out / "globals.d.ts").unlink()
    capsys.readouterr()
    assert main(["generate", "--check"]) == 1
    diff = capsys.readouterr().out
    assert "--- codemode/tsconfig.json" in diff
    assert "+++ codemode/globals.d.ts (generated)" in diff
    assert main(["generate"]) == 0
    assert main(["generate", "--check"]) == 0
    assert tsc(project, "-p", ".") == (0, [])


def test_init_keeps_an_existing_tsconfig_even_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = '{ "compilerOptions": { "strict": false } }\n'
    (tmp_path / "tsconfig.json").write_text(mine, encoding="utf-8")
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "tsconfig.json").read_text(encoding="utf-8") == mine
    out = capsys.readouterr().out
    assert "kept" in out and '"extends": "./codemode/tsconfig.json"' in out
    # An init over its own tsconfig.json says nothing about it.
    (tmp_path / "tsconfig.json").unlink()
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert "kept" not in capsys.readouterr().out


def test_the_scripts_folder_is_an_input_of_the_pure_generator() -> None:
    from codemodekit.codegen import TSCONFIG_FILE, generate
    from tests.codegen.helpers import one_tool_catalog

    catalog = one_tool_catalog({"type": "object", "properties": {"q": {"type": "string"}}})
    default = generate(catalog, name="t")
    assert generate(catalog, name="t") == default
    elsewhere = generate(catalog, name="t", scripts="../../jobs")
    assert {p for p in default if default[p] != elsewhere[p]} == {TSCONFIG_FILE}
    assert json.loads(elsewhere[TSCONFIG_FILE])["include"] == ["../../jobs/**/*.ts"]


def test_the_editors_language_server_shows_only_the_real_error(project: Path) -> None:
    # tsserver is what VS Code runs: it finds the project's tsconfig.json from the script's
    # folder upward, as the editor does when the script is opened.
    node = shutil.which("node")
    assert node is not None
    bad = wrong_argument(project)
    hello = project / "hello.ts"
    script = HERE / "tsserver_diagnostics.cjs"
    done = subprocess.run(
        [node, str(script), str(NODE_MODULES / "typescript"), str(hello), str(bad)],
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
        check=True,
    )
    answer = json.loads(done.stdout)
    assert answer["config"] == str(project / "tsconfig.json")
    assert answer["diagnostics"] == {
        str(hello): [],
        str(bad): ["bad.ts(4,50): TS2322 Type 'number' is not assignable to type 'string'."],
    }
