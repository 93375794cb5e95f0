// Highway kernels of glue_simd.h: glibc's expf evaluated in double lanes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/glue_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>

#include "kernels/glue_simd.h"

#ifndef RAGGEMM_MOE_GLUE_SIMD_CONSTANTS
#define RAGGEMM_MOE_GLUE_SIMD_CONSTANTS
namespace raggemm::kernels::glue_detail {

// The constants of glibc's expf (sysdeps/ieee754/flt-32/e_expf.c and
// e_exp2f_data.c, N = 32), as the x86-64 libm of Debian 12 holds them: exp(x)
// = 2^(k/32) * 2^(r/32) with k = round(x * 32/ln2), r the rest, and 2^(r/32)
// ~ 1 + r * (c2 + r * c1 + r^2 * c0) (the cubic evaluated as below).
constexpr double kInvLn2TimesN = 0x1.71547652b82fep+5;
constexpr double kShift = 0x1.8p+52;  // adding it rounds to an integer in the low bits
constexpr double kC0 = 0x1.c6af84b912394p-20;
constexpr double kC1 = 0x1.ebfce50fac4f3p-13;
constexpr double kC2 = 0x1.62e42ff0c52d6p-6;
// 2^(i/32), i < 32, correctly rounded; as bits with i << 47 taken off (the
// scalar code adds k << 47, which puts k's high bits into the exponent).
constexpr double kExp2Table[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0};

struct TableBits {
  uint64_t bits[32];
  TableBits() {
    for (uint64_t i = 0; i < 32; ++i) {
      uint64_t b;
      __builtin_memcpy(&b, &kExp2Table[i], sizeof b);
      bits[i] = b - (i << 47);
    }
  }
};
inline const TableBits kTable;

// |x| bits at or above this: glibc leaves its fast path (|x| >= 88, inf, NaN).
constexpr int32_t kFastPathEnd = 0x42b00000;

inline float scalar_swiglu(float g, float u) { return g / (1.0f + std::exp(-g)) * u; }
inline void scalar_swiglu_backward(float g, float u, float da, float* dg, float* du) {
  const float sig = 1.0f / (1.0f + std::exp(-g));
  const float silu = g * sig;
  *dg = da * u * sig * (1.0f + g * (1.0f - sig));
  *du = da * silu;
}

}  // namespace raggemm::kernels::glue_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace gd = glue_detail;

// Only where MulAdd is one rounding (an FMA instruction), as in glibc's
// variant for CPUs with FMA and AVX2; elsewhere the scalar loops.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define RAGGEMM_GLUE_VECTOR 1
#else
#define RAGGEMM_GLUE_VECTOR 0
#endif

#if RAGGEMM_GLUE_VECTOR
using DD = hn::ScalableTag<double>;
using DF = hn::Rebind<float, DD>;  // as many floats as doubles: half a vector
using VF = hn::Vec<DF>;

// True when every lane of x is on glibc's fast path.
HWY_INLINE bool AllFast(DF df, VF x) {
  const hn::RebindToSigned<DF> di;
  const auto magnitude = hn::And(hn::BitCast(di, x), hn::Set(di, 0x7fffffff));
  return hn::AllFalse(di, hn::Gt(magnitude, hn::Set(di, gd::kFastPathEnd - 1)));
}

// kTable.bits[ki % 32] per lane. With AVX-512 the 32 entries sit in four
// registers and two two-register permutes pick them (a gather of 8 lanes
// took about half of ExpFast's time); AVX2 gathers.
template <class DU, class DI>
HWY_INLINE hn::Vec<DU> TableLookup(DU du, DI di, hn::Vec<DU> ki) {
#if HWY_TARGET <= HWY_AVX3
  (void)di;
  const uint64_t* table = gd::kTable.bits;
  const __m512i index = ki.raw;  // permutes read the low 4 bits, the blend bit 4
  const __m512i low = _mm512_permutex2var_epi64(_mm512_loadu_si512(table), index,
                                                _mm512_loadu_si512(table + 8));
  const __m512i high = _mm512_permutex2var_epi64(_mm512_loadu_si512(table + 16), index,
                                                 _mm512_loadu_si512(table + 24));
  const __mmask8 upper = _mm512_test_epi64_mask(index, _mm512_set1_epi64(16));
  return hn::Vec<DU>{_mm512_mask_blend_epi64(upper, low, high)};
#else
  const auto index = hn::BitCast(di, hn::And(ki, hn::Set(du, 31)));
  return hn::GatherIndex(du, gd::kTable.bits, index);
#endif
}

// exp of every lane, each the bits of glibc's __expf_fma (the same operations
// in the same order: FMAs where it has them, one rounding to float at the end).
HWY_INLINE VF ExpFast(DF df, VF x) {
  const DD dd;
  const hn::RebindToUnsigned<DD> du;
  const hn::RebindToSigned<DD> di;
  const auto xd = hn::PromoteTo(dd, x);
  const auto inv_ln2 = hn::Set(dd, gd::kInvLn2TimesN);
  const auto shift = hn::Set(dd, gd::kShift);
  const auto shifted = hn::MulAdd(inv_ln2, xd, shift);  // k + shift
  const auto ki = hn::BitCast(du, shifted);
  const auto kd = hn::Sub(shifted, shift);
  const auto r = hn::MulSub(inv_ln2, xd, kd);
  const auto t = hn::Add(TableLookup(du, di, ki), hn::ShiftLeft<47>(ki));
  const auto s = hn::BitCast(dd, t);
  const auto z = hn::MulAdd(r, hn::Set(dd, gd::kC0), hn::Set(dd, gd::kC1));
  const auto r2 = hn::Mul(r, r);
  auto y = hn::MulAdd(r, hn::Set(dd, gd::kC2), hn::Set(dd, 1.0));
  y = hn::MulAdd(z, r2, y);
  y = hn::Mul(y, s);
  return hn::DemoteTo(df, y);
}
#endif

void ExpF32(const float* x, int64_t n, float* y) {
  int64_t i = 0;
#if RAGGEMM_GLUE_VECTOR
  const DF df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  for (; i + lanes <= n; i += lanes) {
    const VF v = hn::LoadU(df, x + i);
    if (AllFast(df, v)) {
      hn::StoreU(ExpFast(df, v), df, y + i);
    } else {
      for (int64_t j = i; j < i + lanes; ++j) y[j] = std::exp(x[j]);
    }
  }
#endif
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

void SwigluForwardF32(const float* gate, const float* up, int64_t n, float* act) {
  int64_t i = 0;
#if RAGGEMM_GLUE_VECTOR
  const DF df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF one = hn::Set(df, 1.0f);
  for (; i + lanes <= n; i += lanes) {
    const VF g = hn::LoadU(df, gate + i);
    const VF minus_g = hn::Neg(g);
    if (!AllFast(df, minus_g)) {
      for (int64_t j = i; j < i + lanes; ++j) act[j] = gd::scalar_swiglu(gate[j], up[j]);
      continue;
    }
    const VF e = ExpFast(df, minus_g);
    hn::StoreU(hn::Mul(hn::Div(g, hn::Add(one, e)), hn::LoadU(df, up + i)), df, act + i);
  }
#endif
  for (; i < n; ++i) act[i] = gd::scalar_swiglu(gate[i], up[i]);
}

void SwigluBackwardF32(const float* gate, const float* up, const float* dact, int64_t n,
                       float* dgate, float* dup) {
  int64_t i = 0;
#if RAGGEMM_GLUE_VECTOR
  const DF df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF one = hn::Set(df, 1.0f);
  for (; i + lanes <= n; i += lanes) {
    const VF g = hn::LoadU(df, gate + i);
    const VF minus_g = hn::Neg(g);
    if (!AllFast(df, minus_g)) {
      for (int64_t j = i; j < i + lanes; ++j) {
        gd::scalar_swiglu_backward(gate[j], up[j], dact[j], dgate + j, dup + j);
      }
      continue;
    }
    const VF u = hn::LoadU(df, up + i);
    const VF da = hn::LoadU(df, dact + i);
    const VF sig = hn::Div(one, hn::Add(one, ExpFast(df, minus_g)));
    const VF silu = hn::Mul(g, sig);
    const VF slope = hn::Add(one, hn::Mul(g, hn::Sub(one, sig)));
    hn::StoreU(hn::Mul(hn::Mul(hn::Mul(da, u), sig), slope), df, dgate + i);
    hn::StoreU(hn::Mul(da, silu), df, dup + i);
  }
#endif
  for (; i < n; ++i) gd::scalar_swiglu_backward(gate[i], up[i], dact[i], dgate + i, dup + i);
}

bool Vectorized() { return RAGGEMM_GLUE_VECTOR != 0; }

#undef RAGGEMM_GLUE_VECTOR

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace raggemm::kernels {

HWY_EXPORT(ExpF32);
HWY_EXPORT(SwigluForwardF32);
HWY_EXPORT(SwigluBackwardF32);
HWY_EXPORT(Vectorized);

void exp_f32(const float* x, int64_t n, float* y) { HWY_DYNAMIC_DISPATCH(ExpF32)(x, n, y); }

void swiglu_forward_f32(const float* gate, const float* up, int64_t n, float* act) {
  HWY_DYNAMIC_DISPATCH(SwigluForwardF32)(gate, up, n, act);
}

void swiglu_backward_f32(const float* gate, const float* up, const float* dact, int64_t n,
                         float* dgate, float* dup) {
  HWY_DYNAMIC_DISPATCH(SwigluBackwardF32)(gate, up, dact, n, dgate, dup);
}

bool glue_simd_vectorized() { return HWY_DYNAMIC_DISPATCH(Vectorized)(); }

}  // namespace raggemm::kernels
#endif
