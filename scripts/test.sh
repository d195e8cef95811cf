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
if ! command -v haproxy >/dev/null 2>&1; then
  # The load-balancer test runs replicas behind the distribution's HAProxy.
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy) >/dev/null \
      || echo "haproxy could not be installed: the load-balancer test will be skipped" >&2
  else
    echo "haproxy not found (apt-get install haproxy): the load-balancer test will be skipped" >&2
  fi
fi
.venv/bin/python tests/corpora/fetch_jsonschema_suite.py
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
