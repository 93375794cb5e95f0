#!/usr/bin/env python3
"""An MoE MLP layer in JAX, trained a few steps twice: once with raggemm's
ragged_dot (XLA FFI custom calls on raggemm's CPU kernels) and once with
jax.lax.ragged_dot, from the same initial parameters and data. Prints both
losses and step times per step, and the speedup.

The layer: a linear router, top-k experts per token (softmax over the chosen
logits), tokens sorted by expert, a gate/up GMM against wi [E, embed, 2*mlp],
SwiGLU, a down GMM against wo [E, mlp, embed], and the weighted combine back
to token order. Each weight has its own raggemm plan (tiles per pass).

    python examples/jax_moe.py --steps 5
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import raggemm
import raggemm.jax


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="training steps per implementation")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--embed", type=int, default=256)
    parser.add_argument("--mlp", type=int, default=512)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.top_k < 1 or args.top_k > args.experts:
        parser.error("need --steps >= 1 and 1 <= --top-k <= --experts")
    return args


def init_params(key, embed, mlp, experts):
    k_router, k_wi, k_wo = jax.random.split(key, 3)
    return {
        "router": jax.random.normal(k_router, (embed, experts)) / np.sqrt(embed),
        "wi": jax.random.normal(k_wi, (experts, embed, 2 * mlp)) / np.sqrt(embed),
        "wo": jax.random.normal(k_wo, (experts, mlp, embed)) / np.sqrt(mlp),
    }


def moe_layer(params, x, ragged_dot_wi, ragged_dot_wo, top_k):
    """x [T, D] -> [T, D]. ragged_dot_* are (lhs, rhs, group_sizes) -> out."""
    tokens, experts = x.shape[0], params["router"].shape[1]
    logits = x @ params["router"]                                  # [T, E]
    top_logits, top_experts = jax.lax.top_k(logits, top_k)         # [T, k]
    gates = jax.nn.softmax(top_logits, axis=-1)                    # [T, k]
    expert_of = top_experts.reshape(-1)                            # [T*k]
    token_of = jnp.repeat(jnp.arange(tokens), top_k)               # [T*k]
    order = jnp.argsort(expert_of, stable=True)                    # sort by expert
    group_sizes = jnp.bincount(expert_of, length=experts).astype(jnp.int32)
    xs = x[token_of[order]]                                        # [T*k, D], grouped
    h = ragged_dot_wi(xs, params["wi"], group_sizes)               # [T*k, 2F] gate|up
    mlp = h.shape[1] // 2
    a = jax.nn.silu(h[:, :mlp]) * h[:, mlp:]                       # SwiGLU
    y = ragged_dot_wo(a, params["wo"], group_sizes)                # [T*k, D]
    y = y * gates.reshape(-1)[order][:, None]
    return jnp.zeros_like(x).at[token_of[order]].add(y)            # back to token order


def make_step(ragged_dot_wi, ragged_dot_wo, top_k, lr):
    def loss_fn(params, x, target):
        out = moe_layer(params, x, ragged_dot_wi, ragged_dot_wo, top_k)
        return jnp.mean((out - target) ** 2)

    @jax.jit
    def step(params, x, target):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, target)
        return loss, jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

    return step


def train(name, step, params, x, target, steps):
    losses, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        loss, params = step(params, x, target)
        loss = float(jax.block_until_ready(loss))
        times.append(time.perf_counter() - start)
        losses.append(loss)
        print(f"{name:>8} step {i}: loss {loss:.6f}  time {times[-1] * 1e3:9.2f} ms"
              + ("  (includes compilation)" if i == 0 else ""), flush=True)
    return losses, times


def main(argv=None):
    args = parse_args(argv)
    key_params, key_x, key_teacher = jax.random.split(jax.random.PRNGKey(args.seed), 3)
    params = init_params(key_params, args.embed, args.mlp, args.experts)
    x = jax.random.normal(key_x, (args.tokens, args.embed))
    teacher = jax.random.normal(key_teacher, (args.embed, args.embed)) / np.sqrt(args.embed)
    target = jnp.tanh(x @ teacher)

    # One plan per weight; no shape sniffing decides which is which.
    rows = args.tokens * args.top_k
    plan_wi = raggemm.plan(rows, args.embed, 2 * args.mlp, args.experts, weight="wi")
    plan_wo = raggemm.plan(rows, args.embed, args.mlp, args.experts, weight="wo")
    print(f"MoE layer: tokens={args.tokens} embed={args.embed} mlp={args.mlp} "
          f"experts={args.experts} top_k={args.top_k}; jax {jax.__version__}, "
          f"devices {jax.devices()}")
    for name, plan in (("wi", plan_wi), ("wo", plan_wo)):
        print(f"raggemm plan {name}: " + ", ".join(
            f"{p}={getattr(plan, p).tiles}/{getattr(plan, p).kernel}" for p in ("fwd", "dlhs", "drhs")))

    implementations = {
        "raggemm": make_step(functools.partial(raggemm.jax.ragged_dot, plan=plan_wi),
                             functools.partial(raggemm.jax.ragged_dot, plan=plan_wo),
                             args.top_k, args.lr),
        "lax": make_step(jax.lax.ragged_dot, jax.lax.ragged_dot, args.top_k, args.lr),
    }
    results = {name: train(name, step, params, x, target, args.steps)
               for name, step in implementations.items()}

    (ours, our_times), (theirs, their_times) = results["raggemm"], results["lax"]
    diff = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, theirs))
    print(f"max relative loss difference raggemm vs lax: {diff:.3e}")
    if args.steps > 1:
        ours_ms = np.median(our_times[1:]) * 1e3
        theirs_ms = np.median(their_times[1:]) * 1e3
        print(f"median step time (after compilation): raggemm {ours_ms:.2f} ms, "
              f"lax {theirs_ms:.2f} ms, speedup {theirs_ms / ours_ms:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
