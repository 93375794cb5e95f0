#!/usr/bin/env python3
"""Writes the NumPy-made .npy files that tests/core/npy_test.cc reads.

They pin our reader and writer to what NumPy itself produces: the tests parse
each file and compare the values below, and re-serialize the version-1.0
ones expecting identical bytes. Run with the project venv (.venv/bin/python)
after changing the cases; the outputs are checked in so the C++ tests need
no Python.
"""
import os

import numpy as np
from numpy.lib import format as npy_format

HERE = os.path.dirname(os.path.abspath(__file__))


def cases():
    yield "numpy_f32_2x3.npy", np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5, None
    yield "numpy_f16_5.npy", np.array([1, -2, 65504, 6e-8, np.inf], dtype=np.float16), None
    yield "numpy_i32_scalar.npy", np.array(-7, dtype=np.int32), None
    yield "numpy_i64_1x1x2.npy", np.array([[[2**40, -3]]], dtype=np.int64), None
    yield "numpy_i8_0x5.npy", np.zeros((0, 5), dtype=np.int8), None
    yield "numpy_u8_2x1x1x2.npy", np.array([0, 255, 7, 128], dtype=np.uint8).reshape(2, 1, 1, 2), None
    # The dict plus its preamble lands exactly on 64 bytes: NumPy then pads
    # with a full 64 spaces, and so must we.
    yield "numpy_u8_aligned.npy", np.arange(10**4, dtype=np.uint8).reshape((10,) * 4 + (1,) * 16), None
    yield "numpy_v2_f32_3.npy", np.array([1.5, -0.0, 3.25], dtype=np.float32), (2, 0)
    yield "numpy_v3_i32_2x2.npy", np.array([[1, 2], [3, 4]], dtype=np.int32), (3, 0)
    yield "numpy_fortran_f32_2x3.npy", np.asfortranarray(np.ones((2, 3), dtype=np.float32)), None
    yield "numpy_big_endian_f4.npy", np.array([1.0], dtype=">f4"), None
    yield "numpy_f64_2.npy", np.array([1.0, 2.0], dtype=np.float64), None
    yield "numpy_bool_2.npy", np.array([True, False]), None


if __name__ == "__main__":
    for name, array, version in cases():
        with open(os.path.join(HERE, name), "wb") as out:
            npy_format.write_array(out, array, version=version)
    print("wrote golden files to", HERE)
