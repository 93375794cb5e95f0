#include "kernels/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define RAGGEMM_CPU_FEATURES_X86 1
#endif

namespace raggemm::kernels {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#ifdef RAGGEMM_CPU_FEATURES_X86
  f.avx2 = __builtin_cpu_supports("avx2");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.amx_tile = __builtin_cpu_supports("amx-tile");
  f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
  // Leaf 7, sub-leaf 1, EAX bit 4 (not every compiler's
  // __builtin_cpu_supports knows "avxvnni").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) f.f16c = (ecx >> 29) & 1u;  // leaf 1, ECX bit 29
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx_vnni = f.avx2 && ((eax >> 4) & 1u);
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace raggemm::kernels
