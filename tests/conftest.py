"""Shared fixtures: the JavaScript tools the tests run against, installed by .ci/run, and
the rule for a required component that is missing (docs/testing.md lists every skip)."""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

TESTS = Path(__file__).parent
NODE_MODULES = TESTS / "js" / "node_modules"
ON_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
"""CI sets ``CI=true``: there every required component must be present."""


def missing(component: str, fix: str) -> NoReturn:
    """A required component is absent: on CI the test fails with one clear line; on a
    developer's machine it skips, and the skip shows in the summary (``-ra`` in addopts)."""
    if ON_CI:
        pytest.fail(f"required on CI: {component} is missing: {fix}", pytrace=False)
    pytest.skip(f"{component} is missing: {fix}")


def node_tool(name: str) -> Path:
    """Path of an npm-installed executable (``tsc``, ``mcp-server-everything``...).

    Missing node, npm or the package: see ``missing``.
    """
    path = NODE_MODULES / ".bin" / name
    # An installed tool needs node to run, not npm (a test may narrow PATH to node alone).
    if path.exists() and shutil.which("node") is not None:
        return path
    if shutil.which("node") is None or shutil.which("npm") is None:
        missing("node/npm", "install Node.js 20 and npm")
    missing(name, "run `npm install --prefix tests/js` (done by .ci/run)")


def node_package(name: str) -> Path:
    """Folder of an npm package used as a corpus (``@readme/oas-examples``...)."""
    path = NODE_MODULES / name
    if not path.exists():
        missing(name, "run `npm install --prefix tests/js` (done by .ci/run)")
    return path


JSON_SCHEMA_SUITE = TESTS.parent / ".cache" / "corpora" / "JSON-Schema-Test-Suite"
FETCH_SUITE = "run `python tests/corpora/fetch_jsonschema_suite.py` (done by .ci/run)"


def jsonschema_suite() -> Path:
    """The official JSON-Schema-Test-Suite, fetched into ``.cache/corpora``."""
    if not (JSON_SCHEMA_SUITE / ".complete").exists():
        missing("the JSON-Schema-Test-Suite", FETCH_SUITE)
    return JSON_SCHEMA_SUITE


@contextlib.contextmanager
def http_handler_server(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 (a port of its own) from a thread: its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def tools_project(folder: Path, module: str, source: str, config: str) -> Path:
    """A project in ``folder``: a Python tools module ``module`` holding ``source`` beside
    a ``codemode.toml`` holding ``config``; the config's path."""
    (folder / f"{module}.py").write_text(source)
    path = folder / "codemode.toml"
    path.write_text(config)
    return path


def codemode_cli(
    project: Path, *argv: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``codemode ARGV`` run as a user runs it, in ``project``, with no standard input;
    ``timeout`` is a hang guard only."""
    return subprocess.run(
        [sys.executable, "-m", "codemodekit", *argv],
        cwd=project,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden files from the current output instead of comparing",
    )


def pytest_configure(config: pytest.Config) -> None:
    from tests import golden

    golden.set_update(bool(config.getoption("--update-goldens", default=False)))
