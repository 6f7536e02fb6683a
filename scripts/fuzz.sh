#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ in ./build-fuzz (clang; the whole library with AddressSanitizer and
# UndefinedBehaviorSanitizer) and runs each for SECONDS (default 30) on a scratch copy of its committed seed corpus
# (fuzz/corpus/<target>), so that the inputs it finds stay out of the repository. Prints one line per target
# (executions, inputs that brought new coverage, coverage reached, result) and exits non-zero when a target
# crashed, timed out or ran out of memory; then the scratch folder is kept and the crash input and log printed.
# Longer campaigns and reproducing a crash: docs/FUZZING.md.
#
#   scripts/fuzz.sh [SECONDS]
#
# Environment: DSOPS_FUZZ_TARGETS  the targets to run (default "fuzz_safetensors fuzz_run fuzz_validation")
#              DSOPS_FUZZ_KEEP=1   keep the scratch folder (grown corpora, logs) even when nothing crashed
#              DSOPS_FUZZ_BUILD_JOBS  build parallelism (default: the number of CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
targets=${DSOPS_FUZZ_TARGETS:-fuzz_safetensors fuzz_run fuzz_validation}
root=$PWD

# clang with its libFuzzer runtime, OpenMP for clang, and what the library itself needs
if command -v dpkg >/dev/null 2>&1; then
  . scripts/packages.sh
  install_missing_packages cmake make clang libclang-rt-dev libomp-dev libcjson-dev libdnnl-dev
fi

echo "== building the fuzz targets (build-fuzz)"
CC=clang cmake -S . -B build-fuzz -DDSOPS_FUZZ=ON -DDSOPS_BUILD_TESTS=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build build-fuzz -j"${DSOPS_FUZZ_BUILD_JOBS:-$(nproc)}" --target $targets >/dev/null

scratch=$(mktemp -d "${TMPDIR:-/tmp}/dsops-fuzz.XXXXXX")
# the targets' own working files (run outputs, round-trip files): in memory when /dev/shm is there
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  files=$(mktemp -d /dev/shm/dsops-fuzz.XXXXXX)
else
  files=$scratch/files
  mkdir -p "$files"
fi
trap 'rm -rf "$files"' EXIT

echo "== fuzzing each target for ${seconds} s (scratch: $scratch)"
printf '%-18s %12s %10s %16s  %s\n' target executions new_inputs coverage result
failed=0
for t in $targets; do
  dir=$scratch/$t
  mkdir -p "$dir/corpus" "$dir/crashes"
  cp fuzz/corpus/"$t"/* "$dir/corpus/"
  dict=()
  case $t in
    fuzz_safetensors) dict=(-dict="$root/fuzz/safetensors.dict") ;;
    fuzz_run) dict=(-dict="$root/fuzz/run.dict") ;;
  esac
  rc=0
  (cd "$dir" && TMPDIR=$files \
    ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
    LSAN_OPTIONS=suppressions="$root/.ci/lsan.supp" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$root/build-fuzz/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -close_fd_mask=3 \
      -print_final_stats=1 -artifact_prefix="$dir/crashes/" ${dict[@]+"${dict[@]}"} "$dir/corpus" >"$dir/log" 2>&1) || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  added=$(sed -n 's/^stat::new_units_added: *//p' "$dir/log" | tail -1)
  cov=$(sed -n 's/.*cov: \([0-9]*\) ft: .*/\1 edges/p' "$dir/log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    failed=1
    kind=crash
    grep -q 'ERROR: libFuzzer: timeout' "$dir/log" && kind=timeout
    grep -q 'ERROR: libFuzzer: out-of-memory' "$dir/log" && kind=out-of-memory
    result="FAILED ($kind, exit code $rc): $(find "$dir/crashes" -type f | head -1)"
  fi
  printf '%-18s %12s %10s %16s  %s\n' "$t" "${execs:-?}" "${added:-?}" "${cov:-?}" "$result"
  if [ "$rc" -ne 0 ]; then
    echo "---- last lines of $dir/log"
    tail -40 "$dir/log"
    echo "----"
  fi
done

if [ "$failed" -ne 0 ]; then
  echo "a target failed; reproduce with: build-fuzz/fuzz/<target> <crash file> (docs/FUZZING.md); scratch kept: $scratch"
  exit 1
fi
if [ "${DSOPS_FUZZ_KEEP:-0}" = 1 ]; then
  echo "scratch kept: $scratch"
else
  rm -rf "$scratch"
fi
