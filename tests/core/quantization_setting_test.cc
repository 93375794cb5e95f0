// The `quantization` setting is parsed once, where text comes in: every
// spelling configs and tune cache keys use maps to its recipe and back, and
// anything else is refused naming the key and the text.
#include <gtest/gtest.h>

#include <string>

#include "raggemm/error.h"
#include "raggemm/quant_types.h"

namespace raggemm {
namespace {

TEST(QuantizationSetting, EverySpellingRoundTrips) {
  EXPECT_EQ(parse_quantization("", "quantization"), std::nullopt);
  EXPECT_EQ(parse_quantization("fp8_full", "quantization"), QuantRecipe::kFp8);
  EXPECT_EQ(parse_quantization("int8", "quantization"), QuantRecipe::kInt8);
  for (const Quantization q : {Quantization{}, Quantization{QuantRecipe::kFp8},
                               Quantization{QuantRecipe::kInt8}})
    EXPECT_EQ(parse_quantization(quantization_name(q), "quantization"), q);
  EXPECT_STREQ(quantization_name(std::nullopt), "");
  EXPECT_STREQ(quantization_name(QuantRecipe::kFp8), "fp8_full");
  EXPECT_STREQ(quantization_name(QuantRecipe::kInt8), "int8");
}

TEST(QuantizationSetting, RecipesAgreeWithTheOpsSpelling) {
  // The ops' recipe names (Python quant=, CLI --quant) name the same enums.
  EXPECT_EQ(parse_quantization("fp8_full", "q"), parse_quant_recipe("fp8", "q"));
  EXPECT_EQ(parse_quantization("int8", "q"), parse_quant_recipe("int8", "q"));
}

std::string refusal(const std::string& text, const std::string& key) {
  try {
    parse_quantization(text, key);
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), key);
    return e.what();
  }
  ADD_FAILURE() << text << " accepted";
  return "";
}

TEST(QuantizationSetting, AnythingElseIsRefusedNamingKeyAndText) {
  const std::string expected = ": expected one of: \"\", fp8_full, int8";
  EXPECT_EQ(refusal("fp4", "quantization"), "quantization=fp4" + expected);
  // The ops' spelling and the storage names are not config values.
  EXPECT_EQ(refusal("fp8", "quantization"), "quantization=fp8" + expected);
  EXPECT_EQ(refusal("fp8_e4m3", "quantization"), "quantization=fp8_e4m3" + expected);
  EXPECT_EQ(refusal("none", "quantization"), "quantization=none" + expected);
  EXPECT_EQ(refusal("INT8", "quantization"), "quantization=INT8" + expected);
  EXPECT_EQ(refusal(" int8", "quantization"), "quantization= int8" + expected);
  EXPECT_EQ(refusal("fp4", "moe.quantization"), "moe.quantization=fp4" + expected);
}

TEST(QuantRecipeNames, ParsedOnceAtTheOpsBoundary) {
  EXPECT_EQ(parse_quant_recipe(quant_recipe_name(QuantRecipe::kFp8), "quant"), QuantRecipe::kFp8);
  EXPECT_EQ(parse_quant_recipe(quant_recipe_name(QuantRecipe::kInt8), "quant"),
            QuantRecipe::kInt8);
  try {
    parse_quant_recipe("fp8_full", "--quant");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "--quant");
    EXPECT_STREQ(e.what(),
                 "--quant=fp8_full: unknown quantization recipe (expected fp8 or int8)");
  }
}

}  // namespace
}  // namespace raggemm
