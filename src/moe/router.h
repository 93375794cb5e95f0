// Routing: scores, top-k selection (optionally group-limited and biased),
// combine weights, the load-balancing loss, and their backward.
#pragma once

#include <cstdint>
#include <vector>

#include "raggemm/moe.h"

namespace raggemm::moe {

template <class T>
struct Routing {
  int64_t tokens = 0;
  std::vector<T> scores;         // [tokens, E]: softmax probabilities or sigmoids
  std::vector<int32_t> experts;  // [tokens, k] chosen experts, best first
  std::vector<T> weights;        // [tokens, k] combine weights
  std::vector<T> chosen_sum;     // [tokens] sum of the chosen scores
  std::vector<int32_t> counts;   // [E] (token, slot) pairs per expert
  // Sum over tokens of the probabilities the load-balancing loss averages.
  std::vector<double> prob_sum;  // [E]
  // Tokens the load-balancing loss averages over: `tokens` on one process;
  // under expert parallelism counts, prob_sum and lb_tokens are the sums over
  // all ranks, so the loss and its gradient are those of the global batch.
  int64_t lb_tokens = 0;
  double load_balance_loss = 0;  // E * sum_e f_e * P_e, unweighted
};

// logits [tokens, E]; bias [E] or null (used for selection only).
template <class T>
void route(const RouterConfig& config, const T* logits, int64_t tokens, const T* bias,
           Routing<T>& out);

// load_balance_loss from counts, prob_sum and lb_tokens (route() calls it;
// expert parallelism calls it again after summing them over the ranks).
template <class T>
void update_load_balance_loss(const RouterConfig& config, Routing<T>& routing);

// dweights [tokens, k] -> dlogits [tokens, E] (overwritten), including the
// gradient of lb_weight * load_balance_loss.
template <class T>
void route_backward(const RouterConfig& config, const Routing<T>& routing, const T* dweights,
                    double lb_weight, T* dlogits);

}  // namespace raggemm::moe
