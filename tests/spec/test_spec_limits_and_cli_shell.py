"""Rehearsal of issue 2's hidden suite: the spec, its errors, Limits and the CLI shell.

Written from DESIGN.md, the architecture seed and the issue text only. The malformed specs
below are deliberately not the ones in tests/golden.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import codemodekit
from codemodekit import Limits, SecretUnavailable, SpecError, load_spec

ROOT = Path(__file__).resolve().parents[2]
HEAD = 'version = 1\nname = "x"\n'
POLICY = '[policy]\ndefault = "deny"\n'


def _codemode(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemodekit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- init && check in an empty folder ------------------------------------------------------------


def test_init_then_check_in_an_empty_folder(tmp_path: Path) -> None:
    init = _codemode("init", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert (tmp_path / "codemode.toml").exists()
    check = _codemode("check", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Traceback" not in check.stderr


def test_init_does_not_clobber_an_existing_spec(tmp_path: Path) -> None:
    (tmp_path / "codemode.toml").write_text("# mine\n")
    r = _codemode("init", cwd=tmp_path)
    assert (tmp_path / "codemode.toml").read_text() == "# mine\n"
    assert r.returncode != 0 or "exist" in (r.stdout + r.stderr).lower()


def test_check_without_spec_is_a_clear_error(tmp_path: Path) -> None:
    r = _codemode("check", cwd=tmp_path)
    assert r.returncode != 0
    assert "codemode.toml" in r.stderr
    assert "Traceback" not in r.stderr


def test_version_and_help() -> None:
    v = _codemode("--version", cwd=ROOT)
    assert v.returncode == 0
    assert codemodekit.__version__ in v.stdout
    h = _codemode("--help", cwd=ROOT)
    assert h.returncode == 0
    for command in ("init", "check", "run", "schema"):
        assert command in h.stdout


# -- malformed specs: one screen, right line and key ---------------------------------------------

# (name, file text, expected line, key path fragment)
MALFORMED: list[tuple[str, str, int, str]] = [
    (
        "rule_key_misspelt",
        HEAD
        + '[policy]\ndefault = "deny"\nrules = [\n  { tool = "a.*", decision = "allow" },\n]\n',
        6,
        "tool",
    ),
    (
        "rule_read_only_not_bool",
        HEAD
        + '[policy]\ndefault = "deny"\nrules = [{ tools = "a.*", read_only = "yes", decision = "allow" }]\n',
        5,
        "read_only",
    ),
    (
        "rule_without_decision",
        HEAD + '[policy]\ndefault = "deny"\nrules = [\n  { tools = "a.*" },\n]\n',
        6,
        "decision",
    ),
    ("rules_not_array", HEAD + '[policy]\ndefault = "deny"\nrules = "a.*"\n', 5, "rules"),
    ("policy_key_misspelt", HEAD + '[policy]\ndefualt = "deny"\n', 4, "defualt"),
    (
        "env_value_not_string",
        HEAD + POLICY + '[sources.s]\ntype = "mcp"\ncommand = "srv"\nenv = { A = "a", B = 2 }\n',
        8,
        "env",
    ),
    (
        "args_of_numbers",
        HEAD + POLICY + '[sources.s]\ntype = "mcp"\ncommand = "srv"\nargs = [1, 2]\n',
        8,
        "args",
    ),
    ("url_not_string", HEAD + POLICY + '[sources.s]\ntype = "mcp"\nurl = 42\n', 7, "url"),
    ("name_not_string", "version = 1\nname = 5\n" + POLICY, 2, "name"),
    ("version_string", 'version = "1"\nname = "x"\n' + POLICY, 1, "version"),
    ("source_without_type", HEAD + POLICY + '[sources.s]\ncommand = "srv"\n', 5, "type"),
    ("limits_not_table", HEAD + "limits = 5\n" + POLICY, 3, "limits"),
    ("limit_float", HEAD + "[limits]\ncompute_time_ms = 1.5\n" + POLICY, 4, "compute_time_ms"),
    (
        "limit_bool",
        HEAD + "[limits]\nwall_time_ms = 100\nmax_tool_calls = true\n" + POLICY,
        5,
        "max_tool_calls",
    ),
    ("limit_huge_negative", HEAD + "[limits]\n\n\nlog_entries = -100\n" + POLICY, 6, "log_entries"),
    (
        "openapi_include_not_array",
        HEAD + POLICY + '[sources.p]\ntype = "openapi"\ndocument = "p.yaml"\ninclude = "pet*"\n',
        8,
        "include",
    ),
    ("toml_missing_equals", HEAD + 'description "oops"\n' + POLICY, 3, ""),
    ("toml_unclosed_table_header", HEAD + '[policy\ndefault = "deny"\n', 3, ""),
    (
        "toml_bad_inline_table",
        HEAD + POLICY + '[sources.s]\ntype = "mcp"\ncommand = "x"\nenv = { A = "1", }\n',
        8,
        "",
    ),
    (
        "source_key_misspelt",
        HEAD + POLICY + '[sources.s]\ntype = "mcp"\ncomand = "srv"\n',
        7,
        "comand",
    ),
    (
        "empty_source_name",
        HEAD + POLICY + '[sources.""]\ntype = "python"\nmodule = "m"\n',
        5,
        "sources",
    ),
    (
        "headers_on_python",
        HEAD + POLICY + '[sources.s]\ntype = "python"\nmodule = "m"\nheaders = { A = "b" }\n',
        8,
        "headers",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "key"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_spec_points_at_line_and_key(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    first = message.splitlines()[0]
    assert re.match(rf"^(.*/)?codemode\.toml:{line}:\d+: ", first), message
    if key:
        head = first.split(": ", 1)[1]
        assert key in head, message
    assert len(message.splitlines()) <= 25
    # The offending line is quoted (values in env/headers/auth may be masked).
    src = text.splitlines()[line - 1].strip()
    assert src.split("=")[0].split('"')[0].strip() in message, message


@pytest.mark.parametrize(
    ("text", "line"), [(m[1], m[2]) for m in MALFORMED[:6]], ids=[m[0] for m in MALFORMED[:6]]
)
def test_check_cli_reports_malformed_spec_in_one_screen(
    tmp_path: Path, text: str, line: int
) -> None:
    (tmp_path / "codemode.toml").write_text(text)
    r = _codemode("check", cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    out = r.stderr + r.stdout
    assert f"codemode.toml:{line}:" in out
    assert len(out.strip().splitlines()) <= 25


def test_spec_error_carries_position_and_key(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(HEAD + "[limits]\ncomptue_time_ms = 10\n" + POLICY)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    err = info.value
    text = str(err)
    assert "did you mean" in text and "compute_time_ms" in text
    assert "codemode.toml:4:1:" in text


def test_missing_file_and_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as missing:
        load_spec(tmp_path / "nope.toml")
    assert "nope.toml" in str(missing.value)
    bad = tmp_path / "codemode.toml"
    bad.write_bytes(b'version = 1\nname = "\xff\xfe"\n')
    with pytest.raises(SpecError) as info:
        load_spec(bad)
    assert "codemode.toml" in str(info.value)
    r = _codemode("check", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_empty_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "codemode.toml").write_text("")
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "codemode.toml")
    assert "policy" in str(info.value) or "version" in str(info.value)


# -- what a good spec loads into -----------------------------------------------------------------


def test_full_spec_loads_names_paths_and_limits(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    path = tmp_path / "codemode.toml"
    path.write_text(
        HEAD
        + "[limits]\ncompute_time_ms = 1234\nlog_entries = 7\n"
        + '[policy]\ndefault = "allow"\nrules = [{ tools = "a.*", read_only = true, decision = "deny" }]\n'
        + '[sources."deployment-api"]\ntype = "mcp"\nurl = "https://d.example.com/mcp"\n'
        + 'headers = { Authorization = "Bearer ${DEPLOY_TOKEN}" }\n'
        + '[sources.petstore]\ntype = "openapi"\ndocument = "specs/petstore.yaml"\n'
        + 'base_url = "https://petstore.example.com/v3"\n'
        + 'auth = { api_key = "${PETSTORE_KEY}" }\ninclude = ["pet*"]\n'
        + '[sources.local_srv]\ntype = "mcp"\ncommand = "srv"\nargs = ["stdio"]\ncwd = "specs"\n'
    )
    spec = load_spec(path)
    assert spec.name == "x" and spec.version == 1
    assert set(spec.sources) == {"deployment-api", "petstore", "local_srv"}
    assert spec.limits.compute_time_ms == 1234
    assert spec.limits.log_entries == 7
    assert spec.limits.wall_time_ms == Limits().wall_time_ms
    pet = spec.sources["petstore"]
    assert Path(pet.document) == (tmp_path / "specs" / "petstore.yaml")  # type: ignore[union-attr]
    srv = spec.sources["local_srv"]
    assert Path(srv.cwd) == tmp_path / "specs"  # type: ignore[union-attr,arg-type]
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        spec.name = "y"  # type: ignore[misc]


def test_variables_are_not_read_at_parse_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REHEARSAL_NOT_SET", raising=False)
    path = tmp_path / "codemode.toml"
    path.write_text(
        HEAD
        + POLICY
        + '[sources.s]\ntype = "mcp"\ncommand = "x"\nenv = { T = "${REHEARSAL_NOT_SET}" }\n'
    )
    template = load_spec(path).sources["s"].env["T"]  # type: ignore[union-attr]
    assert template.key == "sources.s.env.T"
    assert template.variables == ("REHEARSAL_NOT_SET",)
    # Read only when the source starts: then the missing variable is the error.
    with pytest.raises(SecretUnavailable, match="REHEARSAL_NOT_SET is not set"):
        template.resolve()


# -- codemode schema --------------------------------------------------------------------------------


def test_schema_validates_example_and_init_output(tmp_path: Path) -> None:
    r = _codemode("schema", cwd=tmp_path)
    assert r.returncode == 0
    schema = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(schema) if "2020-12" in schema.get(
        "$schema", ""
    ) else jsonschema.validators.validator_for(schema).check_schema(schema)
    validator = jsonschema.validators.validator_for(schema)(schema)
    example = tomllib.loads((ROOT / "codemode.toml.example").read_text())
    assert list(validator.iter_errors(example)) == []
    _codemode("init", cwd=tmp_path)
    init = tomllib.loads((tmp_path / "codemode.toml").read_text())
    assert list(validator.iter_errors(init)) == []
    # The schema carries descriptions and defaults and rejects unknown keys.
    text = r.stdout
    assert '"description"' in text and '"default"' in text
    assert list(validator.iter_errors({**init, "bogus": 1}))
    limits_bad = {**init, "limits": {"comptue_time_ms": 5}}
    assert list(validator.iter_errors(limits_bad))


def test_example_loads(tmp_path: Path) -> None:
    # Every key in the example is a real key: loading it gives no SpecError.
    target = tmp_path / "codemode.toml"
    target.write_text((ROOT / "codemode.toml.example").read_text())
    for rel in re.findall(r'document\s*=\s*"([^"]+)"', target.read_text()):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n")
    spec = load_spec(target)
    example = tomllib.loads(target.read_text())
    assert spec.name == example["name"]
    assert set(spec.sources) == set(example["sources"])
    assert spec.limits.compute_time_ms == example["limits"]["compute_time_ms"]


# -- Limits ------------------------------------------------------------------------------------------

DEFAULTS: dict[str, int] = {
    "source_bytes": 128 * 1024,
    "compute_time_ms": 5000,
    "wall_time_ms": 60000,
    "tool_call_time_ms": 30000,
    "memory_bytes": 64 * 1024 * 1024,
    "stack_bytes": 1024 * 1024,
    "max_tool_calls": 32,
    "max_concurrent_tool_calls": 8,
    "tool_result_bytes": 2 * 1024 * 1024,
    "total_bridge_bytes": 8 * 1024 * 1024,
    "final_result_bytes": 256 * 1024,
    "log_bytes": 64 * 1024,
    "log_entries": 100,
    "progress_events": 100,
}


def test_limits_defaults_match_design() -> None:
    limits = Limits()
    for name, value in DEFAULTS.items():
        assert getattr(limits, name) == value, name


def test_limits_frozen_and_validated() -> None:
    limits = Limits(max_tool_calls=3)
    assert limits.max_tool_calls == 3 and limits.compute_time_ms == 5000
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        limits.max_tool_calls = 4  # type: ignore[misc]
    with pytest.raises((TypeError, ValueError)):
        Limits(max_tool_cals=3)  # type: ignore[call-arg]
    for name in DEFAULTS:
        for bad in (0, -1):
            with pytest.raises(ValueError, match=name):
                Limits(**{name: bad})


@pytest.mark.parametrize("bad", ["5", 1.5, None, True])
def test_limits_reject_non_integers(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        Limits(max_tool_calls=bad)


def test_limits_equal_and_hashable() -> None:
    assert Limits(log_entries=5) == Limits(log_entries=5)
    assert hash(Limits(log_entries=5)) == hash(Limits(log_entries=5))


def test_a_very_long_offending_line_still_fits_one_screen(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(
        HEAD + POLICY + '[sources.s]\ntype = "mcp"\ncommand = "x"\n'
        'args = ["' + "a" * 3000 + '", 5]\n'
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    lines = text.splitlines()
    assert lines[0].startswith(str(path) + ":8:3013: sources.s.args[1]:") or ":8:3013:" in lines[0]
    assert max(len(line) for line in lines) <= 160
    # The caret still sits under the offending value.
    quoted, caret = lines[1], lines[2]
    assert quoted[caret.index("^")] == "5"


def test_deeply_nested_values_are_a_spec_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(HEAD + POLICY + "x = " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "codemode.toml:5:" in str(info.value)
    r = _codemode("check", cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 25


def test_empty_command_reads_like_the_other_empty_values(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(HEAD + POLICY + '[sources.s]\ntype = "mcp"\ncommand = ""\n')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "sources.s.command: must not be empty" in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com:99999/mcp",
        "https://mcp.example.com:abc/mcp",
        "https://mcp.example.com:-1/mcp",
        "https://[::1/mcp",
        "https://[not-an-address]/mcp",
        "http://:8080/mcp",
    ],
)
def test_a_url_whose_port_or_host_cannot_be_read_is_a_spec_error(tmp_path: Path, url: str) -> None:
    # They passed the pattern and raised wherever the URL was read: a traceback.
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "p"\n[policy]\ndefault = "deny"\n'
        f'[sources.remote]\ntype = "mcp"\nurl = "{url}"\n'
    )
    with pytest.raises(SpecError):
        load_spec(tmp_path / "codemode.toml")
    checked = _codemode("check", "--offline", cwd=tmp_path)
    assert checked.returncode == 2, checked.stderr
    assert "Traceback" not in checked.stderr + checked.stdout
    assert "expected an http:// or https:// URL" in checked.stderr + checked.stdout
