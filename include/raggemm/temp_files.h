// Temp files of atomic writes, and removing those that killed writers left.
//
// write_file_atomic (raggemm/npy.h) stages each file as
//   <target>.tmp.<pid>.<16 hex digits>.<host>
// beside its target and renames it into place. A writer killed in between
// leaves the temp file behind (a checkpoint's can be hundreds of MB). The
// pid and host say who wrote it, so a later writer of the same targets can
// remove exactly the files whose writer no longer runs on this host, and
// never a live concurrent writer's (or another host's, on a shared
// filesystem). Names without the host (written before it was added) count
// as this host's.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace raggemm {

// The temp path write_file_atomic stages `path` in.
std::string atomic_temp_path(const std::string& path);

// What a temp file name says about itself.
struct TempFileName {
  std::string target;  // the file name it was going to become
  long pid = 0;
  std::string host;  // "" when the name predates the host field
};
// Parses a file name (no folder); false if it is not an atomic-write temp file.
bool parse_temp_file_name(const std::string& name, TempFileName& out);

// Whether process `pid` runs on this host (kill(pid, 0); a process we may not
// signal still runs).
bool process_is_running(long pid);

// Removes the temp files in `directory` whose target name satisfies
// `is_target` and whose writer no longer runs on this host. Reports one
// warning (raggemm/diagnostics.h, source "cleanup") when it removed any;
// never throws (what cannot be listed or removed is left). Returns the
// paths removed.
std::vector<std::string> remove_stale_temp_files(
    const std::string& directory, const std::function<bool(const std::string&)>& is_target);

}  // namespace raggemm
