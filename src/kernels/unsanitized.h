// RAGGEMM_UNSANITIZED marks a machine probe's timed loop (the FMA chains of
// kernels/peak.cc, the read stream of kernels/bandwidth.cc) as exempt from
// AddressSanitizer and UBSan. Such a loop touches only its own registers or
// the buffer its caller allocated and sized, and it exists to measure the
// hardware: instrumented, the FMA accumulators live in memory and the probe
// measured 3.3 GFLOP/s instead of the machine's peak, so every
// `raggemm bench` in the sanitizer suite spent about 15 s in it (Sapphire
// Rapids-class Xeon, December 2026). The computed kernels stay instrumented.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define RAGGEMM_UNSANITIZED __attribute__((no_sanitize("address", "undefined")))
#else
#define RAGGEMM_UNSANITIZED
#endif
