#include "python/call_resolution.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace raggemm::python {
namespace {

// The sizes of the groups that run, clamped at 0: the op validates them
// (and names the argument) after resolution; here they only steer the
// heuristic, which must not see a negative size.
std::vector<int32_t> sizes_of(const TensorView& group_sizes, int64_t group_offset,
                              int64_t local_groups) {
  std::vector<int32_t> sizes;
  if (group_sizes.rank() != 1 || group_sizes.data == nullptr) return sizes;
  const int64_t count = group_sizes.dim(0);
  const int64_t begin = local_groups >= 0 ? std::clamp<int64_t>(group_offset, 0, count) : 0;
  const int64_t end =
      local_groups >= 0 ? std::clamp<int64_t>(group_offset + local_groups, begin, count) : count;
  sizes.reserve(static_cast<size_t>(end - begin));
  for (int64_t g = begin; g < end; ++g) {
    int64_t size = 0;
    if (group_sizes.dtype == DType::kI32) size = static_cast<const int32_t*>(group_sizes.data)[g];
    if (group_sizes.dtype == DType::kI64) size = static_cast<const int64_t*>(group_sizes.data)[g];
    sizes.push_back(static_cast<int32_t>(std::clamp<int64_t>(size, 0, INT32_MAX)));
  }
  return sizes;
}

// The op-terms shape of a call (GmmShape: m is always the token dimension),
// or nullopt when the operands' ranks are wrong (the op then reports it).
std::optional<GmmShape> shape_of(Pass pass, const TensorView& a, const TensorView& b,
                                 std::vector<int32_t> sizes) {
  GmmShape shape;
  shape.pass = pass;
  shape.lhs_dtype = a.dtype;
  shape.rhs_dtype = b.dtype;
  shape.groups = static_cast<int64_t>(sizes.size());
  switch (pass) {
    case Pass::kForward:  // lhs [M,K], rhs [G,K,N]
    case Pass::kGradLhs:  // dout [M,N], rhs [G,K,N] read transposed: k = N, n = K
      if (a.rank() != 2 || b.rank() != 3) return std::nullopt;
      shape.m = a.dim(0);
      shape.k = a.dim(1);
      shape.n = pass == Pass::kForward ? b.dim(2) : b.dim(1);
      break;
    case Pass::kGradRhs:  // lhs [M,K], dout [M,N]
      if (a.rank() != 2 || b.rank() != 2) return std::nullopt;
      shape.m = a.dim(0);
      shape.k = a.dim(1);
      shape.n = b.dim(1);
      break;
  }
  shape.group_sizes = std::move(sizes);
  return shape;
}

}  // namespace

ResolvedPassConfig resolve_call(Pass pass, const TensorView& a, const TensorView& b,
                                const TensorView& group_sizes, const CallSettings& settings,
                                int64_t group_offset, int64_t local_groups) {
  KernelOverrides overrides;
  overrides.tiles = settings.tiles;
  if (settings.kernel != "auto") overrides.kernel = parse_kernel(settings.kernel, "kernel");
  if (settings.buffers != 0) overrides.input_buffer_count = settings.buffers;
  std::optional<GmmShape> shape =
      shape_of(pass, a, b, sizes_of(group_sizes, group_offset, local_groups));
  if (!shape) {
    // Bad ranks: resolve nothing from the shape; the op reports the error.
    ResolvedPassConfig config;
    config.tiles = overrides.tiles;
    config.kernel = overrides.kernel.value_or(KernelVersion::kV1);
    config.input_buffer_count = overrides.input_buffer_count.value_or(1);
    return config;
  }
  shape->quantization = settings.quantization;
  return resolve_problem(*shape, overrides, &TuneCache::shared_default(), settings.threads);
}

void apply(const ResolvedPassConfig& config, int threads, GmmOptions& options) {
  options.tiles = config.tiles;
  options.kernel = config.kernel;
  options.input_buffer_count = config.input_buffer_count;
  options.threads = threads;
}

void apply(const ResolvedPassConfig& config, int threads, TgmmOptions& options) {
  options.tiles = config.tiles;
  options.kernel = config.kernel;
  options.input_buffer_count = config.input_buffer_count;
  options.threads = threads;
}

}  // namespace raggemm::python
