"""Formats the JSON lines of bench/run_performance.sh as one machine's section
of docs/performance.md, and merges it into the page.

usage: performance_report.py section RESULTS_DIR THREADS REPS ROUNDS > section.md
       performance_report.py merge PAGE SECTION_FILE > new_page.md

One section per machine measured (CPU model, ISA, caches, the peers'
kernels: all read on the machine by `raggemm peak --json`, /proc/cpuinfo and
the bench runs, never written by hand), keyed by the machine and the SIMD
target ours ran (a forced `--target AVX2` run on an AVX-512 machine is a
section of its own). `merge` replaces the section with the same key and
keeps every other machine's.

A case measured in several rounds (one cases.jsonl line per round) is
reported as its per-field median over the rounds; ratios between two of
our cases (bf16, int8, fp8 against f32) are the medians of each round's
ratio.
"""
import json
import re
import statistics
import sys
from pathlib import Path

HEADER = """# Performance

Produced by `bench/run_performance.sh` (rerun it on a machine to refresh that
machine's section; the other sections stay). The text after the sections is
rewritten from bench/performance_records.md and bench/performance_notes.md on
every sweep: edit it there. Each section names the machine as
read there. Every figure is, per case, the median over the rounds (the whole
sweep repeated) of one `raggemm bench` run's median of the timed runs after
warm-up (M = 4096). Each bench run times, on the same inputs: ours; oneDNN's
matmul (it dispatches on the ISA itself); OpenBLAS as the process loaded it
(its core read from the library, labelled with the `OPENBLAS_CORETYPE` that
restricts it); and, where that core is of a lesser class than the CPU
supports, OpenBLAS again in a child process with `OPENBLAS_CORETYPE` set to
the best core, trusted only after its outputs match an f64 reference on
sampled elements. Each peer runs a per-group loop and one dense product of
the same total M, K, N; "best" is the fastest checked peer of that run.
GFLOP/s = 2 M K N / time for every implementation. The roofline of a case is
`bound_ms = max(flops / FMA peak, bytes / DRAM read bandwidth)` (bytes: every
operand read once in its storage type, the f32 output written once), both
probed in the same bench run; `roofline_efficiency = bound_ms / ours`.

Targets (issue 14, 2 threads, f32 unless said, against the best peer):
gmm, dlhs >= 1.0x best dense at 8 groups, >= 0.95x at 32 groups, and at
64-128 groups roofline efficiency >= 0.7 and never slower than the best loop;
tgmm >= 0.95x best dense at 8 and 32 groups, at 64-128 groups roofline
efficiency >= 0.6 and never slower than the best loop; bf16 storage >= 0.95x
f32; int8 >= 1.6x f32 without VNNI and >= 2.5x with it; fp8 storage >= 0.9x
f32; heuristic tiles within 0.9x of `raggemm tune`'s (bench/run_tiling.sh,
docs/tiling.md; not run by this script); the training-step targets (GMM
GFLOP/s in the step, glue share, optimizer) are not measured by this script.

"""

SECTION_START = "<!-- machine: {key} -->"
SECTION_END = "<!-- end machine: {key} -->"

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
                case[field] = statistics.median(run[field] for run in runs if field in run)
        case["rounds"] = len(runs)
        case["runs"] = runs
        merged.append(case)
    return merged


def best_probe(path):
    """Each rate's maximum over a file of `raggemm peak --json` lines (a probe
    can only under-report a peak), or None without any line."""
    if not path.exists():
        return None
    probes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not probes:
        return None
    best = dict(probes[0])
    for key in ("fma_peak_gflops", "microkernel_gflops", "int8_microkernel_gops",
                "bf16_microkernel_gflops"):
        # int8_microkernel_gops: probes since 6 Dec 2026; bf16_microkernel_gflops: since 6 Dec, 20:00
        if all(key in p for p in probes):
            best[key] = max(p[key] for p in probes)
    if "dram_read_gbps" in best:
        by_threads = {}
        for p in probes:
            for entry in p.get("dram_read_gbps", []):
                by_threads[entry["threads"]] = max(by_threads.get(entry["threads"], 0), entry["gbps"])
        best["dram_read_gbps"] = [{"threads": t, "gbps": g} for t, g in sorted(by_threads.items())]
    best["probes"] = len(probes)
    return best


def cpuinfo():
    """Family, model and ISA flags of this CPU, read from /proc/cpuinfo."""
    info = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        if ":" not in line:
            if info:
                break  # the first CPU is enough
            continue
        name, value = (part.strip() for part in line.split(":", 1))
        info.setdefault(name, value)
    return info


def isa_summary(flags):
    wanted = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
              "avx_vnni", "amx_tile"]
    have = set(flags.split())
    return ", ".join(f for f in wanted if f in have) or "no AVX2"


def kib(value):
    return f"{value // 1024} KiB" if value < 1024 * 1024 else f"{value / (1024 * 1024):g} MiB"


def speed_ratio(case, twin):
    """case's speed over twin's: the median over rounds of each round's ratio."""
    pairs = zip(case.get("runs", [case]), twin.get("runs", [twin]))
    return statistics.median(c["ours_gflops"] / t["ours_gflops"] for c, t in pairs)


def twin_of(case, cases):
    """The f32 v2 case of the same problem."""
    return next((d for d in cases if d["dtype"] == "f32" and d["kernel"] == "v2" and d["op"] == case["op"]
                 and d["k"] == case["k"] and d["n"] == case["n"] and d["groups"] == case["groups"]
                 and d["dist"] == case["dist"]), None)


def target_of(case):
    """(what, met) for a v2 f32 case: its issue target, or None."""
    if case["kernel"] != "v2" or case["dtype"] != "f32":
        return None
    eff = case.get("roofline_efficiency")
    dense, loop = case["ratio_vs_best_dense"], case["ratio_vs_best_loop"]
    if case["op"] == "tgmm":
        if case["groups"] <= 32:
            return "vs best dense >= 0.95", dense >= 0.95
        return "roofline >= 0.6, vs best loop >= 1.0", eff is not None and eff >= 0.6 and loop >= 1.0
    if case["groups"] <= 8:
        return "vs best dense >= 1.0", dense >= 1.0
    if case["groups"] <= 32:
        return "vs best dense >= 0.95", dense >= 0.95
    return "roofline >= 0.7, vs best loop >= 1.0", eff is not None and eff >= 0.7 and loop >= 1.0


def where(c):
    return f"{c['op']} {c['k']}x{c['n']} G={c['groups']} {c['dist']}"


def section(results, threads, reps, rounds):
    peak1 = best_probe(results / "peak1.jsonl")
    peak = best_probe(results / "peak.jsonl")
    if peak1 is None or peak is None:
        sys.exit(f"error: no peak probes in {results}")
    machine = peak.get("machine", {})
    cases = merge_rounds(json.loads(line) for line in (results / "cases.jsonl").read_text().splitlines() if line)
    info = cpuinfo()
    target = cases[0].get("simd_target", machine.get("isa", "?")) if cases else machine.get("isa", "?")
    model = machine.get("cpu_model", info.get("model name", "unknown CPU"))
    family = f"family {info.get('cpu family', '?')} model {info.get('model', '?')}"
    key = re.sub(r"[^a-z0-9]+", "-", f"{model} {family} {kib(machine.get('l2', 0))} {target}".lower()).strip("-")
    out = [SECTION_START.format(key=key), ""]
    out.append(f"## {model} ({family}), ours on {target}\n")
    out.append(f"- ISA (from /proc/cpuinfo): {isa_summary(info.get('flags', ''))}")
    out.append(f"- caches (sysfs): L1d {kib(machine.get('l1d', 0))}, L2 {kib(machine.get('l2', 0))} per core, "
               f"L3 {kib(machine.get('l3', 0))} shared by {machine.get('l3_sharing_cpus', '?')} CPUs; "
               f"{machine.get('cores', '?')} CPUs online")
    out.append(f"- ours: f32 microkernel {target} ({machine.get('mr', '?')} x {machine.get('nr', '?')}), "
               f"int8 microkernels here: {', '.join(machine.get('int8_microkernels', []))}")
    env = machine.get("openblas_coretype_env") or "no OPENBLAS_CORETYPE"
    out.append(f"- OpenBLAS as loaded: core {machine.get('openblas_core', '?')} ({env}); best core for this "
               f"CPU: {machine.get('openblas_best_core_for_cpu', '?') or 'OpenBLAS picks'}")
    peer_kernels = {}
    for c in cases:
        for p in c.get("peers", []):
            label = p["kernel"] + (" (child process, checked)" if p.get("child_process") else "") + \
                (f" ({p['restricted_by']})" if p.get("restricted_by") else "")
            peer_kernels.setdefault(p["name"], set()).add(label)
    for name, kernels in sorted(peer_kernels.items()):
        out.append(f"- peer {name}: {'; '.join(sorted(kernels))}")
    notes = sorted({n for c in cases for n in c.get("peer_notes", [])})
    for note in notes:
        out.append(f"- peer note: {note}")
    out.append(f"- run: {threads} threads, {rounds} round(s) of the sweep, {reps} timed runs per bench run, "
               f"kernels {' '.join(sorted({c['kernel'] for c in cases}))}, dtypes "
               f"{' '.join(sorted({c['dtype'] for c in cases}))}\n")

    out.append("### Machine peak (`raggemm peak`)\n")
    out.append(f"Each figure is the highest of {peak['probes']} probes (one before the sweep, one before "
               "every round): another process on a core can only lower a probe.\n")
    out.append("| probe | target | threads | value |")
    out.append("|---|---|---|---|")
    out.append(f"| FMA chains in registers | {peak1['fma_target']} | 1 | {peak1['fma_peak_gflops']:.1f} GFLOP/s |")
    out.append(f"| FMA chains in registers | {peak['fma_target']} | {peak['threads']} | "
               f"{peak['fma_peak_gflops']:.1f} GFLOP/s |")
    out.append(f"| microkernel, L1-resident panels | {peak['microkernel_target']} | {peak['threads']} | "
               f"{peak['microkernel_gflops']:.1f} GFLOP/s |")
    if "int8_microkernel_gops" in peak:
        # What int8 can reach here: its target against f32 is a ratio of this to the FMA peak.
        out.append(f"| int8 microkernel, L1-resident panels | {peak['int8_microkernel_target']} | "
                   f"{peak['threads']} | {peak['int8_microkernel_gops']:.1f} GOP/s "
                   f"({peak['int8_microkernel_gops'] / peak['fma_peak_gflops']:.2f}x the FMA peak) |")
    if peak.get("bf16_microkernel_gflops", 0) > 0:
        # The bf16 dot kernel against the f32 microkernel: what bf16 x bf16 passes can gain here.
        out.append(f"| bf16 dot microkernel, L1-resident panels | {peak['bf16_microkernel_target']} | "
                   f"{peak['threads']} | {peak['bf16_microkernel_gflops']:.1f} GFLOP/s "
                   f"({peak['bf16_microkernel_gflops'] / peak['microkernel_gflops']:.2f}x the f32 microkernel) |")
    for entry in peak.get("dram_read_gbps", []):
        out.append(f"| DRAM read ({peak.get('dram_probe_mib', '?')} MiB buffer) | - | {entry['threads']} | "
                   f"{entry['gbps']:.1f} GB/s |")
    out.append("")

    # Targets at a glance.
    out.append("### Targets\n")
    out.append("| target | cases | met | worst |")
    out.append("|---|---|---|---|")
    groups_of = {}
    for c in cases:
        t = target_of(c)
        if t:
            name = f"{'tgmm' if c['op'] == 'tgmm' else 'gmm, dlhs'}, G={c['groups']}: {t[0]}"
            groups_of.setdefault(name, []).append((c, t[1]))
    for name, entries in groups_of.items():
        met = sum(ok for _, ok in entries)
        # The worst case by what decides the target: the roofline
        # efficiency where it is one, else the ratio to the best dense.
        decides = "roofline_efficiency" if "roofline" in name else "ratio_vs_best_dense"
        worst = min(entries, key=lambda e: e[0].get(decides, 0.0))[0]
        out.append(f"| {name} | {len(entries)} | {met} | {worst['ratio_vs_best_dense']:.2f}x best dense, "
                   f"{worst['ratio_vs_best_loop']:.2f}x best loop, roofline "
                   f"{worst.get('roofline_efficiency', float('nan')):.2f} ({where(worst)}) |")
    storage_targets = [("bf16", lambda c: 0.95, "bf16 storage >= 0.95x f32"),
                       ("int8", lambda c: 1.6 if c.get("int8_microkernel") == "AVX2" else 2.5,
                        "int8 >= 1.6x f32 (AVX2) / >= 2.5x (VNNI)"),
                       ("fp8_e4m3", lambda c: 0.9, "fp8 storage >= 0.9x f32")]
    for dtype, floor, text in storage_targets:
        pairs = [(c, twin_of(c, cases)) for c in cases if c["dtype"] == dtype]
        pairs = [(c, t) for c, t in pairs if t]
        if not pairs:
            out.append(f"| {text} | 0 | - | not measured in this run |")
            continue
        ratios = [(speed_ratio(c, t), c) for c, t in pairs]
        met = sum(r >= floor(c) for r, c in ratios)
        r, c = min(ratios, key=lambda x: x[0])
        kernel = f", int8 kernel {c.get('int8_microkernel')}" if dtype == "int8" else ""
        out.append(f"| {text} | {len(ratios)} | {met} | {r:.2f}x ({where(c)}{kernel}) |")
    out.append("| heuristic within 0.9x of `raggemm tune` | - | - | not measured by this script "
               "(bench/run_tiling.sh) |")
    out.append("| training step (GMM in step, glue, optimizer) | - | - | not measured by this script |")
    out.append("")

    for op in ("gmm", "dlhs", "tgmm"):
        chosen = [c for c in cases if c["op"] == op]
        if not chosen:
            continue
        out.append(f"### {op}\n")
        out.append("| K | N | groups | dist | kernel | tiles | dtype | ours GFLOP/s | % FMA peak | best loop | "
                   "best dense | vs best loop | vs best dense | roofline eff. | OpenBLAS here loop / dense | "
                   "peak RSS MiB | inputs+out MiB | target met |")
        out.append("|" + "---|" * 18)
        for c in chosen:
            t = target_of(c)
            met = "" if t is None else ("yes" if t[1] else "**no**")
            out.append(
                f"| {c['k']} | {c['n']} | {c['groups']} | {c['dist']} | {c['kernel']} | {c['tiles']} | {c['dtype']} | "
                f"{c['ours_gflops']:.1f} | {100 * c['ours_gflops'] / peak['fma_peak_gflops']:.0f}% | "
                f"{c['peer_loop_best_gflops']:.1f} | {c['peer_dense_best_gflops']:.1f} | "
                f"{c['ratio_vs_best_loop']:.2f} | {c['ratio_vs_best_dense']:.2f} | "
                f"{c.get('roofline_efficiency', float('nan')):.2f} | "
                f"{c['openblas_loop_gflops']:.1f} / {c['openblas_dense_gflops']:.1f} | "
                f"{c['peak_rss_mib']:.0f} | {c['tensors_mib']:.0f} | {met} |")
        out.append("")
    out.append(SECTION_END.format(key=key))
    return "\n".join(out) + "\n"


def merge(page_path, section_path):
    """The page with the section of the same machine key replaced (or added)."""
    new = Path(section_path).read_text()
    key = re.match(r"<!-- machine: (.*) -->", new).group(1)
    page = Path(page_path).read_text() if Path(page_path).exists() else ""
    sections = re.findall(r"(<!-- machine: (.*?) -->.*?<!-- end machine: \2 -->\n)", page, flags=re.S)
    kept = [text for text, k in sections if k != key]
    # The page's hand-written tail (records of machines not measured here,
    # bench/performance_notes.md) is regenerated after the sections.
    body = HEADER + "".join(s + "\n" for s in kept) + new + "\n"
    records = Path(__file__).with_name("performance_records.md")
    if records.exists():
        body += records.read_text() + "\n"
    notes = Path(__file__).with_name("performance_notes.md")
    if notes.exists():
        body += notes.read_text()
    return body


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "section" and len(sys.argv) == 6:
        print(section(Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]), end="")
    elif len(sys.argv) == 4 and sys.argv[1] == "merge":
        print(merge(sys.argv[2], sys.argv[3]), end="")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
