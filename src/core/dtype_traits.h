// What every storage type is, in one table (issue 20, "quantized operands
// are data"): its name, width in bits, whether it holds quantized codes,
// their range and scale format, and its decoder (code -> f32) and encoder
// hooks. dtype_size / dtype_name / parse_dtype, the QuantType vocabulary
// (raggemm/quant_types.h), .npy writing, the kernels' decode dispatch
// (kernels/decode.cc, through core/dtype_codec.h) and the quantizer
// (ops/quant.cc) read these rows; none of them switches on the type.
//
// Adding a storage type: its DType value (raggemm/dtype.h), its row here
// (dtype_traits.cc), its scalar decoder, its Codec if the kernels read it
// (core/dtype_codec.h) and, for a quantized type, its QuantType value and a
// portable encoder. Hand-vectorized decoders and encoders are optional fast
// paths. docs/quantization.md says what sub-byte types (int4, mxfp4) add.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "raggemm/dtype.h"
#include "raggemm/quant_types.h"

namespace raggemm::core {

// How a quantized type's codes become values.
enum class ScaleFormat : uint8_t {
  kNone,  // plain storage: the code is the value (f32, bf16, f16, the integers)
  kF32,   // codes x an f32 scale per cell of a Granularity (per tensor, channel, block)
  kE8M0,  // codes x 2^(e - 127), one exponent byte per `scale_block` codes along K
          // (the OCP MX formats, e.g. mxfp4); no type uses it yet
};

// Portable bulk hooks (loops over spans, never called per element).
// Codes are addressed by element index `first` from `data`, not by
// pointer, so a sub-byte type (two codes per byte) can find its nibble.
//   decode: out[j] = value of code first + j, exactly, for j < count.
//   encode: code first + j = encode(src[j] / divisor), saturating to the
//           finite range (NaN kept where the type has a NaN code).
using DecodeSpanFn = void (*)(const void* data, int64_t first, int64_t count, float* out);
using EncodeSpanFn = void (*)(const float* src, int64_t count, float divisor, void* data,
                              int64_t first);

struct DTypeTraits {
  DType dtype;
  const char* name;  // dtype_name, parse_dtype
  // Storage width. Below 8 the codes pack along the row (K, the contracted
  // dim of a weight), low bits first; dtype_size is bits / 8 for the rest.
  int bits;
  // Finite range of the values (for quantized types, what absmax
  // calibration maps to: +-finite_max; int8 stays symmetric, -127..127).
  double lowest;
  double finite_max;
  bool has_nan = false;         // a NaN code exists (quantizing a NaN needs one)
  bool matmul_operand = false;  // the kernels decode it into f32 panels (core/dtype_codec.h)
  // Quantized storage: codes that mean values only with their scales.
  std::optional<QuantType> quant_type = std::nullopt;
  const char* quant_name = nullptr;  // quant_type_name ("int8" for i8)
  ScaleFormat scale_format = ScaleFormat::kNone;
  int scale_block = 0;               // codes per scale along K the format fixes (MX: 32); 0: any
  const char* npy_descr = nullptr;   // what .npy files store it as (fp8: raw bits |u1)
  const char* codes_text = nullptr;  // an array of its codes, for errors ("uint8 (raw fp8 bits)")
  float (*decode)(uint32_t code) = nullptr;  // one code (its bits) -> f32; nullptr: not decodable
  DecodeSpanFn decode_span = nullptr;        // nullptr: not decodable (i32, i64)
  EncodeSpanFn encode_span = nullptr;        // quantized types only
};

const DTypeTraits& dtype_traits(DType dtype);
// Every row, in DType order.
std::span<const DTypeTraits> all_dtype_traits();
// The row of a quantized type's storage.
const DTypeTraits& quant_traits(QuantType type);

// For a decodable type of at most 8 bits: value of every code (2^bits
// entries, indexed by the code's unsigned bits), built once from its decoder
// on first use (thread-safe) and valid for the life of the program. Throws
// Error for wider or undecodable types.
const float* code_table(DType dtype);

// "a, b or c": the "expected ..." list of a parse error, so that it stays
// in step with the table.
std::string or_list(std::span<const char* const> names);

}  // namespace raggemm::core
