#!/usr/bin/env bash
# weight_dtype=f32 vs bf16 on configs/base.yml: stored weight bytes, peak RSS
# (/usr/bin/time -v), tokens/s over alternating runs, and a convergence
# comparison (final training loss, eval loss).
#
#   bench/bf16_weights.sh [BINARY] [BEFORE_BINARY]
#
# BINARY defaults to build/release/raggemm. BEFORE_BINARY (optional): an
# older build whose bf16 runs are measured alongside (the same keys).
# ROUNDS (default 3) alternating rounds of STEPS (default 20) steps;
# CONVERGENCE_STEPS (default 150; 0 skips it); KEYS: more overrides for
# every run (e.g. KEYS=dtype=bf16). Output: a table on stdout,
# runs under ${OUT:-/tmp/raggemm_bf16_weights}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/release/raggemm}
BEFORE=${2:-}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-20}
CONVERGENCE_STEPS=${CONVERGENCE_STEPS:-150}
OUT=${OUT:-/tmp/raggemm_bf16_weights}
rm -rf "$OUT" && mkdir -p "$OUT"

# run LABEL BINARY DTYPE STEPS [KEYS...]: one training run; prints
# "label peak_rss_kib weight_bytes mean_tokens_per_s final_loss eval_loss".
run() {
  local label=$1 bin=$2 dtype=$3 steps=$4
  shift 4
  local dir="$OUT/$label"
  /usr/bin/time -v "$bin" train configs/base.yml steps="$steps" weight_dtype="$dtype" \
    base_output_directory="$OUT" run_name="$label" ${KEYS:-} "$@" >"$dir.log" 2>"$dir.time"
  local rss
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir.time")
  python3 - "$dir/metrics.jsonl" "$label" "$rss" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
tps = statistics.mean(r["tokens_per_s"] for r in rows[1:]) if len(rows) > 1 else rows[0]["tokens_per_s"]
evals = [r["eval_loss"] for r in rows if "eval_loss" in r]
print(sys.argv[2], sys.argv[3], rows[-1].get("weight_bytes", "-"), f"{tps:.0f}",
      f'{rows[-1]["loss"]:.4f}', f"{evals[-1]:.4f}" if evals else "-")
EOF
}

echo "load before: $(uptime)"
echo "label peak_rss_kib weight_bytes tokens_per_s(mean, steps 2..) final_loss eval_loss"
for round in $(seq 1 "$ROUNDS"); do
  run "f32_r$round" "$BIN" f32 "$STEPS"
  run "bf16_r$round" "$BIN" bf16 "$STEPS"
  if [[ -n "$BEFORE" ]]; then run "before_bf16_r$round" "$BEFORE" bf16 "$STEPS"; fi
done
if [[ "$CONVERGENCE_STEPS" -gt 0 ]]; then
  run f32_converge "$BIN" f32 "$CONVERGENCE_STEPS" eval_interval=50
  run bf16_converge "$BIN" bf16 "$CONVERGENCE_STEPS" eval_interval=50
fi
echo "load after: $(uptime)"
