#!/usr/bin/env bash
# Create .venv and install codemodekit with its development tools (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
# Sandbox worker processes load seccomp filters through the system libseccomp (pyseccomp,
# installed above, binds it); without it process mode refuses to start (ADR 0028).
if [ "$(uname -s)" = Linux ] && ! .venv/bin/python -c "import ctypes.util, sys; sys.exit(ctypes.util.find_library('seccomp') is None)"; then
  echo "warning: libseccomp is missing (Debian/Ubuntu: apt-get install libseccomp2); sandbox worker processes will refuse to start" >&2
fi
