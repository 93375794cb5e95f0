#include "raggemm/gmm_workspace.h"

#include "backends/workspace.h"

namespace raggemm {

GmmWorkspace::GmmWorkspace() : impl_(std::make_unique<backends::Workspace>()) {}
GmmWorkspace::~GmmWorkspace() = default;

int64_t GmmWorkspace::bytes() const { return impl_->bytes(); }

void GmmWorkspace::release() { impl_->release(); }

}  // namespace raggemm
