// The CPU kernels as a backend: every pass, plain (f32, bf16, f16 storage)
// or quantized (fp8 and int8 codes decoded while packing, int8 forward on
// integer dot products), kernel generations v1 and v2, the fused output
// stage, bf16 outputs and accumulation.
#pragma once

#include "backends/backend.h"

namespace raggemm::backends::cpu {

const Backend& cpu_backend();

}  // namespace raggemm::backends::cpu
