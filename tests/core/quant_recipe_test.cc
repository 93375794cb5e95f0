// Recipes are parsed once at the boundary: the training config's
// `quantization` ("" | fp8_full | int8) and the CLI/Python recipe names
// (fp8 | int8) both become QuantRecipe, and a bad value names the argument
// and the value.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "raggemm/error.h"
#include "raggemm/quant_types.h"

namespace raggemm {
namespace {

void expect_error(const std::function<void()>& parse, const std::string& argument,
                  const std::string& value, const std::string& message) {
  try {
    parse();
    FAIL() << "accepted " << value;
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), argument);
    EXPECT_EQ(error.value(), value);
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

TEST(QuantRecipe, TrainingQuantizationRoundTrips) {
  EXPECT_EQ(parse_training_quantization("", "quantization"), std::nullopt);
  EXPECT_EQ(parse_training_quantization("fp8_full", "quantization"), QuantRecipe::kFp8);
  EXPECT_EQ(parse_training_quantization("int8", "quantization"), QuantRecipe::kInt8);
  for (std::optional<QuantRecipe> recipe :
       {std::optional<QuantRecipe>{}, std::optional{QuantRecipe::kFp8},
        std::optional{QuantRecipe::kInt8}}) {
    EXPECT_EQ(parse_training_quantization(training_quantization_name(recipe), "quantization"),
              recipe);
  }
  EXPECT_STREQ(training_quantization_name(std::nullopt), "");
  EXPECT_STREQ(training_quantization_name(QuantRecipe::kFp8), "fp8_full");
  EXPECT_STREQ(training_quantization_name(QuantRecipe::kInt8), "int8");
}

TEST(QuantRecipe, BadTrainingQuantizationNamesKeyAndValue) {
  // "fp8" is the CLI's name, not the config's; nothing below the boundary
  // guesses (moe/grouped_matmul.cc once treated any non-"int8" string as fp8).
  for (const char* bad : {"fp8", "FP8_FULL", "int4", "none", " int8"}) {
    SCOPED_TRACE(bad);
    expect_error([&] { parse_training_quantization(bad, "quantization"); }, "quantization", bad,
                 "expected one of: \"\", fp8_full, int8");
  }
}

TEST(QuantRecipe, CliAndPythonRecipeNames) {
  EXPECT_EQ(parse_quant_recipe("fp8", "--quant"), QuantRecipe::kFp8);
  EXPECT_EQ(parse_quant_recipe("int8", "--quant"), QuantRecipe::kInt8);
  EXPECT_STREQ(quant_recipe_name(QuantRecipe::kFp8), "fp8");
  EXPECT_STREQ(quant_recipe_name(QuantRecipe::kInt8), "int8");
  for (const char* bad : {"fp8_full", "", "e4m3"}) {
    SCOPED_TRACE(bad);
    expect_error([&] { parse_quant_recipe(bad, "--quant"); }, "--quant", bad,
                 "unknown quantization recipe (expected fp8 or int8)");
  }
}

}  // namespace
}  // namespace raggemm
