#!/usr/bin/env bash
# Installs the Debian packages the build needs, skipping those already present.
# Idempotent: a second run installs nothing and changes nothing.
set -euo pipefail
packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev libomp-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libopenblas-dev libdnnl-dev
  python3-venv valgrind gnuplot-nox openmpi-bin libopenmpi-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
