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
    """tiles: kernel (m, k, n) or None (raggemm chooses); kernel: "v1" or "v2";
    buffers: input_buffer_count, 1..4; threads: 0 for OpenMP's default."""

    tiles: tuple[int, int, int] | None = None
    kernel: str = "v1"
    buffers: int = 1
    threads: int = 0
    # Where each field came from when resolved by raggemm.plan(): pairs like
    # ("m", "explicit"), ("kernel", "heuristic"); None when set by hand.
    source: tuple[tuple[str, str], ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "tiles", tile_tuple(self.tiles))
        if self.kernel not in KERNELS:
            raise Error(f"kernel={self.kernel!r}: expected one of {', '.join(KERNELS)}")
        if not 1 <= int(self.buffers) <= 4:
            raise Error(f"buffers={self.buffers!r}: expected 1..4")
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
