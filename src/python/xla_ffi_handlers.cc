// XLA FFI handlers (CPU platform) for the three passes of ragged_dot, used by
// raggemm.jax through jax.ffi.ffi_call. Each handler is a thin adapter: XLA
// buffers become TensorViews and the public op writes the f32 or bf16 result
// (the result buffer's type: a bf16 result is rounded once by the kernels),
// zeros past sum(group_sizes) and for empty groups included.
//
// Reentrancy: XLA may run several handlers at once on its own threads. The
// handlers keep no state; each call owns its options and the ops allocate
// their scratch per call. Alignment: XLA's buffers are only assumed to be
// 16-byte aligned, which the ops accept for every operand.
#include <sys/mman.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "python/bindings.h"
#include "python/call_resolution.h"
#include "python/python_trace.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"

#ifdef RAGGEMM_HAVE_XLA_FFI

#include <nanobind/stl/string.h>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace nb = nanobind;

namespace raggemm::python {
namespace {

// One pass's settings, as attributes of the custom call (from the plan),
// and the expert-parallel range: group_offset is an operand (it is traced
// under jit, e.g. from the expert axis index), local_groups an attribute
// (-1: every group; else rhs / the drhs output hold groups
// [group_offset, group_offset + local_groups)).
struct PassAttrs {
  int64_t tile_m, tile_k, tile_n;
  std::string_view kernel;
  int64_t buffers, threads;
  int64_t group_offset, local_groups;
  std::string_view weight;  // the plan's weight, for the trace ("" unknown)

  // Unset fields (0 tiles, kernel "auto", 0 buffers) are resolved on the
  // call's shape and group sizes: explicit > tune cache > heuristic.
  CallSettings settings() const {
    return CallSettings{Tiles{tile_m, tile_k, tile_n}, std::string(kernel),
                        static_cast<int>(buffers), static_cast<int>(threads),
                        /*quantization=*/std::nullopt};  // the custom calls are float only
  }
};

DType dtype_of(ffi::DataType type, const char* argument) {
  switch (type) {
    case ffi::DataType::F32: return DType::kF32;
    case ffi::DataType::BF16: return DType::kBF16;
    case ffi::DataType::F16: return DType::kF16;
    case ffi::DataType::F8E4M3FN: return DType::kF8E4M3;
    case ffi::DataType::F8E5M2: return DType::kF8E5M2;
    case ffi::DataType::S8: return DType::kI8;
    case ffi::DataType::S32: return DType::kI32;
    default: break;
  }
  fail(argument, std::to_string(static_cast<int>(type)), "unsupported XLA element type");
}

template <class Buffer>
TensorView view_of(const Buffer& buffer, DType dtype) {
  const auto dims = buffer.dimensions();
  return TensorView(dtype, Shape(dims.begin(), dims.end()), buffer.untyped_data());
}

TensorView view_of(const ffi::AnyBuffer& buffer, const char* argument) {
  return view_of(buffer, dtype_of(buffer.element_type(), argument));
}

// group_offset arrives as an S32[1] buffer (host memory on the CPU platform).
int64_t offset_of(const ffi::Buffer<ffi::S32>& group_offset) {
  require(group_offset.element_count() == 1, "group_offset", group_offset.element_count(),
          "expected one element");
  return group_offset.typed_data()[0];
}

// Runs one op and turns raggemm's errors into XLA errors (which JAX raises
// as exceptions carrying the same message); nothing may escape into XLA.
template <class Body>
ffi::Error guarded(Body&& body) {
  try {
    body();
    return ffi::Error::Success();
  } catch (const Error& error) {
    return ffi::Error::InvalidArgument(error.what());
  } catch (const std::exception& error) {
    return ffi::Error::Internal(error.what());
  }
}

// XLA's CPU results are not advised as huge pages, and a large one is
// faulted in anew on each call (a fresh mapping), 4 KiB at a time, as the
// kernel first writes it. The whole 2 MiB pages inside the result are advised
// as transparent huge pages (where THP is "madvise", as on the Xeon model 167)
// before the op writes them. A hint only: pages already faulted in stay as
// they are, and the values are the op's either way. Measured there (jit
// fwd+bwd, M=4096 K=N=1024 G=128 f32, 2 threads): 290-310 -> 207-265 ms.
void advise_huge_pages(const TensorView& out) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(out.data);
  const uintptr_t first = (begin + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t last = (begin + out.nbytes()) / kHugePage * kHugePage;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void run_gmm(Pass pass, const TensorView& a, const TensorView& rhs, const TensorView& sizes,
             const TensorView& out, const PassAttrs& attrs) {
  GmmOptions options;
  options.transpose_rhs = pass == Pass::kGradLhs;
  const ResolvedPassConfig config =
      resolve_call(pass, a, rhs, sizes, attrs.settings(), attrs.group_offset, attrs.local_groups);
  apply(config, static_cast<int>(attrs.threads), options);
  options.group_offset = attrs.group_offset;
  options.local_groups = attrs.local_groups;
  options.out_dtype = out.dtype;  // f32 or bf16: the kernels write it directly
  advise_huge_pages(out);
  traced_gmm(pass, std::string(attrs.weight), config, a, rhs, sizes, attrs.local_groups,
             [&] { gmm_into(a, rhs, sizes, out, options); });
}

// Forward: out[M,N] = lhs[M,K] @ rhs[g][K,N].
ffi::Error forward(ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::Buffer<ffi::S32> group_sizes,
                   ffi::Buffer<ffi::S32> group_offset, ffi::Result<ffi::AnyBuffer> out,
                   int64_t tile_m, int64_t tile_k, int64_t tile_n, std::string_view kernel,
                   int64_t buffers, int64_t threads, int64_t local_groups,
                   std::string_view weight) {
  return guarded([&] {
    const PassAttrs attrs{tile_m,  tile_k,  tile_n, kernel, buffers, threads,
                          offset_of(group_offset), local_groups, weight};
    run_gmm(Pass::kForward, view_of(lhs, "lhs"), view_of(rhs, "rhs"),
            view_of(group_sizes, DType::kI32), view_of(*out, "out"), attrs);
  });
}

// Grad wrt lhs: dlhs[M,K] = dout[M,N] @ rhs[g][K,N]^T.
ffi::Error grad_lhs(ffi::AnyBuffer dout, ffi::AnyBuffer rhs, ffi::Buffer<ffi::S32> group_sizes,
                    ffi::Buffer<ffi::S32> group_offset, ffi::Result<ffi::AnyBuffer> dlhs,
                    int64_t tile_m, int64_t tile_k, int64_t tile_n, std::string_view kernel,
                    int64_t buffers, int64_t threads, int64_t local_groups,
                   std::string_view weight) {
  return guarded([&] {
    const PassAttrs attrs{tile_m,  tile_k,  tile_n, kernel, buffers, threads,
                          offset_of(group_offset), local_groups, weight};
    run_gmm(Pass::kGradLhs, view_of(dout, "dout"), view_of(rhs, "rhs"),
            view_of(group_sizes, DType::kI32), view_of(*dlhs, "out"), attrs);
  });
}

// Grad wrt rhs: drhs[g] = lhs[rows g]^T @ dout[rows g].
ffi::Error grad_rhs(ffi::AnyBuffer lhs, ffi::AnyBuffer dout, ffi::Buffer<ffi::S32> group_sizes,
                    ffi::Buffer<ffi::S32> group_offset, ffi::Result<ffi::AnyBuffer> drhs,
                    int64_t tile_m, int64_t tile_k, int64_t tile_n, std::string_view kernel,
                    int64_t buffers, int64_t threads, int64_t local_groups,
                   std::string_view weight) {
  return guarded([&] {
    const PassAttrs attrs{tile_m,  tile_k,  tile_n, kernel, buffers, threads,
                          offset_of(group_offset), local_groups, weight};
    const TensorView lhs_view = view_of(lhs, "lhs");
    const TensorView dout_view = view_of(dout, "dout");
    const TensorView sizes_view = view_of(group_sizes, DType::kI32);
    TgmmOptions options;
    const ResolvedPassConfig config =
        resolve_call(Pass::kGradRhs, lhs_view, dout_view, sizes_view, attrs.settings(),
                     attrs.group_offset, attrs.local_groups);
    apply(config, static_cast<int>(attrs.threads), options);
    options.group_offset = attrs.group_offset;
    options.local_groups = attrs.local_groups;
    const TensorView out_view = view_of(*drhs, "out");
    advise_huge_pages(out_view);
    options.out_dtype = out_view.dtype;
    traced_gmm(Pass::kGradRhs, std::string(attrs.weight), config, lhs_view, dout_view,
               sizes_view, attrs.local_groups,
               [&] { tgmm_into(lhs_view, dout_view, sizes_view, out_view, options); });
  });
}

// The three handlers share one signature: two operands, the group sizes, the
// group offset, one f32 or bf16 result and the pass attributes.
auto binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .Ret<ffi::AnyBuffer>()
      .Attr<int64_t>("tile_m")
      .Attr<int64_t>("tile_k")
      .Attr<int64_t>("tile_n")
      .Attr<std::string_view>("kernel")
      .Attr<int64_t>("buffers")
      .Attr<int64_t>("threads")
      .Attr<int64_t>("local_groups")
      .Attr<std::string_view>("weight");
}

}  // namespace
}  // namespace raggemm::python

XLA_FFI_DEFINE_HANDLER_SYMBOL(RaggemmRaggedDotFwd, raggemm::python::forward,
                              raggemm::python::binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(RaggemmRaggedDotDlhs, raggemm::python::grad_lhs,
                              raggemm::python::binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(RaggemmRaggedDotDrhs, raggemm::python::grad_rhs,
                              raggemm::python::binding());

namespace raggemm::python {

void bind_xla_ffi(nb::module_& module) {
  module.def("xla_ffi_targets", [] {
    nb::dict targets;
    targets["raggemm_ragged_dot_fwd"] = nb::capsule(reinterpret_cast<void*>(&RaggemmRaggedDotFwd));
    targets["raggemm_ragged_dot_dlhs"] =
        nb::capsule(reinterpret_cast<void*>(&RaggemmRaggedDotDlhs));
    targets["raggemm_ragged_dot_drhs"] =
        nb::capsule(reinterpret_cast<void*>(&RaggemmRaggedDotDrhs));
    return targets;
  });
}

}  // namespace raggemm::python

#else  // !RAGGEMM_HAVE_XLA_FFI

namespace raggemm::python {

void bind_xla_ffi(nanobind::module_& module) {
  module.def("xla_ffi_targets", [] { return nanobind::dict(); });
}

}  // namespace raggemm::python

#endif  // RAGGEMM_HAVE_XLA_FFI
