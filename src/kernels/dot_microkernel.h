// What the registry (microkernel_registry.h) and the drivers know of a
// hand-written dot-product microkernel, whatever its operand types: its
// register tile and its entry point. Each compute type's header gives the
// entry point's signature and the packed layouts it reads.
#pragma once

namespace raggemm::kernels {

template <class RunFn>
struct DotMicrokernel {
  int mr = 0;               // rows of the register tile (A micro-panel height)
  int nr = 0;               // columns (B micro-panel width)
  const char* target = "";  // its name in the registry: "AVX512_BF16", "AVX2", "SCALAR", ...
  RunFn run = nullptr;      // null: this build lacks its instructions
};

}  // namespace raggemm::kernels
