// Scratch memory for the grouped matmuls' kernels (their packed panels and
// accumulators), lent to calls through GmmOptions::workspace and
// TgmmOptions::workspace.
//
// Without one (the default), every thread that runs a call keeps its own
// buffers for the thread's life and reuses them on the next call: what a
// training loop wants, paying for the buffers once. A lent workspace holds
// them instead, so the caller decides how long they live and can see how
// large they are: a library that calls raggemm now and then, or a memory
// budget that must count them. Its size is bounded by the tiles (never by
// M, N or G), one set per thread of the widest call it served.
//
// One call at a time: a call given a workspace that another call holds is
// refused (an Error naming "workspace"), before anything is written. Not
// copyable; release() only between calls.
#pragma once

#include <cstdint>
#include <memory>

namespace raggemm {

namespace backends {
class Workspace;  // backends/workspace.h
}  // namespace backends

class GmmWorkspace {
 public:
  GmmWorkspace();
  ~GmmWorkspace();
  GmmWorkspace(const GmmWorkspace&) = delete;
  GmmWorkspace& operator=(const GmmWorkspace&) = delete;

  // Bytes it holds now.
  int64_t bytes() const;
  // Frees what it holds; the next call that is lent it allocates again.
  void release();

  // The backends' view of it (the ops layer hands it to Backend::run).
  backends::Workspace& backend_workspace() { return *impl_; }

 private:
  std::unique_ptr<backends::Workspace> impl_;
};

}  // namespace raggemm
