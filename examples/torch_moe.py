#!/usr/bin/env python3
"""An MoE MLP layer in PyTorch, trained a few steps twice from the same
initial parameters and data: once with raggemm.torch.ragged_dot and once with
a loop of torch.mm per expert. Prints both losses and step times per step,
and the speedup.

The layer: a linear router, top-k experts per token (softmax over the chosen
logits), tokens sorted by expert, a gate/up grouped matmul against
wi [E, embed, 2*mlp], SwiGLU, a down grouped matmul against wo [E, mlp, embed],
and the weighted combine back to token order (unsort).

    python examples/torch_moe.py --steps 5 [--compile]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

import raggemm.torch as rtorch


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="training steps per implementation")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--embed", type=int, default=256)
    parser.add_argument("--mlp", type=int, default=512)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile(fullgraph=True) the raggemm layer")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.top_k < 1 or args.top_k > args.experts:
        parser.error("need --steps >= 1 and 1 <= --top-k <= --experts")
    return args


def loop_ragged_dot(lhs, rhs, group_sizes):
    """The peer: one torch.mm per expert."""
    outs, start = [], 0
    for g, size in enumerate(group_sizes.tolist()):
        outs.append(lhs[start:start + size] @ rhs[g])
        start += size
    outs.append(lhs.new_zeros(lhs.shape[0] - start, rhs.shape[2]))
    return torch.cat(outs)


class MoE(torch.nn.Module):
    def __init__(self, embed, mlp, experts, top_k, ragged_dot):
        super().__init__()
        self.top_k, self.ragged_dot = top_k, ragged_dot
        self.router = torch.nn.Parameter(torch.randn(embed, experts) / embed ** 0.5)
        self.wi = torch.nn.Parameter(torch.randn(experts, embed, 2 * mlp) / embed ** 0.5)
        self.wo = torch.nn.Parameter(torch.randn(experts, mlp, embed) / mlp ** 0.5)

    def forward(self, x):  # [T, D] -> [T, D]
        experts = self.wi.shape[0]
        top_logits, top_experts = torch.topk(x @ self.router, self.top_k)   # [T, k]
        gates = torch.softmax(top_logits, dim=-1).reshape(-1)               # [T*k]
        expert_of = top_experts.reshape(-1)                                 # [T*k]
        order = torch.argsort(expert_of, stable=True)                       # sort
        token_of = order // self.top_k
        sizes = torch.bincount(expert_of, minlength=experts).to(torch.int32)
        h = self.ragged_dot(x[token_of], self.wi, sizes)                    # [T*k, 2F]
        gate, up = h.chunk(2, dim=-1)
        y = self.ragged_dot(torch.nn.functional.silu(gate) * up, self.wo, sizes)
        y = y * gates[order, None]
        return torch.zeros_like(x).index_add(0, token_of, y)                # unsort


def train(layer, x, target, steps, lr, name):
    losses, times = [], []
    optimizer = torch.optim.SGD(layer.parameters(), lr=lr)
    for step in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(layer(x), target)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        print(f"{name} step {step}: loss {losses[-1]:.6e} time {times[-1] * 1e3:.1f} ms")
    return losses, times


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    x = torch.randn(args.tokens, args.embed)
    target = torch.randn(args.tokens, args.embed)
    ours = MoE(args.embed, args.mlp, args.experts, args.top_k, rtorch.ragged_dot)
    peer = copy.deepcopy(ours)
    peer.ragged_dot = loop_ragged_dot
    model = torch.compile(ours, fullgraph=True) if args.compile else ours
    our_losses, our_times = train(model, x, target, args.steps, args.lr, "raggemm")
    peer_losses, peer_times = train(peer, x, target, args.steps, args.lr, "torch.mm loop")
    diff = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(our_losses, peer_losses))
    print(f"max relative loss difference raggemm vs torch.mm loop: {diff:.2e}")
    # The first step includes one-time costs (compilation, first-touch).
    later = slice(1, None) if args.steps > 1 else slice(None)
    ours_ms = sorted(our_times[later])[len(our_times[later]) // 2] * 1e3
    peer_ms = sorted(peer_times[later])[len(peer_times[later]) // 2] * 1e3
    print(f"median step: raggemm {ours_ms:.1f} ms, torch.mm loop {peer_ms:.1f} ms, "
          f"speedup {peer_ms / ours_ms:.2f}x")


if __name__ == "__main__":
    main()
