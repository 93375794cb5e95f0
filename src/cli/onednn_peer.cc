#include "cli/onednn_peer.h"

#include <cstring>
#include <map>
#include <vector>

#include "raggemm/error.h"

#ifdef RAGGEMM_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace raggemm::bench {

#ifdef RAGGEMM_HAVE_ONEDNN

namespace {

using dnnl::memory;
using Dims = memory::dims;

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

// A matrix view for oneDNN: dims and element strides of a row-major or
// transposed operand at `data`.
struct MatrixView {
  int64_t rows, cols, row_stride, col_stride;
  float* data;
};

memory::desc desc_of(const MatrixView& v) {
  return memory::desc(Dims{v.rows, v.cols}, memory::data_type::f32,
                      Dims{v.row_stride, v.col_stride});
}

}  // namespace

struct OneDnnPeer::Impl {
  // One matmul call: its primitive (shared between calls of the same
  // shape) and its operands.
  struct Call {
    dnnl::matmul* primitive;
    memory src, weights, dst;
  };
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<int64_t, std::unique_ptr<dnnl::matmul>> by_rows;  // loop primitives by group size
  std::unique_ptr<dnnl::matmul> dense_primitive;
  std::string dense_impl;
  std::vector<Call> loop_calls;
  std::vector<std::pair<float*, size_t>> zero_fills;  // tgmm's empty groups
  Call dense_call{};

  // The three views of one product of `rows` rows at row offset `row` of
  // group `g` (rows = M and g = 0 for the dense peer).
  void views(const PeerOperands& p, int64_t g, int64_t row, int64_t rows, float* out,
             MatrixView* src, MatrixView* weights, MatrixView* dst) const {
    float* a = const_cast<float*>(p.a);
    float* b = const_cast<float*>(p.b);
    const int64_t k = p.k, n = p.n;
    switch (p.op) {
      case BenchOp::kGmm:  // [rows,K] @ [K,N]
        *src = {rows, k, k, 1, a + row * k};
        *weights = {k, n, n, 1, b + g * k * n};
        *dst = {rows, n, n, 1, out + row * n};
        break;
      case BenchOp::kDlhs:  // [rows,N] @ [K,N]^T
        *src = {rows, n, n, 1, a + row * n};
        *weights = {n, k, 1, n, b + g * k * n};
        *dst = {rows, k, k, 1, out + row * k};
        break;
      case BenchOp::kTgmm:  // [rows,K]^T @ [rows,N] into [K,N]
        *src = {k, rows, 1, k, a + row * k};
        *weights = {rows, n, n, 1, b + row * n};
        *dst = {k, n, n, 1, out + g * k * n};
        break;
    }
  }

  std::unique_ptr<dnnl::matmul> make(const MatrixView& s, const MatrixView& w,
                                     const MatrixView& d, std::string* impl) {
    const dnnl::matmul::desc desc(desc_of(s), desc_of(w), desc_of(d));
    const dnnl::matmul::primitive_desc pd(desc, engine);
    if (impl != nullptr) *impl = pd.impl_info_str();
    return std::make_unique<dnnl::matmul>(pd);
  }

  Call call(dnnl::matmul* primitive, const MatrixView& s, const MatrixView& w,
            const MatrixView& d) {
    return {primitive, memory(desc_of(s), engine, s.data), memory(desc_of(w), engine, w.data),
            memory(desc_of(d), engine, d.data)};
  }

  void execute(Call& c) {
    c.primitive->execute(stream, {{DNNL_ARG_SRC, c.src},
                                  {DNNL_ARG_WEIGHTS, c.weights},
                                  {DNNL_ARG_DST, c.dst}});
  }
};

bool onednn_available() { return true; }

OneDnnPeer::OneDnnPeer(const PeerOperands& p, float* loop_out, float* dense_out)
    : impl_(std::make_unique<Impl>()) {
  MatrixView s{}, w{}, d{};
  int64_t row = 0;
  for (size_t g = 0; g < p.group_sizes->size(); ++g) {
    const int64_t rows = (*p.group_sizes)[g];
    impl_->views(p, static_cast<int64_t>(g), row, rows, loop_out, &s, &w, &d);
    if (rows == 0) {
      if (p.op == BenchOp::kTgmm) impl_->zero_fills.emplace_back(d.data, size_t(p.k * p.n));
      continue;
    }
    auto& primitive = impl_->by_rows[rows];
    if (!primitive) primitive = impl_->make(s, w, d, nullptr);
    impl_->loop_calls.push_back(impl_->call(primitive.get(), s, w, d));
    row += rows;
  }
  impl_->views(p, 0, 0, p.m, dense_out, &s, &w, &d);
  impl_->dense_primitive = impl_->make(s, w, d, &impl_->dense_impl);
  impl_->dense_call = impl_->call(impl_->dense_primitive.get(), s, w, d);
}

OneDnnPeer::~OneDnnPeer() = default;

void OneDnnPeer::run_loop() {
  for (auto& [data, count] : impl_->zero_fills) std::memset(data, 0, count * sizeof(float));
  for (Impl::Call& c : impl_->loop_calls) impl_->execute(c);
  impl_->stream.wait();
}

void OneDnnPeer::run_dense() {
  impl_->execute(impl_->dense_call);
  impl_->stream.wait();
}

std::string OneDnnPeer::kernel() const {
  return std::string(isa_name(dnnl::get_effective_cpu_isa())) + " (" + impl_->dense_impl + ")";
}

#else  // no oneDNN in this build

struct OneDnnPeer::Impl {};
bool onednn_available() { return false; }
OneDnnPeer::OneDnnPeer(const PeerOperands&, float*, float*) {
  fail("peer", "onednn", "this build has no oneDNN (install libdnnl-dev and reconfigure)");
}
OneDnnPeer::~OneDnnPeer() = default;
void OneDnnPeer::run_loop() {}
void OneDnnPeer::run_dense() {}
std::string OneDnnPeer::kernel() const { return ""; }

#endif

}  // namespace raggemm::bench
