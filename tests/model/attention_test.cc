// Attention: the blocked causal core against a naive f64 softmax attention
// (forward and analytic backward) and by finite differences; the whole
// layer (mha, gqa, mla with and without query compression; default and yarn
// RoPE) by finite differences of the f64 layer, then f32 and bf16 against
// it; causality; RoPE's frequencies and its inverse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/attention.h"
#include "model/causal_attention.h"
#include "model/rope.h"
#include "moe/moe_test_util.h"

namespace raggemm::model {
namespace {

using moe::testing::random_values;
using moe::testing::relative_frobenius;

// ---------------------------------------------------------------------------
// The core.

// Naive causal attention, f64, the whole score row at once.
void reference_forward(const AttentionDims& d, const std::vector<double>& q,
                       const std::vector<double>& k, const std::vector<double>& v,
                       std::vector<double>& out) {
  out.assign(static_cast<size_t>(d.batch * d.seq * d.heads * d.v_dim), 0.0);
  const int64_t group = d.heads / d.kv_heads;
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t i = 0; i < d.seq; ++i) {
        std::vector<double> s(static_cast<size_t>(i + 1));
        double peak = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d.qk_dim; ++c) {
            dot += q[((b * d.seq + i) * d.heads + h) * d.qk_dim + c] *
                   k[((b * d.seq + j) * d.kv_heads + h / group) * d.qk_dim + c];
          }
          s[j] = dot * d.scale;
          peak = std::max(peak, s[j]);
        }
        double total = 0;
        for (double& x : s) total += (x = std::exp(x - peak));
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t c = 0; c < d.v_dim; ++c) {
            out[((b * d.seq + i) * d.heads + h) * d.v_dim + c] +=
                s[j] / total * v[((b * d.seq + j) * d.kv_heads + h / group) * d.v_dim + c];
          }
        }
      }
    }
  }
}

double weighted_sum(const std::vector<double>& out, const std::vector<double>& weights) {
  double sum = 0;
  for (size_t i = 0; i < out.size(); ++i) sum += out[i] * weights[i];
  return sum;
}

struct CoreCase {
  const char* name;
  AttentionDims dims;
};

void PrintTo(const CoreCase& c, std::ostream* os) { *os << c.name; }

class CausalCoreTest : public ::testing::TestWithParam<CoreCase> {};

// f32 blocked forward and backward against the f64 reference; the f64
// reference's gradient by central differences (on a few entries each).
TEST_P(CausalCoreTest, MatchesReferenceAndFiniteDifferences) {
  AttentionDims d = GetParam().dims;
  d.scale = 1.0 / std::sqrt(static_cast<double>(d.qk_dim));
  const int64_t t = d.batch * d.seq;
  const auto q = random_values(t * d.heads * d.qk_dim, 1);
  const auto k = random_values(t * d.kv_heads * d.qk_dim, 2);
  const auto v = random_values(t * d.kv_heads * d.v_dim, 3);
  const auto w = random_values(t * d.heads * d.v_dim, 4);  // loss = sum(out * w)
  std::vector<double> want;
  reference_forward(d, q, k, v, want);

  std::vector<float> qf = moe::testing::cast_values<float>(q), kf = moe::testing::cast_values<float>(k),
                     vf = moe::testing::cast_values<float>(v), wf = moe::testing::cast_values<float>(w);
  std::vector<float> out(want.size()), lse(static_cast<size_t>(t * d.heads));
  causal_attention_forward(d, qf.data(), kf.data(), vf.data(), out.data(), lse.data());
  EXPECT_LT(relative_frobenius(out, want), 1e-5);

  std::vector<float> dq(qf.size()), dk(kf.size()), dv(vf.size());
  causal_attention_backward(d, qf.data(), kf.data(), vf.data(), out.data(), lse.data(), wf.data(),
                            dq.data(), dk.data(), dv.data());
  // The f64 blocked backward, checked by differences of the naive forward.
  std::vector<double> out64(want.size()), lse64(lse.size());
  causal_attention_forward(d, q.data(), k.data(), v.data(), out64.data(), lse64.data());
  std::vector<double> dq64(q.size()), dk64(k.size()), dv64(v.size());
  causal_attention_backward(d, q.data(), k.data(), v.data(), out64.data(), lse64.data(), w.data(),
                            dq64.data(), dk64.data(), dv64.data());
  EXPECT_LT(relative_frobenius(dq, dq64), 1e-4);
  EXPECT_LT(relative_frobenius(dk, dk64), 1e-4);
  EXPECT_LT(relative_frobenius(dv, dv64), 1e-4);
  const double eps = 1e-6;
  struct Input {
    const std::vector<double>* values;
    const std::vector<double>* grad;
    const char* name;
  };
  for (const Input& in : {Input{&q, &dq64, "q"}, Input{&k, &dk64, "k"}, Input{&v, &dv64, "v"}}) {
    const size_t n = in.values->size();
    for (size_t i = 0; i < n; i += std::max<size_t>(1, n / 23)) {
      std::vector<double> plus_q = q, plus_k = k, plus_v = v;
      std::vector<double>& target = in.values == &q ? plus_q : in.values == &k ? plus_k : plus_v;
      std::vector<double> y;
      target[i] += eps;
      reference_forward(d, plus_q, plus_k, plus_v, y);
      const double plus = weighted_sum(y, w);
      target[i] -= 2 * eps;
      reference_forward(d, plus_q, plus_k, plus_v, y);
      const double minus = weighted_sum(y, w);
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR((*in.grad)[i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << in.name << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CausalCoreTest,
    ::testing::Values(CoreCase{"mha", {2, 13, 3, 3, 8, 8, 0}},
                      CoreCase{"gqa_shared_by_2", {1, 21, 4, 2, 6, 10, 0}},
                      CoreCase{"gqa_one_kv_head", {2, 9, 3, 1, 4, 4, 0}},
                      // Longer than one block (at most 256 rows): several
                      // key blocks, a ragged last block.
                      CoreCase{"several_blocks", {1, 300, 2, 1, 4, 6, 0}}),
    [](const auto& info) { return std::string(info.param.name); });

// A change of token t's keys, values or query changes no output before t.
TEST(CausalCoreTest, NoOutputBeforeAChangeMoves) {
  AttentionDims d{1, 40, 2, 1, 8, 8, 0.3};
  const int64_t t = d.seq;
  auto q = moe::testing::cast_values<float>(random_values(t * d.heads * d.qk_dim, 5));
  auto k = moe::testing::cast_values<float>(random_values(t * d.qk_dim, 6));
  auto v = moe::testing::cast_values<float>(random_values(t * d.v_dim, 7));
  std::vector<float> before(static_cast<size_t>(t * d.heads * d.v_dim)), after(before.size()),
      lse(static_cast<size_t>(t * d.heads));
  causal_attention_forward(d, q.data(), k.data(), v.data(), before.data(), lse.data());
  const int64_t changed = 23;
  for (int64_t c = 0; c < d.qk_dim; ++c) k[changed * d.qk_dim + c] += 1.0f;
  for (int64_t c = 0; c < d.v_dim; ++c) v[changed * d.v_dim + c] -= 2.0f;
  causal_attention_forward(d, q.data(), k.data(), v.data(), after.data(), lse.data());
  const int64_t row = d.heads * d.v_dim;
  for (int64_t i = 0; i < changed * row; ++i) ASSERT_EQ(before[i], after[i]) << "element " << i;
  double moved = 0;
  for (int64_t i = changed * row; i < (changed + 1) * row; ++i) moved += std::abs(before[i] - after[i]);
  EXPECT_GT(moved, 1e-3);
}

// ---------------------------------------------------------------------------
// RoPE.

TEST(RopeTest, YarnFrequenciesFollowTheRamp) {
  RopeConfig yarn;  // DeepSeek-V3's: theta 1e4, factor 40, 4096, beta 32 / 1
  yarn.type = RopeType::kYarn;
  const int64_t dim = 64;
  const auto base = rope_frequencies(RopeConfig{}, dim);
  const auto f = rope_frequencies(yarn, dim);
  // Correction range for dim 64: low = floor(10.2) = 10, high = ceil(22.6) = 23.
  for (int64_t i = 0; i <= 10; ++i) EXPECT_DOUBLE_EQ(f[i], base[i]) << i;
  for (int64_t i = 23; i < dim / 2; ++i) EXPECT_NEAR(f[i], base[i] / 40, 1e-15) << i;
  EXPECT_NEAR(f[16], base[16] * (1 - 6.0 / 13) + base[16] / 40 * 6.0 / 13, 1e-15);
  EXPECT_DOUBLE_EQ(base[1], std::pow(1e4, -2.0 / 64));
  // mscale: (0.1 * ln 40 + 1)^2 when max positions exceed the original.
  EXPECT_NEAR(mla_softmax_factor(yarn), std::pow(0.1 * std::log(40.0) + 1, 2), 1e-12);
  yarn.max_position_embeddings = 4096;
  EXPECT_EQ(mla_softmax_factor(yarn), 1.0);
}

// Scores of rotated vectors depend on the distance only; inverse undoes.
TEST(RopeTest, RelativePositionAndInverse) {
  for (RopeType type : {RopeType::kDefault, RopeType::kYarn}) {
    RopeConfig config;
    config.type = type;
    Rope rope(config, 8);
    const auto base = random_values(16, 11);
    // Token 0..9 all hold (q, k) = base; rotate as one sequence.
    std::vector<double> x;
    for (int i = 0; i < 10; ++i) x.insert(x.end(), base.begin(), base.end());
    const std::vector<double> original = x;
    rope.apply(x.data(), 10, 10, 2, 16, 8, false);
    auto score = [&](int i, int j) {
      double s = 0;
      for (int c = 0; c < 8; ++c) s += x[i * 16 + c] * x[j * 16 + 8 + c];
      return s;
    };
    EXPECT_NEAR(score(7, 4), score(5, 2), 1e-12);
    EXPECT_NEAR(score(3, 3), score(9, 9), 1e-12);
    EXPECT_GT(std::abs(score(7, 4) - score(7, 5)), 1e-6);
    rope.apply(x.data(), 10, 10, 2, 16, 8, true);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], original[i], 1e-12);
  }
}

// ---------------------------------------------------------------------------
// The layer.

struct LayerCase {
  const char* name;
  AttentionConfig config;
};

AttentionConfig mha(int64_t heads, int64_t kv_heads, RopeType rope) {
  AttentionConfig c;
  c.type = heads == kv_heads ? AttentionType::kMha : AttentionType::kGqa;
  c.embed_dim = 10;
  c.num_query_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 4;
  c.rope.type = rope;
  return c;
}

AttentionConfig mla(int64_t q_lora_rank, RopeType rope) {
  AttentionConfig c;
  c.type = AttentionType::kMla;
  c.embed_dim = 10;
  c.num_query_heads = 3;
  c.q_lora_rank = q_lora_rank;
  c.kv_lora_rank = 5;
  c.qk_nope_head_dim = 3;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 5;
  c.rope.type = rope;
  c.rope.max_timescale = 50;  // short wavelengths: the 7 positions see them
  c.rope.original_max_position_embeddings = 8;
  return c;
}

void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

class AttentionLayerTest : public ::testing::TestWithParam<LayerCase> {};

constexpr int64_t kBatch = 2, kSeq = 7;

template <class T>
double layer_loss(Attention<T>& layer, const std::vector<T>& x, const std::vector<double>& w) {
  std::vector<T> out(x.size());
  layer.forward(x.data(), kBatch, kSeq, out.data());
  double sum = 0;
  for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * w[i];
  return sum;
}

TEST_P(AttentionLayerTest, F64MatchesFiniteDifferences) {
  const AttentionConfig config = GetParam().config;
  moe::MoeConfig matmuls;
  Attention<double> layer("attn", config, matmuls, nullptr);
  layer.init(3);
  const int64_t n = kBatch * kSeq * config.embed_dim;
  std::vector<double> x = random_values(n, 8);
  const std::vector<double> w = random_values(n, 9);
  std::vector<double> out(x.size()), dx(x.size(), 0.0);
  layer.forward(x.data(), kBatch, kSeq, out.data());
  layer.backward(w.data(), dx.data());
  const double eps = 1e-6;
  auto check = [&](std::vector<double>& values, const std::vector<double>& grad,
                   const std::string& name) {
    for (size_t i = 0; i < values.size(); i += std::max<size_t>(1, values.size() / 17)) {
      const double saved = values[i];
      values[i] = saved + eps;
      const double plus = layer_loss(layer, x, w);
      values[i] = saved - eps;
      const double minus = layer_loss(layer, x, w);
      values[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(grad[i], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << name << "[" << i << "]";
    }
  };
  check(x, dx, "x");
  for (moe::Param<double>* p : layer.params()) check(p->value, std::vector<double>(p->grad), p->name);
}

TEST_P(AttentionLayerTest, F32AndBf16MatchF64) {
  const AttentionConfig config = GetParam().config;
  moe::MoeConfig matmuls;
  Attention<double> reference("attn", config, matmuls, nullptr);
  reference.init(3);
  const int64_t n = kBatch * kSeq * config.embed_dim;
  const std::vector<double> x = random_values(n, 8);
  const std::vector<double> w = random_values(n, 9);
  std::vector<double> want(x.size()), want_dx(x.size(), 0.0);
  reference.forward(x.data(), kBatch, kSeq, want.data());
  reference.backward(w.data(), want_dx.data());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    matmuls.dtype = dtype;
    const double tolerance = dtype == DType::kF32 ? 1e-5 : 3e-2;
    Attention<float> layer("attn", config, matmuls, nullptr);
    moe::testing::copy_params(reference.params(), layer.params());
    const auto xf = moe::testing::cast_values<float>(x), wf = moe::testing::cast_values<float>(w);
    std::vector<float> out(xf.size()), dx(xf.size(), 0.0f);
    layer.forward(xf.data(), kBatch, kSeq, out.data());
    layer.backward(wf.data(), dx.data());
    EXPECT_LT(relative_frobenius(out, want), tolerance) << dtype_name(dtype);
    EXPECT_LT(relative_frobenius(dx, want_dx), 10 * tolerance) << dtype_name(dtype);
    for (size_t i = 0; i < layer.params().size(); ++i) {
      EXPECT_LT(relative_frobenius(layer.params()[i]->grad, reference.params()[i]->grad),
                10 * tolerance)
          << layer.params()[i]->name << " " << dtype_name(dtype);
    }
  }
}

// bf16 casts each input of its projections once a step (a CastMemo cleared
// at each forward): a second step on new values in the same buffers (the
// layer's own buffers keep their addresses) gives, bit for bit, what a fresh
// layer gives on them, so no copy of the first step's values is read again.
TEST_P(AttentionLayerTest, Bf16SecondStepIsAFreshLayersFirst) {
  const AttentionConfig config = GetParam().config;
  moe::MoeConfig matmuls;
  matmuls.dtype = DType::kBF16;
  Attention<float> stepped("attn", config, matmuls, nullptr);
  stepped.init(3);
  Attention<float> fresh("attn", config, matmuls, nullptr);
  moe::testing::copy_params(stepped.params(), fresh.params());
  moe::testing::expect_second_step_is_a_fresh_layers_first(
      stepped, fresh, kBatch * kSeq * config.embed_dim,
      [](Attention<float>& layer, const auto& x, const auto& w, auto& out, auto& dx) {
        layer.forward(x.data(), kBatch, kSeq, out.data());
        layer.backward(w.data(), dx.data());
      });
}

// The layer is causal end to end: changing x at position 4 leaves outputs
// at positions 0..3 of that sequence (and the other sequence) unchanged.
TEST_P(AttentionLayerTest, Causal) {
  const AttentionConfig config = GetParam().config;
  moe::MoeConfig matmuls;
  Attention<double> layer("attn", config, matmuls, nullptr);
  layer.init(3);
  const int64_t d = config.embed_dim, n = kBatch * kSeq * d;
  std::vector<double> x = random_values(n, 8), before(x.size()), after(x.size());
  layer.forward(x.data(), kBatch, kSeq, before.data());
  const int64_t position = 4;
  for (int64_t c = 0; c < d; ++c) x[position * d + c] += 0.5;
  layer.forward(x.data(), kBatch, kSeq, after.data());
  for (int64_t i = 0; i < position * d; ++i) EXPECT_EQ(before[i], after[i]) << i;
  for (int64_t i = kSeq * d; i < n; ++i) EXPECT_EQ(before[i], after[i]) << i;
  double moved = 0;
  for (int64_t i = position * d; i < kSeq * d; ++i) moved += std::abs(before[i] - after[i]);
  EXPECT_GT(moved, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Types, AttentionLayerTest,
    ::testing::Values(LayerCase{"mha_default", mha(2, 2, RopeType::kDefault)},
                      LayerCase{"gqa_default", mha(4, 2, RopeType::kDefault)},
                      LayerCase{"gqa_yarn", mha(3, 1, RopeType::kYarn)},
                      LayerCase{"mla_no_q_lora_yarn", mla(0, RopeType::kYarn)},
                      LayerCase{"mla_q_lora_yarn", mla(6, RopeType::kYarn)},
                      LayerCase{"mla_q_lora_default", mla(6, RopeType::kDefault)}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace raggemm::model
