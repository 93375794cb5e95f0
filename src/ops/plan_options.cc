// The ops' options from a resolved plan config (raggemm/gmm.h): the ops sit
// above the tuner that resolves configs, so the mapping lives here.
#include "raggemm/gmm.h"
#include "raggemm/plan.h"

namespace raggemm {

GmmOptions gmm_options(const ResolvedPassConfig& config, Pass pass) {
  GmmOptions options;
  options.transpose_rhs = pass == Pass::kGradLhs;
  options.tiles = config.tiles;
  options.kernel = config.kernel;
  options.input_buffer_count = config.input_buffer_count;
  return options;
}

TgmmOptions tgmm_options(const ResolvedPassConfig& config) {
  TgmmOptions options;
  options.tiles = config.tiles;
  options.kernel = config.kernel;
  options.input_buffer_count = config.input_buffer_count;
  return options;
}

}  // namespace raggemm
