// Highway implementation of round_row_to_bf16, compiled per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/bf16_round_store.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/float_bits.h"
#include "kernels/bf16_round_store.h"

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RoundRowToBf16(const float* src, int64_t n, uint16_t* dst, bool stream) {
  (void)stream;  // HWY_SCALAR: element by element
  int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<uint32_t> du32;
  const hn::Rebind<uint16_t, decltype(du32)> du16;  // as many lanes, half the bytes
  const auto lanes = static_cast<int64_t>(hn::Lanes(du32));
  const auto magnitude_mask = hn::Set(du32, 0x7fffffffu);
  const auto infinity = hn::Set(du32, 0x7f800000u);
  const auto half_minus_one = hn::Set(du32, 0x7fffu);
  const auto one = hn::Set(du32, 1u);
  const auto quiet = hn::Set(du32, 0x0040u);
  // Stream writes a whole 128-bit register even for a half vector, so a u16
  // vector under 16 bytes (SSE4's 4 lanes) is stored plainly.
  const size_t vector_bytes = lanes * sizeof(uint16_t);
  const bool may_stream = stream && vector_bytes >= 16;
  for (; j + lanes <= n; j += lanes) {
    const auto bits = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(src + j));
    const auto upper = hn::ShiftRight<16>(bits);
    const auto rounded =
        hn::ShiftRight<16>(hn::Add(bits, hn::Add(half_minus_one, hn::And(upper, one))));
    const auto nan = hn::Gt(hn::And(bits, magnitude_mask), infinity);
    const auto value = hn::TruncateTo(du16, hn::IfThenElse(nan, hn::Or(upper, quiet), rounded));
    if (may_stream && reinterpret_cast<uintptr_t>(dst + j) % vector_bytes == 0) {
      hn::Stream(value, du16, dst + j);
    } else {
      hn::StoreU(value, du16, dst + j);
    }
  }
#endif
  for (; j < n; ++j) dst[j] = core::bf16_bits_of(src[j]);
}

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace raggemm::kernels {

HWY_EXPORT(RoundRowToBf16);

void round_row_to_bf16(const float* src, int64_t n, uint16_t* dst, bool stream) {
  HWY_DYNAMIC_DISPATCH(RoundRowToBf16)(src, n, dst, stream);
}

}  // namespace raggemm::kernels
#endif
