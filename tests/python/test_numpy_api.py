"""raggemm's numpy API against a float64 numpy reference, and its errors.

Every case is small: the point is the contract (values, zero rows past
sum(group_sizes), zero slices for empty groups, dtypes, options, layouts),
not speed.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

import raggemm

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2

# Group-size patterns over M=13 rows and G=4 groups: balanced-ish, empty
# groups in every position, sum < M, everything in one group, all empty.
GROUP_SIZES = {
    "ragged": [3, 5, 1, 4],
    "empty_first_last": [0, 7, 6, 0],
    "sum_lt_m": [2, 0, 3, 1],
    "one_group": [0, 0, 13, 0],
    "all_empty": [0, 0, 0, 0],
}
M, K, N, G = 13, 11, 9, 4


def rel_err(got, want):
    want = np.asarray(want, np.float64)
    scale = max(np.linalg.norm(want), 1e-30)
    return np.linalg.norm(np.asarray(got, np.float64) - want) / scale


def starts_of(group_sizes):
    return np.concatenate([[0], np.cumsum(group_sizes)]).astype(np.int64)


def gmm_ref(lhs, rhs, group_sizes, transpose_rhs=False, group_offset=0):
    """out[i] = lhs[i] @ rhs[group(i) - group_offset] in float64; other rows 0."""
    lhs = np.asarray(lhs, np.float64)
    rhs = np.asarray(rhs, np.float64)
    if transpose_rhs:
        rhs = rhs.transpose(0, 2, 1)
    out = np.zeros((lhs.shape[0], rhs.shape[2]))
    starts = starts_of(group_sizes)
    for g in range(rhs.shape[0]):
        lo, hi = starts[g + group_offset], starts[g + group_offset + 1]
        out[lo:hi] = lhs[lo:hi] @ rhs[g]
    return out


def tgmm_ref(lhs, dout, group_sizes, group_offset=0, local_groups=None):
    lhs = np.asarray(lhs, np.float64)
    dout = np.asarray(dout, np.float64)
    groups = len(group_sizes) - group_offset if local_groups is None else local_groups
    starts = starts_of(group_sizes)
    out = np.zeros((groups, lhs.shape[1], dout.shape[1]))
    for g in range(groups):
        lo, hi = starts[g + group_offset], starts[g + group_offset + 1]
        out[g] = lhs[lo:hi].T @ dout[lo:hi]
    return out


def random(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(dtype)


def f32(array):
    return np.asarray(array).astype(np.float32)


# ---------------------------------------------------------------------------
# gmm and tgmm values.

FLOAT_DTYPES = [np.float32, np.float16, BF16]
KERNELS = ["v1", "v2"]


@pytest.mark.parametrize("pattern", sorted(GROUP_SIZES))
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("transpose_rhs", [False, True])
def test_gmm_matches_reference(pattern, kernel, dtype, transpose_rhs):
    group_sizes = np.array(GROUP_SIZES[pattern], np.int32)
    lhs = random((M, K), dtype, seed=1)
    rhs = random((G, N, K) if transpose_rhs else (G, K, N), dtype, seed=2)
    out = raggemm.gmm(lhs, rhs, group_sizes, transpose_rhs=transpose_rhs, kernel=kernel)
    assert out.dtype == np.float32 and out.shape == (M, N)
    assert out.flags.c_contiguous
    want = gmm_ref(f32(lhs), f32(rhs), group_sizes, transpose_rhs)
    assert rel_err(out, want) <= 1e-5
    # Rows past sum(group_sizes) are exact zeros, not left over memory.
    assert not out[group_sizes.sum():].any()


@pytest.mark.parametrize("pattern", sorted(GROUP_SIZES))
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_tgmm_matches_reference(pattern, kernel, dtype):
    group_sizes = np.array(GROUP_SIZES[pattern], np.int32)
    lhs = random((M, K), dtype, seed=3)
    dout = random((M, N), dtype, seed=4)
    out = raggemm.tgmm(lhs, dout, group_sizes, kernel=kernel)
    assert out.dtype == np.float32 and out.shape == (G, K, N)
    assert rel_err(out, tgmm_ref(f32(lhs), f32(dout), group_sizes)) <= 1e-5
    for g, size in enumerate(group_sizes):
        if size == 0:
            assert not out[g].any(), f"empty group {g} must give a zero slice"


OPTIONS = list(itertools.product(
    [None, (8, 16, 8), (5, 3, 7), (64, 64, 64)],  # tiles: default, non-dividing, odd, larger than dims
    [1, 2, 4],  # buffers
    [0, 1, 2],  # threads
))


@pytest.mark.parametrize("tiles,buffers,threads", OPTIONS)
@pytest.mark.parametrize("kernel", KERNELS)
def test_options_do_not_change_values(tiles, buffers, threads, kernel):
    group_sizes = np.array(GROUP_SIZES["empty_first_last"], np.int32)
    lhs, rhs, dout = random((M, K), seed=5), random((G, K, N), seed=6), random((M, N), seed=7)
    kwargs = dict(tiles=tiles, buffers=buffers, threads=threads, kernel=kernel)
    assert rel_err(raggemm.gmm(lhs, rhs, group_sizes, **kwargs), gmm_ref(lhs, rhs, group_sizes)) <= 1e-5
    assert rel_err(raggemm.tgmm(lhs, dout, group_sizes, **kwargs),
                   tgmm_ref(lhs, dout, group_sizes)) <= 1e-5


@pytest.mark.parametrize("kernel", KERNELS)
def test_results_do_not_depend_on_thread_count(kernel):
    group_sizes = np.array([40, 0, 70, 17], np.int32)
    lhs, rhs, dout = random((130, 64), seed=8), random((4, 64, 48), seed=9), random((130, 48), seed=10)
    for op, args in ((raggemm.gmm, (lhs, rhs)), (raggemm.tgmm, (lhs, dout))):
        one = op(*args, group_sizes, threads=1, kernel=kernel, tiles=(8, 16, 16))
        two = op(*args, group_sizes, threads=2, kernel=kernel, tiles=(8, 16, 16))
        np.testing.assert_array_equal(one, two)


def test_concurrent_calls_from_python_threads():
    """The GIL is released during compute, so threads really overlap; each
    call must still get its own answer."""
    import concurrent.futures

    problems = []
    for seed in range(8):
        sizes = np.random.default_rng(seed).multinomial(40, np.ones(G) / G).astype(np.int32)
        problems.append((random((45, K), seed=seed), random((G, K, N), seed=seed + 50), sizes))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda p: raggemm.gmm(*p, kernel="v2"), problems * 4))
    for (lhs, rhs, sizes), out in zip(problems * 4, outs):
        assert rel_err(out, gmm_ref(lhs, rhs, sizes)) <= 1e-5


def test_mixed_dtypes_and_int64_group_sizes():
    group_sizes = np.array(GROUP_SIZES["ragged"], np.int64)
    lhs, rhs = random((M, K), BF16, seed=11), random((G, K, N), np.float32, seed=12)
    out = raggemm.gmm(lhs, rhs, group_sizes)
    assert rel_err(out, gmm_ref(f32(lhs), rhs, group_sizes)) <= 1e-5


@pytest.mark.parametrize("kernel", KERNELS)
def test_group_offset_and_local_groups(kernel):
    group_sizes = np.array([3, 2, 0, 4, 1], np.int32)
    m = int(group_sizes.sum()) + 2
    lhs, dout = random((m, K), seed=13), random((m, N), seed=14)
    rhs = random((2, K, N), seed=15)  # holds global groups 2 and 3
    out = raggemm.gmm(lhs, rhs, group_sizes, group_offset=2, local_groups=2, kernel=kernel)
    assert rel_err(out, gmm_ref(lhs, rhs, group_sizes, group_offset=2)) <= 1e-5
    drhs = raggemm.tgmm(lhs, dout, group_sizes, group_offset=1, local_groups=3, kernel=kernel)
    assert drhs.shape == (3, K, N)
    assert rel_err(drhs, tgmm_ref(lhs, dout, group_sizes, group_offset=1, local_groups=3)) <= 1e-5


def silu(x):
    return x / (1.0 + np.exp(-x))


def test_v2_output_stage_scales_and_bias():
    group_sizes = np.array(GROUP_SIZES["sum_lt_m"], np.int32)
    lhs, rhs = random((M, K), seed=16), random((G, K, N), seed=17)
    row_scale = random((M,), seed=18)
    col_scale = random((G, N), seed=19)
    col_bias = random((N,), seed=20)
    out = raggemm.gmm(lhs, rhs, group_sizes, kernel="v2", row_scale=row_scale,
                      col_scale=col_scale, col_bias=col_bias)
    acc = gmm_ref(lhs, rhs, group_sizes)
    want = np.zeros_like(acc)
    starts = starts_of(group_sizes)
    for g in range(G):
        lo, hi = starts[g], starts[g + 1]
        want[lo:hi] = acc[lo:hi] * row_scale[lo:hi, None] * col_scale[g] + col_bias
    assert rel_err(out, want) <= 1e-5
    assert not out[group_sizes.sum():].any()


def test_v2_fused_swiglu():
    group_sizes = np.array(GROUP_SIZES["ragged"], np.int32)
    lhs, rhs = random((M, K), seed=21), random((G, K, 2 * N), seed=22)
    out = raggemm.gmm(lhs, rhs, group_sizes, kernel="v2", swiglu=True)
    assert out.shape == (M, N)
    acc = gmm_ref(lhs, rhs, group_sizes)
    assert rel_err(out, silu(acc[:, :N]) * acc[:, N:]) <= 1e-5


# ---------------------------------------------------------------------------
# Layout: zero copy, read-only and 16-byte (not 64-byte) aligned inputs.


def test_inputs_are_read_in_place_and_left_unchanged():
    group_sizes = np.array(GROUP_SIZES["ragged"], np.int32)
    lhs, rhs = random((M, K), seed=23), random((G, K, N), seed=24)
    lhs_copy, rhs_copy = lhs.copy(), rhs.copy()
    lhs.flags.writeable = False  # read-only arrays are accepted
    out = raggemm.gmm(lhs, rhs, group_sizes)
    np.testing.assert_array_equal(lhs, lhs_copy)
    np.testing.assert_array_equal(rhs, rhs_copy)
    assert not np.shares_memory(out, lhs) and not np.shares_memory(out, rhs)


@pytest.mark.parametrize("offset_floats", [1, 4, 8, 12])
def test_inputs_only_need_element_alignment(offset_floats):
    """XLA hands buffers aligned to 16 bytes at best; numpy slices may be
    aligned to 4. The ops must not assume 64."""
    group_sizes = np.array([20, 0, 17, 9], np.int32)
    m, k, n = 50, 33, 29

    def at_offset(shape, seed):
        storage = np.empty(int(np.prod(shape)) + 16, np.float32)
        view = storage[offset_floats:offset_floats + int(np.prod(shape))].reshape(shape)
        view[...] = random(shape, seed=seed)
        return view

    lhs, rhs, dout = at_offset((m, k), 25), at_offset((4, k, n), 26), at_offset((m, n), 27)
    for kernel in KERNELS:
        assert rel_err(raggemm.gmm(lhs, rhs, group_sizes, kernel=kernel),
                       gmm_ref(lhs, rhs, group_sizes)) <= 1e-5
        assert rel_err(raggemm.tgmm(lhs, dout, group_sizes, kernel=kernel),
                       tgmm_ref(lhs, dout, group_sizes)) <= 1e-5


def test_empty_dimensions():
    out = raggemm.gmm(np.zeros((0, K), np.float32), random((G, K, N)), np.zeros(G, np.int32))
    assert out.shape == (0, N)
    drhs = raggemm.tgmm(np.zeros((0, K), np.float32), np.zeros((0, N), np.float32),
                        np.zeros(G, np.int32))
    assert drhs.shape == (G, K, N) and not drhs.any()


# ---------------------------------------------------------------------------
# Errors: a ValueError naming the argument, never a crash, nothing returned.

GOOD = dict(lhs=random((M, K)), rhs=random((G, K, N)),
            group_sizes=np.array(GROUP_SIZES["ragged"], np.int32))


def bad_gmm_cases():
    lhs, rhs, sizes = GOOD["lhs"], GOOD["rhs"], GOOD["group_sizes"]
    return {
        "lhs float64": (dict(lhs=lhs.astype(np.float64)), "lhs"),
        "lhs int32": (dict(lhs=lhs.astype(np.int32)), "lhs"),
        "lhs big-endian": (dict(lhs=lhs.astype(">f4")), "lhs"),
        "lhs transposed view": (dict(lhs=np.ascontiguousarray(lhs.T).T), "lhs"),
        "lhs strided rows": (dict(lhs=np.zeros((2 * M, K), np.float32)[::2]), "lhs"),
        "lhs rank 3": (dict(lhs=lhs[None]), "lhs"),
        "lhs list": (dict(lhs=[[1.0, 2.0]]), "lhs"),
        "rhs float64": (dict(rhs=rhs.astype(np.float64)), "rhs"),
        "rhs non-contiguous": (dict(rhs=rhs.transpose(0, 2, 1)), "rhs"),
        "rhs rank 2": (dict(rhs=rhs[0]), "rhs"),
        "rhs K mismatch": (dict(rhs=random((G, K + 1, N))), "rhs"),
        "group_sizes float": (dict(group_sizes=sizes.astype(np.float32)), "group_sizes"),
        "group_sizes wrong length": (dict(group_sizes=sizes[:3].copy()), "group_sizes"),
        "group_sizes negative": (dict(group_sizes=np.array([3, -1, 5, 4], np.int32)), "group_sizes"),
        "group_sizes sum > M": (dict(group_sizes=np.array([3, 5, 1, 40], np.int32)), "group_sizes"),
        "group_sizes rank 2": (dict(group_sizes=sizes[None]), "group_sizes"),
        "tiles zero": (dict(tiles=(0, 8, 8)), "tiles"),
        "tiles negative": (dict(tiles=(8, -8, 8)), "tiles"),
        "tiles two values": (dict(tiles=(8, 8)), "tiles"),
        "tiles not ints": (dict(tiles="abc"), "tiles"),
        "kernel unknown": (dict(kernel="v3"), "kernel"),
        "buffers zero": (dict(buffers=0), "buffer"),
        "buffers five": (dict(buffers=5), "buffer"),
        "threads negative": (dict(threads=-1), "thread"),
        "group_offset out of range": (dict(group_offset=3), "group_offset"),
        "swiglu on v1": (dict(swiglu=True, kernel="v1"), "v2"),
        "col_scale float64": (dict(kernel="v2", col_scale=np.ones(N)), "col_scale"),
        "col_scale wrong length": (dict(kernel="v2", col_scale=np.ones(N + 1, np.float32)), "col_scale"),
        "row_scale wrong length": (dict(kernel="v2", row_scale=np.ones(M - 1, np.float32)), "row_scale"),
    }


@pytest.mark.parametrize("case", sorted(bad_gmm_cases()))
def test_gmm_rejects_bad_input_with_value_error(case):
    change, argument = bad_gmm_cases()[case]
    args = {**GOOD, **change}
    lhs, rhs, sizes = args.pop("lhs"), args.pop("rhs"), args.pop("group_sizes")
    with pytest.raises(ValueError, match=argument) as raised:
        raggemm.gmm(lhs, rhs, sizes, **args)
    assert isinstance(raised.value, raggemm.Error)


@pytest.mark.parametrize("change,argument", [
    (dict(dout=random((M + 1, N))), "dout"),
    (dict(dout=random((M, N)).astype(np.float64)), "dout"),
    (dict(dout=np.asfortranarray(random((M, N)))), "dout"),
    (dict(lhs=random((M, K))[:, ::2]), "lhs"),
    (dict(local_groups=9), "local_groups"),
    (dict(group_offset=-1), "group_offset"),
    (dict(tiles=(4, 4, 0)), "tiles"),
])
def test_tgmm_rejects_bad_input_with_value_error(change, argument):
    args = {**dict(lhs=random((M, K)), dout=random((M, N)),
                   group_sizes=np.array(GROUP_SIZES["ragged"], np.int32)), **change}
    lhs, dout, sizes = args.pop("lhs"), args.pop("dout"), args.pop("group_sizes")
    with pytest.raises(ValueError, match=argument):
        raggemm.tgmm(lhs, dout, sizes, **args)


@pytest.mark.parametrize("dtype", [E4M3, E5M2, np.int8], ids=lambda d: np.dtype(d).name)
def test_raw_codes_are_decoded_exactly_or_refused(dtype):
    """Codes without scales: either the op computes on their decoded values
    or it refuses them with a ValueError naming the operand."""
    group_sizes = np.array(GROUP_SIZES["ragged"], np.int32)
    lhs = (random((M, K)) * 4).astype(dtype)
    rhs = random((G, K, N), seed=1).astype(dtype)
    try:
        out = raggemm.gmm(lhs, rhs, group_sizes)
    except ValueError as error:
        assert "lhs" in str(error) or "rhs" in str(error)
    else:
        assert rel_err(out, gmm_ref(f32(lhs), f32(rhs), group_sizes)) <= 1e-5


# ---------------------------------------------------------------------------
# Quantization helpers.

QUANT_DTYPES = {"fp8_e4m3": E4M3, "fp8_e5m2": E5M2, "int8": np.int8}
QUANT_BOUND = {"fp8_e4m3": 0.07, "fp8_e5m2": 0.12, "int8": 0.02}


@pytest.mark.parametrize("type_name", sorted(QUANT_DTYPES))
@pytest.mark.parametrize("granularity,shape,scale_shape", [
    ("per_tensor", (6, 40), (1, 1)),
    ("channel:0", (6, 40), (6, 1)),
    ("channel:0,2", (3, 40, 5), (3, 1, 5)),
    ("channel:0,2+block:1:32", (3, 70, 5), (3, 3, 5)),
])
def test_quantize_dequantize(type_name, granularity, shape, scale_shape):
    x = random(shape, seed=30)
    q = raggemm.quantize(x, type_name, granularity)
    assert q.values.dtype == QUANT_DTYPES[type_name] and q.values.shape == shape
    assert q.scales.dtype == np.float32 and q.scales.shape == scale_shape
    assert q.type == type_name
    back = raggemm.dequantize(q)
    # Decoding with ml_dtypes and broadcasting the scales over their cells
    # gives exactly what raggemm decodes.
    scales = q.scales
    if "block" in granularity:
        scales = np.repeat(scales, 32, axis=1)[:, :shape[1]]
    np.testing.assert_array_equal(back, q.values.astype(np.float32) * scales)
    assert rel_err(back, x) <= (0.02 if type_name == "int8" and granularity == "per_tensor"
                                else QUANT_BOUND[type_name])
    # The same from the parts, and from raw uint8 fp8 bits with an explicit type.
    np.testing.assert_array_equal(raggemm.dequantize(q.values, q.scales), back)
    if type_name != "int8":
        np.testing.assert_array_equal(
            raggemm.dequantize(q.values.view(np.uint8), q.scales, type=type_name), back)


def test_quantize_static_range_saturates():
    x = np.array([[0.5, -1.0, 3.0, -100.0]], np.float32)
    q = raggemm.quantize(x, "fp8_e4m3", "per_tensor", static_range=2.0)
    np.testing.assert_allclose(q.scales, 2.0 / 448)
    back = raggemm.dequantize(q)
    assert back[0, 3] == pytest.approx(-2.0) and back[0, 2] == pytest.approx(2.0)


@pytest.mark.parametrize("call,argument", [
    (lambda: raggemm.quantize(random((4, 4)), "fp4"), "type"),
    (lambda: raggemm.quantize(random((4, 4)), "int8", "channel:"), "granularity"),
    (lambda: raggemm.quantize(random((4, 4)), "int8", "channel:5"), "granularity"),
    (lambda: raggemm.quantize(random((4, 64)), "int8", "channel:0+block:1:7"), "granularity"),
    (lambda: raggemm.quantize(random((4, 4)).astype(np.float64), "int8"), "x"),
    (lambda: raggemm.quantize(random((4, 4)), "int8", static_range=-1.0), "static_range"),
    (lambda: raggemm.dequantize(np.zeros((4, 4), np.float32), np.ones((1, 1), np.float32)), "values"),
    (lambda: raggemm.dequantize(np.zeros((4, 4), np.int8), np.ones((3, 1), np.float32)), "scales"),
])
def test_quantization_errors(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


QUANT_M, QUANT_K, QUANT_N = 300, 256, 96
QUANT_SIZES = np.array([100, 0, 150, 20], np.int32)  # empty group, sum < M


@pytest.mark.parametrize("recipe,codes", [("fp8", "fp8_e4m3"), ("int8", "int8")])
@pytest.mark.parametrize("kernel,rhs_scales", [("v1", "channel"), ("v2", "channel"),
                                               ("v2", "block:128")])
def test_quantized_gmm_is_the_reference_on_dequantized_operands(recipe, codes, kernel, rhs_scales):
    lhs, rhs = random((QUANT_M, QUANT_K), seed=40), random((4, QUANT_K, QUANT_N), seed=41)
    out = raggemm.gmm(lhs, rhs, QUANT_SIZES, quant=recipe, kernel=kernel, rhs_scales=rhs_scales)
    rhs_spec = "channel:0,2" + ("+block:1:128" if rhs_scales.startswith("block") else "")
    lhs_q = raggemm.dequantize(raggemm.quantize(lhs, codes, "channel:0"))
    rhs_q = raggemm.dequantize(raggemm.quantize(rhs, codes, rhs_spec))
    assert rel_err(out, gmm_ref(lhs_q, rhs_q, QUANT_SIZES)) <= 1e-5  # same math
    assert rel_err(out, gmm_ref(lhs, rhs, QUANT_SIZES)) <= QUANT_BOUND[codes]  # quantization error
    assert not out[QUANT_SIZES.sum():].any()


@pytest.mark.parametrize("recipe,bound", [("fp8", 0.12), ("int8", 0.02)])
def test_quantized_backward_passes_stay_near_f32(recipe, bound):
    lhs, rhs = random((QUANT_M, QUANT_K), seed=42), random((4, QUANT_K, QUANT_N), seed=43)
    dout = random((QUANT_M, QUANT_N), seed=44)
    dlhs = raggemm.gmm(dout, rhs, QUANT_SIZES, transpose_rhs=True, quant=recipe)
    assert rel_err(dlhs, gmm_ref(dout, rhs, QUANT_SIZES, transpose_rhs=True)) <= bound
    drhs = raggemm.tgmm(lhs, dout, QUANT_SIZES, quant=recipe)
    assert rel_err(drhs, tgmm_ref(lhs, dout, QUANT_SIZES)) <= bound
    assert not drhs[1].any()  # the empty group


@pytest.mark.parametrize("kwargs,argument", [
    (dict(quant="fp4"), "quant"),
    (dict(quant="fp8", rhs_scales="block:7"), "rhs_scales"),
    (dict(quant="fp8", rhs_scales="rows"), "rhs_scales"),
    (dict(quant="fp8", rhs_scales="block:128", kernel="v1"), "v1"),
])
def test_quantized_gmm_errors(kwargs, argument):
    lhs, rhs = random((QUANT_M, QUANT_K), seed=45), random((4, QUANT_K, QUANT_N), seed=46)
    with pytest.raises(ValueError, match=argument):
        raggemm.gmm(lhs, rhs, QUANT_SIZES, **kwargs)


# ---------------------------------------------------------------------------
# Plans.


def test_plan_explicit_settings_win_and_are_mapped_per_pass():
    plan = raggemm.plan(4096, 1024, 768, 32, weight="wi", cache=False, settings={
        "wi_tile_fwd_batch_seq": 64,      # fwd m
        "wi_tile_dlhs_mlp_dim": 128,      # dlhs k (contracted)
        "wi_tile_drhs_embed_dim": 256,    # drhs m
        "use_gmm_v2_drhs": True,
    })
    assert isinstance(plan, raggemm.Plan) and plan.weight == "wi"
    assert plan.fwd.tiles[0] == 64 and dict(plan.fwd.source)["m"] == "explicit"
    assert plan.dlhs.tiles[1] == 128 and dict(plan.dlhs.source)["k"] == "explicit"
    assert plan.drhs.tiles[0] == 256 and dict(plan.drhs.source)["m"] == "explicit"
    assert plan.drhs.kernel == "v2" and dict(plan.drhs.source)["kernel"] == "explicit"
    assert dict(plan.fwd.source)["n"] == "heuristic"
    for config in (plan.fwd, plan.dlhs, plan.drhs):
        assert all(t > 0 for t in config.tiles) and 1 <= config.buffers <= 4
    hash(plan)  # usable as a static argument under jax.jit


def test_plan_per_pass_buffer_counts_beat_the_global_key():
    plan = raggemm.plan(4096, 1024, 768, 32, weight="wo", cache=False, settings={
        "wo_input_buffer_count_dlhs": 3,
        "input_buffer_count": 2,
        "wi_input_buffer_count_fwd": 4,   # another weight's: leaves wo alone
    })
    assert plan.dlhs.buffers == 3 and dict(plan.dlhs.source)["buffers"] == "explicit"
    assert plan.fwd.buffers == 2 and plan.drhs.buffers == 2
    with pytest.raises(ValueError, match="wo_input_buffer_count_drhs=0"):
        raggemm.plan(64, 32, 32, 4, weight="wo", cache=False,
                     settings={"wo_input_buffer_count_drhs": 0})


def test_plan_feeds_the_ops():
    plan = raggemm.plan(M, K, N, G, cache=False, settings=["wi_tile_fwd_batch_seq=8"])
    group_sizes = np.array(GROUP_SIZES["ragged"], np.int32)
    lhs, rhs = random((M, K)), random((G, K, N), seed=1)
    out = raggemm.gmm(lhs, rhs, group_sizes, tiles=plan.fwd.tiles, kernel=plan.fwd.kernel,
                      buffers=plan.fwd.buffers)
    assert rel_err(out, gmm_ref(lhs, rhs, group_sizes)) <= 1e-5


@pytest.mark.parametrize("call,argument", [
    (lambda: raggemm.plan(64, 32, 32, 4, cache=False, settings={"wi_tile_fwd_batch_sq": 8}),
     "wi_tile_fwd_batch_sq"),
    (lambda: raggemm.plan(64, 32, 32, 4, cache=False, settings={"wi_tile_fwd_batch_seq": 0}),
     "wi_tile_fwd_batch_seq"),
    (lambda: raggemm.plan(64, 32, 32, 4, weight="wx", cache=False), "weight"),
    (lambda: raggemm.plan(64, 32, 32, 0, cache=False), "groups"),
    (lambda: raggemm.PassConfig(tiles=(8, 0, 8)), "tiles"),
    (lambda: raggemm.PassConfig(kernel="v9"), "kernel"),
    (lambda: raggemm.PassConfig(buffers=7), "buffers"),
])
def test_plan_errors(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


# --- Output dtype and accumulation (out_dtype, out=, accumulate=) ---

def _bf16_bits(array):
    return np.asarray(array).view(np.uint16)


@pytest.mark.parametrize("kernel", ["v1", "v2"])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_bf16_out_dtype_is_the_f32_result_rounded_bit_for_bit(kernel, dtype):
    rng = np.random.default_rng(7)
    sizes = np.array(GROUP_SIZES["sum_lt_m"], np.int32)
    lhs = rng.standard_normal((M, K)).astype(dtype)
    rhs = rng.standard_normal((G, K, N)).astype(dtype)
    rhs_t = rng.standard_normal((G, N, K)).astype(dtype)
    dout = rng.standard_normal((M, N)).astype(dtype)
    for call in (lambda **o: raggemm.gmm(lhs, rhs, sizes, kernel=kernel, tiles=(4, 4, 4), **o),
                 lambda **o: raggemm.gmm(lhs, rhs_t, sizes, transpose_rhs=True, kernel=kernel,
                                         tiles=(4, 4, 4), **o),
                 lambda **o: raggemm.tgmm(lhs, dout, sizes, kernel=kernel, tiles=(4, 4, 4), **o)):
        f32 = call()
        for name in (BF16, "bf16"):
            got = call(out_dtype=name)
            assert got.dtype == BF16
            np.testing.assert_array_equal(_bf16_bits(got), _bf16_bits(f32.astype(BF16)))


@pytest.mark.parametrize("out_dtype", [np.float32, BF16])
def test_tgmm_accumulates_into_out_and_leaves_empty_groups(out_dtype):
    rng = np.random.default_rng(8)
    sizes = np.array(GROUP_SIZES["empty_first_last"], np.int32)
    lhs = rng.standard_normal((M, K)).astype(np.float32)
    dout = rng.standard_normal((M, N)).astype(np.float32)
    result = raggemm.tgmm(lhs, dout, sizes, threads=2)
    start = rng.standard_normal((G, K, N)).astype(out_dtype)
    out = start.copy()
    returned = raggemm.tgmm(lhs, dout, sizes, out=out, accumulate=True, threads=2)
    assert returned is out
    once = (start.astype(np.float32) + result).astype(out_dtype)
    np.testing.assert_array_equal(out.view(np.uint8), once.view(np.uint8))
    raggemm.tgmm(lhs, dout, sizes, out=out, accumulate=True, threads=2)
    twice = (once.astype(np.float32) + result).astype(out_dtype)
    np.testing.assert_array_equal(out.view(np.uint8), twice.view(np.uint8))
    for g in (0, 3):  # the empty groups: untouched
        np.testing.assert_array_equal(out[g].view(np.uint8), start[g].view(np.uint8))
    # Without accumulate, out is overwritten (empty groups zeroed).
    raggemm.tgmm(lhs, dout, sizes, out=out, threads=2)
    np.testing.assert_array_equal(out.astype(np.float32), result.astype(out_dtype).astype(np.float32))


def test_quantized_tgmm_accumulates_into_bf16_out():
    rng = np.random.default_rng(9)
    sizes = np.array(GROUP_SIZES["ragged"], np.int32)
    lhs = rng.standard_normal((M, K)).astype(np.float32)
    dout = rng.standard_normal((M, N)).astype(np.float32)
    result = raggemm.tgmm(lhs, dout, sizes, quant="int8", threads=1)
    start = rng.standard_normal((G, K, N)).astype(BF16)
    out = start.copy()
    raggemm.tgmm(lhs, dout, sizes, quant="int8", out=out, accumulate=True, threads=1)
    want = (start.astype(np.float32) + result).astype(BF16)
    np.testing.assert_array_equal(_bf16_bits(out), _bf16_bits(want))
    got = raggemm.gmm(lhs, rng.standard_normal((G, K, N)).astype(np.float32), sizes,
                      quant="int8", out_dtype=BF16)
    assert got.dtype == BF16


def test_bad_out_settings_raise_errors_naming_the_argument():
    sizes = np.array(GROUP_SIZES["ragged"], np.int32)
    lhs = np.ones((M, K), np.float32)
    dout = np.ones((M, N), np.float32)
    with pytest.raises(raggemm.Error, match="^out_dtype=.*float16"):
        raggemm.gmm(lhs, np.ones((G, K, N), np.float32), sizes, out_dtype=np.float16)
    with pytest.raises(raggemm.Error, match="^accumulate=True: needs out"):
        raggemm.tgmm(lhs, dout, sizes, accumulate=True)
    out = np.full((G, K, N), 7.0, np.float32)
    with pytest.raises(raggemm.Error, match="^out=float32: dtype must match out_dtype"):
        raggemm.tgmm(lhs, dout, sizes, out=out, out_dtype=BF16, accumulate=True)
    with pytest.raises(raggemm.Error, match="^out=.*dim 1"):
        raggemm.tgmm(lhs, dout, sizes, out=np.full((G, K + 1, N), 7.0, np.float32))
    np.testing.assert_array_equal(out, 7.0)  # nothing written


@pytest.mark.parametrize("out_dtype", [np.float32, BF16])
@pytest.mark.parametrize("quant", [None, "int8"])
def test_gmm_accumulates_into_out_for_the_rows_of_the_groups(out_dtype, quant):
    rng = np.random.default_rng(10)
    sizes = np.array(GROUP_SIZES["sum_lt_m"], np.int32)  # rows 6.. belong to no group
    lhs = rng.standard_normal((M, K)).astype(np.float32)
    rhs = rng.standard_normal((G, K, N)).astype(np.float32)
    result = raggemm.gmm(lhs, rhs, sizes, quant=quant, threads=2)
    start = rng.standard_normal((M, N)).astype(out_dtype)
    out = start.copy()
    assert raggemm.gmm(lhs, rhs, sizes, quant=quant, out=out, accumulate=True, threads=2) is out
    want = (start.astype(np.float32) + result).astype(out_dtype)
    np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(out[6:].view(np.uint8), start[6:].view(np.uint8))


def test_large_outputs_start_on_a_cache_line():
    """Outputs from 64 KiB on are 64-byte aligned (the kernels stream whole
    lines; np.empty's large arrays start 16 bytes past a page), and they are
    ordinary writable C-contiguous arrays of the right shape and dtype."""
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((64, 32), dtype=np.float32)
    rhs = rng.standard_normal((2, 32, 600), dtype=np.float32)
    sizes = np.array([40, 20], np.int32)
    dout = rng.standard_normal((64, 600), dtype=np.float32)
    for out in (raggemm.gmm(lhs, rhs, sizes), raggemm.tgmm(lhs, dout, sizes),
                raggemm.tgmm(lhs, dout, sizes, out_dtype=BF16)):
        assert out.nbytes >= 1 << 16
        assert out.ctypes.data % 64 == 0
        assert out.flags["C_CONTIGUOUS"] and out.flags["WRITEABLE"] and out.flags["OWNDATA"] is False
    small = raggemm.gmm(lhs[:2], np.ascontiguousarray(rhs[:, :, :3]), np.array([1, 1], np.int32))
    assert small.shape == (2, 3) and small.dtype == np.float32
    want = np.concatenate([lhs[:40] @ rhs[0], lhs[40:60] @ rhs[1], np.zeros((4, 600))])
    np.testing.assert_allclose(raggemm.gmm(lhs, rhs, sizes), want, rtol=1e-5, atol=1e-4)


def _pool_problem():
    rng = np.random.default_rng(1)
    lhs = rng.standard_normal((40, 64), dtype=np.float32)
    dout = rng.standard_normal((40, 8192), dtype=np.float32)
    sizes = np.array([25, 0, 15], np.int32)
    want = np.stack([lhs[:25].T @ dout[:25], np.zeros((64, 8192)), lhs[25:].T @ dout[25:]])
    return lhs, dout, sizes, want  # the output: 3 x 64 x 8192 f32, 6 MiB


def test_outputs_nothing_refers_to_are_reused_and_live_ones_never():
    from raggemm import _arrays
    lhs, dout, sizes, want = _pool_problem()
    first = raggemm.tgmm(lhs, dout, sizes)
    address = first.ctypes.data
    second = raggemm.tgmm(lhs, dout, sizes)  # `first` is alive: other memory
    assert second.ctypes.data != address
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-3)
    view = first[1:]  # a view keeps the buffer too
    del first
    third = raggemm.tgmm(lhs, dout, sizes)
    assert third.ctypes.data not in (address, second.ctypes.data)
    held = _arrays._POOL.held_bytes()
    del view, third
    again = raggemm.tgmm(lhs, dout, sizes)  # nothing refers to the first any more
    assert _arrays._POOL.held_bytes() == held  # a pooled buffer, no new one
    assert again.ctypes.data != second.ctypes.data
    np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(second, want, rtol=1e-4, atol=1e-3)
    assert held <= 1024 << 20


def test_output_pool_limit_and_its_errors(monkeypatch):
    from raggemm import _arrays
    lhs, dout, sizes, want = _pool_problem()
    monkeypatch.setenv("RAGGEMM_OUTPUT_POOL_MIB", "0")
    held = _arrays._POOL.held_bytes()
    out = raggemm.tgmm(lhs, dout, sizes)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
    assert _arrays._POOL.held_bytes() <= held  # nothing new pooled (free ones dropped)
    monkeypatch.setenv("RAGGEMM_OUTPUT_POOL_MIB", "7")  # one 6 MiB output fits, not two
    a = raggemm.tgmm(lhs, dout, sizes)
    b = raggemm.tgmm(lhs, dout, sizes)
    assert _arrays._POOL.held_bytes() <= 7 << 20
    np.testing.assert_array_equal(a, b)
    for bad in ("-1", "lots"):
        monkeypatch.setenv("RAGGEMM_OUTPUT_POOL_MIB", bad)
        with pytest.raises(raggemm.Error, match=f"RAGGEMM_OUTPUT_POOL_MIB='{bad}'"):
            raggemm.tgmm(lhs, dout, sizes)
