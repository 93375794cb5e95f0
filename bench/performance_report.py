"""Formats the JSON lines of bench/run_performance.sh as docs/performance.md.

usage: performance_report.py RESULTS_DIR THREADS REPS [ROUNDS]

A case measured in several rounds (one cases.jsonl line per round) is
reported as its per-field median over the rounds; the ratios are the
medians of each round's own same-run ratios.
"""
import json
import statistics
import sys
from pathlib import Path

TARGETS = {
    "gmm": ("ratio_vs_dense >= 0.9 (>= 1.0 at 8 uniform groups); ratio_vs_loop >= 1.6 at 128 groups"),
    "dlhs": ("ratio_vs_dense >= 0.9 (>= 1.0 at 8 uniform groups); ratio_vs_loop >= 1.6 at 128 groups"),
    "tgmm": "ratio_vs_dense >= 0.85; ratio_vs_loop >= 2.0 at 128 groups",
}


def meets(case):
    """Whether a v2 f32 case meets its issue target (None: no target applies)."""
    if case["dtype"] != "f32":
        return None
    dense_floor = 0.85 if case["op"] == "tgmm" else 0.9
    if case["op"] != "tgmm" and case["groups"] == 8 and case["dist"] == "uniform":
        dense_floor = 1.0
    ok = case["ratio_vs_dense"] >= dense_floor
    if case["groups"] == 128:
        ok = ok and case["ratio_vs_loop"] >= (2.0 if case["op"] == "tgmm" else 1.6)
    return ok


def speed_ratio(case, twin):
    """case's speed over twin's: the median over rounds of each round's ratio
    (the two run back to back within a round, so drift between rounds cancels)."""
    pairs = zip(case.get("runs", [case]), twin.get("runs", [twin]))
    return statistics.median(c["ours_gflops"] / t["ours_gflops"] for c, t in pairs)


def bf16_pairs(cases):
    """(bf16 case, its f32 v2 twin) for every bf16 case with a twin."""
    for c in cases:
        if c["dtype"] != "bf16":
            continue
        twin = next((d for d in cases if d["dtype"] == "f32" and d["kernel"] == "v2" and d["op"] == c["op"]
                     and d["k"] == c["k"] and d["n"] == c["n"] and d["groups"] == c["groups"]
                     and d["dist"] == c["dist"]), None)
        if twin:
            yield c, twin


def print_target_summary(cases, peak_gflops, threads):
    """One line per issue target: met or not, with the figures that decide it."""
    v2 = [c for c in cases if c["kernel"] == "v2" and c["dtype"] == "f32"]
    print("## Targets at a glance (v2, f32 unless said)\n")
    print("| target | cases | met | worst |")
    print("|---|---|---|---|")

    def line(name, chosen, value, floor):
        if not chosen:
            return
        met = sum(value(c) >= floor for c in chosen)
        worst = min(chosen, key=value)
        where = f"{worst['op']} {worst['k']}x{worst['n']} G={worst['groups']} {worst['dist']}"
        print(f"| {name} | {len(chosen)} | {met} | {value(worst):.2f} ({where}) |")

    gemm = [c for c in v2 if c["op"] != "tgmm"]
    line("gmm, dlhs: vs dense >= 0.9", gemm, lambda c: c["ratio_vs_dense"], 0.9)
    line("gmm, dlhs, 8 uniform groups: vs dense >= 1.0",
         [c for c in gemm if c["groups"] == 8 and c["dist"] == "uniform"], lambda c: c["ratio_vs_dense"], 1.0)
    line("gmm, dlhs, 128 groups: vs loop >= 1.6", [c for c in gemm if c["groups"] == 128],
         lambda c: c["ratio_vs_loop"], 1.6)
    tg = [c for c in v2 if c["op"] == "tgmm"]
    line("tgmm: vs dense >= 0.85", tg, lambda c: c["ratio_vs_dense"], 0.85)
    line("tgmm, 128 groups: vs loop >= 2.0", [c for c in tg if c["groups"] == 128],
         lambda c: c["ratio_vs_loop"], 2.0)
    uniform_gmm = [c for c in v2 if c["op"] == "gmm" and c["dist"] == "uniform"]
    if uniform_gmm:
        largest = max(uniform_gmm, key=lambda c: (c["k"] * c["n"], -c["groups"]))
        line(f"largest uniform gmm ({largest['k']}x{largest['n']}, G={largest['groups']}) >= 75% of the "
             f"{threads}-thread FMA peak", [largest], lambda c: c["ours_gflops"] / peak_gflops, 0.75)
    pairs = list(bf16_pairs(cases))
    if pairs:
        ratios = [(speed_ratio(c, t), c) for c, t in pairs]
        met = sum(r >= 0.95 for r, _ in ratios)
        r, c = min(ratios, key=lambda x: x[0])
        print(f"| bf16 storage >= 0.95x f32 | {len(ratios)} | {met} | {r:.2f} "
              f"({c['op']} {c['k']}x{c['n']} G={c['groups']}) |")
    over = [c for c in cases if c["peak_rss_mib"] > c["tensors_mib"] + 64]
    print(f"| peak RSS <= inputs + output + 64 MiB (all rows) | {len(cases)} | {len(cases) - len(over)} | "
          f"{max(c['peak_rss_mib'] - c['tensors_mib'] for c in cases):.0f} MiB over the tensors |")
    print()


CASE_KEY = ("op", "k", "n", "groups", "dist", "kernel", "dtype")


def merge_rounds(lines):
    """One case per key, numeric fields the median over its rounds, in first-seen order."""
    rounds = {}
    for case in lines:
        rounds.setdefault(tuple(case[f] for f in CASE_KEY), []).append(case)
    merged = []
    for runs in rounds.values():
        case = dict(runs[0])
        for field, value in runs[0].items():
            if isinstance(value, float):
                case[field] = statistics.median(run[field] for run in runs)
        case["rounds"] = len(runs)
        case["runs"] = runs
        merged.append(case)
    return merged


def best_probe(path):
    """The maximum of each rate over a file of `raggemm peak --json` lines (a
    probe can only under-report a peak), or None without any line."""
    if not path.exists():
        return None
    probes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not probes:
        return None
    best = dict(probes[0])
    for key in ("fma_peak_gflops", "microkernel_gflops"):
        best[key] = max(p[key] for p in probes)
    best["probes"] = len(probes)
    return best


def main():
    results = Path(sys.argv[1])
    threads, reps = sys.argv[2], sys.argv[3]
    peak1 = best_probe(results / "peak1.jsonl")
    peak = best_probe(results / "peak.jsonl")
    avx2 = best_probe(results / "peak_avx2.jsonl")
    if peak1 is None or peak is None:
        sys.exit(f"error: no peak probes in {results}")
    rounds = sys.argv[4] if len(sys.argv) > 4 else "1"
    cases = merge_rounds(json.loads(line) for line in (results / "cases.jsonl").read_text().splitlines() if line)

    print("# Performance\n")
    print("Produced by `bench/run_performance.sh` (rerun it to refresh this page); every")
    print(f"figure is, per case, the median over {rounds} rounds (the whole sweep repeated) of one")
    print(f"`raggemm bench` run's median of {reps} timed runs after warm-up ({threads} threads,")
    print("M = 4096); each bench run times ours and both OpenBLAS peers")
    print("(a per-group `cblas_sgemm` loop, and one dense `cblas_sgemm` of the same total")
    print("M, K, N) on the same inputs. GFLOP/s = 2 M K N / time for every implementation.")
    print("OpenBLAS runs as this machine's environment sets it (`OPENBLAS_CORETYPE=Haswell`:")
    print("its AVX2 kernels), which is also how the issue's reference figures were taken.\n")
    print("## Machine peak (`raggemm peak`)\n")
    print(f"Each figure is the highest of {peak['probes']} probes, one before the sweep and one")
    print("before every round: another process on a core can only lower a probe.\n")
    print("| probe | target | threads | GFLOP/s |")
    print("|---|---|---|---|")
    print(f"| FMA chains in registers | {peak1['fma_target']} | 1 | {peak1['fma_peak_gflops']:.1f} |")
    print(f"| FMA chains in registers | {peak['fma_target']} | {peak['threads']} | {peak['fma_peak_gflops']:.1f} |")
    print(f"| microkernel, L1-resident panels | {peak['microkernel_target']} | {peak['threads']} | {peak['microkernel_gflops']:.1f} |")
    if avx2:
        print(f"| FMA chains in registers | {avx2['fma_target']} | {avx2['threads']} | {avx2['fma_peak_gflops']:.1f} |")
        print(f"| microkernel, L1-resident panels | {avx2['microkernel_target']} | {avx2['threads']} | {avx2['microkernel_gflops']:.1f} |")
    best = peak["fma_peak_gflops"]
    print()
    print_target_summary(cases, best, int(threads))
    for op in ("gmm", "dlhs", "tgmm"):
        print(f"## {op}\n")
        print(f"Targets: {TARGETS[op]}.\n")
        print("| K | N | groups | dist | kernel | tiles | dtype | ours GFLOP/s | % of FMA peak | loop GFLOP/s | dense GFLOP/s | vs loop | vs dense | peak RSS MiB | inputs+out MiB | target met |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in cases:
            if c["op"] != op:
                continue
            met = meets(c) if c["kernel"] == "v2" else None
            met_text = "" if met is None else ("yes" if met else "**no**")
            print(f"| {c['k']} | {c['n']} | {c['groups']} | {c['dist']} | {c['kernel']} | {c['tiles']} | {c['dtype']} | "
                  f"{c['ours_gflops']:.1f} | {100 * c['ours_gflops'] / best:.0f}% | {c['openblas_loop_gflops']:.1f} | "
                  f"{c['openblas_dense_gflops']:.1f} | {c['ratio_vs_loop']:.2f} | {c['ratio_vs_dense']:.2f} | "
                  f"{c['peak_rss_mib']:.0f} | {c['tensors_mib']:.0f} | {met_text} |")
        print()
    pairs = list(bf16_pairs(cases))
    if pairs:
        print("## bf16 storage vs f32 (v2, uniform)\n")
        print("bf16 / f32: the median over the rounds of each round's ratio (the two cases run")
        print("back to back in a round); the GFLOP/s columns are the per-case medians.\n")
        print("| op | K | N | groups | f32 GFLOP/s | bf16 GFLOP/s | bf16 / f32 |")
        print("|---|---|---|---|---|---|---|")
        for c, twin in pairs:
            print(f"| {c['op']} | {c['k']} | {c['n']} | {c['groups']} | {twin['ours_gflops']:.1f} | "
                  f"{c['ours_gflops']:.1f} | {speed_ratio(c, twin):.2f} |")
        print()
    # What limits the missed targets: an analysis written by hand.
    notes = Path(__file__).with_name("performance_notes.md")
    if notes.exists():
        print(notes.read_text(), end="")


if __name__ == "__main__":
    main()
