"""fp8 e4m3fn / e5m2 and int8 encoding of the raggemm CLI against ml_dtypes.

Decode: every one of the 256 codes of both formats goes through
`raggemm dequantize` with scale 1 and must equal ml_dtypes' value.
Encode: a dense sweep of f32 values (every representable value and midpoint
with their f32 neighbours, subnormals, the max, overflow, infinities, NaN, a
log-uniform spread) goes through `raggemm quantize --static-range MAX` (scale
exactly 1) and must give ml_dtypes' code of the value saturated to the
format's max (raggemm's encoding saturates; ml_dtypes' cast does not).
Also: bad specs from the CLI give one error line and write nothing.
"""

import os
import pathlib
import subprocess

import ml_dtypes
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("RAGGEMM_CLI", str(ROOT / "build" / "release" / "raggemm"))

FORMATS = {
    "fp8_e4m3": (ml_dtypes.float8_e4m3fn, 448.0),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, 57344.0),
}


def run(*args, expect_ok=True):
    result = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)
    if expect_ok:
        assert result.returncode == 0, result.stderr
    return result


def quantize(tmp_path, x, qtype, spec, static_range=None):
    np.save(tmp_path / "x.npy", x)
    args = ["quantize", "--in", tmp_path / "x.npy", "--out", tmp_path / "q.npy",
            "--scales", tmp_path / "s.npy", "--type", qtype, "--granularity", spec]
    if static_range is not None:
        args += ["--static-range", repr(float(static_range))]
    run(*args)
    return np.load(tmp_path / "q.npy"), np.load(tmp_path / "s.npy")


def dequantize(tmp_path, codes, scales, qtype):
    np.save(tmp_path / "dq_in.npy", codes)
    np.save(tmp_path / "dq_scales.npy", scales)
    run("dequantize", "--in", tmp_path / "dq_in.npy", "--scales", tmp_path / "dq_scales.npy",
        "--type", qtype, "--out", tmp_path / "dq_out.npy")
    return np.load(tmp_path / "dq_out.npy")


def same_values(got, want):
    """Bitwise equal, except that any NaN matches any NaN."""
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    both_nan = np.isnan(got) & np.isnan(want)
    same_bits = got.view(np.uint32) == want.view(np.uint32)
    return both_nan | same_bits


@pytest.mark.parametrize("qtype", FORMATS)
def test_every_code_decodes_as_ml_dtypes(tmp_path, qtype):
    dtype, _ = FORMATS[qtype]
    codes = np.arange(256, dtype=np.uint8)
    got = dequantize(tmp_path, codes, np.ones(1, np.float32), qtype)
    want = codes.view(dtype).astype(np.float32)
    ok = same_values(got, want)
    assert ok.all(), [(int(c), got[c], want[c]) for c in np.flatnonzero(~ok)[:10]]


def sweep(dtype, max_value):
    """Dense f32 values around everything that matters for rounding."""
    grid = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    grid = np.unique(grid[np.isfinite(grid) & (grid >= 0)]).astype(np.float64)
    grid = np.append(grid, 2.0 * grid[-1] - grid[-2])  # the step past the max
    mids = (grid[:-1] + grid[1:]) / 2  # ties, exact in f32
    anchors = np.concatenate([grid, mids]).astype(np.float32)
    up = np.nextafter(anchors, np.float32(np.inf))
    down = np.nextafter(anchors, np.float32(-np.inf))
    rng = np.random.default_rng(5)
    spread = np.exp(rng.uniform(np.log(1e-9), np.log(4 * max_value), 100_000)).astype(np.float32)
    specials = np.array([0.0, np.inf, np.nan, np.finfo(np.float32).max,
                         np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal,
                         max_value, 1.5 * max_value, 1e30], np.float32)
    values = np.concatenate([anchors, up, down, spread, specials])
    return np.concatenate([values, -values]).astype(np.float32)


@pytest.mark.parametrize("qtype", FORMATS)
def test_encode_rounds_like_ml_dtypes_with_saturation(tmp_path, qtype):
    dtype, max_value = FORMATS[qtype]
    x = sweep(dtype, max_value)
    codes, scales = quantize(tmp_path, x, qtype, "per_tensor", static_range=max_value)
    assert codes.dtype == np.uint8 and codes.shape == x.shape
    assert scales.dtype == np.float32 and scales.shape == (1,) and scales[0] == 1.0
    want = np.clip(x, -max_value, max_value).astype(dtype)  # NaN stays NaN
    got = codes.view(dtype)
    ok = same_values(got.astype(np.float32), want.astype(np.float32))
    # -0.0 and +0.0 must keep their sign too: compare codes where not NaN.
    not_nan = ~np.isnan(x)
    ok &= ~not_nan | (codes == want.view(np.uint8))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, [(float(x[i]), int(codes[i]), int(want.view(np.uint8)[i])) for i in bad[:10]]


def test_int8_rounds_half_to_even_and_clamps(tmp_path):
    rng = np.random.default_rng(9)
    x = np.concatenate([np.arange(-300, 300, 0.5, dtype=np.float32),
                        rng.normal(0, 60, 10_000).astype(np.float32)])
    codes, scales = quantize(tmp_path, x, "int8", "per_tensor", static_range=127.0)
    assert codes.dtype == np.int8 and scales[0] == 1.0
    np.testing.assert_array_equal(codes, np.clip(np.round(x), -127, 127).astype(np.int8))


@pytest.mark.parametrize("qtype", ["fp8_e4m3", "fp8_e5m2", "int8"])
@pytest.mark.parametrize("spec,shape,scale_shape", [
    ("per_tensor", (6, 40), (1, 1)),
    ("channel:0", (6, 40), (6, 1)),
    ("channel:0,2", (3, 70, 5), (3, 1, 5)),
    ("channel:0,2+block:1:32", (3, 70, 5), (3, 3, 5)),
])
def test_round_trip_through_files(tmp_path, qtype, spec, shape, scale_shape):
    x = np.random.default_rng(1).normal(0, 2, shape).astype(np.float32)
    codes, scales = quantize(tmp_path, x, qtype, spec)
    assert scales.shape == scale_shape
    back = dequantize(tmp_path, codes, scales, qtype)
    # Independent dequantization: decode with ml_dtypes, scale by broadcasting
    # each scale over its cell.
    decoded = codes.astype(np.float32) if qtype == "int8" else \
        codes.view(FORMATS[qtype][0]).astype(np.float32)
    expanded = scales
    for axis, (dim, cells) in enumerate(zip(shape, scale_shape)):
        if cells not in (1, dim):
            expanded = np.repeat(expanded, 32, axis=axis).take(range(dim), axis=axis)
    np.testing.assert_array_equal(back, decoded * expanded)
    rel = np.linalg.norm(back - x) / np.linalg.norm(x)
    assert rel < {"fp8_e4m3": 0.07, "fp8_e5m2": 0.12, "int8": 0.02}[qtype]


@pytest.mark.parametrize("flags,needle", [
    (["--type", "fp8_e4m3", "--granularity", "channel:0+block:1:16"], "--granularity"),
    (["--type", "fp8_e4m3", "--granularity", "per-tensor"], "--granularity"),
    (["--type", "fp8_e4m3", "--granularity", "channel:5"], "--granularity"),
    (["--type", "fp8_e4m3", "--granularity", "channel:0,0"], "--granularity"),
    (["--type", "fp8", "--granularity", "channel:0"], "--type"),
    (["--type", "int8", "--granularity", "channel:0", "--static-range", "0"], "--static-range"),
    (["--type", "int8", "--granularity", "channel:0", "--static-range", "inf"], "--static-range"),
])
def test_cli_refuses_bad_settings_and_writes_nothing(tmp_path, flags, needle):
    np.save(tmp_path / "x.npy", np.ones((4, 64), np.float32))
    result = run("quantize", "--in", tmp_path / "x.npy", "--out", tmp_path / "q.npy",
                 "--scales", tmp_path / "s.npy", *flags, expect_ok=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: " + needle), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_dequantize_refuses_mismatched_files_and_writes_nothing(tmp_path):
    np.save(tmp_path / "q.npy", np.zeros((4, 64), np.uint8))
    np.save(tmp_path / "s.npy", np.ones((4, 3), np.float32))  # 3 blocks of 64 columns? no
    result = run("dequantize", "--in", tmp_path / "q.npy", "--scales", tmp_path / "s.npy",
                 "--type", "fp8_e4m3", "--out", tmp_path / "x.npy", expect_ok=False)
    assert result.returncode == 2 and result.stderr.startswith("error: --scales")
    result = run("dequantize", "--in", tmp_path / "q.npy", "--scales", tmp_path / "s.npy",
                 "--type", "int8", "--out", tmp_path / "x.npy", expect_ok=False)
    assert result.returncode == 2 and result.stderr.startswith("error: --in")
    assert not (tmp_path / "x.npy").exists()


def grouped_reference(lhs, rhs, sizes, transpose=False):
    out = np.zeros((lhs.shape[0], rhs.shape[1] if transpose else rhs.shape[2]))
    start = 0
    for g, size in enumerate(sizes):
        w = rhs[g].T if transpose else rhs[g]
        out[start:start + size] = lhs[start:start + size].astype(np.float64) @ w
        start += size
    return out


@pytest.mark.parametrize("quant,rhs_scales,kernel,bound", [
    ("fp8", "channel", "v1", 0.07),
    ("fp8", "block:32", "v2", 0.07),
    ("int8", "channel", "v1", 0.02),
    ("int8", "block:64", "v2", 0.02),
    ("fp8", "block:32", None, 0.07),  # no --kernel: block scales fix it to v2
    ("int8", None, None, 0.02),  # tiles, kernel and buffers all resolved
])
def test_cli_quantized_gmm_within_the_format_error(tmp_path, quant, rhs_scales, kernel, bound):
    rng = np.random.default_rng(3)
    lhs = rng.normal(size=(50, 96)).astype(np.float32)
    rhs = rng.normal(size=(4, 96, 40)).astype(np.float32)
    sizes = np.array([12, 0, 25, 9], np.int32)  # sum 46 < 50, an empty group
    for name, array in [("l", lhs), ("r", rhs), ("s", sizes)]:
        np.save(tmp_path / f"{name}.npy", array)
    run("gmm", "--lhs", tmp_path / "l.npy", "--rhs", tmp_path / "r.npy", "--group-sizes",
        tmp_path / "s.npy", "--out", tmp_path / "o.npy", "--quant", quant,
        *(["--rhs-scales", rhs_scales] if rhs_scales else []),
        *(["--kernel", kernel] if kernel else []))
    out = np.load(tmp_path / "o.npy")
    want = grouped_reference(lhs, rhs, sizes)
    assert np.linalg.norm(out - want) / np.linalg.norm(want) <= bound
    assert (out[46:] == 0).all()


def test_cli_quantized_tgmm_within_the_format_error(tmp_path):
    rng = np.random.default_rng(4)
    lhs = rng.normal(size=(50, 24)).astype(np.float32)
    dout = rng.normal(size=(50, 16)).astype(np.float32)
    sizes = np.array([20, 0, 30], np.int32)
    for name, array in [("l", lhs), ("d", dout), ("s", sizes)]:
        np.save(tmp_path / f"{name}.npy", array)
    run("tgmm", "--lhs", tmp_path / "l.npy", "--dout", tmp_path / "d.npy", "--group-sizes",
        tmp_path / "s.npy", "--out", tmp_path / "o.npy", "--quant", "fp8")
    out = np.load(tmp_path / "o.npy")
    want = np.stack([lhs[:20].T @ dout[:20], np.zeros((24, 16)), lhs[20:].T @ dout[20:]])
    assert np.linalg.norm(out - want) / np.linalg.norm(want) <= 0.12
    assert (out[1] == 0).all()


@pytest.mark.parametrize("command,flags,needle", [
    ("gmm", ["--quant", "fp8", "--rhs-scales", "block:32", "--kernel", "v1"], "--rhs-scales"),
    ("gmm", ["--quant", "fp8", "--rhs-scales", "block:16", "--kernel", "v2"], "--rhs-scales"),
    ("gmm", ["--quant", "fp8", "--rhs-scales", "rows"], "--rhs-scales"),
    ("gmm", ["--rhs-scales", "channel"], "--rhs-scales"),  # without --quant
    ("gmm", ["--quant", "e4m3"], "--quant"),
    ("gmm", ["--quant", "fp8", "--rhs-scales", "block:32", "--kernel", "v2",
             "--tiles", "8,48,16"], "tiles"),
    ("tgmm", ["--quant", "int8", "--rhs-scales", "block:64", "--kernel", "v2"], "--rhs-scales"),
])
def test_cli_refuses_quantization_settings_that_cannot_work(tmp_path, command, flags, needle):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "a.npy", rng.normal(size=(20, 64)).astype(np.float32))
    np.save(tmp_path / "s.npy", np.array([10, 10], np.int32))
    if command == "gmm":
        np.save(tmp_path / "b.npy", rng.normal(size=(2, 64, 16)).astype(np.float32))
        inputs = ["--lhs", tmp_path / "a.npy", "--rhs", tmp_path / "b.npy"]
    else:
        np.save(tmp_path / "b.npy", rng.normal(size=(20, 16)).astype(np.float32))
        inputs = ["--lhs", tmp_path / "a.npy", "--dout", tmp_path / "b.npy"]
    result = run(command, *inputs, "--group-sizes", tmp_path / "s.npy", "--out",
                 tmp_path / "o.npy", *flags, expect_ok=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: " + needle), result.stderr
    assert not (tmp_path / "o.npy").exists()


def test_cli_rounds_a_resolved_tile_k_up_to_the_weight_blocks(tmp_path):
    # K = 1040 is longer than the heuristic's k tile (512 on the machines we
    # know), which block:80 does not divide: the CLI rounds the tile it
    # resolved, where the same k set by hand is refused.
    rng = np.random.default_rng(6)
    lhs = rng.normal(size=(40, 1040)).astype(np.float32)
    rhs = rng.normal(size=(2, 1040, 24)).astype(np.float32)
    sizes = np.array([15, 25], np.int32)
    for name, array in [("l", lhs), ("r", rhs), ("s", sizes)]:
        np.save(tmp_path / f"{name}.npy", array)
    args = ["gmm", "--lhs", tmp_path / "l.npy", "--rhs", tmp_path / "r.npy", "--group-sizes",
            tmp_path / "s.npy", "--out", tmp_path / "o.npy", "--quant", "int8", "--rhs-scales",
            "block:80", "--no-cache"]
    run(*args)
    out = np.load(tmp_path / "o.npy")
    want = grouped_reference(lhs, rhs, sizes)
    assert np.linalg.norm(out - want) / np.linalg.norm(want) <= 0.02
    (tmp_path / "o.npy").unlink()
    refused = run(*args, "--tiles", "16,512,24", expect_ok=False)
    assert refused.returncode == 2 and "multiple of 80" in refused.stderr, refused.stderr
    assert not (tmp_path / "o.npy").exists()
