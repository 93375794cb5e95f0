"""The raggemm CLI against an external oracle, JAX.

Writes random problems as .npy files, runs `raggemm gmm` (forward and with
--transpose-rhs) and `raggemm tgmm`, and compares the output with
jax.lax.ragged_dot (forward; transposed through rhs.swapaxes(1, 2)) and
jax.lax.ragged_dot_general with a ragged contracting dim (tgmm), for kernels
v1 and v2 and input dtypes f32 and bf16, with empty groups and
sum(group_sizes) < M. Rows past the sum (gmm) and slices of empty groups
(tgmm) must be exactly zero.

Tolerances follow the classic bound for a length-L dot product in f32,
|error| <= L * eps * sum |a_i b_i|, applied to both our result and JAX's
(hence the factor 2). With --dtype bf16 the inputs are first rounded to bf16
on both sides, so the same f32 bound holds; a second check against JAX on the
unrounded inputs allows the bf16 rounding of each input (eps_bf16 per
product) on top.
"""

import jax

jax.config.update("jax_enable_x64", False)

import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax  # noqa: E402

EPS = {"f32": float(np.finfo(np.float32).eps), "bf16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)}

# (M, K, N, group sizes): empty groups, sum < M, one group, K = 1, a row
# that belongs to no group, and a skewed spread.
CASES = [
    (64, 32, 24, [10, 0, 30, 0, 14]),  # sum 54 < 64, empty groups
    (50, 17, 9, [0, 0, 50]),  # leading empty groups, full cover
    (33, 1, 7, [33]),  # K = 1, G = 1
    (40, 64, 48, [5, 5, 5, 5, 5, 5, 5, 4]),  # G = 8, one row past the sum
    (7, 5, 3, [0, 0, 0]),  # every group empty: all zeros
    (96, 40, 40, [1, 60, 0, 2, 17, 0, 9]),  # skewed, sum 89 < 96
]
OPS = ["gmm", "gmm_transposed", "tgmm"]


def round_to(x, dtype):
    if dtype == "bf16":
        return np.asarray(x.astype(ml_dtypes.bfloat16), dtype=np.float32)
    return x


def jax_reference(op, a, b, sizes):
    """JAX's answer in f32 with full-precision dots."""
    gs = jnp.asarray(sizes, dtype=jnp.int32)
    a, b = jnp.asarray(a), jnp.asarray(b)
    if op == "gmm":
        out = lax.ragged_dot(a, b, gs, precision=lax.Precision.HIGHEST)
    elif op == "gmm_transposed":
        out = lax.ragged_dot(a, jnp.swapaxes(b, 1, 2), gs, precision=lax.Precision.HIGHEST)
    else:
        dims = lax.RaggedDotDimensionNumbers(
            dot_dimension_numbers=(([0], [0]), ([], [])),
            lhs_ragged_dimensions=[0],
            rhs_group_dimensions=[],
        )
        out = lax.ragged_dot_general(a, b, gs, dims, precision=lax.Precision.HIGHEST)
    return np.asarray(out, dtype=np.float64)


def abs_products(op, a, b, sizes):
    """sum_i |a_i b_i| for every output element, in f64 (the error scale)."""
    a, b = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    if op == "tgmm":
        out = np.zeros((len(sizes), a.shape[1], b.shape[1]))
        for g in range(len(sizes)):
            rows = slice(starts[g], starts[g + 1])
            out[g] = a[rows].T @ b[rows]
        return out
    rhs = b if op == "gmm" else np.swapaxes(b, 1, 2)
    out = np.zeros((a.shape[0], rhs.shape[2]))
    for g in range(len(sizes)):
        rows = slice(starts[g], starts[g + 1])
        out[rows] = a[rows] @ rhs[g]
    return out


def make_problem(rng, op, m, k, n, g):
    if op == "gmm":
        return rng.standard_normal((m, k)), rng.standard_normal((g, k, n))
    if op == "gmm_transposed":
        return rng.standard_normal((m, k)), rng.standard_normal((g, n, k))
    return rng.standard_normal((m, k)), rng.standard_normal((m, n))


def run_op(run_cli, tmp_path, op, a, b, sizes, sizes_dtype, kernel, dtype, extra=()):
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "s.npy", np.asarray(sizes, dtype=sizes_dtype))
    out = tmp_path / "out.npy"
    if op == "tgmm":
        args = ["tgmm", "--lhs", tmp_path / "a.npy", "--dout", tmp_path / "b.npy"]
    else:
        args = ["gmm", "--lhs", tmp_path / "a.npy", "--rhs", tmp_path / "b.npy"]
        if op == "gmm_transposed":
            args.append("--transpose-rhs")
    args += ["--group-sizes", tmp_path / "s.npy", "--out", out, "--kernel", kernel,
             "--dtype", dtype, *extra]
    run_cli(*args)
    result = np.load(out)
    assert result.dtype == np.float32
    return result


def expect_exact_zeros(op, result, sizes):
    if op == "tgmm":
        for g, size in enumerate(sizes):
            if size == 0:
                assert not np.any(result[g]), f"empty group {g} has a non-zero slice"
    else:
        covered = int(np.sum(sizes))
        assert not np.any(result[covered:]), f"rows past sum = {covered} are not all zero"


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("kernel", ["v1", "v2"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_cli_matches_jax(run_cli, tmp_path, case, op, kernel, dtype):
    m, k, n, sizes = CASES[case]
    rng = np.random.default_rng(1000 * case + 10 * OPS.index(op) + (dtype == "bf16"))
    a, b = (x.astype(np.float32) for x in make_problem(rng, op, m, k, n, len(sizes)))
    sizes_dtype = np.int64 if case % 2 else np.int32
    extra = ["--threads", "2"] if case % 3 == 0 else []
    if case == 1:
        extra += ["--tiles", "16,8,8"]
    result = run_op(run_cli, tmp_path, op, a, b, sizes, sizes_dtype, kernel, dtype, extra)

    a_seen, b_seen = round_to(a, dtype), round_to(b, dtype)
    expected = jax_reference(op, a_seen, b_seen, sizes)
    assert result.shape == expected.shape
    length = m if op == "tgmm" else k  # the contracted dim
    scale = abs_products(op, a_seen, b_seen, sizes)
    bound = 2 * max(length, 1) * EPS["f32"] * scale + 1e-30
    worst = np.max(np.abs(result - expected) - bound, initial=-1.0)
    assert worst <= 0, f"exceeds f32 bound by {worst}"
    expect_exact_zeros(op, result, sizes)

    # Against the unrounded inputs: bf16 rounding of both factors costs up to
    # eps_bf16 relative per product (0 for f32).
    exact = jax_reference(op, a, b, sizes)
    storage = EPS["bf16"] if dtype == "bf16" else 0.0
    loose = (storage + 2 * max(length, 1) * EPS["f32"]) * abs_products(op, a, b, sizes) + 1e-30
    assert np.all(np.abs(result - exact) <= loose)


@pytest.mark.parametrize("op", OPS)
def test_jax_agrees_with_float64_numpy(op):
    """Guards the oracle itself: JAX's f32 answer vs a float64 NumPy loop."""
    m, k, n, sizes = CASES[0]
    rng = np.random.default_rng(7)
    a, b = (x.astype(np.float32) for x in make_problem(rng, op, m, k, n, len(sizes)))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    if op == "tgmm":
        want = np.stack([a64[s:e].T @ b64[s:e] for s, e in zip(starts[:-1], starts[1:])])
    else:
        rhs = b64 if op == "gmm" else np.swapaxes(b64, 1, 2)
        want = np.zeros((m, rhs.shape[2]))
        for g, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
            want[s:e] = a64[s:e] @ rhs[g]
    got = jax_reference(op, a, b, sizes)
    bound = max(k, m) * EPS["f32"] * abs_products(op, a, b, sizes) + 1e-30
    assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize("op", OPS)
def test_thread_count_does_not_change_bits(run_cli, tmp_path, op):
    m, k, n, sizes = 120, 33, 17, [40, 0, 3, 70, 1]
    rng = np.random.default_rng(3)
    a, b = (x.astype(np.float32) for x in make_problem(rng, op, m, k, n, len(sizes)))
    one = run_op(run_cli, tmp_path, op, a, b, sizes, np.int32, "v2", "f32", ["--threads", "1"])
    two = run_op(run_cli, tmp_path, op, a, b, sizes, np.int32, "v2", "f32", ["--threads", "2"])
    assert one.tobytes() == two.tobytes()


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--tiles", "0,8,8"], "--tiles"),
        (["--tiles", "1,2"], "--tiles"),
        (["--kernel", "v7"], "--kernel"),
        (["--dtype", "f16"], "--dtype"),
        (["--bogus"], "--bogus"),
    ],
)
def test_bad_flags_give_one_error_line_and_no_file(run_cli, tmp_path, flags, needle):
    np.save(tmp_path / "a.npy", np.ones((4, 3), np.float32))
    np.save(tmp_path / "b.npy", np.ones((2, 3, 5), np.float32))
    np.save(tmp_path / "s.npy", np.array([1, 3], np.int32))
    out = tmp_path / "out.npy"
    result = run_cli("gmm", "--lhs", tmp_path / "a.npy", "--rhs", tmp_path / "b.npy",
                     "--group-sizes", tmp_path / "s.npy", "--out", out, *flags, expect_ok=False)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], result.stderr
    assert not out.exists()
