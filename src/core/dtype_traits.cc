#include "core/dtype_traits.h"

#include <array>
#include <cstring>
#include <limits>
#include <string>

#include "core/float_bits.h"
#include "core/int8_code.h"
#include "raggemm/error.h"
#include "raggemm/fp8.h"

namespace raggemm::core {
namespace {

// ---- decoders: one code's bits -> f32 --------------------------------------

float decode_f32(uint32_t code) { return float_of(code); }
float decode_bf16(uint32_t code) { return bf16_to_f32(static_cast<uint16_t>(code)); }
float decode_f16(uint32_t code) { return f16_to_f32(static_cast<uint16_t>(code)); }
float decode_i8(uint32_t code) { return static_cast<float>(static_cast<int8_t>(code)); }
float decode_u8(uint32_t code) { return static_cast<float>(static_cast<uint8_t>(code)); }
float decode_e4m3(uint32_t code) { return fp8_e4m3_to_f32(static_cast<uint8_t>(code)); }
float decode_e5m2(uint32_t code) { return fp8_e5m2_to_f32(static_cast<uint8_t>(code)); }

// A byte-or-wider type's span decoder from its scalar one.
template <class Storage, float (*Decode)(uint32_t)>
void decode_span_of(const void* data, int64_t first, int64_t count, float* out) {
  const Storage* codes = static_cast<const Storage*>(data) + first;
  for (int64_t j = 0; j < count; ++j) {
    uint32_t bits = 0;
    std::memcpy(&bits, codes + j, sizeof(Storage));
    out[j] = Decode(bits);
  }
}

// ---- encoders: portable, saturating -----------------------------------------

template <DType kDType>
void encode_fp8_span_of(const float* src, int64_t count, float divisor, void* data,
                        int64_t first) {
  fp8_encode_span(kDType, src, count, divisor, static_cast<uint8_t*>(data) + first);
}

void encode_int8_span(const float* src, int64_t count, float divisor, void* data, int64_t first) {
  int8_t* codes = static_cast<int8_t*>(data) + first;
  for (int64_t j = 0; j < count; ++j) codes[j] = int8_code(src[j] / divisor);
}

// ---- the table ---------------------------------------------------------------

constexpr double kF32Max = std::numeric_limits<float>::max();

constexpr DTypeTraits kTraits[] = {
    {.dtype = DType::kF32, .name = "f32", .bits = 32, .lowest = -kF32Max, .finite_max = kF32Max,
     .has_nan = true, .matmul_operand = true, .npy_descr = "<f4", .codes_text = "f32",
     .decode = &decode_f32, .decode_span = &decode_span_of<uint32_t, decode_f32>},
    {.dtype = DType::kBF16, .name = "bf16", .bits = 16, .lowest = -0x1.fep127,
     .finite_max = 0x1.fep127, .has_nan = true, .matmul_operand = true,
     .npy_descr = "<f4",  // widened: NumPy has no bf16
     .codes_text = "bf16", .decode = &decode_bf16,
     .decode_span = &decode_span_of<uint16_t, decode_bf16>},
    {.dtype = DType::kF16, .name = "f16", .bits = 16, .lowest = -65504.0, .finite_max = 65504.0,
     .has_nan = true, .matmul_operand = true, .npy_descr = "<f2", .codes_text = "f16",
     .decode = &decode_f16, .decode_span = &decode_span_of<uint16_t, decode_f16>},
    {.dtype = DType::kI32, .name = "i32", .bits = 32, .lowest = -0x1p31,
     .finite_max = 0x1p31 - 1.0, .npy_descr = "<i4", .codes_text = "int32"},
    {.dtype = DType::kI64, .name = "i64", .bits = 64, .lowest = -0x1p63,
     .finite_max = 0x1p63,  // 2^63 - 1, rounded to a double
     .npy_descr = "<i8", .codes_text = "int64"},
    {.dtype = DType::kI8, .name = "i8", .bits = 8, .lowest = -128.0, .finite_max = kInt8CodeMax,
     .matmul_operand = true, .quant_type = QuantType::kInt8, .quant_name = "int8",
     .scale_format = ScaleFormat::kF32, .npy_descr = "|i1", .codes_text = "int8",
     .decode = &decode_i8, .decode_span = &decode_span_of<uint8_t, decode_i8>,
     .encode_span = &encode_int8_span},
    {.dtype = DType::kU8, .name = "u8", .bits = 8, .lowest = 0.0, .finite_max = 255.0,
     .npy_descr = "|u1", .codes_text = "uint8", .decode = &decode_u8,
     .decode_span = &decode_span_of<uint8_t, decode_u8>},
    {.dtype = DType::kF8E4M3, .name = "fp8_e4m3", .bits = 8, .lowest = -kFp8E4M3Max,
     .finite_max = kFp8E4M3Max, .has_nan = true, .matmul_operand = true,
     .quant_type = QuantType::kFp8E4M3, .quant_name = "fp8_e4m3",
     .scale_format = ScaleFormat::kF32, .npy_descr = "|u1",
     .codes_text = "uint8 (raw fp8 bits)", .decode = &decode_e4m3,
     .decode_span = &decode_span_of<uint8_t, decode_e4m3>,
     .encode_span = &encode_fp8_span_of<DType::kF8E4M3>},
    {.dtype = DType::kF8E5M2, .name = "fp8_e5m2", .bits = 8, .lowest = -kFp8E5M2Max,
     .finite_max = kFp8E5M2Max, .has_nan = true, .matmul_operand = true,
     .quant_type = QuantType::kFp8E5M2, .quant_name = "fp8_e5m2",
     .scale_format = ScaleFormat::kF32, .npy_descr = "|u1",
     .codes_text = "uint8 (raw fp8 bits)", .decode = &decode_e5m2,
     .decode_span = &decode_span_of<uint8_t, decode_e5m2>,
     .encode_span = &encode_fp8_span_of<DType::kF8E5M2>},
};

// Rows are indexed by the DType's value.
static_assert(std::size(kTraits) == kDTypeCount, "one row per DType");
constexpr bool rows_in_order() {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (static_cast<int>(kTraits[i].dtype) != i) return false;
  }
  return true;
}
static_assert(rows_in_order(), "kTraits rows must follow DType's order");

using CodeTable = std::array<float, 256>;

std::array<CodeTable, kDTypeCount> build_code_tables() {
  std::array<CodeTable, kDTypeCount> tables{};
  for (const DTypeTraits& row : kTraits) {
    if (row.bits > 8 || !row.decode) continue;
    CodeTable& table = tables[static_cast<int>(row.dtype)];
    for (uint32_t code = 0; code < (1u << row.bits); ++code) table[code] = row.decode(code);
  }
  return tables;
}

}  // namespace

const DTypeTraits& dtype_traits(DType dtype) {
  const int index = static_cast<int>(dtype);
  if (index < 0 || index >= kDTypeCount) {
    fail("dtype", std::to_string(index), "unknown dtype");
  }
  return kTraits[index];
}

std::span<const DTypeTraits> all_dtype_traits() { return kTraits; }

const DTypeTraits& quant_traits(QuantType type) {
  for (const DTypeTraits& row : kTraits) {
    if (row.quant_type == type) return row;
  }
  fail("type", std::to_string(static_cast<int>(type)), "unknown quantized type");
}

const float* code_table(DType dtype) {
  const DTypeTraits& row = dtype_traits(dtype);
  require(row.bits <= 8 && row.decode != nullptr, "dtype", row.name,
          "has no code table (decodable types of at most 8 bits have one)");
  // Function-local static: built once, thread-safe (C++11 magic statics).
  static const std::array<CodeTable, kDTypeCount> tables = build_code_tables();
  return tables[static_cast<int>(dtype)].data();
}

std::string or_list(std::span<const char* const> names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

}  // namespace raggemm::core
