#!/usr/bin/env bash
# Main job: set up, build, print the machine's peaks and benchmark the V3.2 sparse flash attention
# cases of spec/CASES.md on 1 and 2 threads. Extra arguments are passed to `dsops bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
./build/tools/dsops info
for threads in 1 2; do
  echo
  ./build/tools/dsops bench v32_sfa --threads "$threads" "$@"
done
