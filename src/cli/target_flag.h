// --target, --int8-kernel and --bf16-kernel: run with a lesser SIMD target than the CPU's
// best (to measure, on an AVX-512 machine, what an AVX2 machine runs), for
// `raggemm peak` and `raggemm bench`.
#pragma once

#include <string>

namespace raggemm::cli {

// "best" leaves the dispatch alone; otherwise a Highway target name this
// CPU supports ("AVX3", "AVX2", "SSE4", "EMU128"): the f32 microkernel, the
// machine model and the int8 kernel's family all follow it.
void force_simd_target(const std::string& target, const std::string& argument);

// "auto", or an int8 microkernel this CPU runs ("AVX512_VNNI", "AVX_VNNI",
// "AVX2", "SCALAR").
void force_int8_kernel(const std::string& name, const std::string& argument);

// "auto", or a bf16 dot kernel this CPU runs ("AVX512_BF16", "SCALAR"), or
// "WIDEN" (bf16 x bf16 passes widen to f32 and run the f32 microkernel).
void force_bf16_kernel(const std::string& name, const std::string& argument);

}  // namespace raggemm::cli
