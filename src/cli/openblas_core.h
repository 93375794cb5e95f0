// Which OpenBLAS kernel ("core") runs here, and which is the best this CPU
// could run. OpenBLAS (DYNAMIC_ARCH) picks its core when it loads, honouring
// OPENBLAS_CORETYPE; an environment that names a lesser core than the CPU
// supports (this project's Zen 5 machine sets Haswell) makes it a weaker
// peer than it is. The bench then times an unrestricted peer in a child
// process (cli/peer_child.h).
#pragma once

#include <string>

namespace raggemm::cli {

// openblas_get_corename() of the loaded library, e.g. "Haswell", "Zen".
std::string openblas_core_name();

// The widest-SIMD class of a core name, for comparing cores: 0 unknown or
// pre-AVX2, 1 AVX (Sandybridge), 2 AVX2 + FMA (Haswell, Zen, SkylakeX
// without AVX-512 use), 3 AVX-512 (SkylakeX), 4 AVX-512 + BF16 (Cooperlake,
// Sapphire Rapids). Case-insensitive.
int openblas_core_rank(const std::string& core);

// The best core OpenBLAS 0.3.x can run on this CPU, read from CPUID
// ("Cooperlake", "SkylakeX", "Haswell", "Sandybridge"), or "" if none
// of those applies (OpenBLAS then picks by itself).
std::string best_openblas_core_for_cpu();

}  // namespace raggemm::cli
