"""Type stubs of raggemm._raggemm, the compiled half of the package (internal:
use the functions of the raggemm package, which map dtypes and allocate the
outputs). Arrays are any CPU array exporting the buffer protocol or DLPack
(numpy arrays, torch tensors); narrow floats arrive as their raw bits with
the raggemm dtype name ("f32", "bf16", "f16", "i8", "fp8_e4m3", "fp8_e5m2",
"i32", "i64") alongside."""

from typing import Any, Optional

import numpy as np

Array = Any  # a CPU ndarray-like (buffer protocol or __dlpack__)
Tiles = tuple[int, int, int]


class Error(ValueError):
    """Bad input: the message starts with the argument and its value."""


def gmm(lhs: Array, lhs_dtype: str, rhs: Array, rhs_dtype: str, group_sizes: Array,
        group_sizes_dtype: str, out: Optional[Array], transpose_rhs: bool,
        tiles: Optional[Tiles], kernel: str, buffers: int, threads: int, group_offset: int,
        local_groups: int, swiglu: bool, col_scale: Optional[Array], col_bias: Optional[Array],
        row_scale: Optional[Array], quant: Optional[str], rhs_scales: str,
        lhs_k_block: int, weight: str, out_dtype: str = "f32",
        accumulate: bool = False) -> Optional[np.ndarray]: ...


def tgmm(lhs: Array, lhs_dtype: str, dout: Array, dout_dtype: str, group_sizes: Array,
         group_sizes_dtype: str, out: Optional[Array], tiles: Optional[Tiles], kernel: str,
         buffers: int, threads: int, group_offset: int, local_groups: int,
         quant: Optional[str], rhs_scales: str, weight: str, out_dtype: str = "f32",
         accumulate: bool = False) -> Optional[np.ndarray]: ...


def quantize(x: Array, x_dtype: str, type: str, granularity: str,
             static_range: Optional[float]) -> tuple[np.ndarray, np.ndarray]: ...


def dequantize(values: Array, values_dtype: str, scales: Array, type: str,
               granularity: Optional[str]) -> np.ndarray: ...


def parse_granularity(spec: str) -> str: ...


def resolve_plan(weight: str, batch_seq: int, embed_dim: int, mlp_dim: int, groups: int,
                 settings: list[str], group_sizes: Optional[Array], cache_path: Optional[str],
                 use_cache: bool, dtype: str) -> dict[str, dict[str, Any]]: ...


def plan_setting_keys() -> list[str]: ...


def resolve_call(pass_: str, a: Array, a_dtype: str, b: Array, b_dtype: str,
                 group_sizes: Array, group_sizes_dtype: str, tiles: Optional[Tiles],
                 kernel: str, buffers: int, threads: int) -> dict[str, Any]: ...


def tune(batch_seq: int, embed_dim: int, mlp_dim: int, groups: int,
         group_sizes: Optional[Array], dtype: str, budget_s: float, cache_path: Optional[str],
         threads: int) -> list[dict[str, Any]]: ...


def default_tune_cache_path() -> str: ...


def xla_ffi_targets() -> dict[str, Any]: ...


def trace_start(rank: int) -> None: ...


def trace_stop(path: str) -> int: ...


def trace_clock_ns() -> int: ...


def trace_span(name: str, start_ns: int, args: dict[str, Any]) -> None: ...


def trace_is_open() -> bool: ...
