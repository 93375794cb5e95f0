// Every allocation the trainer makes from config numbers, checked before
// anything is allocated or written: no product overflows, no single tensor
// needs more than the machine's physical memory. (The whole run's memory
// estimate is a separate, later check.)
#pragma once

#include "raggemm/train.h"

namespace raggemm::train {

// Throws Error naming the keys of the first allocation that cannot fit.
void check_allocation_sizes(const TrainConfig& config, int64_t limit_bytes = -1);

}  // namespace raggemm::train
