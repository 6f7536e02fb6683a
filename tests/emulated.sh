#!/usr/bin/env bash
# Runs a test program under the emulator command in DSOPS_TEST_EMULATOR (e.g. "qemu-x86_64 -cpu Haswell"), or
# natively when it is empty: tests/CMakeLists.txt, label "emulated". An empty filter argument runs everything.
set -uo pipefail
prog=$1
shift
[ "${1-}" = "" ] && shift
# qemu warns once per CPU feature its translator lacks (pcid, x2apic, ...): not about the program
${DSOPS_TEST_EMULATOR:-} "$prog" "$@" 2> >(grep -v "TCG doesn't support requested feature" >&2)
