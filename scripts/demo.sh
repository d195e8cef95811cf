#!/usr/bin/env bash
# The main job on the bundled example: no credentials, no network once installed.
# Writes a codemode.toml with `codemode init` in a scratch folder, checks it, runs a
# TypeScript script against the example Python tools and regenerates the typed declarations.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp src/codemodekit/examples/hello.ts "$work/hello.ts"
cd "$work"
"$OLDPWD/.venv/bin/codemode" init .
"$OLDPWD/.venv/bin/codemode" check
"$OLDPWD/.venv/bin/codemode" run hello.ts
"$OLDPWD/.venv/bin/codemode" generate --out generated
echo "generated: $(ls generated | tr '\n' ' ')"
