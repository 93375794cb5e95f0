// Router: scoring, (group-limited, biased) top-k, combine weights, the
// load-balancing loss, and the backward through all of them.
#include "moe/router.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "raggemm/error.h"

namespace raggemm::moe {
namespace {

template <class T>
T sigmoid(T z) {
  return T(1) / (T(1) + std::exp(-z));
}

// Score of an expert group for group-limited routing: the best score for
// softmax, the sum of the two best for sigmoid (as DeepSeek-V3 does).
template <class T>
T group_score(const T* selection, int64_t size, ScoreFunction function) {
  T best = -std::numeric_limits<T>::infinity(), second = best;
  for (int64_t i = 0; i < size; ++i) {
    if (selection[i] > best) {
      second = best;
      best = selection[i];
    } else if (selection[i] > second) {
      second = selection[i];
    }
  }
  if (function == ScoreFunction::kSigmoid && size >= 2) return best + second;
  return best;
}

// Writes the k best allowed experts of one token, best first; ties go to the
// lower index so routing is deterministic.
template <class T>
void top_k(const T* selection, const std::vector<char>& allowed, int64_t num_experts, int64_t k,
           int32_t* chosen) {
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < num_experts; ++e) {
      if (!allowed[e]) continue;
      bool taken = false;
      for (int64_t i = 0; i < j; ++i) taken |= chosen[i] == e;
      if (taken) continue;
      if (best < 0 || selection[e] > selection[best]) best = static_cast<int32_t>(e);
    }
    chosen[j] = best;
  }
}

// Per-token probabilities that the load-balancing loss averages: softmax
// scores as they are, sigmoid scores normalised over the experts.
template <class T>
bool lb_uses_normalised(const RouterConfig& config) {
  return config.score_function == ScoreFunction::kSigmoid;
}

}  // namespace

template <class T>
void route(const RouterConfig& config, const T* logits, int64_t tokens, const T* bias,
           Routing<T>& out) {
  const int64_t num_experts = config.num_experts;
  const int64_t k = config.top_k;
  out.tokens = tokens;
  out.scores.resize(static_cast<size_t>(tokens * num_experts));
  out.experts.resize(static_cast<size_t>(tokens * k));
  out.weights.resize(static_cast<size_t>(tokens * k));
  out.chosen_sum.resize(static_cast<size_t>(tokens));
  const bool grouped = config.n_routing_groups > 1;
  const int64_t group_size = grouped ? num_experts / config.n_routing_groups : num_experts;
  const T scale = static_cast<T>(config.routed_scaling_factor);
  {
    std::vector<T> selection(static_cast<size_t>(num_experts));
    std::vector<char> allowed(static_cast<size_t>(num_experts), 1);
    std::vector<T> group_scores(static_cast<size_t>(grouped ? config.n_routing_groups : 1));
    std::vector<int32_t> best_groups(static_cast<size_t>(grouped ? config.topk_routing_group : 1));
    std::vector<char> all_groups(group_scores.size(), 1);
    for (int64_t t = 0; t < tokens; ++t) {
      const T* z = logits + t * num_experts;
      T* s = out.scores.data() + t * num_experts;
      if (config.score_function == ScoreFunction::kSoftmax) {
        T peak = z[0];
        for (int64_t e = 1; e < num_experts; ++e) peak = std::max(peak, z[e]);
        T total = 0;
        for (int64_t e = 0; e < num_experts; ++e) total += (s[e] = std::exp(z[e] - peak));
        for (int64_t e = 0; e < num_experts; ++e) s[e] /= total;
      } else {
        for (int64_t e = 0; e < num_experts; ++e) s[e] = sigmoid(z[e]);
      }
      for (int64_t e = 0; e < num_experts; ++e) selection[e] = s[e] + (bias ? bias[e] : T(0));
      if (grouped) {
        for (int64_t g = 0; g < config.n_routing_groups; ++g) {
          group_scores[g] =
              group_score(selection.data() + g * group_size, group_size, config.score_function);
        }
        top_k(group_scores.data(), all_groups, config.n_routing_groups, config.topk_routing_group,
              best_groups.data());
        std::fill(allowed.begin(), allowed.end(), 0);
        for (int32_t g : best_groups) {
          std::fill_n(allowed.begin() + g * group_size, group_size, 1);
        }
      }
      int32_t* chosen = out.experts.data() + t * k;
      top_k(selection.data(), allowed, num_experts, k, chosen);
      T sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += s[chosen[j]];
      out.chosen_sum[t] = sum;
      const T denominator = config.normalize_top_k ? sum : T(1);
      for (int64_t j = 0; j < k; ++j) out.weights[t * k + j] = scale * s[chosen[j]] / denominator;
    }
  }
  out.counts.assign(static_cast<size_t>(num_experts), 0);
  for (int32_t e : out.experts) ++out.counts[e];
  // Load-balancing loss (Switch Transformer): E * sum_e f_e * P_e.
  out.prob_sum.assign(static_cast<size_t>(num_experts), 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    const T* s = out.scores.data() + t * num_experts;
    double norm = 1;
    if (lb_uses_normalised<T>(config)) {
      norm = 0;
      for (int64_t e = 0; e < num_experts; ++e) norm += s[e];
    }
    for (int64_t e = 0; e < num_experts; ++e) out.prob_sum[e] += s[e] / norm;
  }
  out.lb_tokens = tokens;
  update_load_balance_loss(config, out);
}

template <class T>
void update_load_balance_loss(const RouterConfig& config, Routing<T>& routing) {
  const int64_t num_experts = config.num_experts;
  const double tokens = static_cast<double>(routing.lb_tokens);
  double loss = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    const double fraction =
        static_cast<double>(routing.counts[e]) / (tokens * static_cast<double>(config.top_k));
    loss += fraction * routing.prob_sum[e] / tokens;
  }
  routing.load_balance_loss = loss * static_cast<double>(num_experts);
}

template <class T>
void route_backward(const RouterConfig& config, const Routing<T>& routing, const T* dweights,
                    double lb_weight, T* dlogits) {
  const int64_t num_experts = config.num_experts;
  const int64_t k = config.top_k;
  const int64_t tokens = routing.tokens;
  const int64_t lb_tokens = routing.lb_tokens;
  const T scale = static_cast<T>(config.routed_scaling_factor);
  // d(lb)/dP_e = E * f_e; P_e is the mean over the lb_tokens tokens.
  std::vector<T> dprob(static_cast<size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) {
    const double fraction =
        static_cast<double>(routing.counts[e]) / static_cast<double>(lb_tokens * k);
    dprob[e] = static_cast<T>(lb_weight * static_cast<double>(num_experts) * fraction /
                              static_cast<double>(lb_tokens));
  }
  {
    std::vector<T> dscore(static_cast<size_t>(num_experts));
    for (int64_t t = 0; t < tokens; ++t) {
      const T* s = routing.scores.data() + t * num_experts;
      const int32_t* chosen = routing.experts.data() + t * k;
      const T* dw = dweights + t * k;
      // Load-balancing term.
      if (lb_uses_normalised<T>(config)) {
        T norm = 0, dot = 0;
        for (int64_t e = 0; e < num_experts; ++e) norm += s[e];
        for (int64_t e = 0; e < num_experts; ++e) dot += dprob[e] * s[e] / norm;
        for (int64_t e = 0; e < num_experts; ++e) dscore[e] = (dprob[e] - dot) / norm;
      } else {
        for (int64_t e = 0; e < num_experts; ++e) dscore[e] = dprob[e];
      }
      // Combine weights w_j = scale * s_j / Z (Z = sum of chosen, or 1).
      if (config.normalize_top_k) {
        const T z = routing.chosen_sum[t];
        T dot = 0;
        for (int64_t j = 0; j < k; ++j) dot += dw[j] * s[chosen[j]] / z;
        for (int64_t j = 0; j < k; ++j) dscore[chosen[j]] += scale * (dw[j] - dot) / z;
      } else {
        for (int64_t j = 0; j < k; ++j) dscore[chosen[j]] += scale * dw[j];
      }
      T* dz = dlogits + t * num_experts;
      if (config.score_function == ScoreFunction::kSoftmax) {
        T dot = 0;
        for (int64_t e = 0; e < num_experts; ++e) dot += dscore[e] * s[e];
        for (int64_t e = 0; e < num_experts; ++e) dz[e] = s[e] * (dscore[e] - dot);
      } else {
        for (int64_t e = 0; e < num_experts; ++e) dz[e] = dscore[e] * s[e] * (T(1) - s[e]);
      }
    }
  }
}

template void route<float>(const RouterConfig&, const float*, int64_t, const float*,
                           Routing<float>&);
template void route<double>(const RouterConfig&, const double*, int64_t, const double*,
                            Routing<double>&);
template void update_load_balance_loss<float>(const RouterConfig&, Routing<float>&);
template void update_load_balance_loss<double>(const RouterConfig&, Routing<double>&);
template void route_backward<float>(const RouterConfig&, const Routing<float>&, const float*,
                                    double, float*);
template void route_backward<double>(const RouterConfig&, const Routing<double>&, const double*,
                                     double, double*);

}  // namespace raggemm::moe
