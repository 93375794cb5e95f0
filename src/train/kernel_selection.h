// Which grouped-matmul kernel each pass runs, from the selection keys, or a
// refusal naming the keys that conflict (docs/moe_configuration.md, "Kernel
// selection"). The rules, in order:
//   1. sparse_matmul=false (the dense path) runs unquantized: a quantization
//      is refused (sparse_matmul,quantization). The kernel keys below still
//      pick the kernel of its batched matmuls over experts.
//   2. use_gmm_v2=true with use_gmm_v2_PASS=false is refused (use_gmm_v2 sets
//      every pass; drop it to mix kernels).
//   3. use_tokamax_gmm=true: the tokamax family, which has both generations:
//      the use_gmm_v2 keys pick (megablox is ignored: tokamax wins, as in
//      MaxText).
//   4. else megablox=true: megablox is v1 in every pass; a key asking v2
//      (use_gmm_v2=true or use_gmm_v2_PASS=true) is refused (megablox,KEY).
//   5. else the use_gmm_v2 keys pick: use_gmm_v2_PASS when set, else
//      use_gmm_v2 (true: v2, false: v1, auto: the plan resolves it per
//      problem, tune cache else heuristic).
//   6. quantized block scales exist on v2 only: weight block scales in fwd
//      and dlhs, activation block scales in fwd. A pass that would run v1
//      there is refused (quantization_weight_scaling or
//      quantization_activation_scaling, with the key that chose v1); an auto
//      pass becomes v2.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "raggemm/gmm.h"
#include "raggemm/plan.h"
#include "raggemm/quant_types.h"

namespace raggemm::train {

struct KernelKeys {
  bool sparse_matmul = true;
  bool megablox = false;
  bool use_tokamax_gmm = false;
  std::string use_gmm_v2 = "auto";               // auto | true | false
  std::array<std::string, 3> use_gmm_v2_pass{};  // "" | true | false, indexed by Pass
  Quantization quantization;                     // the `quantization` key, parsed
  bool block_weight_scales = false;
  bool block_activation_scales = false;
};

struct KernelSelection {
  // Per pass: the kernel, or nullopt for auto (the plan resolves it).
  std::array<std::optional<KernelVersion>, 3> kernel{};
  std::array<std::string, 3> reason{};  // the key (and value) that decided
  // One line for the startup log: "fwd v2 (use_gmm_v2_fwd=true), ...".
  std::string describe() const;
};

// Throws Error naming the conflicting keys.
KernelSelection select_kernels(const KernelKeys& keys);

}  // namespace raggemm::train
