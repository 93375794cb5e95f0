// The config keys of tile plans: what they set, and the errors for bad values
// and unknown keys (naming the key, suggesting the nearest valid one).
#include <gtest/gtest.h>

#include <string>

#include "raggemm/error.h"
#include "raggemm/moe_plan.h"

namespace raggemm {
namespace {

TEST(PlanSettings, TileKeySetsOnlyItsField) {
  BlockPlan plan;
  apply_plan_setting(plan, "wo_tile_dlhs_mlp_dim=384");
  BlockPlan expected;
  expected.wo.pass(Pass::kGradLhs).tiles.mlp_dim = 384;
  EXPECT_EQ(plan, expected);
}

TEST(PlanSettings, KernelKeys) {
  // The hybrid fwd=v2, dlhs=v1, drhs=v2, with the per-pass keys overriding the global one.
  const BlockPlan plan = parse_plan_settings({"use_gmm_v2=true", "use_gmm_v2_dlhs=false"});
  for (Weight weight : kAllWeights) {
    EXPECT_EQ(plan.weight(weight).pass(Pass::kForward).kernel, KernelVersion::kV2);
    EXPECT_EQ(plan.weight(weight).pass(Pass::kGradLhs).kernel, KernelVersion::kV1);
    EXPECT_EQ(plan.weight(weight).pass(Pass::kGradRhs).kernel, KernelVersion::kV2);
  }
  const BlockPlan only_drhs = parse_plan_settings({"use_gmm_v2_drhs=1"});
  EXPECT_FALSE(only_drhs.wi.pass(Pass::kForward).kernel.has_value());
  EXPECT_EQ(only_drhs.wo.pass(Pass::kGradRhs).kernel, KernelVersion::kV2);
}

TEST(PlanSettings, InputBufferCountSetsEveryPass) {
  const BlockPlan plan = parse_plan_settings({"input_buffer_count=3"});
  for (Weight weight : kAllWeights) {
    for (const PassConfig& config : plan.weight(weight).passes) EXPECT_EQ(config.input_buffer_count, 3);
  }
}

TEST(PlanSettings, PerPassInputBufferCountSetsOnlyItsWeightAndPass) {
  const BlockPlan plan = parse_plan_settings({"wo_input_buffer_count_dlhs=4"});
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) {
      const bool named = weight == Weight::kWo && pass == Pass::kGradLhs;
      EXPECT_EQ(plan.weight(weight).pass(pass).input_buffer_count,
                named ? std::optional<int>(4) : std::nullopt)
          << weight_name(weight) << " " << pass_name(pass);
    }
  }
}

TEST(PlanSettings, PerPassInputBufferCountBeatsTheGlobalKeyInEitherOrder) {
  for (const std::vector<std::string>& settings :
       {std::vector<std::string>{"input_buffer_count=2", "wi_input_buffer_count_drhs=3"},
        std::vector<std::string>{"wi_input_buffer_count_drhs=3", "input_buffer_count=2"}}) {
    const BlockPlan plan = parse_plan_settings(settings);
    EXPECT_EQ(plan.wi.pass(Pass::kGradRhs).input_buffer_count, 3) << settings[0];
    EXPECT_EQ(plan.wi.pass(Pass::kForward).input_buffer_count, 2) << settings[0];
    EXPECT_EQ(plan.wo.pass(Pass::kGradRhs).input_buffer_count, 2) << settings[0];
  }
}

TEST(PlanSettings, EveryListedKeyIsAccepted) {
  for (const std::string& key : plan_setting_keys()) {
    SCOPED_TRACE(key);
    BlockPlan plan;
    const std::string value = key.find("tile") != std::string::npos               ? "64"
                              : key.find("input_buffer_count") != std::string::npos ? "2"
                                                                                    : "true";
    EXPECT_NO_THROW(apply_plan_setting(plan, key, value));
    EXPECT_NE(plan, BlockPlan{});
    EXPECT_TRUE(is_plan_setting_key(key));
  }
  EXPECT_EQ(plan_setting_keys().size(), 2u * 3u * 3u + 1u + 3u + 1u + 2u * 3u);
}

struct BadValue {
  std::string key;
  std::string value;
};

class PlanSettingsBadValue : public testing::TestWithParam<BadValue> {};

TEST_P(PlanSettingsBadValue, ThrowsNamingTheKey) {
  const BadValue& bad = GetParam();
  BlockPlan plan;
  try {
    apply_plan_setting(plan, bad.key + "=" + bad.value);
    FAIL() << "accepted " << bad.key << "=" << bad.value;
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), bad.key);
    EXPECT_NE(std::string(error.what()).find(bad.key), std::string::npos) << error.what();
  }
  EXPECT_EQ(plan, BlockPlan{}) << "a rejected setting must change nothing";
}

INSTANTIATE_TEST_SUITE_P(
    Values, PlanSettingsBadValue,
    testing::Values(BadValue{"wi_tile_fwd_batch_seq", "0"}, BadValue{"wi_tile_fwd_batch_seq", "-128"},
                    BadValue{"wo_tile_drhs_mlp_dim", "abc"}, BadValue{"wo_tile_drhs_mlp_dim", "12abc"},
                    BadValue{"wi_tile_dlhs_embed_dim", "1.5"}, BadValue{"wi_tile_dlhs_embed_dim", ""},
                    BadValue{"wi_tile_dlhs_embed_dim", " 64"},
                    BadValue{"wo_tile_fwd_embed_dim", "99999999999999999999999"},
                    BadValue{"use_gmm_v2", "maybe"}, BadValue{"use_gmm_v2_fwd", "2"},
                    BadValue{"input_buffer_count", "0"}, BadValue{"input_buffer_count", "5"},
                    BadValue{"input_buffer_count", "-1"}, BadValue{"input_buffer_count", "two"},
                    BadValue{"wi_input_buffer_count_fwd", "0"},
                    BadValue{"wo_input_buffer_count_drhs", "5"},
                    BadValue{"wi_input_buffer_count_dlhs", "2x"},
                    BadValue{"wo_input_buffer_count_fwd", ""}));

struct UnknownKey {
  std::string key;
  std::string nearest;
};

class PlanSettingsUnknownKey : public testing::TestWithParam<UnknownKey> {};

TEST_P(PlanSettingsUnknownKey, SuggestsTheNearestKey) {
  const UnknownKey& unknown = GetParam();
  EXPECT_EQ(nearest_plan_setting_key(unknown.key), unknown.nearest);
  BlockPlan plan;
  try {
    apply_plan_setting(plan, unknown.key, "64");
    FAIL() << "accepted " << unknown.key;
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), unknown.key);
    const std::string message = error.what();
    EXPECT_NE(message.find("unknown"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + unknown.nearest + "'"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Keys, PlanSettingsUnknownKey,
    testing::Values(UnknownKey{"wi_tile_fwd_batchseq", "wi_tile_fwd_batch_seq"},
                    UnknownKey{"wi_tile_dlsh_mlp_dim", "wi_tile_dlhs_mlp_dim"},
                    UnknownKey{"wo_tile_drhs_embed", "wo_tile_drhs_embed_dim"},
                    UnknownKey{"woo_tile_fwd_mlp_dim", "wo_tile_fwd_mlp_dim"},
                    UnknownKey{"use_gmm_v3", "use_gmm_v2"},
                    UnknownKey{"use_gmm_v2_dhls", "use_gmm_v2_dlhs"},
                    UnknownKey{"input_buffers_count", "input_buffer_count"},
                    UnknownKey{"wi_input_buffer_count_fw", "wi_input_buffer_count_fwd"},
                    UnknownKey{"wo_input_buffer_cnt_drhs", "wo_input_buffer_count_drhs"}));

TEST(PlanSettings, MissingEqualsIsRejected) {
  BlockPlan plan;
  EXPECT_THROW(apply_plan_setting(plan, "wi_tile_fwd_batch_seq"), Error);
}

TEST(PlanSettings, TileValueParser) {
  EXPECT_EQ(parse_tile_value("256", "t"), 256);
  for (const char* bad : {"0", "-1", "x", "", "1e3", "+4"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_tile_value(bad, "t"), Error);
  }
}

}  // namespace
}  // namespace raggemm
