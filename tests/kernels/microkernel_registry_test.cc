// The one microkernel registry (kernels/microkernel_registry.h): what it
// lists, what forcing does, what it refuses, and the rule that forcing
// Highway's f32 dispatch down to AVX2 rules out every AVX-512 family of
// every compute type, followed live (also by the fp8 decoder and the
// quantization encoders, after their first use).
#include "kernels/microkernel_registry.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/decode_fp8.h"
#include "kernels/gmm_kernel.h"
#include "kernels/int8_gmm.h"
#include "kernels/simd_family.h"

namespace raggemm::kernels {
namespace {

const ComputeType kTypes[] = {ComputeType::kF32, ComputeType::kBf16Dot, ComputeType::kInt8Dot};

// Lifts every forcing when a test ends, whatever it asserted.
struct Unforced {
  ~Unforced() {
    for (ComputeType type : kTypes) force_microkernel(type, "auto");
  }
};

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Ragged groups (an empty one, rows past the last group) and tiles that
// divide nothing, so every kernel's edge handling runs.
constexpr int64_t kM = 45, kK = 37, kN = 70;
const std::vector<int64_t> kStarts = {0, 13, 13, 31, 40};  // 4 groups, 5 rows uncovered

Schedule schedule() {
  Schedule s;
  s.tiles = {10, 12, 33};
  s.threads = 2;
  return s;
}

// The shape and groups above, and the output, in either problem type.
template <class Problem>
void set_shape(Problem& p, float* out) {
  p.m = kM;
  p.k = kK;
  p.n = kN;
  p.starts = kStarts.data();
  p.num_groups = p.local_groups = static_cast<int64_t>(kStarts.size()) - 1;
  p.out = out;
}

// The int8 gmm through the registry's selection (no kernel passed in).
std::vector<float> int8_run() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> code(-128, 127);
  const int64_t groups = static_cast<int64_t>(kStarts.size()) - 1;
  static std::vector<int8_t> lhs(kM * kK), rhs(groups * kK * kN);
  static std::vector<float> row_scale(kM, 0.5f), col_scale(groups * kN, 0.25f);
  for (auto& v : lhs) v = static_cast<int8_t>(code(rng));
  for (auto& v : rhs) v = static_cast<int8_t>(code(rng));
  std::vector<float> out(kM * kN, -1.0f);
  Int8GmmProblem p;
  p.lhs = lhs.data();
  p.row_scale = row_scale.data();
  p.rhs = rhs.data();
  p.rhs_group_stride = kK * kN;
  p.col_scale = col_scale.data();
  p.col_scale_group_stride = kN;
  set_shape(p, out.data());
  int8_gmm(p, schedule());
  return out;
}

// The v2 gmm on bf16 operands, which takes the registry's bf16 choice.
std::vector<float> bf16_run() {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t groups = static_cast<int64_t>(kStarts.size()) - 1;
  auto bf16 = [&](int64_t count) {
    std::vector<uint16_t> v(count);
    for (auto& x : v) {
      const float f = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      x = static_cast<uint16_t>(bits >> 16);
    }
    return v;
  };
  const std::vector<uint16_t> lhs = bf16(kM * kK), rhs = bf16(groups * kK * kN);
  std::vector<float> out(kM * kN, -1.0f);
  GmmProblem p;
  p.lhs = {lhs.data(), DType::kBF16, kK};
  p.rhs.base = {rhs.data(), DType::kBF16, kN};
  p.rhs.stride = kK * kN;
  set_shape(p, out.data());
  gmm_v2(p, schedule());
  return out;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Every kernel whose CPU features this CPU has is listed, in the order
// registered, and nothing else; the typed views list the same.
TEST(MicrokernelRegistry, ListsEveryKernelThisCpuRuns) {
  const CpuFeatures& cpu = cpu_features();
  std::vector<std::string> int8, bf16, f32;
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vnni) int8.push_back("AVX512_VNNI");
  if (cpu.avx2 && cpu.avx_vnni) int8.push_back("AVX_VNNI");
  if (cpu.avx2) int8.push_back("AVX2");
  if (cpu.amx_tile && cpu.amx_bf16 && amx_tile_data_permitted()) bf16.push_back("AMX_BF16");
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512bf16) bf16.push_back("AVX512_BF16");
#endif
  int8.push_back("SCALAR");
  bf16.push_back("SCALAR");
  hwy::SetSupportedTargetsForTest(0);
  const int64_t targets = microkernel_targets();
  for (int64_t bits = targets; bits != 0; bits &= bits - 1)
    f32.push_back(target_name(bits & -bits));
  EXPECT_EQ(microkernel_names(ComputeType::kInt8Dot), int8);
  EXPECT_EQ(microkernel_names(ComputeType::kBf16Dot), bf16);
  EXPECT_EQ(microkernel_names(ComputeType::kF32), f32);
  std::vector<std::string> typed;
  for (const Int8Microkernel& uk : int8_microkernels()) typed.push_back(uk.target);
  EXPECT_EQ(typed, int8);
  typed.clear();
  for (const Bf16Microkernel& uk : bf16_microkernels()) typed.push_back(uk.target);
  EXPECT_EQ(typed, bf16);
  // A target forced now does not shorten what the CPU runs.
  if (targets & HWY_AVX2) {
    Unforced unforced;
    ASSERT_TRUE(force_microkernel(ComputeType::kF32, "AVX2"));
    EXPECT_EQ(microkernel_names(ComputeType::kF32), f32);
  }
  for (ComputeType type : kTypes) {
    for (const MicrokernelInfo& info : registered_microkernels(type)) {
      EXPECT_EQ(info.runs_here, listed(microkernel_names(type), info.target)) << info.target;
      if (info.runs_here) {
        EXPECT_GT(info.mr, 0) << info.target;
        EXPECT_GT(info.nr, 0) << info.target;
      }
    }
  }
}

// Forcing each kernel by name makes it the one the drivers run, and it
// computes the bits of the portable scalar twin (integer sums are exact;
// the bf16 twin follows vdpbf16ps's roundings; AMX_BF16 comes close).
TEST(MicrokernelRegistry, EachForcedKernelRunsTheScalarTwinsBits) {
  Unforced unforced;
  ASSERT_TRUE(force_microkernel(ComputeType::kInt8Dot, "SCALAR"));
  const std::vector<float> int8_want = int8_run();
  for (const std::string& name : microkernel_names(ComputeType::kInt8Dot)) {
    ASSERT_TRUE(force_microkernel(ComputeType::kInt8Dot, name)) << name;
    EXPECT_EQ(selected_microkernel(ComputeType::kInt8Dot), name);
    EXPECT_STREQ(select_int8_microkernel().target, name.c_str());
    EXPECT_TRUE(same_bits(int8_run(), int8_want)) << name;
  }
  ASSERT_TRUE(force_microkernel(ComputeType::kBf16Dot, "SCALAR"));
  const std::vector<float> bf16_want = bf16_run();
  for (const std::string& name : microkernel_names(ComputeType::kBf16Dot)) {
    ASSERT_TRUE(force_microkernel(ComputeType::kBf16Dot, name)) << name;
    EXPECT_EQ(selected_microkernel(ComputeType::kBf16Dot), name);
    ASSERT_NE(select_bf16_microkernel(), nullptr);
    EXPECT_STREQ(select_bf16_microkernel()->target, name.c_str());
    if (select_bf16_microkernel()->layout == Bf16Layout::kPairs) {
      EXPECT_TRUE(same_bits(bf16_run(), bf16_want)) << name;
    } else {  // AMX rounds as its hardware does (bf16_microkernel.h): close, not the twin's bits
      const std::vector<float> got = bf16_run();
      ASSERT_EQ(got.size(), bf16_want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], bf16_want[i], 1e-5 * (1 + std::fabs(bf16_want[i]))) << name << " " << i;
      }
    }
  }
  ASSERT_TRUE(force_microkernel(ComputeType::kBf16Dot, "WIDEN"));
  EXPECT_EQ(select_bf16_microkernel(), nullptr);
  EXPECT_EQ(selected_microkernel(ComputeType::kBf16Dot), "WIDEN");
  for (const std::string& name : microkernel_names(ComputeType::kF32)) {
    ASSERT_TRUE(force_microkernel(ComputeType::kF32, name)) << name;
    EXPECT_EQ(selected_microkernel(ComputeType::kF32), name);
    EXPECT_STREQ(select_microkernel().target, name.c_str());
  }
}

// A name that is not a kernel of that compute type on this CPU is refused
// and changes nothing.
TEST(MicrokernelRegistry, RefusesKernelsThisCpuCannotRun) {
  Unforced unforced;
  for (ComputeType type : kTypes) {
    const std::string before = selected_microkernel(type);
    std::vector<std::string> refused = {"NO_SUCH_KERNEL", "NEON_DOTPROD"};
    for (const MicrokernelInfo& info : registered_microkernels(type)) {
      if (!info.runs_here) refused.push_back(info.target);  // registered, CPU lacks it
    }
    for (ComputeType other : kTypes) {  // another type's kernels are not this type's
      for (const std::string& name : microkernel_names(other)) {
        if (!listed(microkernel_names(type), name)) refused.push_back(name);
      }
    }
    if (type != ComputeType::kBf16Dot) refused.push_back("WIDEN");
    for (const std::string& name : refused) {
      EXPECT_FALSE(force_microkernel(type, name)) << compute_type_name(type) << " " << name;
      EXPECT_EQ(selected_microkernel(type), before) << compute_type_name(type) << " " << name;
    }
  }
}

// Forcing the f32 dispatch to AVX2 rules out the AVX-512 family of every
// compute type at once; lifting it brings them back.
TEST(MicrokernelRegistry, HighwayForcedToAvx2RulesOutAvx512Everywhere) {
  if (!(microkernel_targets() & HWY_AVX2)) GTEST_SKIP() << "no AVX2 target here";
  Unforced unforced;
  const std::string int8_best = microkernel_names(ComputeType::kInt8Dot).front();
  ASSERT_TRUE(force_microkernel(ComputeType::kF32, "AVX2"));
  EXPECT_EQ(highway_family(), VectorFamily::kAvx2);
  EXPECT_FALSE(avx512_family_allowed());
  EXPECT_TRUE(avx2_family_allowed());
  for (ComputeType type : kTypes) {
    EXPECT_LE(static_cast<int>(selected_family(type)), static_cast<int>(VectorFamily::kAvx2))
        << compute_type_name(type) << " runs " << selected_microkernel(type);
  }
  EXPECT_EQ(selected_microkernel(ComputeType::kF32), "AVX2");
  EXPECT_NE(selected_microkernel(ComputeType::kInt8Dot), "AVX512_VNNI");
  EXPECT_EQ(selected_microkernel(ComputeType::kBf16Dot), "WIDEN");
  // The same through Highway's own switch, as `--target` and older tests do it.
  ASSERT_TRUE(force_microkernel(ComputeType::kF32, "auto"));
  hwy::SetSupportedTargetsForTest(HWY_AVX2);
  EXPECT_NE(selected_microkernel(ComputeType::kInt8Dot), "AVX512_VNNI");
  EXPECT_EQ(selected_microkernel(ComputeType::kBf16Dot), "WIDEN");
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_EQ(selected_microkernel(ComputeType::kInt8Dot), int8_best);
  if (cpu_features().avx512()) {
    EXPECT_EQ(highway_family(), VectorFamily::kAvx512);
    EXPECT_TRUE(avx512_family_allowed());
  }
}

// The fp8 decoder and the encoders' family test (kernels/simd_family.h,
// asked by ops/fp8_encode.cc and ops/int8_encode.cc on every call) follow a
// Highway target forced after their first use; the decoded bits do not
// change with the implementation.
TEST(MicrokernelRegistry, Fp8DecoderAndEncodersFollowATargetForcedAfterFirstUse) {
  Unforced unforced;
  std::vector<uint8_t> codes(300);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7);
  std::vector<float> first(codes.size()), later(codes.size());
  decode_fp8_span(DType::kF8E4M3, codes.data(), static_cast<int64_t>(codes.size()), 0.5f, nullptr,
                  first.data());  // first use, unforced
  const CpuFeatures& cpu = cpu_features();
  const int64_t targets = microkernel_targets();
  const bool avx512 = cpu.avx512() && (targets & (HWY_AVX3 | HWY_AVX3_DL));
  const bool avx2 = cpu.avx2 && (targets & HWY_AVX2);
  EXPECT_STREQ(decode_fp8_implementation(), avx512 ? "AVX512" : avx2 ? "AVX2" : "SCALAR");
  EXPECT_EQ(avx512_family_allowed(),
            avx512);  // the encoders' first use, unforced
  EXPECT_EQ(avx2_family_allowed(), avx512 || avx2);
  struct Step {
    int64_t target;
    const char* decoder;
    bool avx512, avx2;
  };
  const Step steps[] = {{HWY_AVX2, "AVX2", false, true},
                        {HWY_SSE4, "SCALAR", false, false},
                        {HWY_EMU128, "SCALAR", false, false}};
  int forced = 0;
  for (const Step& step : steps) {
    if (!(targets & step.target)) continue;
    ASSERT_TRUE(force_microkernel(ComputeType::kF32, target_name(step.target)));
    EXPECT_STREQ(decode_fp8_implementation(), step.decoder) << target_name(step.target);
    EXPECT_EQ(avx512_family_allowed(), step.avx512) << target_name(step.target);
    EXPECT_EQ(avx2_family_allowed(), step.avx2) << target_name(step.target);
    decode_fp8_span(DType::kF8E4M3, codes.data(), static_cast<int64_t>(codes.size()), 0.5f, nullptr,
                    later.data());
    EXPECT_TRUE(same_bits(first, later)) << target_name(step.target);
    ++forced;
  }
  EXPECT_GE(forced, 1);
}

}  // namespace
}  // namespace raggemm::kernels
