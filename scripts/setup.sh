#!/usr/bin/env bash
# Installs what dsops needs (Debian packages, NumPy) and builds it in ./build (Release).
# Usage: scripts/setup.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/packages.sh
install_missing_packages cmake gcc make libcjson-dev libdnnl-dev
# NumPy, ml_dtypes and pytest for the Python package and its checks (the python3 on PATH, which pip installs into)
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import numpy, ml_dtypes, pytest, scikit_build_core' >/dev/null 2>&1; then
  python3 -m pip install -q numpy ml_dtypes pytest scikit-build-core
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
# the Python package (pip install .: the same CMake, the library inside the package; rebuilds incrementally)
if command -v python3 >/dev/null 2>&1; then
  python3 -m pip install -q --no-build-isolation . 2>/dev/null || python3 -m pip install -q .
fi
