"""raggemm.torch: values and gradients against a loop of torch.mm (and
torch._grouped_mm where this torch runs it on CPU), an f64 gradcheck, bf16,
empty groups, non-contiguous inputs, threads, and torch.compile(fullgraph)."""

import pytest

torch = pytest.importorskip("torch")

import raggemm  # noqa: E402
import raggemm.torch as rtorch  # noqa: E402

F32_TOLERANCE = 1e-5  # relative Frobenius norm
BF16_TOLERANCE = 1e-2  # bf16 inputs and output, f32 accumulation


def rel_err(got, want):
    got, want = got.double(), want.double()
    return float(torch.linalg.norm(got - want) / max(float(torch.linalg.norm(want)), 1e-30))


def loop_mm(lhs, rhs, sizes):
    """The oracle: one torch.mm per group, in float64; zeros past the groups."""
    out = torch.zeros(lhs.shape[0], rhs.shape[2], dtype=torch.float64)
    start = 0
    for g, size in enumerate(sizes.tolist()):
        out[start:start + size] = lhs[start:start + size].double() @ rhs[g].double()
        start += size
    return out


def problem(m, k, n, sizes, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lhs = torch.randn(m, k, generator=gen).to(dtype)
    rhs = torch.randn(len(sizes), k, n, generator=gen).to(dtype)
    return lhs, rhs, torch.tensor(sizes, dtype=torch.int32)


# Empty groups first, last and in the middle; sum < M; tiles that divide nothing.
CASES = [
    (37, 19, 23, [5, 0, 12, 0, 9]),
    (8, 4, 3, [0, 0, 8]),
    (16, 33, 7, [0, 3, 0, 0]),
    (1, 1, 1, [1]),
]


@pytest.mark.parametrize("m,k,n,sizes", CASES)
def test_ragged_dot_values_and_gradients_match_a_loop_of_mm(m, k, n, sizes):
    lhs, rhs, group_sizes = problem(m, k, n, sizes)
    lhs.requires_grad_(True)
    rhs.requires_grad_(True)
    out = rtorch.ragged_dot(lhs, rhs, group_sizes)
    assert out.dtype == torch.float32 and out.shape == (m, n)
    assert rel_err(out.detach(), loop_mm(lhs.detach(), rhs.detach(), group_sizes)) < F32_TOLERANCE
    assert torch.all(out[sum(sizes):] == 0)
    weight = torch.randn(m, n, generator=torch.Generator().manual_seed(1))
    (out * weight).sum().backward()

    lhs64 = lhs.detach().double().requires_grad_(True)
    rhs64 = rhs.detach().double().requires_grad_(True)
    (loop_mm(lhs64, rhs64, group_sizes) * weight.double()).sum().backward()
    assert rel_err(lhs.grad, lhs64.grad) < F32_TOLERANCE
    assert rel_err(rhs.grad, rhs64.grad) < F32_TOLERANCE or not rhs64.grad.any()
    # An empty group's weight gets a zero gradient, not garbage.
    for g, size in enumerate(sizes):
        if size == 0:
            assert torch.all(rhs.grad[g] == 0)


def test_grouped_mm_takes_cumulative_offsets_and_zeroes_rows_past_the_last():
    lhs, rhs, sizes = problem(20, 8, 6, [3, 0, 9])
    offs = torch.cumsum(sizes, 0, dtype=torch.int32)
    out = rtorch.grouped_mm(lhs, rhs, offs)
    assert rel_err(out, loop_mm(lhs, rhs, sizes)) < F32_TOLERANCE
    assert torch.all(out[12:] == 0)


def test_grouped_mm_matches_torch_grouped_mm_where_it_runs_on_cpu():
    lhs, rhs, sizes = problem(64, 32, 48, [16, 0, 32, 16], dtype=torch.bfloat16)
    offs = torch.cumsum(sizes, 0, dtype=torch.int32)
    try:
        want = torch._grouped_mm(lhs, rhs, offs)
    except (AttributeError, RuntimeError, NotImplementedError) as error:
        pytest.skip(f"torch._grouped_mm does not run on CPU here: {error}")
    got = rtorch.grouped_mm(lhs, rhs, offs)
    assert got.dtype == want.dtype == torch.bfloat16
    assert rel_err(got, want) < BF16_TOLERANCE


def test_bf16_inputs_give_bf16_results_and_gradients():
    lhs, rhs, sizes = problem(40, 24, 16, [10, 0, 25], dtype=torch.bfloat16)
    lhs.requires_grad_(True)
    rhs.requires_grad_(True)
    out = rtorch.ragged_dot(lhs, rhs, sizes)
    assert out.dtype == torch.bfloat16
    assert rel_err(out.detach(), loop_mm(lhs.detach(), rhs.detach(), sizes)) < BF16_TOLERANCE
    out.float().square().sum().backward()
    assert lhs.grad.dtype == torch.bfloat16 and rhs.grad.dtype == torch.bfloat16
    f32 = rtorch.ragged_dot(lhs.detach(), rhs.detach(), sizes, out_dtype=torch.float32)
    assert f32.dtype == torch.float32


def test_bf16_backward_runs_bf16_passes_on_the_bf16_gradient():
    # As torch._grouped_mm: with bf16 operands the incoming gradient is
    # rounded to bf16, so dlhs and tgmm run bf16 x bf16 (the dot-product
    # kernels). The gradients equal the numpy API's passes on that bf16
    # gradient, bit for bit.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    lhs, rhs, sizes = problem(40, 24, 16, [10, 0, 25], dtype=torch.bfloat16)
    lhs.requires_grad_(True)
    rhs.requires_grad_(True)
    weight = torch.randn(40, 16, generator=torch.Generator().manual_seed(3))
    (rtorch.ragged_dot(lhs, rhs, sizes, out_dtype=torch.float32, threads=1) * weight).sum().backward()

    def bf16_numpy(t):
        return t.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)

    grad = bf16_numpy(weight.to(torch.bfloat16))
    want_lhs = raggemm.gmm(grad, bf16_numpy(rhs), sizes.numpy(), transpose_rhs=True, threads=1)
    want_rhs = raggemm.tgmm(bf16_numpy(lhs), grad, sizes.numpy(), threads=1)
    assert torch.equal(lhs.grad, torch.from_numpy(want_lhs).to(torch.bfloat16))
    assert torch.equal(rhs.grad, torch.from_numpy(want_rhs).to(torch.bfloat16))


def test_bf16_gradients_match_torch_grouped_mm_where_it_runs_on_cpu():
    lhs, rhs, sizes = problem(64, 32, 48, [16, 0, 32, 16], dtype=torch.bfloat16)
    offs = torch.cumsum(sizes, 0, dtype=torch.int32)
    weight = torch.randn(64, 48, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    grads = []
    for fn in (torch._grouped_mm, rtorch.grouped_mm):
        a, b = lhs.clone().requires_grad_(True), rhs.clone().requires_grad_(True)
        try:
            (fn(a, b, offs) * weight).sum().backward()
        except (AttributeError, RuntimeError, NotImplementedError) as error:
            pytest.skip(f"torch._grouped_mm does not run on CPU here: {error}")
        grads.append((a.grad, b.grad))
    (want_lhs, want_rhs), (got_lhs, got_rhs) = grads
    assert got_lhs.dtype == want_lhs.dtype == torch.bfloat16
    assert rel_err(got_lhs, want_lhs) < BF16_TOLERANCE
    assert rel_err(got_rhs, want_rhs) < BF16_TOLERANCE


@pytest.mark.filterwarnings("ignore:Input #:UserWarning")
def test_gradcheck_against_f64_finite_differences():
    # The kernels compute in f32, so the finite differences use a loose
    # tolerance: a wrong pass (e.g. a transposed gradient) is off by O(1).
    lhs, rhs, sizes = problem(9, 5, 4, [2, 0, 6])
    lhs.requires_grad_(True)
    rhs.requires_grad_(True)

    def f(a, b):
        return rtorch.ragged_dot(a, b, sizes, out_dtype=torch.float32, threads=1)

    assert torch.autograd.gradcheck(f, (lhs, rhs), eps=1e-2, atol=5e-3, rtol=1e-2,
                                    check_backward_ad=True)
    # Second order: the gradient passes are themselves differentiable.
    assert torch.autograd.gradgradcheck(f, (lhs, rhs), eps=1e-2, atol=5e-2, rtol=5e-2)


def test_non_contiguous_inputs_are_copied_not_refused():
    lhs, rhs, sizes = problem(12, 6, 10, [4, 8])
    lhs_t = lhs.t().contiguous().t()  # same values, column-major
    rhs_t = rhs.transpose(1, 2).contiguous().transpose(1, 2)
    assert not lhs_t.is_contiguous() and not rhs_t.is_contiguous()
    assert rel_err(rtorch.ragged_dot(lhs_t, rhs_t, sizes), loop_mm(lhs, rhs, sizes)) < F32_TOLERANCE


def test_bad_input_raises_an_error_naming_the_argument():
    lhs, rhs, sizes = problem(8, 4, 3, [4, 4])
    with pytest.raises(raggemm.Error, match="lhs"):
        rtorch.ragged_dot(lhs.double(), rhs, sizes)
    with pytest.raises(raggemm.Error, match="group_sizes"):
        rtorch.ragged_dot(lhs, rhs, torch.tensor([4, 5], dtype=torch.int32))
    with pytest.raises(raggemm.Error, match="threads"):
        rtorch.ragged_dot(lhs, rhs, sizes, threads=0)


def test_explicit_plan_and_threads_give_the_same_values():
    lhs, rhs, sizes = problem(50, 16, 24, [20, 0, 30])
    default = rtorch.ragged_dot(lhs, rhs, sizes)
    config = raggemm.PassConfig(tiles=(8, 16, 8), kernel="v1", buffers=2)
    plan = raggemm.Plan(fwd=config, dlhs=config, drhs=config)
    explicit = rtorch.ragged_dot(lhs, rhs, sizes, plan=plan, threads=1)
    # Results do not depend on the thread count or tiles beyond f32 rounding.
    assert rel_err(explicit, default) < F32_TOLERANCE


class MoE(torch.nn.Module):
    """A tiny MoE layer: router, sort by expert, SwiGLU experts, unsort."""

    def __init__(self, embed, mlp, experts):
        super().__init__()
        self.router = torch.nn.Linear(embed, experts, bias=False)
        self.wi = torch.nn.Parameter(torch.randn(experts, embed, 2 * mlp) * embed ** -0.5)
        self.wo = torch.nn.Parameter(torch.randn(experts, mlp, embed) * mlp ** -0.5)

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        weight, expert = probs.max(dim=-1)
        order = torch.argsort(expert)
        sizes = torch.bincount(expert, minlength=self.wi.shape[0]).to(torch.int32)
        h = rtorch.ragged_dot(x[order], self.wi, sizes)
        gate, up = h.chunk(2, dim=-1)
        y = rtorch.ragged_dot(torch.nn.functional.silu(gate) * up, self.wo, sizes)
        out = torch.empty_like(y).index_copy(0, order, y)
        return out * weight[:, None]


def test_torch_compile_fullgraph_traces_an_moe_layer():
    torch.manual_seed(0)
    layer = MoE(16, 8, 4)
    x = torch.randn(32, 16)
    want = layer(x)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager", dynamic=False)
    got = compiled(x)
    assert rel_err(got.detach(), want.detach()) < F32_TOLERANCE
    got.sum().backward()
    assert layer.wi.grad is not None and layer.wo.grad is not None


def test_the_ops_pass_torch_library_opcheck():
    lhs, rhs, sizes = problem(10, 6, 5, [3, 0, 7])
    config = [0] * 15
    for out_dtype in ("f32", "bf16"):
        torch.library.opcheck(torch.ops.raggemm.gmm.default,
                              (lhs, rhs, sizes, config, 0, "wi", out_dtype))
        torch.library.opcheck(torch.ops.raggemm.tgmm.default,
                              (lhs, torch.randn(10, 5), sizes, config, 0, "wi", out_dtype))


def test_example_trains_an_moe_layer_as_the_torch_mm_loop_does():
    import os
    import re
    import subprocess
    import sys

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_moe.py")
    result = subprocess.run([sys.executable, example, "--steps", "2", "--tokens", "64", "--embed",
                             "32", "--mlp", "48", "--experts", "4"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    losses = {}
    for name, loss in re.findall(r"(raggemm|torch.mm loop) step \d+: loss ([0-9.e+-]+)",
                                 result.stdout):
        losses.setdefault(name, []).append(float(loss))
    assert len(losses["raggemm"]) == len(losses["torch.mm loop"]) == 2, result.stdout
    for ours, theirs in zip(losses["raggemm"], losses["torch.mm loop"]):
        assert ours == pytest.approx(theirs, rel=1e-4)
    assert losses["raggemm"][1] < losses["raggemm"][0], "one SGD step lowers the loss"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bf16_out_dtype_is_written_by_the_kernels_as_the_f32_result_rounded(dtype):
    # The bf16 output is the kernels' f32 accumulator rounded once (to
    # nearest even, as Tensor.to does): bit for bit the f32 result cast.
    lhs, rhs, sizes = problem(37, 19, 23, [5, 0, 12, 0, 9], dtype=dtype)
    offs = torch.cumsum(sizes, 0, dtype=torch.int32)
    f32 = rtorch.grouped_mm(lhs, rhs, offs, out_dtype=torch.float32)
    got = rtorch.grouped_mm(lhs, rhs, offs, out_dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, f32.to(torch.bfloat16))
    assert torch.equal(got[26:], torch.zeros_like(got[26:]))  # rows past the groups


def test_bf16_weight_gradients_come_from_the_kernels_in_bf16():
    # The backward of bf16 operands asks the kernels for bf16 gradients: the
    # same bits as the f32 passes rounded, with no f32 gradient made.
    lhs, rhs, sizes = problem(40, 24, 16, [10, 0, 25], dtype=torch.bfloat16)
    grad = torch.randn(40, 16, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    config = [0] * 15
    drhs = torch.ops.raggemm.tgmm(lhs, grad, sizes, config, 1, "", "bf16")
    dlhs = torch.ops.raggemm.gmm_dlhs(grad, rhs, sizes, config, 1, "", "bf16")
    assert drhs.dtype == dlhs.dtype == torch.bfloat16
    assert torch.equal(drhs, torch.ops.raggemm.tgmm(lhs, grad, sizes, config, 1, "", "f32")
                       .to(torch.bfloat16))
    assert torch.equal(dlhs, torch.ops.raggemm.gmm_dlhs(grad, rhs, sizes, config, 1, "", "f32")
                       .to(torch.bfloat16))
    from torch.utils._python_dispatch import TorchDispatchMode

    class OutputDtypes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.calls.append((str(func), getattr(out, "dtype", None)))
            return out

    a, b = lhs.clone().requires_grad_(True), rhs.clone().requires_grad_(True)
    with OutputDtypes() as log:
        (rtorch.ragged_dot(a, b, sizes, threads=1).float() * grad.float()).sum().backward()
    assert torch.equal(b.grad, drhs) and torch.equal(a.grad, dlhs)
    ours = [(name, dtype) for name, dtype in log.calls if name.startswith("raggemm.")]
    # The forward and both backward passes ran, each writing bf16 itself.
    assert sorted(name for name, _ in ours) == ["raggemm.gmm.default", "raggemm.gmm_dlhs.default",
                                                "raggemm.tgmm.default"]
    assert all(dtype == torch.bfloat16 for _, dtype in ours), ours


def test_large_outputs_start_on_a_cache_line():
    """The op's outputs (numpy memory shared with the tensor) are 64-byte
    aligned from 64 KiB on, so the kernels' streaming stores apply."""
    lhs, rhs, sizes = problem(64, 32, 300, [40, 20])
    out = rtorch.ragged_dot(lhs, rhs, sizes)
    assert out.data_ptr() % 64 == 0 and out.is_contiguous()
    torch.testing.assert_close(out, loop_mm(lhs, rhs, sizes).float(), rtol=1e-5, atol=1e-4)
    lhs.requires_grad_(True)
    rhs.requires_grad_(True)
    rtorch.ragged_dot(lhs, rhs, sizes).sum().backward()
    assert rhs.grad.data_ptr() % 64 == 0


def test_an_output_tensor_keeps_its_buffer_until_it_is_freed():
    """Outputs come from raggemm's pool of buffers nothing refers to: a live
    tensor's memory is never handed out again, a freed one's is."""
    lhs, rhs, sizes = problem(300, 64, 8192, [200, 0, 100])  # 9.4 MiB outputs
    want = loop_mm(lhs, rhs, sizes).float()
    first = rtorch.ragged_dot(lhs, rhs, sizes)
    address = first.data_ptr()
    second = rtorch.ragged_dot(lhs, rhs, sizes)
    assert second.data_ptr() != address
    torch.testing.assert_close(first, want, rtol=1e-4, atol=1e-3)
    del first
    third = rtorch.ragged_dot(lhs, rhs, sizes)
    torch.testing.assert_close(third, want, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(second, want, rtol=1e-4, atol=1e-3)
