"""raggemm as a drop-in for ``jax.lax.ragged_dot`` on CPU.

``ragged_dot(lhs, rhs, group_sizes, plan=None)`` runs raggemm's kernels through
XLA FFI custom calls (registered for the CPU platform when this module is
imported) and differentiates through a ``jax.custom_vjp`` whose backward calls
the dlhs and drhs handlers, each with its own tile config from the plan.

Under ``jax.vmap`` the custom calls use ``vmap_method="sequential"``: a batch
runs as a loop of unbatched calls, each of which already uses every core.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import _raggemm
from ._arrays import Error
from ._plan import PassConfig, Plan

_FWD, _DLHS, _DRHS = "raggemm_ragged_dot_fwd", "raggemm_ragged_dot_dlhs", "raggemm_ragged_dot_drhs"
VMAP_METHOD = "sequential"


def _register_targets():
    targets = _raggemm.xla_ffi_targets()
    if not targets:
        raise ImportError("this raggemm build has no XLA FFI handlers (jax was not importable "
                          "when it was built); reinstall raggemm with jax installed")
    for name, capsule in targets.items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)


_register_targets()


def _call(target, a, b, group_sizes, out_shape, config: PassConfig):
    m, k, n = config.tiles or (0, 0, 0)  # 0: raggemm picks the tile
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(out_shape, jnp.float32),
                            vmap_method=VMAP_METHOD)
    return call(a, b, group_sizes, tile_m=np.int64(m), tile_k=np.int64(k), tile_n=np.int64(n),
                kernel=config.kernel, buffers=np.int64(config.buffers),
                threads=np.int64(config.threads))


def _forward(lhs, rhs, group_sizes, plan, out_dtype):
    out_shape = (lhs.shape[0], rhs.shape[2])
    return _call(_FWD, lhs, rhs, group_sizes, out_shape, plan.fwd).astype(out_dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _ragged_dot(lhs, rhs, group_sizes, plan, out_dtype):
    return _forward(lhs, rhs, group_sizes, plan, out_dtype)


def _ragged_dot_fwd(lhs, rhs, group_sizes, plan, out_dtype):
    return _forward(lhs, rhs, group_sizes, plan, out_dtype), (lhs, rhs, group_sizes)


def _ragged_dot_bwd(plan, out_dtype, residuals, dout):
    del out_dtype
    lhs, rhs, group_sizes = residuals
    dlhs = _call(_DLHS, dout, rhs, group_sizes, lhs.shape, plan.dlhs)
    drhs = _call(_DRHS, lhs, dout, group_sizes, rhs.shape, plan.drhs)
    # group_sizes is integer: it has no gradient (None is a zero cotangent).
    return dlhs.astype(lhs.dtype), drhs.astype(rhs.dtype), None


_ragged_dot.defvjp(_ragged_dot_fwd, _ragged_dot_bwd)


_FLOAT_DTYPES = (jnp.float32, jnp.bfloat16, jnp.float16)


def _check(lhs, rhs, group_sizes):
    for name, array in (("lhs", lhs), ("rhs", rhs)):
        if array.dtype not in _FLOAT_DTYPES:
            raise Error(f"{name}={array.dtype}: unsupported dtype; expected float32, bfloat16 "
                        "or float16")
    if lhs.ndim != 2:
        raise Error(f"lhs={list(lhs.shape)}: expected [M, K]")
    if rhs.ndim != 3:
        raise Error(f"rhs={list(rhs.shape)}: expected [G, K, N]")
    if rhs.shape[1] != lhs.shape[1]:
        raise Error(f"rhs={list(rhs.shape)}: K must equal lhs's K={lhs.shape[1]}")
    if group_sizes.ndim != 1 or group_sizes.shape[0] != rhs.shape[0]:
        raise Error(f"group_sizes={list(group_sizes.shape)}: expected [G] with G={rhs.shape[0]}")
    if not jnp.issubdtype(group_sizes.dtype, jnp.integer):
        raise Error(f"group_sizes={group_sizes.dtype}: expected an integer dtype")


def ragged_dot(lhs, rhs, group_sizes, plan: Plan | None = None, *,
               preferred_element_type=None):
    """``jax.lax.ragged_dot`` on raggemm's CPU kernels.

    lhs ``[M, K]``, rhs ``[G, K, N]``, group_sizes ``[G]`` (integer, sum <= M).
    Returns ``[M, N]`` with zeros in rows past sum(group_sizes). Accumulation
    is float32; the result has ``preferred_element_type`` or the inputs'
    promoted dtype. ``plan`` (a raggemm.Plan) sets the tiles, kernel and
    buffers of the forward, dlhs and drhs passes; None lets raggemm choose.
    """
    lhs, rhs, group_sizes = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    _check(lhs, rhs, group_sizes)
    plan = Plan() if plan is None else plan
    if not isinstance(plan, Plan):
        raise Error(f"plan={plan!r}: expected a raggemm.Plan or None")
    out_dtype = np.dtype(preferred_element_type or jnp.result_type(lhs.dtype, rhs.dtype))
    return _ragged_dot(lhs, rhs, group_sizes.astype(jnp.int32), plan, out_dtype)
