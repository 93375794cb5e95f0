#!/usr/bin/env bash
# Convergence comparison of the kernel selections (docs/equivalence.md):
# trains the same model, seed and data with
#   v111_fp8   fp8_full, v1 in fwd, dlhs, drhs
#   v212_fp8   fp8_full, the hybrid fwd v2, dlhs v1, drhs v2
#   v222_fp8   fp8_full, v2 everywhere
#   v111_bf16  bf16 activations, no quantization, v1 everywhere
#   dense      the dense path (sparse_matmul=false), f32
# then `raggemm compare` prints the table (final losses, gaps against the
# first run) and writes the PNG of the loss curves.
#
# usage: bench/convergence.sh [key=value ...]     (extra trainer keys for every run)
# env:   RAGGEMM (binary, default build/release/raggemm), STEPS (default 300),
#        OUT (run directory, default runs/convergence), PLOT (default
#        docs/equivalence_convergence.png)
set -euo pipefail
RAGGEMM=${RAGGEMM:-build/release/raggemm}
STEPS=${STEPS:-300}
OUT=${OUT:-runs/convergence}
PLOT=${PLOT:-docs/equivalence_convergence.png}
mkdir -p "$OUT"

run() {
  local name=$1
  shift
  echo "== $name: $*"
  "$RAGGEMM" train steps="$STEPS" base_output_directory="$OUT" run_name="$name" "$@" \
    ${EXTRA:+"${EXTRA[@]}"} >"$OUT/$name.log"
  tail -n 1 "$OUT/$name.log"
}

EXTRA=("$@")
run v111_fp8 quantization=fp8_full use_gmm_v2=false
run v212_fp8 quantization=fp8_full use_gmm_v2=false use_gmm_v2_fwd=true use_gmm_v2_drhs=true
run v222_fp8 quantization=fp8_full use_gmm_v2=true
run v111_bf16 dtype=bf16 use_gmm_v2=false
run dense sparse_matmul=false
"$RAGGEMM" compare "$OUT/v111_fp8" "$OUT/v212_fp8" "$OUT/v222_fp8" "$OUT/v111_bf16" \
  "$OUT/dense" --plot "$PLOT" --every $((STEPS / 10 > 0 ? STEPS / 10 : 1))
