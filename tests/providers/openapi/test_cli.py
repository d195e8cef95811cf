"""`codemode check` on an OpenAPI source: skipped operations are reported with reasons."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.providers.openapi.conftest import FIXTURES


def test_check_reports_skipped_operations(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "secure.yaml", tmp_path / "secure.yaml")
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "t"\n[policy]\ndefault = "allow"\n'
        '[sources.sec]\ntype = "openapi"\ndocument = "secure.yaml"\n'
        'base_url = "http://127.0.0.1:9"\nauth = { api_key = "${CHK_KEY}" }\n'
    )
    env = {**os.environ, "CHK_KEY": "cli-secret-value"}
    done = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(tmp_path / "codemode.toml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "sec  ok           openapi  9 tools  (4 operation(s) skipped)" in output
    assert (
        "sec.mtls: GET /mtls: security: no accepted alternative is supported: "
        "'mtls' (mutualTLS) is not supported"
    ) in output
    assert "cli-secret-value" not in output


def test_check_reports_an_invalid_document(tmp_path: Path) -> None:
    (tmp_path / "api.yaml").write_text("openapi: 3.1.0\ninfo: {title: t}\npaths: {}\n")
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "t"\n[policy]\ndefault = "allow"\n'
        '[sources.api]\ntype = "openapi"\ndocument = "api.yaml"\nbase_url = "http://127.0.0.1:9"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(tmp_path / "codemode.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "api.yaml: invalid OpenAPI 3.1 document at info: 'version' is a required property" in (
        done.stdout + done.stderr
    )
