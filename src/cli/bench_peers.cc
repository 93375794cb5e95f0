#include "cli/bench_peers.h"

#include <cstdlib>

#include "cli/onednn_peer.h"
#include "cli/openblas_core.h"
#include "cli/peer_check.h"

namespace raggemm::bench {

bool PeerResult::trusted() const {
  return loop_check <= kPeerCheckTolerance && dense_check <= kPeerCheckTolerance;
}

PeerResult time_openblas(const PeerOperands& p, float* loop_out, float* dense_out, int warmup,
                         int reps) {
  PeerResult result;
  result.name = "openblas";
  result.kernel = cli::openblas_core_name();
  result.restricted_by = openblas_restriction();
  PeerOperands loop = p, dense = p;
  loop.out = loop_out;
  dense.out = dense_out;
  result.loop_seconds = median_seconds([&] { run_openblas_loop(loop); }, warmup, reps);
  result.dense_seconds = median_seconds([&] { run_openblas_dense(dense); }, warmup, reps);
  result.loop_check = sampled_relative_error(p, loop_out, false);
  result.dense_check = sampled_relative_error(p, dense_out, true);
  return result;
}

PeerResult time_onednn(const PeerOperands& p, float* loop_out, float* dense_out, int warmup,
                       int reps) {
  OneDnnPeer peer(p, loop_out, dense_out);
  PeerResult result;
  result.name = "onednn";
  result.kernel = peer.kernel();
  result.loop_seconds = median_seconds([&] { peer.run_loop(); }, warmup, reps);
  result.dense_seconds = median_seconds([&] { peer.run_dense(); }, warmup, reps);
  result.loop_check = sampled_relative_error(p, loop_out, false);
  result.dense_check = sampled_relative_error(p, dense_out, true);
  return result;
}

nlohmann::ordered_json peer_to_json(const PeerResult& peer) {
  return {{"name", peer.name},
          {"kernel", peer.kernel},
          {"loop_seconds", peer.loop_seconds},
          {"dense_seconds", peer.dense_seconds},
          {"loop_check_rel_error", peer.loop_check},
          {"dense_check_rel_error", peer.dense_check},
          {"restricted_by", peer.restricted_by}};
}

PeerResult peer_from_json(const nlohmann::json& j) {
  PeerResult peer;
  peer.name = j.at("name").get<std::string>();
  peer.kernel = j.at("kernel").get<std::string>();
  peer.loop_seconds = j.at("loop_seconds").get<double>();
  peer.dense_seconds = j.at("dense_seconds").get<double>();
  peer.loop_check = j.at("loop_check_rel_error").get<double>();
  peer.dense_check = j.at("dense_check_rel_error").get<double>();
  peer.restricted_by = j.at("restricted_by").get<std::string>();
  peer.child_process = true;
  return peer;
}

std::string openblas_core_to_lift_to() {
  const std::string best = cli::best_openblas_core_for_cpu();
  if (best.empty()) return "";
  return cli::openblas_core_rank(cli::openblas_core_name()) < cli::openblas_core_rank(best) ? best
                                                                                           : "";
}

std::string openblas_restriction() {
  const char* value = std::getenv("OPENBLAS_CORETYPE");
  return value != nullptr && *value != '\0' ? std::string("OPENBLAS_CORETYPE=") + value : "";
}

}  // namespace raggemm::bench
