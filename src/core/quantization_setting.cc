// The `quantization` setting's spellings, in one place: configs, the tune
// cache's keys and the logs all write these, and only this file reads them.
#include "raggemm/error.h"
#include "raggemm/quant_types.h"

namespace raggemm {

namespace {

struct QuantizationSpelling {
  Quantization value;
  const char* name;
};

constexpr QuantizationSpelling kSpellings[] = {
    {std::nullopt, ""},
    {QuantRecipe::kFp8, "fp8_full"},
    {QuantRecipe::kInt8, "int8"},
};

}  // namespace

Quantization parse_quantization(std::string_view text, const std::string& key) {
  std::string accepted;
  for (const QuantizationSpelling& spelling : kSpellings) {
    if (text == spelling.name) return spelling.value;
    const std::string shown = *spelling.name ? spelling.name : "\"\"";
    accepted += (accepted.empty() ? "" : ", ") + shown;
  }
  fail(key, text.empty() ? "''" : std::string(text), "expected one of: " + accepted);
}

const char* quantization_name(Quantization quantization) {
  for (const QuantizationSpelling& spelling : kSpellings)
    if (spelling.value == quantization) return spelling.name;
  return "";  // unreachable: every QuantRecipe has a spelling
}

}  // namespace raggemm
