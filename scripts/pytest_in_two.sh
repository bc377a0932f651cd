#!/usr/bin/env bash
# Run one pytest suite as two sessions at once, one per core: CI's machines and a laptop have at least two,
# and one pytest process keeps one of them busy. The first session runs FIRST (paths or node ids), the
# second runs everything else under BASE (the configured testpaths when BASE is not given).
#
#   scripts/pytest_in_two.sh [--base PATH] FIRST...
#
# PYTHON (default .venv/bin/python) runs both; the environment (TORNASOLE_RELIABILITY_FULL, ...) reaches
# both. The second session prints as it goes; the first session's output follows once both have ended.
# The exit status is non-zero when either session failed. Each session has its own cache folder, so
# `pytest --lf` afterwards still knows what failed in either.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-.venv/bin/python}"
base=()
if [[ "${1:-}" == "--base" ]]; then
  base=("$2")
  shift 2
fi
if [[ $# -eq 0 ]]; then
  echo "pytest_in_two.sh: name what the first session runs (paths or node ids)" >&2
  exit 2
fi

first=("$@")
rest=()
for item in "${first[@]}"; do
  if [[ "$item" == *"::"* ]]; then
    rest+=("--deselect=$item")
  else
    rest+=("--ignore=$item")
  fi
done

mkdir -p build
log=$(mktemp build/pytest-first.XXXXXX.log)
first_pid=""
# on any exit the log goes; interrupted, the first session goes too (its pid is set once it started)
trap 'if [ -n "$first_pid" ]; then kill "$first_pid" 2>/dev/null || true; fi; rm -f "$log"' EXIT

"$python" -m pytest -q -o cache_dir=build/pytest-cache-first "${first[@]}" >"$log" 2>&1 &
first_pid=$!
status_rest=0
"$python" -m pytest -q "${rest[@]}" "${base[@]}" || status_rest=$?
status_first=0
wait "$first_pid" || status_first=$?

echo "---- the first session: ${first[*]} ----"
cat "$log"
echo "pytest_in_two.sh: first session exit ${status_first}, second session exit ${status_rest}"
[[ $status_first -eq 0 && $status_rest -eq 0 ]]
