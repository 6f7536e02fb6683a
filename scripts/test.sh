#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest; the "emulated" label is the same programs on small problems, for
# emulated CPUs: .ci/run). Extra arguments are passed to scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
export OMP_WAIT_POLICY=passive
ctest --test-dir build --output-on-failure -j1 -LE emulated
