#!/usr/bin/env bash
# The main job on the bundled example: no credentials, no network once installed.
# In a scratch folder: `codemode init` writes codemode.toml and hello.ts, `check` connects the
# example Python tools, `run` executes hello.ts, `generate` writes the typed declarations
# and the tsconfig.json an editor uses to check hello.ts. Only the package is installed
# (scripts/test.sh installs the development extras).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --package-only  # the package alone: no dev tools
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
"$OLDPWD/.venv/bin/codemode" init .
"$OLDPWD/.venv/bin/codemode" check
"$OLDPWD/.venv/bin/codemode" run hello.ts
"$OLDPWD/.venv/bin/codemode" generate
echo "generated: $(ls codemode | tr '\n' ' ')"
