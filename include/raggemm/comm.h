// The communicator expert parallelism runs on (docs/parallelism.md):
// the collectives the MoE layer and the trainer need, on buffers of rows.
//
// Counts are in rows of `row_elems` elements, not in bytes, so a large
// exchange never overflows a 32-bit byte count. Two implementations: a
// single-process one (here, no MPI: P = 1, every collective a copy) and an
// MPI one (src/parallel/, linked into the CLI and the MPI tests only), so the
// library and its users need MPI only when they run across processes.
//
// Every collective must be called by all ranks in the same order. Time spent
// inside the collectives is accumulated (seconds()) for the trainer's
// communication share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace raggemm {

enum class CommType : uint8_t { kF32, kF64, kI64 };
size_t comm_type_size(CommType type);

template <class T>
constexpr CommType comm_type_of();
template <>
constexpr CommType comm_type_of<float>() {
  return CommType::kF32;
}
template <>
constexpr CommType comm_type_of<double>() {
  return CommType::kF64;
}
template <>
constexpr CommType comm_type_of<int64_t>() {
  return CommType::kI64;
}

class Communicator;

// A non-blocking collective in flight (Communicator::start_allgather). wait()
// completes it; the destructor waits too, so a request is never abandoned
// while MPI still writes into its buffer.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  void wait();
  bool done() const { return done_; }

 protected:
  explicit CommRequest(Communicator& comm) : comm_(comm) {}
  virtual void do_wait() = 0;
  // Subclasses call this from their destructor (a virtual call is not
  // possible from the base destructor).
  void finish() {
    if (!done_) wait();
  }

 private:
  Communicator& comm_;
  bool done_ = false;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // send holds the rows for rank 0, then rank 1, ... (send_rows[p] each);
  // recv gets rank 0's rows for us, then rank 1's, ... (recv_rows[p] each).
  void alltoallv_rows(const void* send, const int64_t* send_rows, void* recv,
                      const int64_t* recv_rows, int64_t row_elems, CommType type);
  // recv gets every rank's send rows in rank order (recv_rows[p] from rank p).
  void allgatherv_rows(const void* send, int64_t send_rows, void* recv, const int64_t* recv_rows,
                       int64_t row_elems, CommType type);
  // send [sum(recv_rows), row_elems] is summed over the ranks; this rank gets
  // block `rank()` (recv_rows[rank()] rows) in recv.
  void reduce_scatter_rows(const void* send, void* recv, const int64_t* recv_rows,
                           int64_t row_elems, CommType type);
  // data[i] = sum over ranks of data[i], in place.
  void allreduce_sum(void* data, int64_t count, CommType type);
  void barrier();
  // Every rank's `count` elements in rank order into recv [size() * count],
  // without blocking: the caller computes while it travels, then waits.
  // The time counted is that of the start and the wait, not the overlap.
  std::unique_ptr<CommRequest> start_allgather(const void* send, int64_t count, void* recv,
                                               CommType type);
  // The ranks with the same `color` form a new communicator, ordered by
  // `key` (MPI_Comm_split); every rank must call it.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Ends the whole job; never returns. Prints nothing (nothing below cli/
  // and train/ prints): the program presents `message` first, naming
  // job_rank() of job_size(), then calls this. Across processes every rank
  // ends with status 2; in one process (SingleProcessCommunicator) there is
  // no other rank to stop, so it throws std::runtime_error(message) and the
  // program's own error path presents it and exits.
  [[noreturn]] virtual void abort(const std::string& message) = 0;
  // This process among all of the job's (MPI_COMM_WORLD), whichever
  // communicator it holds; the rank an error message names.
  virtual int job_rank() const { return rank(); }
  virtual int job_size() const { return size(); }

  // Wall time spent inside the collectives so far.
  double seconds() const { return seconds_; }

  template <class T>
  void allreduce_sum(T* data, int64_t count) {
    allreduce_sum(static_cast<void*>(data), count, comm_type_of<T>());
  }

 protected:
  virtual void do_alltoallv(const void* send, const int64_t* send_rows, void* recv,
                            const int64_t* recv_rows, int64_t row_elems, CommType type) = 0;
  virtual void do_allgatherv(const void* send, int64_t send_rows, void* recv,
                             const int64_t* recv_rows, int64_t row_elems, CommType type) = 0;
  virtual void do_reduce_scatter(const void* send, void* recv, const int64_t* recv_rows,
                                 int64_t row_elems, CommType type) = 0;
  virtual void do_allreduce_sum(void* data, int64_t count, CommType type) = 0;
  virtual void do_barrier() = 0;
  virtual std::unique_ptr<CommRequest> do_start_allgather(const void* send, int64_t count,
                                                          void* recv, CommType type) = 0;

 private:
  double seconds_ = 0;
  friend class CommTimer;
  friend class CommRequest;
};

// P = 1: every collective is a copy (or nothing); abort throws the message
// (there is no other process to end).
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  [[noreturn]] void abort(const std::string& message) override;
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SingleProcessCommunicator>();
  }

 protected:
  void do_alltoallv(const void* send, const int64_t* send_rows, void* recv,
                    const int64_t* recv_rows, int64_t row_elems, CommType type) override;
  void do_allgatherv(const void* send, int64_t send_rows, void* recv, const int64_t* recv_rows,
                     int64_t row_elems, CommType type) override;
  void do_reduce_scatter(const void* send, void* recv, const int64_t* recv_rows, int64_t row_elems,
                         CommType type) override;
  void do_allreduce_sum(void*, int64_t, CommType) override {}
  void do_barrier() override {}
  std::unique_ptr<CommRequest> do_start_allgather(const void* send, int64_t count, void* recv,
                                                  CommType type) override;
};

// Ranks and sizes of a communicator that may be null (null = one process).
inline int comm_rank(const Communicator* comm) { return comm ? comm->rank() : 0; }
inline int comm_size(const Communicator* comm) { return comm ? comm->size() : 1; }

}  // namespace raggemm
