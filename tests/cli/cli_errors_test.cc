// Every way to hand `raggemm gmm`, `raggemm tgmm` and `raggemm bench` bad
// input, and every command that writes a .npy failing to write it: each must
// print exactly one line, starting with "error:", that names the argument and
// the offending value; exit with status 2; print nothing on stdout; and leave
// no output file (nor a temporary one) behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_harness.h"
#include "raggemm/npy.h"

namespace raggemm::testing {
namespace {

// An .npy image with a hand-written header, for what our writer cannot
// produce (float64, Fortran order).
std::string raw_npy(const std::string& descr, bool fortran, const std::string& shape,
                    size_t payload_bytes) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " +
                       (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string image = "\x93NUMPY";
  image += '\x01';
  image += '\x00';
  image += static_cast<char>(header.size() & 0xff);
  image += static_cast<char>(header.size() >> 8);
  return image + header + std::string(payload_bytes, '\0');
}

template <class T>
Tensor filled(DType dtype, Shape shape, const std::vector<T>& values = {}) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.as<T>()[i] = values[i];
  return t;
}

// The files every case may use; valid ones are l (lhs [6,4]), r (rhs
// [3,4,5]), rt (transposed rhs [3,5,4]), d (dout [6,5]), s (sizes [2,0,3]).
void write_fixtures(const TempDir& dir) {
  auto save = [&](const std::string& name, const Tensor& t) { write_npy(dir.file(name), t); };
  save("l.npy", filled<float>(DType::kF32, {6, 4}, {1, 2, 3}));
  save("r.npy", filled<float>(DType::kF32, {3, 4, 5}, {1, 2, 3}));
  save("rt.npy", filled<float>(DType::kF32, {3, 5, 4}, {1, 2, 3}));
  save("d.npy", filled<float>(DType::kF32, {6, 5}, {1, 2, 3}));
  save("s.npy", filled<int32_t>(DType::kI32, {3}, {2, 0, 3}));
  save("l_i32.npy", filled<int32_t>(DType::kI32, {6, 4}));
  save("l_rank3.npy", filled<float>(DType::kF32, {1, 6, 4}));
  save("r_rank2.npy", filled<float>(DType::kF32, {4, 5}));
  save("r_k3.npy", filled<float>(DType::kF32, {3, 3, 5}));
  save("r_g2.npy", filled<float>(DType::kF32, {2, 4, 5}));
  save("d_rows5.npy", filled<float>(DType::kF32, {5, 5}));
  save("d_rank1.npy", filled<float>(DType::kF32, {6}));
  save("d_f16.npy", filled<uint16_t>(DType::kF16, {6, 5}));
  save("s_neg.npy", filled<int32_t>(DType::kI32, {3}, {2, -1, 3}));
  save("s_neg64.npy", filled<int64_t>(DType::kI64, {3}, {2, -7, 3}));
  save("s_big.npy", filled<int64_t>(DType::kI64, {3}, {2, int64_t{1} << 31, 0}));
  save("s_huge.npy", filled<int64_t>(DType::kI64, {2}, {INT64_MAX, INT64_MAX}));
  save("s_sum.npy", filled<int32_t>(DType::kI32, {3}, {4, 3, 0}));
  save("s_f32.npy", filled<float>(DType::kF32, {3}, {2, 0, 3}));
  save("s_u8.npy", filled<uint8_t>(DType::kU8, {3}, {2, 0, 3}));
  save("s_2d.npy", filled<int32_t>(DType::kI32, {1, 3}, {2, 0, 3}));
  save("s_none.npy", filled<int32_t>(DType::kI32, {0}));
  write_text(dir.file("l_f64.npy"), raw_npy("<f8", false, "(6, 4)", 6 * 4 * 8));
  write_text(dir.file("l_fortran.npy"), raw_npy("<f4", true, "(6, 4)", 6 * 4 * 4));
  write_text(dir.file("l_trunc.npy"), read_text(dir.file("l.npy")).substr(0, 70));
  write_text(dir.file("l_text.npy"), "lhs,values\n1,2\n");
  write_text(dir.file("empty.npy"), "");
  std::filesystem::create_directory(dir.path() / "a_folder");
  // Valid inputs whose outputs are all over 2 KiB (see kSmallFileLimit):
  // gmm [64,32], tgmm [2,32,32], quantize codes [128,64], dequantize [128,64].
  auto constant = [](DType dtype, Shape shape, int value) {
    Tensor t(dtype, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dtype == DType::kF32) t.as<float>()[i] = static_cast<float>(value);
      if (dtype == DType::kI32) t.as<int32_t>()[i] = value;
      if (dtype == DType::kU8) t.as<uint8_t>()[i] = static_cast<uint8_t>(value);
    }
    return t;
  };
  save("big_l.npy", constant(DType::kF32, {64, 32}, 1));
  save("big_r.npy", constant(DType::kF32, {2, 32, 32}, 1));
  save("big_d.npy", constant(DType::kF32, {64, 32}, 1));
  save("big_s.npy", constant(DType::kI32, {2}, 32));
  save("big_x.npy", constant(DType::kF32, {128, 64}, 1));
  save("big_codes.npy", constant(DType::kU8, {128, 64}, 56));
  save("big_scales.npy", constant(DType::kF32, {128, 1}, 1));
}

// Runs the command under a file size limit of one block (512 bytes under
// dash, 1024 under bash): the atomic writer creates its temporary file but
// writing the output fails (EFBIG; SIGXFSZ is ignored so that the write
// returns an error instead of killing the process). The one error line still
// fits on stderr.
const char kSmallFileLimit[] = "trap '' XFSZ && ulimit -f 1";

struct ErrorCase {
  std::string name;
  std::vector<std::string> args;
  std::string argument;  // must appear in the error line
  std::string value;     // must appear too ("" when the argument is all)
  std::string shell_setup = "";  // run first in the same shell (see run_cli)
};

std::ostream& operator<<(std::ostream& out, const ErrorCase& c) { return out << c.name; }

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// Valid commands, to be spoiled one argument at a time.
std::vector<std::string> gmm(const std::string& lhs = "l.npy", const std::string& rhs = "r.npy",
                             const std::string& sizes = "s.npy") {
  return {"gmm", "--lhs", lhs, "--rhs", rhs, "--group-sizes", sizes, "--out", "o.npy"};
}
std::vector<std::string> tgmm(const std::string& lhs = "l.npy", const std::string& dout = "d.npy",
                              const std::string& sizes = "s.npy") {
  return {"tgmm", "--lhs", lhs, "--dout", dout, "--group-sizes", sizes, "--out", "o.npy"};
}
// A valid bench command with some flags replaced (or added): each pair is
// (flag, value), passed as "flag=value", or the bare flag when value is "".
std::vector<std::string> bench(const std::vector<std::pair<std::string, std::string>>& changes) {
  std::vector<std::pair<std::string, std::string>> flags = {
      {"--m", "8"}, {"--k", "4"}, {"--n", "4"}, {"--groups", "2"}, {"--reps", "1"},
      {"--threads", "1"}};
  for (const auto& change : changes) {
    auto same = std::find_if(flags.begin(), flags.end(),
                             [&](const auto& flag) { return flag.first == change.first; });
    if (same != flags.end()) {
      same->second = change.second;
    } else {
      flags.push_back(change);
    }
  }
  std::vector<std::string> args = {"bench", "gmm"};
  for (const auto& [flag, value] : flags) args.push_back(value.empty() ? flag : flag + "=" + value);
  return args;
}

std::set<std::string> listing(const TempDir& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

class CliErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(CliErrorTest, OneLineNamingArgumentExitTwoNoOutput) {
  const ErrorCase& c = GetParam();
  TempDir dir;
  write_fixtures(dir);
  const std::set<std::string> before = listing(dir);
  CliResult result = run_cli(dir, c.args, c.shell_setup);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  ASSERT_FALSE(result.err.empty());
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_EQ(result.err.back(), '\n') << result.err;
  EXPECT_EQ(result.err.rfind("error:", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(c.argument), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(c.value), std::string::npos) << result.err;
  EXPECT_EQ(listing(dir), before) << "a file was left behind";
}

INSTANTIATE_TEST_SUITE_P(
    Gmm, CliErrorTest,
    ::testing::Values(
        // Flags: missing, unknown, repeated, without value, stray words.
        ErrorCase{"missing_lhs_flag", {"gmm", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out", "o.npy"}, "--lhs", ""},
        ErrorCase{"missing_rhs_flag", {"gmm", "--lhs", "l.npy", "--group-sizes", "s.npy", "--out", "o.npy"}, "--rhs", ""},
        ErrorCase{"missing_sizes_flag", {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--out", "o.npy"}, "--group-sizes", ""},
        ErrorCase{"missing_out_flag", {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy"}, "--out", ""},
        ErrorCase{"unknown_flag", with(gmm(), {"--bogus"}), "--bogus", ""},
        ErrorCase{"unknown_flag_with_value", with(gmm(), {"--tile", "1,1,1"}), "--tile", ""},
        ErrorCase{"stray_word", with(gmm(), {"extra"}), "extra", ""},
        ErrorCase{"repeated_flag", with(gmm(), {"--lhs", "l.npy"}), "--lhs", ""},
        ErrorCase{"flag_without_value", with(gmm(), {"--threads"}), "--threads", ""},
        // Input files.
        ErrorCase{"lhs_missing_file", gmm("nope.npy"), "--lhs", "nope.npy"},
        ErrorCase{"lhs_is_folder", gmm("a_folder"), "--lhs", "a_folder"},
        ErrorCase{"lhs_empty_file", gmm("empty.npy"), "--lhs", "empty.npy"},
        ErrorCase{"lhs_truncated", gmm("l_trunc.npy"), "--lhs", "l_trunc.npy"},
        ErrorCase{"lhs_not_npy", gmm("l_text.npy"), "--lhs", "l_text.npy"},
        ErrorCase{"lhs_fortran_order", gmm("l_fortran.npy"), "--lhs", "l_fortran.npy"},
        ErrorCase{"lhs_float64", gmm("l_f64.npy"), "--lhs", "l_f64.npy"},
        ErrorCase{"lhs_int32", gmm("l_i32.npy"), "--lhs", "l_i32.npy"},
        ErrorCase{"lhs_rank3", gmm("l_rank3.npy"), "--lhs", "l_rank3.npy"},
        ErrorCase{"rhs_missing_file", gmm("l.npy", "nope.npy"), "--rhs", "nope.npy"},
        ErrorCase{"rhs_rank2", gmm("l.npy", "r_rank2.npy"), "--rhs", "r_rank2.npy"},
        ErrorCase{"rhs_k_mismatch", gmm("l.npy", "r_k3.npy"), "--rhs", "r_k3.npy"},
        ErrorCase{"rhs_needs_transpose", with(gmm(), {"--transpose-rhs"}), "--rhs", "r.npy"},
        ErrorCase{"rhs_transposed_without_flag", gmm("l.npy", "rt.npy"), "--rhs", "rt.npy"},
        ErrorCase{"rhs_group_count", gmm("l.npy", "r_g2.npy"), "--group-sizes", "s.npy"},
        // Group sizes.
        ErrorCase{"sizes_missing_file", gmm("l.npy", "r.npy", "nope.npy"), "--group-sizes", "nope.npy"},
        ErrorCase{"sizes_negative_i32", gmm("l.npy", "r.npy", "s_neg.npy"), "--group-sizes", "-1"},
        ErrorCase{"sizes_negative_i64", gmm("l.npy", "r.npy", "s_neg64.npy"), "--group-sizes", "-7"},
        ErrorCase{"sizes_overflow_int32", gmm("l.npy", "r.npy", "s_big.npy"), "--group-sizes", "2147483648"},
        ErrorCase{"sizes_overflow_int64_sum", gmm("l.npy", "r.npy", "s_huge.npy"), "--group-sizes", "s_huge.npy"},
        ErrorCase{"sizes_sum_over_m", gmm("l.npy", "r.npy", "s_sum.npy"), "--group-sizes", "s_sum.npy"},
        ErrorCase{"sizes_float32", gmm("l.npy", "r.npy", "s_f32.npy"), "--group-sizes", "s_f32.npy"},
        ErrorCase{"sizes_uint8", gmm("l.npy", "r.npy", "s_u8.npy"), "--group-sizes", "s_u8.npy"},
        ErrorCase{"sizes_rank2", gmm("l.npy", "r.npy", "s_2d.npy"), "--group-sizes", "s_2d.npy"},
        ErrorCase{"sizes_no_groups", gmm("l.npy", "r.npy", "s_none.npy"), "--group-sizes", "s_none.npy"},
        // Kernel flags.
        ErrorCase{"tiles_zero", with(gmm(), {"--tiles", "0,1,1"}), "--tiles", "0,1,1"},
        ErrorCase{"tiles_negative", with(gmm(), {"--tiles", "-3,1,1"}), "--tiles", "-3,1,1"},
        ErrorCase{"tiles_negative_alone", with(gmm(), {"--tiles=-3"}), "--tiles", "-3"},
        ErrorCase{"tiles_word", with(gmm(), {"--tiles", "abc"}), "--tiles", "abc"},
        ErrorCase{"tiles_two", with(gmm(), {"--tiles", "1,2"}), "--tiles", "1,2"},
        ErrorCase{"tiles_four", with(gmm(), {"--tiles", "1,2,3,4"}), "--tiles", "1,2,3,4"},
        ErrorCase{"tiles_fraction", with(gmm(), {"--tiles", "1.5,2,2"}), "--tiles", "1.5,2,2"},
        ErrorCase{"tiles_trailing_comma", with(gmm(), {"--tiles", "1,2,3,"}), "--tiles", "1,2,3,"},
        ErrorCase{"tiles_empty", with(gmm(), {"--tiles", ""}), "--tiles", ""},
        ErrorCase{"tiles_overflow", with(gmm(), {"--tiles", "99999999999999999999,1,1"}), "--tiles", "99999999999999999999"},
        ErrorCase{"kernel_unknown", with(gmm(), {"--kernel", "v3"}), "--kernel", "v3"},
        ErrorCase{"dtype_f16", with(gmm(), {"--dtype", "f16"}), "--dtype", "f16"},
        ErrorCase{"dtype_word", with(gmm(), {"--dtype", "float"}), "--dtype", "float"},
        ErrorCase{"threads_zero", with(gmm(), {"--threads", "0"}), "--threads", "0"},
        ErrorCase{"threads_negative", with(gmm(), {"--threads=-2"}), "--threads", "-2"},
        ErrorCase{"threads_word", with(gmm(), {"--threads", "two"}), "--threads", "two"},
        ErrorCase{"threads_too_many", with(gmm(), {"--threads", "100000"}), "--threads", "100000"},
        ErrorCase{"buffers_zero", with(gmm(), {"--buffers", "0"}), "--buffers", "0"},
        ErrorCase{"buffers_five", with(gmm(), {"--buffers", "5"}), "--buffers", "5"},
        ErrorCase{"buffers_word", with(gmm(), {"--buffers", "x"}), "--buffers", "x"},
        // The recipe is parsed once, at the flag (the config's fp8_full is not a --quant value).
        ErrorCase{"quant_config_spelling", with(gmm(), {"--quant", "fp8_full"}), "--quant=fp8_full", "unknown quantization recipe (expected fp8 or int8)"},
        ErrorCase{"quant_storage_name", with(gmm(), {"--quant", "e4m3"}), "--quant=e4m3", "expected fp8 or int8"},
        // Output path.
        ErrorCase{"out_folder_missing", {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out", "no_such_dir/o.npy"}, "--out", "no_such_dir/o.npy"},
        ErrorCase{"out_is_folder", {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out", "a_folder"}, "--out", "a_folder"},
        ErrorCase{"out_empty", {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out", ""}, "--out", ""}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Tgmm, CliErrorTest,
    ::testing::Values(
        ErrorCase{"missing_dout_flag", {"tgmm", "--lhs", "l.npy", "--group-sizes", "s.npy", "--out", "o.npy"}, "--dout", ""},
        ErrorCase{"rhs_flag_is_unknown", with(tgmm(), {"--rhs", "r.npy"}), "--rhs", ""},
        ErrorCase{"transpose_flag_is_unknown", with(tgmm(), {"--transpose-rhs"}), "--transpose-rhs", ""},
        ErrorCase{"lhs_missing_file", tgmm("nope.npy"), "--lhs", "nope.npy"},
        ErrorCase{"lhs_int32", tgmm("l_i32.npy"), "--lhs", "l_i32.npy"},
        ErrorCase{"dout_missing_file", tgmm("l.npy", "nope.npy"), "--dout", "nope.npy"},
        ErrorCase{"dout_rows_mismatch", tgmm("l.npy", "d_rows5.npy"), "--dout", "d_rows5.npy"},
        ErrorCase{"dout_rank1", tgmm("l.npy", "d_rank1.npy"), "--dout", "d_rank1.npy"},
        ErrorCase{"dout_float16", tgmm("l.npy", "d_f16.npy"), "--dout", "d_f16.npy"},
        ErrorCase{"dout_truncated", tgmm("l.npy", "l_trunc.npy"), "--dout", "l_trunc.npy"},
        ErrorCase{"sizes_negative", tgmm("l.npy", "d.npy", "s_neg.npy"), "--group-sizes", "-1"},
        ErrorCase{"sizes_overflow_int32", tgmm("l.npy", "d.npy", "s_big.npy"), "--group-sizes", "2147483648"},
        ErrorCase{"sizes_sum_over_m", tgmm("l.npy", "d.npy", "s_sum.npy"), "--group-sizes", "s_sum.npy"},
        ErrorCase{"tiles_zero", with(tgmm(), {"--tiles", "4,0,4"}), "--tiles", "4,0,4"},
        ErrorCase{"tiles_word", with(tgmm(), {"--tiles", "abc"}), "--tiles", "abc"},
        ErrorCase{"kernel_unknown", with(tgmm(), {"--kernel", "v0"}), "--kernel", "v0"},
        ErrorCase{"dtype_unknown", with(tgmm(), {"--dtype", "fp8_e4m3"}), "--dtype", "fp8_e4m3"},
        ErrorCase{"buffers_five", with(tgmm(), {"--buffers", "5"}), "--buffers", "5"},
        ErrorCase{"quant_unknown", with(tgmm(), {"--quant", "int4"}), "--quant=int4", "expected fp8 or int8"},
        ErrorCase{"out_folder_missing", {"tgmm", "--lhs", "l.npy", "--dout", "d.npy", "--group-sizes", "s.npy", "--out", "nowhere/o.npy"}, "--out", "nowhere/o.npy"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Bench, CliErrorTest,
    ::testing::Values(
        ErrorCase{"missing_op", {"bench", "--m", "8"}, "op", ""},
        ErrorCase{"unknown_op", {"bench", "dgmm"}, "op", "dgmm"},
        ErrorCase{"m_zero", bench({{"--m", "0"}}), "--m", "0"},
        ErrorCase{"k_word", bench({{"--k", "big"}}), "--k", "big"},
        ErrorCase{"n_negative", bench({{"--n", "-4"}}), "--n", "-4"},
        ErrorCase{"groups_zero", bench({{"--groups", "0"}}), "--groups", "0"},
        ErrorCase{"dist_unknown", bench({{"--dist", "normal"}}), "--dist", "normal"},
        ErrorCase{"dist_zipf_word", bench({{"--dist", "zipf:abc"}}), "--dist", "zipf:abc"},
        ErrorCase{"dist_zipf_negative", bench({{"--dist", "zipf:-1"}}), "--dist", "zipf:-1"},
        ErrorCase{"dist_empty_one", bench({{"--dist", "empty:1"}}), "--dist", "empty:1"},
        ErrorCase{"dist_empty_missing", bench({{"--dist", "empty:"}}), "--dist", "empty:"},
        ErrorCase{"dtype_f16", bench({{"--dtype", "f16"}}), "--dtype", "f16"},
        ErrorCase{"dtype_gradient_fp8", bench({{"--dtype", "fp8_e5m2"}}), "--dtype=fp8_e5m2", "expected f32, bf16, int8 or fp8_e4m3"},
        ErrorCase{"kernel_unknown", bench({{"--kernel", "v9"}}), "--kernel", "v9"},
        ErrorCase{"tiles_two", bench({{"--tiles", "1,2"}}), "--tiles", "1,2"},
        ErrorCase{"reps_zero", bench({{"--reps", "0"}}), "--reps", "0"},
        ErrorCase{"warmup_negative", bench({{"--warmup", "-1"}}), "--warmup", "-1"},
        ErrorCase{"buffers_zero", bench({{"--buffers", "0"}}), "--buffers", "0"},
        ErrorCase{"bf16_kernel_unknown", bench({{"--bf16-kernel", "AMX"}}), "--bf16-kernel", "AMX"},
        ErrorCase{"int8_kernel_unknown", bench({{"--int8-kernel", "NEON"}}), "--int8-kernel", "NEON"},
        ErrorCase{"unknown_flag", bench({{"--jsn", ""}}), "--jsn", ""}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

// Issue 16: the one tile limit under the flag's own name (item 7), and sizes
// from flags checked before allocating (item 3).
INSTANTIATE_TEST_SUITE_P(
    Hardening, CliErrorTest,
    ::testing::Values(
        ErrorCase{"gmm_tile_above_limit", with(gmm(), {"--tiles", "65537,8,8"}), "--tiles=65537,8,8", "65536"},
        ErrorCase{"gmm_tile_block_over_cap", with(gmm(), {"--tiles", "65536,65536,4"}), "--tiles=65536,65536,4", "67108864"},
        ErrorCase{"tgmm_tile_above_limit", with(tgmm(), {"--tiles", "8,8,70000"}), "--tiles=8,8,70000", "65536"},
        ErrorCase{"bench_tile_block_over_cap", bench({{"--tiles", "8,65536,65536"}}), "--tiles=8,65536,65536", "67108864"},
        ErrorCase{"bench_rhs_overflows", bench({{"--k", "16777216"}, {"--n", "16777216"}, {"--groups", "1048576"}}), "--groups,--k,--n=1048576,16777216,16777216", "overflows"},
        ErrorCase{"bench_lhs_above_memory", bench({{"--m", "2147483647"}, {"--k", "16777216"}}), "--m,--k=2147483647,16777216", "physical memory"},
        ErrorCase{"tune_overflows", {"tune", "--m", "2147483648", "--embed", "2147483648", "--mlp", "8", "--groups", "2", "--cache", "c.json"}, "--m,--embed=", "overflows"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

// All inputs valid; writing the output fails. /proc/self is a folder (so
// the up-front path check passes) where no file can be created.
INSTANTIATE_TEST_SUITE_P(
    WriteFails, CliErrorTest,
    ::testing::Values(
        ErrorCase{"gmm_write", gmm("big_l.npy", "big_r.npy", "big_s.npy"), "--out", "o.npy", kSmallFileLimit},
        ErrorCase{"dlhs_write", with(gmm("big_l.npy", "big_r.npy", "big_s.npy"), {"--transpose-rhs"}), "--out", "o.npy", kSmallFileLimit},
        ErrorCase{"tgmm_write", tgmm("big_l.npy", "big_d.npy", "big_s.npy"), "--out", "o.npy", kSmallFileLimit},
        ErrorCase{"quantize_codes_write", {"quantize", "--in", "big_x.npy", "--out", "o.npy", "--scales", "q.npy", "--type", "fp8_e4m3", "--granularity", "channel:0"}, "--out", "o.npy", kSmallFileLimit},
        ErrorCase{"dequantize_write", {"dequantize", "--in", "big_codes.npy", "--scales", "big_scales.npy", "--type", "fp8_e4m3", "--out", "o.npy"}, "--out", "o.npy", kSmallFileLimit},
        ErrorCase{"gmm_cannot_create", {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out", "/proc/self/o.npy"}, "--out", "/proc/self/o.npy"},
        ErrorCase{"tgmm_cannot_create", {"tgmm", "--lhs", "l.npy", "--dout", "d.npy", "--group-sizes", "s.npy", "--out", "/proc/self/o.npy"}, "--out", "/proc/self/o.npy"},
        // The codes could be written, the scales cannot: the codes must not be left behind.
        ErrorCase{"quantize_scales_cannot_create", {"quantize", "--in", "big_x.npy", "--out", "o.npy", "--scales", "/proc/self/q.npy", "--type", "fp8_e4m3", "--granularity", "channel:0"}, "--scales", "/proc/self/q.npy"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Dispatch, CliErrorTest,
    ::testing::Values(ErrorCase{"no_command", {}, "command", ""},
                      ErrorCase{"unknown_command", {"gmn"}, "command", "gmn"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

}  // namespace
}  // namespace raggemm::testing
