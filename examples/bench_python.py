#!/usr/bin/env python3
"""Measures raggemm from Python, each comparison in one run:

1. forward + backward of ragged_dot under jax.jit (value_and_grad of a scalar
   loss w.r.t. lhs and rhs): raggemm.jax.ragged_dot vs jax.lax.ragged_dot,
   default M=4096, K=N=1024, 32 balanced groups; median of --repeats timed
   calls after one warm-up (compilation) call each.
2. call overhead of the numpy API on a tiny problem (M=8, K=N=8, G=2):
   median over batches of calls of raggemm.gmm, and of the bare extension
   function for comparison.

    python examples/bench_python.py [--m 4096 --k 1024 --n 1024 --groups 32 --repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=4096)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--groups", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-jax", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    return parser.parse_args()


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_jax(args):
    import jax
    import jax.numpy as jnp

    import raggemm.jax

    rng = np.random.default_rng(0)
    lhs = jnp.asarray(rng.standard_normal((args.m, args.k), np.float32))
    rhs = jnp.asarray(rng.standard_normal((args.groups, args.k, args.n), np.float32))
    sizes = np.full(args.groups, args.m // args.groups, np.int32)
    sizes[: args.m % args.groups] += 1
    sizes = jnp.asarray(sizes)
    flops = 3 * 2 * args.m * args.k * args.n  # fwd + dlhs + drhs

    def fwd_bwd(ragged_dot):
        loss = lambda a, b: jnp.sum(ragged_dot(a, b, sizes) ** 2)  # noqa: E731
        step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        return lambda: jax.block_until_ready(step(lhs, rhs))

    results = {}
    for name, ragged_dot in (("raggemm", raggemm.jax.ragged_dot), ("lax", jax.lax.ragged_dot)):
        run = fwd_bwd(ragged_dot)
        run()  # compile and warm up
        results[name] = median_seconds(run, args.repeats)
        print(f"fwd+bwd jit {name:>8}: {results[name] * 1e3:10.1f} ms  "
              f"{flops / results[name] / 1e9:8.1f} GFLOP/s (useful flops)", flush=True)
    print(f"fwd+bwd ratio raggemm vs jax.lax.ragged_dot at M={args.m} K={args.k} N={args.n} "
          f"G={args.groups}: {results['lax'] / results['raggemm']:.1f}x")


def bench_overhead():
    import raggemm
    from raggemm import _raggemm

    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((8, 8)).astype(np.float32)
    rhs = rng.standard_normal((2, 8, 8)).astype(np.float32)
    sizes = np.array([3, 5], np.int32)
    calls = 2000

    def per_call(fn):
        fn()
        batches = []
        for _ in range(15):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            batches.append((time.perf_counter() - start) / calls)
        # The median, and the best batch (least disturbed by other processes
        # on a shared machine).
        return statistics.median(batches) * 1e6, min(batches) * 1e6

    api = per_call(lambda: raggemm.gmm(lhs, rhs, sizes))
    out = np.empty((8, 8), np.float32)
    bare = per_call(lambda: _raggemm.gmm(lhs, "f32", rhs, "f32", sizes, "i32", out, False, None,
                                         "v1", 1, 0, 0, -1, False, None, None, None, None,
                                         "channel", 0))
    one_thread = per_call(lambda: raggemm.gmm(lhs, rhs, sizes, threads=1))
    print("numpy API call, M=8 K=N=8 G=2, us/call as median (best batch): "
          f"raggemm.gmm {api[0]:.2f} ({api[1]:.2f}); threads=1 {one_thread[0]:.2f} "
          f"({one_thread[1]:.2f}); extension function alone {bare[0]:.2f} ({bare[1]:.2f})")


def main():
    args = parse_args()
    if not args.skip_overhead:
        bench_overhead()
    if not args.skip_jax:
        bench_jax(args)


if __name__ == "__main__":
    main()
