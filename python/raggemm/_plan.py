"""Per-pass settings of one ragged_dot: forward, grad wrt lhs, grad wrt rhs.

A Plan belongs to one weight (an MoE block has two: wi and wo); nothing here
guesses the weight or the pass from shapes. Tiles are kernel tiles (m, k, n)
with k the contracted dim of that pass (DESIGN.md section 2).
"""

from __future__ import annotations

import dataclasses

from ._arrays import Error, tile_tuple

KERNELS = ("v1", "v2")


@dataclasses.dataclass(frozen=True)
class PassConfig:
    """tiles: kernel (m, k, n) or None; kernel: "v1", "v2" or None; buffers:
    input_buffer_count, 1..4, or None; threads: 0 for the framework's default.
    What is None is resolved per call on its shape and group sizes, as the CLI
    resolves it: tune cache, else heuristic."""

    tiles: tuple[int, int, int] | None = None
    kernel: str | None = None
    buffers: int | None = None
    threads: int = 0
    # Where each field came from when resolved by raggemm.plan(): pairs like
    # ("m", "explicit"), ("kernel", "heuristic"); None when set by hand.
    source: tuple[tuple[str, str], ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "tiles", tile_tuple(self.tiles))
        if self.kernel is not None and self.kernel not in KERNELS:
            raise Error(f"kernel={self.kernel!r}: expected one of {', '.join(KERNELS)} or None")
        if self.buffers is not None and not 1 <= int(self.buffers) <= 4:
            raise Error(f"buffers={self.buffers!r}: expected 1..4 or None")
        if int(self.threads) < 0:
            raise Error(f"threads={self.threads!r}: expected >= 0 (0: OpenMP's default)")


@dataclasses.dataclass(frozen=True)
class Plan:
    """The three pass configs of one weight. Hashable, so it can be a static
    argument of jax.jit and of raggemm.jax.ragged_dot."""

    fwd: PassConfig = PassConfig()
    dlhs: PassConfig = PassConfig()
    drhs: PassConfig = PassConfig()
    weight: str | None = None

    def __post_init__(self):
        for name in ("fwd", "dlhs", "drhs"):
            if not isinstance(getattr(self, name), PassConfig):
                raise Error(f"{name}={getattr(self, name)!r}: expected a raggemm.PassConfig")


def _setting_strings(settings):
    if settings is None:
        return []
    if isinstance(settings, dict):
        items = settings.items()
    else:
        items = (str(s).split("=", 1) if "=" in str(s) else (str(s), "") for s in settings)
    out = []
    for key, value in items:
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append(f"{key}={value}")
    return out


def plan(batch_seq, embed_dim, mlp_dim, groups, *, weight="wi", settings=None,
         group_sizes=None, cache=None, dtype="f32") -> Plan:
    """Resolves the fwd, dlhs and drhs configs of one weight of an MoE block.

    weight: "wi" (gate/up, [E, embed, mlp]) or "wo" (down, [E, mlp, embed]).
    settings: config keys as a dict or "key=value" strings, e.g.
    ``{"wi_tile_fwd_batch_seq": 256, "use_gmm_v2": True}`` (DESIGN.md section 2).
    Each field comes from an explicit setting, else the tune cache, else the
    heuristic; ``PassConfig.source`` says which. cache: None for the default
    cache file, a path for another, False for none. group_sizes: the actual
    sizes ([groups] int32) when known, else balanced sizes are assumed.
    """
    import numpy as np

    from . import _raggemm

    if group_sizes is not None:
        group_sizes = np.asarray(group_sizes)
        if group_sizes.dtype != np.int32:
            raise Error(f"group_sizes={group_sizes.dtype}: expected int32")
    use_cache = cache is not False
    cache_path = cache if isinstance(cache, (str, bytes)) or hasattr(cache, "__fspath__") else None
    resolved = _raggemm.resolve_plan(weight, int(batch_seq), int(embed_dim), int(mlp_dim),
                                     int(groups), _setting_strings(settings), group_sizes,
                                     None if cache_path is None else str(cache_path), use_cache,
                                     dtype)
    passes = {
        name: PassConfig(tiles=r["tiles"], kernel=r["kernel"], buffers=r["buffers"],
                         source=tuple(r["source"].items()))
        for name, r in resolved.items()
    }
    return Plan(weight=weight, **passes)


_PASS_OPERANDS = {"fwd": ("lhs", "rhs"), "dlhs": ("dout", "rhs"), "drhs": ("lhs", "dout")}


def resolve_call(a, b, group_sizes, *, pass_: str = "fwd", tiles=None, kernel=None,
                 buffers=None, threads: int = 0) -> PassConfig:
    """The config a call of that pass with these operands runs: what the call
    leaves None (a tile may be 0) comes from the tune cache, else the
    heuristic, as in raggemm.gmm / tgmm, raggemm.torch and raggemm.jax.

    pass_ "fwd": a = lhs [M, K], b = rhs [G, K, N]; "dlhs": a = dout [M, N],
    b = rhs [G, K, N]; "drhs": a = lhs [M, K], b = dout [M, N]. The result's
    ``source`` says where each field came from (explicit, cache, heuristic).
    """
    from ._arrays import GROUP_SIZE_DTYPES, buffer_count, kernel_name, to_raw
    from . import _raggemm

    if pass_ not in _PASS_OPERANDS:
        raise Error(f"pass_={pass_!r}: expected one of fwd, dlhs, drhs")
    first, second = _PASS_OPERANDS[pass_]
    a, a_dtype = to_raw(a, first)
    b, b_dtype = to_raw(b, second)
    group_sizes, sizes_dtype = to_raw(group_sizes, "group_sizes", GROUP_SIZE_DTYPES)
    r = _raggemm.resolve_call(pass_, a, a_dtype, b, b_dtype, group_sizes, sizes_dtype,
                              tile_tuple(tiles, allow_zero=True), kernel_name(kernel),
                              buffer_count(buffers), int(threads))
    return PassConfig(tiles=r["tiles"], kernel=r["kernel"], buffers=r["buffers"],
                      threads=int(threads), source=tuple(r["source"].items()))
