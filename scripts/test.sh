#!/usr/bin/env bash
# Install everything the tests need (Python packages, npm tools and corpora), lint,
# type-check and run the test suite. Extra arguments go to pytest.
#
# A required component that cannot be installed (npm tools, HAProxy, the
# JSON-Schema-Test-Suite) stops the run on CI (CI=true) with one line saying what is
# missing; on a developer's machine its tests skip and the pytest summary lists them.
set -euo pipefail
cd "$(dirname "$0")/.."

missing() {
  if [ "${CI:-}" = true ]; then
    echo "error: required on CI: $1" >&2
    exit 1
  fi
  echo "warning: $1: its tests will be skipped (listed in the summary)" >&2
}

bash scripts/setup.sh
if command -v npm >/dev/null 2>&1; then
  npm install --prefix tests/js --no-audit --no-fund --loglevel=error
else
  missing "npm not found (install Node.js 20 and npm)"
fi
if ! command -v haproxy >/dev/null 2>&1; then
  # The load-balancer test runs replicas behind the distribution's HAProxy.
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy) >/dev/null \
      || missing "haproxy could not be installed with apt-get"
  else
    missing "haproxy not found (apt-get install haproxy)"
  fi
fi
.venv/bin/python tests/corpora/fetch_jsonschema_suite.py \
  || missing "the JSON-Schema-Test-Suite could not be fetched (tests/corpora/fetch_jsonschema_suite.py)"
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
