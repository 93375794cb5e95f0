// fp8 codes to f32 for packing, vectorized by hand (AVX-512, AVX2; the
// portable core decoder elsewhere) and bit-identical to raggemm/fp8.h's
// scalar decoders, NaN payloads and signed zeros included:
//   out[j] = (decode(src[j]) * scale) * (col_scales ? col_scales[j] : 1)
// The packing loops decode every fp8 weight of a group once per item, so
// this runs as often as the f32 path copies. Table-free: on AVX-512
// normal codes rebias the exponent and subnormal ones are built with the
// exponent one higher and that power of two subtracted, which is exact; on
// AVX2 the codes become fp16 and F16C converts them (decode_fp8.cc).
#pragma once

#include <cstdint>

#include "raggemm/dtype.h"

namespace raggemm::kernels {

// dtype: DType::kF8E4M3 or kF8E5M2.
void decode_fp8_span(DType dtype, const uint8_t* src, int64_t count, float scale,
                     const float* col_scales, float* out);

// The same, straight into B panels, for `rows` source rows `ld` bytes
// apart: column j of row r goes to dst + r * nr + (j / nr) * panel_stride
// + j % nr, and the last panel's columns past `cols` are zeroed (so no
// staging row is written and copied). Rows ahead are prefetched. One call
// a block: called a row at a time, at 32 columns a chunk, the call cost
// more than the decoding.
void decode_fp8_panels(DType dtype, const uint8_t* src, int64_t ld, int64_t rows, int64_t cols,
                       int nr, int64_t panel_stride, float scale, const float* col_scales,
                       float* dst);

// The implementation decode_fp8_span and _panels run on now ("AVX512",
// "AVX2", "SCALAR"): the CPU's best that the Highway dispatch allows now.
const char* decode_fp8_implementation();

// One implementation by name ("AVX512", "AVX2", "SCALAR"), for tests; false
// when this CPU or build lacks it.
bool decode_fp8_span_on(const char* isa, DType dtype, const uint8_t* src, int64_t count,
                        float scale, const float* col_scales, float* out);

}  // namespace raggemm::kernels
