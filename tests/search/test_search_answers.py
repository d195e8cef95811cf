"""What ``search_tools`` tells a model: whole input declarations, cut outputs, sources down.

Driven through the real MCP adapter (an in-process ``mcp`` client), ``codemode search`` and
``codemode serve``, on GitHub's REST description from ``@octokit/openapi``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from tests.conftest import node_package

from codemodekit import CodeMode, load_spec
from codemodekit.search.search import DEFAULT_MAX_BYTES
from codemodekit.server.hosting import create_server

TOOLS = """
from codemodekit import define_tool

__all__ = ["echo"]

echo = define_tool(
    description="Echo the text argument back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    execute=lambda args: {"text": args.get("text", "")},
)
"""
MISSING = '[sources.missing]\ntype = "mcp"\ncommand = "/nonexistent/codemode-test-server"\n'
LIST_FOR_REPO = "github.issues/list-for-repo"


def _github_config(tmp_path: Path) -> Path:
    document = node_package("@octokit/openapi") / "generated" / "api.github.com.json"
    path = tmp_path / "codemode.toml"
    path.write_text(
        'version = 1\nname = "gh"\n[policy]\ndefault = "deny"\n'
        '[sources.github]\ntype = "openapi"\n'
        f"document = {json.dumps(str(document))}\n"
        'base_url = "https://api.github.com"\n' + MISSING
    )
    return path


def _block(text: str, name: str) -> str:
    """The ``interface name { ... }`` declaration in ``text`` (up to its closing brace)."""
    match = re.search(rf"^interface {name} \{{\n.*?^\}}\n", text, re.M | re.S)
    assert match, f"no interface {name} in:\n{text[:2000]}"
    return match.group(0)


def _size(data: Mapping[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False).encode())


def _check_list_for_repo(data: Mapping[str, Any], generated: str) -> dict[str, Any]:
    """The first hit declares the whole input, then a cut output; returns the marker's ask."""
    hit = data["tools"][0]
    assert hit["address"] == 'tools.github["issues/list-for-repo"]'
    text = hit["typescript"]
    # The input interface comes first and is exactly the one in the generated file.
    assert text.startswith("interface GithubIssuesListForRepoInput {")
    assert _block(text, "GithubIssuesListForRepoInput") == _block(
        generated, "GithubIssuesListForRepoInput"
    )
    assert text.index("tools.github[") < text.index("GithubIssuesListForRepoOutput =")
    assert hit["outputTypeCut"] is True
    marker = re.search(r"// … output type cut here: (\d+) of (\d+) characters shown.*", text)
    assert marker, text[-500:]
    assert int(marker.group(1)) < int(marker.group(2))
    assert "output type(s) cut" in data["note"]
    assert _size(data) <= DEFAULT_MAX_BYTES
    ask = json.loads(re.search(r"search_tools (\{.*?\})", marker.group(0)).group(1))  # type: ignore[union-attr]
    assert ask == {"query": LIST_FOR_REPO, "detail": "typescript", "limit": 1}
    return {"shown": int(marker.group(1)), "ask": ask}


@pytest.mark.slow
async def test_github_list_for_repo_declares_its_input_whole_over_mcp(tmp_path: Path) -> None:
    async with CodeMode.from_spec(load_spec(_github_config(tmp_path))) as cm:
        generated = "".join(
            text for path, text in cm.generate().items() if path.startswith("tools.github")
        )
        async with Client(create_server(cm)) as client:
            first = await client.call_tool(
                "search_tools", {"query": "list issues of a repository", "detail": "typescript"}
            )
            exact = await client.call_tool(
                "search_tools", {"query": LIST_FOR_REPO, "detail": "typescript"}
            )
            seen = _check_list_for_repo(exact.structured_content or {}, generated)
            more = await client.call_tool("search_tools", seen["ask"])
    # A need in words returns several declared tools within the cap, each input whole.
    ranked = first.structured_content or {}
    assert len(ranked["tools"]) > 1 and _size(ranked) <= DEFAULT_MAX_BYTES
    for hit in ranked["tools"]:
        assert hit["typescript"].lstrip().startswith(("interface ", "type ", "/**"))
        assert "(input: " in hit["typescript"]
    # Following the marker's own advice shows more of the output type, still within the cap.
    followed = more.structured_content or {}
    assert len(followed["tools"]) == 1
    again = _check_list_for_repo(followed, generated)
    assert again["shown"] > seen["shown"]
    assert isinstance(more.content[0], types.TextContent)
    assert "interface GithubIssuesListForRepoInput {" in more.content[0].text


@pytest.mark.slow
def test_codemode_search_declares_the_input_and_names_the_source_down(tmp_path: Path) -> None:
    config = _github_config(tmp_path)
    command = [sys.executable, "-m", "codemodekit", "search", LIST_FOR_REPO, "-c", str(config)]
    done = subprocess.run(
        [*command, "--detail", "typescript", "--json", "--limit", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["tools"][0]["typescript"].startswith("interface GithubIssuesListForRepoInput {")
    assert data["tools"][0]["outputTypeCut"] is True
    assert "source 'missing' is unavailable: its tools are not listed" in data["note"]


# -- sources that are down ---------------------------------------------------------------------
def _two_sources(tmp_path: Path) -> Path:
    (tmp_path / "cmtools.py").write_text(TOOLS)
    path = tmp_path / "codemode.toml"
    path.write_text(
        'version = 1\nname = "down"\n[policy]\ndefault = "allow"\n'
        '[sources.app]\ntype = "python"\nmodule = "cmtools"\n' + MISSING
    )
    return path


async def test_search_notes_name_the_unavailable_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    async with CodeMode.from_spec(load_spec(_two_sources(tmp_path))) as cm:
        async with Client(create_server(cm)) as client:
            everywhere = await client.call_tool("search_tools", {"query": "echo"})
            nothing = await client.call_tool("search_tools", {"query": "create a ticket"})
            only_down = await client.call_tool(
                "search_tools", {"query": "echo", "source": "missing"}
            )
            only_up = await client.call_tool("search_tools", {"query": "echo", "source": "app"})
        direct = cm.search("anything at all", source="missing")
    expected = "source 'missing' is unavailable: its tools are not listed"
    found = everywhere.structured_content or {}
    assert found["tools"][0]["address"] == "tools.app.echo"
    assert expected in found["note"]
    # "no match" and "its source is down" are told apart.
    assert expected in (nothing.structured_content or {}).get("note", "")
    down = only_down.structured_content or {}
    assert down["tools"] == [] and down["note"] == expected
    assert isinstance(only_down.content[0], types.TextContent)
    assert expected in only_down.content[0].text
    # A search limited to a serving source says nothing about the other one.
    assert "missing" not in ((only_up.structured_content or {}).get("note") or "")
    assert direct.note == expected and direct.hits == ()


def test_serve_banner_counts_serving_of_configured_sources(tmp_path: Path) -> None:
    config = _two_sources(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "codemodekit", "serve", "-c", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None and process.stdin is not None
        banner = ""
        for _ in range(50):  # the first banner comes at once, this one once they settled
            line = process.stderr.readline()
            if not line or line.startswith("codemode serve: sources settled:"):
                banner = line
                break
        process.stdin.close()  # end of the stdio stream: the server stops
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "1 tools from 1 of 2 sources (not serving: missing unavailable)" in banner, banner
