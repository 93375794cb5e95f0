"""raggemm.tune: the CLI's autotuner (``raggemm tune``) from Python."""

from __future__ import annotations

import os

import numpy as np

from . import _raggemm
from ._arrays import Error


def tune(batch_seq: int, embed_dim: int, mlp_dim: int, groups: int, *, group_sizes=None,
         dtype: str = "f32", budget_s: float = 60.0, cache: str | os.PathLike | None = None,
         threads: int = 0) -> list[dict]:
    """Autotunes the six grouped matmuls (wi, wo x fwd, dlhs, drhs) of one MoE
    block and records the winners in the tune cache, as ``raggemm tune`` does.

    Afterwards every call that leaves tiles, kernel or buffers unset (the
    numpy API, raggemm.torch, raggemm.jax, raggemm.plan) on a problem of the
    same shape, dtype and bucketed M takes them from the cache. The cache is
    ``cache`` if given, else $RAGGEMM_TUNE_CACHE, else
    $XDG_CACHE_HOME/raggemm/tune_cache.json (or ~/.cache/raggemm/...). A
    process reads the default cache once, at its first call: tune in one
    process, run in the next (or pass the plan from raggemm.plan).

    group_sizes: the sizes to tune on (``[groups]`` int32) besides balanced
    batch_seq / groups; dtype "f32" or "bf16"; budget_s for the whole block;
    threads: 0 for OpenMP's default. Returns one dict per (weight, pass):
    weight, pass, M, K, N, G, the winner's tiles, kernel and buffers,
    tuned_ms, heuristic_ms, candidates, budget_cut and the cache path.
    """
    if group_sizes is not None:
        group_sizes = np.asarray(group_sizes)
        if group_sizes.dtype != np.int32:
            raise Error(f"group_sizes={group_sizes.dtype}: expected int32")
    return _raggemm.tune(int(batch_seq), int(embed_dim), int(mlp_dim), int(groups), group_sizes,
                         dtype, float(budget_s), None if cache is None else os.fspath(cache),
                         int(threads))


def default_tune_cache_path() -> str:
    """The tune cache the entries read: $RAGGEMM_TUNE_CACHE, else
    $XDG_CACHE_HOME/raggemm/tune_cache.json, else ~/.cache/raggemm/tune_cache.json."""
    return _raggemm.default_tune_cache_path()
