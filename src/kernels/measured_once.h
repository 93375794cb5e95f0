// A measurement made once per process and key (a kernel's target name),
// for the choices the kernels measure instead of assume
// (bf16_dot_choice.h, b_packing_choice.h).
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace raggemm::kernels {

// The value measure() gave the first time `key` was asked about; later
// calls, from any thread, return the same one. Entries are never removed,
// so the references stay valid. One cache per Value type and Tag.
template <class Value, class Tag, class Measure>
const Value& measured_once(const std::string& key, Measure measure) {
  static std::mutex mutex;
  static std::map<std::string, Value> values;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = values.find(key);
  if (it == values.end()) it = values.emplace(key, measure()).first;
  return it->second;
}

}  // namespace raggemm::kernels
