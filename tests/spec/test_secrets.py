"""Secrets never show: not in the Spec's repr, not in any error, not in `check` output."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemodekit.cli import main
from codemodekit.errors import SecretUnavailable
from codemodekit.spec import McpStdioSource, SpecError, load_spec

TOKEN = "ghp_s3cr3t_value_that_must_not_leak"
LITERAL = "sk_literal_secret_in_the_file_42"

SPEC = f"""\
version = 1
name = "n"
[policy]
default = "deny"
[sources.github]
type = "mcp"
command = "github-mcp-server"
env = {{ GITHUB_TOKEN = "${{GITHUB_TOKEN}}", OTHER = "{LITERAL}" }}
"""


def test_repr_of_a_loaded_spec_holds_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    path = tmp_path / "codemode.toml"
    path.write_text(SPEC, encoding="utf-8")
    spec = load_spec(path)
    github = spec.sources["github"]
    assert isinstance(github, McpStdioSource)
    for text in (repr(spec), str(spec), repr(github.env), str(dict(github.env))):
        assert TOKEN not in text
        assert LITERAL not in text
    # The value is read only when asked for (at connect time), from the environment.
    assert github.env["GITHUB_TOKEN"].resolve() == TOKEN


def test_unset_variable_names_the_key_not_a_value(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(SPEC, encoding="utf-8")
    github = load_spec(path).sources["github"]
    assert isinstance(github, McpStdioSource)
    with pytest.raises(SecretUnavailable) as info:
        github.env["GITHUB_TOKEN"].resolve({})
    assert "sources.github.env.GITHUB_TOKEN" in str(info.value)


BROKEN_SECRET_LINES = [
    # an error elsewhere on a line holding a literal secret
    f'env = {{ OTHER = "{LITERAL}", N = 5 }}',
    # an error in the secret's own value
    f'env = {{ OTHER = "{LITERAL}${{BAD NAME}}" }}',
    # headers on a stdio source, holding a secret
    f'headers = {{ Authorization = "Bearer {LITERAL}" }}',
    # a TOML syntax error on the secret's line
    f'env = {{ OTHER = "{LITERAL}" ',
]


@pytest.mark.parametrize("line", BROKEN_SECRET_LINES)
def test_errors_never_show_secret_values(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    line: str,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    text = (
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        f'[sources.github]\ntype = "mcp"\ncommand = "c"\n{line}\n'
    )
    path = tmp_path / "codemode.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    error = info.value
    assert error.line == 8
    for shown in (str(error), repr(error), *(i.message for i in error.issues)):
        assert LITERAL not in shown
        assert TOKEN not in shown
    assert main(["check", "-c", str(path)]) == 2
    out, err = capsys.readouterr()
    assert LITERAL not in out + err


def test_check_summary_never_prints_env_values_args_or_url_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    path = tmp_path / "codemode.toml"
    path.write_text(
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.a]\ntype = "mcp"\ncommand = "srv"\n'
        f'args = ["--token={LITERAL}"]\nenv = {{ T = "${{GITHUB_TOKEN}}" }}\n'
        '[sources.b]\ntype = "mcp"\n'
        f'url = "https://user:{LITERAL}@example.com/mcp?key={LITERAL}"\n',
        encoding="utf-8",
    )
    assert main(["check", "--offline", "-c", str(path)]) == 0
    out, err = capsys.readouterr()
    assert LITERAL not in out + err
    assert TOKEN not in out + err
