"""raggemm's grouped matmuls as PyTorch ops (CPU tensors).

``grouped_mm(mat_a, mat_b, offs)`` has ``torch._grouped_mm``'s 2-D x 3-D
semantics and ``ragged_dot(lhs, rhs, group_sizes)`` jax.lax.ragged_dot's.
Both run through three ops registered with ``torch.library.custom_op``
(``raggemm::gmm``, ``raggemm::gmm_dlhs``, ``raggemm::tgmm``):

- autograd: the backward of the forward op is our dlhs pass (gmm with the
  transposed rhs) and tgmm pass, each with its own config from the plan;
- fake (meta) implementations, so ``torch.compile(fullgraph=True)`` traces
  a model that calls them without a graph break;
- contiguous float32 / bfloat16 / float16 CPU tensors are read in place
  (DLPack, no copy); a non-contiguous tensor is copied once with
  ``.contiguous()``; another device is refused with ``raggemm.Error``;
- the kernels run with the GIL released, on ``torch.get_num_threads()``
  threads unless the call passes ``threads=``.

The kernels accumulate in float32 and write float32 or bfloat16: a bfloat16
result (``out_dtype``) is the float32 accumulator rounded once by the kernels
(no float32 temporary, no cast pass), and the backward of bf16 operands
writes their bf16 gradients the same way. A float16 result is the float32
result cast.
"""

from __future__ import annotations

import numpy as np
import torch

from . import _raggemm
from ._arrays import Error, empty_output
from ._plan import Plan

__all__ = ["grouped_mm", "ragged_dot"]

_OPERAND_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
_SIZE_DTYPES = {torch.int32: "i32", torch.int64: "i64"}
_KERNEL_CODES = {None: 0, "v1": 1, "v2": 2}
_KERNEL_NAMES = {0: "auto", 1: "v1", 2: "v2"}
_FIELDS_PER_PASS = 5  # tile_m, tile_k, tile_n, kernel code, buffers


def _config_ints(plan: Plan) -> list[int]:
    """A plan as a flat int list (the op schema's type): per pass (fwd, dlhs,
    drhs) tile_m, tile_k, tile_n, kernel (0 auto, 1 v1, 2 v2), buffers (0 auto)."""
    ints = []
    for config in (plan.fwd, plan.dlhs, plan.drhs):
        ints += list(config.tiles or (0, 0, 0))
        ints += [_KERNEL_CODES[config.kernel], config.buffers or 0]
    return ints


def _pass_args(config: list[int], index: int):
    tm, tk, tn, kernel, buffers = config[index * _FIELDS_PER_PASS:(index + 1) * _FIELDS_PER_PASS]
    return (tm, tk, tn), _KERNEL_NAMES[kernel], buffers


def _operand(tensor: torch.Tensor, argument: str, dtypes=_OPERAND_DTYPES):
    """(a numpy view of the tensor's memory, or of its contiguous copy;
    raggemm dtype name). The view shares the storage (no copy): handing numpy
    views to the extension costs a third of a DLPack export per operand.
    16-bit floats travel as their raw bits (uint16), as from the numpy API."""
    name = dtypes.get(tensor.dtype)
    if name is None:
        raise Error(f"{argument}={tensor.dtype}: unsupported dtype; expected one of "
                    f"{', '.join(str(d) for d in dtypes)}")
    if tensor.device.type != "cpu":
        raise Error(f"{argument}={tensor.device}: raggemm runs on CPU tensors")
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    if tensor.requires_grad:  # only when an op is called below autograd by hand
        tensor = tensor.detach()
    if name in ("bf16", "f16"):
        return tensor.view(torch.int16).numpy().view(np.uint16), name
    return tensor.numpy(), name


def _threads(threads: int) -> int:
    return threads if threads > 0 else torch.get_num_threads()


# The dtypes the kernels write, by the op schema's out_dtype string.
_OUT_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def _kernel_out(dtype: torch.dtype) -> str:
    """The kernels' output for a wanted dtype: bf16 as itself, else f32 (cast after)."""
    return "bf16" if dtype == torch.bfloat16 else "f32"


def _empty_out(shape, out_dtype: str):
    """(the output tensor, the numpy array the kernels write: bf16 as uint16 bits).

    The memory is numpy's, shared with the returned tensor (torch.from_numpy):
    numpy asks the kernel for transparent huge pages on large arrays
    (madvise(MADV_HUGEPAGE), numpy's default on Linux) and torch.empty does
    not, so the first write to a weight gradient of [32, 1024, 1024] f32
    takes 64 page faults instead of 32768. Measured (docs/python.md): fwd+bwd
    at M=4096, K=N=1024, G=32 went from 104-183 ms to 79-81 ms in bf16.
    empty_output also starts it on a 64-byte line, for the streaming stores."""
    if out_dtype == "bf16":
        raw = empty_output(shape, np.uint16)
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16), raw
    raw = empty_output(shape, np.float32)
    return torch.from_numpy(raw), raw


def _run_gmm(a, rhs, group_sizes, config, threads, weight, out_dtype, transpose_rhs, argument):
    pass_index = 1 if transpose_rhs else 0
    tiles, kernel, buffers = _pass_args(config, pass_index)
    a, a_dtype = _operand(a, argument)
    rhs, rhs_dtype = _operand(rhs, "rhs")
    sizes, sizes_dtype = _operand(group_sizes, "group_sizes", _SIZE_DTYPES)
    if a.ndim != 2 or rhs.ndim != 3:
        raise Error(f"{argument}={list(a.shape)}, rhs={list(rhs.shape)}: expected [M, K] and "
                    "[G, K, N]")
    out, raw = _empty_out((a.shape[0], rhs.shape[1] if transpose_rhs else rhs.shape[2]),
                          out_dtype)
    _raggemm.gmm(a, a_dtype, rhs, rhs_dtype, sizes, sizes_dtype, raw, transpose_rhs,
                 tiles, kernel, buffers, _threads(threads), 0, -1, False, None, None, None, None,
                 "channel", 0, weight, out_dtype)
    return out


@torch.library.custom_op("raggemm::gmm", mutates_args=())
def _gmm(lhs: torch.Tensor, rhs: torch.Tensor, group_sizes: torch.Tensor, config: list[int],
         threads: int, weight: str, out_dtype: str) -> torch.Tensor:
    """[M, N] (out_dtype "f32" or "bf16"): row i = lhs[i] @ rhs[group(i)]; zero past
    sum(group_sizes)."""
    return _run_gmm(lhs, rhs, group_sizes, config, threads, weight, out_dtype, False, "lhs")


@torch.library.custom_op("raggemm::gmm_dlhs", mutates_args=())
def _gmm_dlhs(dout: torch.Tensor, rhs: torch.Tensor, group_sizes: torch.Tensor,
              config: list[int], threads: int, weight: str, out_dtype: str) -> torch.Tensor:
    """[M, K] (out_dtype): row i = dout[i] @ rhs[group(i)]^T (the gradient wrt lhs)."""
    return _run_gmm(dout, rhs, group_sizes, config, threads, weight, out_dtype, True, "dout")


@torch.library.custom_op("raggemm::tgmm", mutates_args=())
def _tgmm(lhs: torch.Tensor, dout: torch.Tensor, group_sizes: torch.Tensor, config: list[int],
          threads: int, weight: str, out_dtype: str) -> torch.Tensor:
    """[G, K, N] (out_dtype): out[g] = lhs[rows g]^T @ dout[rows g] (the gradient wrt rhs)."""
    tiles, kernel, buffers = _pass_args(config, 2)
    lhs, lhs_dtype = _operand(lhs, "lhs")
    dout, dout_dtype = _operand(dout, "dout")
    sizes, sizes_dtype = _operand(group_sizes, "group_sizes", _SIZE_DTYPES)
    if lhs.ndim != 2 or dout.ndim != 2 or sizes.ndim != 1:
        raise Error(f"lhs={list(lhs.shape)}, dout={list(dout.shape)}, "
                    f"group_sizes={list(sizes.shape)}: expected [M, K], [M, N] and [G]")
    out, raw = _empty_out((sizes.shape[0], lhs.shape[1], dout.shape[1]), out_dtype)
    _raggemm.tgmm(lhs, lhs_dtype, dout, dout_dtype, sizes, sizes_dtype, raw, tiles, kernel,
                  buffers, _threads(threads), 0, -1, None, "channel", weight, out_dtype, False)
    return out


@_gmm.register_fake
def _(lhs, rhs, group_sizes, config, threads, weight, out_dtype):
    return lhs.new_empty((lhs.shape[0], rhs.shape[2]), dtype=_OUT_DTYPES[out_dtype])


@_gmm_dlhs.register_fake
def _(dout, rhs, group_sizes, config, threads, weight, out_dtype):
    return dout.new_empty((dout.shape[0], rhs.shape[1]), dtype=_OUT_DTYPES[out_dtype])


@_tgmm.register_fake
def _(lhs, dout, group_sizes, config, threads, weight, out_dtype):
    return lhs.new_empty((group_sizes.shape[0], lhs.shape[1], dout.shape[1]),
                         dtype=_OUT_DTYPES[out_dtype])


def _setup_context(ctx, inputs, output):
    lhs, rhs, group_sizes, config, threads, weight, _ = inputs
    ctx.save_for_backward(lhs, rhs, group_sizes)
    ctx.settings = (config, threads, weight)  # the passes of the backward reuse them


# Each op is bilinear in its two tensors (a, b), so the gradient of each is
# another of our passes applied to the output's gradient `grad`; those passes
# are differentiable in turn (double backward):
#   gmm(lhs, rhs):       d lhs = gmm_dlhs(grad, rhs);   d rhs = tgmm(lhs, grad)
#   gmm_dlhs(dout, rhs): d dout = gmm(grad, rhs);       d rhs = tgmm(grad, dout)
#   tgmm(lhs, dout):     d lhs = gmm_dlhs(dout, grad);  d dout = gmm(lhs, grad)
def _backward_through(pass_of_a, pass_of_b):
    """A backward whose gradient of each tensor operand is (op, operands):
    op applied to operands(a, b, grad), the saved group sizes and settings."""

    def backward(ctx, grad):
        a, b, group_sizes = ctx.saved_tensors
        # bf16 operands take a bf16 gradient, as torch._grouped_mm's backward
        # does: the passes then run bf16 x bf16 on the kernels' bf16 dot
        # products (twice the f32 rate) instead of widening both to f32.
        if a.dtype == b.dtype == torch.bfloat16:
            grad = grad.to(torch.bfloat16)
        grad = grad.contiguous()
        grads = []
        for needed, operand, (op, operands) in zip(ctx.needs_input_grad, (a, b),
                                                   (pass_of_a, pass_of_b)):
            # A bf16 operand's gradient is written bf16 by the kernels (no
            # f32 temporary: at G = 128 experts the f32 weight gradient was
            # 512 MiB and its cast a quarter of fwd+bwd); .to is then a no-op.
            grads.append(op(*operands(a, b, grad), group_sizes, *ctx.settings,
                            _kernel_out(operand.dtype)).to(operand.dtype)
                         if needed else None)
        return (*grads, None, None, None, None, None)

    return backward


_BACKWARDS = (
    (_gmm, (_gmm_dlhs, lambda a, b, g: (g, b)), (_tgmm, lambda a, b, g: (a, g))),
    (_gmm_dlhs, (_gmm, lambda a, b, g: (g, b)), (_tgmm, lambda a, b, g: (g, a))),
    (_tgmm, (_gmm_dlhs, lambda a, b, g: (b, g)), (_gmm, lambda a, b, g: (a, g))),
)
for _op, _pass_of_a, _pass_of_b in _BACKWARDS:
    _op.register_autograd(_backward_through(_pass_of_a, _pass_of_b),
                          setup_context=_setup_context)


def _plan_config(plan: Plan | None) -> list[int]:
    if plan is None:
        return [0] * (3 * _FIELDS_PER_PASS)
    if not isinstance(plan, Plan):
        raise Error(f"plan={plan!r}: expected a raggemm.Plan or None")
    return _config_ints(plan)


def _check_threads(threads) -> int:
    if threads is None:
        return 0
    if int(threads) < 1:
        raise Error(f"threads={threads!r}: expected >= 1 or None (torch.get_num_threads())")
    return int(threads)


def ragged_dot(lhs: torch.Tensor, rhs: torch.Tensor, group_sizes: torch.Tensor, *,
               out_dtype: torch.dtype | None = None, plan: Plan | None = None,
               threads: int | None = None) -> torch.Tensor:
    """Grouped matmul: ``out[i] = lhs[i] @ rhs[group(i)]``, differentiable.

    lhs ``[M, K]``, rhs ``[G, K, N]`` (float32, bfloat16 or float16 CPU
    tensors), group_sizes ``[G]`` int32/int64 with sum <= M: group g owns the
    next group_sizes[g] rows. Returns ``[M, N]``; rows past sum(group_sizes)
    are zero. Accumulation is float32; the result has ``out_dtype``, else
    the promoted dtype of lhs and rhs (bfloat16 is written by the kernels,
    rounded once from the float32 accumulator; float16 is cast).

    plan: a raggemm.Plan setting the fwd, dlhs and drhs passes' tiles,
    kernel and buffers (the backward runs our dlhs and tgmm passes); what it
    leaves None (and everything, with plan=None) is resolved per call from
    the tune cache, else the heuristic. threads: None for
    torch.get_num_threads(). Contiguous inputs are read in place;
    non-contiguous ones are copied. Bad input raises raggemm.Error.
    """
    config, threads = _plan_config(plan), _check_threads(threads)
    if out_dtype is not None and out_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise Error(f"out_dtype={out_dtype}: expected torch.float32, torch.bfloat16 or "
                    "torch.float16")
    dtype = out_dtype or torch.promote_types(lhs.dtype, rhs.dtype)
    out = _gmm(lhs, rhs, group_sizes, config, threads, (plan and plan.weight) or "",
               _kernel_out(dtype))
    return out.to(dtype)


def grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor, *,
               out_dtype: torch.dtype | None = None, plan: Plan | None = None,
               threads: int | None = None) -> torch.Tensor:
    """``torch._grouped_mm(mat_a, mat_b, offs)`` for a 2-D mat_a and 3-D mat_b.

    mat_a ``[M, K]``, mat_b ``[G, K, N]``, offs ``[G]`` int32: the cumulative
    end row of each group (group g is rows offs[g-1]..offs[g]). Returns
    ``[M, N]`` in ``out_dtype`` (default mat_a's dtype); rows past offs[-1]
    are zero. Differentiable; plan and threads as in ragged_dot.
    """
    if offs.dim() != 1:
        raise Error(f"offs={list(offs.shape)}: expected a 1-D tensor of cumulative group ends")
    sizes = torch.diff(offs, prepend=offs.new_zeros(1))
    return ragged_dot(mat_a, mat_b, sizes, out_dtype=out_dtype or mat_a.dtype, plan=plan,
                      threads=threads)

