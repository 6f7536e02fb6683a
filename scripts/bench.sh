#!/usr/bin/env bash
# Main job: set up, build, print the machine's peaks and benchmark named cases of spec/CASES.md on 1 and
# 2 threads: the V3.2 operators (sparse flash attention, lightning indexer, MLA prolog) and the cases of
# the vendor's V4 timing table (--suite seed-v4: swa, cfa, scfa, compressors, prologs, hc_pre / hc_post;
# one table with our times beside the vendor's). Extra arguments are passed to `dsops bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
./build/tools/dsops info
for threads in 1 2; do
  for cases in v32_sfa li_bench v32_li_int8_b4_s2_kv64k v32_mla_prolog_int8_b128_s1_kv1k v32_mla_prolog_bf16_b64_s2_kv64k_ci; do
    echo
    ./build/tools/dsops bench "$cases" --threads "$threads" "$@"
  done
done
# the vendor's V4 table: every operator at its shape, 1 and 2 threads, one summary table at the end
echo
./build/tools/dsops bench --suite seed-v4 "$@"
