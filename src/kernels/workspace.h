// Scratch buffers of the kernels, 64-byte aligned, grown on demand and
// reused across calls. Their size is bounded by the tiles (never by M, N or
// G). Whose they are:
//   - by default each thread's own (thread_local), kept for the thread's
//     life;
//   - while a WorkspaceBinding is alive on a thread, a caller's Workspace:
//     the kernels that thread runs, and the workers of the teams it starts
//     through parallel_items (kernels/parallel.h), take their buffers from
//     it, worker t from its set t. The caller decides how long they live
//     (backends::Workspace; the tuner frees its candidates' buffers when it
//     ends instead of leaving the largest tile's in every thread).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace raggemm::kernels {

enum class Slot { kPackedA, kPackedB, kAccumulator, kLine, kDecoded, kColumnSums, kCount };

// One slot's buffer: grown on demand (old contents dropped), freed with it.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  // At least `floats` floats, 64-byte aligned, in whole cache lines.
  float* at_least(int64_t floats);
  int64_t bytes() const { return capacity_ * int64_t{sizeof(float)}; }

 private:
  float* data_ = nullptr;
  int64_t capacity_ = 0;  // floats
};

using ScratchSet = std::array<ScratchBuffer, static_cast<size_t>(Slot::kCount)>;

// Buffers a caller owns: one set of slots per thread index. One call at a
// time (backends::Workspace holds it so).
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Bytes held now, over every set and slot.
  int64_t bytes() const;
  // Thread indices that have a set (the widest team that used it).
  int thread_sets() const { return static_cast<int>(sets_.size()); }
  // Makes sets 0..threads-1 exist; called before a team starts, so that no
  // set is created while its workers run.
  void reserve_threads(int threads);
  // Slot `slot` of set `thread`, at least `floats` floats; contents undefined.
  float* buffer(int thread, Slot slot, int64_t floats);

 private:
  std::vector<std::unique_ptr<ScratchSet>> sets_;
};

// Lends `workspace` (null: the thread's own buffers) to the kernels this
// thread runs, as set `thread_index`, until destroyed; the previous binding
// comes back then. parallel_items binds each worker of its team.
class WorkspaceBinding {
 public:
  WorkspaceBinding(Workspace* workspace, int thread_index);
  ~WorkspaceBinding();
  WorkspaceBinding(const WorkspaceBinding&) = delete;
  WorkspaceBinding& operator=(const WorkspaceBinding&) = delete;

 private:
  Workspace* previous_;
  int previous_index_;
};

// The workspace bound on this thread, or null.
Workspace* bound_workspace();

// Bytes of this thread's own buffers (tests: what a lent workspace spared).
int64_t own_workspace_bytes();

// A buffer of at least `floats` floats for this thread, from the bound
// workspace or the thread's own; contents undefined.
float* workspace(Slot slot, int64_t floats);

inline float* scratch_line(int64_t floats) { return workspace(Slot::kLine, floats); }

// The same buffer holding `count` elements of T (bf16 bits, int8 codes, i32
// sums), for the dot-product drivers.
template <class T>
T* workspace_as(Slot slot, int64_t count) {
  const int64_t bytes = count * static_cast<int64_t>(sizeof(T));
  return reinterpret_cast<T*>(workspace(slot, (bytes + 3) / 4));
}

}  // namespace raggemm::kernels
