#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the .npy fuzzer into corpus/npy/.

Plain Python (no NumPy needed): each seed is a header the way NumPy writes
it, or a legal variation the parser must also accept (format 2.0 and 3.0,
other key order, double quotes, no trailing comma), plus a few near misses.
Run once; the fuzzer's findings are added next to these by scripts/fuzz.sh.
"""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "npy")


def image(header, payload, version=(1, 0), pad=True):
    header = header.encode("utf-8")
    length_size = 2 if version[0] == 1 else 4
    preamble = 6 + 2 + length_size
    if pad:
        total = preamble + len(header) + 1
        header += b" " * ((64 - total % 64) % 64) + b"\n"
    fmt = "<H" if length_size == 2 else "<I"
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(header)) + header + payload


def dict_text(descr, shape, order=("descr", "fortran_order", "shape"), fortran=False,
              quote="'", trailing=True):
    dims = ", ".join(str(d) for d in shape)
    if len(shape) == 1:
        dims += ","
    values = {
        "descr": f"{quote}{descr}{quote}",
        "fortran_order": "True" if fortran else "False",
        "shape": f"({dims})",
    }
    items = ", ".join(f"{quote}{key}{quote}: {values[key]}" for key in order)
    return "{" + items + (", }" if trailing else "}")


SEEDS = {
    "seed_f32_2x3.npy": image(dict_text("<f4", (2, 3)), struct.pack("<6f", *range(6))),
    "seed_f16_4.npy": image(dict_text("<f2", (4,)), struct.pack("<4H", 0x3c00, 0x7c00, 0x0001, 0x7e00)),
    "seed_i32_scalar.npy": image(dict_text("<i4", ()), struct.pack("<i", -7)),
    "seed_i64_1x1x2.npy": image(dict_text("<i8", (1, 1, 2)), struct.pack("<2q", 1, -1)),
    "seed_i1_0x5.npy": image(dict_text("|i1", (0, 5)), b""),
    "seed_u1_2x1x1x2.npy": image(dict_text("|u1", (2, 1, 1, 2)), bytes([0, 255, 7, 128])),
    "seed_v2_reordered.npy": image(
        dict_text("<f4", (2,), order=("shape", "descr", "fortran_order")), struct.pack("<2f", 1, 2),
        version=(2, 0)),
    "seed_v3_double_quotes.npy": image(
        dict_text("<i4", (1,), quote='"', trailing=False), struct.pack("<i", 3), version=(3, 0)),
    "seed_unpadded.npy": image(dict_text("|u1", (3,)), b"abc", pad=False),
    "seed_fortran.npy": image(dict_text("<f4", (2, 2), fortran=True), struct.pack("<4f", 1, 2, 3, 4)),
    "seed_big_endian.npy": image(dict_text(">f4", (1,)), struct.pack(">f", 1)),
    "seed_truncated.npy": image(dict_text("<f4", (3,)), struct.pack("<2f", 1, 2)),
}

if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(HERE, name), "wb") as out:
            out.write(data)
    print(f"wrote {len(SEEDS)} seeds to {HERE}")
