#include "cli/openblas_core.h"

#include <algorithm>
#include <cctype>

extern "C" char* openblas_get_corename(void);

namespace raggemm::cli {

std::string openblas_core_name() {
  const char* name = openblas_get_corename();
  return name != nullptr ? std::string(name) : std::string("unknown");
}

int openblas_core_rank(const std::string& core) {
  std::string lower = core;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "cooperlake" || lower == "sapphirerapids") return 4;
  if (lower == "skylakex") return 3;
  if (lower == "haswell" || lower == "zen" || lower == "excavator") return 2;
  if (lower == "sandybridge" || lower == "bulldozer" || lower == "piledriver" ||
      lower == "steamroller") {
    return 1;
  }
  return 0;
}

std::string best_openblas_core_for_cpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // OpenBLAS's SkylakeX kernels use AVX-512 F, CD, BW, DQ and VL; its
  // Cooperlake core adds AVX512-BF16 (sbgemm only; sgemm is SkylakeX's).
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
#endif
  return "";
}

}  // namespace raggemm::cli
