// What a public call's options put into a spec, written once for the plain
// ops (ops/gmm.cc) and the recipe passes (ops/quant_gmm.cc).
#pragma once

#include "backends/gmm_spec.h"
#include "ops/validate.h"
#include "raggemm/gmm.h"

namespace raggemm::ops {

CallSettings settings_of(const GmmOptions& o);
CallSettings settings_of(const TgmmOptions& o);

// The validated spec of a gmm call (fwd, or dlhs with transpose_rhs: pass,
// operands, groups, output stage, accumulate, threads) and of a tgmm call
// (drhs, `rhs` is dout). spec.out is left for the caller.
backends::GmmSpec validated_spec(const backends::GmmOperand& lhs, const backends::GmmOperand& rhs,
                                 const TensorView& group_sizes, const GmmOptions& o);
backends::GmmSpec validated_spec(const backends::GmmOperand& lhs, const backends::GmmOperand& dout,
                                 const TensorView& group_sizes, const TgmmOptions& o);

// Refuses accumulate for a function that allocates its output; `caller`
// names it (its _into sibling is the one that accumulates).
void refuse_accumulate(bool accumulate, const std::string& caller);

// Runs a validated spec into a new tensor of the settings' out_dtype, for
// `caller` (refusing accumulate after every other check).
Tensor run_into_new(backends::GmmSpec spec, const CallSettings& settings,
                    const std::string& caller);

}  // namespace raggemm::ops
