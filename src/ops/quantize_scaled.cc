// quantize_scaled (ops/quantize_scaled.h): the scaled rows are formed one
// at a time in a row buffer that stays in L1, and quantized as quantize()
// quantizes the scaled copy, from the same span helpers.
#include "ops/quantize_scaled.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <omp.h>

#include "core/dtype_traits.h"
#include "ops/quant_spans.h"
#include "raggemm/error.h"

namespace raggemm::ops {
namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// Row r of the input as f32: the input itself where it is f32, else
// widened into `row` (C floats).
const float* input_row(const TensorView& input, int64_t r, float* row) {
  const int64_t offset = r * input.strides[0];
  if (input.dtype == DType::kF32) return input.as<const float>() + offset;
  gather_input(input, offset, 1, input.shape[1], row);
  return row;
}

// The factors of row r, or null (an empty RowFactors scales no row).
const float* factors_of(const RowFactors& factors, int64_t r, float* scratch) {
  return factors ? factors(r, scratch) : nullptr;
}

// Row r of the scaled matrix: in `row` (C floats), or the input row itself
// where it is f32 and not scaled.
const float* scaled_row(const TensorView& input, int64_t r, const RowFactors& factors, float* row,
                        float* scratch) {
  const float* x = input_row(input, r, row);
  const float* f = factors_of(factors, r, scratch);
  if (!f) return x;
  multiply_span(x, f, input.shape[1], row);
  return row;
}

// Index of the first non-finite element of a row, or kNone.
int64_t first_non_finite(const float* row, int64_t count) {
  for (int64_t j = 0; j < count; ++j) {
    if (!std::isfinite(row[j])) return j;
  }
  return kNone;
}

}  // namespace

QuantizedTensor quantize_scaled(const TensorView& input, QuantType type, int kept_axis,
                                const RowFactors& factors, int threads) {
  require(input.rank() == 2, "input", shape_string(input.shape), "quantize_scaled takes a matrix");
  require(input.dtype == DType::kF32 || input.dtype == DType::kBF16 || input.dtype == DType::kF16,
          "input", dtype_name(input.dtype), "quantize reads f32, bf16 or f16");
  require(kept_axis == 0 || kept_axis == 1, "kept_axis", kept_axis, "must be 0 or 1");
  require(threads >= 0, "threads", threads, "must be >= 0 (0: all of OpenMP's threads)");
  const int64_t rows = input.dim(0), columns = input.dim(1);
  const Granularity granularity = Granularity::channel({kept_axis});
  // No element to scale: quantize() gives the codes and scales of the empty matrix.
  if (rows == 0 || columns == 0) return quantize(input, type, granularity, std::nullopt, threads);
  require(input.strides[1] == 1, "input", shape_string(input.strides),
          "quantize_scaled needs rows with contiguous columns");
  require(input.data != nullptr, "input", "null", "input data is null");

  const core::DTypeTraits& codes = core::quant_traits(type);
  const float type_max = static_cast<float>(codes.finite_max);
  const core::EncodeSpanFn encode = encoder_of(codes);
  QuantizedTensor result;
  result.type = type;
  result.granularity = granularity;
  result.values = Tensor(codes.dtype, input.shape);
  result.scales = Tensor(DType::kF32, granularity.scale_shape(input.shape, "granularity"));
  float* scales = result.scales.as<float>();
  void* out = result.values.data();

  // As quantize(): threads split the rows (no bit depends on how), small
  // matrices stay on one thread.
  const int team = quantize_team(threads, rows, rows * columns);
  std::vector<int64_t> first_bad(static_cast<size_t>(team), kNone);
  // Per thread: column maxima (kept_axis 1) as magnitude bits.
  std::vector<std::vector<uint32_t>> largest(kept_axis == 1 ? team : 0);
  bool failed = false;

#pragma omp parallel num_threads(team)
  {
    const int t = omp_get_thread_num();
    const auto [begin, end] = share_of(rows, t, team);
    std::vector<float> row(static_cast<size_t>(columns)), scratch(static_cast<size_t>(columns));
    int64_t& bad = first_bad[static_cast<size_t>(t)];
    if (kept_axis == 0) {
      // A scale per row: its maximum, scale and codes while the row is in L1.
      for (int64_t r = begin; r < end; ++r) {
        const float* x = scaled_row(input, r, factors, row.data(), scratch.data());
        const float absmax = absmax_bits(x, columns, 0.0f);
        if (!finite_absmax(absmax)) {
          bad = r * columns + first_non_finite(x, columns);
          break;
        }
        scales[r] = dynamic_scale(absmax, type_max);
        encode(x, columns, scales[r], out, r * columns);
      }
    } else {
      // A scale per column: every thread's maxima over its rows, merged
      // (a max is exact in any order), then each row's codes of x / scale.
      std::vector<uint32_t>& mine = largest[static_cast<size_t>(t)];
      mine.assign(static_cast<size_t>(columns), 0u);
      for (int64_t r = begin; r < end; ++r) {
        const float* x = input_row(input, r, row.data());
        const float* f = factors_of(factors, r, scratch.data());
        column_absmax_bits(x, f, columns, mine.data());
      }
#pragma omp barrier
#pragma omp single
      {
        std::vector<uint32_t>& merged = largest[0];
        for (const std::vector<uint32_t>& partial : largest) {
          for (int64_t c = 0; c < columns; ++c) merged[c] = std::max(merged[c], partial[c]);
        }
        failed = !scales_from_maxima(merged.data(), columns, type_max, scales);
        // The error names the first non-finite element in row-major order.
        for (int64_t r = 0; failed && r < rows && first_bad[0] == kNone; ++r) {
          const float* x = scaled_row(input, r, factors, row.data(), scratch.data());
          const int64_t j = first_non_finite(x, columns);
          if (j != kNone) first_bad[0] = r * columns + j;
        }
      }  // (the single's barrier: every thread sees the scales and `failed`)
      for (int64_t r = begin; r < end && !failed; ++r) {
        const float* x = input_row(input, r, row.data());
        const float* f = factors_of(factors, r, scratch.data());
        divide_scaled_span(x, f, scales, columns, row.data());
        encode(row.data(), columns, 1.0f, out, r * columns);
      }
    }
  }
  const int64_t element = *std::min_element(first_bad.begin(), first_bad.end());
  if (element != kNone) fail_non_finite(element);
  return result;
}

}  // namespace raggemm::ops
