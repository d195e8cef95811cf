"""`type = "plugin"` sources (issue 20 item 17): an installed Agent Plugin's servers as managed
MCP sources that keep the plugin's identity, validated against the Agent Plugins 1.0 schemas,
with `${VAR}` handled as in codemode.toml; a plugin this project generates round-trips."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from codemodekit import CodeMode, load_spec
from codemodekit.cli import main
from codemodekit.spec import SpecError
from tests.servers import SERVER_SCRIPT

PLUGIN_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"


def make_plugin(root: Path, servers: dict[str, Any], **manifest: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVER_SCRIPT, root / "server.py")
    (root / "plugin.json").write_text(
        json.dumps({"$schema": PLUGIN_SCHEMA, "name": "team-tools", "version": "1.2.0", **manifest})
    )
    (root / "mcp.json").write_text(json.dumps({"$schema": MCP_SCHEMA, "mcpServers": servers}))
    return root


def stdio_server(**extra: Any) -> dict[str, Any]:
    return {
        "type": "stdio",
        "command": sys.executable,
        "args": ["${PLUGIN_ROOT}/server.py"],
        **extra,
    }


def write_spec(folder: Path, body: str) -> Path:
    config = folder / "codemode.toml"
    config.write_text(
        f'version = 1\nname = "host"\n[policy]\ndefault = "allow"\n{body}', encoding="utf-8"
    )
    return config


PLUGIN_TABLE = '[sources.team]\ntype = "plugin"\npath = "vendor/team-tools"\n'


async def test_a_plugin_server_is_a_source_that_keeps_the_plugin_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGIN_TEST_TOKEN", "tok-71c2")
    root = make_plugin(
        tmp_path / "vendor" / "team-tools",
        {"tools": stdio_server(env={"TOKEN": "${PLUGIN_TEST_TOKEN}"})},
    )
    spec = load_spec(write_spec(tmp_path, PLUGIN_TABLE))
    assert list(spec.sources) == ["team"]  # one server: the table's own name
    async with CodeMode.from_spec(spec) as cm:
        [health] = cm.health
        result = await cm.run(
            "const t = tools.team;\n"
            "const where = (await t.cwd({})).structuredContent.result;\n"
            "const token = (await t.secret_env({ name: 'TOKEN' })).structuredContent.result;\n"
            "const home = (await t.secret_env({ name: 'PLUGIN_ROOT' })).structuredContent.result;\n"
            "return { where, token, home };"
        )
        echo = cm.catalog.get("team", "echo")
        files = cm.generate()
    assert result.ok, result.diagnostic
    assert Path(result.value["where"]).resolve() == root.resolve()  # starts in the plugin root
    assert result.value["token"] is True  # ${VAR} in mcp.json's env, resolved at connect
    assert result.value["home"] is True  # PLUGIN_ROOT given to the server, as hosts do
    assert health.plugin == "plugin team-tools 1.2.0, server tools"
    assert health.to_json()["plugin"] == "plugin team-tools 1.2.0, server tools"
    assert echo is not None
    assert dict(echo.provenance["plugin"]) == {
        "name": "team-tools",
        "version": "1.2.0",
        "server": "tools",
    }
    assert (
        'Source "team". From Agent Plugin team-tools 1.2.0, server tools.'
        in files["tools.team.d.ts"]
    )
    catalog = json.loads(files["catalog.json"])
    assert catalog["sources"]["team"]["plugin"]["name"] == "team-tools"


async def test_several_servers_are_sources_under_the_plugin_namespace_and_notes_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLUGIN_TEST_ABSENT", raising=False)
    make_plugin(
        tmp_path / "vendor" / "team-tools",
        {
            "up": stdio_server(),
            "down": stdio_server(env={"KEY": "${PLUGIN_TEST_ABSENT}"}),
        },
    )
    spec = load_spec(write_spec(tmp_path, PLUGIN_TABLE))
    assert sorted(spec.sources) == ["team-down", "team-up"]
    async with CodeMode.from_spec(spec) as cm:
        response = cm.search("echo")
        health = {h.source: h for h in cm.health}
    assert [hit.address for hit in response.hits][:1] == ['tools["team-up"].echo']
    assert response.note is not None
    assert "source 'team-down' is unavailable (plugin team-tools 1.2.0, server down)" in (
        response.note
    )
    assert "PLUGIN_TEST_ABSENT is not set" in health["team-down"].message


@pytest.mark.parametrize(
    ("servers", "manifest", "expected"),
    [
        ({"s": stdio_server()}, {"name": "Team_Tools"}, "plugin.json: $.name:"),
        ({"s": {"type": "stdio"}}, {}, "mcp.json: $.mcpServers.s"),
        ({"s": {"type": "ftp", "url": "x"}}, {}, "mcp.json: $.mcpServers.s"),
        (
            {"s": stdio_server(env={"PLUGIN_ROOT": "x"})},
            {},
            "mcp.json: $.mcpServers.s",
        ),
        (
            {"s": stdio_server(args=["${HOME}/server.py"])},
            {},
            "`${HOME}` is not expanded here",
        ),
        ({"s": stdio_server(cwd="./../..")}, {}, "leaves the plugin's folders"),
        ({"s": stdio_server(cwd="/tmp")}, {}, "mcp.json: $.mcpServers.s"),
    ],
)
def test_plugin_files_are_validated_against_the_agent_plugins_schemas(
    tmp_path: Path, servers: dict[str, Any], manifest: dict[str, Any], expected: str
) -> None:
    make_plugin(tmp_path / "vendor" / "team-tools", servers, **manifest)
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, PLUGIN_TABLE))
    text = str(caught.value)
    assert "sources.team.path" in text
    assert expected in text


def test_a_missing_plugin_is_a_located_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, PLUGIN_TABLE))
    assert "codemode.toml:7:" in str(caught.value)
    assert "plugin.json: not found (is `path` the plugin's root?)" in str(caught.value)


def test_the_lock_records_the_plugin_entry_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    make_plugin(tmp_path / "vendor" / "team-tools", {"tools": stdio_server()})
    config = write_spec(tmp_path, PLUGIN_TABLE)
    assert main(["lock", "-c", str(config)]) == 0
    locked = json.loads((tmp_path / "codemode.lock.json").read_text())["sources"]["team"]
    assert locked["reached_by"] == {
        "kind": "plugin",
        "plugin": {"name": "team-tools", "version": "1.2.0", "server": "tools"},
        "path": "vendor/team-tools",
        "entry": stdio_server(),  # `${PLUGIN_ROOT}` unexpanded: the same on every machine
    }
    capsys.readouterr()
    assert main(["search", "echo", "-c", str(config)]) == 0  # answered from the lock
    assert "team from codemode.lock.json" in capsys.readouterr().err


async def test_a_generated_plugin_round_trips_as_a_plugin_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    made = tmp_path / "made"
    made.mkdir()
    monkeypatch.chdir(made)
    assert main(["init", "."]) == 0
    assert await asyncio.to_thread(main, ["generate", "--plugin", str(made / "plugin")]) == 0
    # The same tools as `codemode serve` of the spec it was made from.
    direct = load_spec(
        write_spec(
            tmp_path,
            '[sources.direct]\ntype = "mcp"\n'
            f'command = "{sys.executable}"\n'
            f'args = ["-m", "codemodekit", "serve", "-c", '
            f'"{made / "codemode.toml"}"]\n',
        )
    )
    async with CodeMode.from_spec(direct) as cm:
        served = sorted(t.name for t in cm.catalog.tools)
    host = tmp_path / "host"
    host.mkdir()
    spec = load_spec(
        write_spec(host, f'[sources.made]\ntype = "plugin"\npath = "{made / "plugin"}"\n')
    )
    async with CodeMode.from_spec(spec) as cm:
        names = sorted(t.name for t in cm.catalog.tools)
        ran = await cm.run(
            "const r = await tools.made.run_typescript({ code: "
            "'return (await tools.demo.get_cart({})).structuredContent;' });\n"
            "return r.structuredContent.ok;"
        )
        [health] = cm.health
    assert names == served == ["run_typescript", "search_tools"]
    assert ran.ok and ran.value is True, ran.diagnostic
    assert health.plugin.startswith("plugin ")  # the generated plugin.json's name, 0.1.0
    assert "-codemode 0.1.0, server " in health.plugin


def test_the_offline_summary_of_a_plugin_source_is_pinned(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.golden import GOLDEN_ROOT, assert_golden

    case = GOLDEN_ROOT / "plugin_source_offline"
    monkeypatch.chdir(case / "input")
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.delenv("TEAM_TRACKER_TOKEN", raising=False)
    monkeypatch.delenv("TEAM_SEARCH_TOKEN", raising=False)
    capsys.readouterr()
    assert main(["check", "--offline"]) == 0
    out, err = capsys.readouterr()
    assert_golden(case / "expected", {"stdout.txt": out, "stderr.txt": err})


def test_the_package_ships_the_agent_plugins_schemas_it_validates_with() -> None:
    from importlib import resources

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "agent_plugins"
    shipped = resources.files("codemodekit.spec").joinpath("agent_plugins")
    for name in ("plugin.schema.json", "mcp.schema.json"):
        assert shipped.joinpath(name).read_text("utf-8") == (fixtures / name).read_text("utf-8")
