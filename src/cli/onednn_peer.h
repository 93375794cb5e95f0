// The oneDNN peer of `raggemm bench`: oneDNN's f32 matmul primitive, which
// picks its kernel from the CPU's ISA itself, timed as a per-group loop (one
// matmul per non-empty group) and as one dense matmul of the same total
// size, on the same operands as the OpenBLAS peers (cli/bench_runners.h).
//
// Every primitive and memory object is created in the constructor, so the
// timed calls only execute: one primitive per distinct group size, as a
// framework that caches primitives by shape would run them.
//
// Built only where CMake finds oneDNN (Debian libdnnl-dev); elsewhere
// onednn_available() is false and the bench reports no oneDNN peer.
#pragma once

#include <memory>
#include <string>

#include "cli/bench_runners.h"

namespace raggemm::bench {

bool onednn_available();

class OneDnnPeer {
 public:
  // `dense` uses p.out as the dense output (dense_out_elements floats);
  // `loop` uses loop_out (the op's full output).
  OneDnnPeer(const PeerOperands& p, float* loop_out, float* dense_out);
  ~OneDnnPeer();
  OneDnnPeer(const OneDnnPeer&) = delete;
  OneDnnPeer& operator=(const OneDnnPeer&) = delete;

  void run_loop();
  void run_dense();
  // The ISA oneDNN dispatches to and the implementation it chose for the
  // dense matmul, e.g. "avx512_core_bf16 (brg:avx512_core)".
  std::string kernel() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace raggemm::bench
