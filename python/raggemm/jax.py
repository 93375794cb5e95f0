"""raggemm as a drop-in for ``jax.lax.ragged_dot`` on CPU.

``ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
group_offset=None, *, plan=None)`` has jax.lax.ragged_dot's signature and
semantics and runs raggemm's kernels through XLA FFI custom calls (registered
for the CPU platform when this module is imported).

The three passes are one JAX primitive, ``raggemm_ragged_dot``, with a mode
(fwd, dlhs, drhs). It is bilinear in its two float operands, so it has a JVP
rule (the tangent is the same primitive applied to one tangent at a time) and
a transpose rule per operand (each is another pass: the cotangent of the
forward's lhs is the dlhs pass, of its rhs the drhs pass, and so on around).
Reverse mode is JVP + transposition, as for jax.lax.dot_general, so
``jax.grad``, ``jax.jvp``, ``jax.jacfwd``, ``jax.hessian`` and gradients of
gradients all work. Under ``jax.vmap`` a batch runs as a loop of unbatched
calls (``lax.map``), each of which already uses every core.

The kernels accumulate in float32 and write float32 or bfloat16: a bfloat16
result (``preferred_element_type``, or bf16 inputs) is written by the kernels,
the float32 accumulator rounded once (no float32 temporary, no cast pass);
cotangents of bf16 operands are bf16 the same way. A float16 result is the
float32 result cast.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import _raggemm
from ._arrays import Error
from ._plan import PassConfig, Plan

__all__ = ["quantized_ragged_dot", "ragged_dot", "ragged_dot_general"]

_TARGETS = {"fwd": "raggemm_ragged_dot_fwd", "dlhs": "raggemm_ragged_dot_dlhs",
            "drhs": "raggemm_ragged_dot_drhs"}
_FLOAT_DTYPES = (jnp.float32, jnp.bfloat16, jnp.float16)


def _register_targets():
    targets = _raggemm.xla_ffi_targets()
    if not targets:
        raise ImportError("this raggemm build has no XLA FFI handlers (jax was not importable "
                          "when it was built); reinstall raggemm with jax installed")
    for name, capsule in targets.items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)


_register_targets()

# ---------------------------------------------------------------------------
# The primitive. Operands: a, b, group_sizes (int32 [G]), group_offset (int32
# [1]). Params: mode, plan (hashable), groups (the groups rhs / the drhs output
# hold: G, or the local count with a group offset), local (whether a group
# offset was given), out_dtype (float32 or bfloat16, written by the kernels).
# Shapes by mode:
#   fwd   a=lhs [M,K],  b=rhs [E,K,N]  -> [M,N]
#   dlhs  a=dout [M,N], b=rhs [E,K,N]  -> [M,K]
#   drhs  a=lhs [M,K],  b=dout [M,N]   -> [E,K,N]

ragged_dot_p = Primitive("raggemm_ragged_dot")


def _out_shape(a_shape, b_shape, mode, groups):
    if mode == "fwd":
        return (a_shape[0], b_shape[2])
    if mode == "dlhs":
        return (a_shape[0], b_shape[1])
    return (groups, a_shape[1], b_shape[1])


def _abstract_eval(a, b, group_sizes, group_offset, *, mode, plan, groups, local, out_dtype):
    del group_sizes, group_offset, plan, local
    return jax.core.ShapedArray(_out_shape(a.shape, b.shape, mode, groups), out_dtype)


def _kernel_dtype(dtype):
    """The dtype the kernels write for a wanted result dtype: bfloat16 as
    itself, anything else as float32 (then cast)."""
    return np.dtype(jnp.bfloat16) if np.dtype(dtype) == jnp.bfloat16 else np.dtype(np.float32)


def _ffi(a, b, group_sizes, group_offset, *, mode, plan, groups, local, out_dtype):
    config: PassConfig = getattr(plan, mode)
    m, k, n = config.tiles or (0, 0, 0)  # 0: resolved per call
    call = jax.ffi.ffi_call(
        _TARGETS[mode],
        jax.ShapeDtypeStruct(_out_shape(a.shape, b.shape, mode, groups), out_dtype))
    return call(a, b, group_sizes, group_offset, tile_m=np.int64(m), tile_k=np.int64(k),
                tile_n=np.int64(n), kernel=config.kernel or "auto",
                buffers=np.int64(config.buffers or 0), threads=np.int64(config.threads),
                local_groups=np.int64(groups if local else -1), weight=plan.weight or "")


ragged_dot_p.def_abstract_eval(_abstract_eval)
ragged_dot_p.def_impl(_ffi)
mlir.register_lowering(ragged_dot_p, mlir.lower_fun(_ffi, multiple_results=False),
                       platform="cpu")


def _bind(a, b, group_sizes, group_offset, **params):
    return ragged_dot_p.bind(a, b, group_sizes, group_offset, **params)


def _jvp(primals, tangents, **params):
    a, b, group_sizes, group_offset = primals
    da, db = tangents[:2]
    out = _bind(a, b, group_sizes, group_offset, **params)
    terms = []
    if type(da) is not ad.Zero:
        terms.append(_bind(da, b, group_sizes, group_offset, **params))
    if type(db) is not ad.Zero:
        terms.append(_bind(a, db, group_sizes, group_offset, **params))
    if not terms:
        return out, ad.Zero.from_primal_value(out)
    return out, functools.reduce(jnp.add, terms)


# For each mode, the passes that give the cotangents of operands a and b
# from the output cotangent ct, as (mode, operands from (a, b, ct)):
#   fwd:  ct_lhs = dlhs(ct, rhs);    ct_rhs = drhs(lhs, ct)
#   dlhs: ct_dout = fwd(ct, rhs);    ct_rhs = drhs(ct, dout)
#   drhs: ct_lhs = dlhs(dout, ct);   ct_dout = fwd(lhs, ct)
_TRANSPOSES = {
    "fwd": (("dlhs", lambda a, b, ct: (ct, b)), ("drhs", lambda a, b, ct: (a, ct))),
    "dlhs": (("fwd", lambda a, b, ct: (ct, b)), ("drhs", lambda a, b, ct: (ct, a))),
    "drhs": (("dlhs", lambda a, b, ct: (b, ct)), ("fwd", lambda a, b, ct: (a, ct))),
}


def _transpose(ct, a, b, group_sizes, group_offset, *, mode, plan, groups, local, out_dtype):
    del out_dtype
    if ad.is_undefined_primal(group_sizes) or ad.is_undefined_primal(group_offset):
        raise ValueError("raggemm.jax: group_sizes and group_offset are not differentiable")
    if type(ct) is ad.Zero:
        return [None, None, None, None]
    cts = []
    for operand, (pass_mode, operands) in zip((a, b), _TRANSPOSES[mode]):
        if not ad.is_undefined_primal(operand):
            cts.append(None)
            continue
        x, y = operands(a, b, ct)
        out = _bind(x, y, group_sizes, group_offset, mode=pass_mode, plan=plan, groups=groups,
                    local=local, out_dtype=_kernel_dtype(operand.aval.dtype))
        cts.append(out.astype(operand.aval.dtype))
    return [*cts, None, None]


def _batch(args, dims, **params):
    # An unmapped operand has dim None.
    moved = [x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    mapped = [i for i, d in enumerate(dims) if d is not None]

    def one(slices):
        operands = list(moved)
        for i, x in zip(mapped, slices):
            operands[i] = x
        return _bind(*operands, **params)

    return jax.lax.map(one, [moved[i] for i in mapped]), 0


ad.primitive_jvps[ragged_dot_p] = _jvp
ad.primitive_transposes[ragged_dot_p] = _transpose
batching.primitive_batchers[ragged_dot_p] = _batch

# ---------------------------------------------------------------------------
# The public entries.


def _check_plan(plan):
    plan = Plan() if plan is None else plan
    if not isinstance(plan, Plan):
        raise Error(f"plan={plan!r}: expected a raggemm.Plan or None")
    return plan


def _check_float(array, name):
    if array.dtype not in _FLOAT_DTYPES:
        raise Error(f"{name}={array.dtype}: unsupported dtype; expected float32, bfloat16 or "
                    "float16")


def _check_sizes(group_sizes, groups):
    if group_sizes.ndim != 1 or (groups is not None and group_sizes.shape[0] != groups):
        want = "[G]" if groups is None else f"[G] with G={groups}"
        raise Error(f"group_sizes={list(group_sizes.shape)}: expected {want}")
    if not jnp.issubdtype(group_sizes.dtype, jnp.integer):
        raise Error(f"group_sizes={group_sizes.dtype}: expected an integer dtype")


def _offset_operand(group_offset, local_count, total_groups):
    """(int32 [1] operand, local flag). A group offset runs only the groups
    [offset, offset + local_count) that rhs holds; rows of other groups are 0."""
    if group_offset is None:
        if local_count != total_groups:
            raise Error(f"rhs groups={local_count}: expected {total_groups} (one per group "
                        "size) unless group_offset is given")
        return jnp.zeros((1,), jnp.int32), False
    offset = jnp.asarray(group_offset)
    if offset.size != 1 or not jnp.issubdtype(offset.dtype, jnp.integer):
        raise Error(f"group_offset={offset.dtype}{list(offset.shape)}: expected an integer "
                    "array of shape (1,)")
    return offset.reshape((1,)).astype(jnp.int32), True


def _out_dtype(lhs, rhs, preferred_element_type):
    if preferred_element_type is None:
        return jnp.result_type(lhs.dtype, rhs.dtype)
    return np.dtype(preferred_element_type)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, *, plan: Plan | None = None):
    """``jax.lax.ragged_dot`` on raggemm's CPU kernels (same signature).

    lhs ``[M, K]``, rhs ``[G, K, N]`` (float32, bfloat16 or float16),
    group_sizes ``[G]`` integer with sum <= M: group g owns the next
    group_sizes[g] rows of lhs. Returns ``[M, N]``, with zeros in rows past
    sum(group_sizes).

    precision: accepted for compatibility; accumulation is always float32.
    preferred_element_type: the result dtype (default: the promoted dtype of
    lhs and rhs); float32 and bfloat16 are written by the kernels (bf16: the
    float32 accumulator rounded once), float16 is the float32 result cast.
    group_offset: an integer array of shape (1,): rhs then holds only the
    local experts ``[offset, offset + rhs.shape[0])`` and rows of other
    groups come out zero (expert parallelism; may be traced).
    plan: a raggemm.Plan with the tiles, kernel and buffers of the fwd, dlhs
    and drhs passes (static: it is hashable). What it leaves None, and
    everything with plan=None, is resolved per call from the tune cache,
    else the heuristic, as the CLI does. Differentiable in lhs and rhs to
    any order, forward and reverse mode.
    """
    del precision
    lhs, rhs, group_sizes = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    _check_float(lhs, "lhs")
    _check_float(rhs, "rhs")
    if lhs.ndim != 2:
        raise Error(f"lhs={list(lhs.shape)}: expected [M, K]")
    if rhs.ndim != 3:
        raise Error(f"rhs={list(rhs.shape)}: expected [G, K, N]")
    if rhs.shape[1] != lhs.shape[1]:
        raise Error(f"rhs={list(rhs.shape)}: K must equal lhs's K={lhs.shape[1]}")
    _check_sizes(group_sizes, None if group_offset is not None else rhs.shape[0])
    offset, local = _offset_operand(group_offset, rhs.shape[0], group_sizes.shape[0])
    dtype = _out_dtype(lhs, rhs, preferred_element_type)
    out = _bind(lhs, rhs, group_sizes.astype(jnp.int32), offset, mode="fwd",
                plan=_check_plan(plan), groups=rhs.shape[0], local=local,
                out_dtype=_kernel_dtype(dtype))
    return out.astype(dtype)


# The dimension numbers of the three passes, as jax.lax.RaggedDotDimensionNumbers
# fields ((contracting), (batch)), lhs ragged dims, rhs group dims.
_LAYOUTS = {
    ((((1,), (1,)), ((), ())), (0,), (0,)): "fwd",   # [M,K] x [G,K,N] -> [M,N]
    ((((1,), (2,)), ((), ())), (0,), (0,)): "dlhs",  # [M,N] x [G,K,N] -> [M,K]
    ((((0,), (0,)), ((), ())), (0,), ()): "drhs",    # [M,K] x [M,N] -> [G,K,N]
}


def _layout_key(numbers):
    (lc, rc), (lb, rb) = numbers.dot_dimension_numbers
    return (((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
            tuple(numbers.lhs_ragged_dimensions), tuple(numbers.rhs_group_dimensions))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, *,
                       plan: Plan | None = None):
    """``jax.lax.ragged_dot_general`` for the dimension numbers of the three passes.

    ragged_dot_dimension_numbers (a jax.lax.RaggedDotDimensionNumbers):
    - forward ``(([1], [1]), ([], []))``, lhs ragged [0], rhs group [0]:
      lhs [M,K] x rhs [G,K,N] -> [M,N];
    - grad wrt lhs ``(([1], [2]), ([], []))``, lhs ragged [0], rhs group [0]:
      dout [M,N] x rhs [G,K,N] -> [M,K];
    - grad wrt rhs ``(([0], [0]), ([], []))``, lhs ragged [0], no rhs group:
      lhs [M,K] x dout [M,N] -> [G,K,N].
    Other layouts raise NotImplementedError naming them. The other arguments
    are as in ragged_dot; each layout runs with its own pass config of plan.
    """
    del precision
    key = _layout_key(ragged_dot_dimension_numbers)
    mode = _LAYOUTS.get(key)
    if mode is None:
        raise NotImplementedError(
            f"raggemm.jax.ragged_dot_general: dimension numbers {key[0]} with lhs ragged "
            f"dims {key[1]} and rhs group dims {key[2]} are not one of the three passes' "
            "layouts (fwd, dlhs, drhs); see the docstring")
    lhs, rhs, group_sizes = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    _check_float(lhs, "lhs")
    _check_float(rhs, "rhs")
    ranks = {"fwd": (2, 3), "dlhs": (2, 3), "drhs": (2, 2)}[mode]
    if (lhs.ndim, rhs.ndim) != ranks:
        raise Error(f"lhs={list(lhs.shape)}, rhs={list(rhs.shape)}: expected ranks {ranks} "
                    f"for the {mode} layout")
    contracted = {"fwd": (1, 1), "dlhs": (1, 2), "drhs": (0, 0)}[mode]
    if lhs.shape[contracted[0]] != rhs.shape[contracted[1]]:
        raise Error(f"rhs={list(rhs.shape)}: dim {contracted[1]} must equal lhs's dim "
                    f"{contracted[0]} ({lhs.shape[contracted[0]]})")
    if mode == "drhs":
        groups = group_sizes.shape[0] if group_offset is None else None
        _check_sizes(group_sizes, None)
        if group_offset is not None:
            raise NotImplementedError("raggemm.jax.ragged_dot_general: group_offset with the "
                                      "drhs layout (its output has one slice per group size)")
        groups = group_sizes.shape[0]
        offset, local = jnp.zeros((1,), jnp.int32), False
    else:
        groups = rhs.shape[0]
        _check_sizes(group_sizes, None if group_offset is not None else groups)
        offset, local = _offset_operand(group_offset, groups, group_sizes.shape[0])
    dtype = _out_dtype(lhs, rhs, preferred_element_type)
    out = _bind(lhs, rhs, group_sizes.astype(jnp.int32), offset, mode=mode,
                plan=_check_plan(plan), groups=groups, local=local,
                out_dtype=_kernel_dtype(dtype))
    return out.astype(dtype)


# ---------------------------------------------------------------------------
# Quantized: the numpy API's recipes through a host callback.

_RECIPES = ("fp8", "int8")


def _quantized_host(pass_name, recipe, rhs_scales, a, b, group_sizes):
    from ._ops import gmm, tgmm

    a, b, group_sizes = np.asarray(a), np.asarray(b), np.asarray(group_sizes)
    if pass_name == "drhs":
        return tgmm(a, b, group_sizes, quant=recipe).astype(np.float32)
    return gmm(a, b, group_sizes, transpose_rhs=pass_name == "dlhs", quant=recipe,
               rhs_scales=rhs_scales).astype(np.float32)


def _quantized_call(pass_name, recipe, rhs_scales, a, b, group_sizes, shape):
    host = functools.partial(_quantized_host, pass_name, recipe, rhs_scales)
    return jax.pure_callback(host, jax.ShapeDtypeStruct(shape, jnp.float32), a, b, group_sizes,
                             vmap_method="sequential")


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _quantized(lhs, rhs, group_sizes, recipe, rhs_scales):
    return _quantized_call("fwd", recipe, rhs_scales, lhs, rhs, group_sizes,
                           (lhs.shape[0], rhs.shape[2]))


def _quantized_fwd(lhs, rhs, group_sizes, recipe, rhs_scales):
    return _quantized(lhs, rhs, group_sizes, recipe, rhs_scales), (lhs, rhs, group_sizes)


def _quantized_bwd(recipe, rhs_scales, residuals, dout):
    # Straight-through: quantization is treated as the identity, so the
    # gradients are the (quantized) dlhs and drhs passes of the float operands.
    lhs, rhs, group_sizes = residuals
    dlhs = _quantized_call("dlhs", recipe, "channel", dout, rhs, group_sizes, lhs.shape)
    drhs = _quantized_call("drhs", recipe, "channel", lhs, dout, group_sizes, rhs.shape)
    del rhs_scales
    return dlhs.astype(lhs.dtype), drhs.astype(rhs.dtype), None


_quantized.defvjp(_quantized_fwd, _quantized_bwd)


def quantized_ragged_dot(lhs, rhs, group_sizes, *, recipe: str = "fp8",
                         rhs_scales: str = "channel", preferred_element_type=None):
    """ragged_dot with quantized operands, straight-through backward.

    recipe "fp8" (fp8_full: lhs and rhs e4m3 with per-row and per-channel
    scales, the gradient e5m2 in the backward passes) or "int8" (per-row and
    per-channel int8, i32 accumulation). lhs and rhs are float and quantized
    in the call; rhs_scales "channel" or "block:SIZE" (K-blocks) for the
    forward weight. The backward treats quantization as the identity and runs
    the quantized dlhs and drhs passes. Runs through a host callback
    (jax.pure_callback) to the numpy API.
    """
    if recipe not in _RECIPES:
        raise Error(f"recipe={recipe!r}: expected one of {', '.join(_RECIPES)}")
    lhs, rhs, group_sizes = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    _check_float(lhs, "lhs")
    _check_float(rhs, "rhs")
    _check_sizes(group_sizes, rhs.shape[0])
    out = _quantized(lhs.astype(jnp.float32), rhs.astype(jnp.float32),
                     group_sizes.astype(jnp.int32), recipe, rhs_scales)
    return out.astype(_out_dtype(lhs, rhs, preferred_element_type))
