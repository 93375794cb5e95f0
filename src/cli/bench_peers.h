// The peers of `raggemm bench`, each at its best on this machine
// (DESIGN.md section 7, docs/performance.md):
//  - OpenBLAS as this process loaded it (its core name read from the
//    library; labelled with the OPENBLAS_CORETYPE that restricts it, if any);
//  - OpenBLAS unrestricted, in a child process (cli/peer_child.h), when the
//    core loaded here is of a lesser class than the best this CPU supports
//    (cli/openblas_core.h); trusted only after its outputs match the f64
//    reference on sampled elements (cli/peer_check.h);
//  - oneDNN's matmul, which dispatches on the ISA itself (cli/onednn_peer.h).
// Each times a per-group loop and one dense product of the same total size.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/bench_runners.h"

namespace raggemm::bench {

struct PeerResult {
  std::string name;    // "openblas" or "onednn"
  std::string kernel;  // OpenBLAS core name, or oneDNN's ISA (implementation)
  double loop_seconds = 0, dense_seconds = 0;
  double loop_check = 0, dense_check = 0;  // sampled relative errors vs f64
  std::string restricted_by;  // e.g. "OPENBLAS_CORETYPE=Haswell", or empty
  bool child_process = false;
  bool trusted() const;       // both checks within kCheckTolerance
};

// f32 rounding gives sampled relative errors near 1e-6; a wrong kernel ~1.
constexpr double kPeerCheckTolerance = 1e-4;

// OpenBLAS in this process: times the loop (into loop_out, the op's full
// output) and the dense product (into dense_out), then checks both.
PeerResult time_openblas(const PeerOperands& p, float* loop_out, float* dense_out, int warmup,
                         int reps);

// oneDNN, on the same operands; requires onednn_available().
PeerResult time_onednn(const PeerOperands& p, float* loop_out, float* dense_out, int warmup,
                       int reps);

// The child's side of the protocol: one JSON line, read by peer_from_json.
nlohmann::ordered_json peer_to_json(const PeerResult& peer);
PeerResult peer_from_json(const nlohmann::json& j);

// The core to lift the OpenBLAS peer to, or "" when the core loaded here is
// already of the best class this CPU supports.
std::string openblas_core_to_lift_to();

// A note when OPENBLAS_CORETYPE is set here ("OPENBLAS_CORETYPE=Haswell"), else "".
std::string openblas_restriction();

}  // namespace raggemm::bench
