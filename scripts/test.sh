#!/usr/bin/env bash
# Install everything the tests need (Python packages, npm tools and corpora), lint,
# type-check and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if command -v npm >/dev/null 2>&1; then
  npm install --prefix tests/js --no-audit --no-fund --loglevel=error
else
  echo "npm not found: tests that need node tools will be skipped" >&2
fi
.venv/bin/python tests/corpora/fetch_jsonschema_suite.py
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
