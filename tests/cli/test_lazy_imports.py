"""`import codemodekit` and `codemode --version` stay cheap: heavy modules load on first use.

Checked through ``sys.modules`` in a fresh interpreter (never by timing: the benchmark in
``benchmarks/bench_cli.py`` measures the time).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import codemodekit
from codemodekit.cli import COMMANDS, main

HEAVY = ("pydantic", "mcp", "jsonschema", "jsonschema_rs", "tree_sitter", "httpx", "yaml")


def loaded_after(code: str) -> list[str]:
    """The heavy top-level modules present in ``sys.modules`` after running ``code``."""
    probe = (
        "import sys\n"
        f"{code}\n"
        "import json\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import codemodekit",
        "from codemodekit import __version__",
        "import codemodekit.errors, codemodekit.limits",
        "import codemodekit.sandbox._engine",
        "import codemodekit.sandbox.base",
    ],
)
def test_light_imports_load_no_heavy_module(code: str) -> None:
    assert loaded_after(code) == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"]])
def test_version_and_help_load_no_heavy_module(argv: list[str]) -> None:
    code = (
        f"from codemodekit.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    )
    loaded = loaded_after(code)
    if argv == ["run", "--help"]:
        # `run` needs the sandbox and the compiler, but not the MCP SDK or pydantic.
        assert "mcp" not in loaded
    else:
        assert loaded == []


def test_every_public_name_resolves_and_all_is_unchanged() -> None:
    names = set(codemodekit.__all__)
    assert "CodeMode" in names and "register_code_mode_tools" in names
    for name in names:
        assert getattr(codemodekit, name) is not None, name
    assert names <= set(dir(codemodekit))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = codemodekit.no_such_name  # type: ignore[attr-defined]


def test_public_names_are_the_objects_of_their_home_modules() -> None:
    from codemodekit.run import CodeMode
    from codemodekit.sandbox.quickjs import QuickJsSandbox

    assert codemodekit.CodeMode is CodeMode
    assert codemodekit.QuickJsSandbox is QuickJsSandbox


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_help_summary_matches_the_command_module(name: str) -> None:
    import importlib

    module, summary = COMMANDS[name]
    sub = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(module).register(sub)
    [action] = sub._choices_actions
    assert action.help == summary


@pytest.mark.parametrize("script", ["return 1 + 1;", "hello.ts"])
def test_a_run_on_the_demo_loads_no_mcp_sdk_http_client_or_reference_validator(
    tmp_path: Path, script: str
) -> None:
    folder = tmp_path
    assert main(["init", str(folder)]) == 0
    if not script.endswith(".ts"):
        (folder / "trivial.ts").write_text(script, encoding="utf-8")
        script = "trivial.ts"
    code = (
        "import os\n"
        f"os.chdir({str(folder)!r})\n"
        "from codemodekit.cli import main\n"
        f"assert main(['run', {script!r}, '-q']) == 0\n"
    )
    loaded = loaded_after(code)
    # A one-off run needs pydantic (the spec), tree-sitter and jsonschema-rs, nothing else:
    # `jsonschema` words the reason of a schema jsonschema-rs rejects, and no source here
    # speaks MCP or HTTP.
    assert loaded == ["jsonschema_rs", "pydantic", "tree_sitter"]


def test_mcp_sources_the_script_does_not_name_load_no_mcp_sdk(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path)]) == 0
    with (tmp_path / "codemode.toml").open("a", encoding="utf-8") as spec:
        spec.write(
            '\n[sources.stdio]\ntype = "mcp"\ncommand = "no-such-server"\n'
            '\n[sources.remote]\ntype = "mcp"\nurl = "http://127.0.0.1:9/mcp"\n'
        )
    code = (
        "import os\n"
        f"os.chdir({str(tmp_path)!r})\n"
        "from codemodekit.cli import main\n"
        "assert main(['run', 'hello.ts', '-q']) == 0\n"
    )
    assert loaded_after(code) == ["jsonschema_rs", "pydantic", "tree_sitter"]
