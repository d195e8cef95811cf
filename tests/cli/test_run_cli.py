"""`codemode run`: only the sources a script names start; timing, progress, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemodekit.cli import main
from codemodekit.compiler.compile import CodeCompiler

BROKEN_SOURCE = '\n[sources.broken]\ntype = "mcp"\ncommand = "/nonexistent/codemode-test-server"\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "."]) == 0
    config = tmp_path / "codemode.toml"
    config.write_text(config.read_text(encoding="utf-8") + BROKEN_SOURCE, encoding="utf-8")
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], script: Path, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["run", str(script), *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("return 1 + 1", set()),
        ('await tools.demo.a({}); return tools["deploy-api"].b({});', {"demo", "deploy-api"}),
        ("return await tools?.demo.list_categories({});", {"demo"}),
        ("const o = { tools: 1 }; return o;", set()),
        ("const t = tools; return t.demo.a({});", None),
        ("const k = 'demo'; return tools[k].a({});", None),
        ("return tools[`demo`].a({});", None),
        ("return globalThis.tools.demo.a({});", None),
        ("function f() { return this; } return f().tools.demo.a({});", None),
        ("const q = { tools }; return q;", None),
        ("return Object.keys(tools);", None),
        ("return x.tools.demo;", None),
        ("return (", None),  # does not parse: the compile error comes from the run
    ],
)
def test_referenced_sources(code: str, expected: set[str] | None) -> None:
    found = CodeCompiler().referenced_sources(code)
    assert found == (None if expected is None else frozenset(expected))


def test_a_script_starts_only_the_sources_it_names(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = project / "hello.ts"
    code, out, err = run(capsys, script)
    assert code == 0, err
    assert json.loads(out)["cheapest"] == "Stoneware mug"
    assert "broken" not in err  # never started, so never reported down
    assert "[log] 3 coffee products in stock" in err
    assert "[progress] calling tools.demo.search_products" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("codemode run: compile ")
    assert "tools " in last and "(2 calls), 1 of 2 sources started" in last

    trivial = project / "trivial.ts"
    trivial.write_text("return 1 + 1;\n", encoding="utf-8")
    code, out, err = run(capsys, trivial)
    assert (code, out) == (0, "2\n")
    assert "0 of 2 sources started" in err


def test_dynamic_access_starts_every_source(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = project / "dynamic.ts"
    script.write_text(
        "const s = 'demo';\nconst cart = await tools[s].get_cart({});\nreturn cart !== null;\n"
    )
    code, out, err = run(capsys, script)
    assert (code, out) == (0, "true\n"), err
    assert "warning: source 'broken' is unavailable" in err
    assert "2 of 2 sources started" in err


def test_json_carries_the_timings_and_started_sources(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, project / "hello.ts", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["sources_started"] == ["demo"]
    assert document["tool_calls"] == 2
    assert set(document["timings"]) >= {"compile_ms", "compute_ms", "tool_ms", "duration_ms"}
    assert "codemode run: compile" not in err  # --json keeps stderr for problems only


def test_a_script_that_is_not_utf8_is_one_clear_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = project / "latin1.ts"
    script.write_bytes(b"// caf\xe9\nreturn 1;\n")
    code, out, err = run(capsys, script)
    assert (code, out) == (2, "")
    assert err == (
        f"codemode run: {script}:1: not UTF-8 text (byte 0xe9 at offset 6); "
        "save the script as UTF-8\n"
    )
