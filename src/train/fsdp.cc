// ZeRO-3 sharding of the non-expert parameters over the fsdp axis.
#include "train/fsdp.h"

#include <algorithm>

#include "core/float_bits.h"
#include "raggemm/error.h"

namespace raggemm::train {
namespace {

int64_t shape_size(const Shape& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

// Frees a vector's memory (clear() keeps the capacity).
template <class V>
void free_vector(V& v) {
  V().swap(v);
}

// What a parameter's values hold now (f32 or bf16 storage).
int64_t bytes_of(const moe::Param<float>& p) {
  return static_cast<int64_t>(p.value.capacity() * sizeof(float) +
                              p.bits.capacity() * sizeof(uint16_t));
}

// Sums `params`' gradients over `comm`, packed into one allreduce.
void allreduce_grads(Communicator* comm, const std::vector<moe::Param<float>*>& params) {
  if (comm_size(comm) <= 1 || params.empty()) return;
  size_t count = 0;
  for (const moe::Param<float>* p : params) count += p->grad.size();
  std::vector<float> packed(count);
  size_t offset = 0;
  for (const moe::Param<float>* p : params) {
    std::copy(p->grad.begin(), p->grad.end(), packed.begin() + static_cast<int64_t>(offset));
    offset += p->grad.size();
  }
  comm->allreduce_sum(packed.data(), static_cast<int64_t>(count));
  offset = 0;
  for (moe::Param<float>* p : params) {
    std::copy_n(packed.begin() + static_cast<int64_t>(offset), p->grad.size(), p->grad.begin());
    offset += p->grad.size();
  }
}

}  // namespace

bool is_expert_weight(const std::string& name) {
  const size_t at = name.rfind(".moe.");
  if (at == std::string::npos) return false;
  const std::string rest = name.substr(at + 5);
  return rest == "wi" || rest == "wi_0" || rest == "wi_1" || rest == "wo";
}

ShardedParams::ShardedParams(std::vector<std::vector<moe::Param<float>*>> units, const Mesh& mesh,
                             bool keep_gathered)
    : mesh_(mesh),
      fsdp_(mesh.axis(MeshAxis::kFsdp)),
      ranks_(comm_size(mesh.axis(MeshAxis::kFsdp))),
      rank_(comm_rank(mesh.axis(MeshAxis::kFsdp))),
      keep_gathered_(keep_gathered),
      model_units_(std::move(units)) {
  units_.resize(model_units_.size());
  for (size_t u = 0; u < model_units_.size(); ++u) {
    Unit& unit = units_[u];
    for (moe::Param<float>* p : model_units_[u]) {
      if (ranks_ == 1 || p->expert_sharded || !p->trainable) continue;
      require(!p->bf16, "param", p->name,
              "is stored as bf16 already: FSDP takes its shards from the f32 values, before the "
              "optimizer switches the storage");
      Slot slot;
      slot.full = p;
      slot.size = shape_size(p->shape);
      slot.chunk = (slot.size + ranks_ - 1) / ranks_;
      slot.offset = unit.chunk;
      unit.chunk += slot.chunk;
      moe::Param<float>& shard = shards_.emplace_back();
      shard.name = p->name;
      // A matrix's chunk stays a matrix ({1, chunk}) so that
      // weight_dtype=bf16 stores the same parameters as bf16 as on one
      // process (Optimizer::bf16_weight: rank >= 2).
      shard.shape = p->shape.size() >= 2 ? Shape{1, slot.chunk} : Shape{slot.chunk};
      shard.trainable = true;
      // This rank's slice of the flat tensor; the padding past its end is
      // zero and stays zero (its gradient is zero).
      shard.value.assign(static_cast<size_t>(slot.chunk), 0.0f);
      shard.grad.assign(static_cast<size_t>(slot.chunk), 0.0f);
      const int64_t begin = std::min(slot.size, rank_ * slot.chunk);
      const int64_t end = std::min(slot.size, begin + slot.chunk);
      std::copy(p->value.begin() + begin, p->value.begin() + end, shard.value.begin());
      slot.shard = &shard;
      unit.slots.push_back(slot);
    }
  }
  for (size_t u = 0; u < units_.size(); ++u) release(u);
}

ShardedParams::~ShardedParams() {
  // A prefetch still in flight writes into our buffers: finish it first.
  for (Unit& unit : units_) unit.pending.reset();
}

std::vector<moe::Param<float>*> ShardedParams::local_params() {
  std::vector<moe::Param<float>*> out;
  for (size_t u = 0; u < units_.size(); ++u) {
    size_t next = 0;
    for (moe::Param<float>* p : model_units_[u]) {
      const std::vector<Slot>& slots = units_[u].slots;
      if (next < slots.size() && slots[next].full == p) {
        out.push_back(slots[next++].shard);
      } else {
        out.push_back(p);
      }
    }
  }
  return out;
}

void ShardedParams::start_gather(size_t u) {
  Unit& unit = units_[u];
  if (unit.present || unit.pending || unit.slots.empty()) return;
  unit.send.resize(static_cast<size_t>(unit.chunk));
  for (const Slot& slot : unit.slots) {
    // bf16 storage travels as its exact f32 widening (the collectives move
    // f32 words here; half the traffic is left on the table).
    const std::vector<float> values = slot.shard->values_f32();
    std::copy(values.begin(), values.end(), unit.send.begin() + slot.offset);
  }
  unit.gathered.resize(static_cast<size_t>(unit.chunk * ranks_));
  unit.pending =
      fsdp_->start_allgather(unit.send.data(), unit.chunk, unit.gathered.data(), CommType::kF32);
}

void ShardedParams::finish_gather(size_t u) {
  Unit& unit = units_[u];
  unit.pending->wait();
  unit.pending.reset();
  // gathered = rank 0's packed chunk, rank 1's, ...: each parameter's full
  // tensor is its piece of every rank's chunk, in rank order.
  for (const Slot& slot : unit.slots) {
    // A bf16 shard makes a bf16 full tensor, as the kernels of one process
    // would read it (the gathered words are exact bf16 values).
    moe::Param<float>& full = *slot.full;
    full.bf16 = slot.shard->bf16;
    if (full.bf16) {
      full.bits.resize(static_cast<size_t>(slot.size));
    } else {
      full.value.resize(static_cast<size_t>(slot.size));
    }
    for (int64_t q = 0; q < ranks_; ++q) {
      const int64_t begin = std::min(slot.size, q * slot.chunk);
      const int64_t end = std::min(slot.size, begin + slot.chunk);
      const float* from = unit.gathered.data() + q * unit.chunk + slot.offset;
      if (full.bf16) {
        for (int64_t i = 0; i < end - begin; ++i) {
          full.bits[static_cast<size_t>(begin + i)] = core::bf16_bits_of(from[i]);
        }
      } else {
        std::copy_n(from, end - begin, full.value.begin() + begin);
      }
    }
  }
  free_vector(unit.gathered);
  free_vector(unit.send);
  unit.present = true;
}

void ShardedParams::ensure_present(size_t u) {
  Unit& unit = units_[u];
  if (unit.present) return;
  ++counts_.total;
  if (unit.pending) ++counts_.prefetched;
  start_gather(u);
  finish_gather(u);
}

void ShardedParams::release(size_t u) {
  Unit& unit = units_[u];
  for (const Slot& slot : unit.slots) {
    free_vector(slot.full->value);
    free_vector(slot.full->bits);
    free_vector(slot.full->grad);
  }
  unit.present = unit.slots.empty();
}

void ShardedParams::forward_begin(size_t u) {
  ensure_present(u);
  if (u + 1 < units_.size()) start_gather(u + 1);
}

void ShardedParams::forward_end(size_t u) {
  if (!keep_gathered_) release(u);
}

void ShardedParams::backward_begin(size_t u) {
  Unit& unit = units_[u];
  // The embedding's backward adds rows of the output gradient into its
  // gradient and never reads the table: no gather for unit 0.
  if (u != 0) ensure_present(u);
  for (const Slot& slot : unit.slots) slot.full->grad.assign(static_cast<size_t>(slot.size), 0.0f);
  if (u > 1) start_gather(u - 1);
}

void ShardedParams::backward_end(size_t u) {
  Unit& unit = units_[u];
  if (unit.slots.empty()) return;
  // Rank-major: block q holds every parameter's chunk q, as the shards
  // are laid out; MPI_Reduce_scatter sums the blocks and hands block q to
  // fsdp rank q.
  std::vector<float> packed(static_cast<size_t>(unit.chunk * ranks_), 0.0f);
  for (const Slot& slot : unit.slots) {
    for (int64_t q = 0; q < ranks_; ++q) {
      const int64_t begin = std::min(slot.size, q * slot.chunk);
      const int64_t end = std::min(slot.size, begin + slot.chunk);
      std::copy(slot.full->grad.begin() + begin, slot.full->grad.begin() + end,
                packed.begin() + q * unit.chunk + slot.offset);
    }
  }
  std::vector<float> mine(static_cast<size_t>(unit.chunk));
  const std::vector<int64_t> rows(static_cast<size_t>(ranks_), unit.chunk);
  fsdp_->reduce_scatter_rows(packed.data(), mine.data(), rows.data(), 1, CommType::kF32);
  for (const Slot& slot : unit.slots) {
    std::copy_n(mine.begin() + slot.offset, slot.chunk, slot.shard->grad.begin());
  }
  release(u);
}

void ShardedParams::finish_gradients() {
  // Non-expert parameters (shards or whole): summed over data and expert.
  // Expert shards (ep > 1): over data and fsdp.
  std::vector<moe::Param<float>*> shared, experts;
  for (moe::Param<float>* p : local_params()) {
    if (!p->trainable) continue;
    (p->expert_sharded ? experts : shared).push_back(p);
  }
  allreduce_grads(mesh_.axis(MeshAxis::kData), shared);
  allreduce_grads(mesh_.axis(MeshAxis::kExpert), shared);
  allreduce_grads(mesh_.axis(MeshAxis::kData), experts);
  allreduce_grads(mesh_.axis(MeshAxis::kFsdp), experts);
}

void ShardedParams::release_all() {
  for (size_t u = 0; u < units_.size(); ++u) {
    units_[u].pending.reset();  // waits
    release(u);
  }
}

std::map<std::string, int64_t> ShardedParams::sharded_sizes() const {
  std::map<std::string, int64_t> out;
  for (const Unit& unit : units_) {
    for (const Slot& slot : unit.slots) out[slot.full->name] = slot.size;
  }
  return out;
}

std::vector<std::string> ShardedParams::expert_params() const {
  std::vector<std::string> out;
  for (const auto& unit : model_units_) {
    for (const moe::Param<float>* p : unit) {
      if (p->expert_sharded) out.push_back(p->name);
    }
  }
  return out;
}

std::map<std::string, std::vector<float>> ShardedParams::gather_full(bool gradients) {
  std::map<std::string, std::vector<float>> out;
  for (size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    size_t next = 0;
    for (moe::Param<float>* p : model_units_[u]) {
      if (next < unit.slots.size() && unit.slots[next].full == p) {
        const Slot& slot = unit.slots[next++];
        const std::vector<float> local = gradients ? slot.shard->grad : slot.shard->values_f32();
        std::vector<float> all(static_cast<size_t>(slot.chunk * ranks_));
        const std::vector<int64_t> rows(static_cast<size_t>(ranks_), 1);
        fsdp_->allgatherv_rows(local.data(), 1, all.data(), rows.data(), slot.chunk,
                               CommType::kF32);
        all.resize(static_cast<size_t>(slot.size));
        out[p->name] = std::move(all);
      } else {
        out[p->name] = gradients ? p->grad : p->values_f32();
      }
    }
  }
  return out;
}

std::map<std::string, std::vector<float>> ShardedParams::full_values() {
  return gather_full(false);
}
std::map<std::string, std::vector<float>> ShardedParams::full_gradients() {
  return gather_full(true);
}

namespace {
int64_t value_bytes(const std::vector<std::vector<moe::Param<float>*>>& units,
                    const std::deque<moe::Param<float>>& shards, bool experts) {
  int64_t bytes = 0;
  for (const auto& unit : units) {
    for (const moe::Param<float>* p : unit) {
      if (is_expert_weight(p->name) == experts) bytes += bytes_of(*p);
    }
  }
  for (const moe::Param<float>& shard : shards) {
    if (is_expert_weight(shard.name) == experts) bytes += bytes_of(shard);
  }
  return bytes;
}
}  // namespace

int64_t ShardedParams::non_expert_value_bytes() const {
  return value_bytes(model_units_, shards_, false);
}

int64_t ShardedParams::expert_value_bytes() const {
  return value_bytes(model_units_, shards_, true);
}

}  // namespace raggemm::train
