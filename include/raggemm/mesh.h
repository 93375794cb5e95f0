// The mesh of processes (docs/parallelism.md; src/parallel/mesh.cc): the MPI ranks arranged as
// data x fsdp x expert (MaxText's ici_data_parallelism,
// ici_fsdp_parallelism, ici_expert_parallelism), with one communicator per
// axis. The expert index varies fastest, so a pure expert-parallel mesh
// (1, 1, P) numbers its ranks as expert parallelism always has.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "raggemm/comm.h"

namespace raggemm {

enum class MeshAxis : uint8_t { kData, kFsdp, kExpert };
inline constexpr MeshAxis kAllMeshAxes[] = {MeshAxis::kData, MeshAxis::kFsdp, MeshAxis::kExpert};
// "dp", "fsdp", "ep": the names of the step log and docs.
const char* mesh_axis_name(MeshAxis axis);

struct MeshShape {
  int64_t data = 1, fsdp = 1, expert = 1;
  int64_t size() const { return data * fsdp * expert; }
  int64_t& operator[](MeshAxis axis);
  int64_t operator[](MeshAxis axis) const;
  bool operator==(const MeshShape&) const = default;
  // "(dp, fsdp, ep) = (1, 2, 2)".
  std::string describe() const;
};

// The config's three axes, with -1 in at most one of them standing for what
// the others leave of `ranks`; their product must be `ranks`. Errors name
// the keys (ici_data_parallelism, ici_fsdp_parallelism,
// ici_expert_parallelism) and their values.
MeshShape resolve_mesh_shape(int64_t data, int64_t fsdp, int64_t expert, int ranks);

struct MeshCoords {
  int64_t data = 0, fsdp = 0, expert = 0;
  int64_t operator[](MeshAxis axis) const;
};
MeshCoords mesh_coords(const MeshShape& shape, int64_t rank);
int64_t mesh_rank(const MeshShape& shape, const MeshCoords& coords);

class Mesh {
 public:
  // world null: one process, shape (1, 1, 1). Otherwise every rank of
  // `world` must call this with the same shape (MPI_Comm_split per axis).
  Mesh(Communicator* world, const MeshShape& shape);
  const MeshShape& shape() const { return shape_; }
  const MeshCoords& coords() const { return coords_; }
  int rank() const { return comm_rank(world_); }
  int size() const { return comm_size(world_); }
  // The world (null on one process).
  Communicator* world() const { return world_; }
  // The ranks that differ from this one only along `axis`; null when the
  // axis has size 1 (nothing to exchange).
  Communicator* axis(MeshAxis axis) const;
  // Seconds spent inside each axis's collectives so far.
  double axis_seconds(MeshAxis axis) const;

 private:
  Communicator* world_;
  MeshShape shape_;
  MeshCoords coords_;
  std::unique_ptr<Communicator> axes_[3];
};

}  // namespace raggemm
