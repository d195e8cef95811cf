#!/usr/bin/env bash
# Create .venv and install codemodekit (idempotent).
#   bash scripts/setup.sh                 the package and its development tools (.[dev]):
#                                         what scripts/test.sh needs
#   bash scripts/setup.sh --package-only  the package alone: what scripts/demo.sh needs
# $PYTHON picks the interpreter (default python3), $CODEMODE_VENV the folder (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${CODEMODE_VENV:-.venv}"
target=".[dev]"
compile=()
if [ "${1:-}" = "--package-only" ]; then
  target="."
  # Bytecode is written on first import instead: the demo imports a fraction of the files.
  compile=(--no-compile)
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
if [ "$target" != "." ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${compile[@]}" -e "$target"
# Sandbox worker processes load seccomp filters through the system libseccomp (pyseccomp,
# installed above, binds it); without it process mode refuses to start (ADR 0028).
if [ "$(uname -s)" = Linux ] && ! "$VENV/bin/python" -c "import ctypes.util, sys; sys.exit(ctypes.util.find_library('seccomp') is None)"; then
  echo "warning: libseccomp is missing (Debian/Ubuntu: apt-get install libseccomp2); sandbox worker processes will refuse to start" >&2
fi
