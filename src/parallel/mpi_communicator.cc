// Communicators on MPI_COMM_WORLD and its splits (the mesh axes). Row exchanges use a contiguous row
// datatype (MPI_Type_contiguous) so counts and displacements are in rows:
// an exchange of 2^31 bytes or more still has small int counts. Reductions
// need a predefined type (MPI_SUM is undefined on derived ones), so their
// counts are elements, checked against INT_MAX (allreduce is chunked).
#include "parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "raggemm/error.h"

namespace raggemm {
namespace {

MPI_Datatype mpi_type(CommType type) {
  switch (type) {
    case CommType::kF32:
      return MPI_FLOAT;
    case CommType::kF64:
      return MPI_DOUBLE;
    case CommType::kI64:
      return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

int to_int(int64_t value, const char* argument) {
  require(value >= 0 && value <= INT_MAX, argument, value,
          "exceeds the int range of an MPI count (split the exchange)");
  return static_cast<int>(value);
}

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("mpi", call, std::string(text, static_cast<size_t>(length)));
}

// A committed contiguous datatype of one row, freed on scope exit.
class RowType {
 public:
  RowType(int64_t row_elems, CommType type) {
    check(MPI_Type_contiguous(to_int(row_elems, "row_elems"), mpi_type(type), &type_),
          "MPI_Type_contiguous");
    check(MPI_Type_commit(&type_), "MPI_Type_commit");
  }
  ~RowType() { MPI_Type_free(&type_); }
  RowType(const RowType&) = delete;
  RowType& operator=(const RowType&) = delete;
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// Counts and displacements (in rows) of a v-collective.
struct Layout {
  std::vector<int> counts, displs;
  Layout(const int64_t* rows, int size, const char* argument)
      : counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size)) {
    int64_t offset = 0;
    for (int p = 0; p < size; ++p) {
      counts[p] = to_int(rows[p], argument);
      displs[p] = to_int(offset, argument);
      offset += rows[p];
    }
  }
};

// MPI_Iallgather in flight; its buffers belong to the caller until wait().
class MpiRequest final : public CommRequest {
 public:
  MpiRequest(Communicator& comm, MPI_Request request) : CommRequest(comm), request_(request) {}
  ~MpiRequest() override { finish(); }

 protected:
  void do_wait() override { check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait"); }

 private:
  MPI_Request request_;
};

class MpiCommunicator final : public Communicator {
 public:
  // MPI_COMM_WORLD (initialising MPI when nobody has).
  MpiCommunicator() : comm_(MPI_COMM_WORLD) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      check(MPI_Init(nullptr, nullptr), "MPI_Init");
      owns_mpi_ = true;
    }
    // Errors come back as codes and become raggemm::Error.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  // A sub-communicator of split(); freed with this object.
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm), owns_comm_(true) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    if (owns_comm_) MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm part = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(part);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // The program has presented the message (Communicator::abort); this
  // only ends every rank of the job.
  [[noreturn]] void abort(const std::string&) override {
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
  }

  int job_rank() const override {
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    return world_rank;
  }
  int job_size() const override {
    int world_size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    return world_size;
  }

 protected:
  void do_alltoallv(const void* send, const int64_t* send_rows, void* recv,
                    const int64_t* recv_rows, int64_t row_elems, CommType type) override {
    const RowType row(row_elems, type);
    const Layout out(send_rows, size_, "send_rows"), in(recv_rows, size_, "recv_rows");
    check(MPI_Alltoallv(send, out.counts.data(), out.displs.data(), row.get(), recv,
                        in.counts.data(), in.displs.data(), row.get(), comm_),
          "MPI_Alltoallv");
  }

  void do_allgatherv(const void* send, int64_t send_rows, void* recv, const int64_t* recv_rows,
                     int64_t row_elems, CommType type) override {
    const RowType row(row_elems, type);
    const Layout in(recv_rows, size_, "recv_rows");
    check(MPI_Allgatherv(send, to_int(send_rows, "send_rows"), row.get(), recv, in.counts.data(),
                         in.displs.data(), row.get(), comm_),
          "MPI_Allgatherv");
  }

  void do_reduce_scatter(const void* send, void* recv, const int64_t* recv_rows, int64_t row_elems,
                         CommType type) override {
    std::vector<int> counts(static_cast<size_t>(size_));
    for (int p = 0; p < size_; ++p) counts[p] = to_int(recv_rows[p] * row_elems, "recv_rows");
    check(MPI_Reduce_scatter(send, recv, counts.data(), mpi_type(type), MPI_SUM, comm_),
          "MPI_Reduce_scatter");
  }

  void do_allreduce_sum(void* data, int64_t count, CommType type) override {
    const size_t bytes = comm_type_size(type);
    char* base = static_cast<char*>(data);
    constexpr int64_t kChunk = INT_MAX / 2;
    for (int64_t done = 0; done < count; done += kChunk) {
      const int part = static_cast<int>(std::min<int64_t>(kChunk, count - done));
      check(MPI_Allreduce(MPI_IN_PLACE, base + static_cast<size_t>(done) * bytes, part,
                          mpi_type(type), MPI_SUM, comm_),
            "MPI_Allreduce");
    }
  }

  void do_barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

  std::unique_ptr<CommRequest> do_start_allgather(const void* send, int64_t count, void* recv,
                                                  CommType type) override {
    MPI_Request request = MPI_REQUEST_NULL;
    const int n = to_int(count, "count");
    check(MPI_Iallgather(send == recv ? MPI_IN_PLACE : send, n, mpi_type(type), recv, n,
                         mpi_type(type), comm_, &request),
          "MPI_Iallgather");
    return std::make_unique<MpiRequest>(*this, request);
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  bool owns_mpi_ = false, owns_comm_ = false;
};

}  // namespace

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

}  // namespace raggemm
