#!/usr/bin/env python3
"""Measures raggemm from Python against the framework paths, each comparison
in one run (the numbers of docs/python.md):

1. call overhead on a tiny problem (M=8, K=N=8, G=2): raggemm.gmm (numpy),
   raggemm.torch.ragged_dot, raggemm.jax.ragged_dot under jit, and the bare
   extension function; median over batches of calls.
2. per shape (default: M=4096, K=N=1024, G=32 uniform and G=128 zipf:1.2),
   forward + backward (the gradients w.r.t. lhs and rhs of sum(out**2)):
   - JAX under jit: raggemm.jax.ragged_dot with the default call (no plan),
     with every pass's kernel forced to v1 and to v2, and jax.lax.ragged_dot;
   - PyTorch autograd: raggemm.torch.ragged_dot (default, v1, v2; f32 and
     bf16), torch._grouped_mm (bf16, where this torch runs it on CPU) and a
     loop of torch.mm per group (f32);
   medians of --repeats timed calls after one warm-up call each, taken
   round-robin: each round times every contender of the shape once, in
   turn, so the load of a shared machine falls on all of them alike.

Group sizes: "uniform" draws each row's group uniformly at random (a
multinomial: sizes near M/G); "zipf:S" gives the group of rank r a share
proportional to 1/r^S (ranks shuffled), as `raggemm bench --dist` does.

    python examples/bench_python.py [--shapes 4096x1024x1024x32:uniform ...] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*",
                        default=["4096x1024x1024x32:uniform", "4096x1024x1024x128:zipf:1.2"],
                        help="MxKxNxG:DIST")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lax-repeats", type=int, default=3,
                        help="repeats for jax.lax.ragged_dot (it is slow: G dense matmuls)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["overhead", "jax", "lax", "torch", "mm_loop", "v1"],
                        help="mm_loop: the torch.mm loop (minutes at 128 groups); "
                             "v1: the forced-v1 contenders")
    return parser.parse_args()


def group_sizes(m, groups, dist, seed=0):
    rng = np.random.default_rng(seed)
    if dist == "uniform":
        return rng.multinomial(m, np.ones(groups) / groups).astype(np.int32)
    if dist.startswith("zipf:"):
        weights = 1.0 / np.arange(1, groups + 1) ** float(dist[5:])
        exact = m * weights / weights.sum()
        sizes = np.floor(exact).astype(np.int64)
        sizes[np.argsort(exact - sizes)[::-1][: m - sizes.sum()]] += 1
        return rng.permutation(sizes).astype(np.int32)
    raise SystemExit(f"--shapes: unknown group distribution {dist!r}")


def median_seconds(fn, repeats):
    fn()  # warm-up (compilation, first touch)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def round_robin_medians(fns, repeats):
    """{name: median seconds}: one warm-up call each, then `repeats` rounds
    that time every contender once, in turn. A contender that raises
    (RuntimeError and kin: not supported here) is reported and left out."""
    live = {}
    for name, fn in fns.items():
        try:
            fn()  # warm-up (compilation, first touch)
            live[name] = fn
        except (RuntimeError, AttributeError, NotImplementedError) as error:
            print(f"  {name}: not run ({str(error).splitlines()[0][:80]})")
    times = {name: [] for name in live}
    for _ in range(repeats):
        for name, fn in live.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def report(label, seconds, flops, peers=None):
    line = f"  {label:<44} {seconds * 1e3:10.1f} ms {flops / seconds / 1e9:8.1f} GFLOP/s"
    if peers:
        line += "  " + "  ".join(f"{name} {seconds_ / seconds:.2f}x" for name, seconds_ in peers)
    print(line, flush=True)


def per_call_us(fn, calls=1000, batches=11):
    fn()
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times) * 1e6


def bench_overhead(skip):
    import raggemm
    from raggemm import _raggemm

    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((8, 8)).astype(np.float32)
    rhs = rng.standard_normal((2, 8, 8)).astype(np.float32)
    sizes = np.array([3, 5], np.int32)
    out = np.empty((8, 8), np.float32)
    rows = {
        "raggemm.gmm (numpy, default)": lambda: raggemm.gmm(lhs, rhs, sizes),
        "raggemm.gmm (numpy, threads=1)": lambda: raggemm.gmm(lhs, rhs, sizes, threads=1),
        "extension function alone": lambda: _raggemm.gmm(
            lhs, "f32", rhs, "f32", sizes, "i32", out, False, None, "auto", 0, 0, 0, -1, False,
            None, None, None, None, "channel", 0, ""),
    }
    if "torch" not in skip:
        import torch

        import raggemm.torch as rtorch

        t_lhs, t_rhs, t_sizes = map(torch.from_numpy, (lhs, rhs, sizes))
        rows["raggemm.torch.ragged_dot"] = lambda: rtorch.ragged_dot(t_lhs, t_rhs, t_sizes)
        rows["raggemm.torch.ragged_dot (threads=1)"] = lambda: rtorch.ragged_dot(
            t_lhs, t_rhs, t_sizes, threads=1)
        rows["torch.mm loop (2 groups)"] = lambda: torch.cat(
            [t_lhs[:3] @ t_rhs[0], t_lhs[3:] @ t_rhs[1]])
    if "jax" not in skip:
        import jax

        import raggemm.jax as rjax

        f = jax.jit(rjax.ragged_dot)
        rows["raggemm.jax.ragged_dot (jit)"] = lambda: jax.block_until_ready(f(lhs, rhs, sizes))
        one = raggemm.PassConfig(threads=1)
        f1 = jax.jit(lambda a, b, s: rjax.ragged_dot(a, b, s, plan=raggemm.Plan(one, one, one)))
        rows["raggemm.jax.ragged_dot (jit, threads=1)"] = lambda: jax.block_until_ready(
            f1(lhs, rhs, sizes))
        g = jax.jit(jax.lax.ragged_dot)
        rows["jax.lax.ragged_dot (jit)"] = lambda: jax.block_until_ready(g(lhs, rhs, sizes))
    print("call overhead, M=8 K=N=8 G=2 f32, us per call (median of 11 batches of 1000):")
    for name, fn in rows.items():
        print(f"  {name:<44} {per_call_us(fn):8.2f} us", flush=True)


def bench_jax(m, k, n, sizes, args):
    import jax
    import jax.numpy as jnp

    import raggemm
    import raggemm.jax as rjax

    rng = np.random.default_rng(1)
    lhs = jnp.asarray(rng.standard_normal((m, k), np.float32))
    rhs = jnp.asarray(rng.standard_normal((len(sizes), k, n), np.float32))
    sizes = jnp.asarray(sizes)
    flops = 3 * 2 * m * k * n

    def step(ragged_dot):
        loss = lambda a, b: jnp.sum(ragged_dot(a, b, sizes) ** 2)  # noqa: E731
        run = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        return lambda: jax.block_until_ready(run(lhs, rhs))

    def forced(kernel):
        config = raggemm.PassConfig(kernel=kernel)
        plan = raggemm.Plan(fwd=config, dlhs=config, drhs=config)
        return lambda a, b, s: rjax.ragged_dot(a, b, s, plan=plan)

    times = round_robin_medians({"default": step(rjax.ragged_dot), "v1": step(forced("v1")),
                                 "v2": step(forced("v2"))}, args.repeats)
    if "lax" not in args.skip:
        times["lax"] = median_seconds(step(jax.lax.ragged_dot), args.lax_repeats)
    print(" JAX fwd+bwd under jit:")
    best = min(times["v1"], times["v2"])
    report("raggemm.jax.ragged_dot (default call)", times["default"], flops,
           [("vs lax", times.get("lax", float("nan"))),
            ("vs best explicit kernel", best)])
    report("raggemm.jax.ragged_dot (kernel v1)", times["v1"], flops)
    report("raggemm.jax.ragged_dot (kernel v2)", times["v2"], flops)
    if "lax" in times:
        report("jax.lax.ragged_dot", times["lax"], flops)


def bench_torch(m, k, n, sizes, args):
    import torch

    import raggemm
    import raggemm.torch as rtorch

    gen = torch.Generator().manual_seed(1)
    lhs32 = torch.randn(m, k, generator=gen)
    rhs32 = torch.randn(len(sizes), k, n, generator=gen)
    t_sizes = torch.from_numpy(sizes)
    offs = torch.cumsum(t_sizes, 0, dtype=torch.int32)
    flops = 3 * 2 * m * k * n
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()

    def step(fn, dtype):
        # detach: each contender's operands are leaves of their own. (For f32,
        # .to is lhs32 itself, which requires_grad_ then marked, so every
        # later bf16 contender's .to was recorded in its graph and its
        # backward also cast the weight gradient to f32 and added it into
        # rhs32.grad: 512 MiB more per step at G=128.)
        a = lhs32.to(dtype).detach().requires_grad_(True)
        b = rhs32.to(dtype).detach().requires_grad_(True)

        def run():
            a.grad = b.grad = None
            fn(a, b).float().square().sum().backward()
        return run

    def forced(kernel):
        config = raggemm.PassConfig(kernel=kernel)
        plan = raggemm.Plan(fwd=config, dlhs=config, drhs=config)
        return lambda a, b: rtorch.ragged_dot(a, b, t_sizes, plan=plan)

    def mm_loop(a, b):
        return torch.cat([a[bounds[g]:bounds[g + 1]] @ b[g] for g in range(len(sizes))]
                         + [a.new_zeros(m - bounds[-1], n)])

    cases = {
        "raggemm.torch f32 (default call)": (lambda a, b: rtorch.ragged_dot(a, b, t_sizes),
                                             torch.float32),
        "raggemm.torch f32 (kernel v1)": (forced("v1"), torch.float32),
        "raggemm.torch f32 (kernel v2)": (forced("v2"), torch.float32),
        "raggemm.torch bf16 (default call)": (lambda a, b: rtorch.ragged_dot(a, b, t_sizes),
                                              torch.bfloat16),
        "torch.mm loop f32": (mm_loop, torch.float32),
        "torch._grouped_mm bf16": (lambda a, b: torch._grouped_mm(a, b, offs), torch.bfloat16),
    }
    if "mm_loop" in args.skip:
        del cases["torch.mm loop f32"]
    if "v1" in args.skip:
        del cases["raggemm.torch f32 (kernel v1)"]
    times = round_robin_medians({name: step(fn, dtype) for name, (fn, dtype) in cases.items()},
                                args.repeats)
    print(" PyTorch fwd+bwd (autograd):")
    default = times["raggemm.torch f32 (default call)"]
    peers = [("vs " + name, times[name]) for name in ("torch.mm loop f32", "torch._grouped_mm bf16")
             if name in times]
    peers.append(("vs best explicit kernel",
                  min(times[name] for name in ("raggemm.torch f32 (kernel v1)",
                                               "raggemm.torch f32 (kernel v2)") if name in times)))
    report("raggemm.torch f32 (default call)", default, flops, peers)
    bf16 = times["raggemm.torch bf16 (default call)"]
    report("raggemm.torch bf16 (default call)", bf16, flops,
           [("vs torch._grouped_mm bf16", times["torch._grouped_mm bf16"])]
           if "torch._grouped_mm bf16" in times else None)
    for name, seconds in times.items():
        if "default" not in name:
            report(name, seconds, flops)


def main():
    args = parse_args()
    if "overhead" not in args.skip:
        bench_overhead(args.skip)
    for shape in args.shapes:
        dims, dist = shape.split(":", 1)
        m, k, n, groups = map(int, dims.split("x"))
        sizes = group_sizes(m, groups, dist)
        print(f"M={m} K={k} N={n} G={groups} {dist} (largest group {sizes.max()}, "
              f"empty {int((sizes == 0).sum())}), useful flops 3 x 2MKN:", flush=True)
        if "jax" not in args.skip:
            bench_jax(m, k, n, sizes, args)
        if "torch" not in args.skip:
            bench_torch(m, k, n, sizes, args)


if __name__ == "__main__":
    main()
