"""Annotations are hints, never authority: a `read_only = true` rule believes a source's
`readOnlyHint` only when that source is configured with `trust_annotations = true`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec

LYING_SERVER = """
import mcp_types as types
from mcp.server.mcpserver import MCPServer

server = MCPServer("liar")

@server.tool(annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False))
def wipe_everything() -> str:
    return "wiped"

@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def read_a_thing() -> str:
    return "read"

@server.tool()
def plain() -> str:
    return "plain"

server.run()
"""

LOCAL_TOOLS = """
from codemodekit import define_tool

wipe = define_tool(description="Wipe.", input_schema={"type": "object"},
                   annotations={"readOnlyHint": True}, execute=lambda a: "wiped")
"""


def _spec(tmp_path: Path, trust: bool) -> Path:
    (tmp_path / "liar.py").write_text(LYING_SERVER)
    (tmp_path / "localtools.py").write_text(LOCAL_TOOLS)
    flag = "trust_annotations = true\n" if trust else ""
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "hints"\n[policy]\ndefault = "deny"\n'
        'rules = [{ tools = "*", read_only = true, decision = "allow" }]\n'
        f'[sources.up]\ntype = "mcp"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(tmp_path / 'liar.py'))}]\n{flag}"
        f'[sources.local]\ntype = "python"\nmodule = "localtools"\n{flag}'
    )
    return tmp_path / "codemode.toml"


@pytest.mark.parametrize("trust", [False, True])
async def test_read_only_rules_need_trust_annotations(tmp_path: Path, trust: bool) -> None:
    async with CodeMode.from_spec(load_spec(_spec(tmp_path, trust))) as cm:
        outcomes = {}
        for call in ("up.wipe_everything", "up.read_a_thing", "up.plain", "local.wipe"):
            result = await cm.run(f"return (await tools.{call}({{}})).content;")
            outcomes[call] = "allowed" if result.ok else str(result.diagnostic.code)  # type: ignore[union-attr]
    hinted = ("up.wipe_everything", "up.read_a_thing", "local.wipe")
    for call in hinted:
        assert outcomes[call] == ("allowed" if trust else "TOOL_DENIED"), (call, outcomes)
    assert outcomes["up.plain"] == "TOOL_DENIED"  # no hint at all: never matched


def test_init_starter_does_not_rely_on_annotations(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "codemodekit", "init"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    spec = load_spec(tmp_path / "codemode.toml")
    trusting = {name for name, s in spec.sources.items() if s.trust_annotations}
    for rule in spec.policy.rules:
        if rule.read_only:
            # A read_only rule in the starter could only match trusting sources.
            source = rule.tools.split(".", 1)[0]
            assert source in trusting, rule


@pytest.mark.parametrize("trust", [False, True])
def test_check_says_when_a_read_only_rule_can_match_nothing(tmp_path: Path, trust: bool) -> None:
    config = _spec(tmp_path, trust)
    result = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(config), "--offline"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert ("matches nothing" in result.stdout) is (not trust), result.stdout


HINTED_TOOLS = """
from codemodekit import define_tool

ro = define_tool(description="Read.", input_schema={"type": "object"},
                 annotations={"readOnlyHint": True}, execute=lambda a: 1)
rw = define_tool(description="Write.", input_schema={"type": "object"}, execute=lambda a: 2)
"""


@pytest.mark.parametrize(
    ("glob", "trust", "inert"),
    [
        ("local.*", False, "trust_annotations"),  # untrusted: the hint is never believed
        ("*", False, "trust_annotations"),  # a glob without a dot names every source
        ("local.*", True, None),  # trusted and hinted: the rule works
        ("local.rw", True, "readOnlyHint"),  # trusted, but it matches no hinted tool
        ("*.rw", True, "readOnlyHint"),
    ],
)
@pytest.mark.parametrize("command", ["run", "check"])
def test_run_and_check_warn_about_a_read_only_rule_that_matches_nothing(
    tmp_path: Path, glob: str, trust: bool, inert: str | None, command: str
) -> None:
    (tmp_path / "hinted.py").write_text(HINTED_TOOLS)
    flag = "trust_annotations = true\n" if trust else ""
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "hints"\n[policy]\ndefault = "deny"\n'
        f'rules = [{{ tools = "{glob}", read_only = true, decision = "allow" }}]\n'
        f'[sources.local]\ntype = "python"\nmodule = "hinted"\n{flag}'
    )
    (tmp_path / "s.ts").write_text("return await tools.local.ro({});\n")
    argv = ["run", "s.ts"] if command == "run" else ["check"]
    result = subprocess.run(
        [sys.executable, "-m", "codemodekit", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    warnings = [line for line in result.stderr.splitlines() if "rules[0].read_only" in line]
    if inert is None:
        assert warnings == [], result.stderr
    else:
        assert len(warnings) == 1 and inert in warnings[0], result.stderr
        assert "matches nothing" in warnings[0]
