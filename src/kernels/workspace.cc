#include "kernels/workspace.h"

#include <cstdlib>
#include <new>

namespace raggemm::kernels {
namespace {

thread_local ScratchSet own;

struct Binding {
  Workspace* workspace = nullptr;
  int index = 0;
};
thread_local Binding binding;

int64_t bytes_of(const ScratchSet& set) {
  int64_t total = 0;
  for (const ScratchBuffer& buffer : set) total += buffer.bytes();
  return total;
}

}  // namespace

ScratchBuffer::~ScratchBuffer() { std::free(data_); }

float* ScratchBuffer::at_least(int64_t floats) {
  if (floats > capacity_) {
    std::free(data_);
    // Whole cache lines: aligned_alloc needs a multiple of 64 bytes.
    const int64_t rounded = (floats + 15) / 16 * 16;
    data_ = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * rounded));
    capacity_ = data_ ? rounded : 0;
    if (!data_) throw std::bad_alloc();
  }
  return data_;
}

int64_t Workspace::bytes() const {
  int64_t total = 0;
  for (const std::unique_ptr<ScratchSet>& set : sets_) total += bytes_of(*set);
  return total;
}

void Workspace::reserve_threads(int threads) {
  while (static_cast<int>(sets_.size()) < threads) sets_.push_back(std::make_unique<ScratchSet>());
}

float* Workspace::buffer(int thread, Slot slot, int64_t floats) {
  // Only a thread outside any team may add its set here (index 0 of the
  // calling thread); teams reserve theirs before they start.
  if (thread >= static_cast<int>(sets_.size())) reserve_threads(thread + 1);
  return (*sets_[static_cast<size_t>(thread)])[static_cast<size_t>(slot)].at_least(floats);
}

WorkspaceBinding::WorkspaceBinding(Workspace* workspace, int thread_index)
    : previous_(binding.workspace), previous_index_(binding.index) {
  binding = {workspace, thread_index};
}

WorkspaceBinding::~WorkspaceBinding() { binding = {previous_, previous_index_}; }

Workspace* bound_workspace() { return binding.workspace; }

int64_t own_workspace_bytes() { return bytes_of(own); }

float* workspace(Slot slot, int64_t floats) {
  if (binding.workspace) return binding.workspace->buffer(binding.index, slot, floats);
  return own[static_cast<size_t>(slot)].at_least(floats);
}

}  // namespace raggemm::kernels
