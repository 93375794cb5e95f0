// Every command that writes a .npy, when the write itself fails after all
// inputs were accepted: one "error:" line naming the output flag and path,
// exit status 2, nothing on stdout, and no file left behind (neither the
// output nor the temporary file the atomic writer had already created).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_harness.h"
#include "raggemm/npy.h"

namespace raggemm::testing {
namespace {

// The file size limit the command runs under: 1 block (512 bytes under dash,
// 1024 under bash), so the temporary file is created but writing the output
// fails (EFBIG; SIGXFSZ is ignored so the write returns an error instead of
// killing the process). The one-line error still fits on stderr.
const char kSmallFileLimit[] = "trap '' XFSZ && ulimit -f 1";

struct WriteCase {
  std::string name;
  std::vector<std::string> args;
  std::string shell_setup;
  std::string argument;  // the flag the error line must name
  std::string path;      // and its value
};

std::ostream& operator<<(std::ostream& out, const WriteCase& c) { return out << c.name; }

Tensor filled(DType dtype, Shape shape, float value) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kF32) t.as<float>()[i] = value;
    if (dtype == DType::kI32) t.as<int32_t>()[i] = static_cast<int32_t>(value);
    if (dtype == DType::kU8) t.as<uint8_t>()[i] = static_cast<uint8_t>(value);
  }
  return t;
}

// Inputs whose outputs are all over 2 KiB: gmm [64,32], tgmm [2,32,32],
// dequantize [128,64], quantize codes [128,64].
void write_fixtures(const TempDir& dir) {
  write_npy(dir.file("l.npy"), filled(DType::kF32, {64, 32}, 1));
  write_npy(dir.file("r.npy"), filled(DType::kF32, {2, 32, 32}, 1));
  write_npy(dir.file("d.npy"), filled(DType::kF32, {64, 32}, 1));
  write_npy(dir.file("s.npy"), filled(DType::kI32, {2}, 32));
  write_npy(dir.file("x.npy"), filled(DType::kF32, {128, 64}, 1));
  write_npy(dir.file("codes.npy"), filled(DType::kU8, {128, 64}, 56));
  write_npy(dir.file("scales.npy"), filled(DType::kF32, {128, 1}, 1));
}

std::vector<std::string> gmm(const std::string& out) {
  return {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out", out};
}
std::vector<std::string> tgmm(const std::string& out) {
  return {"tgmm", "--lhs", "l.npy", "--dout", "d.npy", "--group-sizes", "s.npy", "--out", out};
}
std::vector<std::string> quantize(const std::string& out) {
  return {"quantize", "--in",   "x.npy",    "--out",         out,        "--scales",
          "q.npy",    "--type", "fp8_e4m3", "--granularity", "channel:0"};
}
std::vector<std::string> dequantize(const std::string& out) {
  return {"dequantize", "--in",     "codes.npy", "--scales", "scales.npy",
          "--type",     "fp8_e4m3", "--out",     out};
}

std::set<std::string> listing(const TempDir& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

class CliWriteFailureTest : public ::testing::TestWithParam<WriteCase> {};

TEST_P(CliWriteFailureTest, OneLineNamingOutputFlagNoFileLeft) {
  const WriteCase& c = GetParam();
  TempDir dir;
  write_fixtures(dir);
  const std::set<std::string> before = listing(dir);
  CliResult result = run_cli(dir, c.args, c.shell_setup);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  ASSERT_FALSE(result.err.empty());
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_EQ(result.err.rfind("error: " + c.argument + "=" + c.path + ": ", 0), 0u) << result.err;
  EXPECT_EQ(listing(dir), before) << "a file was left behind";
}

// /proc/self exists as a folder (so the up-front path check passes), but no
// file can be created in it: the temporary file itself fails.
INSTANTIATE_TEST_SUITE_P(
    Cases, CliWriteFailureTest,
    ::testing::Values(
        WriteCase{"gmm_write_fails", gmm("o.npy"), kSmallFileLimit, "--out", "o.npy"},
        WriteCase{"gmm_transposed_write_fails",
                  {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out",
                   "o.npy", "--transpose-rhs"},
                  kSmallFileLimit,
                  "--out",
                  "o.npy"},
        WriteCase{"tgmm_write_fails", tgmm("o.npy"), kSmallFileLimit, "--out", "o.npy"},
        WriteCase{"quantize_codes_write_fails", quantize("o.npy"), kSmallFileLimit, "--out",
                  "o.npy"},
        WriteCase{"dequantize_write_fails", dequantize("o.npy"), kSmallFileLimit, "--out", "o.npy"},
        WriteCase{"gmm_cannot_create", gmm("/proc/self/o.npy"), "", "--out", "/proc/self/o.npy"},
        WriteCase{"tgmm_cannot_create", tgmm("/proc/self/o.npy"), "", "--out", "/proc/self/o.npy"}),
    [](const ::testing::TestParamInfo<WriteCase>& info) { return info.param.name; });

}  // namespace
}  // namespace raggemm::testing
