// The communicator's timing wrapper and the single-process implementation.
#include "raggemm/comm.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "raggemm/error.h"

namespace raggemm {

size_t comm_type_size(CommType type) {
  switch (type) {
    case CommType::kF32:
      return 4;
    case CommType::kF64:
    case CommType::kI64:
      return 8;
  }
  return 0;
}

// Adds the lifetime of a collective call to the communicator's total.
class CommTimer {
 public:
  explicit CommTimer(Communicator& comm) : comm_(comm), begin_(std::chrono::steady_clock::now()) {}
  ~CommTimer() {
    comm_.seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
  }
  CommTimer(const CommTimer&) = delete;
  CommTimer& operator=(const CommTimer&) = delete;

 private:
  Communicator& comm_;
  std::chrono::steady_clock::time_point begin_;
};

namespace {

void check_rows(int64_t rows, const char* argument) {
  require(rows >= 0, argument, rows, "row counts must be >= 0");
}

}  // namespace

void Communicator::alltoallv_rows(const void* send, const int64_t* send_rows, void* recv,
                                  const int64_t* recv_rows, int64_t row_elems, CommType type) {
  require(row_elems > 0, "row_elems", row_elems, "must be positive");
  for (int p = 0; p < size(); ++p) {
    check_rows(send_rows[p], "send_rows");
    check_rows(recv_rows[p], "recv_rows");
  }
  CommTimer timer(*this);
  do_alltoallv(send, send_rows, recv, recv_rows, row_elems, type);
}

void Communicator::allgatherv_rows(const void* send, int64_t send_rows, void* recv,
                                   const int64_t* recv_rows, int64_t row_elems, CommType type) {
  require(row_elems > 0, "row_elems", row_elems, "must be positive");
  require(send_rows == recv_rows[rank()], "send_rows", send_rows,
          "differs from recv_rows[rank] = " + std::to_string(recv_rows[rank()]));
  for (int p = 0; p < size(); ++p) check_rows(recv_rows[p], "recv_rows");
  CommTimer timer(*this);
  do_allgatherv(send, send_rows, recv, recv_rows, row_elems, type);
}

void Communicator::reduce_scatter_rows(const void* send, void* recv, const int64_t* recv_rows,
                                       int64_t row_elems, CommType type) {
  require(row_elems > 0, "row_elems", row_elems, "must be positive");
  for (int p = 0; p < size(); ++p) check_rows(recv_rows[p], "recv_rows");
  CommTimer timer(*this);
  do_reduce_scatter(send, recv, recv_rows, row_elems, type);
}

void Communicator::allreduce_sum(void* data, int64_t count, CommType type) {
  require(count >= 0, "count", count, "must be >= 0");
  CommTimer timer(*this);
  do_allreduce_sum(data, count, type);
}

void CommRequest::wait() {
  if (done_) return;
  CommTimer timer(comm_);
  do_wait();
  done_ = true;
}

std::unique_ptr<CommRequest> Communicator::start_allgather(const void* send, int64_t count,
                                                           void* recv, CommType type) {
  require(count >= 0, "count", count, "must be >= 0");
  CommTimer timer(*this);
  return do_start_allgather(send, count, recv, type);
}

void Communicator::barrier() {
  CommTimer timer(*this);
  do_barrier();
}

// ---------------------------------------------------------------------------
// One process: every rank-0 block goes to rank 0.

void SingleProcessCommunicator::abort(const std::string& message) {
  throw std::runtime_error(message);
}

void SingleProcessCommunicator::do_alltoallv(const void* send, const int64_t* send_rows, void* recv,
                                             const int64_t* recv_rows, int64_t row_elems,
                                             CommType type) {
  require(send_rows[0] == recv_rows[0], "recv_rows", recv_rows[0],
          "differs from send_rows = " + std::to_string(send_rows[0]) + " on one process");
  if (send_rows[0] == 0 || send == recv) return;
  std::memmove(recv, send, static_cast<size_t>(send_rows[0] * row_elems) * comm_type_size(type));
}

void SingleProcessCommunicator::do_allgatherv(const void* send, int64_t send_rows, void* recv,
                                              const int64_t*, int64_t row_elems, CommType type) {
  if (send_rows == 0 || send == recv) return;
  std::memmove(recv, send, static_cast<size_t>(send_rows * row_elems) * comm_type_size(type));
}

void SingleProcessCommunicator::do_reduce_scatter(const void* send, void* recv,
                                                  const int64_t* recv_rows, int64_t row_elems,
                                                  CommType type) {
  if (recv_rows[0] == 0 || send == recv) return;
  std::memmove(recv, send, static_cast<size_t>(recv_rows[0] * row_elems) * comm_type_size(type));
}

namespace {
// One process: the copy is done at the start; nothing is in flight.
class DoneRequest final : public CommRequest {
 public:
  explicit DoneRequest(Communicator& comm) : CommRequest(comm) {}
  ~DoneRequest() override { finish(); }

 protected:
  void do_wait() override {}
};
}  // namespace

std::unique_ptr<CommRequest> SingleProcessCommunicator::do_start_allgather(const void* send,
                                                                           int64_t count,
                                                                           void* recv,
                                                                           CommType type) {
  if (count > 0 && send != recv) {
    std::memmove(recv, send, static_cast<size_t>(count) * comm_type_size(type));
  }
  return std::make_unique<DoneRequest>(*this);
}

}  // namespace raggemm
