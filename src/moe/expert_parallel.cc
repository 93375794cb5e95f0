// All-to-all dispatch and ring-of-experts exchanges.
#include "moe/expert_parallel.h"

#include <algorithm>

#include "raggemm/error.h"

namespace raggemm::moe {

AllToAllPlan plan_all_to_all(Communicator& comm, const ExpertShard& shard,
                             const std::vector<int32_t>& group_sizes) {
  const int ranks = comm.size();
  const int64_t local = shard.local_experts;
  require(static_cast<int64_t>(group_sizes.size()) == local * ranks, "group_sizes",
          group_sizes.size(), "must hold E = local_experts * ranks entries");
  AllToAllPlan plan;
  plan.send_rows.assign(static_cast<size_t>(ranks), 0);
  std::vector<int64_t> send_counts(group_sizes.begin(), group_sizes.end());
  for (int p = 0; p < ranks; ++p) {
    for (int64_t e = 0; e < local; ++e) plan.send_rows[p] += group_sizes[p * local + e];
  }
  // Counts first: row p of recv_counts = rank p's rows for each local expert.
  std::vector<int64_t> recv_counts(static_cast<size_t>(ranks * local));
  const std::vector<int64_t> one_row(static_cast<size_t>(ranks), 1);
  comm.alltoallv_rows(send_counts.data(), one_row.data(), recv_counts.data(), one_row.data(), local,
                      CommType::kI64);
  plan.recv_rows.assign(static_cast<size_t>(ranks), 0);
  plan.group_sizes.assign(static_cast<size_t>(local), 0);
  // received_start[p * local + e]: first received row of (rank p, expert e).
  std::vector<int64_t> received_start(static_cast<size_t>(ranks * local));
  int64_t offset = 0;
  for (int p = 0; p < ranks; ++p) {
    for (int64_t e = 0; e < local; ++e) {
      const int64_t count = recv_counts[p * local + e];
      received_start[p * local + e] = offset;
      offset += count;
      plan.recv_rows[p] += count;
      plan.group_sizes[e] += static_cast<int32_t>(count);
    }
  }
  // Regroup: expert-major, then rank order (the order a single process's
  // counting sort would give for the same global batch).
  plan.received_row.reserve(static_cast<size_t>(offset));
  for (int64_t e = 0; e < local; ++e) {
    for (int p = 0; p < ranks; ++p) {
      const int64_t start = received_start[p * local + e];
      for (int64_t i = 0; i < recv_counts[p * local + e]; ++i) {
        plan.received_row.push_back(start + i);
      }
    }
  }
  return plan;
}

template <class T>
void dispatch_rows(Communicator& comm, const AllToAllPlan& plan, const T* rows, int64_t dim,
                   std::vector<T>& scratch, T* grouped) {
  scratch.resize(static_cast<size_t>(plan.rows() * dim));
  comm.alltoallv_rows(rows, plan.send_rows.data(), scratch.data(), plan.recv_rows.data(), dim,
                      comm_type_of<T>());
  const int64_t count = plan.rows();
  for (int64_t i = 0; i < count; ++i) {
    std::copy_n(scratch.data() + plan.received_row[i] * dim, dim, grouped + i * dim);
  }
}

template <class T>
void return_rows(Communicator& comm, const AllToAllPlan& plan, const T* grouped, int64_t dim,
                 std::vector<T>& scratch, T* rows) {
  scratch.resize(static_cast<size_t>(plan.rows() * dim));
  const int64_t count = plan.rows();
  for (int64_t i = 0; i < count; ++i) {
    std::copy_n(grouped + i * dim, dim, scratch.data() + plan.received_row[i] * dim);
  }
  comm.alltoallv_rows(scratch.data(), plan.recv_rows.data(), rows, plan.send_rows.data(), dim,
                      comm_type_of<T>());
}

template <class T>
void sum_routing_stats(Communicator& comm, const RouterConfig& config, Routing<T>& routing) {
  const size_t experts = routing.counts.size();
  // One allreduce: counts and the token count as exact doubles, then prob_sum.
  std::vector<double> sums(2 * experts + 1);
  for (size_t e = 0; e < experts; ++e) {
    sums[e] = routing.counts[e];
    sums[experts + e] = routing.prob_sum[e];
  }
  sums[2 * experts] = static_cast<double>(routing.lb_tokens);
  comm.allreduce_sum(sums.data(), static_cast<int64_t>(sums.size()));
  for (size_t e = 0; e < experts; ++e) {
    routing.counts[e] = static_cast<int32_t>(sums[e]);
    routing.prob_sum[e] = sums[experts + e];
  }
  routing.lb_tokens = static_cast<int64_t>(sums[2 * experts]);
  update_load_balance_loss(config, routing);
}

RingTokens ring_tokens(Communicator& comm, int64_t tokens) {
  RingTokens ring;
  ring.per_rank.assign(static_cast<size_t>(comm.size()), 1);
  std::vector<int64_t> all(static_cast<size_t>(comm.size()));
  comm.allgatherv_rows(&tokens, 1, all.data(), ring.per_rank.data(), 1, CommType::kI64);
  ring.per_rank = all;
  for (int p = 0; p < comm.size(); ++p) {
    if (p < comm.rank()) ring.first += all[p];
    ring.total += all[p];
  }
  return ring;
}

template <class T>
void allgather_tokens(Communicator& comm, const RingTokens& ring, const T* local, int64_t dim,
                      T* all) {
  comm.allgatherv_rows(local, ring.per_rank[comm.rank()], all, ring.per_rank.data(), dim,
                       comm_type_of<T>());
}

template <class T>
void reduce_scatter_tokens(Communicator& comm, const RingTokens& ring, const T* all, int64_t dim,
                           T* local) {
  comm.reduce_scatter_rows(all, local, ring.per_rank.data(), dim, comm_type_of<T>());
}

template <class T>
void gather_row_range(const Permutation& perm, const T* x, int64_t dim, int64_t begin, int64_t end,
                      T* rows) {
  for (int64_t r = begin; r < end; ++r) {
    std::copy_n(x + perm.token_of_row[r] * dim, dim, rows + r * dim);
  }
}

template <class T>
void slice_routing(const Routing<T>& all, int64_t num_experts, int64_t top_k, int64_t first,
                   int64_t tokens, Routing<T>& out) {
  auto slice = [&](const auto& source, auto& target, int64_t width) {
    target.assign(source.begin() + first * width, source.begin() + (first + tokens) * width);
  };
  out.tokens = tokens;
  slice(all.scores, out.scores, num_experts);
  slice(all.experts, out.experts, top_k);
  slice(all.weights, out.weights, top_k);
  slice(all.chosen_sum, out.chosen_sum, 1);
  out.counts = all.counts;
  out.prob_sum = all.prob_sum;
  out.lb_tokens = all.lb_tokens;
  out.load_balance_loss = all.load_balance_loss;
}

#define RAGGEMM_INSTANTIATE(T)                                                                     \
  template void dispatch_rows<T>(Communicator&, const AllToAllPlan&, const T*, int64_t,            \
                                 std::vector<T>&, T*);                                             \
  template void return_rows<T>(Communicator&, const AllToAllPlan&, const T*, int64_t,              \
                               std::vector<T>&, T*);                                               \
  template void sum_routing_stats<T>(Communicator&, const RouterConfig&, Routing<T>&);             \
  template void allgather_tokens<T>(Communicator&, const RingTokens&, const T*, int64_t, T*);      \
  template void reduce_scatter_tokens<T>(Communicator&, const RingTokens&, const T*, int64_t, T*); \
  template void gather_row_range<T>(const Permutation&, const T*, int64_t, int64_t, int64_t, T*);  \
  template void slice_routing<T>(const Routing<T>&, int64_t, int64_t, int64_t, int64_t,            \
                                 Routing<T>&);
RAGGEMM_INSTANTIATE(float)
RAGGEMM_INSTANTIATE(double)
#undef RAGGEMM_INSTANTIATE

}  // namespace raggemm::moe
