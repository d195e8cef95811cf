"""Files the user points at are read with a bound and must be regular files; YAML documents
are loaded within an alias, depth and time budget. Each case goes through the CLI or
``CodeMode`` and must end in one clear error while every other source keeps working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec
from codemodekit.spec import SpecError

SPEC = 'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "t", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {
        "/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}
    },
}


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    yield path


def _hostile_targets(tmp_path: Path, fifo: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path to point at, words the error must contain)."""
    (tmp_path / "folder").mkdir()
    big = tmp_path / "big"
    with open(big, "wb") as handle:  # sparse: costs no disk
        handle.truncate(80 * 1024 * 1024)
    zero_link = tmp_path / "zero-link"
    zero_link.symlink_to("/dev/zero")
    chain = tmp_path / "chain-link"
    chain.symlink_to(zero_link)
    return {
        "dev-zero": (Path("/dev/zero"), "character device"),
        "link-to-dev-zero": (zero_link, "character device"),
        "link-to-link-to-dev-zero": (chain, "character device"),
        "fifo": (fifo, "FIFO"),
        "directory": (tmp_path / "folder", "directory"),
        "huge-sparse-file": (big, "byte limit"),
        "missing": (tmp_path / "nowhere", "not found"),
    }


def _check(config: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # ``timeout`` is a hang guard only: a FIFO used to block this forever.
    return subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_config_that_is_not_a_regular_file_is_refused(tmp_path: Path, fifo: Path) -> None:
    for name, (target, words) in _hostile_targets(tmp_path, fifo).items():
        config = tmp_path / f"codemode-{name}.toml"
        if target.name != "nowhere":
            config.symlink_to(target)
        with pytest.raises(SpecError) as caught:
            load_spec(config)
        assert words in str(caught.value), (name, str(caught.value))
    config = tmp_path / "codemode-fifo.toml"
    result = _check(config)
    assert result.returncode == 2
    assert "FIFO" in result.stderr and "Traceback" not in result.stderr


async def test_openapi_document_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, fifo: Path
) -> None:
    (tmp_path / "good.json").write_text(json.dumps(DOCUMENT))
    targets = _hostile_targets(tmp_path, fifo)
    lines = [SPEC, '[sources.good]\ntype = "openapi"\ndocument = "good.json"\n']
    for index, name in enumerate(targets):
        lines.append(f'[sources.bad{index}]\ntype = "openapi"\ndocument = "doc-{name}.yaml"\n')
        target = targets[name][0]
        if target.name != "nowhere":
            (tmp_path / f"doc-{name}.yaml").symlink_to(target)
    (tmp_path / "codemode.toml").write_text("\n".join(lines))
    async with CodeMode.from_spec(load_spec(tmp_path / "codemode.toml")) as cm:
        health = {h.source: h for h in cm.health}
        assert health["good"].status == "ok"
        assert cm.catalog.get("good", "ping") is not None
        for index, name in enumerate(targets):
            item = health[f"bad{index}"]
            assert item.status == "unavailable", name
            assert targets[name][1] in item.message, (name, item.message)
    result = _check(tmp_path / "codemode.toml")
    assert "Traceback" not in result.stderr
    assert "FIFO" in result.stdout + result.stderr


def test_check_says_what_a_document_that_is_not_a_file_is(tmp_path: Path, fifo: Path) -> None:
    """Issue 23, item 12: a FIFO (a device, a folder, a socket) is not "file not found"."""
    import socket

    targets = _hostile_targets(tmp_path, fifo)
    del targets["huge-sparse-file"]  # a regular file: its size is the loader's concern
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "sock"))
    targets["socket"] = (tmp_path / "sock", "socket")
    lines = [SPEC]
    for index, name in enumerate(targets):
        lines.append(f'[sources.bad{index}]\ntype = "openapi"\ndocument = "doc-{name}.yaml"\n')
        target = targets[name][0]
        if target.name != "nowhere":
            (tmp_path / f"doc-{name}.yaml").symlink_to(target)
    (tmp_path / "codemode.toml").write_text("\n".join(lines))
    try:
        result = _check(tmp_path / "codemode.toml")
    finally:
        listening.close()
    assert "Traceback" not in result.stderr
    for index, (name, (_target, words)) in enumerate(targets.items()):
        located = [
            line for line in result.stderr.splitlines() if f"sources.bad{index}.document:" in line
        ]
        assert located, (name, result.stderr)
        assert words in located[0], (name, located[0])
        if name != "missing":
            assert "not found" not in located[0], (name, located[0])


# -- YAML alias bombs ------------------------------------------------------------------------
def _laughs(levels: int, fan: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * fan)}]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*l{level - 1}"] * fan)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


def _merge_bomb(levels: int) -> str:
    lines = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4}"]
    for level in range(1, levels + 1):
        keys = ", ".join(f"k{i}: *m{level - 1}" for i in range(10))
        lines.append(f"m{level}: &m{level} {{<<: *m{level - 1}, {keys}}}")
    return "\n".join(lines) + "\n"


BOMBS = {
    "billion-laughs-9x9": _laughs(9, 9),
    "laughs-30x2": _laughs(30, 2),
    "laughs-wide-5x40": _laughs(5, 40),
    "merge-keys": _merge_bomb(8),
    "recursive-alias": "a: &a [*a]\n",
    "recursive-mapping": "a: &a {self: *a}\n",
    "many-aliases": "x: &x 1\ny: [" + ", ".join(["*x"] * 20_000) + "]\n",
    "deep-nesting": "a: " + "[" * 900 + "]" * 900 + "\n",
    "deep-block-nesting": "".join("  " * i + f"k{i}:\n" for i in range(800)) + "  " * 800 + "v\n",
}


def _openapi_yaml(body: str) -> str:
    return (
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\n"
        "servers: [{url: 'http://127.0.0.1:9'}]\n"
        "paths: {/ping: {get: {operationId: ping, responses: {'200': {description: ok}}}}}\n"
        "x-payload:\n" + "".join("  " + line + "\n" for line in body.splitlines())
    )


async def test_alias_bombs_are_refused_before_they_are_built(tmp_path: Path) -> None:
    lines = [SPEC, '[sources.good]\ntype = "openapi"\ndocument = "good.yaml"\n']
    (tmp_path / "good.yaml").write_text(_openapi_yaml("a: &a [1, 2]\nb: [*a, *a]"))
    for index, (name, body) in enumerate(BOMBS.items()):
        (tmp_path / f"{name}.yaml").write_text(_openapi_yaml(body))
        lines.append(f'[sources.bomb{index}]\ntype = "openapi"\ndocument = "{name}.yaml"\n')
    (tmp_path / "codemode.toml").write_text("\n".join(lines))
    async with CodeMode.from_spec(load_spec(tmp_path / "codemode.toml")) as cm:
        health = {h.source: h for h in cm.health}
        assert health["good"].status == "ok"  # a few honest aliases are fine
        for index, name in enumerate(BOMBS):
            item = health[f"bomb{index}"]
            assert item.status == "unavailable", (name, item)
            words = ("alias", "nest", "cycle", "recursive", "depth")
            assert any(w in item.message for w in words), (name, item.message)
        ok = await cm.run("return 1 + 1;")
        assert ok.ok and ok.value == 2


def test_alias_bomb_through_the_cli_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(_openapi_yaml(_laughs(12, 12)))
    config = tmp_path / "codemode.toml"
    config.write_text(SPEC + '[sources.bomb]\ntype = "openapi"\ndocument = "bomb.yaml"\n')
    result = _check(config)
    assert result.returncode != 0
    assert "alias" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


async def test_timeout_ms_bounds_loading_a_document(tmp_path: Path) -> None:
    # A large honest document (~4 MB) and a 1 ms budget: the load is cut off, cleanly.
    paths = {
        f"/items{i}/{{id}}": {
            "get": {
                "operationId": f"get{i}",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "ok " * 20}},
            }
        }
        for i in range(6000)
    }
    document = {**DOCUMENT, "paths": paths}
    import yaml

    (tmp_path / "large.yaml").write_text(yaml.safe_dump(document))
    config = tmp_path / "codemode.toml"
    config.write_text(
        SPEC + '[sources.big]\ntype = "openapi"\ndocument = "large.yaml"\ntimeout_ms = 1\n'
        '[sources.roomy]\ntype = "openapi"\ndocument = "large.yaml"\ntimeout_ms = 600000\n'
    )
    async with CodeMode.from_spec(load_spec(config)) as cm:
        health = {h.source: h for h in cm.health}
        assert health["big"].status == "unavailable"
        assert "timeout" in health["big"].message, health["big"].message
        assert health["roomy"].status == "ok"
        assert health["roomy"].tools == 6000


def test_c_and_python_yaml_loaders_agree() -> None:
    from codemodekit.providers.openapi import yaml_load

    if yaml_load.C_LOADER is None:
        pytest.skip("PyYAML was built without libyaml")
    fixtures = Path(__file__).parents[1] / "providers" / "openapi" / "fixtures"
    texts = [p.read_text() for p in sorted(fixtures.glob("*.yaml"))]
    texts += ["a: 2020-01-01\nb: !!binary aGk=\nc: [1, 2.5, true, null, ~, 0x1f, '1']\n"]
    for text in texts:
        assert yaml_load.load_yaml(text, use_c=True) == yaml_load.load_yaml(text, use_c=False)


def test_fifo_writer_is_not_needed(tmp_path: Path, fifo: Path) -> None:
    """Even with a writer attached later, a FIFO is refused without reading from it."""
    config = tmp_path / "codemode.toml"
    config.symlink_to(fifo)
    opened = threading.Event()

    def writer() -> None:
        try:
            with open(fifo, "w") as handle:
                opened.set()
                handle.write(SPEC)
        except BrokenPipeError:
            pass  # the reader refused the FIFO and closed it: expected

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    with pytest.raises(SpecError) as caught:
        load_spec(config)
    assert "FIFO" in str(caught.value)
    # Unblock the writer if it is still waiting for a reader.
    if not opened.is_set():
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
    thread.join(timeout=10)
