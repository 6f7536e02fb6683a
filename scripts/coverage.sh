#!/usr/bin/env bash
# Branch coverage of the validation code (src/io, the shared tensor checks and each operator's checking
# functions in src/ops) under the validation tests, the core and limits tests and the safetensors tests.
# Usage: scripts/coverage.sh [BUILD_DIR]   (default build-cov; a Debug build with --coverage)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-cov}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="--coverage" -DCMAKE_EXE_LINKER_FLAGS="--coverage" \
  -DCMAKE_SHARED_LINKER_FLAGS="--coverage" >/dev/null
cmake --build "$B" -j"$(nproc)"
find "$B" -name '*.gcda' -delete
OMP_WAIT_POLICY=passive DSOPS_NUM_THREADS=2 DSOPS_TEST_QUICK=1 \
  ctest --test-dir "$B" -j"$(nproc)" -LE emulated -R 'validation|test_core|test_limits|safetensors|test_describe|test_concurrency|test_run' \
  --output-on-failure
# hc_pre / hc_post keep their validation table in test_hc (labels hc_pre_*, hc_post_*)
OMP_WAIT_POLICY=passive DSOPS_NUM_THREADS=2 "$B"/tests/test_hc "hc_pre_|hc_post_|valid|init|prepared" | tail -1
python3 scripts/coverage_report.py "$B" .
