// The microkernel registry (microkernel_registry.h): the one table of
// per-ISA kernels for every compute type, and the one choice among them.
#include "kernels/microkernel_registry.h"

#include <hwy/targets.h>

#include <array>
#include <atomic>
#include <cstring>
#include <initializer_list>

#include "kernels/bf16_dot_choice.h"
#include "kernels/cpu_features.h"

namespace raggemm::kernels {
namespace {

// A hand-written kernel of type Kernel (Bf16Microkernel, Int8Microkernel):
// its vector family, the CPU features it needs, its description (run null
// when this build lacks its instructions), whether it is chosen
// without being forced (a scalar twin kept for tests is not), and, where
// having the instructions is not enough, a measurement that must favour it
// before it is chosen without being forced (null: none needed).
template <class Kernel>
struct Registration {
  VectorFamily family;
  bool (*needs)(const CpuFeatures&);
  Kernel (*describe)();
  bool automatic;
  bool (*pays_off)(const Kernel&) = nullptr;
};

bool always(const CpuFeatures&) { return true; }

// ---- The registrations, fastest first per compute type ----------------------
// (the f32 kernel's are Highway's compiled targets, see the kF32 cases below.)

const Registration<Bf16Microkernel> kBf16Kernels[] = {
    // AMX machines have AVX-512, so the kernel belongs to that family: a
    // dispatch forced to AVX2 rules it out with the rest.
    {VectorFamily::kAvx512,
     [](const CpuFeatures& f) { return f.amx_tile && f.amx_bf16 && amx_tile_data_permitted(); },
     &bf16_microkernel_amx, true,
     // Measured as the AVX512_BF16 kernel is, though on every CPU seen it
     // was many times the f32 microkernel: a guest whose host traps AMX
     // would run it slowly.
     [](const Bf16Microkernel& k) { return bf16_dot_rates(k).dot_chosen; }},
    {VectorFamily::kAvx512,
     [](const CpuFeatures& f) { return f.avx512f && f.avx512bw && f.avx512bf16; },
     &bf16_microkernel_avx512, true,
     // Faster than widening on some CPUs with the instruction, slower on
     // others: measured (bf16_dot_choice.h).
     [](const Bf16Microkernel& k) { return bf16_dot_rates(k).dot_chosen; }},
    // The scalar twin runs only when forced: without a SIMD dot kernel bf16
    // widens to f32, which is faster than this loop.
    {VectorFamily::kPortable, &always, &bf16_microkernel_scalar, false},
};

const Registration<Int8Microkernel> kInt8Kernels[] = {
    {VectorFamily::kAvx512,
     [](const CpuFeatures& f) { return f.avx512f && f.avx512bw && f.avx512vnni; },
     &int8_microkernel_avx512_vnni, true},
    {VectorFamily::kAvx2, [](const CpuFeatures& f) { return f.avx2 && f.avx_vnni; },
     &int8_microkernel_avx_vnni, true},
    {VectorFamily::kAvx2, [](const CpuFeatures& f) { return f.avx2; }, &int8_microkernel_avx2,
     true},
    {VectorFamily::kPortable, &always, &int8_microkernel_scalar, true},
};

// -----------------------------------------------------------------------------

constexpr int kAuto = -1;
constexpr int kNone = -2;  // forced to no kernel of this type (bf16: widen)

// The registrations of one type, the ones this CPU runs (in order), and
// which of those is forced.
template <class Kernel>
struct Table {
  template <size_t N>
  explicit Table(const Registration<Kernel> (&registrations)[N]) {
    for (const Registration<Kernel>& r : registrations) {
      const Kernel kernel = r.describe();
      const bool runs = kernel.run != nullptr && r.needs(cpu_features());
      all.push_back({r, kernel, runs});
      if (runs) {
        runnable.push_back(kernel);
        runnable_registration.push_back(r);
      }
    }
  }

  // The forced kernel, else the fastest automatic one whose family the
  // Highway dispatch allows now and whose measurement (if it needs one)
  // favours it, else null.
  const Kernel* select() const {
    const int forced = forced_index.load(std::memory_order_relaxed);
    if (forced == kNone) return nullptr;
    if (forced >= 0) return &runnable[static_cast<size_t>(forced)];
    for (size_t i = 0; i < runnable.size(); ++i) {
      const Registration<Kernel>& r = runnable_registration[i];
      if (eligible(r) && (r.pays_off == nullptr || r.pays_off(runnable[i]))) return &runnable[i];
    }
    return nullptr;
  }

  // The fastest automatic kernel whose family the dispatch allows now,
  // before any measurement is asked.
  const Kernel* candidate() const {
    for (size_t i = 0; i < runnable.size(); ++i) {
      if (eligible(runnable_registration[i])) return &runnable[i];
    }
    return nullptr;
  }

  // Chosen without being forced, and of a family the dispatch allows now.
  static bool eligible(const Registration<Kernel>& r) {
    return r.automatic && family_allowed(r.family);
  }

  const Registration<Kernel>& registration_of(const Kernel* kernel) const {
    return runnable_registration[static_cast<size_t>(kernel - runnable.data())];
  }

  VectorFamily family_of(const Kernel* kernel) const {
    return kernel ? registration_of(kernel).family : VectorFamily::kPortable;
  }

  bool force(const std::string& target, const char* none_name) {
    if (target.empty() || target == "auto") {
      forced_index.store(kAuto);
      return true;
    }
    if (none_name && target == none_name) {
      forced_index.store(kNone);
      return true;
    }
    for (size_t i = 0; i < runnable.size(); ++i) {
      if (target == runnable[i].target) {
        forced_index.store(static_cast<int>(i));
        return true;
      }
    }
    return false;
  }

  struct Entry {
    Registration<Kernel> registration;
    Kernel kernel;
    bool runs;
  };
  std::vector<Entry> all;
  std::vector<Kernel> runnable;
  std::vector<Registration<Kernel>> runnable_registration;
  std::atomic<int> forced_index{kAuto};
};

Table<Bf16Microkernel>& bf16_table() {
  static Table<Bf16Microkernel> table(kBf16Kernels);
  return table;
}

Table<Int8Microkernel>& int8_table() {
  static Table<Int8Microkernel> table(kInt8Kernels);
  return table;
}

// ---- f32: Highway's targets
// ---------------------------------------------------

constexpr VectorFamily family_of_target(int64_t target) {
#if HWY_ARCH_X86
  // x86 targets take lower bits as they get wider: AVX3 and everything
  // below its bit (AVX3_DL, and later Highways' AVX3_ZEN4, AVX3_SPR) are
  // AVX-512.
  if (target <= HWY_AVX3) return VectorFamily::kAvx512;
  if (target == HWY_AVX2) return VectorFamily::kAvx2;
#else
  (void)target;
#endif
  return VectorFamily::kPortable;
}

// The compiled Highway targets this CPU supports, read when the library
// loads (before anything can force a target: a forced target must not
// shorten the list of what the CPU runs).
int64_t cpu_f32_targets() {
  static const int64_t targets = microkernel_targets();
  return targets;
}
[[maybe_unused]] const bool kReadAtLoad = (cpu_f32_targets(), cpu_features(), true);

const char* none_name(ComputeType type) {
  return type == ComputeType::kBf16Dot ? "WIDEN" : nullptr;
}

template <class Kernel>
std::vector<MicrokernelInfo> infos(ComputeType type, const Table<Kernel>& table) {
  std::vector<MicrokernelInfo> out;
  for (const auto& e : table.all) {
    out.push_back({type, e.kernel.target, e.registration.family, e.kernel.mr, e.kernel.nr, e.runs});
  }
  return out;
}

// Highway's dispatch slot -> vector family (see detail:: in the header).
constexpr std::array<VectorFamily, detail::kHighwayDispatchSlots> family_by_index() {
  std::array<VectorFamily, detail::kHighwayDispatchSlots> families{};
  for (int i = 1; i <= HWY_MAX_DYNAMIC_TARGETS; ++i) {
    families[i] = family_of_target(
        int64_t{1} << (i - 1 + HWY_HIGHEST_TARGET_BIT + 1 - HWY_MAX_DYNAMIC_TARGETS));
  }
  families[detail::kHighwayDispatchSlots - 1] = VectorFamily::kPortable;
  return families;
}

}  // namespace

const char* compute_type_name(ComputeType type) {
  static const char* const kNames[] = {"f32", "bf16-dot", "int8-dot"};
  return kNames[static_cast<int>(type)];
}

namespace detail {

// Set while the library loads (null before: highway_family() then takes the
// slow path), so the inline check needs no static guard.
hwy::ChosenTarget* const chosen_target = &hwy::GetChosenTarget();
constexpr std::array<VectorFamily, kHighwayDispatchSlots> family_by_dispatch_index =
    family_by_index();

VectorFamily highway_family_slow() { return family_of_target(dispatched_target()); }

}  // namespace detail

std::vector<MicrokernelInfo> registered_microkernels(ComputeType type) {
  if (type == ComputeType::kBf16Dot) return infos(type, bf16_table());
  if (type == ComputeType::kInt8Dot) return infos(type, int8_table());
  std::vector<MicrokernelInfo> out;
  for (int64_t bits = compiled_targets(); bits != 0; bits &= bits - 1) {
    const int64_t target = bits & -bits;  // lowest bit first: fastest first
    const bool runs = (cpu_f32_targets() & target) != 0;
    const Microkernel kernel = runs ? microkernel_of_target(target) : Microkernel{};
    out.push_back(
        {type, target_name(target), family_of_target(target), kernel.mr, kernel.nr, runs});
  }
  return out;
}

std::vector<std::string> microkernel_names(ComputeType type) {
  std::vector<std::string> names;
  for (const MicrokernelInfo& info : registered_microkernels(type)) {
    if (info.runs_here) names.push_back(info.target);
  }
  return names;
}

std::string selected_microkernel(ComputeType type) {
  if (type == ComputeType::kBf16Dot) {
    const Bf16Microkernel* kernel = select_bf16_microkernel();
    return kernel ? kernel->target : none_name(type);
  }
  if (type == ComputeType::kInt8Dot) return select_int8_microkernel().target;
  return select_microkernel().target;
}

VectorFamily selected_family(ComputeType type) {
  if (type == ComputeType::kBf16Dot) return bf16_table().family_of(select_bf16_microkernel());
  if (type == ComputeType::kInt8Dot) return int8_table().family_of(&select_int8_microkernel());
  return highway_family();
}

bool force_microkernel(ComputeType type, const std::string& target) {
  if (type == ComputeType::kBf16Dot) return bf16_table().force(target, none_name(type));
  if (type == ComputeType::kInt8Dot) return int8_table().force(target, none_name(type));
  if (target.empty() || target == "auto") {
    hwy::SetSupportedTargetsForTest(0);
    return true;
  }
  for (int64_t bits = cpu_f32_targets(); bits != 0; bits &= bits - 1) {
    const int64_t bit = bits & -bits;
    if (target == target_name(bit)) {
      hwy::SetSupportedTargetsForTest(bit);
      return true;
    }
  }
  return false;
}

// ---- Typed views
// ----------------------------------------------------------------

const std::vector<Bf16Microkernel>& bf16_microkernels() { return bf16_table().runnable; }
const Bf16Microkernel* select_bf16_microkernel() { return bf16_table().select(); }
const Bf16Microkernel* bf16_dot_candidate() { return bf16_table().candidate(); }
bool force_bf16_microkernel(const std::string& target) {
  return force_microkernel(ComputeType::kBf16Dot, target);
}

const std::vector<Int8Microkernel>& int8_microkernels() { return int8_table().runnable; }
const Int8Microkernel& select_int8_microkernel() {
  // Never null: the portable kernel is automatic and runs everywhere.
  return *int8_table().select();
}
bool force_int8_microkernel(const std::string& target) {
  return force_microkernel(ComputeType::kInt8Dot, target);
}

}  // namespace raggemm::kernels
