// The exp-heavy elementwise glue (SwiGLU forward and backward, the softmax
// rows of the loss) vectorized per Highway target, with results bit for bit
// those of the scalar loops they replace. Here in kernels/ because the gmm's
// SwiGLU stage (kernels/swiglu_stage.h) runs the same loops on its tiles;
// the MoE layer and the loss call them too.
//
// The scalar loops call std::exp(float), i.e. glibc's expf. That is one
// double-precision evaluation (a 32-entry table of 2^(i/32) and a cubic,
// with FMAs in the variant glibc picks on a CPU with FMA and AVX2) rounded
// to float once, so a vector evaluation of the same double operations in the
// same order gives the same float. exp_f32 does that on targets with FMA
// (AVX2, AVX-512) and calls std::exp elsewhere, and for any vector holding
// an argument outside glibc's fast path (|x| >= 88, inf, NaN).
// Scalar, these loops cost ~1.7 ns an element (the SwiGLU forward of the
// default training run: 1.8 ms a layer, 10x its memory traffic); the
// equality with std::exp is tested (tests/moe/glue_simd_test.cc).
#pragma once

#include <cstdint>

namespace raggemm::kernels {

// y[i] = std::exp(x[i]), i < n (same bits). x and y may be the same array.
void exp_f32(const float* x, int64_t n, float* y);

// act[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n.
void swiglu_forward_f32(const float* gate, const float* up, int64_t n, float* act);

// The backward of swiglu_forward_f32 (sig = 1 / (1 + exp(-gate))):
// dgate = dact * up * sig * (1 + gate * (1 - sig)),
// dup = dact * (gate * sig),
// evaluated left to right as written, as the scalar loop does.
void swiglu_backward_f32(const float* gate, const float* up, const float* dact, int64_t n,
                         float* dgate, float* dup);

// True when this CPU's Highway target takes the vector path (else every
// function above is the scalar loop).
bool glue_simd_vectorized();

}  // namespace raggemm::kernels
