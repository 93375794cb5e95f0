"""Quantization as data (DESIGN.md section 4): codes + float32 scales + spec.

fp8 codes come back as ml_dtypes float8_e4m3fn / float8_e5m2 arrays (the same
bits the C++ library stores), int8 codes as numpy int8.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _raggemm
from ._arrays import Error, OPERAND_DTYPES, to_raw

TYPES = ("fp8_e4m3", "fp8_e5m2", "int8")


def _code_dtype(type_name: str):
    if type_name == "int8":
        return np.dtype(np.int8)
    import ml_dtypes

    return np.dtype(ml_dtypes.float8_e4m3fn if type_name == "fp8_e4m3" else ml_dtypes.float8_e5m2)


class Quantized(NamedTuple):
    """values: codes of `type`, the input's shape; scales: float32 of the
    granularity's scale shape; granularity: the canonical SPEC string."""

    values: np.ndarray
    scales: np.ndarray
    type: str
    granularity: str


def quantize(x, type="fp8_e4m3", granularity="per_tensor", *, static_range=None) -> Quantized:
    """Quantizes float32 (or bfloat16/float16) ``x``: value = decode(code) * scale.

    type: "fp8_e4m3", "fp8_e5m2" or "int8". granularity: "per_tensor",
    "channel:AXES" or "channel:AXES+block:AXIS:SIZE" (e.g. rhs [G,K,N] per
    expert and column: "channel:0,2"; block-wise along K: "channel:0,2+block:1:128").
    static_range R: scale = R / type max everywhere (values beyond R saturate);
    None: dynamic absmax per scale cell.
    """
    raw, name = to_raw(x, "x")
    if type not in TYPES:
        raise Error(f"type={type!r}: expected one of {', '.join(TYPES)}")
    values, scales = _raggemm.quantize(raw, name, type, granularity,
                                       None if static_range is None else float(static_range))
    return Quantized(values.view(_code_dtype(type)), scales, type,
                     _raggemm.parse_granularity(granularity))


def _type_of(values, type_name):
    if type_name is not None:
        return type_name
    name = OPERAND_DTYPES.by_num.get(values.dtype.num, (None,))[0]
    inferred = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "i8": "int8"}.get(name)
    if inferred is None:
        raise Error(f"values={values.dtype}: cannot infer the quantization type; pass type=")
    return inferred


def dequantize(values, scales=None, type=None, granularity=None) -> np.ndarray:
    """decode(values) * scales as a new float32 array.

    ``dequantize(q)`` takes a Quantized; otherwise values are fp8 (ml_dtypes)
    or int8 codes, or raw uint8 fp8 bits with an explicit ``type``.
    granularity None infers it from the shapes of values and scales.
    """
    if isinstance(values, Quantized):
        values, scales, type, granularity = values
    if scales is None:
        raise Error("scales=None: dequantize needs the scales (or a raggemm.Quantized)")
    values = values if isinstance(values, np.ndarray) else np.asarray(values)
    type = _type_of(values, type)
    if type not in TYPES:
        raise Error(f"type={type!r}: expected one of {', '.join(TYPES)}")
    if values.dtype == np.uint8:
        raw, name = values, "u8"
    else:
        raw, name = to_raw(values, "values")
    return _raggemm.dequantize(raw, name, to_raw(scales, "scales")[0], type, granularity)
