#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds Release and ASan+UBSan,
# runs every CTest case in both, installs the Python package into .venv, then
# runs the Python tests (oracle tests against the Release CLI, numpy and JAX API).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/python_env.sh
scripts/build.sh release
(cd build/release && ctest --output-on-failure -j "$(nproc)")
scripts/build.sh asan
# The f64 finite-difference model checks take minutes under the sanitizers
# and exercise no code the other ASan cases miss; Release runs them above. So
# do the attention copy-learning run and the seed command (AttentionLayerTest
# covers their attention code under the sanitizers).
(cd build/asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$(nproc)" \
  -E 'ModelGradientTest|AttentionLearnsTest|SeedCommand')
# The Python package (docs/python.md), built by the same CMake project into
# build/python-* with .venv's scikit-build-core, nanobind and jax, repaired by
# auditwheel (libhwy, libgomp bundled) and installed from that wheel, so the
# tests run what a user installs.
wheel=$(RAGGEMM_WHEEL_BUILD_DIR='build/python-{wheel_tag}' scripts/build_wheel.sh build/wheel)
.venv/bin/pip install -q --no-deps --force-reinstall "$wheel"
RAGGEMM_CLI="$PWD/build/release/raggemm" .venv/bin/python -m pytest -q tests/python
