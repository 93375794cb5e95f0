#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer + ASan + UBSan) and fuzzes the
# .npy parser for N seconds (default 60).
#
#   scripts/fuzz.sh [SECONDS]
#
# The working corpus lives in build/fuzz/corpus/npy, seeded from the checked-in
# tests/fuzz/corpus/npy; crashers land in build/fuzz/artifacts/ and the script
# exits non-zero. With RAGGEMM_FUZZ_MERGE=1 the inputs that add coverage are
# merged (minimized) back into tests/fuzz/corpus/npy, which the core tests
# replay on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "error: SECONDS=$seconds: expected a whole number" >&2; exit 2; }

cmake --preset fuzz >/dev/null
cmake --build build/fuzz --target npy_fuzz -j "$(nproc)"

fuzzer=build/fuzz/tests/fuzz/npy_fuzz
checked_in=tests/fuzz/corpus/npy
work=build/fuzz/corpus/npy
artifacts=build/fuzz/artifacts/
mkdir -p "$work" "$artifacts"
cp -n "$checked_in"/* "$work"/ 2>/dev/null || true

"$fuzzer" "$work" -dict=tests/fuzz/npy.dict -max_total_time="$seconds" \
  -max_len=4096 -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$artifacts" \
  -print_final_stats=1

if [[ "${RAGGEMM_FUZZ_MERGE:-0}" == 1 ]]; then
  # Edge coverage only (no hit counters): keeps the checked-in set small.
  "$fuzzer" -merge=1 -use_counters=0 "$checked_in" "$work" -max_len=4096
fi
