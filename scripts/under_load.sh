#!/usr/bin/env bash
# Run pytest beside a CPU burner (busy processes, one per core of the reference 2-core
# machine) again and again, until it fails or has passed N times in a row.
#
#   scripts/under_load.sh [-n PASSES] [-b BURNERS] [pytest arguments...]
#
# The burners are stopped on exit. See docs/testing.md for the families to run this way.
set -euo pipefail
cd "$(dirname "$0")/.."
passes=20
burners=2
while getopts n:b: opt; do
  case $opt in
    n) passes=$OPTARG ;;
    b) burners=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
PYTHON="${PYTHON:-.venv/bin/python}"
pids=()
stop_burners() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_burners EXIT
for _ in $(seq "$burners"); do
  "$PYTHON" -c 'while True: pass' &
  pids+=("$!")
done
for i in $(seq "$passes"); do
  started=$(date +%s)
  if ! "$PYTHON" -m pytest -q -p no:cacheprovider "$@"; then
    echo "under load: pass $i failed, after $((i - 1)) in a row ($burners burners)" >&2
    exit 1
  fi
  echo "under load: pass $i of $passes in $(($(date +%s) - started)) s ($burners burners)"
done
echo "under load: $passes passes in a row ($burners burners)"
