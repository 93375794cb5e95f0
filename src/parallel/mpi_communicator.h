// The MPI communicator (Open MPI): a separate library, raggemm_mpi, linked
// into the CLI and the MPI tests only, so mpi.h stays out of every other
// header and the core library runs without MPI.
#pragma once

#include <memory>

#include "raggemm/comm.h"

namespace raggemm {

// True when this process was started by mpirun (Open MPI or PMIx sets the
// rank in the environment): the CLI then joins the job even at P = 1 so a
// launch mismatch is reported instead of P copies training alone.
bool launched_by_mpirun();

// Initialises MPI (once per process; MPI_Finalize runs when the returned
// communicator is destroyed) and returns MPI_COMM_WORLD.
std::unique_ptr<Communicator> make_mpi_communicator();

}  // namespace raggemm
