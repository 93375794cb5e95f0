// The data x fsdp x expert mesh and its axis communicators.
#include "raggemm/mesh.h"

#include "raggemm/error.h"

namespace raggemm {

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kData:
      return "dp";
    case MeshAxis::kFsdp:
      return "fsdp";
    case MeshAxis::kExpert:
      return "ep";
  }
  return "?";
}

int64_t& MeshShape::operator[](MeshAxis axis) {
  return axis == MeshAxis::kData ? data : axis == MeshAxis::kFsdp ? fsdp : expert;
}
int64_t MeshShape::operator[](MeshAxis axis) const {
  return axis == MeshAxis::kData ? data : axis == MeshAxis::kFsdp ? fsdp : expert;
}
int64_t MeshCoords::operator[](MeshAxis axis) const {
  return axis == MeshAxis::kData ? data : axis == MeshAxis::kFsdp ? fsdp : expert;
}

std::string MeshShape::describe() const {
  return "(dp, fsdp, ep) = (" + std::to_string(data) + ", " + std::to_string(fsdp) + ", " +
         std::to_string(expert) + ")";
}

MeshShape resolve_mesh_shape(int64_t data, int64_t fsdp, int64_t expert, int ranks) {
  const char* keys = "ici_data_parallelism,ici_fsdp_parallelism,ici_expert_parallelism";
  const std::string values =
      std::to_string(data) + "," + std::to_string(fsdp) + "," + std::to_string(expert);
  MeshShape shape{data, fsdp, expert};
  int fill = 0;
  int64_t known = 1;
  for (MeshAxis axis : kAllMeshAxes) {
    const int64_t v = shape[axis];
    require(v == -1 || v >= 1, keys, values,
            std::string("each axis must be a positive size or -1 (what the others leave); ") +
                "ici_" +
                (axis == MeshAxis::kData   ? "data"
                 : axis == MeshAxis::kFsdp ? "fsdp"
                                           : "expert") +
                "_parallelism is " + std::to_string(v));
    if (v == -1) {
      ++fill;
    } else {
      known *= v;
    }
  }
  require(fill <= 1, keys, values, "at most one axis may be -1");
  const std::string launch = "the " + std::to_string(ranks) + " process(es) of this launch";
  if (fill == 1) {
    require(ranks % known == 0, keys, values,
            "the fixed axes' product " + std::to_string(known) + " does not divide " + launch);
    for (MeshAxis axis : kAllMeshAxes) {
      if (shape[axis] == -1) shape[axis] = ranks / known;
    }
  }
  require(shape.size() == ranks, keys, values,
          "their product " + std::to_string(shape.size()) + " does not match " + launch +
              " (run mpirun -np " + std::to_string(shape.size()) +
              " raggemm train, or change the axes so that they multiply to " +
              std::to_string(ranks) + ")");
  return shape;
}

MeshCoords mesh_coords(const MeshShape& shape, int64_t rank) {
  MeshCoords c;
  c.expert = rank % shape.expert;
  c.fsdp = (rank / shape.expert) % shape.fsdp;
  c.data = rank / (shape.expert * shape.fsdp);
  return c;
}

int64_t mesh_rank(const MeshShape& shape, const MeshCoords& c) {
  return (c.data * shape.fsdp + c.fsdp) * shape.expert + c.expert;
}

Mesh::Mesh(Communicator* world, const MeshShape& shape) : world_(world), shape_(shape) {
  require(shape.size() == comm_size(world), "mesh", shape.describe(),
          "does not match the " + std::to_string(comm_size(world)) + " process(es)");
  coords_ = mesh_coords(shape, comm_rank(world));
  if (!world_) return;
  // The axis communicator of `axis` groups the ranks whose other two
  // coordinates agree: color = the rank with this axis's coordinate zeroed.
  for (MeshAxis axis : kAllMeshAxes) {
    MeshCoords base = coords_;
    (axis == MeshAxis::kData ? base.data : axis == MeshAxis::kFsdp ? base.fsdp : base.expert) = 0;
    std::unique_ptr<Communicator> comm =
        world_->split(static_cast<int>(mesh_rank(shape, base)), static_cast<int>(coords_[axis]));
    if (shape[axis] > 1) axes_[static_cast<int>(axis)] = std::move(comm);
  }
}

Communicator* Mesh::axis(MeshAxis axis) const { return axes_[static_cast<int>(axis)].get(); }

double Mesh::axis_seconds(MeshAxis axis) const {
  const Communicator* comm = this->axis(axis);
  return comm ? comm->seconds() : 0.0;
}

}  // namespace raggemm
