// The one registry of microkernels, keyed by (compute type, ISA target):
// the f32 kernel (Highway dynamic dispatch, one per compiled Highway
// target), the bf16 dot kernels and the int8 dot kernels (hand-written,
// chosen by the CPU feature table where Highway 1.0.3 lacks the
// instructions). Every per-ISA kernel is registered in one table
// (microkernel_registry.cc) with the vector family it belongs to and the
// CPU features it needs; selection, forcing and the rule that a Highway
// target forced down (hwy::SetSupportedTargetsForTest, `--target AVX2`)
// rules out every higher family of every compute type live here only.
//
// The typed entry points the drivers call (select_microkernel,
// select_bf16_microkernel, select_int8_microkernel, and the force_* ones the
// tests and benchmarks use) are thin views of this registry.
#pragma once

#include <hwy/targets.h>

#include <array>
#include <string>
#include <vector>

#include "kernels/bf16_microkernel.h"
#include "kernels/int8_microkernel.h"
#include "kernels/microkernel.h"

namespace raggemm::kernels {

enum class ComputeType { kF32, kBf16Dot, kInt8Dot };
const char* compute_type_name(ComputeType type);

// Vector families, in order: forcing Highway to a target of one family
// rules out every family above it, for every compute type at once.
enum class VectorFamily : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

namespace detail {
// Slots of Highway's dispatch table: index i >= 1 is target bit
// i - 1 + (HWY_HIGHEST_TARGET_BIT + 1 - HWY_MAX_DYNAMIC_TARGETS)
// (hwy/targets.h, HWY_CHOSEN_TARGET_SHIFT), the last is the portable
// fallback, 0 is "not chosen yet".
constexpr int kHighwayDispatchSlots = HWY_MAX_DYNAMIC_TARGETS + 2;
extern hwy::ChosenTarget* const chosen_target;  // null until the library loads
extern const std::array<VectorFamily, kHighwayDispatchSlots> family_by_dispatch_index;
VectorFamily highway_family_slow();  // dispatches once, which chooses
}  // namespace detail

// The family of the target Highway's f32 dispatch runs on now. Read on every
// call, so a target forced at any time is followed: Highway's chosen-target
// mask read inline (an atomic load, a bit scan, a table). The quantization
// encoders ask once per span, and a weight span can be one code: a
// dynamic-dispatch call cost about 30 instructions a call there, and the fp8
// decoder's 64-code rows 12% (callgrind).
inline VectorFamily highway_family() {
  const size_t index = detail::chosen_target ? detail::chosen_target->GetIndex() : 0;
  if (index == 0) [[unlikely]]
    return detail::highway_family_slow();
  return detail::family_by_dispatch_index[index];
}

// Whether hand-written SIMD code of `family` may run now: the Highway
// dispatch has not been forced below it. (Whether the CPU has the
// instructions is the CPU feature table's question, cpu_features.h.)
inline bool family_allowed(VectorFamily family) {
  return static_cast<int>(family) <= static_cast<int>(highway_family());
}

// One registered kernel, as the listings and the tests see it.
struct MicrokernelInfo {
  ComputeType type = ComputeType::kF32;
  std::string target;  // "AVX3", "AVX512_BF16", "AVX512_VNNI", "SCALAR", ...
  VectorFamily family = VectorFamily::kPortable;
  int mr = 0, nr = 0;
  bool runs_here = false;  // compiled in and the CPU has its features
};

// Every kernel registered for `type`, fastest first, whether or not it runs
// here (tests: a registered kernel this CPU lacks must be refused).
std::vector<MicrokernelInfo> registered_microkernels(ComputeType type);

// The names of the kernels of `type` this CPU can run, fastest first (the
// portable one last). For kF32 these are the Highway targets compiled in and
// supported by the CPU (read when the library loads, so a forced target does
// not shorten the list).
std::vector<std::string> microkernel_names(ComputeType type);

// The name of the kernel `type` runs on now: the forced one, else the
// fastest whose family the Highway dispatch allows now. "WIDEN" for bf16
// when no bf16 dot kernel is chosen (bf16 then widens to f32).
std::string selected_microkernel(ComputeType type);

// Its family (kPortable for "WIDEN": the f32 kernel's family then applies).
VectorFamily selected_family(ComputeType type);

// Forces `type` onto the kernel named `target`; "" or "auto" lifts the
// forcing. For kBf16Dot, "WIDEN" forces the widening path. For kF32 this
// restricts Highway's targets to that one (hwy::SetSupportedTargetsForTest),
// which moves every compute type's automatic choice with it. Returns false
// and changes nothing when `target` is not registered or cannot run here.
bool force_microkernel(ComputeType type, const std::string& target);

// ---- Typed views, for the drivers, benchmarks and tests
// ---------------------- (select_microkernel(), the f32 one, is Highway's
// dispatch: microkernel.h.)

// The bf16 dot kernels this CPU runs, fastest first (the scalar twin last).
const std::vector<Bf16Microkernel>& bf16_microkernels();
// The kernel bf16 x bf16 passes run on, or null: they then widen bf16 to f32
// and run the f32 microkernel. Unforced: the first SIMD kernel, fastest
// first (AMX_BF16, AVX512_BF16), that may run and measured clearly faster
// than the f32 microkernel on this CPU (bf16_dot_choice.h; measured on the
// first call). Null when forced ("WIDEN"), when no SIMD bf16 kernel may run
// (none here, or Highway forced below AVX3), or when none measured faster;
// the scalar twin runs only when forced.
const Bf16Microkernel* select_bf16_microkernel();
// The fastest SIMD kernel the automatic choice measures (null: none may run
// here), chosen or not.
const Bf16Microkernel* bf16_dot_candidate();
bool force_bf16_microkernel(const std::string& target);  // force_microkernel(kBf16Dot, ...)

// The int8 dot kernels this CPU runs, fastest first (the scalar one last).
const std::vector<Int8Microkernel>& int8_microkernels();
// The one that runs (never null: the scalar kernel is the last resort).
const Int8Microkernel& select_int8_microkernel();
bool force_int8_microkernel(const std::string& target);  // force_microkernel(kInt8Dot, ...)

}  // namespace raggemm::kernels
