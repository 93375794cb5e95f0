// libFuzzer target for the .npy parser: any byte string must either parse
// into a tensor whose size matches its header or throw raggemm::Error. A
// crash, a sanitizer report, a hang or an oversized allocation is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "raggemm/error.h"
#include "raggemm/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    raggemm::Tensor tensor = raggemm::parse_npy(data, size, "--fuzz");
    // A parsed tensor never holds more bytes than the image did.
    if (tensor.nbytes() > size) std::abort();
    // What parses must serialize and parse back to the same bytes.
    std::vector<uint8_t> again = raggemm::serialize_npy(tensor);
    raggemm::Tensor round_trip = raggemm::parse_npy(again.data(), again.size(), "--again");
    if (round_trip.shape() != tensor.shape() || round_trip.dtype() != tensor.dtype() ||
        (tensor.nbytes() && std::memcmp(round_trip.data(), tensor.data(), tensor.nbytes()) != 0)) {
      std::abort();
    }
  } catch (const raggemm::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
