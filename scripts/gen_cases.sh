#!/usr/bin/env bash
# Writes the table of named cases at the end of docs/CASES.md from the registry (`dsops bench --list`), after the
# marker line; everything above the marker is kept. With --check, fails (exit 1) when the file is not up to date.
# usage: scripts/gen_cases.sh [--check] [DSOPS_BINARY (default build/tools/dsops)]
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
dsops=${1:-build/tools/dsops}
doc=docs/CASES.md
marker='<!-- cases table: generated below by scripts/gen_cases.sh; do not edit by hand -->'
grep -qxF "$marker" "$doc" || { echo "gen_cases: $doc has no marker line" >&2; exit 2; }
new=$(mktemp)
trap 'rm -f "$new"' EXIT
{
  sed "/^$(printf '%s' "$marker" | sed 's/[][\/.*^$]/\\&/g')\$/q" "$doc"
  echo
  echo "| case | operator | shape and variant | in CI |"
  echo "|---|---|---|---|"
  # --list columns: name (40), operator (27), then the shape words; "(not in CI)" ends a full-size-only case
  "$dsops" bench --list | awk '{
    name = substr($0, 1, 40); op = substr($0, 42, 27); rest = substr($0, 70)
    gsub(/ +$/, "", name); gsub(/ +$/, "", op); gsub(/^ +| +$/, "", rest); gsub(/  +/, " ", rest)
    ci = "yes"
    if (rest ~ /\(not in CI\)$/) { ci = "no"; sub(/ *\(not in CI\)$/, "", rest) }
    printf "| `%s` | %s | %s | %s |\n", name, op, rest, ci
  }'
} > "$new"
if [ $check = 1 ]; then
  if ! cmp -s "$new" "$doc"; then
    echo "gen_cases: $doc is not up to date with the case registry; run scripts/gen_cases.sh" >&2
    diff "$doc" "$new" | head -20 >&2
    exit 1
  fi
  echo "gen_cases: $doc matches the registry"
else
  cp "$new" "$doc"
fi
