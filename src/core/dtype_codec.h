// The storage types as the kernels' packing loops read them, at compile
// time: Codec<D>::loader(data, first) gives a functor j -> f32 value of
// element first + j that inlines, so a loop templated on D vectorizes and
// the type is resolved once per call, never per element (kernels/decode.cc
// instantiates one span decoder per DType from these).
//
// A type the kernels read (DTypeTraits::matmul_operand) has a Codec with
// kDecodable; a new one adds its specialization here. A sub-byte type's
// loader finds code first + j in byte (first + j) / 2 (docs/quantization.md).
#pragma once

#include <cstdint>

#include "core/dtype_traits.h"
#include "raggemm/dtype.h"

namespace raggemm::core {

template <DType D>
struct Codec {
  static constexpr bool kDecodable = false;
};

// Storage whose bits are read through a decoding function.
template <class Storage, float (*Decode)(Storage)>
struct FunctionCodec {
  static constexpr bool kDecodable = true;
  struct Loader {
    const Storage* codes;
    float operator()(int64_t j) const { return Decode(codes[j]); }
  };
  static Loader loader(const void* data, int64_t first) {
    return {static_cast<const Storage*>(data) + first};
  }
};

inline float identity_f32(float value) { return value; }
inline float int8_value(int8_t code) { return static_cast<float>(code); }

// Byte codes read through their 256-entry table (core::code_table).
template <DType D>
struct TableCodec {
  static constexpr bool kDecodable = true;
  struct Loader {
    const uint8_t* codes;
    const float* table;
    float operator()(int64_t j) const { return table[codes[j]]; }
  };
  static Loader loader(const void* data, int64_t first) {
    return {static_cast<const uint8_t*>(data) + first, code_table(D)};
  }
};

template <>
struct Codec<DType::kF32> : FunctionCodec<float, identity_f32> {};
template <>
struct Codec<DType::kBF16> : FunctionCodec<uint16_t, bf16_to_f32> {};
template <>
struct Codec<DType::kF16> : FunctionCodec<uint16_t, f16_to_f32> {};
template <>
struct Codec<DType::kI8> : FunctionCodec<int8_t, int8_value> {};
template <>
struct Codec<DType::kF8E4M3> : TableCodec<DType::kF8E4M3> {};
template <>
struct Codec<DType::kF8E5M2> : TableCodec<DType::kF8E5M2> {};

}  // namespace raggemm::core
