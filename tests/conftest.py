"""Shared fixtures: the JavaScript tools the tests run against, installed by .ci/run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
NODE_MODULES = TESTS / "js" / "node_modules"


def node_tool(name: str) -> Path:
    """Path of an npm-installed executable (``tsc``, ``mcp-server-everything``...).

    Skips the test with the install command when npm or the package is missing.
    """
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed: these tests need them")
    path = NODE_MODULES / ".bin" / name
    if not path.exists():
        pytest.skip(f"{name} is missing: run `npm install --prefix tests/js` (done by .ci/run)")
    return path


def node_package(name: str) -> Path:
    """Folder of an npm package used as a corpus (``@readme/oas-examples``...)."""
    path = NODE_MODULES / name
    if not path.exists():
        pytest.skip(f"{name} is missing: run `npm install --prefix tests/js` (done by .ci/run)")
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden files from the current output instead of comparing",
    )


def pytest_configure(config: pytest.Config) -> None:
    from tests import golden

    golden.set_update(bool(config.getoption("--update-goldens", default=False)))
