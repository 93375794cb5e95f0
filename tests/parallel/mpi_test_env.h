// The MPI world the expert-parallelism tests run in (mpirun -np 2), and
// helpers every rank calls alike.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "raggemm/comm.h"

namespace raggemm::testing {

// MPI_COMM_WORLD, set up by parallel_main.cc.
Communicator& world();

// A directory every rank names alike (rank 0's pid), created and empty.
std::string shared_temp_dir(const std::string& name);

// max |a - b| / max |b|: the relative error of a whole tensor.
template <class A, class B>
double max_relative(const std::vector<A>& a, const std::vector<B>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace raggemm::testing
