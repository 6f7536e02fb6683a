#!/usr/bin/env bash
# Times the same named cases with two builds of the tool, alternating A and B so that the machine's drift
# (a shared VM moves by tens of per cent from minute to minute) falls on both alike, and prints per case the
# median of each build's bench medians and B / A.
# Usage: scripts/bench_compare.sh A_TOOL B_TOOL ROUNDS CASE... (extra bench options in BENCH_OPTS, e.g.
#        BENCH_OPTS="--threads 1 --isa avx2")
set -euo pipefail
a=$1 b=$2 rounds=$3
shift 3
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
opts=${BENCH_OPTS:---threads 1}
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
# the median column of a bench line for CASE (the fifth field)
time_of() { "$1" bench "$2" $opts 2>/dev/null | awk -v c="$2" '$1 == c {print $5; exit}'; }
printf '%-36s %12s %12s %8s\n' case "A ms" "B ms" "B / A"
for c in "$@"; do
  ta=() tb=()
  for ((r = 0; r < rounds; r++)); do
    ta+=("$(time_of "$a" "$c")")
    tb+=("$(time_of "$b" "$c")")
  done
  ma=$(printf '%s\n' "${ta[@]}" | median)
  mb=$(printf '%s\n' "${tb[@]}" | median)
  printf '%-36s %12.3f %12.3f %8.2f\n' "$c" "$ma" "$mb" "$(awk -v x="$ma" -v y="$mb" 'BEGIN {print y / x}')"
done
