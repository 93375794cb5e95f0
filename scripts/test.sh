#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds Release and ASan+UBSan,
# runs every CTest case in both, then the Python oracle tests against the
# Release CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/python_env.sh
scripts/build.sh release
(cd build/release && ctest --output-on-failure -j "$(nproc)")
scripts/build.sh asan
(cd build/asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$(nproc)")
RAGGEMM_CLI="$PWD/build/release/raggemm" .venv/bin/python -m pytest -q tests/python
