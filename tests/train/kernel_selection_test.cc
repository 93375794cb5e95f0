// The kernel-selection table: every combination of sparse_matmul, megablox,
// use_tokamax_gmm, use_gmm_v2 (auto/true/false), use_gmm_v2_{fwd,dlhs,drhs}
// (""/true/false), quantization ("", fp8_full, int8) and block weight /
// activation scales either resolves to one stated kernel per pass or is
// refused naming the conflicting keys. The oracle below restates the rules
// of kernel_selection.h as a lookup; hand-written rows pin the cases that
// matter most (MaxText's missing-elif bug: dlhs v1 asked, v2 ran).
#include "train/kernel_selection.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "raggemm/error.h"

namespace raggemm::train {
namespace {

// What the table expects: a kernel per pass ('1', '2', 'a' for auto), or the
// two keys a refusal must name.
struct Expected {
  std::string kernels;  // e.g. "2a1"
  std::string refused_keys;
};

Expected oracle(const KernelKeys& k) {
  if (!k.sparse_matmul && k.quantization.has_value()) return {"", "sparse_matmul,quantization"};
  Expected out;
  for (int p = 0; p < 3; ++p) {
    const std::string& pass = k.use_gmm_v2_pass[p];
    const std::string pass_key = std::string("use_gmm_v2_") + (p == 0   ? "fwd"
                                                               : p == 1 ? "dlhs"
                                                                        : "drhs");
    if (k.use_gmm_v2 == "true" && pass == "false") return {"", "use_gmm_v2," + pass_key};
    const std::string asked = pass.empty() ? k.use_gmm_v2 : pass;
    const std::string decider = pass.empty() ? "use_gmm_v2" : pass_key;
    char kernel = asked == "true" ? '2' : asked == "false" ? '1' : 'a';
    std::string chooser = decider;
    if (k.megablox && !k.use_tokamax_gmm) {
      if (asked == "true") return {"", "megablox," + decider};
      kernel = '1';
      chooser = "megablox";
    }
    const bool blocks = k.quantization.has_value() &&
                        ((k.block_weight_scales && p < 2) || (k.block_activation_scales && p == 0));
    if (blocks) {
      const std::string scaling = k.block_weight_scales && p < 2
                                      ? "quantization_weight_scaling"
                                      : "quantization_activation_scaling";
      if (kernel == '1') return {"", scaling + "," + chooser};
      kernel = '2';
    }
    out.kernels += kernel;
  }
  return out;
}

std::string kernels_of(const KernelSelection& s) {
  std::string out;
  for (const auto& kernel : s.kernel)
    out += kernel ? (*kernel == KernelVersion::kV2 ? '2' : '1') : 'a';
  return out;
}

std::vector<KernelKeys> every_combination() {
  std::vector<KernelKeys> all;
  const std::vector<std::string> pass_values = {"", "true", "false"};
  for (int bits = 0; bits < 16; ++bits) {
    for (const char* v2 : {"auto", "true", "false"}) {
      for (int passes = 0; passes < 27; ++passes) {
        for (const char* quantization : {"", "fp8_full", "int8"}) {  // as the config spells them
          KernelKeys k;
          k.sparse_matmul = bits & 1;
          k.megablox = bits & 2;
          k.use_tokamax_gmm = bits & 4;
          k.block_weight_scales = bits & 8;
          k.use_gmm_v2 = v2;
          for (int p = 0, rest = passes; p < 3; ++p, rest /= 3)
            k.use_gmm_v2_pass[p] = pass_values[rest % 3];
          k.quantization = parse_quantization(quantization, "quantization");
          all.push_back(k);
          k.block_activation_scales = true;
          all.push_back(k);
        }
      }
    }
  }
  return all;
}

TEST(KernelSelection, EveryCombinationResolvesOrIsRefusedNamingItsKeys) {
  int resolved = 0, refused = 0;
  for (const KernelKeys& keys : every_combination()) {
    const Expected expected = oracle(keys);
    std::string got_kernels, message;
    try {
      const KernelSelection s = select_kernels(keys);
      got_kernels = kernels_of(s);
      for (const std::string& reason : s.reason) EXPECT_FALSE(reason.empty());
      ++resolved;
    } catch (const Error& e) {
      message = e.what();
      ++refused;
    }
    const std::string label = std::string("sparse=") + (keys.sparse_matmul ? "1" : "0") +
                              " megablox=" + (keys.megablox ? "1" : "0") +
                              " tokamax=" + (keys.use_tokamax_gmm ? "1" : "0") +
                              " v2=" + keys.use_gmm_v2 + " passes=" + keys.use_gmm_v2_pass[0] +
                              "/" + keys.use_gmm_v2_pass[1] + "/" + keys.use_gmm_v2_pass[2] +
                              " q=" + quantization_name(keys.quantization);
    if (expected.refused_keys.empty()) {
      EXPECT_EQ(got_kernels, expected.kernels) << label << " refused: " << message;
    } else {
      EXPECT_NE(message.find(expected.refused_keys), std::string::npos)
          << label << " expected a refusal naming " << expected.refused_keys << ", got '" << message
          << "' kernels " << got_kernels;
    }
  }
  EXPECT_EQ(resolved + refused, 16 * 3 * 27 * 3 * 2);
  EXPECT_GT(resolved, 0);
  EXPECT_GT(refused, 0);
}

TEST(KernelSelection, HandWrittenRows) {
  struct Row {
    KernelKeys keys;
    std::string kernels;
  };
  KernelKeys hybrid;
  hybrid.use_gmm_v2 = "false";
  hybrid.use_gmm_v2_pass = {"true", "", "true"};
  KernelKeys tokamax_v2 = hybrid;
  tokamax_v2.use_tokamax_gmm = true;
  tokamax_v2.megablox = true;  // tokamax wins
  KernelKeys megablox;
  megablox.megablox = true;
  KernelKeys fwd_only;
  fwd_only.use_gmm_v2_pass = {"true", "false", ""};
  KernelKeys blocks;
  blocks.quantization = QuantRecipe::kFp8;
  blocks.block_weight_scales = true;
  for (const Row& row : std::vector<Row>{{KernelKeys{}, "aaa"},
                                         {hybrid, "212"},
                                         {tokamax_v2, "212"},
                                         {megablox, "111"},
                                         {fwd_only, "21a"},
                                         {blocks, "22a"}}) {
    EXPECT_EQ(kernels_of(select_kernels(row.keys)), row.kernels);
  }
  KernelKeys conflict = megablox;
  conflict.use_gmm_v2_pass[1] = "true";
  try {
    select_kernels(conflict);
    FAIL() << "megablox with use_gmm_v2_dlhs=true must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("megablox,use_gmm_v2_dlhs"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace raggemm::train
