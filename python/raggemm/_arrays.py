"""numpy arrays to the (array, raggemm dtype name) pairs the extension takes.

The extension reads arrays without copying. Narrow float types that numpy
itself does not know (bfloat16 and the float8 formats, from ml_dtypes) are
handed over as views of their raw bits (uint16 / uint8) together with the
dtype name, which tells the kernels how to decode them.
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

from . import _raggemm

Error = _raggemm.Error
Error.__doc__ = ("Bad input to raggemm (a ValueError): the message starts with the argument "
                 "and its value, e.g. 'lhs=[4,10]: array must be C-contiguous'.")


def _optional_ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:  # bf16 / fp8 arrays cannot exist without it anyway
        return {}
    return {
        ml_dtypes.bfloat16: ("bf16", np.uint16),
        ml_dtypes.float8_e4m3fn: ("fp8_e4m3", np.uint8),
        ml_dtypes.float8_e5m2: ("fp8_e5m2", np.uint8),
    }


class DtypeTable:
    """numpy dtype -> (raggemm dtype name, dtype of the raw-bit view or None).

    Looked up by dtype.num: an int lookup costs a fraction of hashing and
    comparing np.dtype objects, and it runs three times per gmm call."""

    def __init__(self, entries):
        self.names = ", ".join(dict.fromkeys(str(np.dtype(d)) for d in entries))
        self.by_num = {np.dtype(d).num: entry for d, entry in entries.items()}


OPERAND_DTYPES = DtypeTable({
    np.float32: ("f32", None),
    np.float16: ("f16", None),
    np.int8: ("i8", None),
    **_optional_ml_dtypes(),
})
GROUP_SIZE_DTYPES = DtypeTable({
    np.int32: ("i32", None),
    np.int64: ("i64", None),
    np.longlong: ("i64", None),  # another type number for int64 on some platforms
})
F32_ONLY = DtypeTable({np.float32: ("f32", None)})


# Outputs from this size on start on a 64-byte line. np.empty's large arrays
# come from malloc's mmap 16 bytes past a page, so every row of a [G, K, N]
# weight gradient started mid-line: the kernels' streaming stores (which need
# whole lines) fell back to plain stores that read each line first, and
# raggemm.tgmm at M=4096, K=N=1024, G=32 f32 took 41-43 ms into a reused
# output against 25-27 ms into an aligned one (Xeon model 167, 2 threads).
_ALIGNED_FROM_BYTES = 1 << 16
_LINE = 64

# Outputs from this size on come from a pool of buffers that nothing refers
# to any more, when one of the same size is there: a fresh buffer's pages are
# faulted in and zeroed by the OS as the kernel first writes them, and on the
# Xeon model 167 VM that cost more than the product itself (a [128, 1024,
# 1024] bf16 weight gradient: 90-98 ms into fresh memory, 23 ms into memory
# used before). A training loop asks for the same sizes every step, as the
# previous step's gradients are freed.
_POOLED_FROM_BYTES = 4 << 20
_POOL_ENVIRONMENT = "RAGGEMM_OUTPUT_POOL_MIB"
_DEFAULT_POOL_MIB = 1024


def _pool_limit_bytes() -> int:
    text = os.environ.get(_POOL_ENVIRONMENT, "")
    if not text:
        return _DEFAULT_POOL_MIB << 20
    try:
        mib = int(text)
    except ValueError:
        mib = -1
    if mib < 0:
        raise _raggemm.Error(f"{_POOL_ENVIRONMENT}={text!r}: expected a whole number of MiB "
                             ">= 0 (0: no pool)")
    return mib << 20


class _OutputPool:
    """Raw uint8 buffers handed out as outputs, each reused once no array or
    tensor refers to it (its reference count is back to the pool's own).
    At most limit_bytes in all; past it, free buffers are dropped first."""

    def __init__(self):
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()

    def _unused(self, index: int) -> bool:
        # The list's reference and getrefcount's argument: no array or tensor
        # (a view holds its base) refers to it.
        return sys.getrefcount(self._buffers[index]) <= 2

    def _trim(self, room: int, limit: int, keep=None) -> int:
        """Drops free buffers (newest first, never `keep`) until `room` more
        bytes fit under `limit`; returns the bytes held after."""
        held = sum(raw.nbytes for raw in self._buffers)
        for index in reversed(range(len(self._buffers))):
            if held + room <= limit:
                break
            if self._buffers[index] is not keep and self._unused(index):
                held -= self._buffers.pop(index).nbytes
        return held

    def take(self, nbytes: int):
        limit = _pool_limit_bytes()
        with self._lock:
            for index in range(len(self._buffers)):
                if self._buffers[index].nbytes == nbytes and self._unused(index):
                    raw = self._buffers[index]
                    self._trim(0, limit, keep=raw)  # the limit may have been lowered
                    return raw
            held = self._trim(nbytes, limit)
            raw = np.empty(nbytes, np.uint8)
            if held + nbytes <= limit:
                self._buffers.append(raw)
            return raw

    def held_bytes(self) -> int:
        with self._lock:
            return sum(raw.nbytes for raw in self._buffers)


_POOL = _OutputPool()


def empty_output(shape, dtype):
    """np.empty(shape, dtype) for an op's output: its first element on a
    64-byte line when large, and from 4 MiB on from the pool of outputs
    nothing refers to any more (RAGGEMM_OUTPUT_POOL_MIB caps it; 0: none)."""
    dtype = np.dtype(dtype)
    count = 1
    for extent in shape:
        count *= extent
    size = count * dtype.itemsize
    if size < _ALIGNED_FROM_BYTES:
        return np.empty(shape, dtype)
    raw = _POOL.take(size + _LINE) if size >= _POOLED_FROM_BYTES else np.empty(size + _LINE,
                                                                                 np.uint8)
    start = -raw.ctypes.data % _LINE
    return raw[start:start + size].view(dtype).reshape(shape)


def to_raw(value, argument: str, table: DtypeTable = OPERAND_DTYPES):
    """Returns (array or raw-bit view, dtype name); never copies an ndarray."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    dtype = array.dtype
    entry = table.by_num.get(dtype.num)
    if entry is None or not dtype.isnative:
        raise Error(f"{argument}={dtype.str if entry else dtype}: unsupported dtype; "
                    f"expected one of {table.names} (native byte order)")
    name, bits = entry
    return (array if bits is None else array.view(bits)), name


def out_dtype_of(value, argument: str = "out_dtype"):
    """(raggemm name, numpy dtype the kernels write, dtype the caller sees) of
    an output type: None or float32 -> f32; ml_dtypes.bfloat16 (or the names
    "bf16", "bfloat16") -> bf16, written as uint16 bits, seen as bfloat16."""
    if value is None:
        return "f32", np.float32, np.float32
    if isinstance(value, str):
        name = {"f32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16"}.get(value)
    else:
        try:
            dtype = np.dtype(value)
        except TypeError:
            dtype = None
        name = "f32" if dtype == np.float32 else (
            "bf16" if dtype is not None and dtype.name == "bfloat16" else None)
    if name is None:
        raise Error(f"{argument}={value!r}: unsupported output dtype; expected float32 or "
                    "bfloat16")
    if name == "f32":
        return "f32", np.float32, np.float32
    import ml_dtypes
    return "bf16", np.uint16, ml_dtypes.bfloat16


def optional_f32(value, argument: str):
    return None if value is None else to_raw(value, argument, F32_ONLY)[0]


def tile_tuple(tiles, argument: str = "tiles", allow_zero: bool = False):
    """None, or (m, k, n) as three positive ints (with allow_zero, 0 leaves
    that tile to the tune cache or the heuristic)."""
    if tiles is None:
        return None
    try:
        m, k, n = (int(t) for t in tiles)
    except (TypeError, ValueError):
        raise Error(f"{argument}={tiles!r}: expected None or three ints (m, k, n)") from None
    if min(m, k, n) < (0 if allow_zero else 1):
        raise Error(f"{argument}={tiles!r}: every tile must be > 0 (None lets raggemm choose)")
    return (m, k, n)


KERNEL_NAMES = ("v1", "v2")


def kernel_name(kernel, argument: str = "kernel") -> str:
    """"v1", "v2", or "auto" for None (tune cache, else heuristic)."""
    if kernel is None:
        return "auto"
    if kernel not in KERNEL_NAMES:
        raise Error(f"{argument}={kernel!r}: expected one of v1, v2 or None (raggemm chooses)")
    return kernel


def buffer_count(buffers, argument: str = "buffers") -> int:
    """1..4, or 0 for None (tune cache, else heuristic)."""
    if buffers is None:
        return 0
    if not 1 <= int(buffers) <= 4:
        raise Error(f"{argument}={buffers!r}: expected 1..4 or None (raggemm chooses)")
    return int(buffers)
