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
