"""raggemm.jax.ragged_dot against jax.lax.ragged_dot: values and gradients
under jit, grad and vmap; plans per pass; errors; reentrancy."""

import concurrent.futures
import functools
import inspect
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import raggemm  # noqa: E402
import raggemm.jax as rjax  # noqa: E402

TOLERANCE = 1e-5  # relative Frobenius norm, float32


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def random_problem(seed):
    """Random M, K, N, G with empty groups and (usually) sum(group_sizes) < M."""
    rng = np.random.default_rng(seed)
    m, k, n, g = (int(rng.integers(1, 40)), int(rng.integers(1, 33)), int(rng.integers(1, 33)),
                  int(rng.integers(1, 7)))
    sizes = rng.multinomial(int(rng.integers(0, m + 1)), np.ones(g) / g)
    sizes[rng.random(g) < 0.3] = 0  # empty groups
    lhs = rng.standard_normal((m, k)).astype(np.float32)
    rhs = rng.standard_normal((g, k, n)).astype(np.float32)
    return lhs, rhs, sizes.astype(np.int32)


def loss(ragged_dot, group_sizes):
    # A non-linear scalar, so the cotangent reaching ragged_dot is not uniform.
    return lambda lhs, rhs: jnp.sum(jnp.sin(ragged_dot(lhs, rhs, group_sizes)) * 1.5)


SEEDS = list(range(8))


@pytest.mark.parametrize("seed", SEEDS)
def test_values_match_lax_under_jit(seed):
    lhs, rhs, sizes = random_problem(seed)
    got = jax.jit(rjax.ragged_dot)(lhs, rhs, sizes)
    want = jax.lax.ragged_dot(lhs, rhs, sizes)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert rel_err(got, want) <= TOLERANCE
    assert not np.asarray(got)[sizes.sum():].any()  # rows past sum(group_sizes)


@pytest.mark.parametrize("seed", SEEDS)
def test_gradients_match_lax_under_jit(seed):
    lhs, rhs, sizes = random_problem(seed)
    got = jax.jit(jax.grad(loss(rjax.ragged_dot, sizes), argnums=(0, 1)))(lhs, rhs)
    want = jax.jit(jax.grad(loss(jax.lax.ragged_dot, sizes), argnums=(0, 1)))(lhs, rhs)
    for name, g, w in zip(("dlhs", "drhs"), got, want):
        assert g.shape == w.shape, name
        if np.linalg.norm(w) == 0:
            assert not np.asarray(g).any(), name
        else:
            assert rel_err(g, w) <= TOLERANCE, name


def test_group_sizes_get_no_gradient():
    lhs, rhs, sizes = random_problem(1)
    out, vjp = jax.vjp(rjax.ragged_dot, lhs, rhs, sizes)
    dlhs, drhs, dsizes = vjp(jnp.ones_like(out))
    assert dsizes.dtype == jax.dtypes.float0 and dsizes.shape == sizes.shape
    assert dlhs.shape == lhs.shape and drhs.shape == rhs.shape


def test_vmap_over_lhs_and_group_sizes():
    _, rhs, _ = random_problem(2)
    rng = np.random.default_rng(3)
    batch, m = 3, 17
    lhs = rng.standard_normal((batch, m, rhs.shape[1])).astype(np.float32)
    sizes = np.array([[5, 0, 9][: rhs.shape[0]] + [0] * max(0, rhs.shape[0] - 3)] * batch, np.int32)
    sizes[1] = 0
    sizes[2, 0] = m
    sizes[2, 1:] = 0
    got = jax.jit(jax.vmap(rjax.ragged_dot, in_axes=(0, None, 0)))(lhs, rhs, sizes)
    want = np.stack([jax.lax.ragged_dot(a, rhs, s) for a, s in zip(lhs, sizes)])
    assert rel_err(got, want) <= TOLERANCE


def test_vmap_over_rhs():
    lhs, rhs, sizes = random_problem(9)
    batch = np.stack([rhs, -2 * rhs])
    got = jax.jit(jax.vmap(rjax.ragged_dot, in_axes=(None, 0, None)))(lhs, batch, sizes)
    want = np.stack([jax.lax.ragged_dot(lhs, b, sizes) for b in batch])
    assert rel_err(got, want) <= TOLERANCE


def test_vmap_of_grad():
    lhs, rhs, sizes = random_problem(4)
    batch = np.stack([lhs, 2 * lhs, -lhs])
    grad = lambda f: jax.grad(loss(f, sizes), argnums=(0, 1))  # noqa: E731
    got = jax.jit(jax.vmap(grad(rjax.ragged_dot), in_axes=(0, None)))(batch, rhs)
    want = [grad(jax.lax.ragged_dot)(a, rhs) for a in batch]
    assert rel_err(got[0], np.stack([w[0] for w in want])) <= TOLERANCE
    assert rel_err(got[1], np.stack([w[1] for w in want])) <= TOLERANCE


def test_bfloat16_inputs_follow_lax_dtypes():
    lhs, rhs, sizes = random_problem(5)
    lhs, rhs = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    got = jax.jit(rjax.ragged_dot)(lhs, rhs, sizes)
    want = jax.lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32)
    assert got.dtype == jnp.bfloat16
    assert rel_err(got, want) <= 1e-2  # one bf16 rounding of the f32 result
    exact = rjax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32)
    assert exact.dtype == jnp.float32 and rel_err(exact, want) <= TOLERANCE
    dlhs, drhs = jax.grad(loss(rjax.ragged_dot, sizes), argnums=(0, 1))(lhs, rhs)
    assert dlhs.dtype == jnp.bfloat16 and drhs.dtype == jnp.bfloat16


def test_each_pass_gets_its_own_config_from_the_plan():
    lhs, rhs, sizes = random_problem(6)
    plan = raggemm.Plan(fwd=raggemm.PassConfig(tiles=(8, 16, 24), kernel="v2", buffers=2),
                        dlhs=raggemm.PassConfig(tiles=(5, 7, 9), kernel="v1", buffers=3),
                        drhs=raggemm.PassConfig(tiles=(11, 13, 15), kernel="v2", buffers=4))
    f = loss(lambda a, b, s: rjax.ragged_dot(a, b, s, plan=plan), sizes)
    hlo = jax.jit(jax.grad(f, argnums=(0, 1))).lower(lhs, rhs).as_text()
    for target, (m, k, n), kernel, buffers in (
            ("raggemm_ragged_dot_fwd", (8, 16, 24), "v2", 2),
            ("raggemm_ragged_dot_dlhs", (5, 7, 9), "v1", 3),
            ("raggemm_ragged_dot_drhs", (11, 13, 15), "v2", 4)):
        call = next(line for line in hlo.splitlines() if f"@{target}(" in line)
        for attr in (f"tile_m = {m} ", f"tile_k = {k} ", f"tile_n = {n} ",
                     f'kernel = "{kernel}"', f"buffers = {buffers} "):
            assert attr in call, (target, attr)
    got = jax.jit(jax.grad(f, argnums=(0, 1)))(lhs, rhs)
    want = jax.grad(loss(jax.lax.ragged_dot, sizes), argnums=(0, 1))(lhs, rhs)
    assert rel_err(got[0], want[0]) <= TOLERANCE and rel_err(got[1], want[1]) <= TOLERANCE


def test_resolved_plan_runs():
    lhs, rhs, sizes = random_problem(7)
    plan = raggemm.plan(lhs.shape[0], lhs.shape[1], rhs.shape[2], rhs.shape[0], cache=False)
    got = jax.jit(functools.partial(rjax.ragged_dot, plan=plan))(lhs, rhs, sizes)
    assert rel_err(got, jax.lax.ragged_dot(lhs, rhs, sizes)) <= TOLERANCE


def test_handlers_are_reentrant():
    """XLA may run several custom calls at once; so may Python threads."""
    problems = [random_problem(seed) for seed in range(10, 16)]
    grad = jax.jit(lambda a, b, s: jax.grad(
        lambda x, y: jnp.sum(jnp.sin(rjax.ragged_dot(x, y, s))), argnums=(0, 1))(a, b))

    def two_at_once(a, b, s):  # independent calls in one program
        return rjax.ragged_dot(a, b, s), rjax.ragged_dot(2 * a, b, s)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda p: (grad(*p), jax.jit(two_at_once)(*p)), problems * 3))
    for (lhs, rhs, sizes), ((dlhs, drhs), (out, out2)) in zip(problems * 3, results):
        want = jax.lax.ragged_dot(lhs, rhs, sizes)
        assert rel_err(out, want) <= TOLERANCE and rel_err(out2, 2 * want) <= TOLERANCE
        wl, wr = jax.grad(lambda x, y: jnp.sum(jnp.sin(jax.lax.ragged_dot(x, y, sizes))),
                          argnums=(0, 1))(lhs, rhs)
        assert rel_err(dlhs, wl) <= TOLERANCE and rel_err(drhs, wr) <= TOLERANCE


@pytest.mark.parametrize("args,argument", [
    ((np.zeros((4, 3, 2), np.float32), np.zeros((2, 3, 5), np.float32), np.zeros(2, np.int32)), "lhs"),
    ((np.zeros((4, 3), np.float32), np.zeros((3, 5), np.float32), np.zeros(2, np.int32)), "rhs"),
    ((np.zeros((4, 3), np.float32), np.zeros((2, 4, 5), np.float32), np.zeros(2, np.int32)), "rhs"),
    ((np.zeros((4, 3), np.float32), np.zeros((2, 3, 5), np.float32), np.zeros(3, np.int32)), "group_sizes"),
    ((np.zeros((4, 3), np.float32), np.zeros((2, 3, 5), np.float32), np.zeros(2, np.float32)), "group_sizes"),
    ((np.zeros((4, 3), np.int32), np.zeros((2, 3, 5), np.float32), np.zeros(2, np.int32)), "lhs"),
    ((np.zeros((4, 3), np.float32), np.zeros((2, 3, 5), np.int8), np.zeros(2, np.int32)), "rhs"),
])
def test_bad_shapes_raise_value_error_at_trace_time(args, argument):
    with pytest.raises(ValueError, match=argument):
        jax.jit(rjax.ragged_dot)(*args)


def test_bad_plan_is_refused():
    with pytest.raises(ValueError, match="plan"):
        rjax.ragged_dot(np.zeros((4, 3), np.float32), np.zeros((2, 3, 5), np.float32),
                        np.zeros(2, np.int32), plan={"fwd": (8, 8, 8)})


def test_group_sizes_beyond_m_fail_at_run_time_naming_them():
    lhs, rhs = np.ones((4, 3), np.float32), np.ones((2, 3, 5), np.float32)
    with pytest.raises(Exception, match="group_sizes"):
        jax.block_until_ready(jax.jit(rjax.ragged_dot)(lhs, rhs, np.array([3, 2], np.int32)))


def test_numpy_api_works_without_jax():
    code = (
        "import sys; sys.modules['jax'] = None\n"
        "import numpy as np, raggemm\n"
        "out = raggemm.gmm(np.ones((3, 2), np.float32), np.ones((1, 2, 4), np.float32),"
        " np.array([2], np.int32))\n"
        "assert out.sum() == 16, out\n"
        "try:\n"
        "    import raggemm.jax\n"
        "except ImportError:\n"
        "    print('numpy-only ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "numpy-only ok" in result.stdout


def dense_ragged_dot(lhs, rhs, group_sizes):
    """The same function as a dense einsum over a one-hot row -> group map (rows
    past the groups map to none): an oracle every JAX transformation handles,
    where lax.ragged_dot's own vmap rule stops jacfwd and hessian."""
    ends = np.cumsum(group_sizes)
    group_of_row = np.searchsorted(ends, np.arange(lhs.shape[0]), side="right")
    one_hot = (group_of_row[:, None] == np.arange(len(group_sizes))[None, :]).astype(np.float32)
    return jnp.einsum("mk,mg,gkn->mn", lhs, one_hot, rhs,
                      precision=jax.lax.Precision.HIGHEST)


def test_signature_is_lax_ragged_dot_s():
    ours = list(inspect.signature(rjax.ragged_dot).parameters.values())
    theirs = [p for p in inspect.signature(jax.lax.ragged_dot).parameters.values()
              if p.name != "out_sharding"]
    assert [(p.name, p.default) for p in ours[:len(theirs)]] == \
        [(p.name, p.default) for p in theirs]
    lhs, rhs, sizes = random_problem(3)
    got = rjax.ragged_dot(lhs, rhs, sizes, jax.lax.Precision.HIGHEST, jnp.float32)
    assert rel_err(got, jax.lax.ragged_dot(lhs, rhs, sizes)) <= TOLERANCE


def test_preferred_element_type_bfloat16():
    lhs, rhs, sizes = random_problem(2)
    got = rjax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.bfloat16)
    assert got.dtype == jnp.bfloat16
    assert rel_err(got, jax.lax.ragged_dot(lhs, rhs, sizes)) <= 1e-2
    # Written by the kernels: the f32 result rounded once, bit for bit.
    f32 = rjax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                  np.asarray(f32.astype(jnp.bfloat16)).view(np.uint16))
    jitted = jax.jit(functools.partial(rjax.ragged_dot, preferred_element_type=jnp.bfloat16))
    np.testing.assert_array_equal(np.asarray(jitted(lhs, rhs, sizes)).view(np.uint16),
                                  np.asarray(got).view(np.uint16))


def test_bf16_cotangents_are_written_bf16_by_the_kernels():
    lhs, rhs, sizes = random_problem(6)
    lhs, rhs = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    jaxpr = str(jax.make_jaxpr(jax.grad(loss(rjax.ragged_dot, sizes), argnums=(0, 1)))(lhs, rhs))
    # Every pass of the backward writes bf16 (no f32 result then cast).
    assert "mode=dlhs" in jaxpr and "mode=drhs" in jaxpr
    assert "out_dtype=float32" not in jaxpr


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_forward_mode_jvp_and_jacfwd_match_lax(seed):
    lhs, rhs, sizes = random_problem(seed)
    rng = np.random.default_rng(seed + 100)
    dl, dr = rng.standard_normal(lhs.shape).astype(np.float32), \
        rng.standard_normal(rhs.shape).astype(np.float32)
    ours = jax.jit(lambda a, b, da, db: jax.jvp(lambda x, y: rjax.ragged_dot(x, y, sizes),
                                                 (a, b), (da, db)))(lhs, rhs, dl, dr)
    theirs = jax.jvp(lambda x, y: jax.lax.ragged_dot(x, y, sizes), (lhs, rhs), (dl, dr))
    assert rel_err(ours[0], theirs[0]) <= TOLERANCE
    assert rel_err(ours[1], theirs[1]) <= TOLERANCE
    jac = jax.jacfwd(lambda x, y: rjax.ragged_dot(x, y, sizes), argnums=(0, 1))(lhs, rhs)
    want = jax.jacfwd(lambda x, y: dense_ragged_dot(x, y, sizes), argnums=(0, 1))(lhs, rhs)
    assert rel_err(jac[0], want[0]) <= TOLERANCE and rel_err(jac[1], want[1]) <= TOLERANCE


def test_second_order_gradients_match_lax():
    lhs, rhs, sizes = random_problem(5)
    rng = np.random.default_rng(7)
    v = rng.standard_normal(lhs.shape).astype(np.float32)

    w = rng.standard_normal(rhs.shape).astype(np.float32)

    def hvp(ragged_dot):
        f = loss(ragged_dot, sizes)
        # Reverse over reverse: <grad, (v, w)> differentiated again w.r.t. lhs
        # and rhs transposes every mode of the primitive (fwd, dlhs, drhs).
        grads = lambda a, b: jax.grad(f, argnums=(0, 1))(a, b)  # noqa: E731
        inner = lambda a, b: jnp.vdot(grads(a, b)[0], v) + jnp.vdot(grads(a, b)[1], w)  # noqa
        return jax.grad(inner, argnums=(0, 1))(lhs, rhs)

    got, want = jax.jit(lambda: hvp(rjax.ragged_dot))(), hvp(dense_ragged_dot)
    for g, w in zip(got, want):
        assert rel_err(g, w) <= 1e-4
    f = lambda ragged_dot: lambda b: jnp.sum(jnp.sin(ragged_dot(lhs, b, sizes)))  # noqa: E731
    hess = jax.hessian(f(rjax.ragged_dot))(rhs)
    assert rel_err(hess, jax.hessian(f(dense_ragged_dot))(rhs)) <= 1e-4


def test_group_offset_runs_the_local_experts():
    rng = np.random.default_rng(11)
    m, k, n = 30, 8, 6
    sizes = np.array([4, 0, 7, 5, 6, 3], np.int32)
    lhs = rng.standard_normal((m, k)).astype(np.float32)
    local = rng.standard_normal((3, k, n)).astype(np.float32)  # experts 2, 3, 4
    full = np.zeros((6, k, n), np.float32)
    full[2:5] = local
    offset = jnp.array([2], jnp.int32)
    got = jax.jit(rjax.ragged_dot)(lhs, local, sizes, None, None, offset)
    assert rel_err(got, jax.lax.ragged_dot(lhs, full, sizes)) <= TOLERANCE
    f = loss(lambda a, b, s: rjax.ragged_dot(a, b, s, group_offset=offset), sizes)
    dl, dr = jax.grad(f, argnums=(0, 1))(lhs, local)
    wl, wr = jax.grad(loss(jax.lax.ragged_dot, sizes), argnums=(0, 1))(lhs, full)
    assert rel_err(dl, wl) <= TOLERANCE and rel_err(dr, np.asarray(wr)[2:5]) <= TOLERANCE


def _numbers(contract, lhs_ragged, rhs_group):
    return jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=(contract, ([], [])), lhs_ragged_dimensions=lhs_ragged,
        rhs_group_dimensions=rhs_group)


def test_ragged_dot_general_runs_the_three_passes_layouts():
    lhs, rhs, sizes = random_problem(12)
    rng = np.random.default_rng(12)
    dout = rng.standard_normal((lhs.shape[0], rhs.shape[2])).astype(np.float32)
    for numbers, a, b in ((_numbers(([1], [1]), [0], [0]), lhs, rhs),
                          (_numbers(([1], [2]), [0], [0]), dout, rhs),
                          (_numbers(([0], [0]), [0], []), lhs, dout)):
        got = jax.jit(lambda x, y, numbers=numbers: rjax.ragged_dot_general(x, y, sizes, numbers))(a, b)
        want = jax.lax.ragged_dot_general(a, b, sizes, numbers)
        assert got.shape == want.shape
        assert rel_err(got, want) <= TOLERANCE or not np.asarray(want).any()


def test_ragged_dot_general_refuses_other_layouts_naming_them():
    lhs, rhs, sizes = random_problem(1)
    numbers = _numbers(([1], [1]), [1], [0])
    with pytest.raises(NotImplementedError, match=r"lhs ragged dims \(1,\)"):
        rjax.ragged_dot_general(lhs, rhs, sizes, numbers)


@pytest.mark.parametrize("recipe", ["fp8", "int8"])
def test_quantized_ragged_dot_matches_the_numpy_recipe_with_straight_through_grads(recipe):
    lhs, rhs, sizes = random_problem(13)
    got = jax.jit(lambda a, b: rjax.quantized_ragged_dot(a, b, sizes, recipe=recipe))(lhs, rhs)
    assert rel_err(got, raggemm.gmm(lhs, rhs, sizes, quant=recipe)) <= TOLERANCE
    assert rel_err(got, jax.lax.ragged_dot(lhs, rhs, sizes)) <= 0.1  # quantization error
    dl, dr = jax.grad(lambda a, b: jnp.sum(rjax.quantized_ragged_dot(a, b, sizes, recipe=recipe)
                                           * 0.5), argnums=(0, 1))(lhs, rhs)
    wl, wr = jax.grad(lambda a, b: jnp.sum(jax.lax.ragged_dot(a, b, sizes) * 0.5),
                      argnums=(0, 1))(lhs, rhs)
    assert rel_err(dl, wl) <= 0.1 and (rel_err(dr, wr) <= 0.1 or not np.asarray(wr).any())
