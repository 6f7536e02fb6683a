#!/usr/bin/env bash
# Main job: set up, build, print the machine's peaks, then the tour (`dsops bench --suite tour`, a few
# minutes): one case per operator family at 1 thread and on every core, the vendor's V4 timing table beside
# ours, and, for the sparse attention and the lightning indexer, what a user would otherwise write (a C
# composite over oneDNN's sgemm, vectorised NumPy, PyTorch eager where installed) timed on the same inputs and
# checked against dsops's output; a closing summary per family. Progress goes to standard error, one line
# per finished case to standard output.
#
#   bash scripts/bench.sh [--full] [dsops bench options]
#
# --full (or DSOPS_BENCH_FULL=1): every V3.2 case of the benchmark at 1 and 2 threads with detail rows, then
# the whole vendor V4 suite (tens of minutes). The exit status is non-zero if any case failed.
set -euo pipefail
cd "$(dirname "$0")/.."
full=${DSOPS_BENCH_FULL:-0}
args=()
for a in "$@"; do
  if [ "$a" = "--full" ]; then full=1; else args+=("$a"); fi
done
scripts/setup.sh
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
./build/tools/dsops info
echo
if [ "$full" != 1 ]; then
  exec ./build/tools/dsops bench --suite tour ${args[@]+"${args[@]}"}
fi
failed=0
for threads in 1 2; do
  for cases in v32_sfa li_bench v32_li_int8_b4_s2_kv64k v32_mla_prolog_int8_b128_s1_kv1k v32_mla_prolog_bf16_b64_s2_kv64k_ci; do
    ./build/tools/dsops bench "$cases" --threads "$threads" --alternatives ${args[@]+"${args[@]}"} || failed=1
    echo
  done
done
# the vendor's V4 table: every operator at its shape, 1 thread and every core, one summary table at the end
./build/tools/dsops bench --suite seed-v4 ${args[@]+"${args[@]}"} || failed=1
exit $failed
