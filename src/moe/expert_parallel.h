// The two exchanges of expert parallelism (docs/parallelism.md). Rank
// r of P owns experts [r * E/P, (r + 1) * E/P); every collective runs on the
// layer's Communicator.
//
//   all-to-all: each rank routes its own tokens; rows for the experts of
//               rank p go to p (counts per expert first, then the rows, one
//               MPI_Alltoallv each), are regrouped by local expert, run
//               through the local GMMs and travel back the same way.
//   ring:       every rank all-gathers the tokens and router logits, routes
//               all of them, runs only its local experts' rows (GMMs with
//               group_offset), and the partial outputs are reduce-scattered
//               back to the ranks that own the tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/permute.h"
#include "moe/router.h"
#include "raggemm/comm.h"

namespace raggemm::moe {

// Which experts this rank owns.
struct ExpertShard {
  int rank = 0;
  int ranks = 1;
  int64_t num_experts = 0;
  int64_t local_experts = 0;  // E / P
  int64_t first_expert() const { return static_cast<int64_t>(rank) * local_experts; }
};

// ---------------------------------------------------------------------------
// All-to-all dispatch.

struct AllToAllPlan {
  std::vector<int64_t> send_rows;     // [P] rows this rank sends to each rank
  std::vector<int64_t> recv_rows;     // [P] rows this rank receives from each
  std::vector<int32_t> group_sizes;   // [E/P] received rows per local expert
  std::vector<int64_t> received_row;  // grouped row i = received row received_row[i]
  int64_t rows() const { return static_cast<int64_t>(received_row.size()); }
};

// group_sizes [E]: this rank's rows per global expert, sorted by expert (as
// build_permutation lays them out). Exchanges the per-expert counts.
AllToAllPlan plan_all_to_all(Communicator& comm, const ExpertShard& shard,
                             const std::vector<int32_t>& group_sizes);

// rows [sum send_rows, dim] -> grouped [plan.rows(), dim], by local expert.
template <class T>
void dispatch_rows(Communicator& comm, const AllToAllPlan& plan, const T* rows, int64_t dim,
                   std::vector<T>& scratch, T* grouped);
// The way back: grouped [plan.rows(), dim] -> rows [sum send_rows, dim].
template <class T>
void return_rows(Communicator& comm, const AllToAllPlan& plan, const T* grouped, int64_t dim,
                 std::vector<T>& scratch, T* rows);

// Sums the load-balancing statistics (counts, prob_sum, lb_tokens) over the
// ranks and recomputes the loss: the global batch's loss on every rank.
template <class T>
void sum_routing_stats(Communicator& comm, const RouterConfig& config, Routing<T>& routing);

// ---------------------------------------------------------------------------
// Ring of experts.

struct RingTokens {
  std::vector<int64_t> per_rank;  // [P] tokens of each rank
  int64_t first = 0;              // this rank's first token in the gathered order
  int64_t total = 0;
};
RingTokens ring_tokens(Communicator& comm, int64_t tokens);

// local [tokens, dim] of every rank -> all [total, dim] in rank order.
template <class T>
void allgather_tokens(Communicator& comm, const RingTokens& ring, const T* local, int64_t dim,
                      T* all);
// all [total, dim] summed over the ranks; this rank keeps its own tokens.
template <class T>
void reduce_scatter_tokens(Communicator& comm, const RingTokens& ring, const T* all, int64_t dim,
                           T* local);

// rows [begin, end) of the permuted buffer: rows[r] = x[token_of_row[r]].
template <class T>
void gather_row_range(const Permutation& perm, const T* x, int64_t dim, int64_t begin, int64_t end,
                      T* rows);

// The routing of tokens [first, first + tokens) of `all` (load-balancing
// statistics stay global).
template <class T>
void slice_routing(const Routing<T>& all, int64_t num_experts, int64_t top_k, int64_t first,
                   int64_t tokens, Routing<T>& out);

}  // namespace raggemm::moe
