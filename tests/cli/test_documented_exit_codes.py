"""Every exit code the documentation states is the one the command returns (issue 20 item 14).

The codes are read from the documentation itself (each command's `--help` "Exit codes:"
sentence, the README's command table and `docs/spec.md`), then each situation is produced
for real and the command's status compared."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from codemodekit.cli import main

ROOT = Path(__file__).resolve().parents[2]
VALID = 'version = 1\nname = "codes"\n[policy]\ndefault = "allow"\n'
BAD = 'version = 1\nname = "codes"\n[limits]\ncomptue_time_ms = 5\n[policy]\ndefault = "allow"\n'
DOWN = '\n[sources.down]\ntype = "mcp"\ncommand = "/nonexistent/codemode-exit-code-server"\n'


def documented(command: str, capsys: pytest.CaptureFixture[str]) -> dict[int, str]:
    """``{code: meaning}`` from the "Exit codes: 0 ..., 1 ..., 2 ...." sentence of --help."""
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    found = re.search(r"Exit codes: (.*?)\.(?:\s|$)", text)
    assert found is not None, f"`codemode {command} --help` states no exit codes"
    return {
        int(part.split(" ", 1)[0]): part.split(" ", 1)[1]
        for part in re.split(r"[,;] (?=\d )", found.group(1))
    }


def project(tmp_path: Path, spec: str, script: str = "") -> list[str]:
    (tmp_path / "codemode.toml").write_text(spec, encoding="utf-8")
    if script:
        (tmp_path / "s.ts").write_text(script, encoding="utf-8")
    return ["-c", str(tmp_path / "codemode.toml")]


def initialized(tmp_path: Path) -> list[str]:
    assert main(["init", str(tmp_path)]) == 0  # the bundled example: a demo source
    return ["-c", str(tmp_path / "codemode.toml")]


# (command, code, a word of its documented meaning, how to produce that situation)
Situation = Callable[[Path], list[str]]
SITUATIONS: list[tuple[str, int, str, Situation]] = [
    ("check", 0, "good", lambda t: ["check", *project(t, VALID)]),
    ("check", 1, "unavailable", lambda t: ["check", *project(t, VALID + DOWN)]),
    ("check", 2, "spec", lambda t: ["check", *project(t, BAD)]),
    ("run", 0, "success", lambda t: ["run", str(t / "s.ts"), *project(t, VALID, "return 1;")]),
    ("run", 1, "failed", lambda t: ["run", str(t / "s.ts"), *project(t, VALID, "throw 1;")]),
    ("run", 2, "spec", lambda t: ["run", str(t / "s.ts"), *project(t, BAD, "return 1;")]),
    ("search", 0, "found", lambda t: ["search", "cart", *initialized(t)]),
    ("search", 1, "none", lambda t: ["search", "anything", *project(t, VALID)]),
    ("search", 2, "spec", lambda t: ["search", "anything", *project(t, BAD)]),
]


@pytest.mark.parametrize(
    ("command", "code", "meaning", "situation"),
    SITUATIONS,
    ids=[f"{c}-{n}" for c, n, _, _ in SITUATIONS],
)
def test_each_documented_exit_code_is_the_real_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    code: int,
    meaning: str,
    situation: Situation,
) -> None:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    codes = documented(command, capsys)
    assert meaning in codes[code], (command, codes)
    assert main(situation(tmp_path)) == code


def test_every_code_a_command_documents_is_exercised(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("check", "run", "search"):
        exercised = {code for c, code, _, _ in SITUATIONS if c == command}
        assert set(documented(command, capsys)) == exercised


def test_the_spec_reference_and_readme_give_the_real_code_of_a_spec_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    actual = main(["check", *project(tmp_path, BAD)])
    reference = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    stated = re.search(r"`codemode check` prints it and exits (\d)", reference)
    assert stated is not None and int(stated.group(1)) == actual
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `codemode check"))
    assert f"offending line; exit {actual})" in row


async def test_a_denial_shows_the_model_the_rule_glob_as_docs_api_says() -> None:
    from codemodekit import CodeMode, define_tool, local, rules_policy
    from codemodekit.spec.model import PolicyRule, PolicySpec

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert "The model does see a denial's `reason`" in api
    noop = define_tool(
        description="Nothing", input_schema={"type": "object"}, execute=lambda args: None
    )
    policy = rules_policy(PolicySpec("allow", (PolicyRule(tools="app.delete_*", decision="deny"),)))
    async with CodeMode(sources=[local("app", {"delete_all": noop})], policy=policy) as cm:
        result = await cm.run("return await tools.app.delete_all({});")
    assert result.diagnostic is not None
    assert result.diagnostic.message == (
        "tools.app.delete_all was denied: denied by policy rule tools = 'app.delete_*'"
    )
    assert "rules[" not in result.diagnostic.message  # the rule's name is for observers
