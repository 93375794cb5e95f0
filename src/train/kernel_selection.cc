// The kernel-selection rules of kernel_selection.h.
#include "train/kernel_selection.h"

#include "raggemm/error.h"

namespace raggemm::train {
namespace {

// "auto" -> nullopt; true/false spellings as the config's booleans.
std::optional<bool> parse_choice(const std::string& key, const std::string& value,
                                 bool allow_auto) {
  if (allow_auto && value == "auto") return std::nullopt;
  if (!allow_auto && value.empty()) return std::nullopt;
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  fail(key, value.empty() ? "''" : value,
       allow_auto ? "expected auto, true or false" : "expected true, false or \"\"");
}

}  // namespace

std::string KernelSelection::describe() const {
  std::string out;
  for (Pass pass : kAllPasses) {
    const size_t i = static_cast<size_t>(pass);
    out += std::string(out.empty() ? "" : ", ") + pass_name(pass) + " " +
           (kernel[i] ? kernel_name(*kernel[i]) : "auto") + " (" + reason[i] + ")";
  }
  return out;
}

KernelSelection select_kernels(const KernelKeys& keys) {
  require(keys.sparse_matmul || !keys.quantization, "sparse_matmul,quantization",
          std::string("false,") + quantization_name(keys.quantization),
          "the dense path (sparse_matmul=false) runs unquantized");
  const std::optional<bool> all_v2 = parse_choice("use_gmm_v2", keys.use_gmm_v2, true);
  KernelSelection out;
  for (Pass pass : kAllPasses) {
    const size_t i = static_cast<size_t>(pass);
    const std::string pass_key = std::string("use_gmm_v2_") + pass_name(pass);
    const std::optional<bool> pass_v2 =
        parse_choice(pass_key, keys.use_gmm_v2_pass[i], /*allow_auto=*/false);
    require(!(all_v2 == true && pass_v2 == false), "use_gmm_v2," + pass_key, "true,false",
            "use_gmm_v2=true sets every pass to v2; drop it to mix kernels per pass");
    // The key that decides this pass when the family lets the keys pick.
    const std::string decider = pass_v2 ? pass_key : std::string("use_gmm_v2");
    const std::optional<bool> asked = pass_v2 ? pass_v2 : all_v2;
    const std::string asked_text = asked ? (*asked ? "true" : "false") : "auto";
    if (!keys.use_tokamax_gmm && keys.megablox) {
      require(asked != true, "megablox," + decider, "true,true",
              "megablox is the v1 kernel in every pass; drop megablox or the v2 request");
      out.kernel[i] = KernelVersion::kV1;
      out.reason[i] = "megablox=true";
    } else {
      if (asked) out.kernel[i] = *asked ? KernelVersion::kV2 : KernelVersion::kV1;
      out.reason[i] = decider + "=" + asked_text + (asked ? "" : ": tune cache, else heuristic") +
                      (keys.use_tokamax_gmm ? ", tokamax" : "") +
                      (keys.use_tokamax_gmm && keys.megablox ? " (wins over megablox)" : "");
    }
    if (!keys.quantization) continue;
    const bool weight_blocks =
        keys.block_weight_scales && (pass == Pass::kForward || pass == Pass::kGradLhs);
    const bool activation_blocks = keys.block_activation_scales && pass == Pass::kForward;
    if (!weight_blocks && !activation_blocks) continue;
    const std::string scaling_key =
        weight_blocks ? "quantization_weight_scaling" : "quantization_activation_scaling";
    if (out.kernel[i] == KernelVersion::kV1) {
      const std::string chooser = out.reason[i] == "megablox=true" ? "megablox" : decider;
      fail(scaling_key + "," + chooser, "block," + (chooser == "megablox" ? "true" : asked_text),
           std::string("block-wise scales need the v2 kernel in the ") + pass_name(pass) + " pass");
    }
    if (!out.kernel[i]) {
      out.kernel[i] = KernelVersion::kV2;
      out.reason[i] = decider + "=auto, v2 for the block scales of " + scaling_key;
    }
  }
  return out;
}

}  // namespace raggemm::train
