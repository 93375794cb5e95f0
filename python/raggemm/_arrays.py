"""numpy arrays to the (array, raggemm dtype name) pairs the extension takes.

The extension reads arrays without copying. Narrow float types that numpy
itself does not know (bfloat16 and the float8 formats, from ml_dtypes) are
handed over as views of their raw bits (uint16 / uint8) together with the
dtype name, which tells the kernels how to decode them.
"""

from __future__ import annotations

import numpy as np

from . import _raggemm

Error = _raggemm.Error


def _optional_ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:  # bf16 / fp8 arrays cannot exist without it anyway
        return {}
    return {
        np.dtype(ml_dtypes.bfloat16): ("bf16", np.uint16),
        np.dtype(ml_dtypes.float8_e4m3fn): ("fp8_e4m3", np.uint8),
        np.dtype(ml_dtypes.float8_e5m2): ("fp8_e5m2", np.uint8),
    }


# numpy dtype -> (raggemm dtype name, dtype of the raw-bit view or None).
OPERAND_DTYPES = {
    np.dtype(np.float32): ("f32", None),
    np.dtype(np.float16): ("f16", None),
    np.dtype(np.int8): ("i8", None),
    **_optional_ml_dtypes(),
}
GROUP_SIZE_DTYPES = {
    np.dtype(np.int32): ("i32", None),
    np.dtype(np.int64): ("i64", None),
}
F32_ONLY = {np.dtype(np.float32): ("f32", None)}


def _names(table):
    return ", ".join(str(dtype) for dtype in table)


def to_raw(value, argument: str, table=OPERAND_DTYPES):
    """Returns (array or raw-bit view, dtype name); never copies an ndarray."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    entry = table.get(array.dtype)
    if entry is None:
        raise Error(f"{argument}={array.dtype}: unsupported dtype; expected one of {_names(table)}")
    name, bits = entry
    return (array if bits is None else array.view(bits)), name


def optional_f32(value, argument: str):
    return None if value is None else to_raw(value, argument, F32_ONLY)[0]


def tile_tuple(tiles, argument: str = "tiles"):
    """None, or (m, k, n) as three positive ints."""
    if tiles is None:
        return None
    try:
        m, k, n = (int(t) for t in tiles)
    except (TypeError, ValueError):
        raise Error(f"{argument}={tiles!r}: expected None or three ints (m, k, n)") from None
    if min(m, k, n) <= 0:
        raise Error(f"{argument}={tiles!r}: every tile must be > 0 (None lets raggemm choose)")
    return (m, k, n)
