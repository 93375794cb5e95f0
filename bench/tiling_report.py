"""Formats the JSON lines of bench/run_tiling.sh as the table of docs/tiling.md.

usage: tiling_report.py TILING_JSONL ROUNDS REPS
"""
import json
import statistics
import sys
from collections import defaultdict
from datetime import datetime, timezone


def tuner_text(ratio):
    return "?" if ratio is None else f"{ratio:.2f}"


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    rounds, reps = sys.argv[2], sys.argv[3]
    cases = defaultdict(lambda: {"heuristic": [], "tuned": []})
    meta = {}
    for row in rows:
        r = row["result"]
        key = (r["k"], r["n"], r["groups"], r["dist"], r["op"])
        cases[key][row["config"]].append(r["ours_gflops"])
        meta.setdefault(key, {})[row["config"]] = row["flags"]
        meta[key]["tune_s"] = row["tune_s"]
        meta[key]["budget_s"] = row["budget_s"]
        meta[key]["load"] = row["load"]
        meta[key]["tuner_ratio"] = row.get("tuner_ratio")
    print(f"Produced by `bench/run_tiling.sh` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC:")
    print(f"one `raggemm tune` per shape (budget {rows[0]['budget_s']} s, wall time below), then")
    print(f"heuristic and tuned configs of wi's passes alternated {rounds} times, each a")
    print(f"`raggemm bench --no-cache` median of {reps} runs; GFLOP/s is the median of the")
    print("rounds. Tuner: the tuned config's time over the heuristic's, as the tuner")
    print("measured them in its own run (<= 1: the heuristic's config stays the answer")
    print("unless something beat it there). Load: the 1-minute load average after tuning.\n")
    print("| op | K x N | G | dist | heuristic config | heuristic GFLOP/s | tuned config | tuned GFLOP/s | heuristic / tuned | >= 0.9 | tuner: tuned / heuristic time | tune s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    order = {"gmm": 0, "dlhs": 1, "tgmm": 2}
    for key in sorted(cases, key=lambda c: (-c[0], c[2], c[3], order[c[4]])):
        k, n, g, dist, op = key
        h = statistics.median(cases[key]["heuristic"])
        t = statistics.median(cases[key]["tuned"])
        ratio = h / t
        ratios.append(ratio)
        m = meta[key]
        flags = lambda f: f.replace("--tiles ", "").replace(" --kernel ", " ").replace(" --buffers ", " b")
        print(f"| {op} | {k}x{n} | {g} | {dist} | `{flags(m['heuristic'])}` | {h:.1f} | "
              f"`{flags(m['tuned'])}` | {t:.1f} | {ratio:.2f} | {'yes' if ratio >= 0.9 else '**no**'} | "
              f"{tuner_text(m['tuner_ratio'])} | {m['tune_s']:.1f} | {m['load']} |")
    print()
    print(f"Heuristic / tuned: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, "
          f"max {max(ratios):.2f} over {len(ratios)} cases; "
          f"{sum(r >= 0.9 for r in ratios)} of {len(ratios)} at >= 0.9.")
    tuner = [m["tuner_ratio"] for m in meta.values() if m.get("tuner_ratio") is not None]
    if tuner:
        print(f"Tuner's own run, tuned / heuristic time: max {max(tuner):.2f} over {len(tuner)} cases "
              f"({sum(r <= 1.0 for r in tuner)} at <= 1).")


if __name__ == "__main__":
    main()
