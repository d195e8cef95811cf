"""load_spec: a valid file becomes the frozen Spec; every problem is a located SpecError."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from codemodekit.errors import CodeModeError
from codemodekit.limits import Limits
from codemodekit.spec import (
    McpHttpSource,
    McpStdioSource,
    OpenApiSource,
    PolicyRule,
    PythonSource,
    SecretTemplate,
    SpecError,
    load_spec,
)

FULL = """\
version = 1
name = "work-code-mode"

[limits]
compute_time_ms = 1500
max_tool_calls = 4

[policy]
default = "deny"
rules = [
  { tools = "github.get_*", decision = "allow" },
  { tools = "petstore.*", read_only = true, decision = "allow" },
  { tools = "*", decision = "deny" },
]

[sources.github]
type = "mcp"
command = "github-mcp-server"
args = ["stdio"]
env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
cwd = "servers/gh"

[sources."deployment-api"]
type = "mcp"
url = "https://deploy.example.com/mcp"
transport = "sse"
headers = { Authorization = "Bearer ${DEPLOY_TOKEN}" }
timeout_ms = 2500

[sources.petstore]
type = "openapi"
document = "specs/petstore.yaml"
base_url = "https://petstore.example.com/v3"
auth = { api_key = "${PETSTORE_KEY}" }
include = ["pet*"]
exclude = ["deletePet"]

[sources.app]
type = "python"
module = "myapp.tools"
path = ["src", "/opt/lib"]
"""


def write(tmp_path: Path, text: str, name: str = "codemode.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    return info.value


def test_full_spec_resolves_every_section(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, FULL))
    assert spec.version == 1
    assert spec.name == "work-code-mode"
    assert spec.path == tmp_path / "codemode.toml"
    assert spec.limits == Limits(compute_time_ms=1500, max_tool_calls=4)
    assert spec.policy.default == "deny"
    assert spec.policy.rules == (
        PolicyRule(tools="github.get_*", decision="allow"),
        PolicyRule(tools="petstore.*", decision="allow", read_only=True),
        PolicyRule(tools="*", decision="deny"),
    )
    # File order and exact names (quoted keys included) are preserved.
    assert list(spec.sources) == ["github", "deployment-api", "petstore", "app"]

    github = spec.sources["github"]
    assert isinstance(github, McpStdioSource)
    assert github.command == "github-mcp-server"
    assert github.args == ("stdio",)
    assert github.cwd == tmp_path / "servers" / "gh"
    assert github.env["GITHUB_TOKEN"] == SecretTemplate(
        "${GITHUB_TOKEN}", key="sources.github.env.GITHUB_TOKEN"
    )

    deploy = spec.sources["deployment-api"]
    assert isinstance(deploy, McpHttpSource)
    assert (deploy.url, deploy.transport, deploy.timeout_ms) == (
        "https://deploy.example.com/mcp",
        "sse",
        2500,
    )
    assert deploy.headers["Authorization"].variables == ("DEPLOY_TOKEN",)

    petstore = spec.sources["petstore"]
    assert isinstance(petstore, OpenApiSource)
    assert petstore.document == tmp_path / "specs" / "petstore.yaml"
    assert petstore.base_url == "https://petstore.example.com/v3"
    assert set(petstore.auth) == {"api_key"}
    assert (petstore.include, petstore.exclude) == (("pet*",), ("deletePet",))

    app = spec.sources["app"]
    assert isinstance(app, PythonSource)
    assert app.module == "myapp.tools"
    assert app.path == (tmp_path / "src", Path("/opt/lib"))


def test_minimal_spec_gets_defaults(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, 'version = 1\nname = "n"\n[policy]\ndefault = "allow"\n'))
    assert spec.limits == Limits()
    assert spec.policy.rules == ()
    assert dict(spec.sources) == {}


def test_http_transport_defaults_to_streamable_http(tmp_path: Path) -> None:
    spec = load_spec(
        write(
            tmp_path,
            'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
            '[sources.remote]\ntype = "mcp"\nurl = "http://127.0.0.1:9/mcp"\n',
        )
    )
    remote = spec.sources["remote"]
    assert isinstance(remote, McpHttpSource)
    assert remote.transport == "streamable-http"


def test_relative_paths_resolve_against_the_spec_folder_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    path = write(tmp_path / "conf", FULL)
    monkeypatch.chdir(tmp_path)
    spec = load_spec(Path("conf") / "codemode.toml")
    petstore = spec.sources["petstore"]
    assert isinstance(petstore, OpenApiSource)
    assert petstore.document == path.parent / "specs" / "petstore.yaml"


def test_spec_is_frozen(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, FULL))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.sources["x"] = spec.sources["app"]  # type: ignore[index]


def test_error_carries_file_line_column_and_key(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n\n[limits]\nmax_tool_calls = -3\n[policy]\ndefault = "deny"\n',
    )
    assert isinstance(error, CodeModeError)
    assert error.file == tmp_path / "codemode.toml"
    assert (error.line, error.column, error.key) == (5, 18, "limits.max_tool_calls")
    assert "positive" in error.message
    assert str(error).splitlines()[1:] == [" 5 | max_tool_calls = -3", "   |                  ^^"]


def test_misspelt_key_suggests_the_closest(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[limits]\ncomptue_time_ms = 5\n[policy]\ndefault = "deny"\n',
    )
    assert error.key == "limits.comptue_time_ms"
    assert "did you mean `compute_time_ms`?" in error.message


def test_every_problem_is_reported_in_file_order(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = 3\n[limits]\nlog_bytes = 0\n[policy]\ndefault = "maybe"\n',
    )
    assert [(i.line, i.key) for i in error.issues] == [
        (2, "name"),
        (4, "limits.log_bytes"),
        (6, "policy.default"),
    ]


def test_misspelling_of_a_required_key_is_one_problem_not_two(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.a]\ntype = "python"\nmodul = "x"\n',
    )
    assert [i.key for i in error.issues] == ["sources.a.modul"]


def test_dotted_keys_and_array_tables_are_located(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\nlimits.max_tool_calls = "x"\n[policy]\ndefault = "deny"\n'
        '[[policy.rules]]\ntools = "a"\ndecision = "allow"\n'
        '[[policy.rules]]\ntools = "b"\ndecision = "nope"\n',
    )
    assert [(i.line, i.column, i.key) for i in error.issues] == [
        (3, 25, "limits.max_tool_calls"),
        (11, 12, "policy.rules[1].decision"),
    ]


def test_boolean_is_not_an_integer(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[limits]\nmax_tool_calls = true\n[policy]\ndefault = "deny"\n',
    )
    assert error.message == "expected an integer, got a boolean"


@pytest.mark.parametrize(
    "name, message",
    [
        ('""', "a source name must not be empty"),
        ('"a b"', 'invalid source name "a b"'),
        ('"a.b"', 'invalid source name "a.b"'),
    ],
)
def test_bad_source_names(tmp_path: Path, name: str, message: str) -> None:
    error = load_error(
        tmp_path,
        f'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        f'[sources.{name}]\ntype = "python"\nmodule = "m"\n',
    )
    assert error.line == 5
    assert message in error.message


def test_dollar_brace_outside_secret_tables_is_rejected(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.a]\ntype = "mcp"\nurl = "https://${HOST}/mcp"\n',
    )
    assert error.key == "sources.a.url"
    assert "`${HOST}` is not expanded here" in error.message


def test_basic_auth_needs_both_halves(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.p]\ntype = "openapi"\ndocument = "d.yaml"\nbase_url = "https://x.example"\n'
        '[sources.p.auth]\nusername = "${U}"\n',
    )
    assert (error.line, error.key) == (10, "sources.p.auth.username")


def test_stdio_keys_on_an_http_source_are_errors(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.a]\ntype = "mcp"\nurl = "https://x.example/mcp"\nargs = ["x"]\n',
    )
    assert error.key == "sources.a.args"
    assert "stdio" in error.message


def test_url_must_be_http(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.a]\ntype = "mcp"\nurl = "ws://x.example/mcp"\n',
    )
    assert error.key == "sources.a.url"


def test_missing_file_and_bad_encoding_are_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "nope.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(bad)


def test_crlf_files_locate_errors_on_the_right_line(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_bytes(b'version = 1\r\nname = "n"\r\n[policy]\r\ndefault = "x"\r\n')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert (info.value.line, info.value.column) == (4, 11)
    assert "\r" not in str(info.value)


@pytest.mark.parametrize(
    "line, key, message",
    [
        ('headers = { "Bad Header" = "x" }', 'sources.a.headers."Bad Header"', "HTTP header name"),
        ('headers = { "" = "x" }', 'sources.a.headers.""', "HTTP header name"),
    ],
)
def test_header_names_must_be_tokens(tmp_path: Path, line: str, key: str, message: str) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        f'[sources.a]\ntype = "mcp"\nurl = "https://x.example/mcp"\n{line}\n',
    )
    assert (error.line, error.key) == (8, key)
    assert message in error.message


def test_env_names_cannot_hold_equals(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        'version = 1\nname = "n"\n[policy]\ndefault = "deny"\n'
        '[sources.a]\ntype = "mcp"\ncommand = "c"\nenv = { "A=B" = "x" }\n',
    )
    assert (error.line, error.column, error.key) == (8, 9, 'sources.a.env."A=B"')


def test_spec_error_survives_pickling(tmp_path: Path) -> None:
    import pickle

    error = load_error(tmp_path, 'version = 1\nname = 5\n[policy]\ndefault = "deny"\n')
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.line, copy.key, str(copy)) == (error.line, error.key, str(error))
