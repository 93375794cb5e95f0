"""The grouped matmuls on numpy arrays: gmm (forward, and dlhs through
transpose_rhs) and tgmm (grad wrt rhs). Semantics: DESIGN.md section 1."""

from __future__ import annotations

import numpy as np

from . import _raggemm
from ._arrays import (GROUP_SIZE_DTYPES, Error, buffer_count, empty_output, kernel_name,
                      optional_f32, out_dtype_of, tile_tuple, to_raw)


def _require_rank(array, rank, argument):
    if array.ndim != rank:
        raise Error(f"{argument}={list(array.shape)}: expected a rank-{rank} array")


# The output is allocated here (empty_output: np.empty, line-aligned when
# large; the op writes every element): a tenth of the cost of exporting a new
# array from the extension.
def _gmm_out(lhs, rhs, transpose_rhs, swiglu, dtype):
    _require_rank(lhs, 2, "lhs")
    _require_rank(rhs, 3, "rhs")
    cols = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    return empty_output((lhs.shape[0], cols // 2 if swiglu else cols), dtype)


def _tgmm_out(lhs, dout, group_sizes, local_groups, dtype):
    _require_rank(lhs, 2, "lhs")
    _require_rank(dout, 2, "dout")
    _require_rank(group_sizes, 1, "group_sizes")
    groups = local_groups if local_groups >= 0 else group_sizes.shape[0]
    return empty_output((groups, lhs.shape[1], dout.shape[1]), dtype)


def _caller_out(out, out_dtype):
    """(raggemm dtype name, the raw array the kernels write) of a caller's out=."""
    if not isinstance(out, np.ndarray):
        raise Error(f"out={type(out).__name__}: expected a numpy array or None")
    dtype_name = out_dtype_of(out.dtype, "out")[0]
    if out_dtype is not None and out_dtype_of(out_dtype)[0] != dtype_name:
        raise Error(f"out={out.dtype}: dtype must match out_dtype={out_dtype!r}")
    return dtype_name, (out.view(np.uint16) if dtype_name == "bf16" else out)


def _as_seen(array, seen_dtype):
    """The kernels' output array as the caller's dtype (bf16 bits -> bfloat16)."""
    return array if array.dtype == seen_dtype else array.view(seen_dtype)


def gmm(lhs, rhs, group_sizes, *, transpose_rhs=False, tiles=None, kernel=None, buffers=None,
        threads=0, group_offset=0, local_groups=-1, swiglu=False, col_scale=None,
        col_bias=None, row_scale=None, quant=None, rhs_scales="channel", lhs_k_block=0,
        weight=None, out_dtype=None, out=None, accumulate=False):
    """Grouped matmul: ``out[i] = lhs[i] @ rhs[group(i)]`` (``@ rhs[g].T`` with transpose_rhs).

    lhs ``[M, K]``; rhs ``[G, K, N]`` (``[G, N, K]`` with transpose_rhs); group_sizes
    ``[G]`` int32/int64 with sum <= M. Operands are float32, float16, int8, or
    ml_dtypes bfloat16 / float8_e4m3fn / float8_e5m2, C-contiguous; they are read
    without copying. Returns a new ``[M, N]`` array (``[M, N/2]`` with swiglu) of
    out_dtype: float32 (None) or ml_dtypes.bfloat16 ("bf16"), which the kernels
    write directly, rounding the float32 accumulator once (no float32 copy);
    rows past sum(group_sizes) are zero. out: an array to write instead (and
    return), C-contiguous, of out_dtype (None: out's own); accumulate: add to it
    (``out[i] += ...`` for rows of the local groups, others left as they are).

    tiles: kernel tiles ``(m, k, n)``; kernel "v1" or "v2"; buffers: prefetch depth
    1..4; threads: 0 for OpenMP's default. What is left None is
    resolved as the CLI resolves it: the tune cache's entry for this shape, dtype
    and group sizes ($RAGGEMM_TUNE_CACHE; see raggemm.tune), else the heuristic;
    an explicit value always wins.
    group_offset, local_groups: expert parallelism; with local_groups = E >= 0, rhs
    holds only groups [group_offset, group_offset + E) and other rows come out zero.
    swiglu, col_scale, col_bias, row_scale: the v2 kernel's fused output stage.
    quant: None, or the recipe "fp8" (e4m3 operands; e5m2 dout in dlhs) or "int8":
    float lhs and rhs are quantized in the call (lhs per row, dynamically, or per
    row and K-block of lhs_k_block; rhs per expert and column with
    rhs_scales="channel", or in K-blocks with "block:SIZE") and the result stays
    out_dtype. With transpose_rhs this is the quantized dlhs pass.
    weight: a label for raggemm.trace's events ("wi", "wo", ...); no effect otherwise.
    Bad input raises raggemm.Error (a ValueError) naming the argument.
    """
    lhs, lhs_dtype = to_raw(lhs, "lhs")
    rhs, rhs_dtype = to_raw(rhs, "rhs")
    group_sizes, sizes_dtype = to_raw(group_sizes, "group_sizes", GROUP_SIZE_DTYPES)
    if out is not None:
        dtype_name, raw = _caller_out(out, out_dtype)
    else:
        if accumulate:
            raise Error("accumulate=True: needs out, the array to add into")
        dtype_name, raw_dtype, seen_dtype = out_dtype_of(out_dtype)
        raw = None if quant is not None else _gmm_out(lhs, rhs, transpose_rhs, swiglu, raw_dtype)
    result = _raggemm.gmm(lhs, lhs_dtype, rhs, rhs_dtype, group_sizes, sizes_dtype, raw,
                          bool(transpose_rhs), tile_tuple(tiles),
                          kernel_name(kernel), buffer_count(buffers), threads,
                          group_offset, local_groups, bool(swiglu),
                          optional_f32(col_scale, "col_scale"),
                          optional_f32(col_bias, "col_bias"),
                          optional_f32(row_scale, "row_scale"), quant, rhs_scales, lhs_k_block,
                          weight or "", dtype_name, bool(accumulate))
    if out is not None:
        return out
    return _as_seen(raw if result is None else result, seen_dtype)


def tgmm(lhs, dout, group_sizes, *, tiles=None, kernel=None, buffers=None, threads=0,
         group_offset=0, local_groups=-1, quant=None, weight=None, out_dtype=None, out=None,
         accumulate=False):
    """Transposed grouped matmul: ``out[g] = lhs[rows of g].T @ dout[rows of g]``.

    lhs ``[M, K]``, dout ``[M, N]``, group_sizes ``[G]``. Returns a new float32
    ``[G_local, K, N]`` array (G_local = local_groups, or G when local_groups is
    -1, which needs group_offset 0); empty groups give zero slices. For tgmm the
    tiles ``(m, k, n)`` tile the ``[K, N]`` output by (m, n) and the tokens by k.
    tiles, kernel, buffers left None: tune cache, else heuristic (as in gmm).
    quant: None, "fp8" (lhs e4m3 per row, dout e5m2 per column) or "int8".
    out_dtype: float32 (None) or ml_dtypes.bfloat16 ("bf16"), written by the
    kernels directly. out: an array ``[G_local, K, N]`` to write instead of a new
    one, C-contiguous, of out_dtype (None: out's own dtype); returned.
    accumulate: add to out (``out[g] += ...``, needs out), for gradient
    accumulation: float32 ``out + acc``, bfloat16 ``bf16(float(out) + acc)``;
    groups with no rows leave out[g] as it is.
    """
    lhs, lhs_dtype = to_raw(lhs, "lhs")
    dout, dout_dtype = to_raw(dout, "dout")
    group_sizes, sizes_dtype = to_raw(group_sizes, "group_sizes", GROUP_SIZE_DTYPES)
    if out is not None:
        dtype_name, raw = _caller_out(out, out_dtype)
    else:
        if accumulate:
            raise Error("accumulate=True: needs out, the array to add into")
        dtype_name, raw_dtype, seen_dtype = out_dtype_of(out_dtype)
        raw = None if quant is not None else _tgmm_out(lhs, dout, group_sizes, local_groups,
                                                       raw_dtype)
    result = _raggemm.tgmm(lhs, lhs_dtype, dout, dout_dtype, group_sizes, sizes_dtype, raw,
                           tile_tuple(tiles), kernel_name(kernel),
                           buffer_count(buffers), threads, group_offset,
                           local_groups, quant, "channel", weight or "", dtype_name,
                           bool(accumulate))
    if out is not None:
        return out
    return _as_seen(raw if result is None else result, seen_dtype)
