"""Every file the user points at is read with a bound and must be a regular file: the
script of ``codemode run``/``typecheck``, a Python tools module (and its import roots,
packages and cached bytecode), ``codemode.lock.json``, an agent client's configuration
for ``codemode install``. Each hostile kind (a FIFO, a link to ``/dev/zero``, a directory,
a file over the bound) goes through each entry point and ends in one clear error, the
documented exit code and no hang; other sources keep working.

(``codemode.toml``, OpenAPI documents and the generated folder: test_hostile_files.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec

SPEC = 'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
GOOD_TOOLS = (
    "from codemodekit import define_tool\n\n"
    "add = define_tool(description='Add.', input_schema={'type': 'object'},\n"
    "                  execute=lambda args: args['a'] + args['b'])\n"
)
KINDS = ("fifo", "link-to-dev-zero", "directory", "oversized")
WORDS = {
    "fifo": "FIFO",
    "link-to-dev-zero": "character device",
    "directory": "directory",
    "oversized": "limit",
}


def _make(kind: str, path: Path) -> None:
    """Put a hostile ``kind`` of file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as handle:  # sparse: past every bound, costs no disk
            handle.truncate(100 * 1024 * 1024)


def _cli(*args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    # The timeout is a hang guard only: a FIFO used to block these forever.
    return subprocess.run(
        [sys.executable, "-m", "codemodekit", *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


def _one_clear_line(result: subprocess.CompletedProcess[str], words: str, code: int = 2) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", ["run", "typecheck"])
def test_script_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, kind: str, command: str
) -> None:
    (tmp_path / "codemode.toml").write_text(SPEC)
    _make(kind, tmp_path / "script.ts")
    result = _cli(command, "script.ts", cwd=tmp_path)
    _one_clear_line(result, WORDS[kind])
    assert "script.ts" in result.stderr


@pytest.mark.parametrize("command", ["run", "typecheck"])
def test_script_on_stdin_is_bounded_and_non_utf8_is_one_line(tmp_path: Path, command: str) -> None:
    (tmp_path / "codemode.toml").write_text(SPEC)
    result = _cli(command, "-", cwd=tmp_path, stdin=b"// " + b"x" * (17 * 1024 * 1024))
    _one_clear_line(result, "standard input is over")
    (tmp_path / "latin1.ts").write_bytes(b"return '\xe9t\xe9';\n")
    result = _cli(command, "latin1.ts", cwd=tmp_path)
    _one_clear_line(result, "not UTF-8")


def _python_spec(tmp_path: Path, hostile: str, extra: str = "") -> Path:
    (tmp_path / "good_tools.py").write_text(GOOD_TOOLS)
    config = tmp_path / "codemode.toml"
    config.write_text(
        SPEC + '[sources.good]\ntype = "python"\nmodule = "good_tools"\n'
        f'[sources.bad]\ntype = "python"\nmodule = "{hostile}"\n{extra}'
    )
    return config


# Each place Python would open for ``module``: the module, a package's __init__, cached
# bytecode, an import root. (A directory named like the module is just not a module.)
PLACES = {
    "module": ("hostile_tools", "hostile_tools.py", ""),
    "package-init": ("hostile_pkg.tools", "hostile_pkg/__init__.py", ""),
    "submodule": ("hostile_pkg2.tools", "hostile_pkg2/tools.py", ""),
    "cached-bytecode": (
        "cached_tools",
        f"__pycache__/cached_tools.{sys.implementation.cache_tag}.pyc",
        "",
    ),
    "import-root": ("root_tools", "root", 'path = ["root"]\n'),
}


def _place(tmp_path: Path, where: str, kind: str) -> tuple[str, str]:
    module, relative, extra = PLACES[where]
    # Names are unique per test: the import system caches modules by name per process.
    tag = f"_{where.replace('-', '_')}_{kind.replace('-', '_')}"
    top = module.split(".")[0]
    module = module.replace(top, top + tag, 1)
    relative = relative.replace(top, top + tag, 1)
    target = tmp_path / relative
    if where == "submodule":
        (tmp_path / f"hostile_pkg2{tag}").mkdir()
        (tmp_path / f"hostile_pkg2{tag}" / "__init__.py").write_text("")
    if where == "cached-bytecode":
        (tmp_path / f"cached_tools{tag}.py").write_text(GOOD_TOOLS)
    _make(kind, target)
    return module, extra


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", list(PLACES))
async def test_python_tools_module_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, kind: str, where: str
) -> None:
    if kind == "directory" and where != "module":
        pytest.skip("a directory is a valid import root; in a package it is not that file")
    if kind == "oversized" and where == "import-root":
        pytest.skip("a regular file is a valid import root (a zip archive)")
    module, extra = _place(tmp_path, where, kind)
    config = _python_spec(tmp_path, module, extra)
    async with CodeMode.from_spec(load_spec(config)) as cm:
        health = {h.source: h for h in cm.health}
        assert health["bad"].status == "unavailable", health["bad"]
        assert WORDS[kind] in health["bad"].message, health["bad"].message
        assert "cannot be imported safely" in health["bad"].message
        if where != "import-root":  # a refused root never joins sys.path for anyone
            assert health["good"].status == "ok", health["good"]
            result = await cm.run("return await tools.good.add({a: 2, b: 3});")
            assert result.ok and result.value["structuredContent"] == 5, result.diagnostic
    result = _cli("check", "-c", str(config), cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert WORDS[kind] in result.stdout + result.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_lock_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    (tmp_path / "codemode.toml").write_text(SPEC)
    _make(kind, tmp_path / "codemode.lock.json")
    result = _cli("generate", "--check", cwd=tmp_path)
    _one_clear_line(result, WORDS[kind])
    assert "codemode.lock.json" in result.stderr and "codemode lock" in result.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_client_config_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    (tmp_path / "codemode.toml").write_text(SPEC)
    _make(kind, tmp_path / ".cursor" / "mcp.json")
    result = _cli("install", "cursor", cwd=tmp_path)
    _one_clear_line(result, WORDS[kind])
    assert not (tmp_path / ".cursor" / "mcp.json.codemode-tmp").exists()


def test_the_documented_happy_paths_still_work(tmp_path: Path) -> None:
    (tmp_path / "codemode.toml").write_text(SPEC)
    (tmp_path / "ok.ts").write_text("\ufeffreturn 40 + 2;\n")
    result = _cli("run", "ok.ts", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "42", result
    result = _cli("install", "cursor", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "mcpServers" in json.loads((tmp_path / ".cursor" / "mcp.json").read_text())
