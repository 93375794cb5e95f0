#include "kernels/workspace.h"

#include <cstdlib>
#include <new>

namespace raggemm::kernels {
namespace {

// Grows `data` (capacity in floats) to at least `floats`, whole cache lines
// (aligned_alloc needs a multiple of 64 bytes); the old contents are dropped.
float* grown(float*& data, int64_t& capacity, int64_t floats) {
  if (floats > capacity) {
    std::free(data);
    const int64_t rounded = (floats + 15) / 16 * 16;
    data = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * rounded));
    capacity = data ? rounded : 0;
    if (!data) throw std::bad_alloc();
  }
  return data;
}

struct OwnBuffer {
  float* data = nullptr;
  int64_t capacity = 0;
  ~OwnBuffer() { std::free(data); }
};

thread_local OwnBuffer own[static_cast<int>(Slot::kCount)];

struct Binding {
  Workspace* workspace = nullptr;
  int index = 0;
};
thread_local Binding binding;

}  // namespace

Workspace::Workspace() = default;

Workspace::~Workspace() {
  for (const std::unique_ptr<Set>& set : sets_) {
    for (Buffer& buffer : *set) std::free(buffer.data);
  }
}

int64_t Workspace::bytes() const {
  int64_t total = 0;
  for (const std::unique_ptr<Set>& set : sets_) {
    for (const Buffer& buffer : *set) total += buffer.capacity * int64_t{sizeof(float)};
  }
  return total;
}

void Workspace::reserve_threads(int threads) {
  while (static_cast<int>(sets_.size()) < threads) sets_.push_back(std::make_unique<Set>());
}

float* Workspace::buffer(int thread, Slot slot, int64_t floats) {
  // Only a thread outside any team may add its set here (index 0 of the
  // calling thread); teams reserve theirs before they start.
  if (thread >= static_cast<int>(sets_.size())) reserve_threads(thread + 1);
  Buffer& buffer = (*sets_[static_cast<size_t>(thread)])[static_cast<size_t>(slot)];
  return grown(buffer.data, buffer.capacity, floats);
}

WorkspaceBinding::WorkspaceBinding(Workspace* workspace, int thread_index)
    : previous_(binding.workspace), previous_index_(binding.index) {
  binding = {workspace, thread_index};
}

WorkspaceBinding::~WorkspaceBinding() { binding = {previous_, previous_index_}; }

Workspace* bound_workspace() { return binding.workspace; }

int64_t own_workspace_bytes() {
  int64_t total = 0;
  for (const OwnBuffer& buffer : own) total += buffer.capacity * int64_t{sizeof(float)};
  return total;
}

float* workspace(Slot slot, int64_t floats) {
  if (binding.workspace) return binding.workspace->buffer(binding.index, slot, floats);
  OwnBuffer& buffer = own[static_cast<int>(slot)];
  return grown(buffer.data, buffer.capacity, floats);
}

}  // namespace raggemm::kernels
