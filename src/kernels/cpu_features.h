// The CPU's instruction-set features, read once by CPUID: the one table that
// every hand-written SIMD path (the int8 and bf16 dot microkernels, the fp8
// decoder, the quantization encoders) checks before it runs, instead of each
// asking CPUID on its own. Highway's f32 dispatch does its own detection;
// what it may use *now* (a target forced by hwy::SetSupportedTargetsForTest)
// is a separate, live question: microkernel_registry.h, allowed_family().
#pragma once

namespace raggemm::kernels {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;        // vcvtph2ps (the AVX2 fp8 decoder converts through fp16)
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;  // vpdpbusd on zmm
  bool avx512bf16 = false;  // vdpbf16ps
  bool avx_vnni = false;    // vpdpbusd on ymm (VEX), CPUID leaf 7 sub-leaf 1
  bool amx_tile = false;    // the tile registers (the OS must grant them too: amx_tile_data_permitted)
  bool amx_bf16 = false;    // tdpbf16ps
  // AVX-512 foundation, byte/word and vector-length: what every AVX-512 path
  // here needs at least.
  bool avx512() const { return avx512f && avx512bw && avx512vl; }
};

// Read on first use (the registry reads it while the library loads).
const CpuFeatures& cpu_features();

}  // namespace raggemm::kernels
