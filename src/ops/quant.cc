// quantize / dequantize: codes and scales for any rank and granularity
// (include/raggemm/quant.h). Both walk the tensor in spans: runs along the
// last axis that share one scale cell, so the inner loops carry no index
// arithmetic.
#include "raggemm/quant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <omp.h>

#include "core/dtype_traits.h"
#include "ops/quant_spans.h"
#include "raggemm/error.h"

namespace raggemm {
namespace {

using ops::absmax_bits;
using ops::encoder_of;
using ops::gather_input;
using ops::share_of;

// Where each element's scale lives: element index (i_0..i_{r-1}) maps to
// scale offset sum_a (i_a / divisor[a]) * scale_stride[a].
struct CellLayout {
  Shape dims;
  Shape input_strides;
  Shape divisor;       // 1 kept, block size on the block axis, max(dim, 1) reduced
  Shape scale_stride;  // row-major strides of the scale tensor; 0 on reduced axes
};

CellLayout make_layout(const TensorView& input, const Granularity& granularity,
                       const Shape& scale_shape) {
  CellLayout layout;
  layout.dims = input.shape;
  layout.input_strides = input.strides;
  const Shape strides = row_major_strides(scale_shape);
  for (int axis = 0; axis < input.rank(); ++axis) {
    if (granularity.keeps(axis)) {
      layout.divisor.push_back(1);
      layout.scale_stride.push_back(strides[axis]);
    } else if (axis == granularity.block_axis) {
      layout.divisor.push_back(granularity.block_size);
      layout.scale_stride.push_back(strides[axis]);
    } else {
      layout.divisor.push_back(std::max<int64_t>(input.dim(axis), 1));
      layout.scale_stride.push_back(0);
    }
  }
  return layout;
}

// Outer rows of a layout: the elements of all axes but the last, walked in
// row-major order (1 for rank 0 and 1; 0 when any dim is 0).
int64_t outer_rows(const CellLayout& layout) {
  int64_t rows = 1;
  for (size_t axis = 0; axis < layout.dims.size(); ++axis) {
    if (layout.dims[axis] == 0) return 0;
    if (axis + 1 < layout.dims.size()) rows *= layout.dims[axis];
  }
  return rows;
}

// Calls fn(input_offset, scale_offset, flat_offset) for the first element of
// every outer row in [row_begin, row_end), in row-major order (flat_offset:
// the element's row-major index). Rank 0 is one row of one element.
template <class Fn>
void for_each_row(const CellLayout& layout, int64_t row_begin, int64_t row_end, Fn fn) {
  const int rank = static_cast<int>(layout.dims.size());
  if (row_begin >= row_end) return;
  if (rank == 0) {
    fn(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  const int last = rank - 1;
  const int64_t inner = layout.dims[last];
  // The multi-index of outer row row_begin.
  std::vector<int64_t> index(static_cast<size_t>(last), 0);
  int64_t remaining = row_begin;
  for (int axis = last - 1; axis >= 0; --axis) {
    index[axis] = remaining % layout.dims[axis];
    remaining /= layout.dims[axis];
  }
  int64_t flat = row_begin * inner;
  for (int64_t row = row_begin; row < row_end; ++row) {
    int64_t input_offset = 0, scale_offset = 0;
    for (int axis = 0; axis < last; ++axis) {
      input_offset += index[axis] * layout.input_strides[axis];
      scale_offset += index[axis] / layout.divisor[axis] * layout.scale_stride[axis];
    }
    fn(input_offset, scale_offset, flat);
    flat += inner;
    for (int axis = last - 1; axis >= 0; --axis) {
      if (++index[axis] < layout.dims[axis]) break;
      index[axis] = 0;
    }
  }
}

// Calls fn(input_offset, input_stride, flat_offset, count, scale_offset) for
// every span of elements along the last axis that share one scale cell, in
// row-major order, over the outer rows [row_begin, row_end).
template <class Fn>
void for_each_span(const CellLayout& layout, int64_t row_begin, int64_t row_end, Fn fn) {
  if (layout.dims.empty()) {
    if (row_begin < row_end) fn(int64_t{0}, int64_t{1}, int64_t{0}, int64_t{1}, int64_t{0});
    return;
  }
  const int64_t inner = layout.dims.back();
  const int64_t inner_stride = layout.input_strides.back();
  const int64_t inner_divisor = layout.divisor.back();
  const int64_t inner_scale_stride = layout.scale_stride.back();
  for_each_row(layout, row_begin, row_end,
               [&](int64_t input_offset, int64_t scale_offset, int64_t flat) {
                 for (int64_t j0 = 0; j0 < inner; j0 += inner_divisor) {
                   const int64_t count = std::min(inner_divisor, inner - j0);
                   fn(input_offset + j0 * inner_stride, inner_stride, flat + j0, count,
                      scale_offset + j0 / inner_divisor * inner_scale_stride);
                 }
               });
}

template <class Fn>
void for_each_span(const CellLayout& layout, Fn fn) {
  for_each_span(layout, 0, outer_rows(layout), fn);
}

// Whether no scale cell spans two outer rows (every outer axis keeps its
// scale): then threads that split the outer rows never share a cell.
bool cells_within_rows(const CellLayout& layout) {
  for (size_t axis = 0; axis + 1 < layout.dims.size(); ++axis) {
    if (layout.divisor[axis] != 1 && layout.dims[axis] > 1) return false;
  }
  return true;
}

// Reads element j of a span as f32.
float load_input(const TensorView& input, int64_t offset) {
  switch (input.dtype) {
    case DType::kF32:
      return input.as<const float>()[offset];
    case DType::kBF16:
      return bf16_to_f32(input.as<const uint16_t>()[offset]);
    case DType::kF16:
      return f16_to_f32(input.as<const uint16_t>()[offset]);
    default:
      return 0.0f;
  }
}


constexpr int64_t kChunk = 256;  // f32 staging of inputs that are not contiguous f32

// Calls fn(x, j0, width) over the elements offset + j * stride (j < count)
// in chunks of at most kChunk, x pointing at them as f32: the input itself
// where it is contiguous f32, else a gathered copy.
template <class Fn>
void for_each_f32_chunk(const TensorView& input, int64_t offset, int64_t stride, int64_t count,
                        Fn fn) {
  const bool direct = input.dtype == DType::kF32 && stride == 1;
  float chunk[kChunk];
  for (int64_t j0 = 0; j0 < count; j0 += kChunk) {
    const int64_t width = std::min(kChunk, count - j0);
    if (direct) {
      fn(input.as<const float>() + offset + j0, j0, width);
    } else {
      gather_input(input, offset + j0 * stride, stride, width, chunk);
      fn(static_cast<const float*>(chunk), j0, width);
    }
  }
}

// Codes of one span (input elements offset + j * stride) with one scale:
// codes first + j of `out` for j < count (by element, not byte: sub-byte
// codes share bytes). Contiguous f32 spans go to the encoder whole; other
// inputs in f32 chunks (encoding is per element: chunking changes no bit).
void encode_span(const TensorView& input, const core::DTypeTraits& codes, int64_t offset,
                 int64_t stride, int64_t count, float scale, void* out, int64_t first) {
  const core::EncodeSpanFn encode = encoder_of(codes);
  if (input.dtype == DType::kF32 && stride == 1) {
    encode(input.as<const float>() + offset, count, scale, out, first);
    return;
  }
  for_each_f32_chunk(input, offset, stride, count, [&](const float* x, int64_t j0, int64_t width) {
    encode(x, width, scale, out, first + j0);
  });
}

void check_input(const TensorView& input, const std::string& argument) {
  require(input.dtype == DType::kF32 || input.dtype == DType::kBF16 || input.dtype == DType::kF16,
          argument, dtype_name(input.dtype), "quantize reads f32, bf16 or f16");
  require(input.data != nullptr || input.numel() == 0, argument, "null", "input data is null");
  require(input.strides.size() == input.shape.size(), argument, shape_string(input.strides),
          "strides must have the rank of the shape " + shape_string(input.shape));
}

}  // namespace

QuantizedTensor quantize(const TensorView& input, QuantType type, const Granularity& granularity,
                         std::optional<float> static_range, int threads) {
  check_input(input, "input");
  checked_numel(input.shape, "input");
  if (static_range) {
    require(std::isfinite(*static_range) && *static_range > 0.0f, "static_range", *static_range,
            "a static range must be finite and > 0");
  }
  require(threads >= 0, "threads", threads, "must be >= 0 (0: all of OpenMP's threads)");
  const Shape scale_shape = granularity.scale_shape(input.shape, "granularity");
  const core::DTypeTraits& codes = core::quant_traits(type);
  const float type_max = static_cast<float>(codes.finite_max);
  QuantizedTensor result;
  result.type = type;
  result.granularity = granularity;
  result.values = Tensor(codes.dtype, input.shape);
  result.scales = Tensor(DType::kF32, scale_shape);
  float* scales = result.scales.as<float>();
  const CellLayout layout = make_layout(input, granularity, scale_shape);
  char* out = static_cast<char*>(result.values.data());

  // Threads split the outer rows. Maxima are exact and codes are per
  // element, so the thread count changes no bit. Where a scale cell spans
  // outer rows (a reduced outer axis), one thread finds the maxima alone.
  const int64_t rows = outer_rows(layout);
  const int team = ops::quantize_team(threads, rows, input.numel());
  const bool split_maxima = cells_within_rows(layout);
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> first_bad(static_cast<size_t>(team), kNone);  // per thread
  bool failed = false;

  if (static_range) std::fill(scales, scales + result.scales.numel(), *static_range / type_max);
  // The largest |x| of a span from `start` (bits compared: NaN above inf);
  // records the span's first non-finite element in *bad.
  auto span_absmax = [&](int64_t offset, int64_t stride, int64_t flat, int64_t count, float start,
                         int64_t* bad) {
    float absmax = start;
    for_each_f32_chunk(input, offset, stride, count, [&](const float* x, int64_t, int64_t width) {
      absmax = absmax_bits(x, width, absmax);
    });
    if (!ops::finite_absmax(absmax)) {
      for (int64_t j = 0; j < count && *bad == kNone; ++j) {
        if (!std::isfinite(load_input(input, offset + j * stride))) *bad = flat + j;
      }
    }
    return absmax;
  };
  auto scale_of = [&](float absmax) { return ops::dynamic_scale(absmax, type_max); };
  auto encode = [&](int64_t offset, int64_t stride, int64_t flat, int64_t count, int64_t cell) {
    encode_span(input, codes, offset, stride, count, scales[cell], out, flat);
  };

  // Rows whose last axis keeps its scale. Maxima over magnitude_bits, per
  // element's cell; false when an element is not finite. The last axis
  // keeps its scale, so its scale stride is 1 (the scales' row-major last
  // axis): a row's cells are contiguous, and the span kernels of
  // quantize_scaled serve (ops/quant_spans.h, compiled per SIMD level).
  const int64_t inner = input.rank() > 0 ? input.shape.back() : 1;
  const int64_t inner_stride = input.rank() > 0 ? layout.input_strides.back() : 1;
  const int64_t inner_scale_stride = input.rank() > 0 ? layout.scale_stride.back() : 0;
  const bool per_element_rows = !split_maxima && input.rank() > 0 && layout.divisor.back() == 1 &&
                                inner > 1 && inner_scale_stride != 0;
  auto row_maxima = [&] {
    std::vector<uint32_t> largest(static_cast<size_t>(result.scales.numel()), 0u);
    for_each_row(layout, 0, rows, [&](int64_t offset, int64_t cell, int64_t) {
      for_each_f32_chunk(input, offset, inner_stride, inner,
                         [&](const float* x, int64_t j0, int64_t width) {
                           ops::column_absmax_bits(x, nullptr, width,
                                                   largest.data() + cell + j0);
                         });
    });
    return ops::scales_from_maxima(largest.data(), result.scales.numel(), type_max, scales);
  };
  // Dividing by each element's scale here and encoding with divisor 1 gives
  // the codes encode_span gives: encoders encode x / divisor, and x / 1 is x.
  const core::EncodeSpanFn encode_codes = encoder_of(codes);
  auto encode_rows = [&](int64_t row_begin, int64_t row_end) {
    for_each_row(layout, row_begin, row_end, [&](int64_t offset, int64_t cell, int64_t flat) {
      for_each_f32_chunk(input, offset, inner_stride, inner,
                         [&](const float* x, int64_t j0, int64_t width) {
                           float scaled[kChunk];
                           ops::divide_scaled_span(x, nullptr, scales + cell + j0, width, scaled);
                           encode_codes(scaled, width, 1.0f, out, flat + j0);
                         });
    });
  };

#pragma omp parallel num_threads(team)
  {
    const int t = omp_get_thread_num();
    const std::pair<int64_t, int64_t> share = share_of(rows, t, team);
    const int64_t begin = share.first, end = share.second;
    int64_t& bad = first_bad[static_cast<size_t>(t)];
    if (static_range) {
      // Scales are set; a type without a NaN code (int8) checks each span first.
      for_each_span(layout, begin, end,
                    [&](int64_t offset, int64_t stride, int64_t flat, int64_t count, int64_t cell) {
                      if (bad != kNone) return;
                      if (!codes.has_nan) {
                        for (int64_t j = 0; j < count && bad == kNone; ++j) {
                          if (std::isnan(load_input(input, offset + j * stride))) bad = flat + j;
                        }
                        if (bad != kNone) return;
                      }
                      encode(offset, stride, flat, count, cell);
                    });
    } else if (split_maxima) {
      // Each span is one whole cell: its maximum, scale and codes in one
      // visit, while the span is still in cache, and no thread waits.
      for_each_span(layout, begin, end,
                    [&](int64_t offset, int64_t stride, int64_t flat, int64_t count, int64_t cell) {
                      if (bad != kNone) return;
                      const float absmax = span_absmax(offset, stride, flat, count, 0.0f, &bad);
                      if (bad != kNone) return;
                      scales[cell] = scale_of(absmax);
                      encode(offset, stride, flat, count, cell);
                    });
    } else if (per_element_rows) {
      // Cells span rows and the last axis keeps its scale (a weight's
      // columns under channel or block scales): every span is one element,
      // so whole rows are walked instead, the cell changing per element.
#pragma omp single
      {
        failed = !row_maxima();
        if (failed) {  // the first non-finite element, for the error
          for_each_span(layout, 0, rows,
                        [&](int64_t offset, int64_t stride, int64_t flat, int64_t count,
                            int64_t) {
                          if (bad == kNone) span_absmax(offset, stride, flat, count, 0.0f, &bad);
                        });
        }
      }  // (the single's barrier: every thread sees the scales and `failed`)
      if (!failed) encode_rows(begin, end);
    } else {
      // Cells span rows: one thread finds the maxima (in the scale buffer,
      // zero from the Tensor), then all encode.
#pragma omp single
      {
        for_each_span(layout, 0, rows,
                      [&](int64_t offset, int64_t stride, int64_t flat, int64_t count,
                          int64_t cell) {
                        if (bad != kNone) return;
                        scales[cell] = span_absmax(offset, stride, flat, count, scales[cell], &bad);
                      });
        failed = bad != kNone;
        if (!failed) {
          for (int64_t i = 0; i < result.scales.numel(); ++i) scales[i] = scale_of(scales[i]);
        }
      }  // (the single's barrier: every thread sees the scales and `failed`)
      if (!failed) for_each_span(layout, begin, end, encode);
    }
  }
  failed = *std::min_element(first_bad.begin(), first_bad.end()) != kNone;
  if (failed) {
    const int64_t element = *std::min_element(first_bad.begin(), first_bad.end());
    if (static_range) {
      fail("input", "NaN at element " + std::to_string(element),
           std::string(codes.quant_name) + " has no NaN code; remove NaNs before quantizing");
    }
    ops::fail_non_finite(element);
  }
  return result;
}

Tensor dequantize(const TensorView& values, const TensorView& scales, QuantType type,
                  const Granularity& granularity) {
  // Codes that .npy files carry as raw bytes (fp8) may come as u8.
  const core::DTypeTraits& codes = core::quant_traits(type);
  const bool raw_bytes = std::string_view(codes.npy_descr) == core::dtype_traits(DType::kU8).npy_descr;
  require(values.dtype == codes.dtype || (raw_bytes && values.dtype == DType::kU8), "values",
          dtype_name(values.dtype),
          std::string("codes of ") + codes.quant_name + " must be " + codes.codes_text);
  require(values.data != nullptr || values.numel() == 0, "values", "null", "values data is null");
  require(values.strides.size() == values.shape.size(), "values", shape_string(values.strides),
          "strides must have the rank of the shape");
  require(scales.dtype == DType::kF32, "scales", dtype_name(scales.dtype), "scales must be f32");
  const Shape scale_shape = granularity.scale_shape(values.shape, "granularity");
  require(scales.shape == scale_shape, "scales", shape_string(scales.shape),
          "granularity " + granularity.to_string() + " of values " + shape_string(values.shape) +
              " needs scales " + shape_string(scale_shape));
  require(scales.is_contiguous(), "scales", shape_string(scales.strides),
          "scales must be contiguous");
  Tensor out(DType::kF32, values.shape);
  float* dst = out.as<float>();
  const float* scale = scales.as<const float>();
  const CellLayout layout = make_layout(values, granularity, scale_shape);
  // Byte codes (every quantized type so far) decode through their table.
  const float* table = core::code_table(codes.dtype);
  const uint8_t* bytes = values.as<const uint8_t>();
  for_each_span(layout,
                [&](int64_t offset, int64_t stride, int64_t flat, int64_t count, int64_t cell) {
                  const float s = scale[cell];
                  for (int64_t j = 0; j < count; ++j)
                    dst[flat + j] = table[bytes[offset + j * stride]] * s;
                });
  return out;
}

Tensor dequantize(const QuantizedTensor& quantized) {
  return dequantize(quantized.values.view(), quantized.scales.view(), quantized.type,
                    quantized.granularity);
}

}  // namespace raggemm
