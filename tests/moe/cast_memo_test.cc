// CastMemo (moe/grouped_matmul.h): a source cast once between two clear()s
// gives bf16_bits_of of every element; the same source and count give the
// same copy back (cast once), another count or source its own copy; after
// clear() a source written since is cast anew, into a kept buffer. And the
// MoE layer in bf16 clears it each step: a second step on new values gives
// what a fresh layer gives.
#include <gtest/gtest.h>

#include <vector>

#include "core/float_bits.h"
#include "moe/grouped_matmul.h"
#include "moe/moe_test_util.h"
#include "raggemm/moe.h"

namespace raggemm::moe {
namespace {

void expect_bits(const uint16_t* bits, const std::vector<float>& src, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(bits[i], core::bf16_bits_of(src[static_cast<size_t>(i)])) << "element " << i;
  }
}

TEST(CastMemo, CastsEachSourceOnceBetweenClears) {
  std::vector<float> a(100000), b(300);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1.0f + static_cast<float>(i) * 1e-3f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -2.5f - static_cast<float>(i) * 0.37f;
  CastMemo memo;
  const uint16_t* a_bits = memo.cast(a.data(), 100000);
  expect_bits(a_bits, a, 100000);
  const uint16_t* b_bits = memo.cast(b.data(), 300);
  expect_bits(b_bits, b, 300);
  EXPECT_NE(a_bits, b_bits);
  a[7] = 1e9f;  // not seen: the copy is the memo's until clear()
  EXPECT_EQ(memo.cast(a.data(), 100000), a_bits);
  EXPECT_NE(a_bits[7], core::bf16_bits_of(1e9f));
  const uint16_t* a_head = memo.cast(a.data(), 50);  // another count: its own copy
  EXPECT_NE(a_head, a_bits);
  expect_bits(a_head, a, 50);

  memo.clear();
  a[8] = -3e7f;
  const uint16_t* again = memo.cast(a.data(), 100000);
  expect_bits(again, a, 100000);  // a's writes since the last cast are in
  EXPECT_EQ(again, a_bits);       // the largest free buffer, kept, taken again
}


// The layer's buffers (xs, act, dy, dh) keep their addresses from step to
// step; with its memo not cleared, the second step would read the first's
// bf16 copies.
TEST(CastMemo, Bf16MoeLayerSecondStepIsAFreshLayersFirst) {
  MoeConfig config;
  config.embed_dim = 16;
  config.mlp_dim = 12;
  config.router.num_experts = 4;
  config.router.top_k = 2;
  config.dtype = DType::kBF16;
  constexpr int64_t kTokens = 24;
  MoeLayer<float> stepped("moe", config);
  stepped.init(5);
  MoeLayer<float> fresh("moe", config);
  testing::copy_params(stepped.params(), fresh.params());
  testing::expect_second_step_is_a_fresh_layers_first(
      stepped, fresh, kTokens * config.embed_dim,
      [](MoeLayer<float>& layer, const auto& x, const auto& probe, auto& out, auto& dx) {
        layer.forward(x.data(), kTokens, out.data());
        layer.backward(probe.data(), dx.data());
      });
}

}  // namespace
}  // namespace raggemm::moe
