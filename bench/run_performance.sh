#!/usr/bin/env bash
# Measures this machine for docs/performance.md: the table's shapes
# (M=4096; (K,N) = (1024,1024) and (2048,768); 8, 32, 128 groups; uniform,
# zipf:1.2 and empty:0.25 routing) for gmm, dlhs and tgmm, with the chosen
# kernel generations, bf16 and fp8 storage on the uniform cases, int8 on the
# uniform gmm cases, and the machine peak (FMA, microkernel, DRAM read
# bandwidth). Every bench run times the peers at their best in the same run
# (cli/bench_peers.h) and probes the roofline. The whole sweep runs --rounds
# times, so a burst of load on a shared machine hits one round of every case
# rather than every round of one; the report takes per-case medians.
#
#   bench/run_performance.sh [--quick] [--reps R] [--threads T] [--rounds N]
#                            [--target T] [--kernels "v2 v1"]
#
# --target AVX2 runs ours on the AVX2 target of an AVX-512 machine (what an
# AVX2 machine of this kind runs); the peers dispatch as they do. The result
# is this machine's section of docs/performance.md (one section per machine
# and target; the others stay), plus its raw lines in
# docs/performance_cases/<section>.jsonl. Nothing here sets OPENBLAS_*
# variables: the bench lifts a restricted OpenBLAS in a child process itself.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=5
threads=2
rounds=5
quick=0
target=best
kernels="v2 v1"
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --reps) reps="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --target) target="$2"; shift ;;
    --kernels) kernels="$2"; shift ;;
    *) echo "error: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x build/release/raggemm ] || scripts/build.sh release
bin=build/release/raggemm
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The peaks are probed before the sweep and again before every round; the
# report takes each probe's maximum (a probe sharing a core with another
# process can only under-report).
probe_peaks() {
  "$bin" peak --threads 1 --target "$target" --no-bandwidth --json >>"$out/peak1.jsonl"
  "$bin" peak --threads "$threads" --target "$target" --json >>"$out/peak.jsonl"
}
probe_peaks

shapes=("1024 1024" "2048 768")
groups=(8 32 128)
dists=(uniform zipf:1.2 empty:0.25)
ops=(gmm dlhs tgmm)
read -r -a kernel_list <<<"$kernels"
if ((quick)); then shapes=("1024 1024"); groups=(8 128); dists=(uniform zipf:1.2); fi
bench() {
  "$bin" bench "$@" --m 4096 --threads "$threads" --reps "$reps" --target "$target" --json \
    >>"$out/cases.jsonl"
}
for ((round = 1; round <= rounds; ++round)); do
  probe_peaks
  for shape in "${shapes[@]}"; do
    read -r k n <<<"$shape"
    for op in "${ops[@]}"; do
      for g in "${groups[@]}"; do
        for dist in "${dists[@]}"; do
          for kernel in "${kernel_list[@]}"; do
            bench "$op" --k "$k" --n "$n" --groups "$g" --dist "$dist" --dtype f32 --kernel "$kernel"
          done
          if [ "$dist" = uniform ]; then
            bench "$op" --k "$k" --n "$n" --groups "$g" --dist "$dist" --dtype bf16 --kernel v2
            # fp8 storage on every pass; int8 on gmm, the pass that runs on
            # integer dot products (dlhs and tgmm decode int8 as they do fp8).
            quant_dtypes=(fp8_e4m3)
            if [ "$op" = gmm ]; then quant_dtypes=(int8 fp8_e4m3); fi
            for dtype in "${quant_dtypes[@]}"; do
              bench "$op" --k "$k" --n "$n" --groups "$g" --dist "$dist" --dtype "$dtype" --kernel v2
            done
          fi
        done
      done
    done
  done
done
python3 bench/performance_report.py section "$out" "$threads" "$reps" "$rounds" >"$out/section.md"
key=$(sed -n '1s/<!-- machine: \(.*\) -->/\1/p' "$out/section.md")
python3 bench/performance_report.py merge docs/performance.md "$out/section.md" >docs/performance.md.tmp
mkdir -p docs/performance_cases
cp "$out/cases.jsonl" "docs/performance_cases/$key.jsonl.tmp"
# The probes too, so the section can be rendered again from the files alone.
cat "$out/peak1.jsonl" "$out/peak.jsonl" >"docs/performance_cases/$key.peak.jsonl.tmp"
mv docs/performance.md.tmp docs/performance.md
mv "docs/performance_cases/$key.jsonl.tmp" "docs/performance_cases/$key.jsonl"
mv "docs/performance_cases/$key.peak.jsonl.tmp" "docs/performance_cases/$key.peak.jsonl"
echo "wrote the section $key of docs/performance.md and docs/performance_cases/$key.jsonl"
