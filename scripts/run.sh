#!/usr/bin/env bash
# The main job: builds Release (installing what is missing) and runs a short
# MoE training on the default config (configs/base.yml), printing loss,
# throughput and GMM GFLOP/s per step. Extra arguments are config overrides.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh release
exec build/release/raggemm train configs/base.yml "$@"
