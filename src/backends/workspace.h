// Scratch memory a caller lends to the backends' runs (Backend::run), so
// that the caller, not the threads that happened to run a call, decides how
// long it lives and can see how much it is. One workspace may serve several
// backends: each keeps its own part in it, made on its first call (the CPU
// backend: the kernels' per-thread packing buffers, kernels/workspace.h; a
// device backend: its device scratch). A workspace serves one call at a
// time; a second call while one runs is refused (Workspace::InUse).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "raggemm/error.h"

namespace raggemm::backends {

class Workspace {
 public:
  // One backend's scratch in the workspace.
  class Part {
   public:
    virtual ~Part() = default;
    virtual int64_t bytes() const = 0;
  };

  // Held by a backend for the length of one call: refuses a workspace that
  // another call holds (an Error naming the argument "workspace").
  class InUse {
   public:
    explicit InUse(Workspace& workspace);
    ~InUse();
    InUse(const InUse&) = delete;
    InUse& operator=(const InUse&) = delete;

   private:
    Workspace& workspace_;
  };

  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // The part of `backend`, made (default-constructed T) on first use.
  template <class T>
  T& part(std::string_view backend) {
    for (auto& [name, part] : parts_) {
      if (name == backend) {
        T* typed = dynamic_cast<T*>(part.get());
        require(typed != nullptr, "workspace", std::string(backend),
                "holds another kind of part under this backend's name");
        return *typed;
      }
    }
    auto made = std::make_unique<T>();
    T& result = *made;
    parts_.emplace_back(std::string(backend), std::move(made));
    return result;
  }

  // Bytes every part holds now.
  int64_t bytes() const;
  // Frees every part (between calls).
  void release();

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Part>>> parts_;
  std::atomic<bool> in_use_{false};
};

}  // namespace raggemm::backends
