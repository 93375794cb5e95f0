// Replays every input the fuzzer kept (tests/fuzz/corpus/npy: seeds, crashers
// fixed since, and a minimized coverage set) through parse_npy. Each must
// parse or throw raggemm::Error; in the ASan build an over-read or leak on any
// of them fails the suite, so a fixed crasher can never come back unnoticed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/npy.h"

namespace raggemm {
namespace {

namespace fs = std::filesystem;

TEST(NpyCorpusTest, EveryCorpusFileParsesOrThrowsError) {
  fs::path corpus = fs::path(RAGGEMM_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "npy";
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(corpus)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u) << "the corpus at " << corpus << " is missing";

  int parsed = 0, rejected = 0;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    std::ifstream in(file, std::ios::binary);
    // An exactly-sized heap buffer, so ASan catches a read one byte past it.
    std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
    bytes.shrink_to_fit();
    try {
      Tensor tensor = parse_npy(bytes.data(), bytes.size(), "--corpus");
      EXPECT_LE(tensor.nbytes(), bytes.size()) << "never more than the payload present";
      ++parsed;
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "--corpus");
      ++rejected;
    }
  }
  // The seeds include both kinds; a parser that rejects (or accepts)
  // everything would pass the loop above but not this.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

TEST(NpyCorpusTest, SeedsParseAsTheirNamesSay) {
  struct Case {
    const char* file;
    bool valid;
  };
  const Case cases[] = {
      {"seed_f32_2x3.npy", true},      {"seed_f16_4.npy", true},
      {"seed_i32_scalar.npy", true},   {"seed_i64_1x1x2.npy", true},
      {"seed_i1_0x5.npy", true},       {"seed_u1_2x1x1x2.npy", true},
      {"seed_v2_reordered.npy", true}, {"seed_v3_double_quotes.npy", true},
      {"seed_unpadded.npy", true},     {"seed_fortran.npy", false},
      {"seed_big_endian.npy", false},  {"seed_truncated.npy", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    std::string path = std::string(RAGGEMM_SOURCE_DIR) + "/tests/fuzz/corpus/npy/" + c.file;
    if (c.valid) {
      EXPECT_NO_THROW(read_npy(path, "--lhs"));
    } else {
      EXPECT_THROW(read_npy(path, "--lhs"), Error);
    }
  }
}

}  // namespace
}  // namespace raggemm
